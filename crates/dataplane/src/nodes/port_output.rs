//! `port-output`: Ethernet frames into the output queue of the port in their
//! metadata, for that port's driver.

use crate::arena::Handle;
use crate::context::Context;
use crate::counters::NodeCounters;
use crate::fib::PortId;
use crate::graph::KEEP;
use crate::nodes::PerPacket;

crate::node_errors! {
    /// Why port-output drops a frame.
    pub enum PortOutputError {
        NoPort => "no-port", "A frame for a port that is not configured.";
    }
}

pub struct PortOutput;

impl PortOutput {
    pub const NAME: &'static str = "port-output";
}

impl PerPacket for PortOutput {
    per_packet_node!(errors: PortOutputError, next: []);

    fn one(
        &mut self,
        cx: &mut Context,
        h: Handle,
        _: &mut NodeCounters,
    ) -> Result<u16, PortOutputError> {
        let port = PortId(cx.arena.meta(h).port);
        let queue = cx
            .ip
            .interfaces
            .get(port)
            .map(|p| p.output)
            .ok_or(PortOutputError::NoPort)?;
        cx.outputs.queue(queue).push(h);
        Ok(KEEP)
    }
}
