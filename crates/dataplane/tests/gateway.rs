//! The gateway graph with two ports in memory: a LAN host's packet is routed to a
//! next hop on the WAN port after ARP resolves it, with TTL and checksum rewritten;
//! ARP requests and pings for the gateway's addresses are answered; IPv6 neighbor
//! discovery resolves a next hop; expired TTLs, missing routes and next hops that
//! never answer are dropped under their own counters; every buffer comes back.

mod ports;

use crypto::EngineSet;
use dataplane::Arena;
use dataplane::fib::{PortId, RouteTarget};
use dataplane::gateway::GatewayGraph;
use dataplane::neighbor::RETRANS_TIMER;
use ports::{UnderTest, ether};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Instant;
use wire::{arp, icmp, icmpv6, ipv4, ipv6};

/// A WireGuard device with no key or peers: the gateway serves no tunnel.
fn no_tunnel(now: Instant) -> wireguard::Device {
    let keys = std::sync::Arc::new(crypto::KeyRegistry::new(1));
    wireguard::Device::new(keys, now, std::time::SystemTime::now())
}

const LAN_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 1];
const WAN_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 2];
const HOST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x10];
const ROUTER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0xfe];
const BUFFERS: usize = 256;

struct Box2 {
    gw: GatewayGraph,
    lan: PortId,
    wan: PortId,
    now: Instant,
}

fn gateway() -> Box2 {
    let now = Instant::now();
    let mut gw = GatewayGraph::new(
        Arena::new(BUFFERS),
        EngineSet::new(vec![]),
        no_tunnel(now),
        now,
    );
    let port = ports::interface::<&str>;
    let lan = gw
        .add_port(port(
            "lan",
            LAN_MAC,
            &["198.19.0.1/24", "2001:2:0:1::1/64"],
            1500,
        ))
        .unwrap();
    let wan = gw
        .add_port(port(
            "wan",
            WAN_MAC,
            &["198.18.0.1/24", "2001:2::1/64"],
            1400,
        ))
        .unwrap();
    gw.add_route(
        "0.0.0.0/0".parse().unwrap(),
        RouteTarget::Via {
            port: wan,
            next_hop: "198.18.0.254".parse().unwrap(),
        },
    )
    .unwrap();
    Box2 { gw, lan, wan, now }
}

fn udp4(src: [u8; 4], dst: [u8; 4], ttl: u8) -> Vec<u8> {
    let mut p = vec![
        0x45, 0, 0, 28, 0, 1, 0, 0, ttl, 17, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x30, 0x39, 0x30, 0x39,
        0, 8, 0, 0,
    ];
    p[12..16].copy_from_slice(&src);
    p[16..20].copy_from_slice(&dst);
    ipv4::Packet::new_unchecked(&mut p[..]).fill_checksum();
    p
}

/// An IPv6 packet with an 8-byte UDP payload, hop limit 64.
fn udp6(src: Ipv6Addr, dst: Ipv6Addr) -> Vec<u8> {
    let mut p = vec![0u8; 48];
    p[0] = 0x60;
    p[5] = 8;
    p[6] = 17;
    p[7] = 64;
    p[8..24].copy_from_slice(&src.octets());
    p[24..40].copy_from_slice(&dst.octets());
    p
}

impl UnderTest for Box2 {
    fn graph(&mut self) -> (&mut GatewayGraph, Instant) {
        (&mut self.gw, self.now)
    }
}

impl Box2 {
    fn available(&self) -> usize {
        self.gw.context().arena().available()
    }
}

