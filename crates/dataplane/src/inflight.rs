//! Frames out at an asynchronous engine, and what it takes to finish their packets
//! when they come back: all of it here, in one place.
//!
//! A node that hands a frame to an asynchronous engine parks its packets (next edge
//! KEEP), each with a [`Resume`] record. When the engine gives the frame back, every
//! packet gets its op's status beside its record (a table indexed by buffer) and goes
//! to the post node, which takes both and finishes the packet as the synchronous path
//! would. A frame that comes back other than as parked (another sequence number, a
//! different number of ops, or never, when the engine says nothing is in flight) is
//! counted, and each packet without a result gets [`OpStatus::Pending`], which its post
//! node counts as a drop: no packet is freed silently or left behind.

use crate::arena::Handle;
use crate::context::Context;
use crate::esp::{EspTunnelId, InboundSlot};
use crate::graph::KEEP;
use crypto::{AeadOp, Algorithm, OpStatus};
use std::collections::VecDeque;
use wireguard::{PeerId, RecvTicket};

/// An ICV an op wrote away from its place in the packet (ESP with ESN and a chained
/// op: the MAC covered bytes where the ICV goes), to move there: offsets in the
/// packet's buffer.
#[derive(Clone, Copy, Debug)]
pub struct MovedIcv {
    pub from: u16,
    pub to: u16,
    pub len: u8,
}

/// What a post node needs to finish one packet after an asynchronous engine.
#[derive(Clone, Copy, Debug)]
pub enum Resume {
    Encrypt {
        peer: PeerId,
        inner_len: usize,
        /// The framed packet's length on the wire, as the node set it.
        wire_len: usize,
        /// The session it is sealed on (`Keypair::serial`) and its counter: what
        /// the late check marks it with once sealed (see `seal_ledger`).
        serial: u64,
        counter: u64,
    },
    Decrypt {
        ticket: RecvTicket,
        counter: u64,
    },
    EspEncrypt {
        tunnel: EspTunnelId,
        icv: Option<MovedIcv>,
    },
    EspDecrypt {
        slot: InboundSlot,
        seq: u64,
    },
}

/// Hands a frame's ops to the asynchronous engine serving ChaCha20-Poly1305, if the
/// chosen engine is one: the packets (index in the frame, handle, how to resume) are
/// parked and their next edge is KEEP. Returns false, touching nothing, when the
/// engine is synchronous and the caller runs the ops itself.
pub(crate) fn park_frame(
    cx: &mut Context,
    ops: &[AeadOp],
    packets: impl Iterator<Item = (usize, Handle, Resume)>,
    next: &mut [u16],
) -> bool {
    let Some(engine) = cx.engines.async_for(Algorithm::ChaCha20Poly1305) else {
        return false;
    };
    let (mem, len) = cx.arena.lend();
    // SAFETY: every op covers its own packet's buffer; those packets are parked
    // (KEEP) and touched by no one until the frame returns, and the graph's run waits
    // for every frame before it returns, so the arena outlives them all.
    #[allow(unsafe_code)]
    let seq = unsafe { engine.submit(mem, len, ops.to_vec()) };
    cx.inflight.park(
        seq,
        packets.map(|(i, h, resume)| {
            next[i] = KEEP;
            (h, resume)
        }),
    );
    true
}

/// Waits for every frame out at the asynchronous engine and hands each packet to
/// `deliver`, for its post node. Frames come back in the order they left, so per-peer
/// packet order holds. Returns whether there was any.
pub(crate) fn resume_all(cx: &mut Context, mut deliver: impl FnMut(Handle, &Resume)) -> bool {
    if cx.inflight.is_empty() {
        return false;
    }
    let Some(engine) = cx.engines.async_for(Algorithm::ChaCha20Poly1305) else {
        // The engine is gone or changed: nobody holds the buffers any more.
        cx.inflight.abandon_all(&mut deliver);
        cx.arena.all_returned();
        return true;
    };
    while !cx.inflight.is_empty() {
        match engine.wait() {
            Some((seq, ops)) => {
                cx.arena.returned();
                cx.inflight.returned(seq, &ops, &mut deliver);
            }
            None => {
                // Nothing is in flight, so no one holds the buffers any more.
                cx.inflight.abandon_all(&mut deliver);
                cx.arena.all_returned();
            }
        }
    }
    true
}

/// A frame at the engine: its sequence number and its packets in op order.
struct Frame {
    seq: u64,
    packets: Vec<(Handle, Resume)>,
}

/// Frames that came back other than as they left.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InFlightCounters {
    /// Frames returned with a sequence number other than the oldest parked one.
    pub out_of_order: u64,
    /// Frames returned that no parked frame matches (their ops are ignored).
    pub unknown: u64,
    /// Frames whose op count differs from their packet count.
    pub wrong_length: u64,
    /// Frames the engine no longer had (it reported nothing in flight).
    pub lost: u64,
}

pub(crate) struct InFlight {
    frames: VecDeque<Frame>,
    /// Frame records to reuse, so that parking allocates only while warming up.
    spare: Vec<Frame>,
    /// Per buffer: the op's status and how to resume, from return to post node.
    back: Vec<Option<(OpStatus, Resume)>>,
    counters: InFlightCounters,
}

