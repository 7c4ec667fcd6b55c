//! The device: the interface's identity, its peers, the index table, cookies and rate
//! limits, and the entry points the data path calls. It reads no clock (`now` is an
//! argument) and touches no socket: what it wants sent comes out of
//! [`Device::poll_action`].

use crate::allowed_ips::{AllowedIps, Prefix};
use crate::constants::*;
use crate::cookie::{CookieChecker, MacCheck};
use crate::drop::DropReason;
use crate::keypair::{Keypair, Slot};
use crate::noise::{self, HandshakeError, Identity};
use crate::peer::{Peer, PeerId};
use crate::ratelimit::{LoadMonitor, RateLimiter};
use crate::tai64n::Tai64N;
use crypto::x25519::{PrivateKey, PublicKey};
use crypto::{KeyHandle, KeyRegistry};
use rand::{Rng, RngCore};
use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use wire::wireguard as msg;

/// Something the device wants done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send these bytes (a handshake message or a cookie reply) to `to`.
    Send { to: SocketAddr, packet: Vec<u8> },
    /// The peer's staged packets can go now: a session was made, or a keepalive is
    /// due (then an empty packet is staged).
    Flush(PeerId),
}

/// Everything the data path needs to encrypt one packet to a peer.
#[derive(Debug, Clone, Copy)]
pub struct SendTicket {
    pub key: KeyHandle,
    pub counter: u64,
    pub receiver_index: u32,
    pub endpoint: SocketAddr,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// No usable session: stage the packet; a handshake has been asked for.
    NoSession,
    NoEndpoint,
}

/// What the data path needs to decrypt one packet, found by receiver index.
#[derive(Debug, Clone, Copy)]
pub struct RecvTicket {
    pub peer: PeerId,
    pub key: KeyHandle,
    pub local_index: u32,
}

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

pub struct Device {
    identity: Option<Identity>,
    checker: Option<CookieChecker>,
    keys: Arc<KeyRegistry>,
    /// Boxed so that a removed peer's slot costs a pointer, not a whole peer.
    peers: Vec<Option<Box<Peer>>>,
    /// Empty slots in `peers`, reused before the vector grows.
    free_slots: Vec<u32>,
    /// No armed timer of any peer is earlier than this, except those of the peers in
    /// `touched` (changed since; folded in by the next `tick`). `None`: nothing armed.
    /// A `tick` before it costs nothing, whatever the number of peers.
    timer_floor: Option<Instant>,
    touched: Vec<PeerId>,
    by_key: HashMap<[u8; 32], PeerId>,
    allowed_ips: AllowedIps<PeerId>,
    /// Our receiver indices: handshakes in flight and live keypairs.
    indices: crate::index_hash::IndexMap<PeerId>,
    ratelimiter: RateLimiter,
    load: LoadMonitor,
    actions: VecDeque<Action>,
    /// Maps the monotonic `now` to wall time, for TAI64N and `last_handshake`.
    wall_base: (Instant, SystemTime),
}

fn jitter() -> Duration {
    Duration::from_millis(
        rand::thread_rng().gen_range(0..=REKEY_TIMEOUT_JITTER_MAX.as_millis() as u64),
    )
}

impl Device {
    /// `keys` is the registry the data path's engines read; `now` and `wall` pin the
    /// monotonic clock to wall time.
    pub fn new(keys: Arc<KeyRegistry>, now: Instant, wall: SystemTime) -> Device {
        Device {
            identity: None,
            checker: None,
            keys,
            peers: Vec::new(),
            free_slots: Vec::new(),
            timer_floor: None,
            touched: Vec::new(),
            by_key: HashMap::new(),
            allowed_ips: AllowedIps::new(),
            indices: Default::default(),
            ratelimiter: RateLimiter::default(),
            load: LoadMonitor::new(DEFAULT_HANDSHAKES_PER_SECOND_UNDER_LOAD),
            actions: VecDeque::new(),
            wall_base: (now, wall),
        }
    }

    fn wall(&self, now: Instant) -> SystemTime {
        self.wall_base.1 + now.saturating_duration_since(self.wall_base.0)
    }

    pub fn keys(&self) -> &Arc<KeyRegistry> {
        &self.keys
    }

    /// Handshake messages per second above which cookies are demanded.
    pub fn set_under_load_threshold(&mut self, per_second: u32) {
        self.load.set_threshold(per_second);
    }

