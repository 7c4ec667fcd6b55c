//! A worker's ports: each moves packets between one place outside the process and
//! the worker's graph, a batch at a time both ways: buffers taken from the graph's
//! arena to receive into, and the graph's output queue sent and given back. The
//! counters here are the port's own (what the driver saw); what the graph did with
//! the packets is counted on its nodes.
//!
//! - `Port`: a gateway's Ethernet port, one Linux interface taken over through
//!   AF_XDP or AF_PACKET, for any graph that implements [`PortGraph`].
//! - `TunPort` and `UdpPort`: host mode's TUN queue and UDP socket, for the host
//!   graph.
//! - `memory`: the port without an interface, for tests and benchmarks.
//!
//! AF_XDP works on the arena itself (it is the UMEM): the port lends the kernel free
//! buffers through the fill ring, a received frame's buffer becomes the packet's
//! (no copy), a sent packet's buffer goes to the TX ring and is freed when the
//! kernel gives it back on the completion ring. A worker on jumbo buffers is the
//! exception: its AF_XDP ports have page-sized memory of their own and copy frames,
//! which come in parts, between it and the arena (`xdp_parts.rs`). AF_PACKET copies
//! frames between its rings and arena buffers.
//!
//! This crate holds the `unsafe` code the daemons need for their ports:
//! registering memory with an AF_XDP socket (`xdp.rs`), and copying frames in and
//! out of a jumbo AF_XDP port's own memory (`xdp_parts.rs`). Everything above it,
//! the gateway's workers included, is safe code.

#![deny(unsafe_code)]

mod copied_starts;
pub mod memory;
mod packet;
mod port;
mod rx_buffers;
mod tun;
mod udp;
mod xdp;
mod xdp_parts;

pub use copied_starts::copied_rx_starts;
pub use port::{Port, PortCounters};
pub use tun::TunPort;
pub use udp::UdpPort;
pub use xdp::{XdpQueue, xdp_fill_target, xdp_own_memory};

use dataplane::fib::PortId;
use dataplane::gateway::GatewayGraph;
use dataplane::{Context, Handle, OutputId};

/// Frames one receive takes at most: a frame of the graph.
pub const RX_BATCH: usize = dataplane::arena::RX_BATCH;

/// The graph a port feeds and drains.
pub trait PortGraph {
    /// The worker's context: its arena and its output queues.
    fn context_mut(&mut self) -> &mut Context;
    /// Takes in frames received on `port` (their buffers are the graph's now).
    fn take_in(&mut self, port: PortId, frames: &[Handle]);
    /// The output queue of the frames the graph has for `port`.
    fn port_output(&self, port: PortId) -> Option<OutputId>;
}

impl PortGraph for GatewayGraph {
    fn context_mut(&mut self) -> &mut Context {
        GatewayGraph::context_mut(self)
    }

    fn take_in(&mut self, port: PortId, frames: &[Handle]) {
        GatewayGraph::from_port(self, port, frames)
    }

    fn port_output(&self, port: PortId) -> Option<OutputId> {
        GatewayGraph::port_output(self, port)
    }
}
