//! OpenVPN servers' data-channel state, as each worker holds it: per server its
//! listen port, its clients by peer-id, and which client each inner address
//! belongs to. A client's keys ([`OvpnKey`], one per key id, at most one being
//! negotiated, one in use and one retiring) are shared by every worker: the
//! engine's keys, the implicit IVs, the packet ids it sends with and the replay
//! window it opens with are atomics, so no packet takes a lock.
//!
//! The control thread ([`OvpnInput`] comes to it through an [`OvpnInbox`]) owns
//! the control channels; it changes every worker's table the same way between
//! runs, with [`OvpnChange`]s. A client that sends from a new address (its NAT
//! mapping changed, or it roamed) is followed by the worker that opened the
//! packet at once, and the control thread is told so that it can tell the rest.

use crate::inbox::Inbox;
use crate::keyed_hash::KeyedState;
use crate::tally::Tally;
use crypto::{KeyHandle, KeyRegistry};
use ipsec::ReplayWindow;
use openvpn::DataCipher;
use openvpn::data_keys::DataKeys;
use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// An OpenVPN server's number in its worker, in the order servers were added
/// (the same on every worker).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OvpnServerId(pub u16);

/// Control packets waiting for the control thread, from every worker together.
pub const INBOX_LEN: usize = 1024;

/// The anti-replay window of the data channel: OpenVPN's packet ids follow the
/// rules of ESP's 32-bit sequence numbers (counting from 1, each accepted once,
/// a late one within the window), so it is ESP's window without ESN. Wider than
/// a stock OpenVPN's 64, because one client's packets are spread over workers.
pub const REPLAY_WINDOW: u32 = 1024;

/// What a worker hands the control thread.
pub enum OvpnInput {
    /// A control packet (anything but P_DATA_V2) to a server's port: the
    /// gateway's address and port it came to, where from, and its bytes.
    Control {
        server: OvpnServerId,
        local: SocketAddr,
        remote: SocketAddr,
        payload: Vec<u8>,
    },
    /// An authentic data packet came from a client's new address; this worker
    /// sends to it from now on.
    Float {
        server: OvpnServerId,
        peer_id: u32,
        remote: SocketAddr,
    },
    /// A key's packet ids are close to running out: the control thread should
    /// renegotiate.
    KeyExhausted {
        server: OvpnServerId,
        peer_id: u32,
        key_id: u8,
    },
}

/// A worker's way into the OpenVPN control thread's inbox.
pub type OvpnInbox = Inbox<OvpnInput>;

/// Packets and bytes one key carried, summed over every worker.
#[derive(Default)]
pub struct KeyUsage {
    pub packets_in: AtomicU64,
    pub bytes_in: AtomicU64,
    pub packets_out: AtomicU64,
    pub bytes_out: AtomicU64,
    /// Packets refused as replays or behind the window.
    pub replayed: AtomicU64,
    /// Packets whose tag did not verify.
    pub bad_tag: AtomicU64,
}

impl KeyUsage {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// One key id's data-channel keys of one client, shared by every worker.
/// Dropping it takes its keys out of the engines' registry and zeroes the IVs.
pub struct OvpnKey {
    pub key_id: u8,
    pub cipher: DataCipher,
    pub(crate) alg: crypto::Algorithm,
    pub(crate) send: KeyHandle,
    pub(crate) recv: KeyHandle,
    send_iv: [u8; 8],
    recv_iv: [u8; 8],
    /// The packet id the next packet sent gets; ids start at 1 and never wrap.
    next_send: AtomicU32,
    pub(crate) replay: ReplayWindow,
    pub usage: KeyUsage,
    /// Set once the send ids passed `openvpn::data::REKEY_AT_PACKET_ID`, so the
    /// control thread is asked to renegotiate only once.
    exhaustion_told: AtomicBool,
    registry: Arc<KeyRegistry>,
}

impl OvpnKey {
    pub fn new(
        registry: &Arc<KeyRegistry>,
        key_id: u8,
        keys: &DataKeys,
    ) -> Result<OvpnKey, String> {
        let alg = match keys.cipher {
            DataCipher::Aes128Gcm => crypto::Algorithm::Aes128Gcm,
            DataCipher::Aes256Gcm => crypto::Algorithm::Aes256Gcm,
            DataCipher::Chacha20Poly1305 => crypto::Algorithm::ChaCha20Poly1305,
        };
        let send = registry
            .insert(alg, keys.send.key())
            .map_err(|e| format!("key id {key_id}: {e}"))?;
        let recv = match registry.insert(alg, keys.recv.key()) {
            Ok(k) => k,
            Err(e) => {
                registry.remove(send);
                return Err(format!("key id {key_id}: {e}"));
            }
        };
        Ok(OvpnKey {
            key_id,
            cipher: keys.cipher,
            alg,
            send,
            recv,
            send_iv: *keys.send.implicit_iv(),
            recv_iv: *keys.recv.implicit_iv(),
            next_send: AtomicU32::new(1),
            replay: ReplayWindow::new(REPLAY_WINDOW, false).expect("a window in range"),
            usage: KeyUsage::default(),
            exhaustion_told: AtomicBool::new(false),
            registry: registry.clone(),
        })
    }

