//! The receive path of the WireGuard graph: datagrams go in through `from_udp` and
//! `run` on a graph whose device has a session with an in-process peer, and on a
//! second graph that follows the first one's device (one tunnel on two workers:
//! datagrams take turns between them, so a replay of the last datagram lands on the
//! other worker). It must never panic, and:
//!
//! - every buffer goes back to its arena once the output queues are drained;
//! - every datagram is accounted for: dropped with a reason or consumed by
//!   `wg-input` or `wg-decrypt`, or delivered to the TUN queue (a handshake message
//!   the follower hands to the owner is counted by both);
//! - only what decrypted reaches the TUN queue: each delivered packet is the inner
//!   packet of a datagram the harness sealed with the session's key (not one it
//!   then corrupted), its source is the peer's one allowed address, and no more
//!   packets are delivered than distinct counters were sealed.
//!
//! Receiver indices and keys are random per session, so raw bytes alone would never
//! get past the index lookup. The input is therefore a list of records, each either
//! a raw datagram or a datagram the harness seals with the peer's real key, with the
//! counter, the inner packet and a corruption chosen by the fuzzer.
//!
//! Record: `kind, len, bytes[len]` (one byte of length: runs are slow, so libFuzzer
//! grows inputs slowly, and short records reach more), where `kind` is
//!   bits 0-1  0 raw datagram (the bytes), 1 sealed data (below), 2 sealed keepalive,
//!             3 control (bits 2-3: 0 replay the last datagram, 1 advance the clock
//!             by 4 s times the first byte and run the timers, 2 run the batch now,
//!             3 run the timers without advancing the clock)
//!   sealed data:
//!   bit 2     the counter is the first 8 bytes (le), else the next counter in turn
//!   bit 3     the harness writes an IPv4 header in front of the bytes
//!   bit 4     ... with a source outside the peer's allowed IPs
//!   bit 5     pad the plaintext to 16 bytes as senders do
//!   bit 6     flip a bit of the tag after sealing
//!   bit 7     (raw and sealed) the datagram comes from another address (roaming)
#![no_main]

use crypto::x25519::{PrivateKey, PublicKey};
use crypto::{EngineSet, KeyRegistry};
use dataplane::wg::{TUN_OUT, UDP_OUT, WgGraph};
use dataplane::{Arena, Handle, wg_follow};
use libfuzzer_sys::fuzz_target;
use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime};
use wire::wireguard::{HANDSHAKE_INITIATION_LEN, HandshakeResponse};
use wireguard::cookie::CookieJar;
use wireguard::noise::{self, Identity, InitiatorState};
use wireguard::tai64n::Tai64N;
use wireguard::{Device, PeerId, Prefix};

const OUR_KEY: [u8; 32] = [0x11; 32];
const PEER_KEY: [u8; 32] = [0x22; 32];
const PEER_ADDR: &str = "198.18.0.2:51820";
const ROAMED_ADDR: &str = "198.18.0.3:40000";
/// The peer's inner address, its one allowed IP, and ours.
const PEER_INNER: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 2);
const NOT_ALLOWED_INNER: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 99);
const OUR_INNER: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 1);
/// Enough buffers for every datagram of one input plus what the device stages.
const ARENA_BUFFERS: usize = 192;
const MAX_DATAGRAMS: usize = 128;

fn addr(s: &str) -> SocketAddr {
    s.parse().expect("a literal address")
}

/// The peer's side of the session: what it needs to seal data to us.
struct PeerSession {
    key: [u8; 32],
    receiver_index: u32,
    next_counter: u64,
}

/// The peer's half of one initiation, made once: the keys are fixed, so every fresh
/// device accepts the same initiation, and the peer's state can open every response
/// to it. This keeps the scalar multiplications per run (slow under the sanitizers)
/// to those our own device must do.
struct PeerInitiation {
    identity: Identity,
    state: InitiatorState,
    packet: Vec<u8>,
}

fn peer_initiation() -> &'static PeerInitiation {
    static INIT: OnceLock<PeerInitiation> = OnceLock::new();
    INIT.get_or_init(|| {
        let identity = Identity::new(PrivateKey::from_bytes(PEER_KEY));
        let mut packet = [0u8; HANDSHAKE_INITIATION_LEN];
        let state = noise::create_initiation(
            &identity,
            &our_public(),
            0x5eed,
            Tai64N::at(SystemTime::now()),
            &mut packet,
        )
        .expect("the fixed keys make no zero DH");
        CookieJar::new(&our_public()).stamp(&mut packet, Instant::now());
        PeerInitiation {
            identity,
            state,
            packet: packet.to_vec(),
        }
    })
}

fn our_public() -> PublicKey {
    static PUBLIC: OnceLock<PublicKey> = OnceLock::new();
    *PUBLIC.get_or_init(|| PrivateKey::from_bytes(OUR_KEY).public_key())
}