#[test]
fn a_packet_is_routed_once_arp_resolves_its_next_hop() {
    let mut b = gateway();
    let (lan, wan) = (b.lan, b.wan);
    let packet = udp4([198, 19, 0, 10], [198, 18, 99, 1], 64);
    b.send(lan, &ether(LAN_MAC, HOST_MAC, 0x0800, &packet));
    // The next hop is unknown: an ARP request goes out of the WAN port, the packet waits.
    let out = b.sent(wan);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0][..6], [0xff; 6]);
    let req = arp::Packet::new_checked(&out[0][14..]).unwrap();
    assert_eq!(req.operation(), arp::operation::REQUEST);
    assert_eq!(req.sender_ip(), Ipv4Addr::new(198, 18, 0, 1));
    assert_eq!(req.sender_mac().0, WAN_MAC);
    assert_eq!(req.target_ip(), Ipv4Addr::new(198, 18, 0, 254));
    assert_eq!(b.available(), BUFFERS - 1, "the packet waits in its buffer");
    // The router answers: the packet goes, with its headers rewritten.
    router_answers_arp(&mut b);
    let out = b.sent(wan);
    assert_eq!(out.len(), 1);
    let f = &out[0];
    assert_eq!((&f[..6], &f[6..12]), (&ROUTER_MAC[..], &WAN_MAC[..]));
    let ip = ipv4::Packet::new_checked(&f[14..]).unwrap();
    assert_eq!(ip.ttl(), 63);
    assert!(ip.verify_checksum());
    assert_eq!(&f[14 + 20..], &packet[20..], "the payload is untouched");
    // Known now: the next packet goes at once.
    b.send(lan, &ether(LAN_MAC, HOST_MAC, 0x0800, &packet));
    assert_eq!(b.sent(wan).len(), 1);
    assert_eq!(b.available(), BUFFERS);
}

#[test]
fn arp_and_pings_for_the_gateway_are_answered() {
    let mut b = gateway();
    let lan = b.lan;
    let mut req = [0u8; arp::PACKET_LEN];
    arp::emit_request(
        &mut req,
        wire::ethernet::MacAddr(HOST_MAC),
        Ipv4Addr::new(198, 19, 0, 10),
        Ipv4Addr::new(198, 19, 0, 1),
    )
    .unwrap();
    b.send(lan, &ether([0xff; 6], HOST_MAC, 0x0806, &req));
    let out = b.sent(lan);
    assert_eq!(out.len(), 1);
    assert_eq!(&out[0][..6], &HOST_MAC[..]);
    let r = arp::Packet::new_checked(&out[0][14..]).unwrap();
    assert_eq!(r.operation(), arp::operation::REPLY);
    assert_eq!(r.sender_mac().0, LAN_MAC);
    assert_eq!(r.sender_ip(), Ipv4Addr::new(198, 19, 0, 1));
    // The host is a neighbor now: a ping to the gateway is answered straight back.
    let mut ping = vec![0u8; 20 + 8 + 4];
    icmp::EchoRepr {
        reply: false,
        identifier: 7,
        sequence: 1,
        data: b"ping",
    }
    .emit(&mut ping[20..])
    .unwrap();
    ping[..20].copy_from_slice(&udp4([198, 19, 0, 10], [198, 19, 0, 1], 64)[..20]);
    ping[3] = 32;
    ping[9] = 1;
    ipv4::Packet::new_unchecked(&mut ping[..]).fill_checksum();
    b.send(lan, &ether(LAN_MAC, HOST_MAC, 0x0800, &ping));
    let out = b.sent(lan);
    // The host is known from its request, as stale (RFC 4861 7.3.3): the reply goes
    // at once, and a unicast probe confirms the host.
    assert_eq!(out.len(), 2, "{out:?}");
    let probe = out
        .iter()
        .find(|f| f[12..14] == [0x08, 0x06])
        .expect("a probe");
    assert_eq!(&probe[..6], &HOST_MAC[..]);
    let reply = out
        .iter()
        .find(|f| f[12..14] == [0x08, 0x00])
        .expect("a reply");
    assert_eq!(&reply[..6], &HOST_MAC[..]);
    let ip = ipv4::Packet::new_checked(&reply[14..]).unwrap();
    assert_eq!(ip.src_addr(), Ipv4Addr::new(198, 19, 0, 1));
    assert_eq!(ip.dst_addr(), Ipv4Addr::new(198, 19, 0, 10));
    let m = icmp::Packet::new_checked(ip.payload()).unwrap();
    assert_eq!(m.msg_type(), icmp::msg_type::ECHO_REPLY);
    assert!(m.verify_checksum());
    assert_eq!(b.available(), BUFFERS);
}

