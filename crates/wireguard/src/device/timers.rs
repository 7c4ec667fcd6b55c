//! Section 6's timers, written as the Linux driver (timers.c) and boringtun write
//! them: the protocol code reports what happened through one named event per kind
//! of happening (a packet sent, data received, a handshake initiated or complete, a
//! session derived...), and only the events arm or disarm deadlines. Each rule is
//! so written once, and reading the events says everything that moves a timer.
//!
//! The second half is the clock side: [`Device::tick`] runs the deadlines that are
//! due, one handler per timer, and [`Device::next_deadline`] says when to call it.
//! A device with many idle peers must not walk them all on every tick, so the device
//! keeps a floor under every armed deadline and a list of the peers touched since
//! the last tick (see `Device::peer_mut`).

use super::Device;
use crate::constants::{
    KEEPALIVE_TIMEOUT, MAX_HANDSHAKE_ATTEMPTS, REKEY_TIMEOUT, REKEY_TIMEOUT_JITTER_MAX,
    ZERO_KEYS_AFTER,
};
use crate::drop::DropReason;
use crate::peer::{Peer, PeerId};
use rand::Rng;
use std::time::{Duration, Instant, SystemTime};

pub use crate::peer_timers::Timers;

/// Up to REKEY_TIMEOUT_JITTER_MAX, so that peers that lost touch at once do not all
/// retry at once.
fn jitter() -> Duration {
    Duration::from_millis(
        rand::thread_rng().gen_range(0..=REKEY_TIMEOUT_JITTER_MAX.as_millis() as u64),
    )
}

/// The events. The caller holds the peer through `Device::peer_mut`, so a deadline
/// armed here is seen by the next `tick`.
impl Peer {
    /// A data packet (not a keepalive) went out: if the peer does not answer within
    /// KEEPALIVE_TIMEOUT + REKEY_TIMEOUT, start a new handshake (section 6.5).
    pub(crate) fn data_sent(&mut self, now: Instant) {
        if self.timers.new_handshake.is_none() {
            self.timers.new_handshake = Some(now + KEEPALIVE_TIMEOUT + REKEY_TIMEOUT + jitter());
        }
    }

    /// A data packet (not a keepalive) came in: answer within KEEPALIVE_TIMEOUT, with
    /// a keepalive if nothing else goes out; once more after that if more data came.
    pub(crate) fn data_received(&mut self, now: Instant) {
        if self.timers.send_keepalive.is_none() {
            self.timers.send_keepalive = Some(now + KEEPALIVE_TIMEOUT);
        } else {
            self.timers.need_another_keepalive = true;
        }
    }

    /// Anything authenticated went out (data, keepalive, handshake): no keepalive is
    /// owed any more.
    pub(crate) fn any_authenticated_packet_sent(&mut self) {
        self.timers.send_keepalive = None;
    }

    /// Anything authenticated came in: the peer is alive, no new handshake needed.
    pub(crate) fn any_authenticated_packet_received(&mut self) {
        self.timers.new_handshake = None;
    }

    /// Anything authenticated went out or came in: the persistent keepalive, when
    /// configured, waits its whole interval again.
    pub(crate) fn any_authenticated_packet_traversal(&mut self, now: Instant) {
        if self.persistent_keepalive > 0 {
            self.timers.persistent_keepalive =
                Some(now + Duration::from_secs(u64::from(self.persistent_keepalive)));
        }
    }

    /// A handshake message of ours (initiation or response) went out: no initiation
    /// for REKEY_TIMEOUT (section 6.1).
    pub(crate) fn handshake_sent(&mut self, now: Instant) {
        self.timers.last_sent_handshake = Some(now);
    }

    /// Our initiation went out: retry it after REKEY_TIMEOUT (section 6.4).
    pub(crate) fn handshake_initiated(&mut self, now: Instant) {
        self.handshake_sent(now);
        self.timers.retransmit_handshake = Some(now + REKEY_TIMEOUT + jitter());
    }

    /// A session was confirmed (the initiator got a response, or the responder the
    /// first packet on the session): retries stop.
    pub(crate) fn handshake_complete(&mut self, wall: SystemTime) {
        self.timers.retransmit_handshake = None;
        self.timers.handshake_attempts = 0;
        self.timers.sent_lastminute_handshake = false;
        self.last_handshake = Some(wall);
    }

