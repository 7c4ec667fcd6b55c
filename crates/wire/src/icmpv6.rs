//! ICMPv6 view (RFC 4443) and the Neighbor Discovery messages a gateway
//! answers and sends: neighbor solicitation and advertisement (RFC 4861).
//!
//! ICMPv6 has no length field: a message is whatever its IPv6 header (and
//! any extension headers) leave, so the buffer of a view must be exactly
//! the message, and the checksum covers the whole buffer together with the
//! IPv6 pseudo-header (RFC 4443 §2.3, RFC 8200 §8.1), whose addresses the
//! caller passes.
//!
//! [`NeighborMessage`] applies the checks of RFC 4861 §7.1.1 and §7.1.2 that
//! the message alone can answer. The others are the caller's: the IPv6 hop
//! limit must be [`ND_HOP_LIMIT`], the checksum must verify, and a
//! solicitation from the unspecified address must go to a solicited-node
//! address and carry no source link-layer address option.

use core::net::Ipv6Addr;

use crate::bytes::{clamped, fixed, fixed_mut, set_u16_be, u16_be};
use crate::checksum;
use crate::error::{Error, Result};
use crate::ethernet::{self, MacAddr};
use crate::icmp_header::{echo_rest, write_message};
use crate::ip_protocol as protocol;
use crate::ipv6;

/// The length of the header every message of RFC 4443 and RFC 4861 has:
/// type, code, checksum and four bytes whose meaning depends on the type.
pub const HEADER_LEN: usize = crate::icmp_header::HEADER_LEN;

/// The smallest MTU every IPv6 link has (RFC 8200 §5).
pub const MIN_MTU: usize = 1280;

/// The most of the offending packet an error message quotes: as much as
/// keeps the error, with its IPv6 header, within [`MIN_MTU`]
/// (RFC 4443 §2.4(c)).
pub const MAX_QUOTE_LEN: usize = MIN_MTU - ipv6::HEADER_LEN - HEADER_LEN;

/// The hop limit of every Neighbor Discovery message, sent and accepted: a
/// message with any other arrived from off the link (RFC 4861 §7.1.1).
pub const ND_HOP_LIMIT: u8 = 255;

/// The length of a neighbor solicitation or advertisement without
/// options: header and target address (RFC 4861 §4.3, §4.4).
pub const NEIGHBOR_LEN: usize = 24;

/// The length of a link-layer address option for Ethernet: type, length
/// and a MAC address, one unit of 8 bytes (RFC 4861 §4.6.1, RFC 2464 §6).
pub const LINK_ADDR_OPTION_LEN: usize = 8;

/// Message types (RFC 4443 §2.1, RFC 4861 §4; IANA "ICMPv6 Parameters").
pub mod msg_type {
    /// Destination unreachable (RFC 4443 §3.1).
    pub const DEST_UNREACHABLE: u8 = 1;
    /// Packet too big (RFC 4443 §3.2).
    pub const PACKET_TOO_BIG: u8 = 2;
    /// Time exceeded (RFC 4443 §3.3).
    pub const TIME_EXCEEDED: u8 = 3;
    /// Parameter problem (RFC 4443 §3.4).
    pub const PARAM_PROBLEM: u8 = 4;
    /// Echo request (RFC 4443 §4.1).
    pub const ECHO_REQUEST: u8 = 128;
    /// Echo reply (RFC 4443 §4.2).
    pub const ECHO_REPLY: u8 = 129;
    /// Router solicitation (RFC 4861 §4.1).
    pub const ROUTER_SOLICIT: u8 = 133;
    /// Router advertisement (RFC 4861 §4.2).
    pub const ROUTER_ADVERT: u8 = 134;
    /// Neighbor solicitation (RFC 4861 §4.3).
    pub const NEIGHBOR_SOLICIT: u8 = 135;
    /// Neighbor advertisement (RFC 4861 §4.4).
    pub const NEIGHBOR_ADVERT: u8 = 136;
    /// Redirect (RFC 4861 §4.5).
    pub const REDIRECT: u8 = 137;
}

/// Codes of [`msg_type::DEST_UNREACHABLE`] (RFC 4443 §3.1).
pub mod unreachable {
    /// No route to destination.
    pub const NO_ROUTE: u8 = 0;
    /// Communication with destination administratively prohibited.
    pub const ADMIN_PROHIBITED: u8 = 1;
    /// Beyond scope of source address.
    pub const BEYOND_SCOPE: u8 = 2;
    /// Address unreachable.
    pub const ADDRESS: u8 = 3;
    /// Port unreachable.
    pub const PORT: u8 = 4;
    /// Source address failed ingress/egress policy.
    pub const SOURCE_POLICY: u8 = 5;
    /// Reject route to destination.
    pub const REJECT_ROUTE: u8 = 6;
}

/// Codes of [`msg_type::TIME_EXCEEDED`] (RFC 4443 §3.3).
pub mod time_exceeded {
    /// Hop limit exceeded in transit.
    pub const HOP_LIMIT: u8 = 0;
    /// Fragment reassembly time exceeded.
    pub const REASSEMBLY: u8 = 1;
}

/// Codes of [`msg_type::PARAM_PROBLEM`] (RFC 4443 §3.4).
pub mod param_problem {
    /// Erroneous header field encountered.
    pub const HEADER_FIELD: u8 = 0;
    /// Unrecognized next header type encountered.
    pub const NEXT_HEADER: u8 = 1;
    /// Unrecognized IPv6 option encountered.
    pub const OPTION: u8 = 2;
}

/// Neighbor Discovery option types (RFC 4861 §4.6).
pub mod nd_option {
    /// Source link-layer address (RFC 4861 §4.6.1).
    pub const SOURCE_LINK_ADDR: u8 = 1;
    /// Target link-layer address (RFC 4861 §4.6.1).
    pub const TARGET_LINK_ADDR: u8 = 2;
    /// Prefix information (RFC 4861 §4.6.2).
    pub const PREFIX_INFO: u8 = 3;
    /// Redirected header (RFC 4861 §4.6.3).
    pub const REDIRECTED_HEADER: u8 = 4;
    /// MTU (RFC 4861 §4.6.4).
    pub const MTU: u8 = 5;
}

