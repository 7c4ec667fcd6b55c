//! TCP header view (RFC 9293 §3.1) and its checksum over the IPv4 and IPv6
//! pseudo-headers.
//!
//! The data path never terminates TCP; it only needs the header to cut an
//! offloaded burst back into segments and to join segments into a burst
//! again, which touches the sequence number, the flags and the checksum.
//!
//! TCP has no length field: a segment is whatever its IP header leaves after
//! itself. So the buffer of this view must be exactly the segment (an IP
//! view's `payload()`), the payload runs to the end of the buffer, and the
//! checksums take the buffer's length as the segment length.

use core::net::{Ipv4Addr, Ipv6Addr};

use crate::bytes::{clamped, clamped_mut, set_u16_be, set_u32_be, u16_be, u32_be};
use crate::checksum;
use crate::error::{Error, Result};
use crate::ip::protocol;

/// The length of a header without options, and the smallest legal data
/// offset × 4 (RFC 9293 §3.1).
pub const HEADER_LEN: usize = 20;

/// The largest header: a data offset of 15 words.
pub const MAX_HEADER_LEN: usize = 60;

/// Where the checksum field starts in the header: what checksum offload
/// (virtio-net's `csum_offset`, a NIC's descriptor) is told.
pub const CHECKSUM_OFFSET: usize = field::CHECKSUM;

/// The control bits of the flags byte (RFC 9293 §3.1, RFC 3168 §6.1).
pub mod flags {
    /// No more data from the sender.
    pub const FIN: u8 = 0x01;
    /// Synchronize sequence numbers.
    pub const SYN: u8 = 0x02;
    /// Reset the connection.
    pub const RST: u8 = 0x04;
    /// Push.
    pub const PSH: u8 = 0x08;
    /// The acknowledgment number is significant.
    pub const ACK: u8 = 0x10;
    /// The urgent pointer is significant.
    pub const URG: u8 = 0x20;
    /// ECN echo.
    pub const ECE: u8 = 0x40;
    /// Congestion window reduced.
    pub const CWR: u8 = 0x80;
}

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const SEQ: usize = 4;
    pub const ACK: usize = 8;
    pub const DATA_OFFSET: usize = 12;
    pub const FLAGS: usize = 13;
    pub const WINDOW: usize = 14;
    pub const CHECKSUM: usize = 16;
    pub const URGENT: usize = 18;
}

