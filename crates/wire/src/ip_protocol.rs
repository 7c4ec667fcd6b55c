//! Protocol and next-header numbers (IANA "Assigned Internet Protocol
//! Numbers"), the few this crate and its users name.

/// IPv6 Hop-by-Hop Options header (RFC 8200 §4.3).
pub const HOP_BY_HOP: u8 = 0;
/// Internet Control Message Protocol (RFC 792).
pub const ICMP: u8 = 1;
/// Transmission Control Protocol (RFC 9293).
pub const TCP: u8 = 6;
/// User Datagram Protocol (RFC 768).
pub const UDP: u8 = 17;
/// IPv4 in IP, the next header of an IPv4 packet in an ESP tunnel (RFC 2003).
pub const IPV4: u8 = 4;
/// IPv6 in IP, the next header of an IPv6 packet in an ESP tunnel (RFC 2473).
pub const IPV6: u8 = 41;
/// IPv6 Routing header (RFC 8200 §4.4).
pub const ROUTING: u8 = 43;
/// IPv6 Fragment header (RFC 8200 §4.5).
pub const FRAGMENT: u8 = 44;
/// Encapsulating Security Payload (RFC 4303).
pub const ESP: u8 = 50;
/// ICMP for IPv6 (RFC 4443).
pub const ICMPV6: u8 = 58;
/// No next header (RFC 8200 §4.7); in ESP, a dummy packet to discard (RFC 4303 §2.6).
pub const NO_NEXT_HEADER: u8 = 59;
/// IPv6 Destination Options header (RFC 8200 §4.6).
pub const DEST_OPTS: u8 = 60;
