//! ICMP for IPv4 view (RFC 792), with the next-hop MTU of "fragmentation
//! needed" (RFC 1191 §4).
//!
//! ICMP has no length field: a message is whatever its IPv4 header leaves
//! after itself, so the buffer of this view must be exactly the message (an
//! IPv4 view's `payload()`), and the checksum covers the whole buffer.
//!
//! A gateway answers echo requests and reports packets it cannot forward
//! with error messages, which quote the offending packet: [`ErrorRepr`]
//! builds them, and [`is_icmp_error`] tells the packets that must never be
//! answered with one.

use crate::bytes::{set_u16_be, u16_be};
use crate::checksum;
use crate::error::{Error, Result};
use crate::icmp_header::{echo_rest, write_message};
use crate::ip_protocol as protocol;
use crate::ipv4;

/// The length of the header every message has: type, code, checksum and
/// four bytes whose meaning depends on the type (RFC 792).
pub const HEADER_LEN: usize = crate::icmp_header::HEADER_LEN;

/// How much of the offending packet's payload an error message quotes after
/// its IP header: "the first 64 bits of the original datagram's data"
/// (RFC 792, "Destination Unreachable Message").
pub const QUOTED_PAYLOAD_LEN: usize = 8;

/// Message types (RFC 792; IANA "ICMP Type Numbers").
pub mod msg_type {
    /// Echo reply (RFC 792).
    pub const ECHO_REPLY: u8 = 0;
    /// Destination unreachable (RFC 792).
    pub const DEST_UNREACHABLE: u8 = 3;
    /// Source quench (RFC 792; deprecated by RFC 6633).
    pub const SOURCE_QUENCH: u8 = 4;
    /// Redirect (RFC 792).
    pub const REDIRECT: u8 = 5;
    /// Echo request (RFC 792).
    pub const ECHO_REQUEST: u8 = 8;
    /// Time exceeded (RFC 792).
    pub const TIME_EXCEEDED: u8 = 11;
    /// Parameter problem (RFC 792).
    pub const PARAM_PROBLEM: u8 = 12;
    /// Timestamp (RFC 792).
    pub const TIMESTAMP: u8 = 13;
    /// Timestamp reply (RFC 792).
    pub const TIMESTAMP_REPLY: u8 = 14;
}

/// Codes of [`msg_type::DEST_UNREACHABLE`] (RFC 792; RFC 1812 §5.2.7.1).
pub mod unreachable {
    /// Net unreachable.
    pub const NET: u8 = 0;
    /// Host unreachable.
    pub const HOST: u8 = 1;
    /// Protocol unreachable.
    pub const PROTOCOL: u8 = 2;
    /// Port unreachable.
    pub const PORT: u8 = 3;
    /// Fragmentation needed and DF set; carries the next-hop MTU
    /// (RFC 1191 §4).
    pub const FRAG_NEEDED: u8 = 4;
    /// Source route failed.
    pub const SOURCE_ROUTE_FAILED: u8 = 5;
    /// Communication administratively prohibited (RFC 1812 §5.2.7.1).
    pub const ADMIN_PROHIBITED: u8 = 13;
}

/// Codes of [`msg_type::TIME_EXCEEDED`] (RFC 792).
pub mod time_exceeded {
    /// Time to live exceeded in transit.
    pub const TTL: u8 = 0;
    /// Fragment reassembly time exceeded.
    pub const REASSEMBLY: u8 = 1;
}

mod field {
    pub const POINTER: usize = 4;
    pub const MTU: usize = 6;
}

/// Whether messages of type `ty` are error messages: destination
/// unreachable, source quench, redirect, time exceeded and parameter
/// problem (RFC 1122 §3.2.2). The others are queries and their replies, or
/// unknown.
pub const fn is_error_type(ty: u8) -> bool {
    matches!(
        ty,
        msg_type::DEST_UNREACHABLE
            | msg_type::SOURCE_QUENCH
            | msg_type::REDIRECT
            | msg_type::TIME_EXCEEDED
            | msg_type::PARAM_PROBLEM
    )
}

