//! The owner's data path per packet (whitepaper section 5.4.6), beside its side of
//! the shared interface (`session_path`): a receive ticket (the session found by
//! receiver index, its counter checked), the commit once a received packet's tag
//! verified, a packet sent told, and the staging queue for packets that wait for a
//! session. These run once per packet or per vector, so they do no cryptography and
//! allocate nothing; what they change in a peer's timers goes through the named
//! events in `timers`.

use super::{Action, Device};
use crate::drop::DropReason;
use crate::peer::PeerId;
use crate::staged::Staged;
use std::time::Instant;

impl Device {
    /// The end of the data path's run: counters left in this worker's blocks are let
    /// go, so that it never sends with counters older than the other workers' by more
    /// than a run.
    pub fn end_run(&mut self) {
        self.send_blocks.clear();
    }

    /// Keeps the data path's buffer `packet` for `id` until a session exists, and
    /// asks for one. When the queue is full its oldest packet makes room: that
    /// buffer is returned, for the caller to free and count as `staged-overflow`.
    /// For a peer that does not exist the packet itself is returned.
    pub fn stage(&mut self, id: PeerId, packet: u32, now: Instant) -> Option<u32> {
        let Some(p) = self.peer_mut(id) else {
            return Some(packet);
        };
        let evicted = p.staged.push(packet);
        self.initiate(id, false, now);
        evicted
    }

    /// Lets go of everything staged for `id`: each packet goes back to the data path
    /// as an [`Action::Discard`] with `reason`.
    pub(super) fn discard_staged(&mut self, id: PeerId, reason: DropReason) {
        if let Some(p) = self
            .peers
            .get_mut(id.0 as usize)
            .and_then(|p| p.as_deref_mut())
        {
            p.staged.discard_all(id, reason, &mut self.actions);
        }
    }

    /// Moves the peer's staged packets (and keepalive), oldest first, to `out`.
    pub fn take_staged(&mut self, id: PeerId, out: &mut Vec<Staged>) {
        if let Some(p) = self.peer_mut(id) {
            p.staged.drain_into(out);
        }
    }

    /// Stages an empty packet (unless data is already waiting) and asks for a flush.
    /// The timers run when the data path reports it sent
    /// ([`SessionPath::note_sent`](crate::SessionPath::note_sent)).
    pub(super) fn send_keepalive(&mut self, id: PeerId, _now: Instant) {
        let Some(p) = self.peer_mut(id) else { return };
        p.staged.keepalive_unless_busy();
        self.actions.push_back(Action::Flush(id));
    }
}

#[cfg(test)]
mod tests {
    use super::super::Action;
    use super::super::testing::*;
    use crate::DropReason;
    use crate::constants::MAX_STAGED_PACKETS;
    use crate::session::SendError;
    use crate::{PeerId, Staged};
    use crypto::KeyRegistry;
    use std::sync::Arc;
    use std::time::Instant;

    #[test]
    fn no_session_or_no_endpoint_says_why() {
        let keys = Arc::new(KeyRegistry::new(8));
        let now = Instant::now();
        let mut d = device(&keys, now);
        let id = d
            .add_peer(crypto::x25519::PrivateKey::generate().public_key())
            .unwrap();
        assert_eq!(d.send_ticket(id, now).err(), Some(SendError::NoEndpoint));
        d.set_endpoint(id, addr(B_ADDR));
        assert_eq!(d.send_ticket(id, now).err(), Some(SendError::NoSession));
        d.install_loopback_session(id, now).unwrap();
        let counters: Vec<u64> = (0..3)
            .map(|_| d.send_ticket(id, now).unwrap().counter)
            .collect();
        assert_eq!(counters, [0, 1, 2]);
    }