    // ---- configuration -------------------------------------------------------

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

    pub fn peer(&self, id: PeerId) -> Option<&Peer> {
        self.peers.get(id.0 as usize)?.as_deref()
    }

    /// The peer, to change. Every change that may arm a timer goes through here (or
    /// marks the peer itself), so the peer is noted as touched for `tick`.
    fn peer_mut(&mut self, id: PeerId) -> Option<&mut Peer> {
        let p = self.peers.get_mut(id.0 as usize)?.as_deref_mut()?;
        if !p.timers_touched {
            p.timers_touched = true;
            self.touched.push(id);
        }
        Some(p)
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
        Some(id)
    }

    pub fn remove_peer(&mut self, id: PeerId) {
        self.clear_sessions(id);
        self.allowed_ips.remove_value(id);
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
        }
    }

    pub fn remove_allowed_ip(&mut self, id: PeerId, prefix: Prefix) -> bool {
        self.allowed_ips.remove(prefix, id)
    }

    pub fn clear_allowed_ips(&mut self, id: PeerId) {
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

    /// Forgets every handshake and keypair of a peer (keys are zeroed).
    fn clear_sessions(&mut self, id: PeerId) {
        let Some(p) = self
            .peers
            .get_mut(id.0 as usize)
            .and_then(|p| p.as_deref_mut())
        else {
            return;
        };
        let mut gone: Vec<u32> = p.keypairs.indices().collect();
        p.keypairs.clear();
        if let Some(init) = p.initiation.take() {
            gone.push(init.local_index);
        }
        p.timers = Default::default();
        p.staged.clear();
        for i in gone {
            self.indices.remove(&i);
        }
    }

    fn new_index(&mut self, id: PeerId) -> u32 {
        loop {
            let i = rand::rngs::OsRng.next_u32();
            if let std::collections::hash_map::Entry::Vacant(e) = self.indices.entry(i) {
                e.insert(id);
                return i;
            }
        }
    }

    // ---- outbound data -------------------------------------------------------

    pub fn peer_for_destination(&self, dst: IpAddr) -> Option<PeerId> {
        self.allowed_ips.lookup(dst)
    }

    /// Counter and key for one packet to `id`, or why not. On `NoSession` the caller
    /// stages the packet ([`Device::stage`]).
    pub fn send_ticket(&mut self, id: PeerId, now: Instant) -> Result<SendTicket, SendError> {
        let p = self.peer_mut(id).ok_or(SendError::NoSession)?;
        let endpoint = p.endpoint.ok_or(SendError::NoEndpoint)?;
        match p.keypairs.current.as_mut() {
            Some(k) if k.can_send(now) => {
                let counter = k.send_counter;
                k.send_counter += 1;
                Ok(SendTicket {
                    key: k.send_key,
                    counter,
                    receiver_index: k.remote_index,
                    endpoint,
                })
            }
            _ => Err(SendError::NoSession),
        }
    }

    /// Queues a plaintext packet for `id` until a session exists, and asks for one.
    /// Returns false when the oldest staged packet had to be dropped to make room.
    pub fn stage(&mut self, id: PeerId, packet: Vec<u8>, now: Instant) -> bool {
        let Some(p) = self.peer_mut(id) else {
            return false;
        };
        let mut kept_all = true;
        if p.staged.len() >= MAX_STAGED_PACKETS {
            p.staged.pop_front();
            kept_all = false;
        }
        p.staged.push_back(packet);
        self.initiate(id, false, now);
        kept_all
    }

    pub fn take_staged(&mut self, id: PeerId) -> VecDeque<Vec<u8>> {
        self.peer_mut(id)
            .map(|p| std::mem::take(&mut p.staged))
            .unwrap_or_default()
    }

    /// The data path sent a packet to `id` (`plaintext_len` 0 is a keepalive).
    pub fn note_sent(&mut self, id: PeerId, plaintext_len: usize, wire_len: usize, now: Instant) {
        let Some(p) = self.peer_mut(id) else { return };
        p.tx_bytes += wire_len as u64;
        // any authenticated packet sent / traversal
        p.timers.send_keepalive = None;
        if p.persistent_keepalive > 0 {
            p.timers.persistent_keepalive =
                Some(now + Duration::from_secs(p.persistent_keepalive as u64));
        }
        if plaintext_len > 0 && p.timers.new_handshake.is_none() {
            p.timers.new_handshake = Some(now + KEEPALIVE_TIMEOUT + REKEY_TIMEOUT + jitter());
        }
        // Section 6.2: rekey after REKEY_AFTER_MESSAGES, or (initiator) REKEY_AFTER_TIME.
        let stale = p.keypairs.current.as_ref().is_some_and(|k| {
            k.send_counter > REKEY_AFTER_MESSAGES || (k.initiator && now >= k.rekey_at)
        });
        if stale {
            self.initiate(id, false, now);
        }
    }

    // ---- inbound data --------------------------------------------------------

    /// Finds the session for a data packet and checks its counter, changing nothing.
    pub fn recv_ticket(
        &self,
        receiver_index: u32,
        counter: u64,
        now: Instant,
    ) -> Result<RecvTicket, DropReason> {
        let &id = self
            .indices
            .get(&receiver_index)
            .ok_or(DropReason::UnknownIndex)?;
        let p = self.peer(id).ok_or(DropReason::UnknownIndex)?;
        let (_, k) = p
            .keypairs
            .find(receiver_index)
            .ok_or(DropReason::UnknownIndex)?;
        if !k.can_receive(now) {
            return Err(DropReason::KeyExpired);
        }
        if !k.replay.check(counter) {
            return Err(if counter >= REJECT_AFTER_MESSAGES {
                DropReason::KeyExpired
            } else {
                DropReason::Replay
            });
        }
        Ok(RecvTicket {
            peer: id,
            key: k.recv_key,
            local_index: receiver_index,
        })
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
        if let Some(ip) = inner_src
            && self.allowed_ips.lookup(ip) != Some(t.peer)
        {
            return Err(DropReason::SourceNotAllowed);
        }
        let wall = self.wall(now);
        let p = self.peer_mut(t.peer).ok_or(DropReason::UnknownIndex)?;
        let (slot, k) = p
            .keypairs
            .find_mut(t.local_index)
            .ok_or(DropReason::UnknownIndex)?;
        if !k.replay.commit(counter) {
            return Err(DropReason::Replay);
        }
        let rekey_on_receive = slot == Slot::Current
            && k.initiator
            && now >= k.rekey_on_receive_at
            && !p.timers.sent_lastminute_handshake;
        p.rx_bytes += wire_len as u64;
        p.endpoint = Some(src);
        let mut confirmed = false;
        if slot == Slot::Next {
            if let Some(old) = p.keypairs.confirm_next() {
                self.indices.remove(&old.local_index);
            }
            confirmed = true;
        }
        let p = self.peer_mut(t.peer).expect("looked up above");
        if confirmed {
            Self::handshake_complete(p, wall);
        }
        // any authenticated packet received / traversal; data received
        p.timers.new_handshake = None;
        if p.persistent_keepalive > 0 {
            p.timers.persistent_keepalive =
                Some(now + Duration::from_secs(p.persistent_keepalive as u64));
        }
        if inner_src.is_some() {
            if p.timers.send_keepalive.is_none() {
                p.timers.send_keepalive = Some(now + KEEPALIVE_TIMEOUT);
            } else {
                p.timers.need_another_keepalive = true;
            }
        }
        if rekey_on_receive {
            p.timers.sent_lastminute_handshake = true;
            self.initiate(t.peer, false, now);
        }
        if confirmed && !self.peer(t.peer).is_some_and(|p| p.staged.is_empty()) {
            self.actions.push_back(Action::Flush(t.peer));
        }
        Ok(())
    }

    fn handshake_complete(p: &mut Peer, wall: SystemTime) {
        p.timers.retransmit_handshake = None;
        p.timers.handshake_attempts = 0;
        p.timers.sent_lastminute_handshake = false;
        p.last_handshake = Some(wall);
    }

    // ---- handshakes ----------------------------------------------------------

    /// Sends an initiation to `id` unless one went out less than REKEY_TIMEOUT ago.
    /// `retry` keeps the attempt count (the retransmit timer); anything else resets it.
    fn initiate(&mut self, id: PeerId, retry: bool, now: Instant) {
        let wall = self.wall(now);
        let Some(identity) = self.identity.as_ref() else {
            return;
        };
        let Some(p) = self.peer(id) else {
            return;
        };
        if p.timers
            .last_sent_handshake
            .is_some_and(|t| now.saturating_duration_since(t) < REKEY_TIMEOUT)
        {
            return;
        }
        let Some(endpoint) = p.endpoint else { return };
        let public = p.public_key;
        let index = loop {
            let i = rand::rngs::OsRng.next_u32();
            if !self.indices.contains_key(&i) {
                break i;
            }
        };
        let mut packet = [0u8; msg::HANDSHAKE_INITIATION_LEN];
        let Ok(state) =
            noise::create_initiation(identity, &public, index, Tai64N::at(wall), &mut packet)
        else {
            return; // our static and theirs make a zero DH: this peer can never work
        };
        if !self.peer(id).expect("checked above").timers_touched {
            self.peer_mut(id); // notes the timers below for `tick`
        }
        let p = self.peers[id.0 as usize]
            .as_deref_mut()
            .expect("checked above");
        if let Some(old) = p.initiation.replace(state) {
            self.indices.remove(&old.local_index);
        }
        self.indices.insert(index, id);
        if !retry {
            p.timers.handshake_attempts = 0;
        }
        p.cookies.stamp(&mut packet, now);
        p.timers.last_sent_handshake = Some(now);
        p.timers.retransmit_handshake = Some(now + REKEY_TIMEOUT + jitter());
        p.timers.send_keepalive = None;
        if p.persistent_keepalive > 0 {
            p.timers.persistent_keepalive =
                Some(now + Duration::from_secs(p.persistent_keepalive as u64));
        }
        self.actions.push_back(Action::Send {
            to: endpoint,
            packet: packet.to_vec(),
        });
    }

    /// Handles one handshake-class message (initiation, response, cookie reply) from
    /// `src`. Data messages go to [`Device::recv_ticket`] instead.
    pub fn handle_handshake(
        &mut self,
        packet: &[u8],
        src: SocketAddr,
        now: Instant,
    ) -> Result<(), DropReason> {
        let kind = msg::Message::classify(packet).map_err(DropReason::from)?;
        match kind {
            msg::MessageType::HandshakeInitiation => self.handle_initiation(packet, src, now),
            msg::MessageType::HandshakeResponse => self.handle_response(packet, src, now),
            msg::MessageType::CookieReply => self.handle_cookie_reply(packet, now),
            msg::MessageType::TransportData => Err(DropReason::UnknownType),
        }
    }

    /// MAC1, then (under load) MAC2 or a cookie reply, then the rate limit.
    fn check_macs(
        &mut self,
        packet: &[u8],
        sender_index: u32,
        src: SocketAddr,
        now: Instant,
    ) -> Result<(), DropReason> {
        let checker = self.checker.as_mut().ok_or(DropReason::NoPrivateKey)?;
        let load = &mut self.load;
        let mut under_load = false;
        let verdict = checker.check(
            packet,
            src,
            || {
                under_load = load.note_handshake(now);
                under_load
            },
            now,
        );
        match verdict {
            MacCheck::BadMac1 => Err(DropReason::BadMac1),
            MacCheck::NeedCookie => {
                let reply = checker.reply(packet, sender_index, src, now);
                self.actions.push_back(Action::Send {
                    to: src,
                    packet: reply.to_vec(),
                });
                Err(DropReason::CookieSent)
            }
            MacCheck::Ok if under_load && !self.ratelimiter.allow(src.ip(), now) => {
                Err(DropReason::RateLimited)
            }
            MacCheck::Ok => Ok(()),
        }
    }

    fn handle_initiation(
        &mut self,
        packet: &[u8],
        src: SocketAddr,
        now: Instant,
    ) -> Result<(), DropReason> {
        let view =
            msg::HandshakeInitiation::new_checked(packet).map_err(|_| DropReason::WrongLength)?;
        self.check_macs(packet, view.sender_index(), src, now)?;
        let identity = self.identity.as_ref().ok_or(DropReason::NoPrivateKey)?;
        let consumed = noise::consume_initiation(identity, &view).map_err(handshake_drop)?;
        let id = self
            .peer_id(&consumed.peer_public)
            .ok_or(DropReason::UnknownPeer)?;
        let p = self.peer(id).ok_or(DropReason::UnknownPeer)?;
        if p.last_timestamp
            .is_some_and(|last| !consumed.timestamp.is_after(&last))
        {
            return Err(DropReason::StaleTimestamp);
        }
        if p.last_initiation_consumed
            .is_some_and(|t| now.saturating_duration_since(t) < MIN_INITIATION_INTERVAL)
        {
            return Err(DropReason::InitiationFlood);
        }
        // Valid: from here on the peer's state changes.
        let index = self.new_index(id);
        let mut response = [0u8; msg::HANDSHAKE_RESPONSE_LEN];
        let psk = *self.peer(id).expect("found above").preshared_key;
        let session = match noise::create_response(&consumed, &psk, index, &mut response) {
            Ok(s) => s,
            Err(e) => {
                self.indices.remove(&index);
                return Err(handshake_drop(e));
            }
        };
        let keypair = match Keypair::new(
            &self.keys,
            &session,
            index,
            consumed.remote_index,
            false,
            now,
        ) {
            Ok(k) => k,
            Err(_) => {
                self.indices.remove(&index);
                return Err(DropReason::CryptoFailed);
            }
        };
        let p = self.peer_mut(id).expect("found above");
        p.last_timestamp = Some(consumed.timestamp);
        p.last_initiation_consumed = Some(now);
        p.endpoint = Some(src);
        let stale_init = p.initiation.take().map(|s| s.local_index);
        let pushed_out = p.keypairs.install(keypair);
        p.cookies.stamp(&mut response, now);
        p.timers.last_sent_handshake = Some(now);
        p.timers.new_handshake = None;
        p.timers.send_keepalive = None;
        p.timers.zero_key_material = Some(now + ZERO_KEYS_AFTER);
        if p.persistent_keepalive > 0 {
            p.timers.persistent_keepalive =
                Some(now + Duration::from_secs(p.persistent_keepalive as u64));
        }
        for old in pushed_out {
            self.indices.remove(&old.local_index);
        }
        if let Some(i) = stale_init {
            self.indices.remove(&i);
        }
        self.actions.push_back(Action::Send {
            to: src,
            packet: response.to_vec(),
        });
        Ok(())
    }

    fn handle_response(
        &mut self,
        packet: &[u8],
        src: SocketAddr,
        now: Instant,
    ) -> Result<(), DropReason> {
        let view =
            msg::HandshakeResponse::new_checked(packet).map_err(|_| DropReason::WrongLength)?;
        let (sender, receiver) = (view.sender_index(), view.receiver_index());
        self.check_macs(packet, sender, src, now)?;
        let &id = self
            .indices
            .get(&receiver)
            .ok_or(DropReason::UnknownIndex)?;
        let identity = self.identity.as_ref().ok_or(DropReason::NoPrivateKey)?;
        let p = self
            .peers
            .get(id.0 as usize)
            .and_then(Option::as_ref)
            .ok_or(DropReason::UnknownIndex)?;
        let state = p
            .initiation
            .as_ref()
            .filter(|s| s.local_index == receiver)
            .ok_or(DropReason::UnknownIndex)?;
        let session = noise::consume_response(identity, state, &p.preshared_key, &view)
            .map_err(handshake_drop)?;
        let keypair = Keypair::new(&self.keys, &session, receiver, sender, true, now)
            .map_err(|_| DropReason::CryptoFailed)?;
        let wall = self.wall(now);
        let p = self.peer_mut(id).expect("found above");
        p.initiation = None; // its index now names the keypair
        let pushed_out = p.keypairs.install(keypair);
        p.endpoint = Some(src);
        Self::handshake_complete(p, wall);
        p.timers.new_handshake = None;
        p.timers.zero_key_material = Some(now + ZERO_KEYS_AFTER);
        if p.persistent_keepalive > 0 {
            p.timers.persistent_keepalive =
                Some(now + Duration::from_secs(p.persistent_keepalive as u64));
        }
        for old in pushed_out {
            self.indices.remove(&old.local_index);
        }
        // The initiator confirms the session at once: staged data, or a keepalive.
        self.send_keepalive(id, now);
        Ok(())
    }

    fn handle_cookie_reply(&mut self, packet: &[u8], now: Instant) -> Result<(), DropReason> {
        let view = msg::CookieReply::new_checked(packet).map_err(|_| DropReason::WrongLength)?;
        let &id = self
            .indices
            .get(&view.receiver_index())
            .ok_or(DropReason::UnknownIndex)?;
        let p = self.peer_mut(id).ok_or(DropReason::UnknownIndex)?;
        p.cookies
            .consume_reply(view.nonce(), view.encrypted_cookie(), now)
            .map_err(|_| DropReason::BadCookieReply)
    }

    /// Stages an empty packet (unless data is already waiting) and asks for a flush.
    fn send_keepalive(&mut self, id: PeerId, now: Instant) {
        let Some(p) = self.peer_mut(id) else { return };
        if p.staged.is_empty() {
            p.staged.push_back(Vec::new());
        }
        let _ = now;
        self.actions.push_back(Action::Flush(id));
    }

    /// Gives `id` a session that talks to itself: one key both ways and our own
    /// receiver index as the remote one, so that what this device encrypts to the peer
    /// it decrypts again. For benchmarks that push the whole data path through one
    /// worker without a second party; never reachable from the network or the UAPI.
    pub fn install_loopback_session(&mut self, id: PeerId, now: Instant) -> Result<(), DropReason> {
        let mut key = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut key);
        let keys = noise::SessionKeys {
            send: key,
            recv: key,
        };
        let index = self.new_index(id);
        let keypair = Keypair::new(&self.keys, &keys, index, index, true, now)
            .map_err(|_| DropReason::CryptoFailed)?;
        let p = self.peer_mut(id).ok_or(DropReason::UnknownPeer)?;
        let pushed_out = p.keypairs.install(keypair);
        for old in pushed_out {
            self.indices.remove(&old.local_index);
        }
        Ok(())
    }

    // ---- timers --------------------------------------------------------------

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
            if let Some(p) = self
                .peers
                .get_mut(id.0 as usize)
                .and_then(|p| p.as_deref_mut())
            {
                p.timers_touched = false;
            }
        }
    }

    fn tick_peer(&mut self, id: PeerId, now: Instant) {
        let due = |t: Option<Instant>| t.is_some_and(|t| t <= now);
        let Some(p) = self.peer_mut(id) else { return };
        if due(p.timers.retransmit_handshake) {
            p.timers.retransmit_handshake = None;
            if p.timers.handshake_attempts >= MAX_HANDSHAKE_ATTEMPTS {
                // Gave up after REKEY_ATTEMPT_TIME: drop what waited, keep nothing alive.
                p.timers.send_keepalive = None;
                p.staged.clear();
                if p.timers.zero_key_material.is_none() {
                    p.timers.zero_key_material = Some(now + ZERO_KEYS_AFTER);
                }
                if let Some(init) = p.initiation.take() {
                    self.indices.remove(&init.local_index);
                }
            } else {
                p.timers.handshake_attempts += 1;
                p.timers.last_sent_handshake = None; // the retry is due now
                self.initiate(id, true, now);
            }
        }
        let Some(p) = self.peer_mut(id) else { return };
        if due(p.timers.send_keepalive) {
            p.timers.send_keepalive = None;
            let again = std::mem::take(&mut p.timers.need_another_keepalive);
            self.send_keepalive(id, now);
            if again && let Some(p) = self.peer_mut(id) {
                p.timers.send_keepalive = Some(now + KEEPALIVE_TIMEOUT);
            }
        }
        let Some(p) = self.peer_mut(id) else { return };
        if due(p.timers.new_handshake) {
            p.timers.new_handshake = None;
            self.initiate(id, false, now);
        }
        let Some(p) = self.peer_mut(id) else { return };
        if due(p.timers.zero_key_material) {
            p.timers.zero_key_material = None;
            let mut gone: Vec<u32> = p.keypairs.indices().collect();
            p.keypairs.clear();
            if let Some(init) = p.initiation.take() {
                gone.push(init.local_index);
            }
            for i in gone {
                self.indices.remove(&i);
            }
        }
        let Some(p) = self.peer_mut(id) else { return };
        if due(p.timers.persistent_keepalive) {
            p.timers.persistent_keepalive = None;
            self.send_keepalive(id, now);
        }
    }

    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// Live receiver indices (handshakes in flight and keypairs), for tests and stats.
    pub fn index_count(&self) -> usize {
        self.indices.len()
    }
}

fn handshake_drop(e: HandshakeError) -> DropReason {
    match e {
        HandshakeError::DecryptFailed => DropReason::HandshakeDecrypt,
        HandshakeError::ZeroSharedSecret => DropReason::ZeroSharedSecret,
    }
}
