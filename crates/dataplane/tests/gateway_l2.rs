//! Layer 2 in the gateway graph, in memory: a port cross-connected to a VXLAN
//! tunnel that runs in cleartext out of another port. Frames of any kind (VLAN
//! tags, unknown EtherTypes, broadcast) go into VXLAN byte for byte and come out of
//! it byte for byte; every malformed datagram and oversized frame is dropped under
//! its own counter, and every buffer comes back.

mod ports;

use crypto::EngineSet;
use dataplane::Arena;
use dataplane::fib::PortId;
use dataplane::gateway::GatewayGraph;
use dataplane::l2::L2Interface;
use dataplane::vxlan::{VxlanTunnel, max_frame_to};
use ports::{UnderTest, ether};
use std::net::{IpAddr, Ipv4Addr};
use std::time::Instant;
use wire::{arp, ipv4, udp, vxlan};

const L2_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 1];
const WAN_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 2];
const FAR_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0xfe];
const BUFFERS: usize = 64;
const VNI: u32 = 4242;
const LOCAL: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const REMOTE: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

struct Site {
    gw: GatewayGraph,
    l2: PortId,
    wan: PortId,
    now: Instant,
}

fn site() -> Site {
    let now = Instant::now();
    let keys = std::sync::Arc::new(crypto::KeyRegistry::new(1));
    let device = wireguard::Device::new(keys, now, std::time::SystemTime::now());
    let mut gw = GatewayGraph::new(Arena::new(BUFFERS), EngineSet::new(vec![]), device, now);
    let port = |name, mac, addrs: &[&str]| ports::interface(name, mac, addrs, 1500);
    let l2 = gw.add_port(port("lan2", L2_MAC, &[])).unwrap();
    let wan = gw
        .add_port(port("wan", WAN_MAC, &["198.18.0.1/24"]))
        .unwrap();
    let cx = gw.context();
    let max_frame = max_frame_to(
        cx.ip().fib(),
        |p| cx.ip().interfaces().get(p).map(|i| i.mtu),
        |t| cx.tunnel_mtu(t),
        IpAddr::V4(REMOTE),
    )
    .unwrap();
    assert_eq!(max_frame, 1500 - 36);
    let vx = gw
        .add_vxlan(VxlanTunnel {
            name: "vx0".into(),
            vni: VNI,
            local: IpAddr::V4(LOCAL),
            remote: IpAddr::V4(REMOTE),
            udp_port: vxlan::PORT,
            max_frame,
        })
        .unwrap();
    gw.add_xconnect(L2Interface::Port(l2), L2Interface::Vxlan(vx))
        .unwrap();
    gw.add_xconnect(L2Interface::Vxlan(vx), L2Interface::Port(l2))
        .unwrap();
    Site { gw, l2, wan, now }
}

impl UnderTest for Site {
    fn graph(&mut self) -> (&mut GatewayGraph, Instant) {
        (&mut self.gw, self.now)
    }
}

impl Site {
    /// The far end answers the gateway's ARP request for the remote.
    fn remote_answers_arp(&mut self) {
        let mut reply = [0u8; arp::PACKET_LEN];
        arp::emit_reply(
            &mut reply,
            &arp::ArpRepr {
                operation: arp::operation::REQUEST,
                sender_mac: wire::ethernet::MacAddr(WAN_MAC),
                sender_ip: LOCAL,
                target_mac: wire::ethernet::MacAddr([0; 6]),
                target_ip: REMOTE,
            },
            wire::ethernet::MacAddr(FAR_MAC),
        )
        .unwrap();
        let wan = self.wan;
        self.send(wan, &ether(WAN_MAC, FAR_MAC, 0x0806, &reply));
    }
}

