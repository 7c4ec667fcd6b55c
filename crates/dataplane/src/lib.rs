//! The data path: one arena of packet buffers, frames of handles moving through a
//! graph of small nodes that declare their own drop reasons, a worker context the
//! nodes share, and the WireGuard nodes. It knows nothing of sockets or threads:
//! drivers fill buffers and drain output queues around it.
// Reviewed exceptions: reading the time-stamp counter (counters.rs) and the arena's
// raw memory (arena.rs) and lending it to asynchronous engines (park_frame in
// inflight.rs), memory that async engines and AF_XDP share with other parties.
#![deny(unsafe_code)]

pub mod arena;
pub mod context;
pub mod counters;
pub mod esp;
pub mod esp_graph;
pub mod esp_handoff;
mod esp_selectors;
mod esp_spi_index;
pub mod fib;
pub mod gateway;
pub mod graph;
pub mod ike;
pub mod inflight;
pub mod interfaces;
pub mod ip_layer;
mod keyed_hash;
pub mod l2;
pub mod l2_graph;
pub mod neighbor;
pub mod neighbor_share;
pub mod nodes;
mod outer_header;
pub mod reassembly;
pub use arena::rx_starts;
pub mod seal_ledger;
pub mod vxlan;
pub mod wg;
mod wg_actions;
pub mod wg_follow;

pub use arena::{Arena, FRAME_SIZE, HEADROOM, Handle, IcmpReason, PacketMeta};
pub use context::{Context, OutputId};
pub use counters::{ErrorInfo, NodeCounters};
pub use graph::{FREE, Graph, HasArena, KEEP, Node, NodeId, NodeInfo, Rebind};
pub use rx_starts::RxStarts;
