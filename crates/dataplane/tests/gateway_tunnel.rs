//! Two gateways joined by a WireGuard tunnel, in memory: site A's LAN, gateway A,
//! a wire between the WAN ports, gateway B, site B's LAN. The gateways resolve each
//! other by ARP, shake hands through their ports and carry IPv4 and IPv6 both ways;
//! a packet too big for the tunnel is answered so path MTU discovery works; an
//! expired TTL is answered; what the tunnel refuses is counted; every buffer comes
//! back.

use crypto::x25519::PrivateKey;
use crypto::{EngineSet, KeyRegistry};
use dataplane::Arena;
use dataplane::fib::{PortId, RouteTarget, TunnelId};
use dataplane::gateway::GatewayGraph;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use wire::{icmp, icmpv6, ipv4, ipv6};

mod ports;
use ports::{arp_answer, ether, nd_answer, sent as taken};
use wireguard::{Device, Prefix};

const BUFFERS: usize = 256;
const TUNNEL_MTU: usize = 1420;
const HOST_A: [u8; 6] = [0x02, 0, 0, 0, 0xa, 0x10];
const HOST_B: [u8; 6] = [0x02, 0, 0, 0, 0xb, 0x10];

struct Gw {
    gw: GatewayGraph,
    lan: PortId,
    wan: PortId,
    lan_mac: [u8; 6],
}

struct Sites {
    a: Gw,
    b: Gw,
    now: Instant,
    /// Frames the hosts on each LAN received (A's, B's), ARP answered already.
    at_a: Vec<Vec<u8>>,
    at_b: Vec<Vec<u8>>,
}

struct Side<'a> {
    id: u8,
    me: &'a PrivateKey,
    them: &'a PrivateKey,
    endpoint: Option<&'a str>,
}

/// Gateway `id` (1: A, 2: B): LAN 198.19.<id*2-1>.1/24 and 2001:2:0:<..>::1/64,
/// WAN 198.18.2.<id>/24 and 2001:2:0:2::<id>/64, the other site's LAN through the
/// tunnel.
fn gateway(side: Side<'_>, now: Instant) -> Gw {
    let keys = Arc::new(KeyRegistry::new(64));
    let mut device = Device::new(keys, now, SystemTime::now());
    device.set_private_key(Some(side.me.clone()));
    let peer = device.add_peer(side.them.public_key()).unwrap();
    if let Some(e) = side.endpoint {
        device.set_endpoint(peer, e.parse().unwrap());
    }
    let (mine, theirs) = if side.id == 1 { (1, 3) } else { (3, 1) };
    for p in [
        format!("198.19.{theirs}.0/24"),
        format!("2001:2:0:{theirs}::/64"),
    ] {
        device.add_allowed_ip(peer, p.parse::<Prefix>().unwrap());
    }
    let engines = EngineSet::new(vec![Box::new(crypto_awslc::AwsLcEngine::new())]);
    let mut gw = GatewayGraph::new(Arena::new(BUFFERS), engines, device, now);
    gw.set_wireguard(51820, TUNNEL_MTU);
    let lan_mac = [0x02, 0, 0, 0, side.id, 1];
    let port = |name, mac, addrs: Vec<String>| ports::interface(name, mac, &addrs, 1500);
    let lan = gw
        .add_port(port(
            "lan",
            lan_mac,
            vec![
                format!("198.19.{mine}.1/24"),
                format!("2001:2:0:{mine}::1/64"),
            ],
        ))
        .unwrap();
    let wan = gw
        .add_port(port(
            "wan",
            [0x02, 0, 0, 0, side.id, 2],
            vec![
                format!("198.18.2.{}/24", side.id),
                format!("2001:2:0:2::{}/64", side.id),
            ],
        ))
        .unwrap();
    for p in [
        format!("198.19.{theirs}.0/24"),
        format!("2001:2:0:{theirs}::/64"),
    ] {
        gw.add_route(p.parse().unwrap(), RouteTarget::Tunnel(TunnelId(0)))
            .unwrap();
    }
    Gw {
        gw,
        lan,
        wan,
        lan_mac,
    }
}

fn sites() -> Sites {
    sites_over("198.18.2.2:51820")
}