#[test]
fn neighbor_discovery_resolves_an_ipv6_next_hop() {
    let mut b = gateway();
    let wan = b.wan;
    let host: Ipv6Addr = "2001:2::99".parse().unwrap();
    let p = udp6("2001:2:0:1::10".parse().unwrap(), host);
    b.send(b.lan, &ether(LAN_MAC, HOST_MAC, 0x86dd, &p));
    let out = b.sent(wan);
    assert_eq!(out.len(), 1, "a neighbor solicitation");
    assert_eq!(out[0][..6], icmpv6::solicited_node_mac(&host).0);
    let ns_ip = ipv6::Packet::new_checked(&out[0][14..]).unwrap();
    assert_eq!(ns_ip.hop_limit(), 255);
    assert_eq!(ns_ip.dst_addr(), icmpv6::solicited_node(&host));
    let ns = icmpv6::NeighborMessage::new_checked(ns_ip.payload()).unwrap();
    assert!(ns.is_solicit() && ns.target_addr() == host);
    assert!(ns.verify_checksum(&ns_ip.src_addr(), &ns_ip.dst_addr()));
    // The host advertises itself, solicited: the packet goes to it.
    let ours: Ipv6Addr = "2001:2::1".parse().unwrap();
    let mut na = vec![0u8; 40 + 32];
    let n = icmpv6::NeighborAdvertRepr {
        target: host,
        router: false,
        solicited: true,
        override_flag: true,
        target_link_addr: Some(wire::ethernet::MacAddr(ROUTER_MAC)),
    }
    .emit(&mut na[40..], &host, &ours)
    .unwrap();
    na.truncate(40 + n);
    na[0] = 0x60;
    na[4..6].copy_from_slice(&(n as u16).to_be_bytes());
    na[6] = 58;
    na[7] = 255;
    na[8..24].copy_from_slice(&host.octets());
    na[24..40].copy_from_slice(&ours.octets());
    b.send(wan, &ether(WAN_MAC, ROUTER_MAC, 0x86dd, &na));
    let out = b.sent(wan);
    assert_eq!(out.len(), 1);
    assert_eq!(&out[0][..6], &ROUTER_MAC[..]);
    assert_eq!(
        ipv6::Packet::new_checked(&out[0][14..])
            .unwrap()
            .hop_limit(),
        63
    );
    assert_eq!(b.available(), BUFFERS);
}

#[test]
fn undeliverable_packets_are_counted_and_their_buffers_return() {
    let mut b = gateway();
    let (lan, wan) = (b.lan, b.wan);
    b.send(
        lan,
        &ether(
            LAN_MAC,
            HOST_MAC,
            0x0800,
            &udp4([198, 19, 0, 10], [198, 18, 99, 1], 1),
        ),
    );
    assert_eq!(b.drops("ip-lookup", "ttl-expired"), 1);
    // No IPv6 default route.
    let p = udp6(
        "2001:2:0:1::10".parse().unwrap(),
        "2001:2:0:7::1".parse().unwrap(),
    );
    b.send(lan, &ether(LAN_MAC, HOST_MAC, 0x86dd, &p));
    assert_eq!(b.drops("ip-lookup", "no-route"), 1);
    // A next hop that never answers: its packets are given up and counted.
    for _ in 0..6 {
        b.send(
            lan,
            &ether(
                LAN_MAC,
                HOST_MAC,
                0x0800,
                &udp4([198, 19, 0, 10], [198, 18, 99, 1], 64),
            ),
        );
    }
    assert_eq!(b.drops("ip-rewrite", "neighbor-queue-full"), 2);
    for s in 1..=3 {
        b.gw.tick(b.now + RETRANS_TIMER * s);
        b.gw.run(b.now + RETRANS_TIMER * s);
    }
    // The four waiting packets, and the two errors (time exceeded, unreachable)
    // that waited for the LAN host, which never answers either.
    assert_eq!(b.drops("ip-rewrite", "neighbor-unresolved"), 6);
    assert_eq!(b.sent(wan).len(), 3, "three ARP requests, then it gave up");
    assert_eq!(
        b.sent(lan).len(),
        6,
        "three ARP requests and three solicitations"
    );
    assert_eq!(b.available(), BUFFERS);
}

/// Makes the LAN host known: it asks for the gateway's address.
/// The WAN router (198.18.0.254) answers the gateway's ARP request.
fn router_answers_arp(b: &mut Box2) {
    let mut reply = [0u8; arp::PACKET_LEN];
    arp::emit_reply(
        &mut reply,
        &arp::ArpRepr {
            operation: arp::operation::REQUEST,
            sender_mac: wire::ethernet::MacAddr(WAN_MAC),
            sender_ip: Ipv4Addr::new(198, 18, 0, 1),
            target_mac: wire::ethernet::MacAddr([0; 6]),
            target_ip: Ipv4Addr::new(198, 18, 0, 254),
        },
        wire::ethernet::MacAddr(ROUTER_MAC),
    )
    .unwrap();
    let wan = b.wan;
    b.send(wan, &ether(WAN_MAC, ROUTER_MAC, 0x0806, &reply));
}

