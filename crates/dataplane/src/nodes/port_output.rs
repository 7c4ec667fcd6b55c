//! `port-output`: Ethernet frames into the output queue of the port in their
//! metadata, for that port's driver.

use crate::arena::Handle;
use crate::context::Context;
use crate::counters::NodeCounters;
use crate::fib::PortId;
use crate::graph::{FREE, KEEP, Node, NodeInfo};

crate::node_errors! {
    /// Why port-output drops a frame.
    pub enum PortOutputError {
        NoPort => "no-port", "A frame for a port that is not configured.";
    }
}

pub struct PortOutput;

impl PortOutput {
    pub const NAME: &'static str = "port-output";
    const INFO: NodeInfo = NodeInfo {
        name: Self::NAME,
        next: &[],
        errors: PortOutputError::TABLE,
    };
}

impl Node<Context> for PortOutput {
    fn info(&self) -> &NodeInfo {
        &Self::INFO
    }

    fn process(
        &mut self,
        cx: &mut Context,
        packets: &[Handle],
        next: &mut [u16],
        c: &mut NodeCounters,
    ) {
        for (i, &h) in packets.iter().enumerate() {
            let port = PortId(cx.arena.meta(h).port);
            next[i] = match cx.ip.interfaces.get(port).map(|p| p.output) {
                Some(queue) => {
                    cx.outputs.queue(queue).push(h);
                    KEEP
                }
                None => {
                    c.drop(PortOutputError::NoPort);
                    FREE
                }
            };
        }
    }
}
