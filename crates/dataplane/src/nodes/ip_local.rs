//! `ip-local`: packets for the gateway itself. It answers ICMP and ICMPv6 echo
//! requests in place (the reply is routed back through `ip-lookup`), and takes part
//! in IPv6 neighbor discovery (RFC 4861 section 7.2): a solicitation for an address
//! of the port it came in on is answered with an advertisement straight onto that
//! port (hop limit 255 must reach the neighbor unchanged), its sender kept as a
//! neighbor; an advertisement completes or refreshes a neighbor. A UDP datagram to
//! a VXLAN tunnel's port goes to `vxlan-decap`, one to
//! the WireGuard listen port goes to `wg-input`, without its IP and UDP headers, its
//! source in the metadata (as a socket would give it). ESP (IP protocol 50, or in
//! UDP to an ESP tunnel's port, RFC 3948) goes to `esp-decrypt` without its outer
//! headers, with the outer destination and source port in the metadata (inbound SAs
//! are found by SPI and destination); NAT keepalives on that port are taken in
//! silence. With IKE on, UDP to port 500, and to 4500 behind the non-ESP marker,
//! goes to the key exchange (`crate::ike`), and ESP on 4500 is taken whatever the
//! tunnels' encapsulation now (NAT detection may switch it). UDP to an OpenVPN
//! server's port goes to `ovpn-decrypt` when it is a data packet, and to the
//! OpenVPN control thread's inbox otherwise. IP fragments for the gateway go into
//! the worker's reassembly table, and the datagram they complete comes through
//! here again, whole. Anything else for the gateway is dropped and counted.

use crate::arena::{HEADROOM, Handle};
use crate::context::Context;
use crate::counters::NodeCounters;
use crate::graph::FREE;
use crate::neighbor::Heard;
use crate::nodes::PerPacket;
use crate::nodes::ip_rewrite::push_ethernet;
use crate::reassembly::ReassemblyError;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use wire::ethernet::{MacAddr, ethertype};
use wire::{icmp, icmpv6, ip, ipv4, ipv6, udp};

crate::node_errors! {
    /// Why ip-local drops a packet.
    pub enum IpLocalError {
        Unserved => "unserved", "For the gateway, to a protocol or port it does not serve.";
        BadChecksum => "bad-checksum", "An ICMP or ICMPv6 message whose checksum does not verify.";
        BadNd => "bad-nd", "A neighbor solicitation or advertisement that RFC 4861 7.1 refuses.";
        NdNotOurs => "nd-not-ours", "Neighbor discovery for an address that is not the port's.";
        FragmentMalformed => "fragment-malformed", "A fragment for the gateway that is not a valid one (bad header, lengths that do not fit, a non-last fragment not a multiple of 8 long).";
        FragmentOverlap => "fragment-overlap", "A fragment that overlapped another of its datagram: the whole datagram is dropped (RFC 5722).";
        FragmentTooBig => "fragment-too-big", "A fragment that would make its datagram longer than 65535 bytes: the datagram is dropped whole.";
        FragmentTableFull => "fragment-table-full", "A fragment the worker's reassembly table had no room for (256 datagrams or 4 MiB pending): refused, nothing evicted.";
        FragmentConflictingLast => "fragment-conflicting-last", "Fragments that disagree on where their datagram ends: it is dropped whole.";
        FragmentTimedOut => "fragment-timed-out", "A datagram whose fragments did not all come within 5 s: dropped whole (counted once per datagram when the table lets it go).";
        ReassembledTooBig => "reassembled-too-big", "A datagram reassembled from fragments, longer than a packet buffer, that is not an IKE message (the key exchange takes those).";
        BadUdp => "bad-udp", "A UDP datagram whose length field does not fit its packet.";
        BadUdpChecksum => "bad-udp-checksum", "A UDP checksum that does not verify (or is zero over IPv6).";
        IkeBacklog => "ike-backlog", "An IKE message the key exchange had no room for (its inbox is full).";
        OvpnBacklog => "ovpn-backlog", "An OpenVPN control packet the control thread had no room for (its inbox is full).";
    }
}

#[repr(u16)]
enum Next {
    Lookup = 0,
    Output = 1,
    Tunnel = 2,
    Vxlan = 3,
    Esp = 4,
    OpenVpn = 5,
}

/// The hop limit (TTL) of the gateway's own packets.
const OWN_TTL: u8 = 64;

pub struct IpLocal;

impl IpLocal {
    pub const NAME: &'static str = "ip-local";
}

