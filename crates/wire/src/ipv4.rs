//! IPv4 header view (RFC 791 §3.1).

use core::net::Ipv4Addr;

use crate::bytes::{clamped, clamped_mut, fixed, fixed_mut, set_u16_be, u16_be};
use crate::checksum;
use crate::error::{Error, Result};

/// The length of a header without options, and the smallest legal IHL × 4
/// (RFC 791 §3.1, "IHL").
pub const HEADER_LEN: usize = 20;

/// The version nibble of every IPv4 header.
pub const VERSION: u8 = 4;

mod field {
    use core::ops::Range;

    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const LENGTH: usize = 2;
    pub const IDENT: usize = 4;
    pub const FLAGS_FRAG: usize = 6;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Range<usize> = 10..12;
    pub const SRC: usize = 12;
    pub const DST: usize = 16;

    pub const FLAG_DF: u16 = 0x4000;
    pub const FLAG_MF: u16 = 0x2000;
    pub const FRAG_OFFSET: u16 = 0x1fff;
}

checked_view! {
    /// A view of an IPv4 packet: header, options and payload.
    pub struct Packet, at least HEADER_LEN;
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Checks that the version is 4, that the header length is at least 20 and fits in
    /// the buffer, and that the total length covers the header and fits in the buffer.
    /// Bytes past the total length (link-layer or WireGuard padding) are allowed and
    /// ignored.
    pub fn check_len(&self) -> Result<()> {
        let len = self.check_min_len()?;
        if self.version() != VERSION {
            return Err(Error::BadVersion(self.version()));
        }
        let header_len = self.header_len();
        if header_len < HEADER_LEN {
            return Err(Error::BadHeaderLen);
        }
        if header_len > len {
            return Err(Error::Truncated);
        }
        let total_len = usize::from(self.total_len());
        if total_len < header_len {
            return Err(Error::BadTotalLen);
        }
        if total_len > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The version nibble.
    pub fn version(&self) -> u8 {
        self.data()[field::VER_IHL] >> 4
    }

    /// The header length in bytes (IHL × 4), options included.
    pub fn header_len(&self) -> usize {
        usize::from(self.data()[field::VER_IHL] & 0x0f) * 4
    }

    /// Differentiated services code point: the upper six bits of the old TOS
    /// byte (RFC 2474).
    pub fn dscp(&self) -> u8 {
        self.data()[field::DSCP_ECN] >> 2
    }

    /// Explicit congestion notification: the lower two bits (RFC 3168).
    pub fn ecn(&self) -> u8 {
        self.data()[field::DSCP_ECN] & 0x03
    }

    /// Length of header and payload in bytes, as the header claims.
    pub fn total_len(&self) -> u16 {
        u16_be(self.data(), field::LENGTH)
    }

    /// Identification, used to reassemble fragments.
    pub fn ident(&self) -> u16 {
        u16_be(self.data(), field::IDENT)
    }

    fn flags_frag(&self) -> u16 {
        u16_be(self.data(), field::FLAGS_FRAG)
    }

    /// The "don't fragment" flag.
    pub fn dont_frag(&self) -> bool {
        self.flags_frag() & field::FLAG_DF != 0
    }

    /// The "more fragments" flag.
    pub fn more_frags(&self) -> bool {
        self.flags_frag() & field::FLAG_MF != 0
    }

    /// Fragment offset in bytes (the field counts 8-byte units).
    pub fn frag_offset(&self) -> u16 {
        (self.flags_frag() & field::FRAG_OFFSET) << 3
    }

    /// Whether this packet is a fragment of a larger one: the first fragment
    /// has MF set, later ones have a non-zero offset.
    pub fn is_fragment(&self) -> bool {
        self.more_frags() || self.frag_offset() != 0
    }

    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.data()[field::TTL]
    }

    /// The payload's protocol number (see [`crate::ip_protocol`]).
    pub fn protocol(&self) -> u8 {
        self.data()[field::PROTOCOL]
    }

    /// The header checksum field.
    pub fn checksum(&self) -> u16 {
        u16_be(self.data(), field::CHECKSUM.start)
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(*fixed::<4>(self.data(), field::SRC))
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(*fixed::<4>(self.data(), field::DST))
    }

    /// The header: fixed part and options.
    pub fn header(&self) -> &[u8] {
        clamped(self.data(), 0, self.header_len())
    }

    /// Options: the header bytes after the first 20.
    pub fn options(&self) -> &[u8] {
        clamped(self.data(), HEADER_LEN, self.header_len())
    }

    /// The bytes from the end of the header to the total length; trailing
    /// padding in the buffer is excluded.
    pub fn payload(&self) -> &[u8] {
        clamped(
            self.data(),
            self.header_len(),
            usize::from(self.total_len()),
        )
    }

    /// Whether the header checksum is correct.
    pub fn verify_checksum(&self) -> bool {
        checksum::sum(self.header()) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the version nibble.
    pub fn set_version(&mut self, version: u8) {
        let b = &mut self.data_mut()[field::VER_IHL];
        *b = (*b & 0x0f) | (version << 4);
    }

    /// Sets the header length in bytes; it is stored in 4-byte units, so the
    /// two low bits and anything above 60 are lost.
    pub fn set_header_len(&mut self, len: u8) {
        let b = &mut self.data_mut()[field::VER_IHL];
        *b = (*b & 0xf0) | ((len >> 2) & 0x0f);
    }

    /// Sets the DSCP (six bits).
    pub fn set_dscp(&mut self, dscp: u8) {
        let b = &mut self.data_mut()[field::DSCP_ECN];
        *b = (*b & 0x03) | (dscp << 2);
    }

    /// Sets the ECN codepoint (two bits).
    pub fn set_ecn(&mut self, ecn: u8) {
        let b = &mut self.data_mut()[field::DSCP_ECN];
        *b = (*b & 0xfc) | (ecn & 0x03);
    }

    /// Sets the total length.
    pub fn set_total_len(&mut self, len: u16) {
        set_u16_be(self.data_mut(), field::LENGTH, len);
    }

    /// Sets the identification.
    pub fn set_ident(&mut self, ident: u16) {
        set_u16_be(self.data_mut(), field::IDENT, ident);
    }

    fn set_flags_frag(&mut self, mask: u16, value: u16) {
        let old = u16_be(self.data(), field::FLAGS_FRAG);
        set_u16_be(
            self.data_mut(),
            field::FLAGS_FRAG,
            (old & !mask) | (value & mask),
        );
    }

    /// Sets the "don't fragment" flag.
    pub fn set_dont_frag(&mut self, on: bool) {
        self.set_flags_frag(field::FLAG_DF, if on { field::FLAG_DF } else { 0 });
    }

    /// Sets the "more fragments" flag.
    pub fn set_more_frags(&mut self, on: bool) {
        self.set_flags_frag(field::FLAG_MF, if on { field::FLAG_MF } else { 0 });
    }

    /// Sets the fragment offset in bytes; the three low bits are lost.
    pub fn set_frag_offset(&mut self, offset: u16) {
        self.set_flags_frag(field::FRAG_OFFSET, offset >> 3);
    }

    /// Sets the time to live.
    pub fn set_ttl(&mut self, ttl: u8) {
        self.data_mut()[field::TTL] = ttl;
    }

    /// Sets the protocol number.
    pub fn set_protocol(&mut self, protocol: u8) {
        self.data_mut()[field::PROTOCOL] = protocol;
    }

    /// Sets the checksum field as given; see [`fill_checksum`](Self::fill_checksum).
    pub fn set_checksum(&mut self, checksum: u16) {
        set_u16_be(self.data_mut(), field::CHECKSUM.start, checksum);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, addr: Ipv4Addr) {
        *fixed_mut(self.data_mut(), field::SRC) = addr.octets();
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, addr: Ipv4Addr) {
        *fixed_mut(self.data_mut(), field::DST) = addr.octets();
    }

    /// One hop less: the time to live less one and the header checksum
    /// patched for it (RFC 1624), as a router forwards. The caller saw a TTL
    /// above zero.
    pub fn decrement_ttl(&mut self) {
        // The TTL is the high byte of the 16-bit word it shares with the
        // protocol.
        let word = |p: &Self| u16::from_be_bytes([p.ttl(), p.protocol()]);
        let old = word(self);
        self.set_ttl(self.ttl() - 1);
        let sum = checksum::update(self.checksum(), old, word(self));
        self.set_checksum(sum);
    }

    /// Computes the header checksum and stores it; call after the last
    /// change to any header field.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let sum = checksum::checksum(self.header());
        self.set_checksum(sum);
    }

    /// The payload, writable; bounded like [`payload`](Self::payload).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (start, end) = (self.header_len(), usize::from(self.total_len()));
        clamped_mut(self.data_mut(), start, end)
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The fields of a 20-byte header without options, for building outer
/// headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Repr {
    /// Source address.
    pub src_addr: Ipv4Addr,
    /// Destination address.
    pub dst_addr: Ipv4Addr,
    /// Protocol number of the payload.
    pub protocol: u8,
    /// Length of the payload that will follow the header.
    pub payload_len: u16,
    /// Time to live.
    pub ttl: u8,
    /// DSCP (six bits).
    pub dscp: u8,
    /// ECN codepoint (two bits); tunnels copy it from the inner header
    /// (RFC 6040).
    pub ecn: u8,
    /// Identification.
    pub ident: u16,
    /// The "don't fragment" flag.
    pub dont_frag: bool,
}

