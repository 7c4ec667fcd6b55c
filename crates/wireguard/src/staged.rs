//! Packets waiting for a session. The device never holds packet bytes: the data path
//! keeps each packet in its own buffer and stages the buffer's number here, so a
//! packet is neither copied out nor copied back. Whatever the device lets go of (the
//! oldest when the queue is full, everything when the handshake gives up or the peer
//! goes) is handed back as [`Action::Discard`], with the
//! reason, so that the owner frees the buffer and counts the drop.

use crate::action::Action;
use crate::constants::MAX_STAGED_PACKETS;
use crate::drop::DropReason;
use crate::peer_id::PeerId;
use std::collections::VecDeque;

/// One entry of a peer's queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Staged {
    /// A packet in the data path's buffer of this number.
    Packet(u32),
    /// A keepalive the device asked for: the data path makes it when it flushes.
    Keepalive,
}

#[derive(Debug, Default)]
pub struct StagedQueue {
    queue: VecDeque<Staged>,
}

impl StagedQueue {
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Adds a packet; when the queue is full the oldest entry makes room, and is
    /// returned if it was a packet (the caller's to free and count).
    pub fn push(&mut self, packet: u32) -> Option<u32> {
        let evicted = if self.queue.len() >= MAX_STAGED_PACKETS {
            self.queue.pop_front()
        } else {
            None
        };
        self.queue.push_back(Staged::Packet(packet));
        match evicted {
            Some(Staged::Packet(p)) => Some(p),
            _ => None,
        }
    }

    /// Asks for a keepalive unless something is already waiting (which confirms the
    /// session just as well).
    pub fn keepalive_unless_busy(&mut self) {
        if self.queue.is_empty() {
            self.queue.push_back(Staged::Keepalive);
        }
    }

    /// Moves every entry, oldest first, to `out`; the queue keeps its memory.
    pub fn drain_into(&mut self, out: &mut Vec<Staged>) {
        out.extend(self.queue.drain(..));
    }

    /// Lets go of every entry: each packet goes back to the data path with `reason`.
    pub fn discard_all(
        &mut self,
        peer: PeerId,
        reason: DropReason,
        actions: &mut VecDeque<Action>,
    ) {
        for s in self.queue.drain(..) {
            if let Staged::Packet(packet) = s {
                actions.push_back(Action::Discard {
                    peer,
                    packet,
                    reason,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_hands_back_its_oldest_packet() {
        let mut q = StagedQueue::default();
        for p in 0..MAX_STAGED_PACKETS as u32 {
            assert_eq!(q.push(p), None);
        }
        assert_eq!(q.push(1000), Some(0));
        assert_eq!(q.push(1001), Some(1));
        let mut out = Vec::new();
        q.drain_into(&mut out);
        assert_eq!(out.len(), MAX_STAGED_PACKETS);
        assert_eq!(out[0], Staged::Packet(2));
        assert_eq!(out[MAX_STAGED_PACKETS - 1], Staged::Packet(1001));
        assert!(q.is_empty());
    }

    #[test]
    fn a_keepalive_is_asked_for_only_when_nothing_waits() {
        let mut q = StagedQueue::default();
        q.keepalive_unless_busy();
        q.keepalive_unless_busy();
        assert_eq!(q.len(), 1);
        let mut q = StagedQueue::default();
        q.push(7);
        q.keepalive_unless_busy();
        let mut out = Vec::new();
        q.drain_into(&mut out);
        assert_eq!(out, [Staged::Packet(7)]);
    }

    #[test]
    fn discarding_hands_back_every_packet_and_no_keepalive() {
        let mut q = StagedQueue::default();
        q.keepalive_unless_busy();
        q.push(3);
        q.push(4);
        let mut actions = VecDeque::new();
        q.discard_all(PeerId(9), DropReason::StagedExpired, &mut actions);
        let want = |packet| Action::Discard {
            peer: PeerId(9),
            packet,
            reason: DropReason::StagedExpired,
        };
        assert_eq!(Vec::from(actions), [want(3), want(4)]);
        assert!(q.is_empty());
    }
}