mod field {
    pub use crate::icmp_header::field::*;
    pub const TARGET: usize = 8;
    pub const OPTIONS: usize = 24;

    // The flags of a neighbor advertisement, in the first byte after the
    // checksum (RFC 4861 §4.4).
    pub const FLAGS: usize = 4;
    pub const ROUTER: u8 = 0x80;
    pub const SOLICITED: u8 = 0x40;
    pub const OVERRIDE: u8 = 0x20;
}

/// Whether messages of type `ty` are error messages: those with the high
/// bit of the type clear (RFC 4443 §2.1), unknown ones included.
pub const fn is_error_type(ty: u8) -> bool {
    ty < 128
}

/// Whether `packet` must not be answered with an ICMPv6 error because it is
/// one, or a redirect (RFC 4443 §2.4(e.1), (e.2)). The Hop-by-Hop, Routing,
/// Fragment and Destination Options headers are walked to find the ICMPv6
/// header; when it cannot be seen (a fragment other than the first, or a
/// header chain cut short) the answer is yes, so that no error is sent.
/// Other next headers are not ICMPv6.
pub fn is_icmpv6_error<T: AsRef<[u8]>>(packet: &ipv6::Packet<T>) -> bool {
    let mut next = packet.next_header();
    let mut rest = packet.payload();
    loop {
        match next {
            protocol::ICMPV6 => {
                return rest
                    .first()
                    .is_none_or(|&ty| is_error_type(ty) || ty == msg_type::REDIRECT);
            }
            protocol::HOP_BY_HOP | protocol::ROUTING | protocol::DEST_OPTS => {
                // Next header, then the length in 8-byte units beyond the
                // first (RFC 8200 §4.3, §4.4, §4.6).
                let Some(&[nh, units]) = rest.first_chunk::<2>() else {
                    return true;
                };
                let Some(after) = rest.get((usize::from(units) + 1) * 8..) else {
                    return true;
                };
                next = nh;
                rest = after;
            }
            protocol::FRAGMENT => {
                // Next header, reserved, offset and flags, identification
                // (RFC 8200 §4.5).
                let Some((header, after)) = rest.split_first_chunk::<8>() else {
                    return true;
                };
                if u16::from_be_bytes([header[2], header[3]]) & 0xfff8 != 0 {
                    return true;
                }
                next = header[0];
                rest = after;
            }
            _ => return false,
        }
    }
}

/// The solicited-node multicast address of `addr`: ff02::1:ff00:0/104 with
/// the low 24 bits of `addr` (RFC 4291 §2.7.1), where neighbor
/// solicitations for `addr` are sent.
pub const fn solicited_node(addr: &Ipv6Addr) -> Ipv6Addr {
    let o = addr.octets();
    Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | o[13] as u16,
        u16::from_be_bytes([o[14], o[15]]),
    )
}

/// The Ethernet address of the solicited-node multicast address of `addr`:
/// 33:33:ff followed by its low 24 bits (RFC 2464 §7).
pub const fn solicited_node_mac(addr: &Ipv6Addr) -> MacAddr {
    MacAddr::ipv6_multicast(&solicited_node(addr))
}

fn pseudo_header(src: &Ipv6Addr, dst: &Ipv6Addr, len: usize) -> u16 {
    // A message longer than 4 GiB cannot be in a buffer that reaches here;
    // saturating keeps this total.
    let len = u32::try_from(len).unwrap_or(u32::MAX);
    checksum::pseudo_header_v6(src, dst, protocol::ICMPV6, len)
}

fn verify(data: &[u8], src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
    checksum::combine(pseudo_header(src, dst, data.len()), checksum::sum(data)) == 0xffff
}

fn fill(data: &mut [u8], src: &Ipv6Addr, dst: &Ipv6Addr) {
    set_u16_be(data, field::CHECKSUM, 0);
    let sum = !checksum::combine(pseudo_header(src, dst, data.len()), checksum::sum(data));
    set_u16_be(data, field::CHECKSUM, sum);
}

checked_view! {
    /// A view of an ICMPv6 message: header and body.
    pub struct Packet, at least HEADER_LEN;
}

icmp_header_accessors!();

impl<T: AsRef<[u8]>> Packet<T> {
    /// MTU of a packet too big message (RFC 4443 §3.2).
    pub fn mtu(&self) -> u32 {
        self.rest_of_header()
    }

    /// Pointer of a parameter problem message: the offset of the offending
    /// byte in the quoted packet (RFC 4443 §3.4).
    pub fn pointer(&self) -> u32 {
        self.rest_of_header()
    }

    /// Whether the checksum is correct for a message from `src` to `dst`.
    pub fn verify_checksum(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        verify(self.data(), src, dst)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Computes the checksum for a message from `src` to `dst` and stores
    /// it; call after the last change. An echo request becomes its reply in
    /// place with `set_msg_type(ECHO_REPLY)` and this, with the addresses
    /// swapped.
    pub fn fill_checksum(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        fill(self.data_mut(), src, dst);
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

    /// Writes the whole message from `src` to `dst`, checksum included,
    /// into the start of `buf` and returns its length, or
    /// [`Error::Truncated`] if `buf` is shorter.
    pub fn emit(&self, buf: &mut [u8], src: &Ipv6Addr, dst: &Ipv6Addr) -> Result<usize> {
        let ty = if self.reply {
            msg_type::ECHO_REPLY
        } else {
            msg_type::ECHO_REQUEST
        };
        let rest = echo_rest(self.identifier, self.sequence);
        let message = write_message(buf, (ty, 0, rest), self.data)?;
        Packet::new_unchecked(&mut *message).fill_checksum(src, dst);
        Ok(message.len())
    }
}

/// An error message about an offending packet, for building one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorRepr {
    /// Destination unreachable (see [`unreachable`](mod@unreachable)).
    DestUnreachable {
        /// The code.
        code: u8,
    },
    /// Packet too big, with the MTU of the next hop.
    PacketTooBig {
        /// The largest packet the next hop takes.
        mtu: u32,
    },
    /// Time exceeded (see [`time_exceeded`]).
    TimeExceeded {
        /// The code.
        code: u8,
    },
    /// Parameter problem (see [`param_problem`]), pointing at the offending
    /// byte.
    ParamProblem {
        /// The code.
        code: u8,
        /// Offset of the offending byte in the offending packet.
        pointer: u32,
    },
}

impl ErrorRepr {
    /// The message type.
    pub const fn msg_type(&self) -> u8 {
        match self {
            ErrorRepr::DestUnreachable { .. } => msg_type::DEST_UNREACHABLE,
            ErrorRepr::PacketTooBig { .. } => msg_type::PACKET_TOO_BIG,
            ErrorRepr::TimeExceeded { .. } => msg_type::TIME_EXCEEDED,
            ErrorRepr::ParamProblem { .. } => msg_type::PARAM_PROBLEM,
        }
    }