    /// New keys were derived: they, and every older one, are zeroed if no newer
    /// handshake happens in ZERO_KEYS_AFTER (section 6.3).
    pub(crate) fn session_derived(&mut self, now: Instant) {
        self.timers.zero_key_material = Some(now + ZERO_KEYS_AFTER);
    }
}

impl Device {
    /// The earliest time a timer may be due (never later than the true earliest; a
    /// `tick` at a time when nothing is due does nothing).
    pub fn next_deadline(&self) -> Option<Instant> {
        let touched = self
            .touched
            .iter()
            .filter_map(|&id| self.peer(id)?.timers.next_deadline());
        self.timer_floor.into_iter().chain(touched).min()
    }

    /// Runs every timer that is due at `now`. Peers are walked only when a timer may
    /// be due, so an idle device with many peers costs nothing here.
    pub fn tick(&mut self, now: Instant) {
        self.timer_floor = self.next_deadline();
        self.forget_touched();
        if self.timer_floor.is_none_or(|t| t > now) {
            return;
        }
        for i in 0..self.peers.len() {
            let due = self.peers[i]
                .as_ref()
                .and_then(|p| p.timers.next_deadline())
                .is_some_and(|t| t <= now);
            if due {
                self.tick_peer(PeerId(i as u32), now);
            }
        }
        self.forget_touched();
        self.timer_floor = self
            .peers
            .iter()
            .flatten()
            .filter_map(|p| p.timers.next_deadline())
            .min();
    }

    fn forget_touched(&mut self) {
        for id in std::mem::take(&mut self.touched) {
            if let Some(p) = self.peer_mut_quiet(id) {
                p.timers_touched = false;
            }
        }
    }

    /// Runs a peer's due timers, in this order; each sees what the ones before it
    /// changed (a retried initiation disarms the keepalive it carries, for one).
    fn tick_peer(&mut self, id: PeerId, now: Instant) {
        if self.due(id, now, |t| t.retransmit_handshake) {
            self.retransmit_handshake_expired(id, now);
        }
        if self.due(id, now, |t| t.send_keepalive) {
            self.send_keepalive_expired(id, now);
        }
        if self.due(id, now, |t| t.new_handshake) {
            self.new_handshake_expired(id, now);
        }
        if self.due(id, now, |t| t.zero_key_material) {
            self.zero_key_material_expired(id);
        }
        if self.due(id, now, |t| t.persistent_keepalive) {
            self.persistent_keepalive_expired(id, now);
        }
    }

    fn due(&mut self, id: PeerId, now: Instant, timer: fn(&Timers) -> Option<Instant>) -> bool {
        self.peer_mut(id)
            .is_some_and(|p| timer(&p.timers).is_some_and(|t| t <= now))
    }

    /// No response to our initiation: send another, or after MAX_HANDSHAKE_ATTEMPTS
    /// (REKEY_ATTEMPT_TIME) give up, dropping what waited for the session.
    fn retransmit_handshake_expired(&mut self, id: PeerId, now: Instant) {
        let Some(p) = self.peer_mut(id) else { return };
        p.timers.retransmit_handshake = None;
        if p.timers.handshake_attempts >= MAX_HANDSHAKE_ATTEMPTS {
            p.timers.send_keepalive = None;
            // Whatever a partial exchange left is zeroed in time.
            if p.timers.zero_key_material.is_none() {
                p.timers.zero_key_material = Some(now + ZERO_KEYS_AFTER);
            }
            if let Some(init) = p.initiation.take().map(|s| s.local_index) {
                self.release_index(init);
            }
            self.discard_staged(id, DropReason::StagedExpired);
        } else {
            p.timers.handshake_attempts += 1;
            p.timers.last_sent_handshake = None; // the retry is due now
            self.initiate(id, true, now);
        }
    }