/// A frame from the far site's LAN, inside VXLAN from the remote: the whole
/// Ethernet frame as it reaches the WAN port.
fn vxlan_frame(vni: u32, flags: u8, inner: &[u8], from: Ipv4Addr) -> Vec<u8> {
    let mut dg = vec![0u8; vxlan::HEADER_LEN];
    vxlan::emit(&mut dg, vni).unwrap();
    dg[0] = flags;
    dg.extend_from_slice(inner);
    let udp_len = udp::HEADER_LEN + dg.len();
    let mut p = vec![0u8; ipv4::HEADER_LEN + udp_len];
    ipv4::Ipv4Repr {
        src_addr: from,
        dst_addr: LOCAL,
        protocol: wire::ip::protocol::UDP,
        payload_len: udp_len as u16,
        ttl: 64,
        dscp: 0,
        ecn: 0,
        ident: 0,
        dont_frag: true,
    }
    .emit(&mut p)
    .unwrap();
    let u = &mut p[ipv4::HEADER_LEN..];
    u[..2].copy_from_slice(&50000u16.to_be_bytes());
    u[2..4].copy_from_slice(&vxlan::PORT.to_be_bytes());
    u[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    u[8..].copy_from_slice(&dg);
    ether(WAN_MAC, FAR_MAC, 0x0800, &p)
}

/// Frames a LAN sends that a router would refuse: VLAN-tagged, an unknown
/// EtherType, broadcast.
fn odd_frames() -> Vec<Vec<u8>> {
    let host = [0x02, 0, 0, 0, 0x33, 0x01];
    let other = [0x02, 0, 0, 0, 0x33, 0x02];
    let mut tagged = ether(other, host, 0x8100, &[0x00, 0x64, 0x08, 0x00]);
    tagged.extend((0..60u8).collect::<Vec<_>>());
    vec![
        tagged,
        ether(other, host, 0x88b5, &[7; 46]),
        ether([0xff; 6], host, 0x0806, &[1; 28]),
    ]
}

#[test]
fn frames_cross_into_vxlan_and_out_again_byte_for_byte() {
    let mut s = site();
    let (l2, wan) = (s.l2, s.wan);
    let frames = odd_frames();
    // The first waits for the remote's address; the answer releases it.
    s.send(l2, &frames[0]);
    let out = s.sent(wan);
    assert_eq!(out.len(), 1, "an ARP request for the remote");
    assert_eq!(out[0][12..14], [0x08, 0x06]);
    s.remote_answers_arp();
    for f in &frames[1..] {
        s.send(l2, f);
    }
    let out = s.sent(wan);
    assert_eq!(out.len(), frames.len());
    for (outer, inner) in out.iter().zip(&frames) {
        assert_eq!((&outer[..6], &outer[6..12]), (&FAR_MAC[..], &WAN_MAC[..]));
        let ip = ipv4::Packet::new_checked(&outer[14..]).unwrap();
        assert!(ip.verify_checksum() && ip.dont_frag());
        assert_eq!((ip.src_addr(), ip.dst_addr()), (LOCAL, REMOTE));
        let u = udp::Packet::new_checked(ip.payload()).unwrap();
        assert_eq!(u.dst_port(), vxlan::PORT);
        assert!(u.src_port() >= 49152);
        let v = vxlan::Header::new_checked(u.payload()).unwrap();
        assert_eq!(v.vni(), VNI);
        assert_eq!(v.payload(), &inner[..], "the frame, byte for byte");
    }
    // And back: VXLAN from the remote comes out of the cross-connected port as is.
    for f in &frames {
        s.send(wan, &vxlan_frame(VNI, 0x08, f, REMOTE));
    }
    assert_eq!(s.sent(l2), frames);
    assert_eq!(s.gw.context().arena().available(), BUFFERS);
}

#[test]
fn bad_vxlan_and_oversized_frames_are_counted() {
    let mut s = site();
    let (l2, wan) = (s.l2, s.wan);
    let inner = odd_frames().remove(1);
    s.send(wan, &vxlan_frame(VNI, 0x0c, &inner, REMOTE));
    assert_eq!(s.drops("vxlan-decap", "bad-flags"), 1);
    s.send(wan, &vxlan_frame(VNI + 1, 0x08, &inner, REMOTE));
    s.send(
        wan,
        &vxlan_frame(VNI, 0x08, &inner, Ipv4Addr::new(198, 18, 0, 9)),
    );
    assert_eq!(
        s.drops("vxlan-decap", "unknown-vni"),
        2,
        "wrong VNI, wrong source"
    );
    s.send(wan, &vxlan_frame(VNI, 0x08, &inner[..10], REMOTE));
    assert_eq!(s.drops("vxlan-decap", "runt-inner"), 1);
    let mut cut = vxlan_frame(VNI, 0x08, &[], REMOTE);
    cut.truncate(cut.len() - 3); // the VXLAN header short (IP and UDP lengths fixed up)
    let ip_len = (cut.len() - 14) as u16;
    cut[16..18].copy_from_slice(&ip_len.to_be_bytes());
    cut[24..26].fill(0);
    let sum = wire::checksum::checksum(&cut[14..34]);
    cut[24..26].copy_from_slice(&sum.to_be_bytes());
    cut[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
    s.send(wan, &cut);
    assert_eq!(s.drops("vxlan-decap", "truncated"), 1);
    // An inner frame larger than the port it leaves by.
    let big = ether(L2_MAC, FAR_MAC, 0x88b5, &[0; 1501]);
    s.send(wan, &vxlan_frame(VNI, 0x08, &big, REMOTE));
    assert_eq!(s.drops("l2-xconnect", "too-big"), 1);
    // A frame larger than the tunnel's path carries unfragmented.
    s.remote_answers_arp();
    s.sent(wan);
    let big = ether(FAR_MAC, L2_MAC, 0x88b5, &[0; 1500 - 36 - 14 + 1]);
    s.send(l2, &big);
    assert_eq!(s.drops("vxlan-decap", "too-big"), 0);
    assert_eq!(s.drops("vxlan-encap", "too-big"), 1);
    assert!(s.sent(wan).is_empty() && s.sent(l2).is_empty());
    // A runt on the cross-connected port.
    s.send(l2, &[1, 2, 3]);
    assert_eq!(s.drops("ethernet-input", "runt"), 1);
    assert_eq!(s.gw.context().arena().available(), BUFFERS);
}
