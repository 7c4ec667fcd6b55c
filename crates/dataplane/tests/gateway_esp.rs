//! ESP tunnel mode through a whole gateway graph, against known answers made by an
//! independent implementation (scapy: `tests/esp/scapy_vectors.py`). For every case
//! and every outer form (IPv4 or IPv6, on IP or in UDP): the inner packet sent to
//! the LAN port leaves the WAN port as exactly the ESP packet scapy made, and
//! scapy's ESP packet arriving on the WAN port leaves the LAN port as the inner
//! packet. `ESP_SCAPY_VECTORS=FILE` runs freshly made cases instead of the committed
//! ones (`make test` does both).

use crypto::{EngineSet, KeyRegistry};
use dataplane::Arena;
use dataplane::context::esp_tunnel;
use dataplane::esp::{Encapsulation, EspTunnel, InboundSa, OutboundSa, SaSpec};
use dataplane::fib::{PortId, RouteTarget};
use dataplane::gateway::GatewayGraph;
use ipsec::{EspAlgorithm, Lifetime};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Instant, SystemTime};
use wireguard::Device;

mod ports;
use ports::{arp_answer, drops, ether, nd_answer, sent};

const LAN_MAC: [u8; 6] = [0x02, 0, 0, 0, 1, 1];
const WAN_MAC: [u8; 6] = [0x02, 0, 0, 0, 1, 2];
const HOST: [u8; 6] = [0x02, 0, 0, 0, 0xa, 0x10];
const PEER: [u8; 6] = [0x02, 0, 0, 0, 0xb, 0x20];

struct Vector {
    alg: EspAlgorithm,
    esn: bool,
    spi: u32,
    seq: u64,
    keymat: Vec<u8>,
    inner: Vec<u8>,
    esp: Vec<u8>,
}

fn vectors() -> Vec<Vector> {
    let path = std::env::var("ESP_SCAPY_VECTORS").unwrap_or_else(|_| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/esp_scapy.txt").to_string()
    });
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let out: Vec<Vector> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            Vector {
                alg: EspAlgorithm::from_name(f[0]).unwrap(),
                esn: f[1] == "1",
                spi: f[2].parse().unwrap(),
                seq: f[3].parse().unwrap(),
                keymat: hex::decode(f[4]).unwrap(),
                inner: hex::decode(f[5]).unwrap(),
                esp: hex::decode(f[6]).unwrap(),
            }
        })
        .collect();
    assert!(out.len() >= 30, "{path}: only {} cases", out.len());
    out
}

#[derive(Clone, Copy, Debug)]
struct Outer {
    v6: bool,
    udp: bool,
}

const OUTERS: [Outer; 4] = [
    Outer {
        v6: false,
        udp: false,
    },
    Outer {
        v6: false,
        udp: true,
    },
    Outer {
        v6: true,
        udp: false,
    },
    Outer {
        v6: true,
        udp: true,
    },
];

impl Outer {
    fn addrs(self) -> (IpAddr, IpAddr) {
        if self.v6 {
            (
                "2001:2:0:2::1".parse().unwrap(),
                "2001:2:0:2::2".parse().unwrap(),
            )
        } else {
            ("198.18.2.1".parse().unwrap(), "198.18.2.2".parse().unwrap())
        }
    }

    fn header_len(self) -> usize {
        (if self.v6 { 40 } else { 20 }) + if self.udp { 8 } else { 0 }
    }

    /// The peer's frame to the gateway carrying `esp`.
    fn wrap(self, esp: &[u8]) -> Vec<u8> {
        let (ours, theirs) = self.addrs();
        let mut pkt = vec![0u8; self.header_len() + esp.len()];
        let ip_len = if self.v6 { 40 } else { 20 };
        pkt[self.header_len()..].copy_from_slice(esp);
        let proto = if self.udp { 17 } else { 50 };
        if self.udp {
            let mut u = wire::udp::Packet::new_unchecked(&mut pkt[ip_len..]);
            u.set_src_port(4500);
            u.set_dst_port(4500);
            u.set_length((8 + esp.len()) as u16);
            u.set_checksum(0);
            if let (IpAddr::V6(s), IpAddr::V6(d)) = (theirs, ours) {
                u.fill_checksum_v6(&s, &d);
            }
        }
        let payload_len = (pkt.len() - ip_len) as u16;
        let header = wire::ip::IpRepr {
            src: theirs,
            dst: ours,
            protocol: proto,
            payload_len,
            hop_limit: 64,
            dont_frag: true,
        };
        header.emit(&mut pkt[..ip_len]).unwrap();
        let kind = if theirs.is_ipv4() { 0x0800 } else { 0x86dd };
        ether(WAN_MAC, PEER, kind, &pkt)
    }
}