    /// Data came in and nothing went back for KEEPALIVE_TIMEOUT: send a keepalive.
    fn send_keepalive_expired(&mut self, id: PeerId, now: Instant) {
        let Some(p) = self.peer_mut(id) else { return };
        p.timers.send_keepalive = None;
        let again = std::mem::take(&mut p.timers.need_another_keepalive);
        self.send_keepalive(id, now);
        if again && let Some(p) = self.peer_mut(id) {
            p.timers.send_keepalive = Some(now + KEEPALIVE_TIMEOUT);
        }
    }

    /// Data went out and nothing came back: the session may be dead, make a new one.
    fn new_handshake_expired(&mut self, id: PeerId, now: Instant) {
        let Some(p) = self.peer_mut(id) else { return };
        p.timers.new_handshake = None;
        self.initiate(id, false, now);
    }

    /// No new session for ZERO_KEYS_AFTER: forget every key of the peer.
    fn zero_key_material_expired(&mut self, id: PeerId) {
        let Some(p) = self.peer_mut(id) else { return };
        p.timers.zero_key_material = None;
        self.forget_keys(id);
    }

    fn persistent_keepalive_expired(&mut self, id: PeerId, now: Instant) {
        let Some(p) = self.peer_mut(id) else { return };
        p.timers.persistent_keepalive = None;
        self.send_keepalive(id, now);
    }
}

#[cfg(test)]
mod tests {
    use super::super::Action;
    use super::super::testing::*;
    use crate::Staged;
    use crate::constants::{
        KEEPALIVE_TIMEOUT, MAX_HANDSHAKE_ATTEMPTS, REKEY_TIMEOUT, REKEY_TIMEOUT_JITTER_MAX,
        ZERO_KEYS_AFTER,
    };
    use crate::peer::{Peer, PeerId};
    use crypto::KeyRegistry;
    use crypto::x25519::PrivateKey;
    use std::sync::Arc;
    use std::time::{Duration, Instant, SystemTime};

    const SECOND: Duration = Duration::from_secs(1);

    fn bare_peer() -> Peer {
        Peer::new(PrivateKey::generate().public_key())
    }

    /// A device, and a peer with an endpoint and a session (one that talks to
    /// itself: enough for the timers, which never look at the keys).
    fn with_session(now: Instant) -> (crate::Device, PeerId) {
        let keys = Arc::new(KeyRegistry::new(8));
        let mut d = device(&keys, now);
        let id = peer(&mut d);
        d.install_loopback_session(id, now).unwrap();
        (d, id)
    }

    /// Data from the peer, as the data path reports it once the tag verified.
    fn receive(d: &mut crate::Device, id: PeerId, data: bool, now: Instant) {
        let t = d.send_ticket(id, now).unwrap();
        let r = d.recv_ticket(t.receiver_index, t.counter, now).unwrap();
        d.add_allowed_ip(id, "10.0.0.1/32".parse().unwrap());
        let inner = data.then(|| "10.0.0.1".parse().unwrap());
        d.recv_commit(&r, t.counter, inner, 64, addr(B_ADDR), now)
            .unwrap();
    }

    /// Runs the timers up to `until`: what the device did, and when.
    fn run_until(d: &mut crate::Device, until: Instant) -> Vec<(Instant, Action)> {
        let mut out = Vec::new();
        while let Some(t) = d.next_deadline().filter(|&t| t <= until) {
            d.tick(t);
            out.extend(actions(d).into_iter().map(|a| (t, a)));
        }
        out
    }

    #[test]
    fn traversal_rearms_persistent_keepalive_only_when_configured() {
        let t0 = Instant::now();
        let mut p = bare_peer();
        p.any_authenticated_packet_traversal(t0);
        assert_eq!(p.timers.persistent_keepalive, None);
        p.persistent_keepalive = 25;
        p.any_authenticated_packet_traversal(t0);
        assert_eq!(p.timers.persistent_keepalive, Some(t0 + 25 * SECOND));
        p.any_authenticated_packet_traversal(t0 + SECOND);
        assert_eq!(p.timers.persistent_keepalive, Some(t0 + 26 * SECOND));
    }

