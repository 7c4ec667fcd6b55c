//! The data path: one arena of packet buffers, frames of handles moving through a
//! graph of small nodes that declare their own drop reasons, a worker context the
//! nodes share, and the nodes of every plane. It knows nothing of sockets or
//! threads: drivers fill buffers and drain output queues around it.
//!
//! The modules form layers: none imports a module of a layer above its own, and
//! `make lint` fails on any ring:
//! - the core: `arena` (buffers, and where a receive starts in them), `counters`,
//!   `graph`, `outputs`, and `inflight` (frames at an asynchronous engine, whatever
//!   record resumes their packets);
//! - each plane's state, with no node or context in sight: IP (`fib`,
//!   `interfaces`, `neighbor`, `neighbor_share`, `ip_layer`, `reassembly`), L2
//!   (`l2`, `vxlan`), ESP (`esp`, `esp_handoff`), WireGuard (`wg_follow`,
//!   `wg_limits`, `seal_ledger`), OpenVPN (`ovpn`), the control threads' inboxes
//!   (`inbox`; the key exchange's is `ike`), the outer
//!   headers tunnels share (`outer_header`), a keyed hash for the tables
//!   (`keyed_hash`), and `resume` (how each crypto stage finishes a packet an
//!   engine gives back);
//! - `context`: all of that, one per worker;
//! - `nodes` (the crypto stages' shared shape is `nodes::aead`), and the work done
//!   around them: the late check (`late_check`) and the device's actions
//!   (`wg_actions`);
//! - the graphs: `wg` (host mode), `gateway`, `tunnel_graph` (ESP's or OpenVPN's nodes alone), `l2_graph`.
// Reviewed exceptions: reading the time-stamp counter (counters.rs) and the arena's
// raw memory (arena.rs) and lending it to asynchronous engines (nodes/parked.rs),
// memory that async engines and AF_XDP share with other parties.
#![deny(unsafe_code)]

pub mod arena;
pub mod context;
pub mod counters;
pub mod esp;
pub mod esp_handoff;
pub mod fib;
pub mod gateway;
pub mod graph;
pub mod ike;
pub mod inbox;
pub mod inflight;
pub mod interfaces;
pub mod ip_layer;
mod keyed_hash;
pub mod l2;
pub mod l2_graph;
mod late_check;
pub mod neighbor;
pub mod neighbor_share;
pub mod nodes;
mod outer_header;
pub mod outputs;
pub mod ovpn;
pub mod reassembly;
pub mod resume;
pub mod tunnel_graph;
pub use arena::rx_starts;
pub mod seal_ledger;
mod tally;
pub mod vxlan;
pub mod wg;
mod wg_actions;
pub mod wg_follow;
mod wg_limits;

pub use arena::{Arena, HEADROOM, Handle, IcmpReason, JUMBO_BUFFER, PacketMeta, STANDARD_BUFFER};
pub use context::{Context, OutputId};
pub use counters::{ErrorInfo, NodeCounters};
pub use graph::{FREE, Graph, HasArena, KEEP, Node, NodeId, NodeInfo, Rebind};
pub use rx_starts::RxStarts;