/// Whether `packet` must not be answered with an ICMP error because it is
/// one (RFC 1122 §3.2.2, RFC 1812 §4.3.2.7): it carries ICMP and its type is
/// an error type. A fragment other than the first, whose type cannot be
/// seen, and an ICMP payload too short to hold a type count as errors too:
/// RFC 1812 §4.3.2.7 forbids errors about those as well.
pub fn is_icmp_error<T: AsRef<[u8]>>(packet: &ipv4::Packet<T>) -> bool {
    if packet.protocol() != protocol::ICMP {
        return false;
    }
    if packet.frag_offset() != 0 {
        return true;
    }
    packet.payload().first().is_none_or(|&ty| is_error_type(ty))
}

checked_view! {
    /// A view of an ICMP message: header and data.
    pub struct Packet, at least HEADER_LEN;
}

icmp_header_accessors!();

impl<T: AsRef<[u8]>> Packet<T> {
    /// Next-hop MTU of a "fragmentation needed" message (RFC 1191 §4); zero
    /// from routers older than RFC 1191.
    pub fn next_hop_mtu(&self) -> u16 {
        u16_be(self.data(), field::MTU)
    }

    /// Pointer of a parameter problem message: the offset of the offending
    /// byte in the quoted header.
    pub fn pointer(&self) -> u8 {
        self.data()[field::POINTER]
    }

    /// Whether the checksum over the whole message is correct.
    pub fn verify_checksum(&self) -> bool {
        checksum::sum(self.data()) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the next-hop MTU.
    pub fn set_next_hop_mtu(&mut self, value: u16) {
        set_u16_be(self.data_mut(), field::MTU, value);
    }

    /// Sets the parameter problem pointer.
    pub fn set_pointer(&mut self, value: u8) {
        self.data_mut()[field::POINTER] = value;
    }

    /// Computes the checksum over the whole message and stores it; call
    /// after the last change. An echo request becomes its reply in place
    /// with `set_msg_type(ECHO_REPLY)` and this.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let sum = checksum::checksum(self.data());
        self.set_checksum(sum);
    }
}

/// An echo request or reply, for building one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EchoRepr<'a> {
    /// A reply rather than a request.
    pub reply: bool,
    /// Identifier.
    pub identifier: u16,
    /// Sequence number.
    pub sequence: u16,
    /// Data, echoed by the reply.
    pub data: &'a [u8],
}

impl EchoRepr<'_> {
    /// The length of the message: header and data.
    pub const fn message_len(&self) -> usize {
        HEADER_LEN + self.data.len()
    }

    /// Writes the whole message, checksum included, into the start of `buf`
    /// and returns its length, or [`Error::Truncated`] if `buf` is shorter.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let ty = if self.reply {
            msg_type::ECHO_REPLY
        } else {
            msg_type::ECHO_REQUEST
        };
        let rest = echo_rest(self.identifier, self.sequence);
        let message = write_message(buf, (ty, 0, rest), self.data)?;
        Packet::new_unchecked(&mut *message).fill_checksum();
        Ok(message.len())
    }
}

/// An error message about an offending packet, for building one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorRepr {
    /// Destination unreachable with a code of [`unreachable`](mod@unreachable) other than
    /// fragmentation needed.
    DestUnreachable {
        /// The code.
        code: u8,
    },
    /// Destination unreachable, fragmentation needed and DF set, with the
    /// MTU of the next hop (RFC 1191 §4).
    FragNeeded {
        /// The largest packet the next hop takes.
        next_hop_mtu: u16,
    },
    /// Time exceeded (see [`time_exceeded`]).
    TimeExceeded {
        /// The code.
        code: u8,
    },
    /// Parameter problem, pointing at the offending byte of the header.
    ParamProblem {
        /// Offset of the offending byte.
        pointer: u8,
    },
}

impl ErrorRepr {
    /// The message type.
    pub const fn msg_type(&self) -> u8 {
        match self {
            ErrorRepr::DestUnreachable { .. } | ErrorRepr::FragNeeded { .. } => {
                msg_type::DEST_UNREACHABLE
            }
            ErrorRepr::TimeExceeded { .. } => msg_type::TIME_EXCEEDED,
            ErrorRepr::ParamProblem { .. } => msg_type::PARAM_PROBLEM,
        }
    }

