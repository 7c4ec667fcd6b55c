//! UDP header view (RFC 768) and its checksum over the IPv4 and IPv6
//! pseudo-headers.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::bytes::{clamped, clamped_mut, set_u16_be, u16_be};
use crate::checksum;
use crate::error::{Error, Result};
use crate::ip::protocol;

/// The length of the UDP header (RFC 768).
pub const HEADER_LEN: usize = 8;

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const LENGTH: usize = 4;
    pub const CHECKSUM: usize = 6;
}

checked_view! {
    /// A view of a UDP datagram: header and payload.
    pub struct Packet, at least HEADER_LEN;
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Checks that the buffer holds the header and that the length field covers the
    /// header and fits in the buffer. Bytes past the length field are allowed and
    /// ignored.
    ///
    /// A length field of zero, which IPv6 jumbograms use (RFC 2675), is rejected:
    /// nothing here carries jumbograms.
    pub fn check_len(&self) -> Result<()> {
        let len = self.check_min_len()?;
        let claimed = usize::from(self.length());
        if claimed < HEADER_LEN {
            return Err(Error::BadTotalLen);
        }
        if claimed > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        u16_be(self.data(), field::SRC_PORT)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        u16_be(self.data(), field::DST_PORT)
    }

    /// Length of header and payload, as the header claims.
    pub fn length(&self) -> u16 {
        u16_be(self.data(), field::LENGTH)
    }

    /// The checksum field; zero means "not computed", which only IPv4 allows.
    pub fn checksum(&self) -> u16 {
        u16_be(self.data(), field::CHECKSUM)
    }

    /// The bytes after the header, up to the length field.
    pub fn payload(&self) -> &[u8] {
        clamped(self.data(), HEADER_LEN, usize::from(self.length()))
    }

    /// Header and payload, as far as the length field reaches.
    fn datagram(&self) -> &[u8] {
        clamped(self.data(), 0, usize::from(self.length()))
    }

    /// Whether the checksum is correct for a datagram carried in IPv4
    /// between `src` and `dst`; a zero checksum field is accepted because
    /// RFC 768 makes the checksum optional over IPv4.
    pub fn verify_checksum_v4(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        if self.checksum() == 0 {
            return true;
        }
        let pseudo = checksum::pseudo_header_v4(src, dst, protocol::UDP, self.length());
        checksum::combine(pseudo, checksum::sum(self.datagram())) == 0xffff
    }

    /// Whether the checksum is correct for a datagram carried between `src` and
    /// `dst`, either version (see [`verify_checksum_v4`](Self::verify_checksum_v4)
    /// and [`verify_checksum_v6`](Self::verify_checksum_v6)); false for addresses
    /// of two families, which no datagram has.
    pub fn verify_checksum(&self, src: IpAddr, dst: IpAddr) -> bool {
        match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => self.verify_checksum_v4(s, d),
            (IpAddr::V6(s), IpAddr::V6(d)) => self.verify_checksum_v6(&s, &d),
            _ => false,
        }
    }

    /// Whether the checksum is correct for a datagram carried in IPv6
    /// between `src` and `dst`; a zero checksum field is wrong, because IPv6
    /// makes the checksum mandatory (RFC 8200 §8.1).
    pub fn verify_checksum_v6(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        if self.checksum() == 0 {
            return false;
        }
        let pseudo = checksum::pseudo_header_v6(src, dst, protocol::UDP, u32::from(self.length()));
        checksum::combine(pseudo, checksum::sum(self.datagram())) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, port: u16) {
        set_u16_be(self.data_mut(), field::SRC_PORT, port);
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, port: u16) {
        set_u16_be(self.data_mut(), field::DST_PORT, port);
    }

    /// Sets the length field.
    pub fn set_length(&mut self, len: u16) {
        set_u16_be(self.data_mut(), field::LENGTH, len);
    }

    /// Sets the checksum field as given.
    pub fn set_checksum(&mut self, checksum: u16) {
        set_u16_be(self.data_mut(), field::CHECKSUM, checksum);
    }

    /// The payload, writable; bounded like [`payload`](Self::payload).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.length());
        clamped_mut(self.data_mut(), HEADER_LEN, end)
    }

    fn fill_with_pseudo(&mut self, pseudo: u16) {
        self.set_checksum(0);
        let sum = !checksum::combine(pseudo, checksum::sum(self.datagram()));
        // A computed zero goes out as all ones: zero on the wire means "no
        // checksum" (RFC 768).
        self.set_checksum(if sum == 0 { 0xffff } else { sum });
    }

    /// Computes the checksum over the IPv4 pseudo-header, header and
    /// payload, and stores it. Call after the payload is in place.
    pub fn fill_checksum_v4(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        let pseudo = checksum::pseudo_header_v4(src, dst, protocol::UDP, self.length());
        self.fill_with_pseudo(pseudo);
    }

    /// Computes the checksum over the IPv6 pseudo-header, header and
    /// payload, and stores it. Call after the payload is in place.
    pub fn fill_checksum_v6(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        let pseudo = checksum::pseudo_header_v6(src, dst, protocol::UDP, u32::from(self.length()));
        self.fill_with_pseudo(pseudo);
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The fields of a UDP header, for building outer headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Length of the payload that will follow the header.
    pub payload_len: u16,
}

