//! `ip-lookup`: routes each IPv4 or IPv6 packet by its destination in the FIB. A
//! packet for one of the gateway's own addresses goes to local delivery; one to be
//! forwarded must have a TTL (hop limit) above 1 and goes to `ip-rewrite` with its
//! port and next hop in the metadata. One routed into a tunnel has its TTL taken off
//! here and must fit the tunnel's MTU (else it is answered with fragmentation needed
//! or packet too big, naming that MTU, so path MTU discovery works through the
//! tunnel; IPv4 without DF goes to `ip4-fragment` instead) and goes to `wg-encrypt` or
//! `esp-encrypt`, by the tunnel's kind. A blackhole route drops it; no route or an
//! expired TTL are counted and answered by `icmp-error` (destination unreachable,
//! time exceeded).

use crate::arena::{Handle, IcmpReason};
use crate::context::{Context, TunnelEntry};
use crate::counters::NodeCounters;
use crate::fib::{PortId, RouteTarget, TunnelId};
use crate::nodes::ip_rewrite::decrement_ttl;
use crate::nodes::{NO_PORT, PerPacket};
use std::net::{IpAddr, SocketAddr};

crate::node_errors! {
    /// Why ip-lookup drops a packet.
    pub enum IpLookupError {
        NoRoute => "no-route", "No route covers the destination (answered: unreachable).";
        Blackhole => "blackhole", "The route is a blackhole.";
        TtlExpired => "ttl-expired", "A TTL or hop limit of 0 or 1 to forward (answered: time exceeded).";
        NoTunnel => "no-tunnel", "The route names a tunnel this graph does not serve.";
        TunnelTooBig => "tunnel-too-big", "Larger than the tunnel's MTU with DF (or IPv6): answered with needs fragmentation / too big.";
        DirectedBroadcast => "directed-broadcast", "To the broadcast address of a port's IPv4 network: not forwarded (RFC 2644), and no neighbor is asked for it.";
    }
}

#[repr(u16)]
enum Next {
    Rewrite = 0,
    Local = 1,
    IcmpError = 2,
    Tunnel = 3,
    Fragment = 4,
    Esp = 5,
    OpenVpn = 6,
}

pub struct IpLookup;

impl IpLookup {
    pub const NAME: &'static str = "ip-lookup";
    pub const REWRITE: &'static str = "ip-rewrite";
    pub const LOCAL: &'static str = "ip-local";
}

/// Whether `dst` is the broadcast address (all host bits set) of one of the port's
/// IPv4 networks of /30 or wider.
fn is_broadcast_of(cx: &Context, port: PortId, dst: IpAddr) -> bool {
    let IpAddr::V4(d) = dst else {
        return false;
    };
    let Some(iface) = cx.ip.interfaces.get(port) else {
        return false;
    };
    iface.addrs.iter().any(|p| match p.addr {
        IpAddr::V4(a) if p.len <= 30 => {
            let host = u32::MAX >> p.len;
            u32::from(d) & !host == u32::from(a) & !host && u32::from(d) & host == host
        }
        _ => false,
    })
}

/// Destination and TTL (hop limit) of a packet ip4-input or ip6-input passed.
fn dst_and_ttl(data: &[u8]) -> (IpAddr, u8) {
    if data[0] >> 4 == 4 {
        let p = wire::ipv4::Packet::new_unchecked(data);
        (IpAddr::V4(p.dst_addr()), p.ttl())
    } else {
        let p = wire::ipv6::Packet::new_unchecked(data);
        (IpAddr::V6(p.dst_addr()), p.hop_limit())
    }
}

/// A packet routed into tunnel `t`: one hop less, and it must fit.
fn into_tunnel(
    cx: &mut Context,
    h: Handle,
    t: TunnelId,
    c: &mut NodeCounters,
) -> Result<u16, IpLookupError> {
    let (next, mtu) = match cx.tunnels.entry(t) {
        Some(TunnelEntry::WireGuard { mtu }) => (Next::Tunnel, mtu),
        Some(TunnelEntry::Esp { id, mtu }) => {
            // esp-encrypt finds the tunnel here.
            cx.arena.meta_mut(h).peer = u32::from(id.0);
            (Next::Esp, mtu)
        }
        Some(TunnelEntry::OpenVpn { id, mtu }) => {
            // ovpn-encrypt finds the server here, and the client by destination.
            cx.arena.meta_mut(h).peer = u32::from(id.0);
            (Next::OpenVpn, mtu)
        }
        None => return Err(IpLookupError::NoTunnel),
    };
    let data = cx.arena.data(h);
    if mtu != 0 && data.len() > mtu {
        let may_fragment =
            data[0] >> 4 == 4 && !wire::ipv4::Packet::new_unchecked(data).dont_frag();
        let mtu = u16::try_from(mtu).unwrap_or(u16::MAX);
        let m = cx.arena.meta_mut(h);
        m.icmp = Some(IcmpReason::TooBig { mtu });
        if may_fragment {
            // Cut to fit; the pieces come back here (no port: the tunnel's).
            m.port = NO_PORT;
            return Ok(Next::Fragment as u16);
        }
        c.drop(IpLookupError::TunnelTooBig);
        return Ok(Next::IcmpError as u16);
    }
    decrement_ttl(cx.arena.data_mut(h));
    Ok(next as u16)
}

impl PerPacket for IpLookup {
    per_packet_node!(
        errors: IpLookupError,
        next: [
            Self::REWRITE,
            Self::LOCAL,
            crate::nodes::IcmpError::NAME,
            crate::nodes::WgEncrypt::NAME,
            crate::nodes::Ip4Fragment::NAME,
            crate::nodes::EspEncrypt::NAME,
            crate::nodes::OvpnEncrypt::NAME,
        ]
    );

    fn one(
        &mut self,
        cx: &mut Context,
        h: Handle,
        c: &mut NodeCounters,
    ) -> Result<u16, IpLookupError> {
        let (dst, ttl) = dst_and_ttl(cx.arena.data(h));
        let route = cx.ip.fib.lookup(dst);
        if let Some(RouteTarget::Tunnel(t)) = route
            && ttl > 1
        {
            return into_tunnel(cx, h, t, c);
        }
        if let Some(RouteTarget::Attached { port }) = route
            && is_broadcast_of(cx, port, dst)
        {
            return Err(IpLookupError::DirectedBroadcast);
        }
        // Counted, and answered by icmp-error: the packet goes on, as the error.
        let mut answer = |why: IpLookupError, reason: IcmpReason| {
            c.drop(why);
            cx.arena.meta_mut(h).icmp = Some(reason);
            Ok(Next::IcmpError as u16)
        };
        let (port, next_hop) = match route {
            Some(RouteTarget::Local) => return Ok(Next::Local as u16),
            Some(RouteTarget::Via { port, next_hop }) => (port, next_hop),
            Some(RouteTarget::Attached { port }) => (port, dst),
            Some(RouteTarget::Tunnel(t)) if cx.tunnels.entry(t).is_some() => (PortId(NO_PORT), dst),
            Some(RouteTarget::Tunnel(_)) => return Err(IpLookupError::NoTunnel),
            Some(RouteTarget::Blackhole) => return Err(IpLookupError::Blackhole),
            None => return answer(IpLookupError::NoRoute, IcmpReason::NoRoute),
        };
        if ttl <= 1 {
            return answer(IpLookupError::TtlExpired, IcmpReason::TimeExceeded);
        }
        let m = cx.arena.meta_mut(h);
        m.port = port.0;
        m.addr = SocketAddr::new(next_hop, 0);
        Ok(Next::Rewrite as u16)
    }
}