struct Gw {
    gw: GatewayGraph,
    lan: PortId,
    wan: PortId,
    now: Instant,
    inbound: Arc<InboundSa>,
}

fn spec(v: &Vector) -> SaSpec {
    SaSpec {
        spi: v.spi,
        alg: v.alg,
        keymat: zeroize::Zeroizing::new(v.keymat.clone()),
        esn: v.esn,
        replay_window: 1024,
        lifetime: Lifetime::default(),
    }
}

/// A gateway whose ESP tunnel to the peer seals and opens with the case's SA (the
/// same key and SPI both ways), its next outbound sequence number the case's, and
/// its inbound window just behind it.
///
/// The cases' inner packets go from 198.19.1.10 to 198.19.3.10 (IPv6 likewise): a
/// gateway that seals them (`Side::Sender`) has the first network on its LAN port
/// and routes the second into the tunnel; one that opens them (`Side::Receiver`)
/// has the second on its LAN port.
fn gateway(v: &Vector, outer: Outer, side: Side) -> Gw {
    let all = vec!["0.0.0.0/0".parse().unwrap(), "::/0".parse().unwrap()];
    gateway_with(v, outer, side, all)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Sender,
    Receiver,
}

/// `gateway`, the peer's traffic selectors `remote_ts`.
fn gateway_with(v: &Vector, outer: Outer, side: Side, remote_ts: Vec<lpm::Prefix>) -> Gw {
    let now = Instant::now();
    let keys = Arc::new(KeyRegistry::new(64));
    let device = Device::new(keys.clone(), now, SystemTime::now());
    let engines = EngineSet::new(vec![Box::new(crypto_awslc::AwsLcEngine::new())]);
    let mut gw = GatewayGraph::new(Arena::new(64), engines, device, now);
    let port = |name, mac, addrs: [&str; 2]| ports::interface(name, mac, &addrs, 1500);
    let (here, there) = match side {
        Side::Sender => (1, 3),
        Side::Receiver => (3, 1),
    };
    let lan = gw
        .add_port(port(
            "lan",
            LAN_MAC,
            [
                &format!("198.19.{here}.1/24"),
                &format!("2001:2:0:{here}::1/64"),
            ],
        ))
        .unwrap();
    let wan = gw
        .add_port(port("wan", WAN_MAC, ["198.18.2.1/24", "2001:2:0:2::1/64"]))
        .unwrap();
    let (local, remote) = outer.addrs();
    let encap = if outer.udp {
        Encapsulation::Udp {
            local_port: 4500,
            remote_port: 4500,
        }
    } else {
        Encapsulation::None
    };
    let all = vec!["0.0.0.0/0".parse().unwrap(), "::/0".parse().unwrap()];
    let id = gw
        .add_esp(EspTunnel::new(
            "site-b".into(),
            local,
            remote,
            encap,
            all,
            remote_ts,
            1400,
        ))
        .unwrap();
    for p in [
        format!("198.19.{there}.0/24"),
        format!("2001:2:0:{there}::/64"),
    ] {
        gw.add_route(p.parse().unwrap(), RouteTarget::Tunnel(esp_tunnel(id)))
            .unwrap();
    }
    let keys = gw.context().keys().clone();
    let out = OutboundSa::new(&keys, &spec(v)).unwrap().starting_at(v.seq);
    let inbound = Arc::new(InboundSa::new(&keys, &spec(v)).unwrap());
    if v.seq > 1 {
        inbound.assume_received(v.seq - 1).unwrap();
    }
    gw.esp_mut().set_outbound(id, Arc::new(out)).unwrap();
    gw.esp_mut().add_inbound(id, inbound.clone()).unwrap();
    Gw {
        gw,
        lan,
        wan,
        now,
        inbound,
    }
}

impl Gw {
    fn feed(&mut self, port: PortId, frame: &[u8]) {
        ports::send(&mut self.gw, port, frame, self.now);
    }

    /// Frames out of `port` once the neighbors on both sides have answered.
    fn out_of(&mut self, port: PortId) -> Vec<Vec<u8>> {
        let mut kept = Vec::new();
        for _ in 0..10 {
            let mut moved = false;
            for (p, mac) in [(self.lan, HOST), (self.wan, PEER)] {
                for f in sent(&mut self.gw, p) {
                    match arp_answer(&f, mac).or_else(|| nd_answer(&f, mac)) {
                        Some(answer) => {
                            moved = true;
                            self.feed(p, &answer);
                        }
                        None if p == port => kept.push(f),
                        None => panic!("unexpected frame out of the other port: {f:02x?}"),
                    }
                }
            }
            if !moved {
                return kept;
            }
        }
        panic!("the neighbors never settled");
    }
}

