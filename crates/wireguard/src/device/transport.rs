//! The data path's side of the protocol (whitepaper section 5.4.6): a ticket per
//! packet to send (key, counter, receiver index, endpoint) or to receive (the session
//! found by receiver index, its counter checked), the commit once a received packet's
//! tag verified, and the staging queue for packets that wait for a session. These run
//! once per packet or per vector, so they do no cryptography and allocate nothing;
//! what they change in a peer's timers goes through the named events in `timers`.

use super::{Action, Device};
use crate::constants::REKEY_AFTER_MESSAGES;
use crate::drop::DropReason;
use crate::keypair::{Keypair, KeypairRole};
use crate::peer::PeerId;
use crate::runs::{ReceivedRun, SentRun};
use crate::session::{RecvTicket, SendError, SendTicket, commit_on, recv_ticket_on};
use crate::staged::Staged;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

impl Device {
    /// Counter and key for one packet to `id`, or why not. On `NoSession` the caller
    /// stages the packet ([`Device::stage`]).
    pub fn send_ticket(&mut self, id: PeerId, now: Instant) -> Result<SendTicket, SendError> {
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
        Ok(SendTicket {
            key: k.send_key,
            counter,
            receiver_index: k.remote_index,
            endpoint,
            serial: k.serial,
        })
    }

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
    /// The timers run when the data path reports it sent ([`Device::note_sent`]).
    pub(super) fn send_keepalive(&mut self, id: PeerId, _now: Instant) {
        let Some(p) = self.peer_mut(id) else { return };
        p.staged.keepalive_unless_busy();
        self.actions.push_back(Action::Flush(id));
    }

    /// The data path sent a packet to `id` (`plaintext_len` 0 is a keepalive).
    pub fn note_sent(&mut self, id: PeerId, plaintext_len: usize, wire_len: usize, now: Instant) {
        self.note_sent_run(&SentRun::one(id, plaintext_len, wire_len), now);
    }

    /// The data path sent a run of packets to one peer (see `runs`).
    pub fn note_sent_run(&mut self, run: &SentRun, now: Instant) {
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

    /// Finds the session for a data packet and checks its counter, changing nothing.
    pub fn recv_ticket(
        &self,
        receiver_index: u32,
        counter: u64,
        now: Instant,
    ) -> Result<RecvTicket, DropReason> {
        let (id, k) = self.session_by_index(receiver_index)?;
        recv_ticket_on(id, k, counter, now)
    }

    /// The peer and session our index `local_index` names.
    pub(crate) fn session_by_index(
        &self,
        local_index: u32,
    ) -> Result<(PeerId, &Arc<Keypair>), DropReason> {
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

    /// After the tag verified: checks the inner source against the peer's allowed
    /// IPs, commits the counter, confirms a responder's new session, runs the timers,
    /// and moves the endpoint to where the packet came from. `inner_src` is `None`
    /// for a keepalive. Nothing changes when it returns an error.
    pub fn recv_commit(
        &mut self,
        t: &RecvTicket,
        counter: u64,
        inner_src: Option<IpAddr>,
        wire_len: usize,
        src: SocketAddr,
        now: Instant,
    ) -> Result<(), DropReason> {
        commit_on(&self.allowed_ips, t, self.session(t)?, counter, inner_src)?;
        let run = ReceivedRun::one(t, inner_src.is_some(), wire_len, src);
        self.note_received_run(&run, now);
        Ok(())
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

    /// Is `inner_src` one of the allowed IPs of the peer `t` names? The check a
    /// decrypted packet passes before its counter is committed.
    pub fn source_allowed(&self, t: &RecvTicket, inner_src: IpAddr) -> bool {
        self.allowed_ips.lookup(inner_src) == Some(t.peer)
    }

    /// Commits, in order, the counters of packets on `t`'s session whose tags
    /// verified: `accepted[i]` says whether `counters[i]` was taken (see
    /// [`crate::replay::ReplayWindow::commit_all`]). `UnknownIndex`, and nothing
    /// taken, when the session is gone. It checks no source: the caller has passed
    /// each packet through [`Device::source_allowed`] first.
    pub fn commit_counters(
        &self,
        t: &RecvTicket,
        counters: &[u64],
        accepted: &mut [bool],
    ) -> Result<(), DropReason> {
        self.session(t)?.replay.commit_all(counters, accepted);
        Ok(())
    }

    /// Authenticated packets arrived from a peer on our session `local_index` (their
    /// counters committed, by this worker or another): counts them, confirms a
    /// responder's new session, runs the timers, and moves the endpoint to `src`.
    pub fn note_received_run(&mut self, run: &ReceivedRun, now: Instant) {
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
    use super::super::Action;
    use super::super::testing::*;
    use super::SendError;
    use crate::DropReason;
    use crate::constants::MAX_STAGED_PACKETS;
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
        p.a.stage(p.b_in_a, 0, now);
        let init = one_sent(&mut p.a);
        p.b.handle_handshake(parse(&init), addr(A_ADDR), now)
            .unwrap();
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
