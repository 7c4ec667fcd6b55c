//! linerate's benchmarks, behind `linerate bench`. Each prints a table, writes JSON
//! (and a chart where asked), and reports speed beside a baseline measured in the
//! same run: the graph beside its raw engines, ESP and L2 beside WireGuard.
//!
//! - `measure`: sizes, options, rows, the `Loopback` shape a tunnel's graph takes;
//!   `table`: how rows are printed and written.
//! - `driver` drives one worker's graph; `raw` measures its engines alone between
//!   the graph's slices.
//! - `wg_graph`, `esp_graph`, `ovpn_graph`, `l2_graph`: each tunnel's graph on loopback sessions,
//!   on as many workers as asked.
//! - `gateway_l2`, `gateway_esp`: two whole gateways in memory on one thread.
//! - `crypto_engines`: every engine alone, beside `openssl speed`.
//! - `traffic`: a packet generator and counting sink on AF_XDP, for a gateway
//!   between two interfaces.
//! - `command`: the front ends; `options`: their command line; `svg`: the charts.

pub mod command;
pub mod crypto_engines;
mod driver;
mod esp_graph;
mod gateway_esp;
mod gateway_l2;
mod l2_graph;
pub mod measure;
pub mod options;
mod ovpn_graph;
mod raw;
mod svg;
mod table;
pub mod traffic;
mod wg_graph;