/// An ICMP echo request turned into its reply, in place, or why not.
fn echo4(pkt: &mut [u8]) -> Result<(), IpLocalError> {
    let mut p = ipv4::Packet::new_unchecked(&mut *pkt);
    let mut m = icmp::Packet::new_checked(p.payload_mut()).map_err(|_| IpLocalError::Unserved)?;
    if !m.verify_checksum() {
        return Err(IpLocalError::BadChecksum);
    }
    if m.msg_type() != icmp::msg_type::ECHO_REQUEST {
        return Err(IpLocalError::Unserved);
    }
    m.set_msg_type(icmp::msg_type::ECHO_REPLY);
    m.fill_checksum();
    let (src, dst) = (p.src_addr(), p.dst_addr());
    p.set_src_addr(dst);
    p.set_dst_addr(src);
    p.set_ttl(OWN_TTL);
    p.fill_checksum();
    Ok(())
}

impl PerPacket for IpLocal {
    per_packet_node!(
        errors: IpLocalError,
        next: [
            crate::nodes::IpLookup::NAME,
            crate::nodes::PortOutput::NAME,
            crate::nodes::WgInput::NAME,
            crate::nodes::VxlanDecap::NAME,
            crate::nodes::EspDecrypt::NAME,
            crate::nodes::OvpnDecrypt::NAME,
        ]
    );

    fn one(
        &mut self,
        cx: &mut Context,
        h: Handle,
        c: &mut NodeCounters,
    ) -> Result<u16, IpLocalError> {
        let data = cx.arena.data(h);
        if data[0] >> 4 == 4 {
            let p = ipv4::Packet::new_unchecked(data);
            if p.is_fragment() {
                return self.fragment(cx, h, c);
            }
            let (src, dst) = (IpAddr::V4(p.src_addr()), IpAddr::V4(p.dst_addr()));
            match p.protocol() {
                ip::protocol::ICMP => echo4(cx.arena.data_mut(h)).map(|()| Next::Lookup as u16),
                ip::protocol::UDP => udp(cx, h, p.header_len(), src, dst, c),
                ip::protocol::ESP => {
                    let headers = p.header_len();
                    esp(cx, h, headers, data.len() - headers, dst, 0)
                }
                _ => Err(IpLocalError::Unserved),
            }
        } else {
            let p = ipv6::Packet::new_unchecked(data);
            let (src, dst) = (IpAddr::V6(p.src_addr()), IpAddr::V6(p.dst_addr()));
            match p.next_header() {
                // What the fragment holds shows once it is whole.
                ip::protocol::FRAGMENT => self.fragment(cx, h, c),
                ip::protocol::ICMPV6 => Self::icmpv6(cx, h, c),
                ip::protocol::UDP => udp(cx, h, ipv6::HEADER_LEN, src, dst, c),
                ip::protocol::ESP => {
                    let len = data.len() - ipv6::HEADER_LEN;
                    esp(cx, h, ipv6::HEADER_LEN, len, dst, 0)
                }
                _ => Err(IpLocalError::Unserved),
            }
        }
    }
}

impl IpLocal {
    /// A fragment for the gateway: into this worker's reassembly table. The
    /// datagram it completes takes the fragment's buffer and goes through
    /// `ip-local` again, whole; one too long for a buffer is the key exchange's
    /// when it is an IKE message (a certificate's), and dropped otherwise.
    fn fragment(
        &mut self,
        cx: &mut Context,
        h: Handle,
        c: &mut NodeCounters,
    ) -> Result<u16, IpLocalError> {
        let whole = match cx.ip.reassembly.offer(cx.arena.data(h), cx.now) {
            Ok(Some(whole)) => whole,
            Ok(None) => {
                // Held (copied) until its datagram is whole.
                c.consumed += 1;
                return Ok(FREE);
            }
            Err(e) => return Err(IpLocalError::from(e)),
        };
        if whole.len() <= cx.arena.max_data() {
            let m = cx.arena.meta_mut(h);
            m.offset = HEADROOM as u16;
            m.len = whole.len() as u16;
            cx.arena.data_mut(h).copy_from_slice(&whole);
            // Whole now: no fragment fields, so this does not come back here.
            return self.one(cx, h, c);
        }
        let inbox = cx.tunnels.ike.as_ref();
        let datagram = crate::ike::datagram_in(&whole).ok();
        let (Some(inbox), Some(d)) = (inbox, datagram) else {
            return Err(IpLocalError::ReassembledTooBig);
        };
        if !inbox.hand_over(crate::ike::IkeInput::Datagram(d)) {
            return Err(IpLocalError::IkeBacklog);
        }
        c.consumed += 1;
        Ok(FREE)
    }
}

impl From<ReassemblyError> for IpLocalError {
    fn from(e: ReassemblyError) -> IpLocalError {
        match e {
            ReassemblyError::Malformed => IpLocalError::FragmentMalformed,
            ReassemblyError::Overlap => IpLocalError::FragmentOverlap,
            ReassemblyError::TooBig => IpLocalError::FragmentTooBig,
            ReassemblyError::TableFull => IpLocalError::FragmentTableFull,
            ReassemblyError::ConflictingLast => IpLocalError::FragmentConflictingLast,
            ReassemblyError::TimedOut => IpLocalError::FragmentTimedOut,
        }
    }
}

