//! The device: the interface's identity, its peers, the index table, cookies and rate
//! limits, and the entry points the data path calls. It reads no clock (`now` is an
//! argument) and touches no socket: what it wants sent comes out of
//! [`Device::poll_action`].
//!
//! The device is one struct, but its methods are split by concern so that each part
//! can be read, and tested, on its own:
//!
//! - `config`: peers, keys, endpoints, allowed IPs (what the UAPI sets);
//! - `index`: receiver indices, allocated and released in one place each;
//! - `handshake`: initiations, responses, cookie replies and the MAC checks;
//! - `transport`: receiving per packet, what the data path stages, and what it
//!   tells of its traffic per packet;
//! - `session_path`: the owner's side of the data path's one interface
//!   (`crate::SessionPath`): send tickets, counter blocks, runs told;
//! - `timers`: section 6's timers as named events, and the tick that runs them;
//! - `view`: the data path's view for other workers, and their reports.
//!
//! This file keeps what they share: the state and the peer accessors.

mod config;
#[cfg(test)]
mod follower_tests;
mod handshake;
mod index;
mod session_path;
pub(crate) mod timers;
mod transport;
mod view;

pub use crate::session::RecvRun;
pub use crate::session::{RecvTicket, SendError, SendTicket};
pub use config::PeerInfo;

use crate::allowed_ips::AllowedIps;
use crate::constants::DEFAULT_HANDSHAKES_PER_SECOND_UNDER_LOAD;
use crate::cookie::CookieChecker;
use crate::noise::Identity;
use crate::peer::{Peer, PeerId};
use crate::ratelimit::{LoadMonitor, RateLimiter};
use crypto::KeyRegistry;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

pub use crate::action::Action;

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
    /// Our receiver indices: handshakes in flight and live keypairs. Changed only by
    /// `index::alloc_index` and `index::release_index`.
    indices: crate::index_hash::IndexMap<PeerId>,
    ratelimiter: RateLimiter,
    load: LoadMonitor,
    actions: VecDeque<Action>,
    /// Maps the monotonic `now` to wall time, for TAI64N and `last_handshake`.
    wall_base: (Instant, SystemTime),
    /// The data path's view, for workers other than the owner.
    publisher: view::Publisher,
    /// The owner's own blocks of send counters.
    send_blocks: crate::datapath::CounterBlocks,
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
            publisher: view::Publisher::default(),
            send_blocks: Default::default(),
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

    pub fn peer(&self, id: PeerId) -> Option<&Peer> {
        self.peers.get(id.0 as usize)?.as_deref()
    }

    /// The peer, to change. Every change that may arm a timer goes through here, so
    /// the peer is noted as touched for `tick`.
    fn peer_mut(&mut self, id: PeerId) -> Option<&mut Peer> {
        let p = self.peers.get_mut(id.0 as usize)?.as_deref_mut()?;
        if !p.timers_touched {
            p.timers_touched = true;
            self.touched.push(id);
        }
        Some(p)
    }

    /// The peer, for a change that arms no timer (forgetting keys, clearing state):
    /// not noted as touched.
    fn peer_mut_quiet(&mut self, id: PeerId) -> Option<&mut Peer> {
        self.peers.get_mut(id.0 as usize)?.as_deref_mut()
    }

    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }
}

/// Devices and peers for the tests of every part.
#[cfg(test)]
pub(crate) mod testing {
    use super::{Action, Device};
    use crate::peer::PeerId;
    /// What the tests call the data path through.
    pub(crate) use crate::session::SessionPath;
    use crypto::KeyRegistry;
    use crypto::x25519::PrivateKey;
    use std::net::SocketAddr;
    use std::sync::Arc;
    use std::time::{Instant, SystemTime};
    use wire::wireguard::Message;

    pub const A_ADDR: &str = "198.18.0.1:51820";
    pub const B_ADDR: &str = "198.18.0.2:51820";

    pub fn addr(s: &str) -> SocketAddr {
        s.parse().expect("a literal address")
    }