    /// The next packet id to send with; `None` once they ran out (the key then
    /// sends nothing more). The second value says the ids passed the point
    /// where a renegotiation is due, the first time they do. The control
    /// thread takes its keepalive pings' ids here too, so that no id is sent
    /// twice.
    pub fn take_packet_id(&self) -> Option<(u32, bool)> {
        let id = self
            .next_send
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_add(1))
            .ok()?;
        let due = id >= openvpn::data::REKEY_AT_PACKET_ID
            && !self.exhaustion_told.swap(true, Ordering::Relaxed);
        Some((id, due))
    }

    /// The nonce of a packet sent with `packet_id`.
    pub(crate) fn send_nonce(&self, packet_id: u32) -> [u8; 12] {
        nonce(packet_id, &self.send_iv)
    }

    /// The nonce of a packet received with `packet_id`.
    pub(crate) fn recv_nonce(&self, packet_id: u32) -> [u8; 12] {
        nonce(packet_id, &self.recv_iv)
    }

    /// Asks again for a renegotiation at the next packet: the control thread
    /// could not be told this time (its inbox was full).
    pub(crate) fn ask_again(&self) {
        self.exhaustion_told.store(false, Ordering::Relaxed);
    }

    /// The packet id the next packet gets (for show and tests).
    pub fn next_packet_id(&self) -> u32 {
        self.next_send.load(Ordering::Relaxed)
    }

    /// Starts the send ids at `next` (tests that reach the end of the ids).
    pub fn starting_at(self, next: u32) -> OvpnKey {
        self.next_send.store(next, Ordering::Relaxed);
        self
    }
}

/// OpenVPN 2.6's nonce: the packet id, then the implicit IV.
fn nonce(packet_id: u32, iv: &[u8; 8]) -> [u8; 12] {
    let mut n = [0u8; 12];
    n[..4].copy_from_slice(&packet_id.to_be_bytes());
    n[4..].copy_from_slice(iv);
    n
}

impl Drop for OvpnKey {
    fn drop(&mut self) {
        self.registry.remove(self.send);
        self.registry.remove(self.recv);
        zeroize::Zeroize::zeroize(&mut self.send_iv);
        zeroize::Zeroize::zeroize(&mut self.recv_iv);
    }
}

impl fmt::Debug for OvpnKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OvpnKey")
            .field("key_id", &self.key_id)
            .field("cipher", &self.cipher)
            .field("next_send", &self.next_packet_id())
            .finish_non_exhaustive()
    }
}

/// One client as a worker holds it.
#[derive(Debug)]
pub struct OvpnClient {
    /// Where its packets come from and go to.
    pub remote: SocketAddr,
    /// By key id.
    keys: [Option<Arc<OvpnKey>>; 8],
    /// The key id packets to it are sealed with: the newest installed.
    send: Option<u8>,
    /// Its tunnel addresses: packets from it must come from one of them.
    pub addrs: Vec<IpAddr>,
    /// What this worker opened and sealed under each key id since the frame
    /// began (added to the keys' shared usage at its end).
    opened: [Tally; 8],
    sealed: [Tally; 8],
}

