//! Socket addresses in the kernel's layout.
//!
//! recvmmsg and sendmmsg take one `sockaddr` per message, and the batch arrays hold
//! them side by side. [`SockAddr`] is a union with room for either family, so one array
//! serves IPv4 and IPv6 peers alike, and the conversions here are the only place that
//! knows how a dual-stack socket spells an IPv4 peer (as a v4-mapped IPv6 address).

use std::mem::size_of;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// Room for either socket address family, so one array serves both.
#[derive(Clone, Copy)]
#[repr(C)]
pub(super) union SockAddr {
    v4: libc::sockaddr_in,
    v6: libc::sockaddr_in6,
}

impl SockAddr {
    /// An address of no family, which [`decode`](SockAddr::decode) rejects.
    pub(super) const EMPTY: SockAddr = SockAddr {
        v6: libc::sockaddr_in6 {
            sin6_family: 0,
            sin6_port: 0,
            sin6_flowinfo: 0,
            sin6_addr: libc::in6_addr { s6_addr: [0; 16] },
            sin6_scope_id: 0,
        },
    };

    /// The number of bytes the kernel may write into one slot.
    pub(super) const LEN: libc::socklen_t = size_of::<SockAddr>() as libc::socklen_t;

    /// Encodes `addr` for a socket of the given family. `None` when it cannot be
    /// reached from that socket (a real IPv6 address on an IPv4-only socket).
    pub(super) fn encode(addr: SocketAddr, v6_socket: bool) -> Option<(SockAddr, libc::socklen_t)> {
        match (addr, v6_socket) {
            (SocketAddr::V4(a), true) => Some(Self::in6(a.ip().to_ipv6_mapped(), a.port(), 0, 0)),
            (SocketAddr::V6(a), true) => {
                Some(Self::in6(*a.ip(), a.port(), a.flowinfo(), a.scope_id()))
            }
            (SocketAddr::V4(a), false) => Some(Self::in4(*a.ip(), a.port())),
            (SocketAddr::V6(a), false) => a.ip().to_ipv4_mapped().map(|ip| Self::in4(ip, a.port())),
        }
    }

    /// An IPv4 address and port, with its length.
    pub(super) fn in4(ip: Ipv4Addr, port: u16) -> (SockAddr, libc::socklen_t) {
        let sa = SockAddr {
            v4: libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: port.to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(ip.octets()),
                },
                sin_zero: [0; 8],
            },
        };
        (sa, size_of::<libc::sockaddr_in>() as libc::socklen_t)
    }

    /// An IPv6 address, port, flow label and scope, with its length.
    pub(super) fn in6(
        ip: Ipv6Addr,
        port: u16,
        flowinfo: u32,
        scope_id: u32,
    ) -> (SockAddr, libc::socklen_t) {
        let sa = SockAddr {
            v6: libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: port.to_be(),
                sin6_flowinfo: flowinfo,
                sin6_addr: libc::in6_addr {
                    s6_addr: ip.octets(),
                },
                sin6_scope_id: scope_id,
            },
        };
        (sa, size_of::<libc::sockaddr_in6>() as libc::socklen_t)
    }

    /// The address the kernel wrote; v4-mapped IPv6 becomes `V4`. `None` for a family
    /// other than IPv4/IPv6 (which a UDP socket never reports).
    pub(super) fn decode(&self) -> Option<SocketAddr> {
        // SAFETY: both members start with the family field at the same offset, and the
        // union is always initialised in full (EMPTY or a kernel-written address).
        let family = unsafe { self.v4.sin_family } as libc::c_int;
        match family {
            libc::AF_INET => {
                // SAFETY: the family says the kernel wrote a sockaddr_in.
                let sin = unsafe { self.v4 };
                let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
                Some(SocketAddr::V4(SocketAddrV4::new(
                    ip,
                    u16::from_be(sin.sin_port),
                )))
            }
            libc::AF_INET6 => {
                // SAFETY: the family says the kernel wrote a sockaddr_in6.
                let sin6 = unsafe { self.v6 };
                let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
                let port = u16::from_be(sin6.sin6_port);
                Some(match ip.to_ipv4_mapped() {
                    Some(v4) => SocketAddr::V4(SocketAddrV4::new(v4, port)),
                    None => SocketAddr::V6(SocketAddrV6::new(
                        ip,
                        port,
                        sin6.sin6_flowinfo,
                        sin6.sin6_scope_id,
                    )),
                })
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v4_destination_is_mapped_on_a_v6_socket() {
        let addr: SocketAddr = "198.18.0.7:51820".parse().unwrap();
        let (sa, len) = SockAddr::encode(addr, true).unwrap();
        assert_eq!(len as usize, size_of::<libc::sockaddr_in6>());
        // SAFETY: encode wrote the v6 member.
        let sin6 = unsafe { sa.v6 };
        assert_eq!(
            Ipv6Addr::from(sin6.sin6_addr.s6_addr),
            "::ffff:198.18.0.7".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(u16::from_be(sin6.sin6_port), 51820);
        // And back: a mapped source becomes V4 again.
        assert_eq!(sa.decode(), Some(addr));
    }

    #[test]
    fn v6_round_trip_keeps_scope() {
        let addr = SocketAddr::V6(SocketAddrV6::new("2001:2::9".parse().unwrap(), 7, 0, 3));
        let (sa, _) = SockAddr::encode(addr, true).unwrap();
        assert_eq!(sa.decode(), Some(addr));
    }

    #[test]
    fn v4_only_socket_encoding() {
        let v4: SocketAddr = "198.18.1.1:9".parse().unwrap();
        let (sa, len) = SockAddr::encode(v4, false).unwrap();
        assert_eq!(len as usize, size_of::<libc::sockaddr_in>());
        assert_eq!(sa.decode(), Some(v4));
        let mapped: SocketAddr = "[::ffff:198.18.1.1]:9".parse().unwrap();
        assert_eq!(
            SockAddr::encode(mapped, false).unwrap().0.decode(),
            Some(v4)
        );
        let v6: SocketAddr = "[2001:2::1]:9".parse().unwrap();
        assert!(SockAddr::encode(v6, false).is_none());
    }

    #[test]
    fn unknown_family_decodes_to_none() {
        assert_eq!(SockAddr::EMPTY.decode(), None);
    }
}