    /// A device with a private key.
    pub fn device(keys: &Arc<KeyRegistry>, now: Instant) -> Device {
        let mut d = Device::new(keys.clone(), now, SystemTime::now());
        d.set_private_key(Some(PrivateKey::generate()));
        d
    }

    /// A peer with a random key and an endpoint.
    pub fn peer(d: &mut Device) -> PeerId {
        let id = d
            .add_peer(PrivateKey::generate().public_key())
            .expect("not our own key");
        d.set_endpoint(id, addr(B_ADDR));
        id
    }

    /// Two devices that know each other: `a` at [`A_ADDR`], `b` at [`B_ADDR`].
    pub struct Pair {
        pub keys: Arc<KeyRegistry>,
        pub a: Device,
        pub b: Device,
        /// `b` as `a` knows it, and `a` as `b` knows it.
        pub b_in_a: PeerId,
        pub a_in_b: PeerId,
    }

    pub fn pair(now: Instant) -> Pair {
        let keys = Arc::new(KeyRegistry::new(64));
        let mut a = device(&keys, now);
        let mut b = device(&keys, now);
        let b_in_a = a.add_peer(b.public_key().unwrap()).unwrap();
        let a_in_b = b.add_peer(a.public_key().unwrap()).unwrap();
        a.set_endpoint(b_in_a, addr(B_ADDR));
        b.set_endpoint(a_in_b, addr(A_ADDR));
        Pair {
            keys,
            a,
            b,
            b_in_a,
            a_in_b,
        }
    }

    /// Every action the device has queued.
    pub fn actions(d: &mut Device) -> Vec<Action> {
        std::iter::from_fn(|| d.poll_action()).collect()
    }

    /// What waits for a session of `id`, taken out.
    pub fn staged(d: &mut Device, id: PeerId) -> Vec<crate::Staged> {
        let mut out = Vec::new();
        d.take_staged(id, &mut out);
        out
    }

    /// The packets the device asked to send, with where to.
    pub fn sent(d: &mut Device) -> Vec<(SocketAddr, Vec<u8>)> {
        actions(d)
            .into_iter()
            .filter_map(|a| match a {
                Action::Send { to, packet } => Some((to, packet)),
                Action::Flush(_) | Action::Discard { .. } => None,
            })
            .collect()
    }

    /// The one packet the device asked to send.
    pub fn one_sent(d: &mut Device) -> Vec<u8> {
        let mut s = sent(d);
        assert_eq!(s.len(), 1, "one packet sent");
        s.pop().unwrap().1
    }

    pub fn parse(bytes: &[u8]) -> Message<&[u8]> {
        Message::parse(bytes).expect("a well-formed message")
    }

    impl Pair {
        /// `a` initiates, for the staged packet `packet` (a buffer's handle), and
        /// `b` takes the initiation: returned, for a test to send again.
        pub fn initiate(&mut self, packet: u32, now: Instant) -> Vec<u8> {
            self.a.stage(self.b_in_a, packet, now);
            let init = one_sent(&mut self.a);
            self.b
                .handle_handshake(parse(&init), addr(A_ADDR), now)
                .unwrap();
            init
        }

        /// A full handshake, `a` initiating with a staged packet: both sides end with
        /// a session (b's is confirmed by the packet `a` then sends).
        pub fn handshake(&mut self, now: Instant) {
            self.initiate(20, now);
            let resp = one_sent(&mut self.b);
            self.a
                .handle_handshake(parse(&resp), addr(B_ADDR), now)
                .unwrap();
            assert_eq!(actions(&mut self.a), [Action::Flush(self.b_in_a)]);
            staged(&mut self.a, self.b_in_a);
            let t = self.a.send_ticket(self.b_in_a, now).unwrap();
            self.a.note_sent(self.b_in_a, 20, 64, now);
            let r = self
                .b
                .recv_ticket(t.receiver_index, t.counter, now)
                .unwrap();
            self.b
                .add_allowed_ip(self.a_in_b, "10.0.0.1/32".parse().unwrap());
            self.b
                .recv_commit(
                    &r,
                    t.counter,
                    Some("10.0.0.1".parse().unwrap()),
                    64,
                    addr(A_ADDR),
                    now,
                )
                .unwrap();
        }
    }
}