/// Our graph, with a session the peer initiated (our keypair waits in the "next"
/// slot until the first data confirms it, which the fuzzer may or may not do), and
/// a graph that follows its device.
fn setup(now: Instant) -> ([WgGraph; 2], PeerId, PeerSession) {
    let init = peer_initiation();
    let keys = Arc::new(KeyRegistry::new(64));
    let mut ours = Device::new(keys.clone(), now, SystemTime::now());
    ours.set_private_key(Some(PrivateKey::from_bytes(OUR_KEY)));
    let peer = ours
        .add_peer(init.identity.public)
        .expect("not our own key");
    ours.add_allowed_ip(peer, "198.19.0.2/32".parse::<Prefix>().expect("a prefix"));
    let engines = EngineSet::new(vec![Box::new(crypto_awslc::AwsLcEngine::new())]);
    let mut g = WgGraph::new(Arena::new(ARENA_BUFFERS), ours, engines, now);

    let arena = g.context_mut().arena_mut();
    let h = arena.alloc_with(&init.packet).expect("a free buffer");
    arena.meta_mut(h).addr = addr(PEER_ADDR);
    g.from_udp(&[h]);
    g.run(now);
    let mut sent = Vec::new();
    g.context_mut()
        .send_control(|_, msg| sent.push(msg.to_vec()));
    let response = sent.pop().expect("our device answered");
    let response = HandshakeResponse::new_checked(&response[..]).expect("a response");
    let keys = noise::consume_response(&init.identity, &init.state, &[0; 32], &response)
        .expect("the peer accepts our response");
    let session = PeerSession {
        key: keys.send,
        receiver_index: response.sender_index(),
        next_counter: 0,
    };
    let (link, inbox) = wg_follow::link(g.context().wg_device().view_cell());
    g.context_mut().lead_wg_follower(inbox);
    let registry = g.context().wg_device().keys().clone();
    let engines = EngineSet::new(vec![Box::new(crypto_awslc::AwsLcEngine::new())]);
    let own = Device::new(registry, now, SystemTime::now());
    let mut follower = WgGraph::new(Arena::new(ARENA_BUFFERS), own, engines, now);
    follower.context_mut().follow_wg_device(link);
    ([g, follower], peer, session)
}

fn ipv4_header(src: Ipv4Addr, payload_len: usize) -> [u8; 20] {
    let mut h = [0u8; 20];
    h[0] = 0x45;
    h[2..4].copy_from_slice(&((20 + payload_len).min(u16::MAX as usize) as u16).to_be_bytes());
    h[8] = 64;
    h[9] = 17;
    h[12..16].copy_from_slice(&src.octets());
    h[16..20].copy_from_slice(&OUR_INNER.octets());
    h
}

fn seal(s: &PeerSession, counter: u64, plaintext: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; 16 + plaintext.len() + 16];
    out[0] = 4;
    out[4..8].copy_from_slice(&s.receiver_index.to_le_bytes());
    out[8..16].copy_from_slice(&counter.to_le_bytes());
    crypto::seal::seal(&s.key, counter, &[], plaintext, &mut out[16..]);
    out
}

/// What the receiver would deliver for this plaintext, if it is an IP packet.
fn deliverable(plaintext: &[u8]) -> Option<Vec<u8>> {
    let ip = wire::IpPacket::parse(plaintext).ok()?;
    (ip.total_len() <= plaintext.len()).then(|| plaintext[..ip.total_len()].to_vec())
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }

    fn take(&mut self, n: usize) -> &'a [u8] {
        let (a, b) = self.0.split_at(n.min(self.0.len()));
        self.0 = b;
        a
    }
}

struct Harness {
    /// The device's owner, then its follower.
    g: [WgGraph; 2],
    peer: PeerId,
    now: Instant,
    batch: Vec<(Vec<u8>, SocketAddr)>,
    /// Datagrams that went into the graph (those that fit a buffer).
    fed: u64,
    delivered: u64,
    /// Inner packets that may be delivered, and the counters they were sealed with.
    expected: HashSet<Vec<u8>>,
    good_counters: HashSet<u64>,
}

impl Harness {
    /// The batch's datagrams take turns between the two workers; the follower runs
    /// first (its report reaches the owner in the owner's run).
    fn run_batch(&mut self) {
        let mut handles: [Vec<Handle>; 2] = Default::default();
        for (i, (bytes, from)) in self.batch.drain(..).enumerate() {
            // Longer than a buffer: the driver would have truncated and dropped it.
            let arena = self.g[i % 2].context_mut().arena_mut();
            let Some(h) = arena.alloc_with(&bytes) else {
                continue;
            };
            arena.meta_mut(h).addr = from;
            handles[i % 2].push(h);
        }
        for w in [1, 0] {
            self.fed += handles[w].len() as u64;
            self.g[w].from_udp(&handles[w]);
            self.g[w].run(self.now);
            self.drain(w);
        }
    }

    fn drain(&mut self, w: usize) {
        let cx = self.g[w].context_mut();
        let mut tun = Vec::new();
        cx.take_output(TUN_OUT, &mut tun);
        for h in tun {
            let data = cx.arena().data(h);
            assert!(
                self.expected.contains(data),
                "delivered a packet that was never sealed: {data:02x?}"
            );
            let (src, _) = wire::ip::addrs(data).expect("an IP packet");
            assert_eq!(src, IpAddr::V4(PEER_INNER), "delivered a disallowed source");
            assert_eq!(cx.arena().meta(h).peer, self.peer.0);
            self.delivered += 1;
            cx.arena_mut().free(h);
        }
        cx.send_output(UDP_OUT, |_, _| {});
        cx.send_control(|_, _| {});
    }