    #[test]
    fn staging_keeps_the_newest_and_asks_for_a_handshake_once() {
        let keys = Arc::new(KeyRegistry::new(8));
        let now = Instant::now();
        let mut d = device(&keys, now);
        let id = peer(&mut d);
        for i in 0..MAX_STAGED_PACKETS as u32 {
            assert_eq!(d.stage(id, i, now), None);
        }
        assert_eq!(d.stage(id, 1000, now), Some(0), "the oldest makes room");
        assert_eq!(sent(&mut d).len(), 1, "one initiation for all of them");
        let got = staged(&mut d, id);
        assert_eq!(got.len(), MAX_STAGED_PACKETS);
        assert_eq!(got[0], Staged::Packet(1));
        assert_eq!(got[MAX_STAGED_PACKETS - 1], Staged::Packet(1000));
        assert!(staged(&mut d, id).is_empty());
        assert_eq!(d.stage(PeerId(77), 5, now), Some(5), "no such peer");
    }

    #[test]
    fn a_counter_is_taken_once_and_nothing_changes_on_a_refusal() {
        let now = Instant::now();
        let mut p = pair(now);
        p.handshake(now);
        let t = p.a.send_ticket(p.b_in_a, now).unwrap();
        let r = p.b.recv_ticket(t.receiver_index, t.counter, now).unwrap();
        let rx = p.b.peer_info(p.a_in_b).unwrap().rx_bytes;
        // A source outside a's allowed IPs: refused, counter not taken.
        assert_eq!(
            p.b.recv_commit(
                &r,
                t.counter,
                Some("10.9.9.9".parse().unwrap()),
                64,
                addr(A_ADDR),
                now
            ),
            Err(DropReason::SourceNotAllowed)
        );
        assert_eq!(p.b.peer_info(p.a_in_b).unwrap().rx_bytes, rx);
        let moved = addr("198.18.0.9:4000");
        p.b.recv_commit(&r, t.counter, None, 32, moved, now)
            .unwrap();
        assert_eq!(p.b.peer_info(p.a_in_b).unwrap().rx_bytes, rx + 32);
        // The endpoint follows the peer.
        assert_eq!(p.b.peer_info(p.a_in_b).unwrap().endpoint, Some(moved));
        assert_eq!(
            p.b.recv_ticket(t.receiver_index, t.counter, now).err(),
            Some(DropReason::Replay)
        );
        assert_eq!(
            p.b.recv_commit(&r, t.counter, None, 32, moved, now),
            Err(DropReason::Replay)
        );
        assert_eq!(
            p.b.recv_ticket(t.receiver_index ^ 1, 0, now).err(),
            Some(DropReason::UnknownIndex)
        );
    }

    #[test]
    fn the_responder_sends_once_the_initiator_spoke() {
        let now = Instant::now();
        let mut p = pair(now);
        p.initiate(0, now);
        let resp = one_sent(&mut p.b);
        // b has data waiting for a, and no session it may send on yet.
        assert_eq!(
            p.b.send_ticket(p.a_in_b, now).err(),
            Some(SendError::NoSession)
        );
        p.b.stage(p.a_in_b, 20, now);
        assert!(
            actions(&mut p.b).is_empty(),
            "b just answered; no initiation"
        );
        p.a.handle_handshake(parse(&resp), addr(B_ADDR), now)
            .unwrap();
        let t = p.a.send_ticket(p.b_in_a, now).unwrap();
        let r = p.b.recv_ticket(t.receiver_index, t.counter, now).unwrap();
        p.b.recv_commit(&r, t.counter, None, 32, addr(A_ADDR), now)
            .unwrap();
        assert_eq!(actions(&mut p.b), [Action::Flush(p.a_in_b)]);
        assert!(p.b.send_ticket(p.a_in_b, now).is_ok());
        assert_eq!(p.b.index_count(), 1);
    }

    #[test]
    fn note_sent_counts_bytes() {
        let keys = Arc::new(KeyRegistry::new(8));
        let now = Instant::now();
        let mut d = device(&keys, now);
        let id = peer(&mut d);
        d.note_sent(id, 100, 148, now);
        d.note_sent(id, 0, 32, now);
        assert_eq!(d.peer_info(id).unwrap().tx_bytes, 180);
    }
}
