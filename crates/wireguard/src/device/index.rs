//! Receiver indices (whitepaper section 5.4.2): the 32-bit numbers we hand a peer to
//! name our half of a handshake or session. One index lives as long as our initiation
//! in flight or the keypair it names; the table maps it back to the peer.
//!
//! An index is allocated and registered in one place ([`Device::alloc_index`]) and
//! released in one place ([`Device::release_index`]), so that no path (a refused
//! handshake, a keypair pushed out, a peer removed, keys zeroed by the timer) can leak
//! one or free one that is still in use.

use super::Device;
use crate::drop::DropReason;
use crate::keypair::Keypair;
use crate::peer::PeerId;
use rand::RngCore;
use std::sync::Arc;

impl Device {
    /// A fresh receiver index for `id`, registered: random, and never one that is
    /// live (a live index names exactly one handshake or keypair).
    pub(super) fn alloc_index(&mut self, id: PeerId) -> u32 {
        self.alloc_index_from(id, || rand::rngs::OsRng.next_u32())
    }

    /// [`Device::alloc_index`] with the random source as an argument, for tests.
    fn alloc_index_from(&mut self, id: PeerId, mut random: impl FnMut() -> u32) -> u32 {
        loop {
            let i = random();
            if let std::collections::hash_map::Entry::Vacant(e) = self.indices.entry(i) {
                e.insert(id);
                return i;
            }
        }
    }

    /// Gives an index back: its handshake or keypair is gone.
    pub(super) fn release_index(&mut self, index: u32) {
        self.indices.remove(&index);
    }

    /// Releases the indices of keypairs that were dropped (pushed out of their slots);
    /// dropping them removes their keys from the registry.
    pub(super) fn release_keypairs(&mut self, gone: impl IntoIterator<Item = Arc<Keypair>>) {
        for k in gone {
            self.release_index(k.local_index);
        }
        // Every session made, confirmed or dropped ends up here: the data path's
        // view must follow.
        self.view_changed();
    }

    /// The peer an index of ours names, if it is live.
    pub(super) fn index_owner(&self, index: u32) -> Option<PeerId> {
        self.indices.get(&index).copied()
    }

    /// Forgets a peer's keypairs (their keys are zeroed) and its initiation in flight,
    /// releasing their indices.
    pub(super) fn forget_keys(&mut self, id: PeerId) {
        let Some(p) = self.peer_mut_quiet(id) else {
            return;
        };
        let gone = p.keypairs.clear();
        let initiation = p.initiation.take().map(|s| s.local_index);
        self.release_keypairs(gone);
        if let Some(i) = initiation {
            self.release_index(i);
        }
    }

    /// Forgets every handshake and keypair of a peer, its timers and staged packets.
    pub(super) fn clear_sessions(&mut self, id: PeerId) {
        self.forget_keys(id);
        if let Some(p) = self.peer_mut_quiet(id) {
            p.timers = Default::default();
        }
        self.discard_staged(id, DropReason::StagedDiscarded);
    }

    /// Live receiver indices (handshakes in flight and keypairs), for tests and stats.
    pub fn index_count(&self) -> usize {
        self.indices.len()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use crate::DropReason;
    use crypto::KeyRegistry;
    use std::sync::Arc;
    use std::time::Instant;

    #[test]
    fn a_live_index_is_never_handed_out_again() {
        let keys = Arc::new(KeyRegistry::new(8));
        let mut d = device(&keys, Instant::now());
        let (x, y) = (peer(&mut d), peer(&mut d));
        let mut draws = [7, 7, 7, 7, 9, 7, 9, 11].into_iter();
        let mut next = || draws.next().expect("enough draws");
        assert_eq!(d.alloc_index_from(x, &mut next), 7);
        assert_eq!(d.alloc_index_from(y, &mut next), 9);
        assert_eq!(d.alloc_index_from(x, &mut next), 11);
        assert_eq!(d.index_count(), 3);
        assert_eq!(
            (d.index_owner(7), d.index_owner(9), d.index_owner(11)),
            (Some(x), Some(y), Some(x))
        );
        // Released, it may be drawn again.
        d.release_index(7);
        assert_eq!(d.index_owner(7), None);
        assert_eq!(d.alloc_index_from(y, || 7), 7);
        assert_eq!(d.index_owner(7), Some(y));
    }

    #[test]
    fn removing_a_peer_releases_its_indices_and_keys() {
        let now = Instant::now();
        let mut p = pair(now);
        p.handshake(now);
        // a: its current keypair; and a new initiation in flight.
        let t = p.a.send_ticket(p.b_in_a, now).unwrap();
        let later = now + crate::constants::REKEY_TIMEOUT;
        p.a.stage(p.b_in_a, 20, later);
        sent(&mut p.a);
        assert_eq!(p.a.index_count(), 2);
        assert!(p.keys.is_live(t.key));
        p.a.remove_peer(p.b_in_a);
        assert_eq!(p.a.index_count(), 0);
        assert!(!p.keys.is_live(t.key));
        // b's session, confirmed, goes with b's peer too.
        let r = p.b.recv_ticket(t.receiver_index, t.counter, now).unwrap();
        assert_eq!(p.b.index_count(), 1);
        p.b.remove_peer(p.a_in_b);
        assert_eq!(p.b.index_count(), 0);
        assert!(!p.keys.is_live(r.key));
        assert_eq!(p.keys.live_keys(), 0);
        assert_eq!(
            p.b.recv_ticket(t.receiver_index, t.counter, now).err(),
            Some(DropReason::UnknownIndex)
        );
    }

    #[test]
    fn a_refused_initiation_keeps_no_index() {
        let now = Instant::now();
        let mut p = pair(now);
        let init = p.initiate(0, now);
        assert_eq!(p.b.index_count(), 1);
        // The same initiation again is a replay: no second index.
        assert_eq!(
            p.b.handle_handshake(parse(&init), addr(A_ADDR), now),
            Err(DropReason::StaleTimestamp)
        );
        assert_eq!(p.b.index_count(), 1);
    }

    #[test]
    fn a_new_initiation_releases_the_one_it_replaces() {
        let now = Instant::now();
        let mut p = pair(now);
        p.a.stage(p.b_in_a, 0, now);
        let first = one_sent(&mut p.a);
        let later = now + crate::constants::REKEY_TIMEOUT;
        p.a.stage(p.b_in_a, 0, later);
        let second = one_sent(&mut p.a);
        assert_eq!(p.a.index_count(), 1);
        let index = |m: &[u8]| {
            wire::wireguard::HandshakeInitiation::new_checked(m)
                .unwrap()
                .sender_index()
        };
        assert_ne!(index(&first), index(&second));
        assert_eq!(p.a.index_owner(index(&first)), None);
        assert_eq!(p.a.index_owner(index(&second)), Some(p.b_in_a));
    }
}
