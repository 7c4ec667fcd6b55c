//! ESP packet view (RFC 4303 section 2): the SPI and sequence number in front, the
//! encrypted payload, and, once decrypted, the trailer that ends it (padding, pad
//! length, next header), followed by the integrity check value.
//!
//! ```text
//!  0                   1                   2                   3
//!  |               Security Parameters Index (SPI)                 |
//!  |                      Sequence Number                          |
//!  |                IV (per algorithm) + Payload Data ...          |
//!  |               |     Padding (0-255 bytes)                     |
//!  |                               |  Pad Length   | Next Header   |
//!  |         Integrity Check Value (per algorithm) ...             |
//! ```
//!
//! ESP rides directly on IP (protocol 50) or, through NATs and to peers that only
//! speak it, in UDP to port 4500 (RFC 3948), where the same port also carries IKE
//! (behind a zero marker) and NAT keepalives: [`classify_udp`] tells them apart.

use crate::error::{Error, Result};

/// SPI and sequence number.
pub const HEADER_LEN: usize = 8;

/// The AAD of an AEAD with extended sequence numbers: the SPI, then the whole
/// 64-bit sequence number, high half first (RFC 4106 section 5, RFC 7634
/// section 2.1).
pub const ESN_AAD_LEN: usize = 12;

/// The AAD of packet `seq` (the full 64-bit number) on SA `spi` with extended
/// sequence numbers.
pub fn esn_aad(spi: u32, seq: u64) -> [u8; ESN_AAD_LEN] {
    let mut aad = [0u8; ESN_AAD_LEN];
    aad[..4].copy_from_slice(&spi.to_be_bytes());
    aad[4..].copy_from_slice(&seq.to_be_bytes());
    aad
}
/// Pad length and next header.
pub const TRAILER_LEN: usize = 2;
/// The UDP port of ESP in UDP and of IKE after NAT detection (RFC 3948 section 2).
pub const UDP_PORT: u16 = 4500;
/// SPIs below this are reserved (RFC 4303 section 2.1); 0 is the non-ESP marker
/// in UDP (RFC 3948 section 2.2).
pub const MIN_SPI: u32 = 256;
/// The one byte of a NAT keepalive (RFC 3948 section 2.3).
pub const NAT_KEEPALIVE: u8 = 0xff;
/// The longest padding the pad-length byte can say.
pub const MAX_PAD: usize = 255;

checked_view! {
    /// A view of an ESP packet: header and the bytes after it.
    pub struct Packet, at least HEADER_LEN;
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Checks that the buffer holds a header with an SPI that may be sent on the wire.
    pub fn check_len(&self) -> Result<()> {
        self.check_min_len()?;
        if self.spi() < MIN_SPI {
            return Err(Error::ReservedSpi);
        }
        Ok(())
    }

    /// The Security Parameters Index: with the destination, which SA this is.
    pub fn spi(&self) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// The low 32 bits of the sequence number (all of it without ESN).
    pub fn seq(&self) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_be_bytes([b[4], b[5], b[6], b[7]])
    }

    /// What follows the header: IV, encrypted payload and trailer, ICV.
    pub fn payload(&self) -> &[u8] {
        self.buffer.as_ref().get(HEADER_LEN..).unwrap_or(&[])
    }
}

/// Writes the SPI and the low 32 bits of `seq` into the first [`HEADER_LEN`] bytes
/// of `buf`; [`Error::Truncated`] if there are fewer.
pub fn emit_header(buf: &mut [u8], spi: u32, seq: u64) -> Result<()> {
    let h = buf.get_mut(..HEADER_LEN).ok_or(Error::Truncated)?;
    h[..4].copy_from_slice(&spi.to_be_bytes());
    h[4..].copy_from_slice(&(seq as u32).to_be_bytes());
    Ok(())
}

/// The length of payload, padding and trailer for `payload_len` bytes of payload,
/// padded so that the trailer ends on a multiple of `align` (a power of two: 4 for
/// the stream modes, the block size for CBC), RFC 4303 section 2.4.
pub const fn padded_len(payload_len: usize, align: usize) -> usize {
    (payload_len + TRAILER_LEN + align - 1) & !(align - 1)
}

/// Writes padding (1, 2, 3, ...) and the trailer after the `payload_len` bytes of
/// payload at the start of `buf`, which must be exactly as long as
/// [`padded_len`] says (`buf.len() - payload_len - TRAILER_LEN` is the padding).
pub fn emit_trailer(buf: &mut [u8], payload_len: usize, next_header: u8) -> Result<()> {
    let pad = buf
        .len()
        .checked_sub(payload_len + TRAILER_LEN)
        .filter(|&p| p <= MAX_PAD)
        .ok_or(Error::BadPadding)?;
    let tail = &mut buf[payload_len..];
    for (i, b) in tail[..pad].iter_mut().enumerate() {
        *b = (i + 1) as u8;
    }
    tail[pad] = pad as u8;
    tail[pad + 1] = next_header;
    Ok(())
}