impl OvpnClient {
    pub(crate) fn key(&self, key_id: u8) -> Option<&Arc<OvpnKey>> {
        self.keys.get(usize::from(key_id))?.as_ref()
    }

    pub(crate) fn send_key(&self) -> Option<&Arc<OvpnKey>> {
        self.key(self.send?)
    }
}

/// One OpenVPN server as a worker holds it.
pub struct OvpnServer {
    pub name: String,
    /// The UDP port it listens on (every address of the gateway's ports).
    pub port: u16,
    /// The largest inner packet it carries (its `tun-mtu`).
    pub mtu: usize,
    clients: Vec<Option<OvpnClient>>,
    /// Inner address → peer-id, read for every packet sealed: a keyed fast hash
    /// (any destination in a pool is looked up, so a sender chooses keys).
    by_addr: HashMap<IpAddr, u32, KeyedState>,
}

impl OvpnServer {
    pub fn new(name: &str, port: u16, mtu: usize) -> OvpnServer {
        OvpnServer {
            name: name.to_owned(),
            port,
            mtu,
            clients: Vec::new(),
            by_addr: HashMap::with_hasher(KeyedState::new()),
        }
    }

    pub(crate) fn client(&self, peer_id: u32) -> Option<&OvpnClient> {
        self.clients.get(peer_id as usize)?.as_ref()
    }

    pub(crate) fn client_mut(&mut self, peer_id: u32) -> Option<&mut OvpnClient> {
        self.clients.get_mut(peer_id as usize)?.as_mut()
    }

    /// The client an inner destination belongs to.
    pub(crate) fn peer_for(&self, dst: IpAddr) -> Option<u32> {
        self.by_addr.get(&dst).copied()
    }

    /// How many clients it has.
    pub fn client_count(&self) -> usize {
        self.clients.iter().flatten().count()
    }
}

/// The largest peer-id: the control thread hands them out from 0 and reuses
/// freed ones, so a table indexed by them stays as long as the most clients
/// connected at once.
pub const MAX_PEER_ID: u32 = 0x00ff_fffe;

/// A change every worker makes to its table, in the order the control thread
/// sends them.
#[derive(Clone, Debug)]
pub enum OvpnChange {
    AddClient {
        server: OvpnServerId,
        peer_id: u32,
        remote: SocketAddr,
        addrs: Vec<IpAddr>,
    },
    RemoveClient {
        server: OvpnServerId,
        peer_id: u32,
    },
    SetRemote {
        server: OvpnServerId,
        peer_id: u32,
        remote: SocketAddr,
    },
    /// A new key: opened with at once; sealed with at once only if the client
    /// has no key to seal with yet (its first), else from [`OvpnChange::SendWith`].
    InstallKey {
        server: OvpnServerId,
        peer_id: u32,
        key: Arc<OvpnKey>,
    },
    /// The client has this key: seal with it from now on.
    SendWith {
        server: OvpnServerId,
        peer_id: u32,
        key_id: u8,
    },
    /// A key whose transition window ended.
    RetireKey {
        server: OvpnServerId,
        peer_id: u32,
        key_id: u8,
    },
}

/// Why a change was refused; the table is unchanged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OvpnError {
    NoServer(OvpnServerId),
    NoClient { peer_id: u32 },
    PeerIdInUse { peer_id: u32 },
    PeerIdTooLarge { peer_id: u32 },
    AddrInUse { addr: IpAddr },
    PortInUse { port: u16 },
    BadKeyId { key_id: u8 },
}

impl fmt::Display for OvpnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OvpnError::NoServer(id) => write!(f, "no OpenVPN server {}", id.0),
            OvpnError::NoClient { peer_id } => write!(f, "no client with peer-id {peer_id}"),
            OvpnError::PeerIdInUse { peer_id } => write!(f, "peer-id {peer_id} is in use"),
            OvpnError::PeerIdTooLarge { peer_id } => {
                write!(f, "peer-id {peer_id} is past the largest, {MAX_PEER_ID}")
            }
            OvpnError::AddrInUse { addr } => write!(f, "{addr} belongs to another client"),
            OvpnError::PortInUse { port } => write!(f, "UDP port {port} is another server's"),
            OvpnError::BadKeyId { key_id } => write!(f, "key id {key_id} is not 0 to 7"),
        }
    }
}

