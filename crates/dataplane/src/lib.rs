//! The data path: one arena of packet buffers, frames of handles moving through a
//! graph of small nodes, per-node counters, and the WireGuard nodes. It knows nothing
//! of sockets or threads: drivers fill buffers and drain output queues around it.
// One reviewed exception: reading the time-stamp counter (counters.rs).
#![deny(unsafe_code)]

pub mod arena;
pub mod counters;
pub mod graph;
pub mod nodes;
pub mod wg;

pub use arena::{Arena, FRAME_SIZE, HEADROOM, Handle, PacketMeta};
pub use counters::NodeCounters;
pub use graph::{FREE, Graph, HasArena, KEEP, Node, NodeId};