    /// The code.
    pub const fn code(&self) -> u8 {
        match *self {
            ErrorRepr::DestUnreachable { code }
            | ErrorRepr::TimeExceeded { code }
            | ErrorRepr::ParamProblem { code, .. } => code,
            ErrorRepr::PacketTooBig { .. } => 0,
        }
    }

    const fn rest_of_header(&self) -> u32 {
        match *self {
            ErrorRepr::DestUnreachable { .. } | ErrorRepr::TimeExceeded { .. } => 0,
            ErrorRepr::PacketTooBig { mtu } => mtu,
            ErrorRepr::ParamProblem { pointer, .. } => pointer,
        }
    }

    /// The length of the message about `offending`: the header and as much
    /// of the packet as its IPv6 header claims, at most [`MAX_QUOTE_LEN`].
    /// Fails as [`ipv6::Packet::new_checked`] does if `offending` is not an
    /// IPv6 packet.
    pub fn message_len(offending: &[u8]) -> Result<usize> {
        Ok(HEADER_LEN + quote_len(offending)?)
    }

    /// Writes the message about `offending`, an IPv6 packet, sent from `src`
    /// to `dst`, into the start of `buf`: the header, then as much of the
    /// packet as keeps the error within the minimum MTU (RFC 4443 §2.4(c)),
    /// with the checksum filled; returns its length. Bytes past the length
    /// the packet's header claims are not quoted. Fails as
    /// [`ipv6::Packet::new_checked`] does if `offending` is not an IPv6
    /// packet, and with [`Error::Truncated`] if `buf` is shorter than
    /// [`message_len`](Self::message_len).
    ///
    /// Whether an error may be sent at all is the caller's to decide first
    /// (see [`is_icmpv6_error`] and the rest of RFC 4443 §2.4(e)).
    pub fn emit(
        &self,
        buf: &mut [u8],
        src: &Ipv6Addr,
        dst: &Ipv6Addr,
        offending: &[u8],
    ) -> Result<usize> {
        let quote = offending
            .get(..quote_len(offending)?)
            .ok_or(Error::Truncated)?;
        let header = (self.msg_type(), self.code(), self.rest_of_header());
        let message = write_message(buf, header, quote)?;
        Packet::new_unchecked(&mut *message).fill_checksum(src, dst);
        Ok(message.len())
    }
}

fn quote_len(offending: &[u8]) -> Result<usize> {
    let packet = ipv6::Packet::new_checked(offending)?;
    Ok(packet.total_len().min(MAX_QUOTE_LEN))
}

/// One Neighbor Discovery option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NdOption<'a> {
    /// Option type (see [`nd_option`]).
    pub kind: u8,
    /// The bytes after the type and length fields.
    pub data: &'a [u8],
}

impl NdOption<'_> {
    /// The MAC address of a link-layer address option for Ethernet (one
    /// 8-byte unit, RFC 2464 §6); `None` for an option of another size.
    pub fn link_addr(&self) -> Option<MacAddr> {
        match self.data {
            &[a, b, c, d, e, f] => Some(MacAddr([a, b, c, d, e, f])),
            _ => None,
        }
    }
}

/// The options of a Neighbor Discovery message, in order. Iteration stops
/// at the first malformed option; [`NeighborMessage::new_checked`] has
/// refused messages that have one.
#[derive(Debug, Clone)]
pub struct NdOptions<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for NdOptions<'a> {
    type Item = Result<NdOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        let &[kind, units, ..] = self.rest else {
            return (!self.rest.is_empty()).then(|| {
                self.rest = &[];
                Err(Error::Truncated)
            });
        };
        // The length counts 8-byte units, type and length included; zero
        // is invalid (RFC 4861 §4.6).
        let len = usize::from(units) * 8;
        let item = if len == 0 {
            Err(Error::BadOptionLen)
        } else if let Some((option, rest)) = self.rest.split_at_checked(len) {
            self.rest = rest;
            return Some(Ok(NdOption {
                kind,
                data: &option[2..],
            }));
        } else {
            Err(Error::Truncated)
        };
        self.rest = &[];
        Some(item)
    }
}

checked_view! {
    /// A view of a neighbor solicitation (RFC 4861 §4.3) or neighbor
    /// advertisement (RFC 4861 §4.4): header, flags, target address and
    /// options.
    pub struct NeighborMessage, at least NEIGHBOR_LEN;
}

impl<T: AsRef<[u8]>> NeighborMessage<T> {
    /// The checks of RFC 4861 §7.1.1 and §7.1.2 that the message alone answers: it is
    /// at least [`NEIGHBOR_LEN`] bytes ([`Error::Truncated`]), a solicitation or an
    /// advertisement ([`Error::WrongMessageType`]), of code 0 ([`Error::BadCode`]), its
    /// target is not multicast ([`Error::MulticastTarget`]), and every option has a
    /// length greater than zero ([`Error::BadOptionLen`]) and ends within the message
    /// ([`Error::Truncated`]). Unknown options are allowed.
    pub fn check_len(&self) -> Result<()> {
        let data = self.data();
        let ty = *data.first().ok_or(Error::Truncated)?;
        if ty != msg_type::NEIGHBOR_SOLICIT && ty != msg_type::NEIGHBOR_ADVERT {
            return Err(Error::WrongMessageType(ty));
        }
        if data.len() < NEIGHBOR_LEN {
            return Err(Error::Truncated);
        }
        if self.code() != 0 {
            return Err(Error::BadCode(self.code()));
        }
        if self.target_addr().is_multicast() {
            return Err(Error::MulticastTarget);
        }
        for option in self.options() {
            option?;
        }
        Ok(())
    }