    #[test]
    fn data_sent_arms_a_new_handshake_once() {
        let t0 = Instant::now();
        let mut p = bare_peer();
        p.data_sent(t0);
        let first = p.timers.new_handshake.unwrap();
        let base = t0 + KEEPALIVE_TIMEOUT + REKEY_TIMEOUT;
        assert!(first >= base && first <= base + REKEY_TIMEOUT_JITTER_MAX);
        // More data does not push it later; an answer disarms it.
        p.data_sent(t0 + SECOND);
        assert_eq!(p.timers.new_handshake, Some(first));
        p.any_authenticated_packet_received();
        assert_eq!(p.timers.new_handshake, None);
    }

    /// The data path tells the device its received packets once per run (see
    /// `runs`): for one to four data packets, the run changes the peer exactly as its
    /// packets told one by one do (the keepalive owed, the second one noted).
    #[test]
    fn a_run_told_once_changes_the_peer_as_its_packets_told_one_by_one() {
        let t0 = Instant::now();
        let inner: std::net::IpAddr = "10.0.0.1".parse().unwrap();
        for n in 1..=4 {
            let (mut one_by_one, a) = with_session(t0);
            for _ in 0..n {
                receive(&mut one_by_one, a, true, t0);
            }
            let (mut as_run, b) = with_session(t0);
            as_run.add_allowed_ip(b, "10.0.0.1/32".parse().unwrap());
            // Committed as the data path does: the frame's counters in one batch.
            let mut tally = crate::RunTally::default();
            let mut counters = Vec::new();
            let mut ticket = None;
            for _ in 0..n {
                let t = as_run.send_ticket(b, t0).unwrap();
                let r = as_run.recv_ticket(t.receiver_index, t.counter, t0).unwrap();
                assert!(as_run.source_allowed(&r, inner));
                counters.push(t.counter);
                ticket = Some(r);
            }
            let r = ticket.unwrap();
            let mut accepted = vec![false; counters.len()];
            as_run
                .commit_counters(&r, &counters, &mut accepted)
                .unwrap();
            assert!(accepted.iter().all(|&a| a));
            for _ in 0..n {
                assert_eq!(tally.received(&r, true, 64, addr(B_ADDR)), None);
            }
            let run = tally.take_received().unwrap();
            assert_eq!((run.packets, run.data, run.bytes), (n, n, 64 * n));
            as_run.note_received_run(&run, t0);
            let (x, y) = (one_by_one.peer(a).unwrap(), as_run.peer(b).unwrap());
            assert_eq!(format!("{:?}", x.timers), format!("{:?}", y.timers), "{n}");
            assert_eq!((x.rx_bytes, x.endpoint), (y.rx_bytes, y.endpoint));
            assert_eq!(x.timers.need_another_keepalive, n > 1);
        }
    }

    #[test]
    fn data_received_owes_a_keepalive_and_notes_a_second_one() {
        let t0 = Instant::now();
        let mut p = bare_peer();
        p.data_received(t0);
        assert_eq!(p.timers.send_keepalive, Some(t0 + KEEPALIVE_TIMEOUT));
        assert!(!p.timers.need_another_keepalive);
        p.data_received(t0 + SECOND);
        assert_eq!(p.timers.send_keepalive, Some(t0 + KEEPALIVE_TIMEOUT));
        assert!(p.timers.need_another_keepalive);
        p.any_authenticated_packet_sent();
        assert_eq!(p.timers.send_keepalive, None);
    }

    #[test]
    fn a_complete_handshake_stops_the_retries() {
        let t0 = Instant::now();
        let mut p = bare_peer();
        p.handshake_initiated(t0);
        assert_eq!(p.timers.last_sent_handshake, Some(t0));
        let retry = p.timers.retransmit_handshake.unwrap();
        assert!(
            retry >= t0 + REKEY_TIMEOUT && retry <= t0 + REKEY_TIMEOUT + REKEY_TIMEOUT_JITTER_MAX
        );
        p.timers.handshake_attempts = 3;
        p.timers.sent_lastminute_handshake = true;
        let wall = SystemTime::now();
        p.handshake_complete(wall);
        assert_eq!(p.timers.retransmit_handshake, None);
        assert_eq!(p.timers.handshake_attempts, 0);
        assert!(!p.timers.sent_lastminute_handshake);
        assert_eq!(p.last_handshake, Some(wall));
        p.session_derived(t0);
        assert_eq!(p.timers.zero_key_material, Some(t0 + ZERO_KEYS_AFTER));
    }