impl UdpRepr {
    /// Writes the header into the first [`HEADER_LEN`] bytes of `buf` with a
    /// zero checksum, and returns the header length. The checksum covers the
    /// payload, so it is filled afterwards with
    /// [`Packet::fill_checksum_v4`] or [`Packet::fill_checksum_v6`] (or left
    /// zero over IPv4). Fails with [`Error::Truncated`] if `buf` is shorter
    /// than the header and with [`Error::BadTotalLen`] if the length does not
    /// fit 16 bits.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let len = self
            .payload_len
            .checked_add(HEADER_LEN as u16)
            .ok_or(Error::BadTotalLen)?;
        let header = buf.get_mut(..HEADER_LEN).ok_or(Error::Truncated)?;
        let mut packet = Packet::new_unchecked(header);
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_length(len);
        packet.set_checksum(0);
        Ok(HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::captures::{TUN_UDP_V4, TUN_UDP_V6, hex};
    use std::vec::Vec;

    /// The UDP part of the captured IPv4 packet.
    fn datagram_v4() -> Vec<u8> {
        hex(TUN_UDP_V4)[20..].to_vec()
    }

    /// The UDP part of the captured IPv6 packet.
    fn datagram_v6() -> Vec<u8> {
        hex(TUN_UDP_V6)[40..].to_vec()
    }

    const V4_SRC: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
    const V4_DST: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

    fn v6(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    #[test]
    fn parses_a_captured_datagram() {
        let bytes = datagram_v4();
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.src_port(), 51820);
        assert_eq!(p.dst_port(), 51820);
        assert_eq!(p.length(), 18);
        assert_eq!(p.checksum(), 0xb107);
        assert_eq!(p.payload(), b"hello wire");
    }

    #[test]
    fn verifies_and_reproduces_kernel_checksums() {
        let bytes = datagram_v4();
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert!(p.verify_checksum_v4(V4_SRC, V4_DST));
        assert!(!p.verify_checksum_v4(V4_DST, Ipv4Addr::new(198, 18, 0, 3)));
        let mut copy = bytes.clone();
        let mut q = Packet::new_checked(&mut copy[..]).unwrap();
        q.set_checksum(0x1234);
        q.fill_checksum_v4(V4_SRC, V4_DST);
        assert_eq!(copy, bytes);

        let (src, dst) = (v6("2001:2::1"), v6("2001:2::2"));
        let bytes = datagram_v6();
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert!(p.verify_checksum_v6(&src, &dst));
        assert!(!p.verify_checksum_v6(&src, &v6("2001:2::3")));
        let mut copy = bytes.clone();
        let mut q = Packet::new_checked(&mut copy[..]).unwrap();
        q.set_checksum(0);
        q.fill_checksum_v6(&src, &dst);
        assert_eq!(copy, bytes);
    }

    #[test]
    fn zero_checksum_means_none_over_ipv4_only() {
        let mut bytes = datagram_v4();
        bytes[6..8].fill(0);
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert!(p.verify_checksum_v4(V4_SRC, V4_DST));
        assert!(!p.verify_checksum_v6(&v6("2001:2::1"), &v6("2001:2::2")));
    }

    #[test]
    fn a_computed_zero_is_sent_as_all_ones() {
        // Choose the payload so that the sum before complement is 0xffff.
        let mut buf = [0u8; 10];
        UdpRepr {
            src_port: 0,
            dst_port: 0,
            payload_len: 2,
        }
        .emit(&mut buf)
        .unwrap();
        let pseudo = checksum::pseudo_header_v4(V4_SRC, V4_DST, protocol::UDP, 10);
        let partial = checksum::combine(pseudo, checksum::sum(&buf));
        buf[8..10].copy_from_slice(&(!partial).to_be_bytes());
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        p.fill_checksum_v4(V4_SRC, V4_DST);
        assert_eq!(p.checksum(), 0xffff);
        assert!(p.verify_checksum_v4(V4_SRC, V4_DST));
    }

    #[test]
    fn checksum_ignores_bytes_past_the_length() {
        let mut bytes = datagram_v4();
        bytes.extend_from_slice(&[0xee; 7]);
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert!(p.verify_checksum_v4(V4_SRC, V4_DST));
        assert_eq!(p.payload(), b"hello wire");
    }

    #[test]
    fn odd_length_payload_checksums() {
        let mut buf = [0u8; 8 + 5];
        UdpRepr {
            src_port: 51820,
            dst_port: 4789,
            payload_len: 5,
        }
        .emit(&mut buf)
        .unwrap();
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        p.payload_mut().copy_from_slice(b"odd!!");
        p.fill_checksum_v6(&v6("2001:2::1"), &v6("2001:2::2"));
        assert!(p.verify_checksum_v6(&v6("2001:2::1"), &v6("2001:2::2")));
        p.payload_mut()[4] ^= 1;
        assert!(!p.verify_checksum_v6(&v6("2001:2::1"), &v6("2001:2::2")));
    }

    #[test]
    fn rejects_what_it_must() {
        let good = datagram_v4();
        let check = |edit: &dyn Fn(&mut Vec<u8>)| {
            let mut b = good.clone();
            edit(&mut b);
            Packet::new_checked(&b[..]).map(|_| ())
        };
        assert_eq!(check(&|_| ()), Ok(()));
        assert_eq!(check(&|b| b.truncate(7)), Err(Error::Truncated));
        assert_eq!(check(&|b| b.truncate(17)), Err(Error::Truncated));
        assert_eq!(
            check(&|b| b[4..6].copy_from_slice(&[0, 7])),
            Err(Error::BadTotalLen)
        );
        assert_eq!(
            check(&|b| b[4..6].copy_from_slice(&[0, 0])),
            Err(Error::BadTotalLen)
        );
        assert_eq!(check(&|b| b[4..6].copy_from_slice(&[0, 8])), Ok(()));
    }

    #[test]
    fn no_length_panics() {
        let mut bytes = datagram_v4();
        bytes.resize(40, 0xff);
        for len in 0..=bytes.len() {
            for claimed in [0u16, 7, 8, 18, 40, u16::MAX] {
                let mut b = bytes[..len].to_vec();
                if len >= 6 {
                    b[4..6].copy_from_slice(&claimed.to_be_bytes());
                }
                if let Ok(p) = Packet::new_checked(&b[..]) {
                    let _ = (p.payload(), p.verify_checksum_v4(V4_SRC, V4_DST));
                    let _ = p.verify_checksum_v6(&v6("::1"), &v6("::2"));
                }
            }
        }
    }

    #[test]
    fn payload_and_checksum_stay_in_bounds_after_setters_lie() {
        let mut bytes = datagram_v4();
        let mut p = Packet::new_checked(&mut bytes[..]).unwrap();
        p.set_length(u16::MAX);
        assert_eq!(p.payload().len(), 10);
        p.fill_checksum_v4(V4_SRC, V4_DST);
        p.set_length(3);
        assert!(p.payload_mut().is_empty());
        p.fill_checksum_v6(&v6("::1"), &v6("::2"));
    }

    #[test]
    fn setters_round_trip() {
        let mut buf = [0u8; 12];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_src_port(1);
        p.set_dst_port(65535);
        p.set_length(12);
        p.set_checksum(0xabcd);
        p.payload_mut().copy_from_slice(&[9, 8, 7, 6]);
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(p.src_port(), 1);
        assert_eq!(p.dst_port(), 65535);
        assert_eq!(p.length(), 12);
        assert_eq!(p.checksum(), 0xabcd);
        assert_eq!(p.payload(), &[9, 8, 7, 6]);
        assert_eq!(
            p.into_inner(),
            &[0, 1, 255, 255, 0, 12, 0xab, 0xcd, 9, 8, 7, 6]
        );
    }

    #[test]
    fn emit_writes_the_captured_header() {
        let bytes = datagram_v4();
        let mut buf = bytes.clone();
        buf[..8].fill(0xaa);
        let repr = UdpRepr {
            src_port: 51820,
            dst_port: 51820,
            payload_len: 10,
        };
        assert_eq!(repr.emit(&mut buf), Ok(HEADER_LEN));
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        assert_eq!(p.checksum(), 0);
        p.fill_checksum_v4(V4_SRC, V4_DST);
        assert_eq!(buf, bytes);

        assert_eq!(repr.emit(&mut [0; 7]), Err(Error::Truncated));
        let too_big = UdpRepr {
            payload_len: u16::MAX - 7,
            ..repr
        };
        assert_eq!(too_big.emit(&mut [0; 8]), Err(Error::BadTotalLen));
    }
}