impl Ipv4Repr {
    /// Writes the header into the first [`HEADER_LEN`] bytes of `buf`, with
    /// its checksum, and returns the header length. Fails with
    /// [`Error::Truncated`] if `buf` is shorter than the header and with
    /// [`Error::BadTotalLen`] if the payload length does not fit the 16-bit
    /// total length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let total_len = u16::try_from(HEADER_LEN)
            .ok()
            .and_then(|h| h.checked_add(self.payload_len))
            .ok_or(Error::BadTotalLen)?;
        let header = buf.get_mut(..HEADER_LEN).ok_or(Error::Truncated)?;
        header.fill(0);
        let mut packet = Packet::new_unchecked(header);
        packet.set_version(VERSION);
        packet.set_header_len(HEADER_LEN as u8);
        packet.set_dscp(self.dscp);
        packet.set_ecn(self.ecn);
        packet.set_total_len(total_len);
        packet.set_ident(self.ident);
        packet.set_dont_frag(self.dont_frag);
        packet.set_ttl(self.ttl);
        packet.set_protocol(self.protocol);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
        packet.fill_checksum();
        Ok(HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::captures::{LO_ECHO_REPLY, TUN_UDP_V4, hex};
    use std::vec::Vec;

    #[test]
    fn parses_a_captured_udp_packet() {
        let bytes = hex(TUN_UDP_V4);
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.dscp(), 0);
        assert_eq!(p.ecn(), 0);
        assert_eq!(p.total_len(), 38);
        assert_eq!(p.ident(), 0x8ee6);
        assert!(p.dont_frag());
        assert!(!p.more_frags());
        assert_eq!(p.frag_offset(), 0);
        assert!(!p.is_fragment());
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.protocol(), crate::ip_protocol::UDP);
        assert_eq!(p.checksum(), 0x1fb9);
        assert_eq!(p.src_addr(), Ipv4Addr::new(198, 18, 0, 1));
        assert_eq!(p.dst_addr(), Ipv4Addr::new(198, 18, 0, 2));
        assert!(p.options().is_empty());
        assert_eq!(p.payload().len(), 18);
        assert_eq!(&p.payload()[8..], b"hello wire");
        assert!(p.verify_checksum());
    }

    #[test]
    fn parses_a_kernel_echo_reply() {
        let bytes = hex(LO_ECHO_REPLY);
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert!(!p.dont_frag());
        assert_eq!(p.protocol(), crate::ip_protocol::ICMP);
        assert_eq!(p.src_addr(), Ipv4Addr::LOCALHOST);
        assert!(p.verify_checksum());
        // The ICMP checksum covers the whole ICMP message.
        assert_eq!(checksum::sum(p.payload()), 0xffff);
        assert_eq!(&p.payload()[8..], b"linerate");
    }

    #[test]
    fn fill_checksum_reproduces_the_kernels() {
        let bytes = hex(TUN_UDP_V4);
        let mut copy = bytes.clone();
        let mut p = Packet::new_checked(&mut copy[..]).unwrap();
        p.set_checksum(0xdead);
        assert!(!p.verify_checksum());
        p.fill_checksum();
        assert_eq!(p.checksum(), 0x1fb9);
        assert_eq!(copy, bytes);
    }

    #[test]
    fn a_flipped_bit_fails_verification() {
        let mut bytes = hex(TUN_UDP_V4);
        bytes[8] ^= 0x01;
        assert!(!Packet::new_checked(&bytes[..]).unwrap().verify_checksum());
    }

    #[test]
    fn trailing_padding_is_not_payload() {
        let mut bytes = hex(TUN_UDP_V4);
        bytes.extend_from_slice(&[0; 10]);
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.payload().len(), 18);
    }

    #[test]
    fn options_lengthen_the_header() {
        let mut bytes = hex(TUN_UDP_V4);
        // One 4-byte option (four NOPs) inserted after the fixed header.
        bytes.splice(20..20, [1, 1, 1, 1]);
        let mut p = Packet::new_checked(&mut bytes[..]).unwrap();
        p.set_header_len(24);
        p.set_total_len(42);
        p.fill_checksum();
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.header_len(), 24);
        assert_eq!(p.options(), &[1, 1, 1, 1]);
        assert_eq!(&p.payload()[8..], b"hello wire");
        assert!(p.verify_checksum());
    }

    #[test]
    fn rejects_what_it_must() {
        let good = hex(TUN_UDP_V4);
        let check = |edit: &dyn Fn(&mut Vec<u8>)| {
            let mut b = good.clone();
            edit(&mut b);
            Packet::new_checked(&b[..]).map(|_| ())
        };
        assert_eq!(check(&|_| ()), Ok(()));
        assert_eq!(check(&|b| b.truncate(19)), Err(Error::Truncated));
        assert_eq!(check(&|b| b[0] = 0x65), Err(Error::BadVersion(6)));
        assert_eq!(check(&|b| b[0] = 0x44), Err(Error::BadHeaderLen));
        assert_eq!(check(&|b| b[0] = 0x4f), Err(Error::Truncated));
        assert_eq!(
            check(&|b| b[2..4].copy_from_slice(&[0, 19])),
            Err(Error::BadTotalLen)
        );
        assert_eq!(
            check(&|b| b[2..4].copy_from_slice(&[0, 39])),
            Err(Error::Truncated)
        );
        assert_eq!(check(&|b| b.truncate(37)), Err(Error::Truncated));
        // A header alone, with no payload, is a legal packet.
        assert_eq!(
            check(&|b| {
                b.truncate(20);
                b[2..4].copy_from_slice(&[0, 20]);
            }),
            Ok(())
        );
    }

    #[test]
    fn no_length_panics() {
        let mut bytes = hex(TUN_UDP_V4);
        bytes.resize(80, 0xa5);
        for fill in [0x00, 0x45, 0xff] {
            let mut b = bytes.clone();
            for x in &mut b[38..] {
                *x = fill;
            }
            for len in 0..=b.len() {
                if let Ok(p) = Packet::new_checked(&b[..len]) {
                    let _ = (p.payload(), p.options(), p.verify_checksum());
                    let _ = (p.src_addr(), p.dst_addr(), p.frag_offset());
                }
            }
        }
        for len in 0..=64 {
            for first in [0x40u8, 0x45, 0x4f, 0x00, 0xff] {
                let mut b = std::vec![0xffu8; len];
                if let Some(x) = b.first_mut() {
                    *x = first;
                }
                if let Ok(p) = Packet::new_checked(&b[..]) {
                    let _ = (p.payload(), p.options(), p.verify_checksum());
                }
            }
        }
    }

    #[test]
    fn payload_stays_in_bounds_after_setters_lie() {
        let mut bytes = hex(TUN_UDP_V4);
        let mut p = Packet::new_checked(&mut bytes[..]).unwrap();
        p.set_total_len(u16::MAX);
        assert_eq!(p.payload().len(), 18);
        p.set_header_len(60);
        assert!(p.payload().len() <= 18);
        let _ = p.payload_mut();
        p.set_total_len(3);
        assert!(p.payload().is_empty());
        assert_eq!(p.header().len(), 38);
        p.fill_checksum();
    }

    #[test]
    fn setters_round_trip() {
        let mut buf = [0u8; 40];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_version(4);
        p.set_header_len(20);
        p.set_dscp(46);
        p.set_ecn(3);
        p.set_total_len(40);
        p.set_ident(0xbeef);
        p.set_dont_frag(true);
        p.set_more_frags(true);
        p.set_frag_offset(1480);
        p.set_ttl(63);
        p.set_protocol(6);
        p.set_src_addr(Ipv4Addr::new(198, 18, 1, 1));
        p.set_dst_addr(Ipv4Addr::new(198, 19, 255, 254));
        p.fill_checksum();
        p.payload_mut().fill(0x77);

        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.dscp(), 46);
        assert_eq!(p.ecn(), 3);
        assert_eq!(p.total_len(), 40);
        assert_eq!(p.ident(), 0xbeef);
        assert!(p.dont_frag());
        assert!(p.more_frags());
        assert_eq!(p.frag_offset(), 1480);
        assert!(p.is_fragment());
        assert_eq!(p.ttl(), 63);
        assert_eq!(p.protocol(), 6);
        assert_eq!(p.src_addr(), Ipv4Addr::new(198, 18, 1, 1));
        assert_eq!(p.dst_addr(), Ipv4Addr::new(198, 19, 255, 254));
        assert!(p.verify_checksum());
        assert_eq!(p.payload(), &[0x77; 20]);

        // Clearing flags leaves the others alone.
        let mut buf2 = buf;
        let mut q = Packet::new_unchecked(&mut buf2[..]);
        q.set_dont_frag(false);
        assert!(q.more_frags());
        assert_eq!(q.frag_offset(), 1480);
        q.set_more_frags(false);
        q.set_frag_offset(0);
        assert!(!q.is_fragment());
        assert_eq!(q.dscp(), 46);
        q.set_ecn(0);
        assert_eq!(q.dscp(), 46);
        q.set_dscp(0);
        assert_eq!(q.ecn(), 0);
        assert_eq!(q.version(), 4);
        assert_eq!(q.into_inner()[0], 0x45);
    }

    #[test]
    fn emit_writes_the_captured_header() {
        let bytes = hex(TUN_UDP_V4);
        let repr = Ipv4Repr {
            src_addr: Ipv4Addr::new(198, 18, 0, 1),
            dst_addr: Ipv4Addr::new(198, 18, 0, 2),
            protocol: crate::ip_protocol::UDP,
            payload_len: 18,
            ttl: 64,
            dscp: 0,
            ecn: 0,
            ident: 0x8ee6,
            dont_frag: true,
        };
        let mut buf = [0xaau8; 24];
        assert_eq!(repr.emit(&mut buf), Ok(HEADER_LEN));
        assert_eq!(&buf[..20], &bytes[..20]);
        assert_eq!(&buf[20..], &[0xaa; 4]);

        assert_eq!(repr.emit(&mut buf[..19]), Err(Error::Truncated));
        let too_big = Ipv4Repr {
            payload_len: u16::MAX - 19,
            ..repr
        };
        assert_eq!(too_big.emit(&mut buf), Err(Error::BadTotalLen));
        let largest = Ipv4Repr {
            payload_len: u16::MAX - 20,
            ..repr
        };
        assert_eq!(largest.emit(&mut buf), Ok(HEADER_LEN));
    }

    #[test]
    #[should_panic(expected = "new_unchecked")]
    fn unchecked_short_buffer_panics_with_a_reason() {
        let p = Packet::new_unchecked(&[0x45u8; 12][..]);
        let _ = p.src_addr();
    }
}