/// `ip` with its TTL (hop limit) `by` higher, checksum fixed: what the host sends
/// so that the gateway's decrement gives the case's packet.
fn hop_up(ip: &[u8], by: u8) -> Vec<u8> {
    let mut p = ip.to_vec();
    if p[0] >> 4 == 4 {
        let mut h = wire::ipv4::Packet::new_unchecked(&mut p[..]);
        h.set_ttl(h.ttl() + by);
        h.fill_checksum();
    } else {
        p[7] += by;
    }
    p
}

fn ethertype(ip: &[u8]) -> u16 {
    if ip[0] >> 4 == 4 { 0x0800 } else { 0x86dd }
}

/// AEAD cases: the packet the gateway seals is scapy's, byte for byte (the IV is
/// the sequence number on both sides). CBC cases: the IV is random, so the packet
/// is scapy's in its header and length, another gateway with the SA opens it to
/// the inner packet, and two packets never share an IV; `ESP_LINERATE_OUT=FILE`
/// writes the packets for scapy to open (`scapy_vectors.py check`).
#[test]
fn sealed_packets_are_scapys_byte_for_byte() {
    let mut written = String::new();
    for v in vectors() {
        for outer in OUTERS {
            let mut g = gateway(&v, outer, Side::Sender);
            let frame = ether(LAN_MAC, HOST, ethertype(&v.inner), &hop_up(&v.inner, 1));
            g.feed(g.lan, &frame);
            let out = g.out_of(g.wan);
            let what = format!("{} esn {} seq {:#x} {outer:?}", v.alg, v.esn, v.seq);
            assert_eq!(out.len(), 1, "{what}: frames out of the WAN port");
            assert_eq!(&out[0][..6], &PEER, "{what}: to the peer");
            let esp = &out[0][14 + outer.header_len()..];
            if !v.alg.is_chained() {
                assert_eq!(esp, &v.esp[..], "{what}: the ESP packet");
                continue;
            }
            assert_eq!(esp.len(), v.esp.len(), "{what}: the ESP packet's length");
            assert_eq!(esp[..8], v.esp[..8], "{what}: SPI and sequence number");
            assert_ne!(esp[8..24], v.esp[8..24], "{what}: an IV of its own");
            let mut r = gateway(&v, outer, Side::Receiver);
            r.feed(r.wan, &outer.wrap(esp));
            let opened = r.out_of(r.lan);
            assert_eq!(opened.len(), 1, "{what}: opened by the other side");
            assert_eq!(
                hop_up(&opened[0][14..], 1),
                v.inner,
                "{what}: the inner packet"
            );
            // The next packet of the SA (if it has another sequence number) has
            // another IV.
            if v.esn || v.seq < u64::from(u32::MAX) {
                g.feed(g.lan, &frame);
                let again = g.out_of(g.wan);
                let iv = &again[0][14 + outer.header_len() + 8..][..16];
                assert_ne!(iv, &esp[8..24], "{what}");
            }
            if outer.v6 == (v.inner[0] >> 4 == 6) && !outer.udp {
                written.push_str(&format!(
                    "{} {} {} {} {} {} {}\n",
                    v.alg,
                    u8::from(v.esn),
                    v.spi,
                    v.seq,
                    hex::encode(&v.keymat),
                    hex::encode(&v.inner),
                    hex::encode(esp)
                ));
            }
        }
    }
    if let Ok(path) = std::env::var("ESP_LINERATE_OUT") {
        std::fs::write(&path, written).unwrap();
    }
}

#[test]
fn scapys_packets_open_to_the_inner_packet() {
    for v in vectors() {
        for outer in OUTERS {
            let mut g = gateway(&v, outer, Side::Receiver);
            let frame = outer.wrap(&v.esp);
            g.feed(g.wan, &frame);
            let out = g.out_of(g.lan);
            let what = format!("{} esn {} seq {:#x} {outer:?}", v.alg, v.esn, v.seq);
            assert_eq!(out.len(), 1, "{what}: frames out of the LAN port");
            // The gateway routed it: one hop less than it came out of the tunnel.
            assert_eq!(
                hop_up(&out[0][14..], 1),
                v.inner,
                "{what}: the inner packet"
            );
            assert_eq!(g.inbound.usage.packets(), 1, "{what}");
            // The same packet again is a replay, counted on the SA.
            g.feed(g.wan, &frame);
            assert!(g.out_of(g.lan).is_empty(), "{what}: replay passed");
            assert_eq!(drops(&g.gw, "esp-decrypt", "replayed"), 1, "{what}");
        }
    }
}