checked_view! {
    /// A view of a TCP segment: header, options and payload.
    pub struct Packet, at least HEADER_LEN;
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Checks that the buffer holds the fixed header and that the header length (data
    /// offset) is at least 20 and fits in the buffer.
    pub fn check_len(&self) -> Result<()> {
        let len = self.check_min_len()?;
        let header_len = self.header_len();
        if header_len < HEADER_LEN {
            return Err(Error::BadHeaderLen);
        }
        if header_len > len {
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

    /// Sequence number of the first payload byte (of the SYN, if set).
    pub fn seq_number(&self) -> u32 {
        u32_be(self.data(), field::SEQ)
    }

    /// Acknowledgment number: the next sequence number the sender expects.
    pub fn ack_number(&self) -> u32 {
        u32_be(self.data(), field::ACK)
    }

    /// The header length in bytes (data offset × 4), options included.
    pub fn header_len(&self) -> usize {
        usize::from(self.data()[field::DATA_OFFSET] >> 4) * 4
    }

    /// The control bits; see [`flags`].
    pub fn flags(&self) -> u8 {
        self.data()[field::FLAGS]
    }

    /// Receive window.
    pub fn window(&self) -> u16 {
        u16_be(self.data(), field::WINDOW)
    }

    /// The checksum field.
    pub fn checksum(&self) -> u16 {
        u16_be(self.data(), field::CHECKSUM)
    }

    /// Urgent pointer.
    pub fn urgent_ptr(&self) -> u16 {
        u16_be(self.data(), field::URGENT)
    }

    /// The header: fixed part and options.
    pub fn header(&self) -> &[u8] {
        clamped(self.data(), 0, self.header_len())
    }

    /// Options: the header bytes after the first 20.
    pub fn options(&self) -> &[u8] {
        clamped(self.data(), HEADER_LEN, self.header_len())
    }

    /// The bytes after the header, to the end of the buffer.
    pub fn payload(&self) -> &[u8] {
        let data = self.data();
        clamped(data, self.header_len(), data.len())
    }

    /// Whether the checksum is correct for a segment carried in IPv4 between
    /// `src` and `dst`. A segment cannot be longer than 65,535 bytes in IPv4;
    /// the pseudo-header of a longer buffer takes its length modulo 2^16.
    pub fn verify_checksum_v4(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        let len = self.data().len() as u16;
        let pseudo = checksum::pseudo_header_v4(src, dst, protocol::TCP, len);
        checksum::combine(pseudo, checksum::sum(self.data())) == 0xffff
    }

    /// Whether the checksum is correct for a segment carried in IPv6 between
    /// `src` and `dst`.
    pub fn verify_checksum_v6(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        let len = self.data().len() as u32;
        let pseudo = checksum::pseudo_header_v6(src, dst, protocol::TCP, len);
        checksum::combine(pseudo, checksum::sum(self.data())) == 0xffff
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

    /// Sets the sequence number.
    pub fn set_seq_number(&mut self, seq: u32) {
        set_u32_be(self.data_mut(), field::SEQ, seq);
    }

    /// Sets the acknowledgment number.
    pub fn set_ack_number(&mut self, ack: u32) {
        set_u32_be(self.data_mut(), field::ACK, ack);
    }

    /// Sets the header length in bytes; it is stored in 4-byte units, so the
    /// two low bits and anything above 60 are lost. The reserved bits that
    /// share its byte are kept.
    pub fn set_header_len(&mut self, len: u8) {
        let b = &mut self.data_mut()[field::DATA_OFFSET];
        *b = (*b & 0x0f) | (((len >> 2) & 0x0f) << 4);
    }

    /// Sets the control bits.
    pub fn set_flags(&mut self, flags: u8) {
        self.data_mut()[field::FLAGS] = flags;
    }

    /// Sets the receive window.
    pub fn set_window(&mut self, window: u16) {
        set_u16_be(self.data_mut(), field::WINDOW, window);
    }

    /// Sets the checksum field as given: a full checksum, or the
    /// pseudo-header sum that a packet handed over for checksum offload
    /// carries.
    pub fn set_checksum(&mut self, checksum: u16) {
        set_u16_be(self.data_mut(), field::CHECKSUM, checksum);
    }

    /// Sets the urgent pointer.
    pub fn set_urgent_ptr(&mut self, ptr: u16) {
        set_u16_be(self.data_mut(), field::URGENT, ptr);
    }

    /// The payload, writable; bounded like [`payload`](Self::payload).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        let data = self.data_mut();
        let end = data.len();
        clamped_mut(data, start, end)
    }

    fn fill_with_pseudo(&mut self, pseudo: u16) {
        self.set_checksum(0);
        let sum = checksum::combine(pseudo, checksum::sum(self.data()));
        self.set_checksum(!sum);
    }

    /// Computes the checksum over the IPv4 pseudo-header, header and payload,
    /// and stores it. Call after the last change to the segment. The length
    /// is taken as in [`verify_checksum_v4`](Self::verify_checksum_v4).
    pub fn fill_checksum_v4(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        let len = self.data().len() as u16;
        self.fill_with_pseudo(checksum::pseudo_header_v4(src, dst, protocol::TCP, len));
    }

    /// Computes the checksum over the IPv6 pseudo-header, header and payload,
    /// and stores it. Call after the last change to the segment.
    pub fn fill_checksum_v6(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        let len = self.data().len() as u32;
        self.fill_with_pseudo(checksum::pseudo_header_v6(src, dst, protocol::TCP, len));
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    const V4_SRC: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
    const V4_DST: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

    fn v6(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    /// A data segment from port 40000 to 5201 with a timestamp option, as a
    /// Linux sender writes them: header 32 bytes, then "linerate".
    fn segment() -> Vec<u8> {
        let mut s = Vec::new();
        s.extend_from_slice(&40000u16.to_be_bytes());
        s.extend_from_slice(&5201u16.to_be_bytes());
        s.extend_from_slice(&0x1122_3344u32.to_be_bytes());
        s.extend_from_slice(&0x5566_7788u32.to_be_bytes());
        s.extend_from_slice(&[8 << 4, flags::ACK | flags::PSH]);
        s.extend_from_slice(&502u16.to_be_bytes());
        s.extend_from_slice(&[0, 0, 0, 0]);
        s.extend_from_slice(&[1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]);
        s.extend_from_slice(b"linerate");
        s
    }

    /// RFC 1071 the slow way, to check the view against something it does
    /// not share code with: 32-bit sums of 16-bit words, folded at the end.
    fn naive_checksum(pseudo: &[u8], seg: &[u8]) -> u16 {
        let mut all = pseudo.to_vec();
        all.extend_from_slice(seg);
        if all.len() % 2 == 1 {
            all.push(0);
        }
        let mut acc: u32 = all
            .chunks(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        while acc > 0xffff {
            acc = (acc & 0xffff) + (acc >> 16);
        }
        !(acc as u16)
    }

    #[test]
    fn parses_every_field() {
        let bytes = segment();
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!((p.src_port(), p.dst_port()), (40000, 5201));
        assert_eq!(p.seq_number(), 0x1122_3344);
        assert_eq!(p.ack_number(), 0x5566_7788);
        assert_eq!(p.header_len(), 32);
        assert_eq!(p.flags(), flags::ACK | flags::PSH);
        assert_eq!(p.window(), 502);
        assert_eq!((p.checksum(), p.urgent_ptr()), (0, 0));
        assert_eq!(p.header().len(), 32);
        assert_eq!(p.options(), &[1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]);
        assert_eq!(p.payload(), b"linerate");
    }

    #[test]
    fn checksums_agree_with_rfc_1071_done_by_hand() {
        for odd in [false, true] {
            let mut bytes = segment();
            if odd {
                bytes.push(b'!');
            }
            let len = bytes.len();
            let mut p = Packet::new_checked(&mut bytes[..]).unwrap();
            p.fill_checksum_v4(V4_SRC, V4_DST);
            let mut pseudo = Vec::new();
            pseudo.extend_from_slice(&V4_SRC.octets());
            pseudo.extend_from_slice(&V4_DST.octets());
            pseudo.extend_from_slice(&[0, protocol::TCP]);
            pseudo.extend_from_slice(&(len as u16).to_be_bytes());
            let mut zeroed = p.as_ref().to_vec();
            zeroed[16..18].fill(0);
            assert_eq!(p.checksum(), naive_checksum(&pseudo, &zeroed));
            assert!(p.verify_checksum_v4(V4_SRC, V4_DST));
            assert!(!p.verify_checksum_v4(V4_SRC, Ipv4Addr::new(198, 18, 0, 3)));

            let (src, dst) = (v6("2001:2::1"), v6("2001:2::2"));
            p.fill_checksum_v6(&src, &dst);
            let mut pseudo = Vec::new();
            pseudo.extend_from_slice(&src.octets());
            pseudo.extend_from_slice(&dst.octets());
            pseudo.extend_from_slice(&(len as u32).to_be_bytes());
            pseudo.extend_from_slice(&[0, 0, 0, protocol::TCP]);
            assert_eq!(p.checksum(), naive_checksum(&pseudo, &zeroed));
            assert!(p.verify_checksum_v6(&src, &dst));
            p.payload_mut()[0] ^= 1;
            assert!(!p.verify_checksum_v6(&src, &dst));
        }
    }

    #[test]
    fn checksum_offset_is_the_fields() {
        let mut buf = [0u8; HEADER_LEN];
        Packet::new_unchecked(&mut buf[..]).set_checksum(0x0102);
        assert_eq!(buf[CHECKSUM_OFFSET..CHECKSUM_OFFSET + 2], [1, 2]);
    }

    #[test]
    fn rejects_what_it_must() {
        let good = segment();
        let check = |edit: &dyn Fn(&mut Vec<u8>)| {
            let mut b = good.clone();
            edit(&mut b);
            Packet::new_checked(&b[..]).map(|_| ())
        };
        assert_eq!(check(&|_| ()), Ok(()));
        assert_eq!(check(&|b| b.truncate(19)), Err(Error::Truncated));
        assert_eq!(check(&|b| b.truncate(31)), Err(Error::Truncated));
        assert_eq!(check(&|b| b.truncate(32)), Ok(()));
        assert_eq!(check(&|b| b[12] = 4 << 4), Err(Error::BadHeaderLen));
        assert_eq!(check(&|b| b[12] = 0), Err(Error::BadHeaderLen));
        assert_eq!(check(&|b| b[12] = 15 << 4), Err(Error::Truncated));
        assert_eq!(check(&|b| b[12] = 5 << 4), Ok(()));
    }

    #[test]
    fn no_length_panics() {
        let mut bytes = segment();
        bytes.resize(70, 0xff);
        for len in 0..=bytes.len() {
            for offset in 0..16u8 {
                let mut b = bytes[..len].to_vec();
                if len > 12 {
                    b[12] = offset << 4;
                }
                if let Ok(mut p) = Packet::new_checked(&mut b[..]) {
                    assert!(p.header_len() <= len && p.header_len() >= HEADER_LEN);
                    assert_eq!(p.payload().len(), len - p.header_len());
                    let _ = (p.options(), p.verify_checksum_v4(V4_SRC, V4_DST));
                    p.fill_checksum_v6(&v6("::1"), &v6("::2"));
                    assert!(p.verify_checksum_v6(&v6("::1"), &v6("::2")));
                }
            }
        }
    }

    #[test]
    fn payload_stays_in_bounds_after_setters_lie() {
        let mut bytes = segment();
        let mut p = Packet::new_checked(&mut bytes[..]).unwrap();
        p.set_header_len(60);
        assert!(p.payload().is_empty());
        assert!(p.payload_mut().is_empty());
        assert_eq!(p.options().len(), 20);
        p.set_header_len(0);
        assert_eq!(p.options(), &[]);
        assert_eq!(p.header(), &[]);
    }

    #[test]
    fn setters_round_trip() {
        let mut buf = [0u8; 24];
        buf[12] = 0x0f; // reserved bits, kept by set_header_len
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_src_port(1);
        p.set_dst_port(65535);
        p.set_seq_number(0xdead_beef);
        p.set_ack_number(7);
        p.set_header_len(20);
        p.set_flags(flags::SYN | flags::ECE | flags::CWR);
        p.set_window(0x1234);
        p.set_checksum(0xabcd);
        p.set_urgent_ptr(9);
        p.payload_mut().copy_from_slice(&[1, 2, 3, 4]);
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!((p.src_port(), p.dst_port()), (1, 65535));
        assert_eq!((p.seq_number(), p.ack_number()), (0xdead_beef, 7));
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.flags(), 0xc2);
        assert_eq!(
            (p.window(), p.checksum(), p.urgent_ptr()),
            (0x1234, 0xabcd, 9)
        );
        assert_eq!(p.payload(), &[1, 2, 3, 4]);
        assert_eq!(
            p.into_inner(),
            &[
                0, 1, 255, 255, 0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 7, 0x5f, 0xc2, 0x12, 0x34, 0xab,
                0xcd, 0, 9, 1, 2, 3, 4
            ]
        );
    }
}