    /// Message type: [`msg_type::NEIGHBOR_SOLICIT`] or
    /// [`msg_type::NEIGHBOR_ADVERT`].
    pub fn msg_type(&self) -> u8 {
        self.data()[field::TYPE]
    }

    /// Whether this is a neighbor solicitation.
    pub fn is_solicit(&self) -> bool {
        self.msg_type() == msg_type::NEIGHBOR_SOLICIT
    }

    /// Whether this is a neighbor advertisement.
    pub fn is_advert(&self) -> bool {
        self.msg_type() == msg_type::NEIGHBOR_ADVERT
    }

    /// Code; always 0 in a checked view.
    pub fn code(&self) -> u8 {
        self.data()[field::CODE]
    }

    /// The checksum field.
    pub fn checksum(&self) -> u16 {
        u16_be(self.data(), field::CHECKSUM)
    }

    /// The router flag of an advertisement: the sender is a router.
    pub fn router_flag(&self) -> bool {
        self.data()[field::FLAGS] & field::ROUTER != 0
    }

    /// The solicited flag of an advertisement: it answers a solicitation.
    pub fn solicited_flag(&self) -> bool {
        self.data()[field::FLAGS] & field::SOLICITED != 0
    }

    /// The override flag of an advertisement: it should replace a cached
    /// link-layer address.
    pub fn override_flag(&self) -> bool {
        self.data()[field::FLAGS] & field::OVERRIDE != 0
    }