impl std::error::Error for OvpnError {}

/// Every OpenVPN server of a worker, and the way to their control thread.
#[derive(Default)]
pub struct OvpnServers {
    servers: Vec<OvpnServer>,
    pub(crate) inbox: Option<OvpnInbox>,
    /// Clients followed to a new address that the control thread could not be
    /// told of (its inbox was full).
    pub float_backlog: u64,
    /// Renegotiations asked for that the control thread could not be told of.
    pub exhausted_backlog: u64,
    /// Clients with packets tallied in this frame.
    tallied: Vec<(OvpnServerId, u32)>,
}

/// Which way a tallied packet went.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Way {
    Opened,
    Sealed,
}

impl OvpnServers {
    /// Counts a packet of `bytes` under client `peer_id`'s key `key_id` in this
    /// worker's tally, added to the key's shared usage at the frame's end.
    pub(crate) fn tally(
        &mut self,
        server: OvpnServerId,
        peer_id: u32,
        key_id: u8,
        way: Way,
        bytes: usize,
    ) {
        let Some(c) = self.get_mut(server).and_then(|s| s.client_mut(peer_id)) else {
            return;
        };
        let tallies = match way {
            Way::Opened => &mut c.opened,
            Way::Sealed => &mut c.sealed,
        };
        let Some(t) = tallies.get_mut(usize::from(key_id)) else {
            return;
        };
        if t.add(bytes as u64) {
            self.tallied.push((server, peer_id));
        }
    }

    /// Adds this worker's tallies to the keys' shared usage: at each frame's
    /// end, and before a change (which may retire a key).
    pub(crate) fn flush(&mut self) {
        while let Some((server, peer_id)) = self.tallied.pop() {
            let Some(c) = self.get_mut(server).and_then(|s| s.client_mut(peer_id)) else {
                continue;
            };
            for (i, key) in c.keys.iter().enumerate() {
                let (opened, sealed) = (c.opened[i].take(), c.sealed[i].take());
                let Some(key) = key else { continue };
                if let Some((packets, bytes)) = opened {
                    KeyUsage::add(&key.usage.packets_in, packets);
                    KeyUsage::add(&key.usage.bytes_in, bytes);
                }
                if let Some((packets, bytes)) = sealed {
                    KeyUsage::add(&key.usage.packets_out, packets);
                    KeyUsage::add(&key.usage.bytes_out, bytes);
                }
            }
        }
    }

    pub fn add(&mut self, server: OvpnServer) -> Result<OvpnServerId, OvpnError> {
        if self.servers.iter().any(|s| s.port == server.port) {
            return Err(OvpnError::PortInUse { port: server.port });
        }
        self.servers.push(server);
        Ok(OvpnServerId((self.servers.len() - 1) as u16))
    }

    pub fn get(&self, id: OvpnServerId) -> Option<&OvpnServer> {
        self.servers.get(usize::from(id.0))
    }

    pub(crate) fn get_mut(&mut self, id: OvpnServerId) -> Option<&mut OvpnServer> {
        self.servers.get_mut(usize::from(id.0))
    }

    pub fn iter(&self) -> impl Iterator<Item = (OvpnServerId, &OvpnServer)> {
        self.servers
            .iter()
            .enumerate()
            .map(|(i, s)| (OvpnServerId(i as u16), s))
    }

    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// The server listening on UDP port `port`.
    pub(crate) fn listening_on(&self, port: u16) -> Option<OvpnServerId> {
        self.servers
            .iter()
            .position(|s| s.port == port)
            .map(|i| OvpnServerId(i as u16))
    }

    /// Client `peer_id` of `server`, to change.
    fn client_to_change(
        &mut self,
        server: OvpnServerId,
        peer_id: u32,
    ) -> Result<&mut OvpnClient, OvpnError> {
        self.get_mut(server)
            .ok_or(OvpnError::NoServer(server))?
            .client_mut(peer_id)
            .ok_or(OvpnError::NoClient { peer_id })
    }

