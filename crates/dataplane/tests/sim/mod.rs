//! Two sites on an in-memory network with a virtual clock: each is a whole WireGuard
//! graph (device, engines, arena); datagrams one sends are handed to the other.

#![allow(dead_code)]

use crypto::x25519::PrivateKey;
use crypto::{EngineSet, KeyRegistry};
use dataplane::Arena;
use dataplane::wg::{TUN_OUT, UDP_OUT, WgGraph};
use std::cell::Cell;
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use wireguard::{Device, PeerId, Prefix};

thread_local! {
    /// Sites built on this thread use the asynchronous engine (see `Net::with_async`).
    static ASYNC: Cell<bool> = const { Cell::new(false) };
    /// The size of the buffers of sites built on this thread (see `Net::jumbo`).
    static BUFFER: Cell<usize> = const { Cell::new(dataplane::STANDARD_BUFFER) };
}

pub struct Site {
    pub graph: WgGraph,
    pub addr: SocketAddr,
    pub peer: PeerId,
    /// Inner packets delivered to this site's "TUN".
    pub delivered: Vec<Vec<u8>>,
}

impl Site {
    /// What the site's device says of its peer.
    pub fn peer_info(&self) -> wireguard::PeerInfo {
        let device = self.graph.context().wg_device();
        device.peer_info(self.peer).expect("the site's peer")
    }
}

/// Decides whether a datagram (to B?, bytes) is lost.
pub type LossFn = Box<dyn FnMut(bool, &[u8]) -> bool>;

pub struct Net {
    pub a: Site,
    pub b: Site,
    pub now: Instant,
    /// The same time, shared with hooks that want to read it.
    clock: Rc<Cell<Instant>>,
    /// Datagrams in flight: (to_b, bytes, from).
    pub wire: Vec<(bool, Vec<u8>, SocketAddr)>,
    /// Drop every datagram for which this returns true (loss injection).
    pub lose: LossFn,
}

pub fn inner_v4(src: [u8; 4], dst: [u8; 4], payload: &[u8]) -> Vec<u8> {
    let total = 20 + payload.len();
    let mut p = vec![0u8; total];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&src);
    p[16..20].copy_from_slice(&dst);
    p[20..].copy_from_slice(payload);
    p
}

/// A device with key `me` and one peer, `them`, at `peer_addr` if given, whose
/// allowed IPs are `allowed`; its own key registry.
pub fn device_with_peer(
    me: &PrivateKey,
    them: &PrivateKey,
    peer_addr: Option<&str>,
    allowed: &str,
    now: Instant,
) -> (Device, PeerId) {
    let keys = Arc::new(KeyRegistry::new(1024));
    let mut device = Device::new(keys, now, SystemTime::now());
    device.set_private_key(Some(me.clone()));
    let peer = device.add_peer(them.public_key()).unwrap();
    if let Some(a) = peer_addr {
        device.set_endpoint(peer, a.parse().unwrap());
    }
    device.add_allowed_ip(peer, allowed.parse::<Prefix>().unwrap());
    (device, peer)
}

fn site(
    me: &PrivateKey,
    them: &PrivateKey,
    addr: &str,
    peer_addr: Option<&str>,
    allowed: &str,
    now: Instant,
    buffers: usize,
) -> Site {
    let (device, peer) = device_with_peer(me, them, peer_addr, allowed, now);
    let engines = if ASYNC.with(|a| a.get()) {
        // Frames go to two crypto threads and come back in order.
        let factory: crypto_async::EngineFactory =
            Arc::new(|| Box::new(crypto_awslc::AwsLcEngine::new()) as Box<dyn crypto::Engine>);
        EngineSet::new(vec![Box::new(crypto_async::AsyncEngine::new(
            device.keys().clone(),
            factory,
            2,
        ))])
    } else {
        EngineSet::new(vec![Box::new(crypto_awslc::AwsLcEngine::new())])
    };
    Site {
        graph: WgGraph::new(
            Arena::with_buffers(buffers, BUFFER.with(|b| b.get())),
            device,
            engines,
            now,
        ),
        addr: addr.parse().unwrap(),
        peer,
        delivered: Vec::new(),
    }
}

impl Net {
    /// Site A (198.19.0.1) knows B's endpoint; B learns A's from the handshake.
    pub fn new() -> Net {
        Net::with_buffers(1024)
    }

    /// Both sites with the asynchronous engine: every frame crosses to crypto threads.
    pub fn with_async() -> Net {
        ASYNC.with(|a| a.set(true));
        let net = Net::with_buffers(1024);
        ASYNC.with(|a| a.set(false));
        net
    }

    /// Both sites on jumbo buffers.
    pub fn jumbo() -> Net {
        BUFFER.with(|b| b.set(dataplane::JUMBO_BUFFER));
        let net = Net::with_buffers(1024);
        BUFFER.with(|b| b.set(dataplane::STANDARD_BUFFER));
        net
    }

    /// Both sites with arenas of `buffers` packet buffers.
    pub fn with_buffers(buffers: usize) -> Net {
        let now = Instant::now();
        let (ka, kb) = (PrivateKey::generate(), PrivateKey::generate());
        let a = site(
            &ka,
            &kb,
            "198.18.0.1:51820",
            Some("198.18.0.2:51820"),
            "198.19.0.2/32",
            now,
            buffers,
        );
        let b = site(
            &kb,
            &ka,
            "198.18.0.2:51820",
            None,
            "198.19.0.1/32",
            now,
            buffers,
        );
        Net {
            a,
            b,
            now,
            clock: Rc::new(Cell::new(now)),
            wire: Vec::new(),
            lose: Box::new(|_, _| false),
        }
    }

