//! The shape of a node that decides each packet on its own (most nodes but the
//! crypto ones, which batch): `one` returns the packet's next edge (or KEEP), or the
//! reason it is dropped, which the graph counts and frees. Written once here; the
//! nodes write only their decision.

use crate::arena::Handle;
use crate::context::Context;
use crate::counters::{ErrorSlot, NodeCounters};
use crate::graph::{FREE, Node, NodeInfo};

/// Declares, inside a node's `impl PerPacket`, its drop reasons (its
/// `node_errors!` enum) and the nodes its edges lead to, in edge order; its name
/// is its `NAME`.
macro_rules! per_packet_node {
    (errors: $errors:ident, next: [$($next:expr),* $(,)?]) => {
        type Error = $errors;
        const INFO: $crate::graph::NodeInfo = $crate::graph::NodeInfo {
            name: Self::NAME,
            next: &[$($next),*],
            errors: $errors::TABLE,
        };
    };
}

pub trait PerPacket: Send + 'static {
    /// One of the node's declared reasons.
    type Error: Into<ErrorSlot>;
    const INFO: NodeInfo;
    /// Where packet `h` goes, or why it is dropped. `c` is for what is counted
    /// besides drops (packets consumed on purpose).
    fn one(
        &mut self,
        cx: &mut Context,
        h: Handle,
        c: &mut NodeCounters,
    ) -> Result<u16, Self::Error>;
}

impl<T: PerPacket> Node<Context> for T {
    fn info(&self) -> &NodeInfo {
        &T::INFO
    }

    fn process(
        &mut self,
        cx: &mut Context,
        packets: &[Handle],
        next: &mut [u16],
        c: &mut NodeCounters,
    ) {
        for (i, &h) in packets.iter().enumerate() {
            next[i] = match self.one(cx, h, c) {
                Ok(edge) => edge,
                Err(e) => {
                    c.drop(e);
                    FREE
                }
            };
        }
    }
}
