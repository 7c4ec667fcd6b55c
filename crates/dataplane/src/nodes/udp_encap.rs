//! `udp-encap`: a tunnel's datagrams (WireGuard messages: data, handshakes, cookie
//! replies; OpenVPN data packets) and the gateway's own (IKE messages) get their
//! outer UDP and IP headers
//! in the headroom, from the gateway's address on the port the route to the peer's
//! endpoint leaves by (from the UDP port in the metadata, or the WireGuard listen
//! port), and go on to
//! `ip-rewrite` for their Ethernet header. The route is looked up here, once: the
//! outer source depends on it.
//!
//! The outer header is what a Linux UDP socket would send: TTL (hop limit) 64, DF
//! set on IPv4 (path MTU discovery, the Linux default) with identification 0
//! (RFC 6864: an atomic datagram), no UDP checksum over IPv4 (RFC 768 allows it; the
//! AEAD tag protects the payload), the checksum IPv6 requires (RFC 8200 section 8.1).
//! Datagrams from a port of their own (the metadata's source port: IKE's, an
//! OpenVPN server's) go over IPv4 without DF and with an identification of
//! their own: one larger than the path (a certificate, to a peer that takes no
//! IKE fragments; a full-sized OpenVPN packet, which OpenVPN's own socket lets
//! the kernel cut) is cut by `ip4-fragment`, as a kernel would.

use crate::arena::Handle;
use crate::context::Context;
use crate::counters::NodeCounters;
use crate::fib::RouteTarget;
use crate::nodes::{IpRewrite, PerPacket};
use crate::outer_header::write_headers;
use std::net::SocketAddr;
use wire::{ipv4, ipv6, udp};

crate::node_errors! {
    /// Why udp-encap drops a datagram.
    pub enum UdpEncapError {
        NoRoute => "no-route", "No route to the peer's endpoint leads out of a port.";
        NoSource => "no-source", "The port to the endpoint has no address of its family.";
        NoHeadroom => "no-headroom", "No room in front of the datagram for the outer headers.";
        TooBig => "too-big", "Longer than a UDP datagram can be.";
        NoBuffer => "no-buffer", "No free buffer for one of the gateway's own datagrams (IKE).";
    }
}

#[repr(u16)]
enum Next {
    Rewrite = 0,
}

pub struct UdpEncap {
    /// The identification of the next IKE datagram over IPv4.
    next_ident: u16,
}

impl UdpEncap {
    pub const NAME: &'static str = "udp-encap";

    pub fn new() -> UdpEncap {
        // A random start, so that a restart does not reuse the numbers a peer
        // may still be reassembling (RFC 6864 section 4.2).
        UdpEncap {
            next_ident: rand::random(),
        }
    }
}

impl Default for UdpEncap {
    fn default() -> Self {
        Self::new()
    }
}

impl PerPacket for UdpEncap {
    per_packet_node!(errors: UdpEncapError, next: [IpRewrite::NAME]);

    fn one(
        &mut self,
        cx: &mut Context,
        h: Handle,
        _: &mut NodeCounters,
    ) -> Result<u16, UdpEncapError> {
        let m = *cx.arena.meta(h);
        let to = m.addr;
        let (port, next_hop) = match cx.ip.fib.lookup(to.ip()) {
            Some(RouteTarget::Via { port, next_hop }) => (port, next_hop),
            Some(RouteTarget::Attached { port }) => (port, to.ip()),
            // Local, a tunnel (a loop), a blackhole or nothing: not out of a port.
            _ => return Err(UdpEncapError::NoRoute),
        };
        let from = cx
            .ip
            .interfaces
            .source_for(port, to.ip())
            .ok_or(UdpEncapError::NoSource)?;
        let (src_port, ident) = match m.src_port {
            0 => (cx.tunnels.wg.listen_port, None),
            // From a port of its own: IKE's, an OpenVPN server's.
            p => {
                self.next_ident = self.next_ident.wrapping_add(1);
                (p, Some(self.next_ident))
            }
        };
        let from = SocketAddr::new(from, src_port);
        let ip_len = if to.is_ipv4() {
            ipv4::HEADER_LEN
        } else {
            ipv6::HEADER_LEN
        };
        let (start, len) = (m.offset as usize, m.len as usize);
        let udp_len = len + udp::HEADER_LEN;
        let total = udp_len + ip_len;
        if total > usize::from(u16::MAX) {
            return Err(UdpEncapError::TooBig);
        }
        let at = start
            .checked_sub(udp::HEADER_LEN + ip_len)
            .ok_or(UdpEncapError::NoHeadroom)?;
        let buf = &mut cx.arena.buffer_mut(h)[at..start + len];
        write_headers(buf, ip_len, from, to, ident);
        let meta = cx.arena.meta_mut(h);
        meta.offset = at as u16;
        meta.len = total as u16;
        meta.port = port.0;
        meta.addr = SocketAddr::new(next_hop, 0);
        Ok(Next::Rewrite as u16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outer_header::OUTER_TTL;
    use std::net::{Ipv4Addr, Ipv6Addr};

    #[test]
    fn ipv4_headers_are_what_a_linux_socket_sends() {
        let payload = [7u8; 32];
        let mut buf = vec![0u8; ipv4::HEADER_LEN + udp::HEADER_LEN + payload.len()];
        buf[28..].copy_from_slice(&payload);
        let from: SocketAddr = "198.18.2.1:51820".parse().unwrap();
        let to: SocketAddr = "198.18.2.2:40000".parse().unwrap();
        write_headers(&mut buf, ipv4::HEADER_LEN, from, to, None);
        let p = ipv4::Packet::new_checked(&buf[..]).unwrap();
        assert!(p.verify_checksum());
        assert!(p.dont_frag());
        assert_eq!(p.ttl(), OUTER_TTL);
        assert_eq!(p.total_len() as usize, buf.len());
        assert_eq!(p.src_addr(), Ipv4Addr::new(198, 18, 2, 1));
        let u = udp::Packet::new_checked(p.payload()).unwrap();
        assert_eq!((u.src_port(), u.dst_port()), (51820, 40000));
        assert_eq!(u.length() as usize, udp::HEADER_LEN + payload.len());
        assert_eq!(u.checksum(), 0);
        assert_eq!(u.payload(), payload);
    }

    #[test]
    fn ipv6_headers_carry_a_udp_checksum_that_verifies() {
        let mut buf = vec![0u8; ipv6::HEADER_LEN + udp::HEADER_LEN + 5];
        buf[48..].copy_from_slice(b"hello");
        let from: SocketAddr = "[2001:2:0:2::1]:51820".parse().unwrap();
        let to: SocketAddr = "[2001:2:0:2::2]:51821".parse().unwrap();
        write_headers(&mut buf, ipv6::HEADER_LEN, from, to, None);
        let p = ipv6::Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(p.hop_limit(), OUTER_TTL);
        assert_eq!(p.payload_len() as usize, udp::HEADER_LEN + 5);
        let src: Ipv6Addr = "2001:2:0:2::1".parse().unwrap();
        let dst: Ipv6Addr = "2001:2:0:2::2".parse().unwrap();
        assert_eq!(p.src_addr(), src);
        let u = udp::Packet::new_checked(p.payload()).unwrap();
        assert!(u.verify_checksum_v6(&src, &dst));
        assert_ne!(u.checksum(), 0);
    }
}