/// The two sites, A knowing B's endpoint `endpoint` (IPv4 or IPv6 underlay).
fn sites_over(endpoint: &str) -> Sites {
    let now = Instant::now();
    let (ka, kb) = (PrivateKey::generate(), PrivateKey::generate());
    let a = Side {
        id: 1,
        me: &ka,
        them: &kb,
        endpoint: Some(endpoint),
    };
    // B learns A's endpoint from the handshake.
    let b = Side {
        id: 2,
        me: &kb,
        them: &ka,
        endpoint: None,
    };
    Sites {
        a: gateway(a, now),
        b: gateway(b, now),
        now,
        at_a: Vec::new(),
        at_b: Vec::new(),
    }
}

fn feed(gw: &mut GatewayGraph, port: PortId, frames: &[Vec<u8>], now: Instant) {
    let n = ::ports::memory::put(gw, port, frames.iter().map(Vec::as_slice));
    assert_eq!(n, frames.len(), "a buffer for every frame");
    gw.run(now);
}

impl Sites {
    /// Moves frames between the WAN ports and answers the hosts' ARP and ND until
    /// nothing moves (bounded).
    fn settle(&mut self) {
        for _ in 0..50 {
            let to_b = taken(&mut self.a.gw, self.a.wan);
            let to_a = taken(&mut self.b.gw, self.b.wan);
            let lan_a = taken(&mut self.a.gw, self.a.lan);
            let lan_b = taken(&mut self.b.gw, self.b.lan);
            if to_b.is_empty() && to_a.is_empty() && lan_a.is_empty() && lan_b.is_empty() {
                return;
            }
            feed(&mut self.b.gw, self.b.wan, &to_b, self.now);
            feed(&mut self.a.gw, self.a.wan, &to_a, self.now);
            for (frames, host, gw, seen) in [
                (lan_a, HOST_A, &mut self.a, &mut self.at_a),
                (lan_b, HOST_B, &mut self.b, &mut self.at_b),
            ] {
                for f in frames {
                    match arp_answer(&f, host).or_else(|| nd_answer(&f, host)) {
                        Some(answer) => feed(&mut gw.gw, gw.lan, &[answer], self.now),
                        None => seen.push(f),
                    }
                }
            }
        }
        panic!("the sites never settled");
    }

    /// Host A sends an IP packet to gateway A's LAN port.
    fn host_a_sends(&mut self, ip: &[u8]) {
        let kind = if ip[0] >> 4 == 4 { 0x0800 } else { 0x86dd };
        let f = ether(self.a.lan_mac, HOST_A, kind, ip);
        feed(&mut self.a.gw, self.a.lan, &[f], self.now);
        self.settle();
    }

    fn host_b_sends(&mut self, ip: &[u8]) {
        let kind = if ip[0] >> 4 == 4 { 0x0800 } else { 0x86dd };
        let f = ether(self.b.lan_mac, HOST_B, kind, ip);
        feed(&mut self.b.gw, self.b.lan, &[f], self.now);
        self.settle();
    }

    fn drops(gw: &Gw, node: &str, reason: &str) -> u64 {
        gw.gw
            .counters()
            .find(|(n, _)| *n == node)
            .map_or(0, |(_, c)| c.drops_named(reason))
    }

    fn all_buffers_back(&self) {
        for gw in [&self.a, &self.b] {
            assert_eq!(gw.gw.context().arena().available(), BUFFERS);
        }
    }
}

/// An IPv4/UDP packet from host A to host B, TTL 64.
fn a_to_b(payload: &[u8], df: bool) -> Vec<u8> {
    udp4([198, 19, 1, 10], [198, 19, 3, 10], 64, payload, df)
}

fn udp4(src: [u8; 4], dst: [u8; 4], ttl: u8, payload: &[u8], df: bool) -> Vec<u8> {
    let total = 28 + payload.len();
    let mut p = vec![0u8; total];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    p[6] = if df { 0x40 } else { 0 };
    p[8] = ttl;
    p[9] = 17;
    p[12..16].copy_from_slice(&src);
    p[16..20].copy_from_slice(&dst);
    p[20..22].copy_from_slice(&4000u16.to_be_bytes());
    p[22..24].copy_from_slice(&4001u16.to_be_bytes());
    p[24..26].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    p[28..].copy_from_slice(payload);
    ipv4::Packet::new_unchecked(&mut p[..]).fill_checksum();
    p
}

