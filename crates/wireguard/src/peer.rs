//! One peer: its configuration, handshake state, keypairs, timers and counters.

use crate::cookie::CookieJar;
use crate::keypair::Keypairs;
use crate::noise::InitiatorState;
use crate::staged::StagedQueue;
use crate::tai64n::Tai64N;
use crypto::x25519::PublicKey;
use std::net::SocketAddr;
use std::time::{Instant, SystemTime};
use zeroize::Zeroizing;

/// The deadlines; the events that arm them are `device::timers`.
pub use crate::peer_timers::Timers;

pub use crate::peer_id::PeerId;

pub struct Peer {
    pub public_key: PublicKey,
    pub preshared_key: Zeroizing<[u8; 32]>,
    pub endpoint: Option<SocketAddr>,
    pub persistent_keepalive: u16,
    pub cookies: CookieJar,
    /// Our initiation in flight, if any.
    pub initiation: Option<InitiatorState>,
    /// Newest TAI64N accepted from this peer: initiations must be strictly newer.
    pub last_timestamp: Option<Tai64N>,
    pub last_initiation_consumed: Option<Instant>,
    pub keypairs: Keypairs,
    pub timers: Timers,
    /// Packets waiting for a session, by the data path's buffer number.
    pub staged: StagedQueue,
    pub last_handshake: Option<SystemTime>,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    /// Listed in the device's touched peers since its last `tick` (see `Device::tick`).
    pub(crate) timers_touched: bool,
}

impl Peer {
    pub fn new(public_key: PublicKey) -> Peer {
        Peer {
            cookies: CookieJar::new(&public_key),
            public_key,
            preshared_key: Zeroizing::new([0; 32]),
            endpoint: None,
            persistent_keepalive: 0,
            initiation: None,
            last_timestamp: None,
            last_initiation_consumed: None,
            keypairs: Keypairs::default(),
            timers: Timers::default(),
            staged: StagedQueue::default(),
            last_handshake: None,
            rx_bytes: 0,
            tx_bytes: 0,
            timers_touched: false,
        }
    }
}