/// The decrypted text of an ESP packet (payload, padding, trailer): the payload's
/// length and the next header, after checking that the padding is what the sender
/// must write (RFC 4303 section 2.4: the receiver checks it where the algorithm
/// does not say otherwise; none of ours do).
pub fn parse_trailer(text: &[u8]) -> Result<(usize, u8)> {
    let [.., pad, next] = *text else {
        return Err(Error::Truncated);
    };
    let pad = usize::from(pad);
    let payload_len = text
        .len()
        .checked_sub(TRAILER_LEN + pad)
        .ok_or(Error::BadPadding)?;
    let padding = &text[payload_len..payload_len + pad];
    if padding.iter().enumerate().any(|(i, &b)| b != (i + 1) as u8) {
        return Err(Error::BadPadding);
    }
    Ok((payload_len, next))
}

/// What a UDP datagram to port 4500 carries (RFC 3948 sections 2.2 and 2.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UdpPayload {
    /// An ESP packet (its first four bytes, the SPI, are not zero).
    Esp,
    /// An IKE message behind the four-byte non-ESP marker.
    Ike,
    /// A NAT keepalive: one byte, 0xFF.
    Keepalive,
}

/// Tells what a datagram to the ESP-in-UDP port carries; [`Error::Truncated`] for
/// a datagram too short to be any of them.
pub fn classify_udp(payload: &[u8]) -> Result<UdpPayload> {
    match payload {
        [NAT_KEEPALIVE] => Ok(UdpPayload::Keepalive),
        [0, 0, 0, 0, ..] => Ok(UdpPayload::Ike),
        p if p.len() >= HEADER_LEN => Ok(UdpPayload::Esp),
        _ => Err(Error::Truncated),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_round_trips() {
        let mut b = [0u8; 12];
        emit_header(&mut b, 0x1000_0001, 0x1_0000_0005).unwrap();
        assert_eq!(b[..8], [0x10, 0, 0, 1, 0, 0, 0, 5]);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!((p.spi(), p.seq()), (0x1000_0001, 5));
        assert_eq!(p.payload().len(), 4);
        assert_eq!(emit_header(&mut b[..7], 1, 1), Err(Error::Truncated));
    }

    #[test]
    fn short_packets_and_reserved_spis_are_refused() {
        let mut b = [0u8; 8];
        assert_eq!(Packet::new_checked(&b[..7]).err(), Some(Error::Truncated));
        for spi in [0u32, 1, 255] {
            b[..4].copy_from_slice(&spi.to_be_bytes());
            assert_eq!(Packet::new_checked(&b[..]).err(), Some(Error::ReservedSpi));
        }
        b[..4].copy_from_slice(&MIN_SPI.to_be_bytes());
        assert!(Packet::new_checked(&b[..]).is_ok());
    }

    #[test]
    fn padding_aligns_the_trailer() {
        assert_eq!(padded_len(0, 4), 4);
        assert_eq!(padded_len(2, 4), 4);
        assert_eq!(padded_len(3, 4), 8);
        assert_eq!(padded_len(100, 16), 112);
        assert_eq!(padded_len(14, 16), 16);
    }

    #[test]
    fn a_trailer_round_trips() {
        for len in 0..40 {
            let total = padded_len(len, 16);
            let mut b = [0xaau8; 64];
            emit_trailer(&mut b[..total], len, 4).unwrap();
            assert_eq!(parse_trailer(&b[..total]), Ok((len, 4)), "payload {len}");
        }
    }

    #[test]
    fn bad_trailers_are_refused() {
        assert_eq!(parse_trailer(&[4]), Err(Error::Truncated));
        // Pad length longer than what comes before it.
        assert_eq!(parse_trailer(&[1, 2, 3, 4]), Err(Error::BadPadding));
        // Padding that is not 1, 2, 3.
        assert_eq!(parse_trailer(&[9, 1, 2, 4, 3, 41]), Err(Error::BadPadding));
        assert_eq!(parse_trailer(&[9, 1, 2, 3, 3, 41]), Ok((1, 41)));
        // No padding, an empty payload.
        assert_eq!(parse_trailer(&[0, 59]), Ok((0, 59)));
        let mut b = [0u8; 4];
        assert_eq!(emit_trailer(&mut b, 3, 4), Err(Error::BadPadding));
    }

    #[test]
    fn udp_payloads_are_told_apart() {
        assert_eq!(classify_udp(&[0xff]), Ok(UdpPayload::Keepalive));
        assert_eq!(classify_udp(&[0, 0, 0, 0, 1]), Ok(UdpPayload::Ike));
        assert_eq!(classify_udp(&[0, 0, 1, 0, 0, 0, 0, 1]), Ok(UdpPayload::Esp));
        assert_eq!(classify_udp(&[0, 0, 1]), Err(Error::Truncated));
        assert_eq!(classify_udp(&[]), Err(Error::Truncated));
    }
}