fn udp6(src: &str, dst: &str, payload: &[u8]) -> Vec<u8> {
    let (src, dst): (Ipv6Addr, Ipv6Addr) = (src.parse().unwrap(), dst.parse().unwrap());
    let mut p = vec![0u8; 48 + payload.len()];
    p[0] = 0x60;
    p[4..6].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    p[6] = 17;
    p[7] = 64;
    p[8..24].copy_from_slice(&src.octets());
    p[24..40].copy_from_slice(&dst.octets());
    p[44..46].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    p[48..].copy_from_slice(payload);
    p
}

/// The IP packet of an Ethernet frame the host got.
fn ip_of(frame: &[u8]) -> &[u8] {
    &frame[14..]
}

#[test]
fn ipv4_and_ipv6_cross_the_tunnel_both_ways() {
    let mut s = sites();
    let p = a_to_b(b"first, waits for the handshake", false);
    s.host_a_sends(&p);
    assert_eq!(s.at_b.len(), 1, "delivered after the handshake");
    let got = ip_of(&s.at_b[0]).to_vec();
    let q = ipv4::Packet::new_checked(&got[..]).unwrap();
    assert_eq!(q.ttl(), 62, "one hop into the tunnel, one out of it");
    assert!(q.verify_checksum());
    assert_eq!(q.payload(), &p[20..]);
    assert_eq!(&s.at_b[0][..6], &HOST_B, "to host B's MAC, learned by ARP");

    let back = udp4([198, 19, 3, 10], [198, 19, 1, 10], 64, b"reply", false);
    s.host_b_sends(&back);
    assert_eq!(s.at_a.len(), 1);
    assert_eq!(
        ipv4::Packet::new_checked(ip_of(&s.at_a[0]))
            .unwrap()
            .payload(),
        &back[20..]
    );

    let v6 = udp6("2001:2:0:1::10", "2001:2:0:3::10", &[0x66; 1000]);
    s.host_a_sends(&v6);
    assert_eq!(s.at_b.len(), 2, "IPv6 too, after neighbor discovery");
    let got = ipv6::Packet::new_checked(ip_of(&s.at_b[1])).unwrap();
    assert_eq!(got.hop_limit(), 62);
    assert_eq!(got.payload(), &v6[40..]);

    for i in 0..100u32 {
        let payload = i.to_be_bytes().repeat(1 + i as usize % 300);
        s.host_a_sends(&a_to_b(&payload, true));
        s.host_b_sends(&udp4(
            [198, 19, 3, 10],
            [198, 19, 1, 10],
            64,
            &payload,
            true,
        ));
    }
    assert_eq!((s.at_a.len(), s.at_b.len()), (101, 102));
    s.all_buffers_back();
}

#[test]
fn an_ipv6_underlay_carries_the_tunnel() {
    let mut s = sites_over("[2001:2:0:2::2]:51820");
    let p = a_to_b(b"over IPv6", false);
    s.host_a_sends(&p);
    assert_eq!(
        s.at_b.len(),
        1,
        "after neighbor discovery and the handshake"
    );
    assert_eq!(
        ipv4::Packet::new_checked(ip_of(&s.at_b[0]))
            .unwrap()
            .payload(),
        &p[20..]
    );
    let v6 = udp6("2001:2:0:3::10", "2001:2:0:1::10", &[9; 1200]);
    s.host_b_sends(&v6);
    assert_eq!(
        s.at_a.len(),
        1,
        "B answers to the endpoint it learnt, over IPv6"
    );
    let b = s.b.gw.context().wg_device();
    let learnt = b.peer_info(b.peer_ids()[0]).unwrap().endpoint.unwrap();
    assert_eq!(learnt, "[2001:2:0:2::1]:51820".parse().unwrap());
    s.all_buffers_back();
}