/// A UDP datagram for the gateway (after an IP header of `ip_len` bytes): one to the
/// tunnel's listen port goes to the tunnel as its payload, with its source.
fn udp(
    cx: &mut Context,
    h: Handle,
    ip_len: usize,
    src: IpAddr,
    dst: IpAddr,
    c: &mut NodeCounters,
) -> Result<u16, IpLocalError> {
    let payload = &cx.arena.data(h)[ip_len..];
    let u = udp::Packet::new_checked(payload).map_err(|_| IpLocalError::BadUdp)?;
    let len = usize::from(u.length());
    if len < udp::HEADER_LEN || len > payload.len() {
        return Err(IpLocalError::BadUdp);
    }
    let u = udp::Packet::new_unchecked(&payload[..len]);
    if !u.verify_checksum(src, dst) {
        return Err(IpLocalError::BadUdpChecksum);
    }
    let listen = cx.tunnels.wg.listen_port;
    let ike = cx.tunnels.ike.as_ref();
    let dst_port = u.dst_port();
    if let Some(inbox) = ike
        && crate::ike::is_ike(dst_port, u.payload())
    {
        let d = crate::ike::IkeInput::Datagram(crate::ike::IkeDatagram {
            local: SocketAddr::new(dst, dst_port),
            remote: SocketAddr::new(src, u.src_port()),
            payload: u.payload().to_vec(),
        });
        if !inbox.hand_over(d) {
            return Err(IpLocalError::IkeBacklog);
        }
        c.consumed += 1;
        return Ok(FREE);
    }
    let esp_port = cx.tunnels.esp.listens_on(dst_port)
        || (ike.is_some() && dst_port == crate::ike::NAT_T_PORT);
    let (next, addr) = if listen != 0 && dst_port == listen {
        (Next::Tunnel, SocketAddr::new(src, u.src_port()))
    } else if esp_port {
        let src_port = u.src_port();
        return match wire::esp::classify_udp(u.payload()) {
            Ok(wire::esp::UdpPayload::Esp) => esp(
                cx,
                h,
                ip_len + udp::HEADER_LEN,
                len - udp::HEADER_LEN,
                dst,
                src_port,
            ),
            Ok(wire::esp::UdpPayload::Keepalive) => {
                // The key exchange hears where each came from: a NATed peer's
                // keepalive from a new mapping is its cue to look there.
                if let Some(inbox) = ike {
                    let k = crate::ike::IkeInput::Keepalive {
                        local: SocketAddr::new(dst, dst_port),
                        remote: SocketAddr::new(src, src_port),
                    };
                    if !inbox.hand_over(k) {
                        return Err(IpLocalError::IkeBacklog);
                    }
                }
                c.consumed += 1;
                Ok(FREE)
            }
            // IKE behind the non-ESP marker with no key exchange running.
            Ok(wire::esp::UdpPayload::Ike) => Err(IpLocalError::Unserved),
            Err(_) => Err(IpLocalError::BadUdp),
        };
    } else if let Some(server) = cx.tunnels.ovpn.listening_on(dst_port) {
        let payload = u.payload();
        let remote = SocketAddr::new(src, u.src_port());
        if payload.first().map(|b| b >> 3) != Some(openvpn::Opcode::DataV2 as u8) {
            // Control packets (and anything else) go to the control thread,
            // which verifies them: the packet path only carries data.
            let input = crate::ovpn::OvpnInput::Control {
                server,
                local: SocketAddr::new(dst, dst_port),
                remote,
                payload: payload.to_vec(),
            };
            if !cx.tunnels.ovpn.tell(input) {
                return Err(IpLocalError::OvpnBacklog);
            }
            c.consumed += 1;
            return Ok(FREE);
        }
        cx.arena.meta_mut(h).peer = u32::from(server.0);
        (Next::OpenVpn, remote)
    } else if cx.tunnels.vxlan.listens_on(u.dst_port()) {
        // VXLAN's source port is a flow hash: what tells tunnels apart is the
        // port the datagram was sent to.
        (Next::Vxlan, SocketAddr::new(src, u.dst_port()))
    } else {
        return Err(IpLocalError::Unserved);
    };
    let m = cx.arena.meta_mut(h);
    m.offset += (ip_len + udp::HEADER_LEN) as u16;
    m.len = (len - udp::HEADER_LEN) as u16;
    m.addr = addr;
    Ok(next as u16)
}

