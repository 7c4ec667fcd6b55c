//! Gateway mode: `linerate gateway -c FILE`. The configuration (`config`)
//! becomes one gateway graph per worker with its ports and routes, and a WireGuard
//! interface (`start`). Every worker moves frames between its own queue of each
//! port (the `ports` crate) and its own graph (`lane`); the first owns the WireGuard device
//! and the control (`worker`), the others follow it (`follower`). The control socket
//! answers `linerate show` (`report`), the WireGuard interface's UAPI socket answers
//! `wg`, an optional listener serves Prometheus (`metrics`), and SIGHUP applies what
//! changed in the file (`reload`).

pub mod config;
mod esp_report;
mod follower;
mod ike;
mod lane;
mod metrics;
mod ovpn;
mod owner_step;
mod reload;
mod report;
mod settings;
mod start;
mod worker;

pub use start::run;
