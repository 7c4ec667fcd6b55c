//! `ip-rewrite`: makes a routed packet ready for its port. It takes one from the TTL
//! (hop limit), patching the IPv4 checksum incrementally (RFC 1624), checks the
//! packet fits the port's MTU (one that does not is answered, or cut by
//! `ip4-fragment` when it is IPv4 without DF), asks the neighbor table for the next hop's Ethernet
//! address and writes the Ethernet header into the headroom. A next hop not yet
//! known keeps the packet waiting in the table (the graph sends it when the answer
//! comes, see `gateway`), or has it dropped and counted.

use crate::arena::{Handle, IcmpReason};
use crate::context::Context;
use crate::counters::NodeCounters;
use crate::fib::PortId;
use crate::graph::KEEP;
use crate::neighbor::{Mac, Resolved};
use crate::nodes::PerPacket;
use wire::ethernet::{self, ethertype};

crate::node_errors! {
    /// Why ip-rewrite drops a packet.
    pub enum IpRewriteError {
        TooBig => "too-big", "Longer than the port's MTU with DF (or IPv6): answered with needs fragmentation / too big.";
        OwnTooBig => "own-too-big", "A packet the gateway made itself (a tunnel's outer packet, with DF) longer than the port's MTU: dropped; the tunnel's MTU (WireGuard's, an ESP tunnel's, an OpenVPN server's) is lowered to fit it, so its senders hear the MTU that fits.";
        NoPort => "no-port", "Routed to a port that is not configured.";
        NoHeadroom => "no-headroom", "No room in front of the packet for an Ethernet header.";
        QueueFull => "neighbor-queue-full", "Already 4 packets wait for the next hop to answer.";
        Unresolved => "neighbor-unresolved", "The next hop never answered ARP or ND.";
        TableFull => "neighbor-table-full", "The neighbor table is full of entries in use.";
        NoBuffer => "no-buffer", "No free buffer for a neighbor solicitation.";
    }
}

#[repr(u16)]
enum Next {
    Output = 0,
    IcmpError = 1,
    Fragment = 2,
}

pub struct IpRewrite;

impl IpRewrite {
    pub const NAME: &'static str = "ip-rewrite";
    pub const OUTPUT: &'static str = "port-output";
}

/// One hop less: TTL and checksum (IPv4) or hop limit (IPv6). The caller checked the
/// TTL is above 1.
pub(crate) fn decrement_ttl(ip: &mut [u8]) {
    if ip[0] >> 4 == 4 {
        wire::ipv4::Packet::new_unchecked(ip).decrement_ttl();
    } else {
        wire::ipv6::Packet::new_unchecked(ip).decrement_hop_limit();
    }
}

/// The EtherType of the IP packet `h`.
pub(crate) fn ip_ethertype(cx: &Context, h: Handle) -> u16 {
    match cx.arena.data(h).first().map(|b| b >> 4) {
        Some(4) => ethertype::IPV4,
        _ => ethertype::IPV6,
    }
}

/// Writes an Ethernet header in front of the packet `h` (moving its start back) for
/// `dst`, from `src`; false when there is no room.
pub(crate) fn push_ethernet(cx: &mut Context, h: Handle, dst: Mac, src: Mac, kind: u16) -> bool {
    let m = *cx.arena.meta(h);
    let start = m.offset as usize;
    if start < ethernet::HEADER_LEN {
        return false;
    }
    let buf = cx.arena.buffer_mut(h);
    let header = &mut buf[start - ethernet::HEADER_LEN..start];
    header[..6].copy_from_slice(&dst);
    header[6..12].copy_from_slice(&src);
    header[12..14].copy_from_slice(&kind.to_be_bytes());
    let meta = cx.arena.meta_mut(h);
    meta.offset -= ethernet::HEADER_LEN as u16;
    meta.len += ethernet::HEADER_LEN as u16;
    true
}

impl PerPacket for IpRewrite {
    per_packet_node!(
        errors: IpRewriteError,
        next: [Self::OUTPUT, crate::nodes::IcmpError::NAME, crate::nodes::Ip4Fragment::NAME]
    );

    fn one(
        &mut self,
        cx: &mut Context,
        h: Handle,
        c: &mut NodeCounters,
    ) -> Result<u16, IpRewriteError> {
        let m = *cx.arena.meta(h);
        let port = PortId(m.port);
        let (mtu, src) = cx
            .ip
            .interfaces
            .get(port)
            .map(|p| (p.mtu, p.mac))
            .ok_or(IpRewriteError::NoPort)?;
        if m.len > mtu {
            let data = cx.arena.data(h);
            // IPv6 is never fragmented on the way, nor IPv4 with DF (RFC 1191: tell
            // the source the MTU); IPv4 without DF is cut to fit, our own too (the
            // key exchange's messages go so).
            let may_fragment =
                data[0] >> 4 == 4 && !wire::ipv4::Packet::new_unchecked(data).dont_frag();
            if !may_fragment
                && let Some(src) = source_of(data)
                && cx.ip.interfaces.owner(src).is_some()
            {
                // An error about our own packet would be addressed to ourselves:
                // the inner sender must hear of it instead, from the tunnel's MTU.
                fit_tunnel_to(cx, h, src, usize::from(mtu));
                return Err(IpRewriteError::OwnTooBig);
            }
            cx.arena.meta_mut(h).icmp = Some(IcmpReason::TooBig { mtu });
            if may_fragment {
                return Ok(Next::Fragment as u16);
            }
            c.drop(IpRewriteError::TooBig);
            return Ok(Next::IcmpError as u16);
        }
        if (m.offset as usize) < ethernet::HEADER_LEN {
            return Err(IpRewriteError::NoHeadroom);
        }
        decrement_ttl(cx.arena.data_mut(h));
        let ip = &mut cx.ip;
        Ok(
            match ip
                .neighbors
                .resolve(port, m.addr.ip(), h, cx.now, &mut ip.events)
            {
                Resolved::Mac(dst) => {
                    let kind = ip_ethertype(cx, h);
                    push_ethernet(cx, h, dst, src, kind);
                    Next::Output as u16
                }
                // The table holds it now, or handed it back in a Drop event.
                Resolved::Waiting => KEEP,
            },
        )
    }
}