fn introduce_host(b: &mut Box2) {
    let mut req = [0u8; arp::PACKET_LEN];
    arp::emit_request(
        &mut req,
        wire::ethernet::MacAddr(HOST_MAC),
        Ipv4Addr::new(198, 19, 0, 10),
        Ipv4Addr::new(198, 19, 0, 1),
    )
    .unwrap();
    let lan = b.lan;
    b.send(lan, &ether([0xff; 6], HOST_MAC, 0x0806, &req));
    b.sent(lan);
}

#[test]
fn expired_ttls_and_packets_too_big_are_answered_with_icmp() {
    let mut b = gateway();
    let lan = b.lan;
    introduce_host(&mut b);
    let expired = udp4([198, 19, 0, 10], [198, 18, 99, 1], 1);
    b.send(lan, &ether(LAN_MAC, HOST_MAC, 0x0800, &expired));
    let out = b.sent(lan);
    let error = out
        .iter()
        .find(|f| f[12..14] == [0x08, 0x00])
        .expect("an ICMP error to the host");
    assert_eq!(&error[..6], &HOST_MAC[..]);
    let ip = ipv4::Packet::new_checked(&error[14..]).unwrap();
    assert!(ip.verify_checksum());
    assert_eq!(ip.src_addr(), Ipv4Addr::new(198, 19, 0, 1));
    assert_eq!(ip.dst_addr(), Ipv4Addr::new(198, 19, 0, 10));
    let m = icmp::Packet::new_checked(ip.payload()).unwrap();
    assert_eq!((m.msg_type(), m.code()), (icmp::msg_type::TIME_EXCEEDED, 0));
    assert!(m.verify_checksum());
    assert_eq!(m.payload(), &expired[..28], "the header and 8 bytes quoted");
    // A DF packet larger than the WAN port's MTU (1400): fragmentation needed.
    let mut big = vec![0u8; 1450];
    big[..28].copy_from_slice(&udp4([198, 19, 0, 10], [198, 18, 99, 1], 64));
    big[2..4].copy_from_slice(&1450u16.to_be_bytes());
    big[6] = 0x40; // DF
    ipv4::Packet::new_unchecked(&mut big[..]).fill_checksum();
    b.send(lan, &ether(LAN_MAC, HOST_MAC, 0x0800, &big));
    let out = b.sent(lan);
    let counts: Vec<String> =
        b.gw.counters()
            .flat_map(|(n, c)| {
                c.drops()
                    .filter(|d| d.1 > 0)
                    .map(move |(e, v)| format!("{n}.{}={v}", e.name))
            })
            .collect();
    let error = out
        .iter()
        .find(|f| f[12..14] == [0x08, 0x00])
        .unwrap_or_else(|| panic!("no error: {counts:?}, {} frames", out.len()));
    let ip = ipv4::Packet::new_checked(&error[14..]).unwrap();
    let m = icmp::Packet::new_checked(ip.payload()).unwrap();
    assert_eq!(
        (m.msg_type(), m.code(), m.next_hop_mtu()),
        (
            icmp::msg_type::DEST_UNREACHABLE,
            icmp::unreachable::FRAG_NEEDED,
            1400
        )
    );
    // An error about an error is not answered.
    let mut about_error = error[14..].to_vec();
    about_error[8] = 1; // TTL 1 on the way back in
    ipv4::Packet::new_unchecked(&mut about_error[..]).fill_checksum();
    b.send(lan, &ether(LAN_MAC, HOST_MAC, 0x0800, &about_error));
    assert_eq!(b.drops("icmp-error", "for-an-error"), 1);
    assert!(b.sent(lan).iter().all(|f| f[12..14] != [0x08, 0x00]));
    assert_eq!(b.available(), BUFFERS);
}