#[test]
fn a_packet_too_big_for_the_tunnel_is_answered_with_its_mtu() {
    let mut s = sites();
    s.host_a_sends(&a_to_b(b"hello", true));
    let big = a_to_b(&[1; TUNNEL_MTU], true);
    s.host_a_sends(&big);
    assert_eq!(s.at_a.len(), 1, "an ICMP error to host A");
    let err = ipv4::Packet::new_checked(ip_of(&s.at_a[0])).unwrap();
    assert_eq!(
        IpAddr::V4(err.dst_addr()),
        "198.19.1.10".parse::<IpAddr>().unwrap()
    );
    let m = icmp::Packet::new_checked(err.payload()).unwrap();
    assert_eq!((m.msg_type(), m.code()), (3, 4), "fragmentation needed");
    assert_eq!(
        u16::from_be_bytes([err.payload()[6], err.payload()[7]]),
        TUNNEL_MTU as u16
    );
    assert_eq!(Sites::drops(&s.a, "ip-lookup", "tunnel-too-big"), 1);

    let big6 = udp6("2001:2:0:1::10", "2001:2:0:3::10", &[2; TUNNEL_MTU]);
    s.host_a_sends(&big6);
    assert_eq!(s.at_a.len(), 2);
    let err = ipv6::Packet::new_checked(ip_of(&s.at_a[1])).unwrap();
    let m = icmpv6::Packet::new_checked(err.payload()).unwrap();
    assert_eq!(m.msg_type(), 2, "packet too big");
    assert_eq!(&err.payload()[4..8], &(TUNNEL_MTU as u32).to_be_bytes());

    // Exactly the MTU fits.
    let fits = a_to_b(&[3; TUNNEL_MTU - 28], true);
    s.host_a_sends(&fits);
    assert_eq!(ip_of(s.at_b.last().unwrap()).len(), TUNNEL_MTU);
    s.all_buffers_back();
}

#[test]
fn a_packet_without_df_too_big_for_the_tunnel_crosses_in_fragments() {
    let mut s = sites();
    s.host_a_sends(&a_to_b(b"hello", false));
    let payload: Vec<u8> = (0..1800u32).map(|i| i as u8).collect();
    let big = a_to_b(&payload, false);
    s.host_a_sends(&big);
    let pieces: Vec<Vec<u8>> = s.at_b[1..].iter().map(|f| ip_of(f).to_vec()).collect();
    assert_eq!(
        pieces.len(),
        2,
        "1808 bytes of payload in pieces of at most 1400"
    );
    let mut whole = vec![0u8; big.len() - 20];
    for p in &pieces {
        let ip = ipv4::Packet::new_checked(&p[..]).unwrap();
        assert!(ip.verify_checksum() && p.len() <= TUNNEL_MTU);
        assert_eq!(ip.ttl(), 62);
        let off = usize::from(ip.frag_offset());
        whole[off..off + ip.payload().len()].copy_from_slice(ip.payload());
    }
    assert_eq!(whole, big[20..]);
    assert_eq!(Sites::drops(&s.a, "ip-lookup", "tunnel-too-big"), 0);
    s.all_buffers_back();
}

#[test]
fn ttl_expiry_into_the_tunnel_is_answered() {
    let mut s = sites();
    s.host_a_sends(&udp4(
        [198, 19, 1, 10],
        [198, 19, 3, 10],
        1,
        b"ttl 1",
        false,
    ));
    assert!(s.at_b.is_empty());
    assert_eq!(s.at_a.len(), 1);
    let err = ipv4::Packet::new_checked(ip_of(&s.at_a[0])).unwrap();
    assert_eq!(
        icmp::Packet::new_checked(err.payload()).unwrap().msg_type(),
        11
    );
    assert_eq!(Sites::drops(&s.a, "ip-lookup", "ttl-expired"), 1);
    s.all_buffers_back();
}