    /// Makes one change; a refused change leaves the table as it was.
    pub fn apply(&mut self, change: &OvpnChange) -> Result<(), OvpnError> {
        self.flush();
        match change {
            OvpnChange::AddClient {
                server,
                peer_id,
                remote,
                addrs,
            } => {
                let s = self.get_mut(*server).ok_or(OvpnError::NoServer(*server))?;
                if *peer_id > MAX_PEER_ID {
                    return Err(OvpnError::PeerIdTooLarge { peer_id: *peer_id });
                }
                if s.client(*peer_id).is_some() {
                    return Err(OvpnError::PeerIdInUse { peer_id: *peer_id });
                }
                if let Some(addr) = addrs.iter().find(|a| s.by_addr.contains_key(a)) {
                    return Err(OvpnError::AddrInUse { addr: *addr });
                }
                let at = *peer_id as usize;
                if s.clients.len() <= at {
                    s.clients.resize_with(at + 1, || None);
                }
                for a in addrs {
                    s.by_addr.insert(*a, *peer_id);
                }
                s.clients[at] = Some(OvpnClient {
                    remote: *remote,
                    keys: Default::default(),
                    opened: Default::default(),
                    sealed: Default::default(),
                    send: None,
                    addrs: addrs.clone(),
                });
                Ok(())
            }
            OvpnChange::RemoveClient { server, peer_id } => {
                let s = self.get_mut(*server).ok_or(OvpnError::NoServer(*server))?;
                let c = s
                    .clients
                    .get_mut(*peer_id as usize)
                    .and_then(Option::take)
                    .ok_or(OvpnError::NoClient { peer_id: *peer_id })?;
                for a in &c.addrs {
                    s.by_addr.remove(a);
                }
                while s.clients.last().is_some_and(Option::is_none) {
                    s.clients.pop();
                }
                Ok(())
            }
            OvpnChange::SetRemote {
                server,
                peer_id,
                remote,
            } => {
                self.client_to_change(*server, *peer_id)?.remote = *remote;
                Ok(())
            }
            OvpnChange::InstallKey {
                server,
                peer_id,
                key,
            } => {
                let c = self.client_to_change(*server, *peer_id)?;
                let slot = c
                    .keys
                    .get_mut(usize::from(key.key_id))
                    .ok_or(OvpnError::BadKeyId { key_id: key.key_id })?;
                *slot = Some(key.clone());
                if c.send_key().is_none() {
                    c.send = Some(key.key_id);
                }
                Ok(())
            }
            OvpnChange::SendWith {
                server,
                peer_id,
                key_id,
            } => {
                let c = self.client_to_change(*server, *peer_id)?;
                if c.key(*key_id).is_none() {
                    return Err(OvpnError::BadKeyId { key_id: *key_id });
                }
                c.send = Some(*key_id);
                Ok(())
            }
            OvpnChange::RetireKey {
                server,
                peer_id,
                key_id,
            } => {
                let c = self.client_to_change(*server, *peer_id)?;
                let slot = c
                    .keys
                    .get_mut(usize::from(*key_id))
                    .ok_or(OvpnError::BadKeyId { key_id: *key_id })?;
                *slot = None;
                if c.send == Some(*key_id) {
                    c.send = None;
                }
                Ok(())
            }
        }
    }