    /// The code.
    pub const fn code(&self) -> u8 {
        match *self {
            ErrorRepr::DestUnreachable { code } | ErrorRepr::TimeExceeded { code } => code,
            ErrorRepr::FragNeeded { .. } => unreachable::FRAG_NEEDED,
            ErrorRepr::ParamProblem { .. } => 0,
        }
    }

    const fn rest_of_header(&self) -> u32 {
        match *self {
            ErrorRepr::DestUnreachable { .. } | ErrorRepr::TimeExceeded { .. } => 0,
            ErrorRepr::FragNeeded { next_hop_mtu } => next_hop_mtu as u32,
            ErrorRepr::ParamProblem { pointer } => (pointer as u32) << 24,
        }
    }

    /// The length of the message about `offending`: the header, and the
    /// offending packet's IP header and first [`QUOTED_PAYLOAD_LEN`] bytes
    /// of its payload (fewer if it has fewer). Fails as
    /// [`ipv4::Packet::new_checked`] does if `offending` is not an IPv4
    /// packet.
    pub fn message_len(offending: &[u8]) -> Result<usize> {
        Ok(HEADER_LEN + quote_len(offending)?)
    }

    /// Writes the message about `offending`, an IPv4 packet, into the start
    /// of `buf`, quoting its IP header and the first [`QUOTED_PAYLOAD_LEN`]
    /// bytes of its payload (RFC 792), with the checksum filled; returns its
    /// length. Fails as [`ipv4::Packet::new_checked`] does if `offending`
    /// is not an IPv4 packet, and with [`Error::Truncated`] if `buf` is
    /// shorter than [`message_len`](Self::message_len).
    ///
    /// Whether an error may be sent at all is the caller's to decide first
    /// (see [`is_icmp_error`]).
    pub fn emit(&self, buf: &mut [u8], offending: &[u8]) -> Result<usize> {
        let quote = offending
            .get(..quote_len(offending)?)
            .ok_or(Error::Truncated)?;
        let header = (self.msg_type(), self.code(), self.rest_of_header());
        let message = write_message(buf, header, quote)?;
        Packet::new_unchecked(&mut *message).fill_checksum();
        Ok(message.len())
    }
}