/// An ESP packet of `len` bytes for the gateway, `headers` bytes in (IP, and UDP
/// when encapsulated): on to `esp-decrypt` with its destination and source port.
fn esp(
    cx: &mut Context,
    h: Handle,
    headers: usize,
    len: usize,
    dst: IpAddr,
    src_port: u16,
) -> Result<u16, IpLocalError> {
    if cx.tunnels.esp.is_empty() {
        return Err(IpLocalError::Unserved);
    }
    let m = cx.arena.meta_mut(h);
    m.offset += headers as u16;
    m.len = len as u16;
    m.addr = SocketAddr::new(dst, src_port);
    Ok(Next::Esp as u16)
}

impl IpLocal {
    fn icmpv6(cx: &mut Context, h: Handle, c: &mut NodeCounters) -> Result<u16, IpLocalError> {
        let pkt = cx.arena.data(h);
        let p = ipv6::Packet::new_unchecked(pkt);
        let (src, dst, hops) = (p.src_addr(), p.dst_addr(), p.hop_limit());
        let body = &pkt[ipv6::HEADER_LEN..];
        let m = icmpv6::Packet::new_checked(body).map_err(|_| IpLocalError::Unserved)?;
        if !m.verify_checksum(&src, &dst) {
            return Err(IpLocalError::BadChecksum);
        }
        match m.msg_type() {
            icmpv6::msg_type::ECHO_REQUEST if !dst.is_multicast() => {
                let pkt = cx.arena.data_mut(h);
                let mut m = icmpv6::Packet::new_unchecked(&mut pkt[ipv6::HEADER_LEN..]);
                m.set_msg_type(icmpv6::msg_type::ECHO_REPLY);
                m.fill_checksum(&dst, &src);
                pkt[7] = OWN_TTL;
                pkt[8..24].copy_from_slice(&dst.octets());
                pkt[24..40].copy_from_slice(&src.octets());
                Ok(Next::Lookup as u16)
            }
            icmpv6::msg_type::NEIGHBOR_SOLICIT | icmpv6::msg_type::NEIGHBOR_ADVERT => {
                if hops != icmpv6::ND_HOP_LIMIT {
                    return Err(IpLocalError::BadNd);
                }
                Self::neighbor(cx, h, src, c)
            }
            _ => Err(IpLocalError::Unserved),
        }
    }

    /// A solicitation or advertisement (hop limit and checksum checked).
    fn neighbor(
        cx: &mut Context,
        h: Handle,
        src: Ipv6Addr,
        c: &mut NodeCounters,
    ) -> Result<u16, IpLocalError> {
        let (port, ours) = cx.port_of(h).ok_or(IpLocalError::NdNotOurs)?;
        let body = &cx.arena.data(h)[ipv6::HEADER_LEN..];
        let nd = icmpv6::NeighborMessage::new_checked(body).map_err(|_| IpLocalError::BadNd)?;
        let target = nd.target_addr();
        let for_us = cx.ip.interfaces.owner(IpAddr::V6(target)) == Some(port);
        if nd.is_advert() {
            let heard = if nd.solicited_flag() {
                Heard::Answer
            } else {
                Heard::InPassing
            };
            if let Some(mac) = nd.target_link_addr() {
                let now = cx.now;
                cx.ip.learn((port, IpAddr::V6(target), mac.0), heard, now);
            }
            c.consumed += 1;
            return Ok(FREE);
        }
        if !for_us {
            return Err(IpLocalError::NdNotOurs);
        }
        let sender_mac = nd.source_link_addr();
        let advert = icmpv6::NeighborAdvertRepr::answer(&nd, &src, ours, true);
        // RFC 4861 7.2.4: to the solicitor, or to all nodes when it has no address
        // yet (duplicate address detection).
        let (to_ip, to_mac) = match (src.is_unspecified(), sender_mac) {
            (false, Some(mac)) => {
                let now = cx.now;
                cx.ip
                    .learn((port, IpAddr::V6(src), mac.0), Heard::ToUs, now);
                (src, mac)
            }
            _ => {
                let all = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
                (all, MacAddr::ipv6_multicast(&all))
            }
        };
        let pkt = cx.arena.data_mut(h);
        let n = advert
            .emit(&mut pkt[ipv6::HEADER_LEN..], &target, &to_ip)
            .map_err(|_| IpLocalError::BadNd)?;
        pkt[4..6].copy_from_slice(&(n as u16).to_be_bytes());
        pkt[7] = icmpv6::ND_HOP_LIMIT;
        pkt[8..24].copy_from_slice(&target.octets());
        pkt[24..40].copy_from_slice(&to_ip.octets());
        cx.arena.meta_mut(h).len = (ipv6::HEADER_LEN + n) as u16;
        if !push_ethernet(cx, h, to_mac.0, ours.0, ethertype::IPV6) {
            return Err(IpLocalError::BadNd);
        }
        Ok(Next::Output as u16)
    }
}