impl InFlight {
    pub(crate) fn new(buffers: usize) -> InFlight {
        InFlight {
            frames: VecDeque::new(),
            spare: Vec::new(),
            back: vec![None; buffers],
            counters: InFlightCounters::default(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    pub(crate) fn counters(&self) -> InFlightCounters {
        self.counters
    }

    /// Records a frame handed to the engine under `seq`, its packets in op order.
    pub(crate) fn park(&mut self, seq: u64, packets: impl Iterator<Item = (Handle, Resume)>) {
        let mut frame = self.spare.pop().unwrap_or(Frame {
            seq,
            packets: Vec::new(),
        });
        frame.seq = seq;
        frame.packets.clear();
        frame.packets.extend(packets);
        self.frames.push_back(frame);
    }

    /// Takes back the frame the engine returned as `seq` with `ops`, and hands each of
    /// its packets to `deliver` (with its record) for the post node. Returns false
    /// when no parked frame has that number.
    pub(crate) fn returned(
        &mut self,
        seq: u64,
        ops: &[AeadOp],
        mut deliver: impl FnMut(Handle, &Resume),
    ) -> bool {
        let Some(at) = self.frames.iter().position(|f| f.seq == seq) else {
            self.counters.unknown += 1;
            return false;
        };
        if at != 0 {
            self.counters.out_of_order += 1;
        }
        let frame = self.frames.remove(at).expect("found above");
        if ops.len() != frame.packets.len() {
            self.counters.wrong_length += 1;
        }
        for (i, &(h, resume)) in frame.packets.iter().enumerate() {
            let status = ops.get(i).map_or(OpStatus::Pending, |op| op.status);
            self.back[h as usize] = Some((status, resume));
            deliver(h, &resume);
        }
        self.spare.push(frame);
        true
    }

    /// Gives up on every parked frame (the engine has none in flight): each packet
    /// goes to its post node with [`OpStatus::Pending`]. Returns how many frames.
    pub(crate) fn abandon_all(&mut self, mut deliver: impl FnMut(Handle, &Resume)) -> usize {
        let n = self.frames.len();
        self.counters.lost += n as u64;
        while let Some(frame) = self.frames.pop_front() {
            for &(h, resume) in &frame.packets {
                self.back[h as usize] = Some((OpStatus::Pending, resume));
                deliver(h, &resume);
            }
            self.spare.push(frame);
        }
        n
    }

    /// The status and record of a packet back from the engine, once.
    pub(crate) fn take(&mut self, h: Handle) -> Option<(OpStatus, Resume)> {
        self.back.get_mut(h as usize)?.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crypto::{Direction, KeyHandle, Span};

    fn op(status: OpStatus) -> AeadOp {
        let mut op = AeadOp::in_place(
            Algorithm::ChaCha20Poly1305,
            KeyHandle {
                index: 0,
                generation: 0,
            },
            Direction::Encrypt,
            [0; 12],
            Span::EMPTY,
            Span::EMPTY,
        );
        op.status = status;
        op
    }

    fn enc(len: usize) -> Resume {
        Resume::Encrypt {
            peer: PeerId(0),
            inner_len: len,
            wire_len: len + 32,
            serial: 0,
            counter: 0,
        }
    }

    #[test]
    fn a_frame_comes_back_with_each_packets_status() {
        let mut f = InFlight::new(8);
        f.park(7, [(3, enc(1)), (5, enc(2))].into_iter());
        let mut got = Vec::new();
        assert!(
            f.returned(7, &[op(OpStatus::Ok), op(OpStatus::BadTag)], |h, _| got
                .push(h))
        );
        assert_eq!(got, [3, 5]);
        assert!(matches!(
            f.take(3),
            Some((OpStatus::Ok, Resume::Encrypt { inner_len: 1, .. }))
        ));
        assert!(matches!(f.take(5), Some((OpStatus::BadTag, _))));
        assert!(f.take(5).is_none(), "taken once");
        assert!(f.is_empty());
        assert_eq!(f.counters(), InFlightCounters::default());
    }

    #[test]
    fn missing_ops_leave_no_packet_behind_and_are_counted() {
        let mut f = InFlight::new(8);
        f.park(1, [(0, enc(1)), (1, enc(1)), (2, enc(1))].into_iter());
        let mut got = Vec::new();
        f.returned(1, &[op(OpStatus::Ok)], |h, _| got.push(h));
        assert_eq!(got, [0, 1, 2]);
        assert!(matches!(f.take(1), Some((OpStatus::Pending, _))));
        assert_eq!(f.counters().wrong_length, 1);
    }

    #[test]
    fn frames_out_of_order_or_unknown_are_counted() {
        let mut f = InFlight::new(8);
        f.park(1, [(0, enc(1))].into_iter());
        f.park(2, [(1, enc(1))].into_iter());
        assert!(f.returned(2, &[op(OpStatus::Ok)], |_, _| ()));
        assert!(!f.returned(9, &[op(OpStatus::Ok)], |_, _| ()));
        assert_eq!(f.counters().out_of_order, 1);
        assert_eq!(f.counters().unknown, 1);
        let mut got = Vec::new();
        assert_eq!(f.abandon_all(|h, _| got.push(h)), 1);
        assert_eq!(got, [0]);
        assert!(matches!(f.take(0), Some((OpStatus::Pending, _))));
        assert_eq!(f.counters().lost, 1);
    }
}
