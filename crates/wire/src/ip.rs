//! Either IP version, for code that handles whatever a tunnel carries.
//!
//! The WireGuard receive path needs two facts about a decrypted inner packet
//! before anything else looks at it: its addresses, for the allowed-IPs
//! check, and the length its header claims, to strip the zero padding that
//! the sender added to a multiple of 16 (WireGuard whitepaper §5.4.6).

use core::net::IpAddr;

use crate::error::{Error, Result};
use crate::{ipv4, ipv6};

/// Protocol and next-header numbers, kept in their own module so that either IP
/// version's view can name them without this one.
pub use crate::ip_protocol as protocol;

/// A checked view of an IPv4 or an IPv6 packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpPacket<T> {
    /// Version 4.
    V4(ipv4::Packet<T>),
    /// Version 6.
    V6(ipv6::Packet<T>),
}

impl<T: AsRef<[u8]>> IpPacket<T> {
    /// Picks the view by the version nibble and checks it with that view's
    /// `new_checked`. An empty buffer is [`Error::Truncated`]; a version
    /// other than 4 or 6 is [`Error::BadVersion`].
    pub fn parse(buffer: T) -> Result<Self> {
        match version(buffer.as_ref())? {
            ipv4::VERSION => ipv4::Packet::new_checked(buffer).map(IpPacket::V4),
            ipv6::VERSION => ipv6::Packet::new_checked(buffer).map(IpPacket::V6),
            other => Err(Error::BadVersion(other)),
        }
    }

    /// 4 or 6.
    pub fn version(&self) -> u8 {
        match self {
            IpPacket::V4(_) => ipv4::VERSION,
            IpPacket::V6(_) => ipv6::VERSION,
        }
    }

    /// Source address.
    pub fn src_addr(&self) -> IpAddr {
        match self {
            IpPacket::V4(p) => IpAddr::V4(p.src_addr()),
            IpPacket::V6(p) => IpAddr::V6(p.src_addr()),
        }
    }

    /// Destination address.
    pub fn dst_addr(&self) -> IpAddr {
        match self {
            IpPacket::V4(p) => IpAddr::V4(p.dst_addr()),
            IpPacket::V6(p) => IpAddr::V6(p.dst_addr()),
        }
    }

    /// The packet's length as its header claims: the IPv4 total length, or
    /// 40 + the IPv6 payload length. Never more than the buffer.
    pub fn total_len(&self) -> usize {
        match self {
            IpPacket::V4(p) => usize::from(p.total_len()),
            IpPacket::V6(p) => p.total_len(),
        }
    }

    /// The IPv4 protocol or the IPv6 first next header.
    pub fn protocol(&self) -> u8 {
        match self {
            IpPacket::V4(p) => p.protocol(),
            IpPacket::V6(p) => p.next_header(),
        }
    }

    /// The bytes after the (fixed or IPv4 option-bearing) header, up to the
    /// claimed length.
    pub fn payload(&self) -> &[u8] {
        match self {
            IpPacket::V4(p) => p.payload(),
            IpPacket::V6(p) => p.payload(),
        }
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        match self {
            IpPacket::V4(p) => p.into_inner(),
            IpPacket::V6(p) => p.into_inner(),
        }
    }
}

fn version(buf: &[u8]) -> Result<u8> {
    buf.first().map(|b| b >> 4).ok_or(Error::Truncated)
}

/// Source and destination of the IP packet at the start of `buf`. Inlined: the
/// data path calls it per packet, and a returned pair of addresses that crosses a
/// call is written and read back through memory.
#[inline]
pub fn addrs(buf: &[u8]) -> Result<(IpAddr, IpAddr)> {
    let packet = IpPacket::parse(buf)?;
    Ok((packet.src_addr(), packet.dst_addr()))
}

/// The destination address of the IP packet at the start of `buf`, after the
/// same checks as [`addrs`]: what routing a packet out needs.
#[inline]
pub fn dst_addr(buf: &[u8]) -> Result<IpAddr> {
    IpPacket::parse(buf).map(|p| p.dst_addr())
}

