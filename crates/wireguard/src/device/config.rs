//! Peer configuration: the static key, peers, pre-shared keys, endpoints, persistent
//! keepalive and allowed IPs, set by the UAPI and read back by `wg show`. Kept apart
//! from the protocol so that what an operator can change is in one place, and so that
//! the rules that tie configuration to sessions (a new static key drops every
//! session; a removed peer gives back its indices and keys) are visible together.

use super::Device;
use crate::allowed_ips::Prefix;
use crate::cookie::CookieChecker;
use crate::noise::Identity;
use crate::peer::{Peer, PeerId};
use crypto::x25519::{PrivateKey, PublicKey};
use std::net::SocketAddr;
use std::time::{Instant, SystemTime};

/// A peer's configuration and counters, as `wg show` wants them.
#[derive(Debug, Clone)]
pub struct PeerInfo {
    pub public_key: PublicKey,
    pub preshared_key: [u8; 32],
    pub endpoint: Option<SocketAddr>,
    pub persistent_keepalive: u16,
    pub allowed_ips: Vec<Prefix>,
    pub last_handshake: Option<SystemTime>,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
}

impl Device {
    pub fn private_key(&self) -> Option<&PrivateKey> {
        self.identity.as_ref().map(|i| &i.private)
    }

    pub fn public_key(&self) -> Option<PublicKey> {
        self.identity.as_ref().map(|i| i.public)
    }

    /// Sets or clears the static key. Every session is dropped (they were made with
    /// the old key), and a peer whose public key equals our new one is removed.
    pub fn set_private_key(&mut self, key: Option<PrivateKey>) {
        if let (Some(old), Some(new)) = (self.private_key(), key.as_ref())
            && old.ct_eq(new)
        {
            return;
        }
        self.identity = key.map(Identity::new);
        self.checker = self
            .identity
            .as_ref()
            .map(|i| CookieChecker::new(&i.public));
        if let Some(public) = self.public_key()
            && let Some(&id) = self.by_key.get(&public.0)
        {
            self.remove_peer(id);
        }
        for id in self.peer_ids() {
            self.clear_sessions(id);
        }
    }

    pub fn peer_ids(&self) -> Vec<PeerId> {
        (0..self.peers.len() as u32)
            .map(PeerId)
            .filter(|id| self.peers[id.0 as usize].is_some())
            .collect()
    }

    pub fn peer_id(&self, public: &PublicKey) -> Option<PeerId> {
        self.by_key.get(&public.0).copied()
    }

    /// Adds a peer, or returns the existing one with that key. `None` when the key
    /// is our own public key (a peer cannot be ourselves).
    pub fn add_peer(&mut self, public: PublicKey) -> Option<PeerId> {
        if let Some(&id) = self.by_key.get(&public.0) {
            return Some(id);
        }
        if self.public_key() == Some(public) {
            return None;
        }
        let peer = Some(Box::new(Peer::new(public)));
        let id = match self.free_slots.pop() {
            Some(i) => {
                self.peers[i as usize] = peer;
                PeerId(i)
            }
            None => {
                self.peers.push(peer);
                PeerId(self.peers.len() as u32 - 1)
            }
        };
        self.by_key.insert(public.0, id);
        self.view_changed();
        Some(id)
    }

    /// Removes a peer with its sessions (their indices and keys are released) and
    /// its allowed IPs.
    pub fn remove_peer(&mut self, id: PeerId) {
        self.clear_sessions(id);
        self.allowed_ips.remove_value(id);
        self.allowed_ips_changed();
        if let Some(peer) = self.peers.get_mut(id.0 as usize).and_then(Option::take) {
            self.by_key.remove(&peer.public_key.0);
            self.free_slots.push(id.0);
            // Give memory back after a mass removal, not on every one.
            if self.by_key.capacity() > 1024 && self.by_key.len() * 4 < self.by_key.capacity() {
                self.by_key.shrink_to_fit();
            }
        }
    }

    pub fn remove_all_peers(&mut self) {
        for id in self.peer_ids() {
            self.remove_peer(id);
        }
    }

    pub fn set_preshared_key(&mut self, id: PeerId, psk: [u8; 32]) {
        if let Some(p) = self.peer_mut(id) {
            *p.preshared_key = psk;
        }
    }

    pub fn set_endpoint(&mut self, id: PeerId, endpoint: SocketAddr) {
        if let Some(p) = self.peer_mut(id) {
            p.endpoint = Some(endpoint);
            self.view_changed();
        }
    }

    /// Sets the persistent keepalive interval in seconds (0 = off). Turning it on
    /// sends a keepalive at once, as the reference implementations do.
    pub fn set_persistent_keepalive(&mut self, id: PeerId, seconds: u16, now: Instant) {
        let Some(p) = self.peer_mut(id) else { return };
        let was = p.persistent_keepalive;
        p.persistent_keepalive = seconds;
        if seconds == 0 {
            p.timers.persistent_keepalive = None;
        } else if was == 0 {
            self.send_keepalive(id, now);
        }
    }

    pub fn add_allowed_ip(&mut self, id: PeerId, prefix: Prefix) {
        if self.peer(id).is_some() {
            self.allowed_ips.insert(prefix, id);
            self.allowed_ips_changed();
        }
    }

    pub fn remove_allowed_ip(&mut self, id: PeerId, prefix: Prefix) -> bool {
        self.allowed_ips_changed();
        self.allowed_ips.remove(prefix, id)
    }

