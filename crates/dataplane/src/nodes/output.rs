//! The graph's exits: packets leave for a driver's output queue.

use crate::arena::Handle;
use crate::context::{Context, OutputId};
use crate::counters::NodeCounters;
use crate::graph::{KEEP, Node, NodeInfo};

pub struct Output {
    info: NodeInfo,
    queue: OutputId,
}

impl Output {
    pub const TUN: &'static str = "tun-output";
    pub const UDP: &'static str = "udp-output";

    /// An exit named `name` into the context's output queue `queue`.
    pub fn new(name: &'static str, queue: OutputId) -> Output {
        Output {
            info: NodeInfo {
                name,
                next: &[],
                errors: &[],
            },
            queue,
        }
    }
}

impl Node<Context> for Output {
    fn info(&self) -> &NodeInfo {
        &self.info
    }

    fn process(
        &mut self,
        cx: &mut Context,
        packets: &[Handle],
        next: &mut [u16],
        _c: &mut NodeCounters,
    ) {
        cx.outputs.queue(self.queue).extend_from_slice(packets);
        next.fill(KEEP);
    }
}
