//! The device's side of the data path's one interface ([`SessionPath`]): the
//! owner's sessions and allowed IPs, its counter blocks, and its timers told at
//! once of what was sent and received.

use super::{Action, Device};
use crate::allowed_ips::AllowedIps;
use crate::constants::REKEY_AFTER_MESSAGES;
use crate::drop::DropReason;
use crate::keypair::{Keypair, KeypairRole};
use crate::peer::PeerId;
use crate::runs::{ReceivedRun, SentRun};
use crate::session::{RecvTicket, SendError, SendTicket, SessionPath, advance};
use std::sync::Arc;
use std::time::Instant;

impl SessionPath for Device {
    fn allowed_ips(&self) -> &AllowedIps<PeerId> {
        &self.allowed_ips
    }

    /// The peer and session our index `local_index` names.
    fn session_by_index(&self, local_index: u32) -> Result<(PeerId, &Arc<Keypair>), DropReason> {
        let id = self
            .index_owner(local_index)
            .ok_or(DropReason::UnknownIndex)?;
        let p = self.peer(id).ok_or(DropReason::UnknownIndex)?;
        let (_, k) = p
            .keypairs
            .find(local_index)
            .ok_or(DropReason::UnknownIndex)?;
        Ok((id, k))
    }

    /// The session a receive ticket names, if it is still the peer's.
    fn session(&self, t: &RecvTicket) -> Result<&Keypair, DropReason> {
        let p = self.peer(t.peer).ok_or(DropReason::UnknownIndex)?;
        let (_, k) = p
            .keypairs
            .find(t.local_index)
            .ok_or(DropReason::UnknownIndex)?;
        Ok(k)
    }

    fn sending_session(&self, peer: PeerId) -> Option<&Arc<Keypair>> {
        self.peers
            .get(peer.0 as usize)?
            .as_deref()?
            .keypairs
            .current
            .as_ref()
    }

    /// Counter and key for one packet to `id`, or why not. On `NoSession` the caller
    /// stages the packet ([`Device::stage`]).
    fn send_ticket(&mut self, id: PeerId, now: Instant) -> Result<SendTicket, SendError> {
        // The fields apart: the peer is read while the blocks change.
        let p = self
            .peers
            .get(id.0 as usize)
            .and_then(|p| p.as_deref())
            .ok_or(SendError::NoSession)?;
        let endpoint = p.endpoint.ok_or(SendError::NoEndpoint)?;
        let k = p
            .keypairs
            .current
            .as_ref()
            .filter(|k| now < k.reject_at)
            .ok_or(SendError::NoSession)?;
        // The counter comes from this worker's block (other workers may send on the
        // same session: see `datapath`).
        let counter = self.send_blocks.take(k).ok_or(SendError::NoSession)?;
        Ok(SendTicket::on(k, counter, endpoint))
    }

    /// Moves `t`, a ticket this frame took, on to the next counter of this
    /// worker's block for its session (the key, index and endpoint stay); false,
    /// and `t` untouched, when the block is used up: take a full ticket then
    /// ([`Device::send_ticket`]).
    fn advance_ticket(&mut self, t: &mut SendTicket) -> bool {
        advance(self.send_blocks.next_of(t.serial), t)
    }

    /// The data path sent a run of packets to one peer (see `runs`).
    fn note_sent_run(&mut self, run: &SentRun, now: Instant) {
        let id = run.peer;
        let Some(p) = self.peer_mut(id) else { return };
        p.tx_bytes += run.bytes;
        p.any_authenticated_packet_sent();
        p.any_authenticated_packet_traversal(now);
        if run.data > 0 {
            p.data_sent(now);
        }
        // Section 6.2: rekey after REKEY_AFTER_MESSAGES, or (initiator) REKEY_AFTER_TIME.
        let stale =
            p.keypairs.current.as_ref().is_some_and(|k| {
                k.sent() > REKEY_AFTER_MESSAGES || (k.initiator && now >= k.rekey_at)
            });
        if stale {
            self.initiate(id, false, now);
        }
    }