    /// A handle on the virtual clock for hooks.
    pub fn clock(&self) -> Rc<Cell<Instant>> {
        self.clock.clone()
    }

    pub fn site(&mut self, b: bool) -> &mut Site {
        if b { &mut self.b } else { &mut self.a }
    }

    /// Sends an inner packet from A (or B) into its tunnel.
    pub fn send(&mut self, from_b: bool, packet: &[u8]) {
        let now = self.now;
        let s = self.site(from_b);
        let h = s
            .graph
            .context_mut()
            .arena_mut()
            .alloc_with(packet)
            .expect("arena");
        s.graph.from_tun(&[h]);
        s.graph.run(now);
        self.collect(from_b);
    }

    /// Sends inner packets from A (or B) into its tunnel as one frame, as a driver
    /// hands a burst read from its TUN.
    pub fn send_together(&mut self, from_b: bool, packets: &[Vec<u8>]) {
        let now = self.now;
        let s = self.site(from_b);
        let arena = s.graph.context_mut().arena_mut();
        let frame: Vec<_> = packets
            .iter()
            .map(|p| arena.alloc_with(p).expect("arena"))
            .collect();
        s.graph.from_tun(&frame);
        s.graph.run(now);
        self.collect(from_b);
    }

    /// Moves what a site queued onto the wire and into its "TUN".
    fn collect(&mut self, from_b: bool) {
        let s = self.site(from_b);
        let from = s.addr;
        let cx = s.graph.context_mut();
        let mut out = Vec::new();
        cx.send_control(|_, bytes| out.push((!from_b, bytes.to_vec(), from)));
        cx.send_output(UDP_OUT, |arena, hs| {
            for &h in hs {
                out.push((!from_b, arena.data(h).to_vec(), from));
            }
        });
        let delivered = &mut s.delivered;
        cx.send_output(TUN_OUT, |arena, hs| {
            delivered.extend(hs.iter().map(|&h| arena.data(h).to_vec()));
        });
        self.wire.extend(out);
    }

    /// Delivers everything in flight (and what it provokes) until the wire is quiet.
    pub fn deliver(&mut self) {
        self.clock.set(self.now);
        for _ in 0..100 {
            if self.wire.is_empty() {
                return;
            }
            let batch: Vec<_> = self.wire.drain(..).collect();
            for (to_b, bytes, from) in batch {
                if (self.lose)(to_b, &bytes) {
                    continue;
                }
                let now = self.now;
                let s = self.site(to_b);
                let arena = s.graph.context_mut().arena_mut();
                let Some(h) = arena.alloc_with(&bytes) else {
                    continue;
                };
                arena.meta_mut(h).addr = from;
                s.graph.from_udp(&[h]);
                s.graph.run(now);
                self.collect(to_b);
            }
        }
        panic!("the two sites never went quiet");
    }

    /// Hands every datagram in flight to its site in one frame per site (as a
    /// driver hands a burst; no loss is applied to them), then delivers whatever
    /// follows as [`Net::deliver`] does.
    pub fn deliver_together(&mut self) {
        self.clock.set(self.now);
        let batch: Vec<_> = self.wire.drain(..).collect();
        for to_b in [false, true] {
            let now = self.now;
            let s = self.site(to_b);
            let arena = s.graph.context_mut().arena_mut();
            let mut frame = Vec::new();
            for (_, bytes, from) in batch.iter().filter(|d| d.0 == to_b) {
                let h = arena.alloc_with(bytes).expect("arena");
                arena.meta_mut(h).addr = *from;
                frame.push(h);
            }
            if frame.is_empty() {
                continue;
            }
            s.graph.from_udp(&frame);
            s.graph.run(now);
            self.collect(to_b);
        }
        self.deliver();
    }

    /// Advances the virtual clock in steps, running timers and delivering traffic.
    pub fn advance(&mut self, by: Duration, step: Duration) {
        let end = self.now + by;
        while self.now < end {
            self.now = (self.now + step).min(end);
            self.clock.set(self.now);
            let now = self.now;
            for b in [false, true] {
                let s = self.site(b);
                s.graph.tick(now);
                s.graph.run(now);
                self.collect(b);
            }
            self.deliver();
        }
    }

    pub fn ping_a_to_b(&mut self, tag: u8) -> bool {
        let p = inner_v4([198, 19, 0, 1], [198, 19, 0, 2], &[tag; 40]);
        let before = self.b.delivered.len();
        self.send(false, &p);
        self.deliver();
        self.b.delivered[before..].contains(&p)
    }

    pub fn ping_b_to_a(&mut self, tag: u8) -> bool {
        let p = inner_v4([198, 19, 0, 2], [198, 19, 0, 1], &[tag; 40]);
        let before = self.a.delivered.len();
        self.send(true, &p);
        self.deliver();
        self.a.delivered[before..].contains(&p)
    }

    pub fn counter(&self, b: bool, node: &str, reason: wireguard::DropReason) -> u64 {
        self.drops_named(b, node, reason.name())
    }

    /// What `node` of A (or B) counted under the drop reason `name`.
    pub fn drops_named(&self, b: bool, node: &str, name: &str) -> u64 {
        let s = if b { &self.b } else { &self.a };
        s.graph
            .counters()
            .find(|(n, _)| *n == node)
            .map(|(_, c)| c.drops_named(name))
            .unwrap_or(0)
    }
}

pub fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}