    #[test]
    fn keepalive_is_rearmed_on_send_and_receive_when_configured() {
        let t0 = Instant::now();
        for interval in [0u16, 25] {
            let (mut d, id) = with_session(t0);
            d.set_persistent_keepalive(id, interval, t0);
            actions(&mut d);
            let want =
                |at: Instant| (interval > 0).then(|| at + Duration::from_secs(interval.into()));
            let armed = |d: &crate::Device| d.peer(id).unwrap().timers.persistent_keepalive;
            assert_eq!(armed(&d), None, "nothing went out yet");
            d.note_sent(id, 0, 32, t0 + SECOND);
            assert_eq!(armed(&d), want(t0 + SECOND), "interval {interval}");
            receive(&mut d, id, false, t0 + 2 * SECOND);
            assert_eq!(armed(&d), want(t0 + 2 * SECOND), "interval {interval}");
            receive(&mut d, id, true, t0 + 3 * SECOND);
            assert_eq!(armed(&d), want(t0 + 3 * SECOND), "interval {interval}");
        }
    }

    /// [`run_until`], with the data path's part: a flush sends the staged
    /// keepalive, and the device hears of it.
    fn run_sending(d: &mut crate::Device, until: Instant) -> Vec<(Instant, Action)> {
        let mut out = Vec::new();
        while let Some(t) = d.next_deadline().filter(|&t| t <= until) {
            d.tick(t);
            for a in actions(d) {
                if let Action::Flush(id) = a {
                    assert_eq!(staged(d, id), [Staged::Keepalive]);
                    d.note_sent(id, 0, 32, t);
                }
                out.push((t, a));
            }
        }
        out
    }

    #[test]
    fn timers_fire_in_deadline_order() {
        let t0 = Instant::now();
        let (mut d, id) = with_session(t0);
        d.set_persistent_keepalive(id, 25, t0);
        assert_eq!(actions(&mut d), [Action::Flush(id)]);
        staged(&mut d, id);
        d.note_sent(id, 0, 32, t0);
        // Data in at t0+3: a keepalive is owed at t0+13, and the persistent one
        // comes 25 s after that keepalive went out.
        receive(&mut d, id, true, t0 + 3 * SECOND);
        assert_eq!(d.next_deadline(), Some(t0 + 13 * SECOND));
        d.tick(t0 + 13 * SECOND - Duration::from_millis(1));
        assert!(actions(&mut d).is_empty(), "nothing is due yet");
        assert_eq!(
            run_sending(&mut d, t0 + 40 * SECOND),
            [
                (t0 + 13 * SECOND, Action::Flush(id)),
                (t0 + 38 * SECOND, Action::Flush(id)),
            ]
        );
        // Data out at t0+40 and no answer: a new handshake from t0+55, before the
        // persistent keepalive of t0+63; that initiation is a packet out, so the
        // persistent keepalive waits from it.
        d.note_sent(id, 100, 148, t0 + 40 * SECOND);
        let fired = run_sending(&mut d, t0 + 58 * SECOND);
        assert_eq!(fired.len(), 1, "{fired:?}");
        let (at, ref initiation) = fired[0];
        assert!(matches!(initiation, Action::Send { packet, .. } if packet[0] == 1));
        let base = t0 + 40 * SECOND + KEEPALIVE_TIMEOUT + REKEY_TIMEOUT;
        assert!(at >= base && at <= base + REKEY_TIMEOUT_JITTER_MAX);
        assert_eq!(
            d.peer(id).unwrap().timers.persistent_keepalive,
            Some(at + 25 * SECOND)
        );
    }