    fn ticks(&mut self) {
        for w in [1, 0] {
            self.g[w].tick(self.now);
            self.g[w].run(self.now);
            self.drain(w);
        }
    }
}

/// Handshake messages the follower handed to the owner (the owner counts them again).
fn handed_over(follower: &WgGraph) -> u64 {
    follower
        .counters()
        .find(|(n, _)| *n == "wg-input")
        .map_or(0, |(_, c)| c.consumed)
}

fn input_drops(g: &WgGraph) -> u64 {
    g.counters()
        .filter(|(n, _)| matches!(*n, "wg-input" | "wg-decrypt"))
        .map(|(_, c)| c.dropped() + c.consumed)
        .sum()
}

fuzz_target!(|data: &[u8]| {
    let now = Instant::now();
    let (g, peer, mut session) = setup(now);
    let available = [0, 1].map(|w| g[w].context().arena().available());
    let accounted_before = input_drops(&g[0]) + input_drops(&g[1]);
    let mut h = Harness {
        g,
        peer,
        now,
        batch: Vec::new(),
        fed: 0,
        delivered: 0,
        expected: HashSet::new(),
        good_counters: HashSet::new(),
    };
    let mut last: Option<(Vec<u8>, SocketAddr)> = None;
    let mut datagrams = 0usize;
    let mut r = Reader(data);
    while let Some(kind) = r.byte() {
        let len = usize::from(r.byte().unwrap_or(0));
        let mut bytes = r.take(len);
        let from = addr(if kind & 0x80 != 0 {
            ROAMED_ADDR
        } else {
            PEER_ADDR
        });
        let datagram = match kind & 0b11 {
            0 => bytes.to_vec(),
            1 => {
                let counter = if kind & 0x04 != 0 && bytes.len() >= 8 {
                    let (c, rest) = bytes.split_at(8);
                    bytes = rest;
                    u64::from_le_bytes(c.try_into().expect("8 bytes"))
                } else {
                    session.next_counter
                };
                session.next_counter = counter.wrapping_add(1);
                let mut plaintext = Vec::with_capacity(bytes.len() + 36);
                if kind & 0x08 != 0 {
                    let src = if kind & 0x10 != 0 {
                        NOT_ALLOWED_INNER
                    } else {
                        PEER_INNER
                    };
                    plaintext.extend_from_slice(&ipv4_header(src, bytes.len()));
                }
                plaintext.extend_from_slice(bytes);
                if kind & 0x20 != 0 {
                    plaintext.resize(plaintext.len().next_multiple_of(16), 0);
                }
                let mut d = seal(&session, counter, &plaintext);
                if kind & 0x40 != 0 {
                    *d.last_mut().expect("a tag") ^= 1;
                } else if let Some(inner) = deliverable(&plaintext) {
                    h.expected.insert(inner);
                    h.good_counters.insert(counter);
                }
                d
            }
            2 => {
                let counter = session.next_counter;
                session.next_counter += 1;
                seal(&session, counter, &[])
            }
            _ => {
                match (kind >> 2) & 0b11 {
                    0 => {
                        if let Some(l) = last.clone()
                            && datagrams < MAX_DATAGRAMS
                        {
                            datagrams += 1;
                            h.batch.push(l);
                        }
                    }
                    1 => {
                        let step = u64::from(bytes.first().copied().unwrap_or(1));
                        h.run_batch();
                        h.now += Duration::from_secs(4 * step);
                        h.ticks();
                    }
                    2 => h.run_batch(),
                    _ => h.ticks(),
                }
                continue;
            }
        };
        if datagrams >= MAX_DATAGRAMS {
            break;
        }
        datagrams += 1;
        last = Some((datagram.clone(), from));
        h.batch.push((datagram, from));
    }
    h.run_batch();
    h.ticks();
    // A keepalive the timers asked for after the session expired waits, staged, for
    // a handshake no one answers here; it is given up after the last retry, each of
    // which needs its tick (REKEY_ATTEMPT_TIME in all).
    for _ in 0..200 {
        h.now += Duration::from_secs(1);
        h.ticks();
    }

    for w in [0, 1] {
        assert_eq!(h.g[w].pending(), 0, "packets left inside graph {w}");
        assert_eq!(
            h.g[w].context().arena().available(),
            available[w],
            "buffers did not return to arena {w}"
        );
    }
    assert_eq!(
        input_drops(&h.g[0]) + input_drops(&h.g[1]) - accounted_before + h.delivered,
        h.fed + handed_over(&h.g[1]),
        "datagrams neither dropped, consumed nor delivered"
    );
    assert!(
        h.delivered <= h.good_counters.len() as u64,
        "{} packets delivered from {} sealed counters: a replay got through",
        h.delivered,
        h.good_counters.len()
    );
});