fn quote_len(offending: &[u8]) -> Result<usize> {
    let packet = ipv4::Packet::new_checked(offending)?;
    Ok(packet.header_len() + packet.payload().len().min(QUOTED_PAYLOAD_LEN))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::captures::{LO_ECHO_REPLY, hex};
    use core::net::Ipv4Addr;
    use std::vec::Vec;

    /// Echo request, id 0x1234, seq 1, "linerate", built by an
    /// independent packet library.
    const ECHO_REQUEST: &str = "08002435123400016c696e6572617465";

    /// The first 28 bytes of a 1500-byte UDP packet with DF set, from
    /// 198.18.0.2 to 198.19.0.9, built by an independent packet library;
    /// its payload goes on with 'x' bytes.
    const OFFENDING_HEAD: &str = "450005dc123440003f1197acc6120002c6130009ca6cca6c05c878f9";

    /// That library's answers to that packet: fragmentation needed with
    /// MTU 1400, TTL exceeded, port unreachable.
    const FRAG_NEEDED: &str = "0304e3e800000578";
    const TTL_EXCEEDED: &str = "0b00e16400000000";
    const PORT_UNREACHABLE: &str = "0303e96100000000";

    fn offending() -> Vec<u8> {
        let mut p = hex(OFFENDING_HEAD);
        p.resize(1500, b'x');
        p
    }

    #[test]
    fn parses_the_kernels_echo_reply() {
        let bytes = hex(LO_ECHO_REPLY);
        let ip = ipv4::Packet::new_checked(&bytes[..]).unwrap();
        let p = Packet::new_checked(ip.payload()).unwrap();
        assert_eq!(p.msg_type(), msg_type::ECHO_REPLY);
        assert_eq!(p.code(), 0);
        assert_eq!(p.checksum(), 0x2c35);
        assert_eq!(p.identifier(), 0x1234);
        assert_eq!(p.sequence(), 1);
        assert_eq!(p.rest_of_header(), 0x1234_0001);
        assert_eq!(p.payload(), b"linerate");
        assert!(p.verify_checksum());
        assert!(!p.is_error());
        assert!(!is_icmp_error(&ip));
    }

    #[test]
    fn a_request_turns_into_the_kernels_reply_in_place() {
        let mut bytes = hex(ECHO_REQUEST);
        let mut p = Packet::new_checked(&mut bytes[..]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!(p.msg_type(), msg_type::ECHO_REQUEST);
        p.set_msg_type(msg_type::ECHO_REPLY);
        assert!(!p.verify_checksum());
        p.fill_checksum();
        assert_eq!(bytes, hex(LO_ECHO_REPLY)[20..]);
    }

    #[test]
    fn echo_repr_writes_the_known_messages() {
        let mut buf = [0xaau8; 17];
        let mut repr = EchoRepr {
            reply: false,
            identifier: 0x1234,
            sequence: 1,
            data: b"linerate",
        };
        assert_eq!(repr.message_len(), 16);
        assert_eq!(repr.emit(&mut buf), Ok(16));
        assert_eq!(&buf[..16], &hex(ECHO_REQUEST)[..]);
        assert_eq!(buf[16], 0xaa);
        repr.reply = true;
        assert_eq!(repr.emit(&mut buf), Ok(16));
        assert_eq!(&buf[..16], &hex(LO_ECHO_REPLY)[20..]);
        assert_eq!(repr.emit(&mut buf[..15]), Err(Error::Truncated));
    }

    #[test]
    fn error_repr_writes_the_known_messages() {
        let offending = offending();
        let quote = &offending[..28];
        let mut buf = [0u8; 64];
        for (repr, header) in [
            (ErrorRepr::FragNeeded { next_hop_mtu: 1400 }, FRAG_NEEDED),
            (
                ErrorRepr::TimeExceeded {
                    code: time_exceeded::TTL,
                },
                TTL_EXCEEDED,
            ),
            (
                ErrorRepr::DestUnreachable {
                    code: unreachable::PORT,
                },
                PORT_UNREACHABLE,
            ),
        ] {
            assert_eq!(ErrorRepr::message_len(&offending), Ok(36));
            assert_eq!(repr.emit(&mut buf, &offending), Ok(36));
            assert_eq!(&buf[..8], &hex(header)[..], "{repr:?}");
            assert_eq!(&buf[8..36], quote);
            let p = Packet::new_checked(&buf[..36]).unwrap();
            assert!(p.verify_checksum());
            assert!(p.is_error());
            assert_eq!(p.msg_type(), repr.msg_type());
            assert_eq!(p.code(), repr.code());
        }
        let p = Packet::new_checked(&hex(FRAG_NEEDED)[..])
            .unwrap()
            .next_hop_mtu();
        assert_eq!(p, 1400);
    }

    #[test]
    fn parameter_problem_points_at_the_byte() {
        let offending = offending();
        let mut buf = [0u8; 36];
        let repr = ErrorRepr::ParamProblem { pointer: 9 };
        assert_eq!(repr.emit(&mut buf, &offending), Ok(36));
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(p.msg_type(), msg_type::PARAM_PROBLEM);
        assert_eq!(p.pointer(), 9);
        assert_eq!(p.rest_of_header(), 0x0900_0000);
        assert!(p.verify_checksum());
    }

    #[test]
    fn error_quotes_fewer_bytes_of_a_short_packet_and_options() {
        // A 24-byte packet with a 4-byte option: header (24) and the 0
        // payload bytes there are.
        let mut short = hex(OFFENDING_HEAD);
        short.truncate(24);
        short[0] = 0x46;
        short[2..4].copy_from_slice(&24u16.to_be_bytes());
        let mut ip = ipv4::Packet::new_checked(&mut short[..]).unwrap();
        ip.fill_checksum();
        assert_eq!(ErrorRepr::message_len(&short), Ok(8 + 24));
        let mut buf = [0u8; 64];
        let repr = ErrorRepr::DestUnreachable {
            code: unreachable::HOST,
        };
        assert_eq!(repr.emit(&mut buf, &short), Ok(32));
        assert_eq!(&buf[8..32], &short[..]);
        // Link-layer padding past the total length is not quoted.
        short.extend_from_slice(&[0xee; 10]);
        assert_eq!(repr.emit(&mut buf, &short), Ok(32));
    }

    #[test]
    fn error_repr_refuses_what_it_cannot_quote_or_hold() {
        let offending = offending();
        let repr = ErrorRepr::TimeExceeded {
            code: time_exceeded::REASSEMBLY,
        };
        let mut buf = [0u8; 64];
        assert_eq!(repr.emit(&mut buf[..35], &offending), Err(Error::Truncated));
        assert_eq!(
            repr.emit(&mut buf, &offending[..100]),
            Err(Error::Truncated)
        );
        assert_eq!(repr.emit(&mut buf, &[0x60; 40]), Err(Error::BadVersion(6)));
        assert_eq!(repr.emit(&mut buf, &[]), Err(Error::Truncated));
    }

    #[test]
    fn error_types_are_the_five_of_rfc_1122() {
        let errors: Vec<u8> = (0..=255).filter(|&t| is_error_type(t)).collect();
        assert_eq!(errors, [3, 4, 5, 11, 12]);
    }

    #[test]
    fn icmp_errors_are_never_answered() {
        let repr = ErrorRepr::FragNeeded { next_hop_mtu: 1280 };
        let mut message = [0u8; 36];
        repr.emit(&mut message, &offending()).unwrap();
        let mut packet = [0u8; 56];
        crate::ipv4::Ipv4Repr {
            src_addr: Ipv4Addr::new(198, 18, 0, 1),
            dst_addr: Ipv4Addr::new(198, 18, 0, 2),
            protocol: protocol::ICMP,
            payload_len: 36,
            ttl: 64,
            dscp: 0,
            ecn: 0,
            ident: 0,
            dont_frag: false,
        }
        .emit(&mut packet)
        .unwrap();
        packet[20..].copy_from_slice(&message);
        let mut ip = ipv4::Packet::new_checked(&mut packet[..]).unwrap();
        assert!(is_icmp_error(&ip));
        // An echo is not an error.
        ip.payload_mut()[0] = msg_type::ECHO_REQUEST;
        assert!(!is_icmp_error(&ip));
        // A later fragment hides its type.
        ip.set_frag_offset(1480);
        assert!(is_icmp_error(&ip));
        ip.set_frag_offset(0);
        // UDP is not ICMP, whatever its first byte.
        ip.payload_mut()[0] = msg_type::TIME_EXCEEDED;
        ip.set_protocol(protocol::UDP);
        assert!(!is_icmp_error(&ip));
        // An empty ICMP payload has no type to trust.
        ip.set_protocol(protocol::ICMP);
        ip.set_total_len(20);
        assert!(is_icmp_error(&ip));
    }

    #[test]
    fn no_length_panics() {
        let mut bytes = hex(FRAG_NEEDED);
        bytes.extend_from_slice(&offending()[..28]);
        for len in 0..=bytes.len() {
            if let Ok(p) = Packet::new_checked(&bytes[..len]) {
                assert!(len >= HEADER_LEN);
                assert_eq!(p.payload().len(), len - HEADER_LEN);
                let _ = (p.verify_checksum(), p.next_hop_mtu(), p.pointer());
            }
        }
        let repr = ErrorRepr::FragNeeded { next_hop_mtu: 1400 };
        let mut buf = [0u8; 100];
        let offending = offending();
        for len in 0..=64 {
            let _ = repr.emit(&mut buf, &offending[..len]);
            let _ = repr.emit(&mut buf[..len], &offending);
        }
    }

    #[test]
    fn setters_round_trip() {
        let mut buf = [0u8; 12];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_msg_type(msg_type::DEST_UNREACHABLE);
        p.set_code(unreachable::FRAG_NEEDED);
        p.set_rest_of_header(0xdead_0000);
        p.set_next_hop_mtu(1420);
        p.payload_mut().copy_from_slice(&[1, 2, 3, 4]);
        p.fill_checksum();
        assert!(p.verify_checksum());
        assert_eq!(p.rest_of_header(), 0xdead_058c);
        p.set_identifier(7);
        p.set_sequence(8);
        assert_eq!((p.identifier(), p.sequence()), (7, 8));
        p.set_pointer(20);
        assert_eq!(p.pointer(), 20);
        p.set_checksum(0xbeef);
        assert_eq!(p.checksum(), 0xbeef);
        assert_eq!(p.into_inner()[8..], [1, 2, 3, 4]);
    }
}