    /// The target address: the one asked about, or the one advertised.
    pub fn target_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(*fixed::<16>(self.data(), field::TARGET))
    }

    /// The options, in order.
    pub fn options(&self) -> NdOptions<'_> {
        NdOptions {
            rest: clamped(self.data(), field::OPTIONS, usize::MAX),
        }
    }

    fn link_addr_option(&self, kind: u8) -> Option<MacAddr> {
        self.options()
            .map_while(core::result::Result::ok)
            .filter(|option| option.kind == kind)
            .find_map(|option| option.link_addr())
    }

    /// The MAC address of the first Ethernet-sized source link-layer
    /// address option, which a solicitation may carry.
    pub fn source_link_addr(&self) -> Option<MacAddr> {
        self.link_addr_option(nd_option::SOURCE_LINK_ADDR)
    }

    /// The MAC address of the first Ethernet-sized target link-layer
    /// address option, which an advertisement may carry.
    pub fn target_link_addr(&self) -> Option<MacAddr> {
        self.link_addr_option(nd_option::TARGET_LINK_ADDR)
    }

    /// Whether the checksum is correct for a message from `src` to `dst`.
    pub fn verify_checksum(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        verify(self.data(), src, dst)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> NeighborMessage<T> {
    fn set_flag(&mut self, flag: u8, on: bool) {
        let b = &mut self.data_mut()[field::FLAGS];
        *b = if on { *b | flag } else { *b & !flag };
    }

    /// Sets the router flag.
    pub fn set_router_flag(&mut self, on: bool) {
        self.set_flag(field::ROUTER, on);
    }

    /// Sets the solicited flag.
    pub fn set_solicited_flag(&mut self, on: bool) {
        self.set_flag(field::SOLICITED, on);
    }

    /// Sets the override flag.
    pub fn set_override_flag(&mut self, on: bool) {
        self.set_flag(field::OVERRIDE, on);
    }

    /// Sets the target address.
    pub fn set_target_addr(&mut self, addr: &Ipv6Addr) {
        *fixed_mut(self.data_mut(), field::TARGET) = addr.octets();
    }

    /// Computes the checksum for a message from `src` to `dst` and stores
    /// it; call after the last change.
    pub fn fill_checksum(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        fill(self.data_mut(), src, dst);
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for NeighborMessage<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// Writes the fixed part of a neighbor message and an optional link-layer
/// address option, then the checksum.
fn emit_neighbor(
    buf: &mut [u8],
    src: &Ipv6Addr,
    dst: &Ipv6Addr,
    header: [u8; 2],
    target: &Ipv6Addr,
    option: Option<(u8, MacAddr)>,
) -> Result<usize> {
    if target.is_multicast() {
        return Err(Error::MulticastTarget);
    }
    let len = NEIGHBOR_LEN + option.map_or(0, |_| LINK_ADDR_OPTION_LEN);
    let bytes = buf.get_mut(..len).ok_or(Error::Truncated)?;
    bytes[..field::TARGET].fill(0);
    bytes[field::TYPE] = header[0];
    bytes[field::FLAGS] = header[1];
    *fixed_mut(bytes, field::TARGET) = target.octets();
    if let Some((kind, mac)) = option {
        let at = field::OPTIONS;
        bytes[at] = kind;
        bytes[at + 1] = (LINK_ADDR_OPTION_LEN / 8) as u8;
        *fixed_mut::<{ ethernet::ADDR_LEN }>(bytes, at + 2) = mac.0;
    }
    fill(bytes, src, dst);
    Ok(len)
}

/// A neighbor solicitation, for building one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NeighborSolicitRepr {
    /// The address whose link-layer address is asked for.
    pub target: Ipv6Addr,
    /// The sender's MAC address, as a source link-layer address option;
    /// must be `None` when the source is the unspecified address
    /// (RFC 4861 §4.3).
    pub source_link_addr: Option<MacAddr>,
}

impl NeighborSolicitRepr {
    /// The length of the message.
    pub const fn message_len(&self) -> usize {
        match self.source_link_addr {
            Some(_) => NEIGHBOR_LEN + LINK_ADDR_OPTION_LEN,
            None => NEIGHBOR_LEN,
        }
    }

    /// Writes the message from `src` to `dst` (for address resolution, the
    /// [`solicited_node`] address of the target), checksum included, into
    /// the start of `buf` and returns its length. Fails with
    /// [`Error::Truncated`] if `buf` is shorter than
    /// [`message_len`](Self::message_len) and with
    /// [`Error::MulticastTarget`] if the target is multicast. The IPv6 hop
    /// limit must be [`ND_HOP_LIMIT`].
    pub fn emit(&self, buf: &mut [u8], src: &Ipv6Addr, dst: &Ipv6Addr) -> Result<usize> {
        let option = self
            .source_link_addr
            .map(|mac| (nd_option::SOURCE_LINK_ADDR, mac));
        emit_neighbor(
            buf,
            src,
            dst,
            [msg_type::NEIGHBOR_SOLICIT, 0],
            &self.target,
            option,
        )
    }
}

/// A neighbor advertisement, for building one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NeighborAdvertRepr {
    /// The address advertised.
    pub target: Ipv6Addr,
    /// The sender is a router.
    pub router: bool,
    /// This answers a solicitation; must be false when sent to a multicast
    /// address (RFC 4861 §7.2.4, §7.2.6).
    pub solicited: bool,
    /// The receiver should replace a link-layer address it has cached.
    pub override_flag: bool,
    /// The MAC address of the target, as a target link-layer address
    /// option.
    pub target_link_addr: Option<MacAddr>,
}

impl NeighborAdvertRepr {
    /// The length of the message.
    pub const fn message_len(&self) -> usize {
        match self.target_link_addr {
            Some(_) => NEIGHBOR_LEN + LINK_ADDR_OPTION_LEN,
            None => NEIGHBOR_LEN,
        }
    }

    /// The advertisement answering `solicit` for `our_mac` (RFC 4861
    /// §7.2.4): same target, override set, the target link-layer address
    /// included; solicited unless the solicitation came from the
    /// unspecified address `src`, in which case the answer goes to all
    /// nodes. A node answering for an address it proxies or an anycast
    /// address clears the override flag (RFC 4861 §7.2.4).
    pub fn answer<T: AsRef<[u8]>>(
        solicit: &NeighborMessage<T>,
        src: &Ipv6Addr,
        our_mac: MacAddr,
        router: bool,
    ) -> Self {
        NeighborAdvertRepr {
            target: solicit.target_addr(),
            router,
            solicited: !src.is_unspecified(),
            override_flag: true,
            target_link_addr: Some(our_mac),
        }
    }

    /// Writes the message from `src` to `dst`, checksum included, into the
    /// start of `buf` and returns its length. Fails with
    /// [`Error::Truncated`] if `buf` is shorter than
    /// [`message_len`](Self::message_len) and with
    /// [`Error::MulticastTarget`] if the target is multicast. The IPv6 hop
    /// limit must be [`ND_HOP_LIMIT`].
    pub fn emit(&self, buf: &mut [u8], src: &Ipv6Addr, dst: &Ipv6Addr) -> Result<usize> {
        let mut flags = 0;
        if self.router {
            flags |= field::ROUTER;
        }
        if self.solicited {
            flags |= field::SOLICITED;
        }
        if self.override_flag {
            flags |= field::OVERRIDE;
        }
        let option = self
            .target_link_addr
            .map(|mac| (nd_option::TARGET_LINK_ADDR, mac));
        emit_neighbor(
            buf,
            src,
            dst,
            [msg_type::NEIGHBOR_ADVERT, flags],
            &self.target,
            option,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::captures::{TUN_ROUTER_SOLICIT, hex};
    use std::vec::Vec;

    fn addr(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    const MAC1: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x01]);
    const MAC2: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x02]);

    // Messages built by an independent packet library. Echoes: id 0x1234,
    // seq 1, "linerate", the request from 2001:2::1 to 2001:2::2, the reply
    // back.
    const ECHO_REQUEST: &str = "80006be1123400016c696e6572617465";
    const ECHO_REPLY: &str = "81006ae1123400016c696e6572617465";

    /// The first 48 bytes of a 1500-byte UDP packet from 2001:2::2 to
    /// 2001:2:1::9; its payload goes on with 'x' bytes.
    const OFFENDING_HEAD: &str = "6001234505b4113f20010002000000000000000000000002\
                                  20010002000100000000000000000009ca6cca6c05b479f5";

    /// The headers of that library's packet too big (MTU 1420) and hop
    /// limit exceeded about it, from 2001:2::1 to 2001:2::2, 1240 bytes
    /// each.
    const PACKET_TOO_BIG: &str = "02002df30000058c";
    const HOP_LIMIT_EXCEEDED: &str = "0300327f00000000";

    /// A 50-byte UDP packet and that library's port unreachable about it,
    /// whole.
    const SMALL: &str = "60000000000a11402001000200000000000000000000000220010002\
                         00010000000000000000000900010002000a575c6869";
    const PORT_UNREACHABLE: &str = "01044d4f00000000";

    /// Neighbor solicitation for 2001:2::1 from 2001:2::2 (source
    /// link-layer address 02:00:00:00:00:02) to ff02::1:ff00:1.
    const SOLICIT: &str = "87003793000000002001000200000000000000000000000101010200\
                           00000002";
    /// Its answer from 2001:2::1 to 2001:2::2: solicited and override set,
    /// target link-layer address 02:00:00:00:00:01.
    const ADVERT: &str = "8800b395600000002001000200000000000000000000000102010200\
                          00000001";
    /// Duplicate address detection for 2001:2::1: from ::, no option.
    const DAD_SOLICIT: &str = "87005aa30000000020010002000000000000000000000001";
    /// Unsolicited advertisement of a router, from fe80::1 to ff02::1.
    const ROUTER_ADVERT: &str = "8800b618a000000020010002000000000000000000000001\
                                 0201020000000001";
    /// A solicitation with an unknown option (a nonce, type 14) before the
    /// source link-layer address, from 2001:2::2 to ff02::1:ff00:1.
    const NONCE_SOLICIT: &str = "8700207e0000000020010002000000000000000000000001\
                                 0e010102030405060101020000000002";

    fn offending() -> Vec<u8> {
        let mut p = hex(OFFENDING_HEAD);
        p.resize(1500, b'x');
        p
    }

    #[test]
    fn verifies_the_kernels_router_solicitation() {
        let bytes = hex(TUN_ROUTER_SOLICIT);
        let ip = ipv6::Packet::new_checked(&bytes[..]).unwrap();
        let p = Packet::new_checked(ip.payload()).unwrap();
        assert_eq!(p.msg_type(), msg_type::ROUTER_SOLICIT);
        assert_eq!(p.code(), 0);
        assert_eq!(p.checksum(), 0x12ac);
        assert!(p.verify_checksum(&ip.src_addr(), &ip.dst_addr()));
        assert!(!p.verify_checksum(&addr("fe80::1"), &ip.dst_addr()));
        assert!(!p.is_error());
        assert!(!is_icmpv6_error(&ip));
        let mut copy = ip.payload().to_vec();
        let mut q = Packet::new_checked(&mut copy[..]).unwrap();
        q.set_checksum(0);
        q.fill_checksum(&ip.src_addr(), &ip.dst_addr());
        assert_eq!(copy, ip.payload());
    }

    #[test]
    fn echo_request_and_reply() {
        let (a, b) = (addr("2001:2::1"), addr("2001:2::2"));
        let bytes = hex(ECHO_REQUEST);
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.msg_type(), msg_type::ECHO_REQUEST);
        assert_eq!((p.identifier(), p.sequence()), (0x1234, 1));
        assert_eq!(p.payload(), b"linerate");
        assert!(p.verify_checksum(&a, &b));

        // The reply, in place.
        let mut copy = bytes.clone();
        let mut q = Packet::new_checked(&mut copy[..]).unwrap();
        q.set_msg_type(msg_type::ECHO_REPLY);
        q.fill_checksum(&b, &a);
        assert_eq!(copy, hex(ECHO_REPLY));

        let mut buf = [0xaau8; 17];
        let mut repr = EchoRepr {
            reply: false,
            identifier: 0x1234,
            sequence: 1,
            data: b"linerate",
        };
        assert_eq!(repr.message_len(), 16);
        assert_eq!(repr.emit(&mut buf, &a, &b), Ok(16));
        assert_eq!(&buf[..16], &bytes[..]);
        assert_eq!(buf[16], 0xaa);
        repr.reply = true;
        assert_eq!(repr.emit(&mut buf, &b, &a), Ok(16));
        assert_eq!(&buf[..16], &hex(ECHO_REPLY)[..]);
        assert_eq!(repr.emit(&mut buf[..15], &b, &a), Err(Error::Truncated));
    }

    #[test]
    fn errors_quote_up_to_the_minimum_mtu() {
        let (a, b) = (addr("2001:2::1"), addr("2001:2::2"));
        let offending = offending();
        let mut buf = std::vec![0u8; 1500];
        for (repr, header) in [
            (ErrorRepr::PacketTooBig { mtu: 1420 }, PACKET_TOO_BIG),
            (
                ErrorRepr::TimeExceeded {
                    code: time_exceeded::HOP_LIMIT,
                },
                HOP_LIMIT_EXCEEDED,
            ),
        ] {
            assert_eq!(ErrorRepr::message_len(&offending), Ok(1240));
            assert_eq!(repr.emit(&mut buf, &a, &b, &offending), Ok(1240));
            assert_eq!(&buf[..8], &hex(header)[..], "{repr:?}");
            assert_eq!(&buf[8..1240], &offending[..MAX_QUOTE_LEN]);
            assert_eq!(ipv6::HEADER_LEN + 1240, MIN_MTU);
            let p = Packet::new_checked(&buf[..1240]).unwrap();
            assert!(p.verify_checksum(&a, &b));
            assert!(p.is_error());
            assert_eq!(p.msg_type(), repr.msg_type());
        }
        let p = Packet::new_checked(&hex(PACKET_TOO_BIG)[..]).unwrap().mtu();
        assert_eq!(p, 1420);
        assert_eq!(
            ErrorRepr::PacketTooBig { mtu: 1420 }.emit(&mut buf[..1239], &a, &b, &offending),
            Err(Error::Truncated)
        );
    }

    #[test]
    fn a_short_packet_is_quoted_whole_without_padding() {
        let (a, b) = (addr("2001:2::1"), addr("2001:2::2"));
        let mut small = hex(SMALL);
        small.extend_from_slice(&[0xee; 6]);
        let repr = ErrorRepr::DestUnreachable {
            code: unreachable::PORT,
        };
        let mut buf = [0u8; 100];
        assert_eq!(repr.emit(&mut buf, &a, &b, &small), Ok(58));
        let mut expected = hex(PORT_UNREACHABLE);
        expected.extend_from_slice(&hex(SMALL));
        assert_eq!(&buf[..58], &expected[..]);
        assert_eq!(
            repr.emit(&mut buf, &a, &b, &small[..49]),
            Err(Error::Truncated)
        );
        let mut v4 = hex(crate::captures::TUN_UDP_V4);
        v4.resize(40, 0);
        assert_eq!(repr.emit(&mut buf, &a, &b, &v4), Err(Error::BadVersion(4)));
    }

    #[test]
    fn parameter_problem_points_at_the_byte() {
        let (a, b) = (addr("2001:2::1"), addr("2001:2::2"));
        let repr = ErrorRepr::ParamProblem {
            code: param_problem::NEXT_HEADER,
            pointer: 6,
        };
        let mut buf = [0u8; 64];
        assert_eq!(repr.emit(&mut buf, &a, &b, &hex(SMALL)), Ok(58));
        let p = Packet::new_checked(&buf[..58]).unwrap();
        assert_eq!(p.msg_type(), msg_type::PARAM_PROBLEM);
        assert_eq!(p.code(), param_problem::NEXT_HEADER);
        assert_eq!(p.pointer(), 6);
        assert!(p.verify_checksum(&a, &b));
    }

    #[test]
    fn errors_and_redirects_are_never_answered() {
        let (a, b) = (addr("2001:2::1"), addr("2001:2::2"));
        let mut message = [0u8; 58];
        let repr = ErrorRepr::TimeExceeded { code: 0 };
        repr.emit(&mut message, &a, &b, &hex(SMALL)).unwrap();
        let build = |chain: &[u8], message: &[u8]| {
            let mut p = std::vec![0u8; 40];
            crate::ipv6::Ipv6Repr {
                src_addr: a,
                dst_addr: b,
                next_header: chain.first().copied().unwrap_or(protocol::ICMPV6),
                payload_len: (chain.len().saturating_sub(1) + message.len()) as u16,
                hop_limit: 64,
                traffic_class: 0,
                flow_label: 0,
            }
            .emit(&mut p)
            .unwrap();
            p.extend_from_slice(chain.get(1..).unwrap_or(&[]));
            p.extend_from_slice(message);
            p
        };
        let is_error = |p: &[u8]| is_icmpv6_error(&ipv6::Packet::new_checked(p).unwrap());

        assert!(is_error(&build(&[], &message)));
        assert!(!is_error(&build(&[], &hex(ECHO_REQUEST))));
        assert!(is_error(&build(&[], &[msg_type::REDIRECT, 0, 0, 0])));
        assert!(is_error(&build(&[], &[])));
        // Hop-by-hop (8 bytes) and destination options (16 bytes) first.
        let mut chain = std::vec![
            protocol::HOP_BY_HOP,
            protocol::DEST_OPTS,
            0,
            1,
            4,
            0,
            0,
            0,
            0
        ];
        chain.extend_from_slice(&[protocol::ICMPV6, 1, 1, 4, 0, 0, 0, 0]);
        chain.extend_from_slice(&[0; 8]);
        assert!(is_error(&build(&chain, &message)));
        assert!(!is_error(&build(&chain, &hex(ECHO_REQUEST))));
        // A first fragment shows its type; a later one does not.
        let first = [protocol::FRAGMENT, protocol::ICMPV6, 0, 0, 1, 0, 0, 0, 7];
        assert!(!is_error(&build(&first, &hex(ECHO_REQUEST))));
        let later = [
            protocol::FRAGMENT,
            protocol::ICMPV6,
            0,
            0x05,
            0xa9,
            0,
            0,
            0,
            7,
        ];
        assert!(is_error(&build(&later, &hex(ECHO_REQUEST))));
        // A chain cut short.
        assert!(is_error(&build(
            &[protocol::ROUTING, protocol::ICMPV6, 2],
            &[]
        )));
        // UDP is not ICMPv6.
        assert!(!is_error(&hex(SMALL)));
    }

    #[test]
    fn error_types_have_the_high_bit_clear() {
        assert!((0..128).all(is_error_type));
        assert!(!(128..=255).any(is_error_type));
    }

    #[test]
    fn solicited_node_addresses_and_macs() {
        assert_eq!(solicited_node(&addr("2001:2::1")), addr("ff02::1:ff00:1"));
        assert_eq!(
            solicited_node(&addr("fe80::b51b:26b4:c773:c747")),
            addr("ff02::1:ff73:c747")
        );
        assert_eq!(
            solicited_node_mac(&addr("fe80::b51b:26b4:c773:c747")),
            MacAddr([0x33, 0x33, 0xff, 0x73, 0xc7, 0x47])
        );
        assert_eq!(
            solicited_node_mac(&addr("2001:2::1")),
            "33:33:ff:00:00:01".parse().unwrap()
        );
    }

    #[test]
    fn parses_a_solicitation() {
        let bytes = hex(SOLICIT);
        let m = NeighborMessage::new_checked(&bytes[..]).unwrap();
        assert!(m.is_solicit());
        assert!(!m.is_advert());
        assert_eq!(m.code(), 0);
        assert_eq!(m.checksum(), 0x3793);
        assert_eq!(m.target_addr(), addr("2001:2::1"));
        assert_eq!(m.source_link_addr(), Some(MAC2));
        assert_eq!(m.target_link_addr(), None);
        assert!(m.verify_checksum(&addr("2001:2::2"), &addr("ff02::1:ff00:1")));
        assert_eq!(
            m.options().collect::<Vec<_>>(),
            [Ok(NdOption {
                kind: nd_option::SOURCE_LINK_ADDR,
                data: &MAC2.0
            })]
        );
    }

    #[test]
    fn parses_advertisements() {
        let bytes = hex(ADVERT);
        let m = NeighborMessage::new_checked(&bytes[..]).unwrap();
        assert!(m.is_advert());
        assert!(!m.router_flag());
        assert!(m.solicited_flag());
        assert!(m.override_flag());
        assert_eq!(m.target_addr(), addr("2001:2::1"));
        assert_eq!(m.target_link_addr(), Some(MAC1));
        assert_eq!(m.source_link_addr(), None);
        assert!(m.verify_checksum(&addr("2001:2::1"), &addr("2001:2::2")));

        let bytes = hex(ROUTER_ADVERT);
        let m = NeighborMessage::new_checked(&bytes[..]).unwrap();
        assert!(m.router_flag());
        assert!(!m.solicited_flag());
        assert!(m.override_flag());
        assert!(m.verify_checksum(&addr("fe80::1"), &addr("ff02::1")));
    }

    #[test]
    fn unknown_options_are_skipped() {
        let bytes = hex(NONCE_SOLICIT);
        let m = NeighborMessage::new_checked(&bytes[..]).unwrap();
        assert_eq!(m.source_link_addr(), Some(MAC2));
        let kinds: Vec<u8> = m.options().map(|o| o.unwrap().kind).collect();
        assert_eq!(kinds, [14, nd_option::SOURCE_LINK_ADDR]);
        assert!(m.verify_checksum(&addr("2001:2::2"), &addr("ff02::1:ff00:1")));
        // A link-layer option of another link's size is not a MAC address.
        let mut bytes = hex(SOLICIT);
        bytes[25] = 2;
        bytes.extend_from_slice(&[0; 8]);
        let m = NeighborMessage::new_checked(&bytes[..]).unwrap();
        assert_eq!(m.source_link_addr(), None);
    }

    #[test]
    fn neighbor_messages_reject_what_rfc_4861_does() {
        let good = hex(SOLICIT);
        let check = |edit: &dyn Fn(&mut Vec<u8>)| {
            let mut b = good.clone();
            edit(&mut b);
            NeighborMessage::new_checked(&b[..]).map(|_| ())
        };
        assert_eq!(check(&|_| ()), Ok(()));
        assert_eq!(check(&|b| b.truncate(24)), Ok(()));
        assert_eq!(check(&|b| b.truncate(23)), Err(Error::Truncated));
        assert_eq!(check(&|b| b.truncate(0)), Err(Error::Truncated));
        assert_eq!(check(&|b| b[1] = 1), Err(Error::BadCode(1)));
        assert_eq!(
            check(&|b| b[0] = msg_type::ECHO_REQUEST),
            Err(Error::WrongMessageType(msg_type::ECHO_REQUEST))
        );
        assert_eq!(check(&|b| b[0] = msg_type::NEIGHBOR_ADVERT), Ok(()));
        assert_eq!(check(&|b| b[8] = 0xff), Err(Error::MulticastTarget));
        assert_eq!(check(&|b| b[25] = 0), Err(Error::BadOptionLen));
        assert_eq!(check(&|b| b[25] = 2), Err(Error::Truncated));
        assert_eq!(check(&|b| b.truncate(31)), Err(Error::Truncated));
        assert_eq!(check(&|b| b.truncate(25)), Err(Error::Truncated));
        // A zero-length option after a good one.
        assert_eq!(
            check(&|b| b.extend_from_slice(&[1, 0])),
            Err(Error::BadOptionLen)
        );
    }

    #[test]
    fn builders_write_the_known_messages() {
        let (a, b) = (addr("2001:2::1"), addr("2001:2::2"));
        let target = addr("2001:2::1");
        let mut buf = [0xaau8; 40];

        let ns = NeighborSolicitRepr {
            target,
            source_link_addr: Some(MAC2),
        };
        assert_eq!(ns.message_len(), 32);
        assert_eq!(ns.emit(&mut buf, &b, &solicited_node(&target)), Ok(32));
        assert_eq!(&buf[..32], &hex(SOLICIT)[..]);
        assert_eq!(buf[32], 0xaa);

        let dad = NeighborSolicitRepr {
            target,
            source_link_addr: None,
        };
        assert_eq!(
            dad.emit(&mut buf, &Ipv6Addr::UNSPECIFIED, &solicited_node(&target)),
            Ok(24)
        );
        assert_eq!(&buf[..24], &hex(DAD_SOLICIT)[..]);

        let solicit = hex(SOLICIT);
        let solicit = NeighborMessage::new_checked(&solicit[..]).unwrap();
        let na = NeighborAdvertRepr::answer(&solicit, &b, MAC1, false);
        assert_eq!(na.message_len(), 32);
        assert_eq!(na.emit(&mut buf, &a, &b), Ok(32));
        assert_eq!(&buf[..32], &hex(ADVERT)[..]);

        let dad = hex(DAD_SOLICIT);
        let dad = NeighborMessage::new_checked(&dad[..]).unwrap();
        let na = NeighborAdvertRepr::answer(&dad, &Ipv6Addr::UNSPECIFIED, MAC1, true);
        assert!(!na.solicited);
        assert_eq!(
            na.emit(&mut buf, &addr("fe80::1"), &addr("ff02::1")),
            Ok(32)
        );
        assert_eq!(&buf[..32], &hex(ROUTER_ADVERT)[..]);

        assert_eq!(na.emit(&mut buf[..31], &a, &b), Err(Error::Truncated));
        let bad = NeighborAdvertRepr {
            target: addr("ff02::1"),
            ..na
        };
        assert_eq!(bad.emit(&mut buf, &a, &b), Err(Error::MulticastTarget));
        let bad = NeighborSolicitRepr {
            target: addr("ff02::1"),
            source_link_addr: None,
        };
        assert_eq!(bad.emit(&mut buf, &a, &b), Err(Error::MulticastTarget));
    }

    #[test]
    fn flag_setters_keep_their_neighbours() {
        let mut bytes = hex(ADVERT);
        let mut m = NeighborMessage::new_checked(&mut bytes[..]).unwrap();
        m.set_router_flag(true);
        assert!(m.router_flag() && m.solicited_flag() && m.override_flag());
        m.set_solicited_flag(false);
        assert!(m.router_flag() && !m.solicited_flag() && m.override_flag());
        m.set_override_flag(false);
        m.set_router_flag(false);
        assert!(!m.router_flag() && !m.solicited_flag() && !m.override_flag());
        m.set_target_addr(&addr("2001:2::7"));
        m.fill_checksum(&addr("2001:2::7"), &addr("2001:2::2"));
        assert!(m.verify_checksum(&addr("2001:2::7"), &addr("2001:2::2")));
        assert_eq!(m.target_addr(), addr("2001:2::7"));
        assert_eq!(m.into_inner()[4], 0);
    }

    #[test]
    fn no_length_panics() {
        let mut bytes = hex(NONCE_SOLICIT);
        bytes.extend_from_slice(&[1, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
        for len in 0..=bytes.len() {
            for units in [0u8, 1, 2, 0xff] {
                let mut b = bytes[..len].to_vec();
                if len > 25 {
                    b[25] = units;
                }
                if let Ok(m) = NeighborMessage::new_checked(&b[..]) {
                    let _ = (m.source_link_addr(), m.target_link_addr());
                    let _ = m.options().count();
                }
                if let Ok(p) = Packet::new_checked(&b[..]) {
                    let _ = (
                        p.payload(),
                        p.mtu(),
                        p.verify_checksum(&Ipv6Addr::LOCALHOST, &Ipv6Addr::LOCALHOST),
                    );
                }
                let _ = NeighborMessage::new_unchecked(&b[..]).options().count();
            }
        }
        let offending = offending();
        let repr = ErrorRepr::PacketTooBig { mtu: 1280 };
        let mut buf = [0u8; 64];
        for len in 0..=100 {
            let _ = repr.emit(
                &mut buf,
                &Ipv6Addr::LOCALHOST,
                &Ipv6Addr::LOCALHOST,
                &offending[..len],
            );
        }
    }

    #[test]
    fn setters_round_trip() {
        let mut buf = [0u8; 12];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_msg_type(msg_type::PACKET_TOO_BIG);
        p.set_code(0);
        p.set_rest_of_header(1280);
        p.payload_mut().copy_from_slice(&[1, 2, 3, 4]);
        assert_eq!(p.mtu(), 1280);
        p.set_identifier(7);
        p.set_sequence(8);
        assert_eq!((p.identifier(), p.sequence()), (7, 8));
        assert_eq!(p.pointer(), 0x0007_0008);
        p.set_checksum(0xbeef);
        assert_eq!(p.checksum(), 0xbeef);
        assert_eq!(p.into_inner()[8..], [1, 2, 3, 4]);
    }
}