/// The length the IP header at the start of `buf` claims, checked against
/// `buf`: what remains of a decrypted WireGuard payload once its padding is
/// cut off.
pub fn claimed_len(buf: &[u8]) -> Result<usize> {
    IpPacket::parse(buf).map(|p| p.total_len())
}

/// An IP header of either version as this project's own packets have it: the
/// addresses, the protocol (next header), the payload's length and the hop
/// limit; for IPv4, whether routers may fragment it (DF clear), identification
/// 0; no DSCP, ECN or flow label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpRepr {
    /// Source address.
    pub src: IpAddr,
    /// Destination address, of the source's version.
    pub dst: IpAddr,
    /// Protocol (IPv4) or next header (IPv6).
    pub protocol: u8,
    /// Length of what follows the header.
    pub payload_len: u16,
    /// TTL (IPv4) or hop limit (IPv6).
    pub hop_limit: u8,
    /// IPv4: DF set. IPv6 packets are never fragmented on the way.
    pub dont_frag: bool,
}

impl IpRepr {
    /// The header's length: 20 for IPv4, 40 for IPv6.
    pub const fn header_len(&self) -> usize {
        match self.src {
            IpAddr::V4(_) => ipv4::HEADER_LEN,
            IpAddr::V6(_) => ipv6::HEADER_LEN,
        }
    }

    /// Writes the header into the start of `buf` (the IPv4 checksum filled) and
    /// returns its length: [`Error::MixedFamilies`] for addresses of two
    /// versions, or as the version's own `emit` fails.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        match (self.src, self.dst) {
            (IpAddr::V4(src_addr), IpAddr::V4(dst_addr)) => ipv4::Ipv4Repr {
                src_addr,
                dst_addr,
                protocol: self.protocol,
                payload_len: self.payload_len,
                ttl: self.hop_limit,
                dscp: 0,
                ecn: 0,
                ident: 0,
                dont_frag: self.dont_frag,
            }
            .emit(buf),
            (IpAddr::V6(src_addr), IpAddr::V6(dst_addr)) => ipv6::Ipv6Repr {
                src_addr,
                dst_addr,
                next_header: self.protocol,
                payload_len: self.payload_len,
                hop_limit: self.hop_limit,
                traffic_class: 0,
                flow_label: 0,
            }
            .emit(buf),
            _ => Err(Error::MixedFamilies),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::captures::{TUN_UDP_V4, TUN_UDP_V6, hex};
    use core::net::{Ipv4Addr, Ipv6Addr};