    /// Authenticated packets arrived from a peer on our session `local_index` (their
    /// counters committed, by this worker or another): counts them, confirms a
    /// responder's new session, runs the timers, and moves the endpoint to `src`.
    fn note_received_run(&mut self, run: &ReceivedRun, now: Instant) {
        let (id, local_index, src) = (run.peer, run.local_index, run.src);
        let wall = self.wall(now);
        let Some(p) = self.peer_mut(id) else { return };
        // The session may have gone since (a follower's report comes a run late).
        let (rekey_on_receive, confirmed) = match p.keypairs.find(local_index) {
            Some((slot, k)) => (
                slot == KeypairRole::Current
                    && k.initiator
                    && now >= k.rekey_on_receive_at
                    && !p.timers.sent_lastminute_handshake,
                // Data on `next`: the initiator has the session too: it becomes current.
                slot == KeypairRole::Next,
            ),
            None => (false, false),
        };
        p.rx_bytes += run.bytes;
        let moved = p.endpoint != Some(src);
        p.endpoint = Some(src);
        let pushed_out = if confirmed {
            p.keypairs.confirm_next()
        } else {
            None
        };
        if confirmed {
            p.handshake_complete(wall);
        }
        p.any_authenticated_packet_received();
        p.any_authenticated_packet_traversal(now);
        // The one event that is not idempotent: the second data packet owes a second
        // keepalive, the third and later nothing more.
        for _ in 0..run.data.min(2) {
            p.data_received(now);
        }
        if moved || confirmed {
            self.view_changed();
        }
        self.release_keypairs(pushed_out);
        if rekey_on_receive {
            // Section 6.5: our session is about to expire and the peer keeps talking.
            if let Some(p) = self.peer_mut(id) {
                p.timers.sent_lastminute_handshake = true;
            }
            self.initiate(id, false, now);
        }
        if confirmed && !self.peer(id).is_some_and(|p| p.staged.is_empty()) {
            self.actions.push_back(Action::Flush(id));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use crate::DropReason;
    use crate::datapath::{COUNTER_BLOCK, Follower};
    use crate::device::SendTicket;
    use crypto::KeyRegistry;
    use std::sync::Arc;
    use std::time::Instant;

    fn same_session(a: &SendTicket, b: &SendTicket) -> bool {
        (a.key, a.receiver_index, a.endpoint, a.serial)
            == (b.key, b.receiver_index, b.endpoint, b.serial)
    }

    #[test]
    fn a_ticket_advances_through_its_block_and_stops_where_it_ends() {
        let now = Instant::now();
        let mut p = pair(now);
        p.handshake(now);
        p.a.end_run(); // a fresh block: the handshake may have taken from one
        let first = p.a.send_ticket(p.b_in_a, now).unwrap();
        let mut t = first;
        for n in 1..COUNTER_BLOCK {
            assert!(p.a.advance_ticket(&mut t), "counters left");
            assert_eq!(t.counter, first.counter + n);
            assert!(same_session(&t, &first));
        }
        let last = t;
        assert!(!p.a.advance_ticket(&mut t), "the block is used up");
        assert_eq!(t.counter, last.counter, "untouched");
        let mut next = p.a.send_ticket(p.b_in_a, now).unwrap();
        assert_eq!(next.counter, first.counter + COUNTER_BLOCK);
        p.a.end_run();
        assert!(!p.a.advance_ticket(&mut next), "no block outlives the run");
    }

    #[test]
    fn a_ticket_advances_only_on_its_own_sessions_block() {
        let keys = Arc::new(KeyRegistry::new(8));
        let now = Instant::now();
        let mut d = device(&keys, now);
        let id = peer(&mut d);
        d.install_loopback_session(id, now).unwrap();
        let mut old = d.send_ticket(id, now).unwrap();
        // A new session replaces it; the old one's block is still held.
        d.install_loopback_session(id, now).unwrap();
        let mut new = d.send_ticket(id, now).unwrap();
        assert_ne!(old.serial, new.serial);
        let (o, n) = (old.counter, new.counter);
        for _ in 0..5 {
            assert!(d.advance_ticket(&mut old));
        }
        assert!(d.advance_ticket(&mut new));
        assert_eq!(new.counter, n + 1, "from the new session's block");
        assert!(d.advance_ticket(&mut old));
        assert_eq!(old.counter, o + 6, "from the old session's block");
    }

    #[test]
    fn a_receive_run_checks_each_counter_as_a_ticket_does() {
        let now = Instant::now();
        let mut p = pair(now);
        p.handshake(now);
        p.b.publish();
        let follower = Follower::new(p.b.view_cell());
        let t = p.a.send_ticket(p.b_in_a, now).unwrap();
        let runs = [
            p.b.recv_run(t.receiver_index).unwrap(),
            follower.recv_run(t.receiver_index).unwrap(),
        ];
        let want = p.b.recv_ticket(t.receiver_index, t.counter, now).unwrap();
        for run in &runs {
            assert_eq!(run.index(), t.receiver_index);
            let got = run.ticket(t.counter, now).unwrap();
            assert_eq!(
                (got.peer, got.key, got.local_index),
                (want.peer, want.key, want.local_index)
            );
        }
        let mut accepted = [false];
        p.b.commit_counters(&want, &[t.counter], &mut accepted)
            .unwrap();
        assert_eq!(accepted, [true]);
        for run in &runs {
            assert_eq!(run.ticket(t.counter, now).err(), Some(DropReason::Replay));
            assert!(run.ticket(t.counter + 1, now).is_ok());
        }
        assert_eq!(
            p.b.recv_run(t.receiver_index ^ 1).err(),
            Some(DropReason::UnknownIndex)
        );
        assert_eq!(
            follower.recv_run(t.receiver_index ^ 1).err(),
            Some(DropReason::UnknownIndex)
        );
    }
}