    #[test]
    fn a_retry_due_with_a_keepalive_carries_it() {
        let t0 = Instant::now();
        let keys = Arc::new(KeyRegistry::new(8));
        let mut d = device(&keys, t0);
        let id = peer(&mut d);
        d.stage(id, 0, t0);
        sent(&mut d);
        staged(&mut d, id);
        let at = t0 + 2 * REKEY_TIMEOUT;
        let p = d.peer_mut(id).unwrap();
        p.timers.retransmit_handshake = Some(at);
        p.timers.send_keepalive = Some(at);
        d.tick(at);
        // The retransmission runs first, and is itself the packet the keepalive
        // timer wanted out: one initiation, no keepalive.
        let done = actions(&mut d);
        assert_eq!(done.len(), 1, "{done:?}");
        assert!(matches!(&done[0], Action::Send { packet, .. } if packet[0] == 1));
        let p = d.peer(id).unwrap();
        assert_eq!(p.timers.handshake_attempts, 1);
        assert_eq!(p.timers.send_keepalive, None);
        assert!(p.staged.is_empty());
    }

    #[test]
    fn an_unanswered_handshake_is_retried_then_given_up() {
        let t0 = Instant::now();
        let keys = Arc::new(KeyRegistry::new(8));
        let mut d = device(&keys, t0);
        let id = peer(&mut d);
        d.stage(id, 20, t0);
        assert_eq!(sent(&mut d).len(), 1);
        let mut fired = run_until(&mut d, t0 + 10 * 60 * SECOND);
        // Giving up hands the staged packet back to the data path, to free and count.
        let (_, last_action) = fired.pop().expect("actions");
        assert_eq!(
            last_action,
            Action::Discard {
                peer: id,
                packet: 20,
                reason: crate::DropReason::StagedExpired,
            }
        );
        let times: Vec<Instant> = fired.iter().map(|(t, _)| *t).collect();
        assert_eq!(times.len() as u32, MAX_HANDSHAKE_ATTEMPTS, "{fired:?}");
        let mut last = t0;
        for t in times {
            let gap = t - last;
            assert!(gap >= REKEY_TIMEOUT && gap <= REKEY_TIMEOUT + REKEY_TIMEOUT_JITTER_MAX);
            last = t;
        }
        // Given up: nothing waits, no index is held, nothing more is armed but the
        // zeroing of whatever a partial exchange left.
        assert!(staged(&mut d, id).is_empty());
        assert_eq!(d.index_count(), 0);
        let p = d.peer(id).unwrap();
        assert_eq!(p.timers.retransmit_handshake, None);
        let zero_at = p.timers.zero_key_material.expect("armed on giving up");
        assert!(zero_at > last + ZERO_KEYS_AFTER - REKEY_TIMEOUT - REKEY_TIMEOUT_JITTER_MAX);
        assert_eq!(d.next_deadline(), Some(zero_at));
        assert!(run_until(&mut d, zero_at).is_empty());
        assert_eq!(d.next_deadline(), None);
    }

    #[test]
    fn keys_are_zeroed_when_no_new_handshake_comes() {
        let t0 = Instant::now();
        let mut p = pair(t0);
        p.handshake(t0);
        let t = p.a.send_ticket(p.b_in_a, t0).unwrap();
        assert!(p.keys.is_live(t.key));
        let zero_at = p.a.peer(p.b_in_a).unwrap().timers.zero_key_material;
        assert_eq!(zero_at, Some(t0 + ZERO_KEYS_AFTER));
        // Whatever else runs on the way (keepalives, new handshakes to nowhere), the
        // keys are gone at the deadline.
        run_until(&mut p.a, t0 + ZERO_KEYS_AFTER);
        assert!(!p.keys.is_live(t.key));
        assert!(p.a.send_ticket(p.b_in_a, t0 + ZERO_KEYS_AFTER).is_err());
    }

    #[test]
    fn a_timer_armed_after_a_tick_is_seen_by_the_next() {
        let t0 = Instant::now();
        let keys = Arc::new(KeyRegistry::new(8));
        let mut d = device(&keys, t0);
        let ids: Vec<PeerId> = (0..100).map(|_| peer(&mut d)).collect();
        d.tick(t0);
        assert_eq!(d.next_deadline(), None);
        d.stage(ids[57], 0, t0);
        sent(&mut d);
        let due = d.next_deadline().expect("the retransmission");
        d.tick(t0 + SECOND);
        assert_eq!(
            d.next_deadline(),
            Some(due),
            "kept across a tick with nothing due"
        );
        d.tick(due);
        assert_eq!(sent(&mut d).len(), 1);
    }
}