#[test]
fn what_the_tunnel_refuses_is_counted() {
    let mut s = sites();
    s.host_a_sends(&a_to_b(b"hello", false));
    assert_eq!(s.at_b.len(), 1);
    // Routed into the tunnel, but no peer's allowed IPs cover it.
    s.a.gw
        .add_route(
            "198.19.9.0/24".parse().unwrap(),
            RouteTarget::Tunnel(TunnelId(0)),
        )
        .unwrap();
    s.host_a_sends(&udp4(
        [198, 19, 1, 10],
        [198, 19, 9, 10],
        64,
        b"nobody",
        false,
    ));
    assert_eq!(Sites::drops(&s.a, "wg-encrypt", "no-peer"), 1);
    // B's peer may not send from addresses outside its allowed IPs at A.
    s.host_b_sends(&udp4(
        [198, 19, 7, 10],
        [198, 19, 1, 10],
        64,
        b"spoofed",
        false,
    ));
    assert_eq!(Sites::drops(&s.a, "wg-decrypt", "source-not-allowed"), 1);
    assert!(s.at_a.is_empty());
    // A garbage datagram to A's listen port, and one to another port.
    let mut junk = udp4(
        [198, 18, 2, 2],
        [198, 18, 2, 1],
        64,
        &[4, 0, 0, 0, 9, 9],
        false,
    );
    junk[22..24].copy_from_slice(&51820u16.to_be_bytes());
    ipv4::Packet::new_unchecked(&mut junk[..]).fill_checksum();
    let wan_mac = [0x02, 0, 0, 0, 1, 2];
    let peer_mac = [0x02, 0, 0, 0, 2, 2];
    feed(
        &mut s.a.gw,
        s.a.wan,
        &[ether(wan_mac, peer_mac, 0x0800, &junk)],
        s.now,
    );
    let other = udp4([198, 18, 2, 2], [198, 18, 2, 1], 64, b"x", false);
    feed(
        &mut s.a.gw,
        s.a.wan,
        &[ether(wan_mac, peer_mac, 0x0800, &other)],
        s.now,
    );
    assert_eq!(Sites::drops(&s.a, "wg-input", "truncated"), 1);
    assert_eq!(Sites::drops(&s.a, "ip-local", "unserved"), 1);
    let mut bad_sum = junk.clone();
    bad_sum[26] ^= 0xff;
    bad_sum[27] ^= 0x01;
    feed(
        &mut s.a.gw,
        s.a.wan,
        &[ether(wan_mac, peer_mac, 0x0800, &bad_sum)],
        s.now,
    );
    assert_eq!(Sites::drops(&s.a, "ip-local", "bad-udp-checksum"), 1);
    s.settle();
    // The tunnel still works.
    s.host_b_sends(&udp4(
        [198, 19, 3, 10],
        [198, 19, 1, 10],
        64,
        b"still up",
        false,
    ));
    assert_eq!(s.at_a.len(), 1);
    s.all_buffers_back();
}

#[test]
fn keepalives_and_rekeys_flow_through_the_ports() {
    let mut s = sites();
    s.host_a_sends(&a_to_b(b"hello", false));
    // Minutes pass with traffic one way only: keepalives answer, sessions renew.
    for _ in 0..30 {
        s.now += Duration::from_secs(10);
        s.a.gw.tick(s.now);
        s.b.gw.tick(s.now);
        s.a.gw.run(s.now);
        s.b.gw.run(s.now);
        s.settle();
        s.host_a_sends(&a_to_b(b"tick", false));
    }
    assert_eq!(s.at_b.len(), 31);
    let a = s.a.gw.context().wg_device();
    let info = a.peer_info(a.peer_ids()[0]).unwrap();
    assert!(info.last_handshake.is_some());
    s.all_buffers_back();
}

/// `show errors` explains a gateway's counters from `gateway::NODE_ERRORS`: it must
/// list every node of the graph that declares reasons, with the same reasons.
#[test]
fn every_dropping_node_is_explained() {
    let s = sites();
    for (node, c) in s.a.gw.counters() {
        let declared: Vec<&str> = c.drops().map(|(e, _)| e.name).collect();
        let listed: Vec<&str> = dataplane::gateway::NODE_ERRORS
            .iter()
            .find(|(n, _)| *n == node)
            .map(|(_, t)| t.iter().map(|e| e.name).collect())
            .unwrap_or_default();
        assert_eq!(declared, listed, "{node}");
        for name in declared {
            assert!(dataplane::gateway::explain(node, name).is_some_and(|d| !d.is_empty()));
        }
    }
}