    pub fn clear_allowed_ips(&mut self, id: PeerId) {
        self.allowed_ips_changed();
        self.allowed_ips.remove_value(id);
    }

    pub fn peer_info(&self, id: PeerId) -> Option<PeerInfo> {
        let p = self.peer(id)?;
        Some(PeerInfo {
            public_key: p.public_key,
            preshared_key: *p.preshared_key,
            endpoint: p.endpoint,
            persistent_keepalive: p.persistent_keepalive,
            allowed_ips: self.allowed_ips.prefixes_of(id),
            last_handshake: p.last_handshake,
            rx_bytes: p.rx_bytes,
            tx_bytes: p.tx_bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::Action;
    use super::super::testing::*;
    use crate::Staged;
    use crypto::KeyRegistry;
    use crypto::x25519::PrivateKey;
    use std::sync::Arc;
    use std::time::Instant;

    #[test]
    fn a_key_names_one_peer_and_never_ourselves() {
        let keys = Arc::new(KeyRegistry::new(8));
        let mut d = device(&keys, Instant::now());
        let k = PrivateKey::generate().public_key();
        let id = d.add_peer(k).unwrap();
        assert_eq!(d.add_peer(k), Some(id));
        assert_eq!(d.peer_id(&k), Some(id));
        assert_eq!(d.add_peer(d.public_key().unwrap()), None);
        assert_eq!(d.peer_ids(), [id]);
    }

    #[test]
    fn a_removed_peers_slot_is_reused_and_its_routes_go() {
        let keys = Arc::new(KeyRegistry::new(8));
        let mut d = device(&keys, Instant::now());
        let first = peer(&mut d);
        let second = peer(&mut d);
        d.add_allowed_ip(first, "10.0.0.0/8".parse().unwrap());
        d.remove_peer(first);
        assert_eq!(d.peer_for_destination("10.1.2.3".parse().unwrap()), None);
        assert!(d.peer_info(first).is_none());
        let third = peer(&mut d);
        assert_eq!(third, first);
        assert_ne!(third, second);
        assert!(d.peer_info(third).unwrap().allowed_ips.is_empty());
    }

    #[test]
    fn allowed_ips_for_no_peer_are_ignored() {
        let keys = Arc::new(KeyRegistry::new(8));
        let mut d = device(&keys, Instant::now());
        let id = peer(&mut d);
        d.remove_peer(id);
        d.add_allowed_ip(id, "10.0.0.0/8".parse().unwrap());
        assert_eq!(d.peer_for_destination("10.0.0.1".parse().unwrap()), None);
    }

    #[test]
    fn peer_info_shows_what_was_set() {
        let keys = Arc::new(KeyRegistry::new(8));
        let now = Instant::now();
        let mut d = device(&keys, now);
        let id = peer(&mut d);
        d.set_preshared_key(id, [7; 32]);
        d.set_persistent_keepalive(id, 25, now);
        d.add_allowed_ip(id, "10.0.0.0/8".parse().unwrap());
        d.add_allowed_ip(id, "10.9.0.0/16".parse().unwrap());
        assert!(d.remove_allowed_ip(id, "10.9.0.0/16".parse().unwrap()));
        let info = d.peer_info(id).unwrap();
        assert_eq!(info.preshared_key, [7; 32]);
        assert_eq!(info.endpoint, Some(addr(B_ADDR)));
        assert_eq!(info.persistent_keepalive, 25);
        assert_eq!(info.allowed_ips, ["10.0.0.0/8".parse().unwrap()]);
        assert_eq!(info.last_handshake, None);
        d.clear_allowed_ips(id);
        assert!(d.peer_info(id).unwrap().allowed_ips.is_empty());
    }

    #[test]
    fn turning_persistent_keepalive_on_sends_one_at_once() {
        let keys = Arc::new(KeyRegistry::new(8));
        let now = Instant::now();
        let mut d = device(&keys, now);
        let id = peer(&mut d);
        d.set_persistent_keepalive(id, 25, now);
        assert_eq!(actions(&mut d), [Action::Flush(id)]);
        assert_eq!(staged(&mut d, id), [Staged::Keepalive]);
        // Changing the interval while on sends nothing more.
        d.set_persistent_keepalive(id, 30, now);
        assert!(actions(&mut d).is_empty());
        // Off disarms the timer.
        d.note_sent(id, 0, 32, now);
        assert!(d.peer(id).unwrap().timers.persistent_keepalive.is_some());
        d.set_persistent_keepalive(id, 0, now);
        assert_eq!(d.peer(id).unwrap().timers.persistent_keepalive, None);
        assert!(actions(&mut d).is_empty());
    }

    #[test]
    fn a_new_static_key_drops_every_session_and_a_peer_with_that_key() {
        let now = Instant::now();
        let mut p = pair(now);
        p.handshake(now);
        // The same key again keeps every session.
        let same = PrivateKey::from_bytes(p.a.private_key().unwrap().to_bytes());
        p.a.set_private_key(Some(same));
        assert!(p.a.send_ticket(p.b_in_a, now).is_ok());
        let key = PrivateKey::generate();
        let other = p.a.add_peer(key.public_key()).unwrap();
        p.a.set_private_key(Some(key));
        assert!(p.a.peer(other).is_none());
        assert_eq!(p.a.index_count(), 0);
        assert!(p.a.send_ticket(p.b_in_a, now).is_err());
    }
}