/// What the peer would send with the case's key for sequence number `seq` and
/// decrypted text `text` (payload, padding, trailer) of its own making: the bad
/// input a forger with the key (or a broken peer) could produce. Without ESN.
fn seal_custom(v: &Vector, seq: u32, text: &[u8]) -> Vec<u8> {
    use crypto::{AeadOp, Direction, OpStatus, Span};
    assert!(!v.esn);
    let keys = KeyRegistry::new(4);
    let (key, salt) = v.keymat.split_at(v.alg.key_len());
    let h = keys.insert(v.alg.aead(), key).unwrap();
    let mut mem = vec![0u8; 16 + text.len() + 16];
    mem[..4].copy_from_slice(&v.spi.to_be_bytes());
    mem[4..8].copy_from_slice(&seq.to_be_bytes());
    mem[8..16].copy_from_slice(&u64::from(seq).to_be_bytes());
    mem[16..16 + text.len()].copy_from_slice(text);
    let mut nonce = [0u8; 12];
    nonce[..4].copy_from_slice(salt);
    nonce[4..].copy_from_slice(&u64::from(seq).to_be_bytes());
    let mut ops = [AeadOp::in_place(
        v.alg.aead(),
        h,
        Direction::Encrypt,
        nonce,
        Span::new(0, 8),
        Span::new(16, text.len() as u32),
    )];
    let mut engines = EngineSet::new(vec![Box::new(crypto_awslc::AwsLcEngine::new())]);
    engines.process(&keys, &mut mem, &mut ops);
    assert_eq!(ops[0].status, OpStatus::Ok);
    mem
}

/// `inner`, padded to four bytes with `padding`, then pad length and next header.
fn text(inner: &[u8], padding: &[u8], next_header: u8) -> Vec<u8> {
    let mut t = inner.to_vec();
    t.extend_from_slice(padding);
    t.push(padding.len() as u8);
    t.push(next_header);
    t
}

#[test]
fn bad_input_is_dropped_with_its_own_counter_and_changes_nothing() {
    let all = vectors();
    let v = all
        .iter()
        .find(|v| !v.esn && v.seq == 1 && v.inner[0] >> 4 == 4)
        .expect("an IPv4 case without ESN at sequence number 1");
    // Padding that aligns the inner packet's trailer, four bytes more than it must
    // be (allowed), and the same with one byte wrong.
    let n = (4 - (v.inner.len() + 2) % 4) % 4 + 4;
    let pad: Vec<u8> = (1..=n as u8).collect();
    let mut wrong = pad.clone();
    wrong[2] = 9;
    let outer = OUTERS[0];
    let mut g = gateway(v, outer, Side::Receiver);
    let inner_v6 = all.iter().find(|w| w.inner[0] >> 4 == 6).unwrap();
    let mut reserved = v.esp.clone();
    reserved[..4].copy_from_slice(&255u32.to_be_bytes());
    let mut unknown = v.esp.clone();
    unknown[3] ^= 1;
    let mut bad_icv = v.esp.clone();
    *bad_icv.last_mut().unwrap() ^= 1;
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("truncated", v.esp[..8 + 8 + 2 + 15].to_vec()),
        ("truncated", v.esp[..7].to_vec()),
        ("reserved-spi", reserved),
        ("unknown-spi", unknown),
        ("bad-icv", bad_icv),
        ("bad-padding", seal_custom(v, 2, &text(&v.inner, &wrong, 4))),
        ("bad-padding", seal_custom(v, 3, &[9, 4])),
        (
            "bad-next-header",
            seal_custom(v, 4, &text(&v.inner, &pad, 17)),
        ),
        (
            "bad-inner",
            seal_custom(v, 5, &text(&inner_v6.inner, &[], 4)),
        ),
        (
            "bad-inner",
            seal_custom(v, 6, &text(&v.inner[..10], &[], 4)),
        ),
    ];
    for (i, (reason, esp)) in cases.iter().enumerate() {
        let before = drops(&g.gw, "esp-decrypt", reason);
        g.feed(g.wan, &outer.wrap(esp));
        assert!(
            g.out_of(g.lan).is_empty(),
            "case {i} ({reason}) came through"
        );
        assert_eq!(
            drops(&g.gw, "esp-decrypt", reason),
            before + 1,
            "case {i}: counted as {reason}"
        );
    }
    assert_eq!(
        g.inbound
            .counters
            .icv_failed
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    assert_eq!(g.inbound.usage.packets(), 0, "nothing was taken in");
    // A dummy packet (next header 59) is taken in silence.
    g.feed(
        g.wan,
        &outer.wrap(&seal_custom(v, 7, &text(&[], &[1, 2], 59))),
    );
    assert!(g.out_of(g.lan).is_empty());
    // None of it moved the window: the case's own packet, sequence number 1,
    // still comes through.
    g.feed(g.wan, &outer.wrap(&v.esp));
    assert_eq!(
        g.out_of(g.lan).len(),
        1,
        "the good packet after the bad ones"
    );
    // Far ahead, then far behind: too old.
    g.feed(
        g.wan,
        &outer.wrap(&seal_custom(v, 5000, &text(&v.inner, &pad, 4))),
    );
    assert_eq!(g.out_of(g.lan).len(), 1);
    g.feed(
        g.wan,
        &outer.wrap(&seal_custom(v, 8, &text(&v.inner, &pad, 4))),
    );
    assert!(g.out_of(g.lan).is_empty());
    assert_eq!(drops(&g.gw, "esp-decrypt", "too-old"), 1);
    // An inner packet from outside the peer's selectors.
    let mut g = gateway_with(
        v,
        outer,
        Side::Receiver,
        vec!["198.19.99.0/24".parse().unwrap()],
    );
    g.feed(g.wan, &outer.wrap(&v.esp));
    assert!(g.out_of(g.lan).is_empty());
    assert_eq!(drops(&g.gw, "esp-decrypt", "policy"), 1);
}