    #[test]
    fn picks_the_version_and_reads_addresses() {
        let v4 = hex(TUN_UDP_V4);
        let p = IpPacket::parse(&v4[..]).unwrap();
        assert!(matches!(p, IpPacket::V4(_)));
        assert_eq!(p.version(), 4);
        assert_eq!(p.src_addr(), IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)));
        assert_eq!(p.dst_addr(), IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)));
        assert_eq!(p.protocol(), protocol::UDP);
        assert_eq!(p.total_len(), 38);
        assert_eq!(&p.payload()[8..], b"hello wire");
        assert_eq!(p.into_inner().len(), 38);

        let v6 = hex(TUN_UDP_V6);
        let p = IpPacket::parse(&v6[..]).unwrap();
        assert_eq!(p.version(), 6);
        let src: Ipv6Addr = "2001:2::1".parse().unwrap();
        let dst: Ipv6Addr = "2001:2::2".parse().unwrap();
        assert_eq!(addrs(&v6), Ok((IpAddr::V6(src), IpAddr::V6(dst))));
        assert_eq!(p.protocol(), protocol::UDP);
        assert_eq!(p.total_len(), 58);
    }

    #[test]
    fn claimed_len_strips_wireguard_padding() {
        for (packet, len) in [(hex(TUN_UDP_V4), 38), (hex(TUN_UDP_V6), 58)] {
            let mut padded = packet.clone();
            padded.resize(packet.len().next_multiple_of(16), 0);
            assert!(padded.len() > len);
            assert_eq!(claimed_len(&padded), Ok(len));
            assert_eq!(&padded[..len], &packet[..]);
        }
    }

    #[test]
    fn claims_beyond_the_buffer_are_truncated() {
        let v4 = hex(TUN_UDP_V4);
        assert_eq!(claimed_len(&v4[..37]), Err(Error::Truncated));
        let v6 = hex(TUN_UDP_V6);
        assert_eq!(claimed_len(&v6[..57]), Err(Error::Truncated));
    }

    #[test]
    fn rejects_empty_and_other_versions() {
        assert_eq!(claimed_len(&[]), Err(Error::Truncated));
        assert_eq!(addrs(&[]), Err(Error::Truncated));
        for v in [0u8, 1, 5, 7, 15] {
            let mut b = hex(TUN_UDP_V4);
            b[0] = (v << 4) | 5;
            assert_eq!(claimed_len(&b), Err(Error::BadVersion(v)));
        }
    }

    /// The destination alone is refused and read as the pair of addresses is, at
    /// every length of both captures and with every first byte.
    #[test]
    fn the_destination_alone_agrees_with_both_addresses() {
        for packet in [hex(TUN_UDP_V4), hex(TUN_UDP_V6)] {
            for len in 0..=packet.len() {
                let b = &packet[..len];
                assert_eq!(dst_addr(b), addrs(b).map(|(_, dst)| dst), "{len} bytes");
            }
            for first in 0..=255u8 {
                let mut b = packet.clone();
                b[0] = first;
                assert_eq!(dst_addr(&b), addrs(&b).map(|(_, dst)| dst), "first {first}");
            }
        }
    }

    #[test]
    fn no_length_panics() {
        for packet in [hex(TUN_UDP_V4), hex(TUN_UDP_V6)] {
            for len in 0..=packet.len() {
                let b = &packet[..len];
                if let Ok(p) = IpPacket::parse(b) {
                    assert!(p.total_len() <= len);
                    let _ = (p.src_addr(), p.dst_addr(), p.payload(), p.protocol());
                }
                let _ = (addrs(b), claimed_len(b));
            }
        }
        for len in 0..=48 {
            for first in 0..=255u8 {
                let mut b = std::vec![0u8; len];
                if let Some(x) = b.first_mut() {
                    *x = first;
                }
                if let Ok(l) = claimed_len(&b) {
                    assert!(l <= len);
                }
            }
        }
    }

    #[test]
    fn works_over_mutable_buffers() {
        let mut v4 = hex(TUN_UDP_V4);
        if let Ok(IpPacket::V4(mut p)) = IpPacket::parse(&mut v4[..]) {
            p.set_ttl(p.ttl() - 1);
            p.fill_checksum();
        } else {
            panic!("not parsed as IPv4");
        }
        let p = ipv4::Packet::new_checked(&v4[..]).unwrap();
        assert_eq!(p.ttl(), 63);
        assert!(p.verify_checksum());
    }

    #[test]
    fn a_header_of_either_version_reads_back_and_mixed_ones_are_refused() {
        let v4 = |a: [u8; 4]| IpAddr::from(a);
        let v6 = |last: u16| IpAddr::from([0x2001, 2, 0, 0, 0, 0, 0, last]);
        let repr = |src, dst| IpRepr {
            src,
            dst,
            protocol: protocol::UDP,
            payload_len: 8,
            hop_limit: 7,
            dont_frag: true,
        };
        for (src, dst) in [(v4([198, 18, 0, 1]), v4([198, 18, 0, 2])), (v6(1), v6(2))] {
            let r = repr(src, dst);
            let mut buf = [0u8; 48];
            let n = r.emit(&mut buf).unwrap();
            assert_eq!(n, r.header_len());
            let p = IpPacket::parse(&buf[..n + 8]).unwrap();
            assert_eq!((p.src_addr(), p.dst_addr()), (src, dst));
            assert_eq!(p.total_len(), n + 8);
        }
        let mut buf = [0u8; 48];
        let mixed = repr(v4([198, 18, 0, 1]), v6(2));
        assert_eq!(mixed.emit(&mut buf), Err(Error::MixedFamilies));
        assert_eq!(buf, [0; 48], "nothing written");
    }
}
