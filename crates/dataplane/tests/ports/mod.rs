//! What the gateway tests do at a gateway graph's ports, as a driver would: frames
//! in, the frames a port would send out, a node's drop counter.

#![allow(dead_code)]

use dataplane::OutputId;
use dataplane::fib::PortId;
use dataplane::gateway::GatewayGraph;
use dataplane::interfaces::Interface;
use std::time::Instant;
use wire::{arp, icmpv6, ipv6};

/// `frame` received on `port`, and the graph run.
pub fn send(gw: &mut GatewayGraph, port: PortId, frame: &[u8], now: Instant) {
    assert_eq!(
        ::ports::memory::put(gw, port, [frame]),
        1,
        "a buffer for the frame"
    );
    gw.run(now);
}

/// Frames `port`'s driver would send now, taken out (their buffers freed).
pub fn sent(gw: &mut GatewayGraph, port: PortId) -> Vec<Vec<u8>> {
    ::ports::memory::sent(gw, port)
}

/// What `node` dropped for `reason`.
pub fn drops(gw: &GatewayGraph, node: &str, reason: &str) -> u64 {
    gw.counters()
        .find(|(n, _)| *n == node)
        .map_or(0, |(_, c)| c.drops_named(reason))
}

/// A test's gateway and its clock, which the helpers above take as methods.
pub trait UnderTest {
    /// The graph, and the time the test runs it at.
    fn graph(&mut self) -> (&mut GatewayGraph, Instant);

    /// `frame` received on `port`, and the graph run.
    fn send(&mut self, port: PortId, frame: &[u8]) {
        let (gw, now) = self.graph();
        send(gw, port, frame, now);
    }

    /// Frames the port's driver would send now, taken out.
    fn sent(&mut self, port: PortId) -> Vec<Vec<u8>> {
        sent(self.graph().0, port)
    }

    /// What `node` dropped for `reason`.
    fn drops(&mut self, node: &str, reason: &str) -> u64 {
        drops(self.graph().0, node, reason)
    }
}

/// A port's interface: its name, MAC address, addresses (prefixes, as the
/// configuration writes them) and MTU, on output queue 0.
pub fn interface<S: AsRef<str>>(name: &str, mac: [u8; 6], addrs: &[S], mtu: u16) -> Interface {
    Interface {
        name: name.into(),
        mac,
        mtu,
        addrs: addrs.iter().map(|a| a.as_ref().parse().unwrap()).collect(),
        output: OutputId(0),
    }
}

/// An IPv4 packet (no options, identification 0) carrying `payload` in UDP
/// (checksum 0, which IPv4 allows), its header checksum filled.
pub fn udp4_packet(
    src: [u8; 4],
    dst: [u8; 4],
    src_port: u16,
    dst_port: u16,
    payload: &[u8],
) -> Vec<u8> {
    let total = 28 + payload.len();
    let mut p = vec![0u8; total];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&src);
    p[16..20].copy_from_slice(&dst);
    p[20..22].copy_from_slice(&src_port.to_be_bytes());
    p[22..24].copy_from_slice(&dst_port.to_be_bytes());
    p[24..26].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    p[28..].copy_from_slice(payload);
    wire::ipv4::Packet::new_unchecked(&mut p[..]).fill_checksum();
    p
}

/// An IPv4 packet (a 20-byte header) cut into fragments of `each` bytes of its
/// payload (a multiple of 8), as a sender's kernel cuts it; each fragment's
/// header checksum filled.
pub fn ipv4_fragments(packet: &[u8], each: usize) -> Vec<Vec<u8>> {
    let body = &packet[20..];
    body.chunks(each)
        .enumerate()
        .map(|(i, piece)| {
            let mut f = packet[..20].to_vec();
            f.extend_from_slice(piece);
            let total = f.len() as u16;
            f[2..4].copy_from_slice(&total.to_be_bytes());
            let last = (i + 1) * each >= body.len();
            let field = ((i * each / 8) as u16) | if last { 0 } else { 0x2000 };
            f[6..8].copy_from_slice(&field.to_be_bytes());
            wire::ipv4::Packet::new_unchecked(&mut f[..]).fill_checksum();
            f
        })
        .collect()
}

/// An Ethernet frame.
pub fn ether(dst: [u8; 6], src: [u8; 6], kind: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&src);
    f.extend_from_slice(&kind.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// The ARP reply of a host with `mac` to a request, if the frame is a request.
pub fn arp_answer(frame: &[u8], mac: [u8; 6]) -> Option<Vec<u8>> {
    if frame[12..14] != [0x08, 0x06] {
        return None;
    }
    let req = arp::Packet::new_checked(&frame[14..]).ok()?;
    let asked = arp::ArpRepr {
        operation: req.operation(),
        sender_mac: req.sender_mac(),
        sender_ip: req.sender_ip(),
        target_mac: req.target_mac(),
        target_ip: req.target_ip(),
    };
    let mut body = vec![0u8; arp::PACKET_LEN];
    arp::emit_reply(&mut body, &asked, wire::ethernet::MacAddr(mac)).ok()?;
    Some(ether(frame[6..12].try_into().unwrap(), mac, 0x0806, &body))
}

/// The neighbor advertisement of a host with `mac` to a solicitation, if it is one.
pub fn nd_answer(frame: &[u8], mac: [u8; 6]) -> Option<Vec<u8>> {
    if frame[12..14] != [0x86, 0xdd] || frame[14 + 6] != 58 {
        return None;
    }
    let ip = ipv6::Packet::new_checked(&frame[14..]).ok()?;
    let nd = icmpv6::NeighborMessage::new_checked(ip.payload()).ok()?;
    if nd.is_advert() {
        return None;
    }
    let advert =
        icmpv6::NeighborAdvertRepr::answer(&nd, &ip.src_addr(), wire::ethernet::MacAddr(mac), true);
    let target = nd.target_addr();
    let mut pkt = vec![0u8; 40 + 32];
    let n = advert.emit(&mut pkt[40..], &target, &ip.src_addr()).ok()?;
    pkt.truncate(40 + n);
    pkt[0] = 0x60;
    pkt[4..6].copy_from_slice(&(n as u16).to_be_bytes());
    pkt[6] = 58;
    pkt[7] = 255;
    pkt[8..24].copy_from_slice(&target.octets());
    pkt[24..40].copy_from_slice(&ip.src_addr().octets());
    Some(ether(frame[6..12].try_into().unwrap(), mac, 0x86dd, &pkt))
}
