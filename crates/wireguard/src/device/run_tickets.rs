//! Tickets for a run of packets on one session within one frame: the session is
//! found once (by receiver index, or by peer), and each further packet of the run
//! only has its counter checked or taken. Nothing a frame's preparation does changes
//! a peer's sessions or endpoint, and the frame reads one clock, so what was found
//! for the frame's first packet on a session holds for the rest of the frame. A
//! caller keeps a run for one frame at most: between frames a handshake may replace
//! the session, or a report move the endpoint.

use super::Device;
use crate::datapath::Follower;
use crate::drop::DropReason;
use crate::keypair::Keypair;
use crate::peer::PeerId;
use crate::session::{RecvTicket, SendTicket, recv_ticket_on};
use std::sync::Arc;
use std::time::Instant;

/// The session a receiver index names, held for the frame's packets that carry it.
pub struct RecvRun {
    index: u32,
    peer: PeerId,
    keypair: Arc<Keypair>,
}

impl RecvRun {
    /// The run of `index`, from what a session lookup by that index found.
    fn found(
        index: u32,
        session: Result<(PeerId, &Arc<Keypair>), DropReason>,
    ) -> Result<RecvRun, DropReason> {
        let (peer, k) = session?;
        Ok(RecvRun {
            index,
            peer,
            keypair: k.clone(),
        })
    }

    /// The receiver index the run was found by.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The ticket for a packet of the run with `counter`, or why it may not be
    /// decrypted now (see [`Device::recv_ticket`]). Changes nothing.
    pub fn ticket(&self, counter: u64, now: Instant) -> Result<RecvTicket, DropReason> {
        recv_ticket_on(self.peer, &self.keypair, counter, now)
    }
}

impl Device {
    /// The session for packets with `receiver_index`, to take their tickets on.
    pub fn recv_run(&self, receiver_index: u32) -> Result<RecvRun, DropReason> {
        RecvRun::found(receiver_index, self.session_by_index(receiver_index))
    }

    /// Moves `t`, a ticket this frame took, on to the next counter of this
    /// worker's block for its session (the key, index and endpoint stay); false,
    /// and `t` untouched, when the block is used up: take a full ticket then
    /// ([`Device::send_ticket`]).
    pub fn advance_ticket(&mut self, t: &mut SendTicket) -> bool {
        advance(self.send_blocks.next_of(t.serial), t)
    }

    /// `peer`'s current session if its serial is `serial` (a ticket's): what the
    /// data path holds while the packets sealed on it wait for their driver (the
    /// late check).
    pub fn ticket_session(&self, peer: PeerId, serial: u64) -> Option<Arc<Keypair>> {
        let p = self.peers.get(peer.0 as usize)?.as_deref()?;
        p.keypairs
            .current
            .as_ref()
            .filter(|k| k.serial == serial)
            .cloned()
    }
}

impl Follower {
    /// The session for packets with `receiver_index`, to take their tickets on.
    pub fn recv_run(&self, receiver_index: u32) -> Result<RecvRun, DropReason> {
        RecvRun::found(receiver_index, self.session_by_index(receiver_index))
    }

    /// As [`Device::advance_ticket`], from this worker's blocks.
    pub fn advance_ticket(&mut self, t: &mut SendTicket) -> bool {
        advance(self.blocks_mut().next_of(t.serial), t)
    }

    /// As [`Device::ticket_session`], from the view.
    pub fn ticket_session(&self, peer: PeerId, serial: u64) -> Option<Arc<Keypair>> {
        self.sending_session(peer)
            .filter(|k| k.serial == serial)
            .cloned()
    }
}

fn advance(counter: Option<u64>, t: &mut SendTicket) -> bool {
    match counter {
        Some(c) => {
            t.counter = c;
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use crate::DropReason;
    use crate::datapath::{COUNTER_BLOCK, Follower};
    use crate::device::SendTicket;
    use crypto::KeyRegistry;
    use std::collections::HashSet;
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
    fn owner_and_followers_advancing_tickets_never_share_a_counter() {
        let now = Instant::now();
        let mut p = pair(now);
        p.handshake(now);
        p.a.publish();
        let mut followers: Vec<Follower> = (0..3).map(|_| Follower::new(p.a.view_cell())).collect();
        let mut seen = HashSet::new();
        for round in 0..20 {
            let mut t = p.a.send_ticket(p.b_in_a, now).unwrap();
            assert!(seen.insert(t.counter), "owner: {}", t.counter);
            for _ in 0..(round % 5) * 70 {
                if !p.a.advance_ticket(&mut t) {
                    t = p.a.send_ticket(p.b_in_a, now).unwrap();
                }
                assert!(seen.insert(t.counter), "owner: {}", t.counter);
            }
            for f in &mut followers {
                let mut last = f.send_ticket(p.b_in_a, now).unwrap();
                assert!(seen.insert(last.counter), "follower: {}", last.counter);
                for _ in 0..(round % 7) * 60 {
                    if !f.advance_ticket(&mut last) {
                        last = f.send_ticket(p.b_in_a, now).unwrap();
                    }
                    assert!(seen.insert(last.counter), "follower: {}", last.counter);
                }
                f.end_run();
            }
        }
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
