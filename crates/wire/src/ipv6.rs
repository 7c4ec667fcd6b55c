//! IPv6 fixed header view (RFC 8200 §3).
//!
//! Extension headers are not walked: [`Packet::next_header`] is the first
//! one, and [`Packet::payload`] starts right after the fixed header.

use core::net::Ipv6Addr;

use crate::bytes::{clamped, clamped_mut, fixed, fixed_mut, set_u16_be, u16_be};
use crate::error::{Error, Result};

/// The length of the fixed header (RFC 8200 §3).
pub const HEADER_LEN: usize = 40;

/// The version nibble of every IPv6 header.
pub const VERSION: u8 = 6;

mod field {
    pub const VER_TC_FLOW: usize = 0;
    pub const PAYLOAD_LEN: usize = 4;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: usize = 8;
    pub const DST: usize = 24;

    pub const FLOW_LABEL: u32 = 0x000f_ffff;
}

checked_view! {
    /// A view of an IPv6 packet: fixed header and payload.
    pub struct Packet, at least HEADER_LEN;
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Checks that the buffer holds the fixed header, that the version is 6, and that
    /// the payload length fits in the buffer. Bytes past the payload length are allowed
    /// and ignored.
    pub fn check_len(&self) -> Result<()> {
        let len = self.check_min_len()?;
        if self.version() != VERSION {
            return Err(Error::BadVersion(self.version()));
        }
        if self.total_len() > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    fn ver_tc_flow(&self) -> u32 {
        u32::from_be_bytes(*fixed(self.data(), field::VER_TC_FLOW))
    }

    /// The version nibble.
    pub fn version(&self) -> u8 {
        (self.ver_tc_flow() >> 28) as u8
    }

    /// Traffic class: DSCP in the upper six bits, ECN in the lower two.
    pub fn traffic_class(&self) -> u8 {
        (self.ver_tc_flow() >> 20) as u8
    }

    /// Flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        self.ver_tc_flow() & field::FLOW_LABEL
    }

    /// Length of everything after the fixed header, as the header claims.
    pub fn payload_len(&self) -> u16 {
        u16_be(self.data(), field::PAYLOAD_LEN)
    }

    /// Length of the whole packet as the header claims: 40 + payload length.
    pub fn total_len(&self) -> usize {
        HEADER_LEN + usize::from(self.payload_len())
    }

    /// The first next-header value (see [`crate::ip_protocol`]).
    pub fn next_header(&self) -> u8 {
        self.data()[field::NEXT_HEADER]
    }

    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.data()[field::HOP_LIMIT]
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(*fixed::<16>(self.data(), field::SRC))
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(*fixed::<16>(self.data(), field::DST))
    }

    /// The bytes after the fixed header, up to the payload length; trailing
    /// padding in the buffer is excluded.
    pub fn payload(&self) -> &[u8] {
        clamped(self.data(), HEADER_LEN, self.total_len())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_ver_tc_flow(&mut self, mask: u32, value: u32) {
        let old = self.ver_tc_flow();
        *fixed_mut(self.data_mut(), field::VER_TC_FLOW) =
            ((old & !mask) | (value & mask)).to_be_bytes();
    }

    /// Sets the version nibble.
    pub fn set_version(&mut self, version: u8) {
        self.set_ver_tc_flow(0xf000_0000, u32::from(version) << 28);
    }

    /// Sets the traffic class.
    pub fn set_traffic_class(&mut self, tc: u8) {
        self.set_ver_tc_flow(0x0ff0_0000, u32::from(tc) << 20);
    }

    /// Sets the flow label; bits above the low 20 are lost.
    pub fn set_flow_label(&mut self, label: u32) {
        self.set_ver_tc_flow(field::FLOW_LABEL, label);
    }

    /// Sets the payload length.
    pub fn set_payload_len(&mut self, len: u16) {
        set_u16_be(self.data_mut(), field::PAYLOAD_LEN, len);
    }

    /// Sets the next header.
    pub fn set_next_header(&mut self, next_header: u8) {
        self.data_mut()[field::NEXT_HEADER] = next_header;
    }

    /// Sets the hop limit.
    pub fn set_hop_limit(&mut self, hop_limit: u8) {
        self.data_mut()[field::HOP_LIMIT] = hop_limit;
    }

    /// One hop less, as a router forwards (IPv6 has no header checksum). The
    /// caller saw a hop limit above zero.
    pub fn decrement_hop_limit(&mut self) {
        self.set_hop_limit(self.hop_limit() - 1);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, addr: &Ipv6Addr) {
        *fixed_mut(self.data_mut(), field::SRC) = addr.octets();
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, addr: &Ipv6Addr) {
        *fixed_mut(self.data_mut(), field::DST) = addr.octets();
    }

    /// The payload, writable; bounded like [`payload`](Self::payload).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = self.total_len();
        clamped_mut(self.data_mut(), HEADER_LEN, end)
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The fields of a 40-byte fixed header, for building outer headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Repr {
    /// Source address.
    pub src_addr: Ipv6Addr,
    /// Destination address.
    pub dst_addr: Ipv6Addr,
    /// Next header of the payload.
    pub next_header: u8,
    /// Length of the payload that will follow the header.
    pub payload_len: u16,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class; tunnels copy its ECN bits from the inner header
    /// (RFC 6040).
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
}

impl Ipv6Repr {
    /// Writes the header into the first [`HEADER_LEN`] bytes of `buf` and
    /// returns the header length, or [`Error::Truncated`] if `buf` is shorter.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let header = buf.get_mut(..HEADER_LEN).ok_or(Error::Truncated)?;
        let mut packet = Packet::new_unchecked(header);
        packet.set_ver_tc_flow(u32::MAX, 0);
        packet.set_version(VERSION);
        packet.set_traffic_class(self.traffic_class);
        packet.set_flow_label(self.flow_label);
        packet.set_payload_len(self.payload_len);
        packet.set_next_header(self.next_header);
        packet.set_hop_limit(self.hop_limit);
        packet.set_src_addr(&self.src_addr);
        packet.set_dst_addr(&self.dst_addr);
        Ok(HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::captures::{TUN_ROUTER_SOLICIT, TUN_UDP_V6, hex};
    use std::vec::Vec;

    fn addr(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    #[test]
    fn parses_a_captured_udp_packet() {
        let bytes = hex(TUN_UDP_V6);
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.version(), 6);
        assert_eq!(p.traffic_class(), 0);
        assert_eq!(p.flow_label(), 0xdbd5);
        assert_eq!(p.payload_len(), 18);
        assert_eq!(p.total_len(), 58);
        assert_eq!(p.next_header(), crate::ip_protocol::UDP);
        assert_eq!(p.hop_limit(), 64);
        assert_eq!(p.src_addr(), addr("2001:2::1"));
        assert_eq!(p.dst_addr(), addr("2001:2::2"));
        assert_eq!(&p.payload()[8..], b"hello wire");
    }

    #[test]
    fn parses_a_captured_router_solicitation() {
        let bytes = hex(TUN_ROUTER_SOLICIT);
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.next_header(), crate::ip_protocol::ICMPV6);
        assert_eq!(p.hop_limit(), 255);
        assert_eq!(p.src_addr(), addr("fe80::b51b:26b4:c773:c747"));
        assert_eq!(p.dst_addr(), addr("ff02::2"));
        let pseudo = crate::checksum::pseudo_header_v6(
            &p.src_addr(),
            &p.dst_addr(),
            crate::ip_protocol::ICMPV6,
            u32::from(p.payload_len()),
        );
        let sum = crate::checksum::sum(p.payload());
        assert_eq!(crate::checksum::combine(pseudo, sum), 0xffff);
    }

    #[test]
    fn rejects_what_it_must() {
        let good = hex(TUN_UDP_V6);
        let check = |edit: &dyn Fn(&mut Vec<u8>)| {
            let mut b = good.clone();
            edit(&mut b);
            Packet::new_checked(&b[..]).map(|_| ())
        };
        assert_eq!(check(&|_| ()), Ok(()));
        assert_eq!(check(&|b| b.truncate(39)), Err(Error::Truncated));
        assert_eq!(check(&|b| b.truncate(57)), Err(Error::Truncated));
        assert_eq!(check(&|b| b[0] = 0x40), Err(Error::BadVersion(4)));
        assert_eq!(
            check(&|b| b[4..6].copy_from_slice(&[0, 19])),
            Err(Error::Truncated)
        );
        assert_eq!(check(&|b| b[4..6].copy_from_slice(&[0, 0])), Ok(()));
        assert_eq!(check(&|b| b.extend_from_slice(&[0; 9])), Ok(()));
    }

    #[test]
    fn no_length_panics() {
        let mut bytes = hex(TUN_UDP_V6);
        bytes.resize(100, 0x5a);
        for len in 0..=bytes.len() {
            if let Ok(p) = Packet::new_checked(&bytes[..len]) {
                assert!(p.total_len() <= len);
                let _ = (p.payload(), p.src_addr(), p.dst_addr(), p.flow_label());
            }
        }
        for len in 0..=64 {
            for first in [0x60u8, 0x6f, 0x00, 0xff] {
                let mut b = std::vec![0xffu8; len];
                if let Some(x) = b.first_mut() {
                    *x = first;
                }
                if let Ok(p) = Packet::new_checked(&b[..]) {
                    let _ = p.payload();
                }
            }
        }
    }

    #[test]
    fn payload_stays_in_bounds_after_setters_lie() {
        let mut bytes = hex(TUN_UDP_V6);
        let mut p = Packet::new_checked(&mut bytes[..]).unwrap();
        p.set_payload_len(u16::MAX);
        assert_eq!(p.payload().len(), 18);
        assert_eq!(p.payload_mut().len(), 18);
    }

    #[test]
    fn setters_round_trip_and_keep_neighbours() {
        let mut buf = [0u8; 48];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_version(6);
        p.set_traffic_class(0xb9);
        p.set_flow_label(0xfffff);
        p.set_payload_len(8);
        p.set_next_header(17);
        p.set_hop_limit(1);
        p.set_src_addr(&addr("2001:2::a"));
        p.set_dst_addr(&addr("2001:2:ffff::b"));
        p.payload_mut().copy_from_slice(b"payload!");
        assert_eq!(p.version(), 6);
        assert_eq!(p.traffic_class(), 0xb9);
        assert_eq!(p.flow_label(), 0xfffff);
        p.set_flow_label(0xfff5_6789);
        assert_eq!(p.flow_label(), 0x56789);
        assert_eq!(p.traffic_class(), 0xb9);
        p.set_traffic_class(0);
        assert_eq!(p.flow_label(), 0x56789);
        assert_eq!(p.version(), 6);

        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(p.payload_len(), 8);
        assert_eq!(p.next_header(), 17);
        assert_eq!(p.hop_limit(), 1);
        assert_eq!(p.src_addr(), addr("2001:2::a"));
        assert_eq!(p.dst_addr(), addr("2001:2:ffff::b"));
        assert_eq!(p.payload(), b"payload!");
        assert_eq!(p.into_inner().len(), 48);
    }

    #[test]
    fn emit_writes_the_captured_header() {
        let bytes = hex(TUN_UDP_V6);
        let repr = Ipv6Repr {
            src_addr: addr("2001:2::1"),
            dst_addr: addr("2001:2::2"),
            next_header: crate::ip_protocol::UDP,
            payload_len: 18,
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0xdbd5,
        };
        let mut buf = [0xffu8; 41];
        assert_eq!(repr.emit(&mut buf), Ok(HEADER_LEN));
        assert_eq!(&buf[..40], &bytes[..40]);
        assert_eq!(buf[40], 0xff);
        assert_eq!(repr.emit(&mut buf[..39]), Err(Error::Truncated));
    }
}