/// An IP packet's source address.
fn source_of(ip: &[u8]) -> Option<std::net::IpAddr> {
    match ip.first()? >> 4 {
        4 => <[u8; 4]>::try_from(ip.get(12..16)?)
            .ok()
            .map(|a| std::net::Ipv4Addr::from(a).into()),
        6 => <[u8; 16]>::try_from(ip.get(8..24)?)
            .ok()
            .map(|a| std::net::Ipv6Addr::from(a).into()),
        _ => None,
    }
}

/// When `h` (from our address `src`) is a tunnel's outer packet that a port of
/// `mtu` cannot carry, lowers that tunnel's MTU so that its outer packets fit:
/// from then on `ip-lookup` answers larger inner packets with the MTU that fits.
/// A WireGuard datagram is UDP from the listen port; an ESP packet's tunnel is
/// the one between its outer addresses.
fn fit_tunnel_to(cx: &mut Context, h: Handle, src: std::net::IpAddr, mtu: usize) {
    let data = cx.arena.data(h);
    let dst = match data[0] >> 4 {
        4 => <[u8; 4]>::try_from(&data[16..20]).map(|a| std::net::Ipv4Addr::from(a).into()),
        _ => <[u8; 16]>::try_from(&data[24..40]).map(|a| std::net::Ipv6Addr::from(a).into()),
    };
    if lower_wg_mtu_to_fit(cx, h, mtu) || lower_ovpn_mtu_to_fit(cx, h, mtu) {
        return;
    }
    if let Ok(dst) = dst {
        cx.tunnels.esp.fit_mtu_to(src, dst, mtu);
    }
}

/// The IP header's length and the UDP source port of our own outer packet `ip`;
/// `None` when it is not UDP.
fn udp_source(ip: &[u8]) -> Option<(usize, u16)> {
    let (ip_len, proto) = match ip.first()? >> 4 {
        4 => (usize::from(ip[0] & 0x0f) * 4, *ip.get(9)?),
        _ => (wire::ipv6::HEADER_LEN, *ip.get(6)?),
    };
    let port = ip.get(ip_len..ip_len + 2)?;
    (proto == wire::ip::protocol::UDP).then(|| (ip_len, u16::from_be_bytes([port[0], port[1]])))
}

/// Lowers the WireGuard tunnel's MTU when `h` is one of its datagrams too large for
/// a port of `mtu`; whether `h` was one.
fn lower_wg_mtu_to_fit(cx: &mut Context, h: Handle, mtu: usize) -> bool {
    let listen = cx.wg_listen_port();
    let Some((ip_len, port)) = udp_source(cx.arena.data(h)) else {
        return false;
    };
    let from_wg = listen != 0 && port == listen;
    let fits =
        mtu.saturating_sub(ip_len + wire::udp::HEADER_LEN + crate::wg_limits::OUTER_OVERHEAD);
    if from_wg && fits > 0 && (cx.wg_mtu() == 0 || fits < cx.wg_mtu()) {
        cx.set_wg_mtu(fits);
    }
    from_wg
}

/// Lowers an OpenVPN server's MTU when `h` is one of its data packets too large
/// for a port of `mtu` (an IPv6 client's: IPv4 ones leave in fragments); whether
/// `h` was one. Every client of the server then gets the MTU that fits: larger
/// inner packets are answered from `ip-lookup` (or cut, IPv4 without DF).
fn lower_ovpn_mtu_to_fit(cx: &mut Context, h: Handle, mtu: usize) -> bool {
    let Some((ip_len, port)) = udp_source(cx.arena.data(h)) else {
        return false;
    };
    let ovpn = &mut cx.tunnels.ovpn;
    let Some(server) = ovpn.listening_on(port).and_then(|id| ovpn.get_mut(id)) else {
        return false;
    };
    let fits = mtu.saturating_sub(ip_len + wire::udp::HEADER_LEN + openvpn::data::OVERHEAD);
    if fits > 0 && fits < server.mtu {
        server.mtu = fits;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_incremental_checksum_matches_a_full_one() {
        for ttl in [2u8, 64, 128, 255] {
            let mut p = vec![
                0x45, 0, 0, 20, 0x12, 0x34, 0x40, 0, ttl, 17, 0, 0, 198, 18, 0, 1, 198, 19, 0, 1,
            ];
            wire::ipv4::Packet::new_unchecked(&mut p[..]).fill_checksum();
            decrement_ttl(&mut p);
            assert_eq!(p[8], ttl - 1);
            assert!(wire::ipv4::Packet::new_unchecked(&p[..]).verify_checksum());
        }
        let mut v6 = vec![0x60, 0, 0, 0, 0, 0, 17, 64];
        decrement_ttl(&mut v6);
        assert_eq!(v6[7], 63);
    }
}
