//! Frames out at an asynchronous engine, and what it takes to finish their packets
//! when they come back: all of it here, in one place.
//!
//! A node that hands a frame to an asynchronous engine parks its packets (next edge
//! KEEP), each with a record of how to resume it (`resume::Resume`). When the engine gives the frame back, every
//! packet gets its op's status beside its record (a table indexed by buffer) and goes
//! to the post node, which takes both and finishes the packet as the synchronous path
//! would. A frame that comes back other than as parked (another sequence number, a
//! different number of ops, or never, when the engine says nothing is in flight) is
//! counted, and each packet without a result gets [`OpStatus::Pending`], which its post
//! node counts as a drop: no packet is freed silently or left behind.
//!
//! The table keeps whatever record `R` its user resumes a packet with and never looks
//! inside it, so it names no protocol. Handing frames to the engine and taking them
//! back is `nodes::parked`'s (`park_frame` for the crypto nodes, `resume_all` for
//! the run's end).

use crate::arena::Handle;
use crypto::{AeadOp, OpStatus};
use std::collections::VecDeque;

/// A frame at the engine: its sequence number and its packets in op order.
struct Frame<R> {
    seq: u64,
    packets: Vec<(Handle, R)>,
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

pub(crate) struct InFlight<R> {
    frames: VecDeque<Frame<R>>,
    /// Frame records to reuse, so that parking allocates only while warming up.
    spare: Vec<Frame<R>>,
    /// Per buffer: the op's status and how to resume, from return to post node.
    back: Vec<Option<(OpStatus, R)>>,
    counters: InFlightCounters,
}

impl<R: Copy> InFlight<R> {
    pub(crate) fn new(buffers: usize) -> InFlight<R> {
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
    pub(crate) fn park(&mut self, seq: u64, packets: impl Iterator<Item = (Handle, R)>) {
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
        mut deliver: impl FnMut(Handle, &R),
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
    pub(crate) fn abandon_all(&mut self, mut deliver: impl FnMut(Handle, &R)) -> usize {
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
    pub(crate) fn take(&mut self, h: Handle) -> Option<(OpStatus, R)> {
        self.back.get_mut(h as usize)?.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crypto::{Algorithm, Direction, KeyHandle, Span};

    /// A record as a user would keep one: here, the packet's inner length.
    #[derive(Clone, Copy, Debug, PartialEq)]
    struct Len(usize);

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

    fn enc(len: usize) -> Len {
        Len(len)
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
        assert!(matches!(f.take(3), Some((OpStatus::Ok, Len(1)))));
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