    /// Tells the control thread something; false when its inbox is full.
    pub(crate) fn tell(&self, input: OvpnInput) -> bool {
        self.inbox.as_ref().is_some_and(|i| i.hand_over(input))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openvpn::Role;
    use openvpn::static_key::Key2;

    fn key(registry: &Arc<KeyRegistry>, id: u8) -> Arc<OvpnKey> {
        let material = Key2::from_bytes([id; 256]);
        let keys = DataKeys::new(&material, DataCipher::Aes256Gcm, Role::Server);
        Arc::new(OvpnKey::new(registry, id, &keys).unwrap())
    }

    #[test]
    fn changes_build_and_take_apart_a_client_and_refusals_change_nothing() {
        let registry = Arc::new(KeyRegistry::new(64));
        let mut t = OvpnServers::default();
        let s = t.add(OvpnServer::new("remote-access", 1194, 1500)).unwrap();
        assert_eq!(
            t.add(OvpnServer::new("again", 1194, 1500)).err(),
            Some(OvpnError::PortInUse { port: 1194 })
        );
        let remote: SocketAddr = "198.18.0.9:40000".parse().unwrap();
        let addr: IpAddr = "198.19.0.2".parse().unwrap();
        let add = |peer_id, addrs: Vec<IpAddr>| OvpnChange::AddClient {
            server: s,
            peer_id,
            remote,
            addrs,
        };
        t.apply(&add(3, vec![addr])).unwrap();
        assert_eq!(
            t.apply(&add(3, vec![])),
            Err(OvpnError::PeerIdInUse { peer_id: 3 })
        );
        assert_eq!(
            t.apply(&add(4, vec![addr])),
            Err(OvpnError::AddrInUse { addr })
        );
        assert_eq!(
            t.apply(&add(MAX_PEER_ID + 1, vec![])),
            Err(OvpnError::PeerIdTooLarge {
                peer_id: MAX_PEER_ID + 1
            })
        );
        let server = t.get(s).unwrap();
        assert_eq!(server.peer_for(addr), Some(3));
        assert_eq!(server.client_count(), 1);

        t.apply(&OvpnChange::InstallKey {
            server: s,
            peer_id: 3,
            key: key(&registry, 0),
        })
        .unwrap();
        t.apply(&OvpnChange::InstallKey {
            server: s,
            peer_id: 3,
            key: key(&registry, 1),
        })
        .unwrap();
        let c = t.get(s).unwrap().client(3).unwrap();
        assert_eq!(
            c.send_key().unwrap().key_id,
            0,
            "the first key seals until the client has the new one"
        );
        assert!(c.key(1).is_some());
        t.apply(&OvpnChange::SendWith {
            server: s,
            peer_id: 3,
            key_id: 1,
        })
        .unwrap();
        let c = t.get(s).unwrap().client(3).unwrap();
        assert_eq!(c.send_key().unwrap().key_id, 1);
        assert_eq!(
            t.apply(&OvpnChange::SendWith {
                server: s,
                peer_id: 3,
                key_id: 5
            }),
            Err(OvpnError::BadKeyId { key_id: 5 })
        );
        t.apply(&OvpnChange::RetireKey {
            server: s,
            peer_id: 3,
            key_id: 0,
        })
        .unwrap();
        assert!(t.get(s).unwrap().client(3).unwrap().key(0).is_none());
        assert_eq!(
            registry.live_keys(),
            2,
            "the retired key's two engine keys are gone"
        );

        t.apply(&OvpnChange::RemoveClient {
            server: s,
            peer_id: 3,
        })
        .unwrap();
        assert_eq!(t.get(s).unwrap().peer_for(addr), None);
        assert_eq!(t.get(s).unwrap().client_count(), 0);
        assert_eq!(registry.live_keys(), 0);
        assert_eq!(
            t.apply(&OvpnChange::RemoveClient {
                server: s,
                peer_id: 3
            }),
            Err(OvpnError::NoClient { peer_id: 3 })
        );
    }

    #[test]
    fn packet_ids_count_from_one_say_once_when_a_rekey_is_due_and_end() {
        let registry = Arc::new(KeyRegistry::new(64));
        let k = key(&registry, 0);
        assert_eq!(k.take_packet_id(), Some((1, false)));
        let k = Arc::try_unwrap(k)
            .unwrap()
            .starting_at(openvpn::data::REKEY_AT_PACKET_ID);
        assert_eq!(
            k.take_packet_id(),
            Some((openvpn::data::REKEY_AT_PACKET_ID, true))
        );
        assert_eq!(
            k.take_packet_id(),
            Some((openvpn::data::REKEY_AT_PACKET_ID + 1, false))
        );
        let k = k.starting_at(u32::MAX);
        assert_eq!(k.take_packet_id(), None);
        assert_eq!(k.take_packet_id(), None);
    }
}
