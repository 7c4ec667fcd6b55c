//! Gateway mode: `linerate gateway -c FILE`. The configuration (`gateway_config`)
//! becomes a gateway graph with its ports and routes and a WireGuard interface
//! (`start`); one worker moves frames between the ports' drivers (`ports`) and the
//! graph (`worker`); the control socket answers `linerate show` (`report`), the
//! WireGuard interface's UAPI socket answers `wg`, an optional listener serves
//! Prometheus (`metrics`), and SIGHUP applies what changed in the file (`reload`).

mod metrics;
mod ports;
mod reload;
mod report;
mod start;
mod worker;

pub use start::run;
