//! A post node: finishes packets whose frame an asynchronous engine processed. The
//! node that parked them names a finishing function, the same one its synchronous
//! path calls, so both paths end alike; this node only fetches each packet's op
//! status and resume record (see `inflight`).

use crate::arena::Handle;
use crate::context::Context;
use crate::counters::{ErrorSlot, NodeCounters};
use crate::graph::{FREE, Node, NodeInfo};
use crate::inflight::Resume;
use crypto::OpStatus;

/// Finishes one packet: returns its next edge, or FREE after counting why.
pub type Finish = fn(&mut Context, Handle, OpStatus, Resume, &mut NodeCounters) -> u16;

pub struct Resumed {
    info: NodeInfo,
    finish: Finish,
    /// Counted for a packet that reaches the node without a record (a wiring bug).
    not_parked: ErrorSlot,
}

impl Resumed {
    /// A post node `info.name` that finishes with `finish` and counts `not_parked`
    /// (one of `info.errors`) for a packet no returned frame holds.
    pub const fn new(info: NodeInfo, finish: Finish, not_parked: ErrorSlot) -> Resumed {
        Resumed {
            info,
            finish,
            not_parked,
        }
    }
}

impl Node<Context> for Resumed {
    fn info(&self) -> &NodeInfo {
        &self.info
    }

    fn process(
        &mut self,
        cx: &mut Context,
        packets: &[Handle],
        next: &mut [u16],
        c: &mut NodeCounters,
    ) {
        for (i, &h) in packets.iter().enumerate() {
            next[i] = match cx.inflight.take(h) {
                Some((status, resume)) => (self.finish)(cx, h, status, resume, c),
                None => {
                    c.drop(self.not_parked);
                    FREE
                }
            };
        }
    }
}
