//! The one error type of every parser in this crate.
//!
//! Each variant is a distinct drop reason: the data path counts them
//! separately, so a new way for input to be wrong gets a new variant rather
//! than being folded into an existing one.

use core::fmt;

/// Why a buffer was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// The buffer ends before the fixed header, or before the length that a
    /// header field claims.
    Truncated,
    /// A message whose format has exactly one size arrived with another.
    WrongLength {
        /// The size the format requires.
        expected: usize,
        /// The size that arrived.
        got: usize,
    },
    /// A WireGuard message type byte outside the known set; holds the whole
    /// little-endian type word.
    UnknownType(u32),
    /// A WireGuard message of a known type whose three reserved bytes are not
    /// zero, or a VXLAN header with a flag other than I, or a reserved bit, set.
    ReservedNotZero,
    /// An IP version nibble that does not match the view (or, for
    /// [`IpPacket`](crate::IpPacket), is neither 4 nor 6).
    BadVersion(u8),
    /// An IPv4 header length (IHL) below the 20-byte minimum.
    BadHeaderLen,
    /// A length field that is smaller than the header it includes (IPv4
    /// total length, UDP length) or too large to encode.
    BadTotalLen,
    /// An Ethernet frame with a VLAN tag the view does not handle: an
    /// 802.1ad service tag or a second tag inside the first (QinQ); holds
    /// the EtherType that announced it.
    UnsupportedTag(u16),
    /// An ARP packet for a hardware or protocol address other than Ethernet
    /// and IPv4.
    UnsupportedArp,
    /// An ICMP message of a type other than the one the view reads; holds
    /// the type.
    WrongMessageType(u8),
    /// An ICMP code that the message type does not allow; holds the code.
    BadCode(u8),
    /// A Neighbor Discovery option whose length field is zero.
    BadOptionLen,
    /// A Neighbor Discovery message whose target address is multicast.
    MulticastTarget,
    /// An ESP packet with an SPI from the range RFC 4303 section 2.1 reserves
    /// (0 to 255): never sent on the wire.
    ReservedSpi,
    /// An ESP trailer whose padding is longer than the text it ends, or whose
    /// bytes are not the 1, 2, 3, ... RFC 4303 section 2.4 fills it with.
    BadPadding,
    /// An IP header asked for between addresses of two versions.
    MixedFamilies,
}

/// `Result` with this crate's [`Error`].
pub type Result<T> = core::result::Result<T, Error>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Truncated => f.write_str("truncated packet"),
            Error::WrongLength { expected, got } => {
                write!(f, "wrong message length: expected {expected}, got {got}")
            }
            Error::UnknownType(t) => write!(f, "unknown message type {t:#010x}"),
            Error::ReservedNotZero => f.write_str("reserved bytes are not zero"),
            Error::BadVersion(v) => write!(f, "bad IP version {v}"),
            Error::BadHeaderLen => f.write_str("bad header length"),
            Error::BadTotalLen => f.write_str("bad total length"),
            Error::UnsupportedTag(t) => write!(f, "unsupported VLAN tag {t:#06x}"),
            Error::UnsupportedArp => f.write_str("ARP not for Ethernet and IPv4"),
            Error::WrongMessageType(t) => write!(f, "wrong ICMP message type {t}"),
            Error::BadCode(c) => write!(f, "bad ICMP code {c}"),
            Error::BadOptionLen => f.write_str("option of length zero"),
            Error::MulticastTarget => f.write_str("multicast target address"),
            Error::ReservedSpi => f.write_str("reserved SPI"),
            Error::BadPadding => f.write_str("bad ESP padding"),
            Error::MixedFamilies => f.write_str("an IPv4 and an IPv6 address in one header"),
        }
    }
}

impl core::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    #[test]
    fn display_names_the_values() {
        assert_eq!(
            Error::WrongLength {
                expected: 148,
                got: 147
            }
            .to_string(),
            "wrong message length: expected 148, got 147"
        );
        assert_eq!(
            Error::UnknownType(0x0000_0005).to_string(),
            "unknown message type 0x00000005"
        );
        assert_eq!(Error::BadVersion(5).to_string(), "bad IP version 5");
        assert_eq!(Error::Truncated.to_string(), "truncated packet");
        assert_eq!(
            Error::UnsupportedTag(0x88a8).to_string(),
            "unsupported VLAN tag 0x88a8"
        );
        assert_eq!(Error::BadCode(1).to_string(), "bad ICMP code 1");
    }

    #[test]
    fn is_a_core_error() {
        fn takes(_: &dyn core::error::Error) {}
        takes(&Error::ReservedNotZero);
    }
}