/// Two workers route packets into one tunnel: the first to seal on its outbound SA
/// is the SA's sender, the other hands its packets over, and every packet leaves
/// from the sender with sequence numbers in the order they went out (a peer's
/// replay window of 32 never sees them reordered).
#[test]
fn one_sa_on_two_workers_is_sealed_by_one_in_sequence_order() {
    use dataplane::esp_handoff::HandoffBoard;
    let v = vectors()
        .into_iter()
        .find(|v| !v.alg.is_chained() && !v.esn && v.inner[0] >> 4 == 4)
        .expect("an AEAD case over IPv4");
    let outer = OUTERS[0];
    let mut a = gateway(&v, outer, Side::Sender);
    let mut b = gateway(&v, outer, Side::Sender);
    let board = HandoffBoard::new(2);
    a.gw.context_mut().hand_esp_over(board.link(0));
    b.gw.context_mut().hand_esp_over(board.link(1));
    // Every worker holds the same SA (one Arc), as a gateway's do.
    let id = a.gw.context().esp().find("site-b").unwrap();
    let sa =
        a.gw.context()
            .esp()
            .get(id)
            .unwrap()
            .outbound()
            .unwrap()
            .clone();
    b.gw.esp_mut().set_outbound(id, sa).unwrap();
    let frame = ether(LAN_MAC, HOST, ethertype(&v.inner), &hop_up(&v.inner, 1));
    let seq_of = |f: &[u8]| {
        let esp = &f[14 + outer.header_len()..];
        u32::from_be_bytes(esp[4..8].try_into().unwrap())
    };
    a.feed(a.lan, &frame);
    let mut seqs: Vec<u32> = a.out_of(a.wan).iter().map(|f| seq_of(f)).collect();
    for _ in 0..20 {
        for _ in 0..3 {
            b.feed(b.lan, &frame);
        }
        assert!(b.out_of(b.wan).is_empty(), "the other worker seals nothing");
        a.feed(a.lan, &frame);
        a.gw.run(a.now);
        seqs.extend(a.out_of(a.wan).iter().map(|f| seq_of(f)));
    }
    assert_eq!(seqs.len(), 1 + 20 * 4);
    let first = v.seq as u32;
    let want: Vec<u32> = (first..first + seqs.len() as u32).collect();
    assert_eq!(seqs, want, "in sequence order, from the one sender");
    let (ca, cb) = (
        a.gw.context().handoff_counters().unwrap(),
        b.gw.context().handoff_counters().unwrap(),
    );
    assert_eq!((cb.handed, ca.taken), (60, 60));
    assert_eq!((ca.full, ca.no_buffer, cb.full), (0, 0, 0));
}