#[test]
fn a_packet_without_df_too_big_for_the_port_is_fragmented() {
    let mut b = gateway();
    let (lan, wan) = (b.lan, b.wan);
    // The router answers ARP first (the first packet waits for it).
    b.send(
        lan,
        &ether(
            LAN_MAC,
            HOST_MAC,
            0x0800,
            &udp4([198, 19, 0, 10], [198, 18, 99, 1], 64),
        ),
    );
    b.sent(wan);
    router_answers_arp(&mut b);
    b.sent(wan);
    // 1480 bytes without DF through the WAN port's MTU of 1400: two fragments.
    let mut big = vec![0u8; 1480];
    big[..28].copy_from_slice(&udp4([198, 19, 0, 10], [198, 18, 99, 1], 64));
    for (i, x) in big[28..].iter_mut().enumerate() {
        *x = i as u8;
    }
    big[2..4].copy_from_slice(&1480u16.to_be_bytes());
    ipv4::Packet::new_unchecked(&mut big[..]).fill_checksum();
    b.send(lan, &ether(LAN_MAC, HOST_MAC, 0x0800, &big));
    let out = b.sent(wan);
    assert_eq!(out.len(), 2, "two fragments");
    let mut payload = vec![0u8; 1460];
    for f in &out {
        let ip = ipv4::Packet::new_checked(&f[14..]).unwrap();
        assert!(ip.verify_checksum());
        assert!(usize::from(ip.total_len()) <= 1400);
        assert_eq!(ip.ttl(), 63, "each fragment one hop less");
        let off = usize::from(ip.frag_offset());
        payload[off..off + ip.payload().len()].copy_from_slice(ip.payload());
    }
    let first = ipv4::Packet::new_checked(&out[0][14..]).unwrap();
    assert!(first.more_frags() && first.frag_offset() == 0);
    assert!(
        !ipv4::Packet::new_checked(&out[1][14..])
            .unwrap()
            .more_frags()
    );
    assert_eq!(payload, big[20..], "the fragments hold the whole payload");
    assert_eq!(b.drops("ip-rewrite", "too-big"), 0);
    assert_eq!(b.available(), BUFFERS);

    // A frame of such packets: each one's fragments leave together, in order (a
    // Linux receiver drops a datagram whose pieces are more than 64 apart).
    let frames: Vec<Vec<u8>> = (0..64u16)
        .map(|id| {
            let mut p = big.clone();
            p[4..6].copy_from_slice(&id.to_be_bytes());
            ipv4::Packet::new_unchecked(&mut p[..]).fill_checksum();
            ether(LAN_MAC, HOST_MAC, 0x0800, &p)
        })
        .collect();
    let put = ::ports::memory::put(&mut b.gw, lan, frames.iter().map(Vec::as_slice));
    assert_eq!(put, 64, "one frame of them");
    b.gw.run(b.now);
    let out = b.sent(wan);
    assert_eq!(out.len(), 128);
    for (i, pair) in out.chunks(2).enumerate() {
        let (a, z) = (
            ipv4::Packet::new_checked(&pair[0][14..]).unwrap(),
            ipv4::Packet::new_checked(&pair[1][14..]).unwrap(),
        );
        assert_eq!((a.ident(), z.ident()), (i as u16, i as u16));
        assert!(a.more_frags() && a.frag_offset() == 0 && !z.more_frags());
    }
    assert_eq!(b.available(), BUFFERS);
}

#[test]
fn a_next_hop_answered_on_another_workers_queue_releases_the_waiting_packet() {
    let mut workers = [gateway(), gateway()];
    for (b, share) in workers.iter_mut().zip(dataplane::neighbor_share::mesh(2)) {
        b.gw.context_mut().ip_mut().share_neighbors(share);
    }
    let [w0, w1] = &mut workers;
    let (lan, wan) = (w1.lan, w1.wan);
    // Worker 1 routes a packet and asks for the next hop.
    let packet = udp4([198, 19, 0, 10], [198, 18, 99, 1], 64);
    w1.send(lan, &ether(LAN_MAC, HOST_MAC, 0x0800, &packet));
    assert_eq!(w1.sent(wan).len(), 1, "the ARP request");
    // The answer arrives on worker 0's queue: worker 0 has no entry and makes none,
    // but passes the news on.
    router_answers_arp(w0);
    assert!(w0.sent(wan).is_empty());
    assert!(w0.gw.context().ip().neighbors().is_empty());
    // Worker 1's next run learns it and sends the packet.
    w1.gw.run(w1.now);
    let out = w1.sent(wan);
    assert_eq!(out.len(), 1);
    assert_eq!(
        (&out[0][..6], &out[0][6..12]),
        (&ROUTER_MAC[..], &WAN_MAC[..])
    );
    assert_eq!(w1.available(), BUFFERS);
    // News heard from another worker is not passed on again (no echo).
    w0.gw.run(w0.now);
    assert!(w0.gw.context().ip().neighbors().is_empty());
    assert_eq!(w0.gw.context().ip().neighbor_news_lost(), 0);
}
