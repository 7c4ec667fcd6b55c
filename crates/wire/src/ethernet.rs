//! Ethernet II frame view (IEEE 802.3 §3.2, RFC 894) with at most one
//! 802.1Q VLAN tag (IEEE 802.1Q §9), and MAC addresses.
//!
//! The view starts at the destination address and ends with the buffer:
//! there is no length field, the frame check sequence is not included, and
//! the padding that brings short frames up to the 60-byte minimum is part of
//! the payload. The IP views skip that padding by their own length fields.
//!
//! A frame with one customer VLAN tag (EtherType 0x8100) is read through
//! the tag: [`Frame::ethertype`] is the EtherType after the tag and the
//! payload starts after it. Stacked tags (an 802.1ad service tag, or a
//! second tag inside the first) are refused with [`Error::UnsupportedTag`].

use core::fmt;
use core::net::Ipv6Addr;
use core::str::FromStr;

use crate::bytes::{clamped, clamped_mut, fixed, fixed_mut, set_u16_be, u16_be};
use crate::error::{Error, Result};

/// The length of a MAC address.
pub const ADDR_LEN: usize = 6;

/// The length of an untagged header: two addresses and the EtherType
/// (IEEE 802.3 §3.1.1).
pub const HEADER_LEN: usize = 14;

/// The length of an 802.1Q tag: the tag protocol identifier and the tag
/// control information (IEEE 802.1Q §9.3).
pub const VLAN_TAG_LEN: usize = 4;

/// The length of a header with one VLAN tag.
pub const MAX_HEADER_LEN: usize = HEADER_LEN + VLAN_TAG_LEN;

/// The length of a header with two VLAN tags (802.1ad and 802.1Q, QinQ): what a
/// port carrying a VLAN trunk whole adds to its MTU.
pub const QINQ_HEADER_LEN: usize = HEADER_LEN + 2 * VLAN_TAG_LEN;

/// The largest VLAN identifier that names a VLAN; 0 means "priority tag
/// only" and 0xfff is reserved (IEEE 802.1Q §9.6, Table 9-2).
pub const MAX_VLAN_ID: u16 = 0x0ffe;

/// EtherType values (IEEE "EtherType" registry), the few this crate reads.
pub mod ethertype {
    /// Internet Protocol version 4 (RFC 894).
    pub const IPV4: u16 = 0x0800;
    /// Address Resolution Protocol (RFC 826).
    pub const ARP: u16 = 0x0806;
    /// Customer VLAN tag, C-TAG (IEEE 802.1Q §9.5, Table 9-1).
    pub const VLAN: u16 = 0x8100;
    /// Internet Protocol version 6 (RFC 2464 §3).
    pub const IPV6: u16 = 0x86dd;
    /// Service VLAN tag, S-TAG, the outer tag of QinQ (IEEE 802.1Q §9.5,
    /// Table 9-1).
    pub const QINQ: u16 = 0x88a8;
}

mod field {
    pub const DST: usize = 0;
    pub const SRC: usize = 6;
    pub const ETHERTYPE: usize = 12;
    pub const TCI: usize = 14;
    pub const INNER_ETHERTYPE: usize = 16;

    pub const VID: u16 = 0x0fff;
    pub const PCP_SHIFT: u16 = 13;
}

/// A MAC address (IEEE 802 §8).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MacAddr(pub [u8; ADDR_LEN]);

impl MacAddr {
    /// The broadcast address ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: MacAddr = MacAddr([0xff; ADDR_LEN]);

    /// The all-zero address, which ARP requests carry as the unknown target.
    pub const UNSPECIFIED: MacAddr = MacAddr([0; ADDR_LEN]);

    /// The six bytes.
    pub const fn octets(&self) -> [u8; ADDR_LEN] {
        self.0
    }

    /// Whether this is ff:ff:ff:ff:ff:ff.
    pub const fn is_broadcast(&self) -> bool {
        let o = self.0;
        o[0] & o[1] & o[2] & o[3] & o[4] & o[5] == 0xff
    }

    /// Whether the individual/group bit, the low bit of the first byte, is
    /// set (IEEE 802 §8.2); broadcast is a group address too.
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// Whether this is an individual address: not multicast, not broadcast.
    pub const fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }

    /// Whether the universal/local bit, the second-lowest bit of the first
    /// byte, is set (IEEE 802 §8.2).
    pub const fn is_locally_administered(&self) -> bool {
        self.0[0] & 0x02 != 0
    }

    /// Whether every byte is zero.
    pub const fn is_unspecified(&self) -> bool {
        let o = self.0;
        o[0] | o[1] | o[2] | o[3] | o[4] | o[5] == 0
    }

    /// The Ethernet address an IPv6 multicast address is sent to:
    /// 33:33 followed by the last four bytes of the address (RFC 2464 §7).
    pub const fn ipv6_multicast(addr: &Ipv6Addr) -> MacAddr {
        let o = addr.octets();
        MacAddr([0x33, 0x33, o[12], o[13], o[14], o[15]])
    }
}

impl From<[u8; ADDR_LEN]> for MacAddr {
    fn from(octets: [u8; ADDR_LEN]) -> Self {
        MacAddr(octets)
    }
}

impl From<MacAddr> for [u8; ADDR_LEN] {
    fn from(addr: MacAddr) -> Self {
        addr.0
    }
}

impl fmt::Display for MacAddr {
    /// Six lower-case hex pairs separated by colons.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

impl fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MacAddr({self})")
    }
}

/// Why a string is not a MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ParseMacAddrError;

impl fmt::Display for ParseMacAddrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid MAC address syntax")
    }
}

impl core::error::Error for ParseMacAddrError {}

impl FromStr for MacAddr {
    type Err = ParseMacAddrError;

    /// Parses six pairs of hex digits, either case, separated by colons:
    /// `02:00:5e:10:00:01`. Nothing else is accepted: no dashes, no single
    /// digits, no surrounding space.
    fn from_str(s: &str) -> core::result::Result<Self, Self::Err> {
        let mut octets = [0u8; ADDR_LEN];
        let mut parts = s.split(':');
        for octet in &mut octets {
            let part = parts.next().ok_or(ParseMacAddrError)?;
            if part.len() != 2 || !part.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(ParseMacAddrError);
            }
            *octet = u8::from_str_radix(part, 16).map_err(|_| ParseMacAddrError)?;
        }
        if parts.next().is_some() {
            return Err(ParseMacAddrError);
        }
        Ok(MacAddr(octets))
    }
}

checked_view! {
    /// A view of an Ethernet II frame: header, optional VLAN tag and payload.
    /// The accessors past the untagged header need [`MAX_HEADER_LEN`] bytes
    /// in a tagged frame, which a checked view has.
    pub struct Frame, at least HEADER_LEN;
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Checks that the buffer holds the header and, if the EtherType is
    /// [`ethertype::VLAN`], the tag and the EtherType after it. An 802.1ad tag, or a
    /// VLAN tag inside the VLAN tag, is [`Error::UnsupportedTag`].
    pub fn check_len(&self) -> Result<()> {
        let len = self.check_min_len()?;
        match self.outer_ethertype() {
            ethertype::QINQ => Err(Error::UnsupportedTag(ethertype::QINQ)),
            ethertype::VLAN => {
                if len < MAX_HEADER_LEN {
                    return Err(Error::Truncated);
                }
                match self.ethertype() {
                    inner @ (ethertype::VLAN | ethertype::QINQ) => {
                        Err(Error::UnsupportedTag(inner))
                    }
                    _ => Ok(()),
                }
            }
            _ => Ok(()),
        }
    }

    /// Destination address.
    pub fn dst_addr(&self) -> MacAddr {
        MacAddr(*fixed(self.data(), field::DST))
    }

    /// Source address.
    pub fn src_addr(&self) -> MacAddr {
        MacAddr(*fixed(self.data(), field::SRC))
    }

    /// The EtherType right after the source address: [`ethertype::VLAN`]
    /// for a tagged frame.
    pub fn outer_ethertype(&self) -> u16 {
        u16_be(self.data(), field::ETHERTYPE)
    }

    /// Whether the frame carries a VLAN tag.
    pub fn is_tagged(&self) -> bool {
        self.outer_ethertype() == ethertype::VLAN
    }

    /// The EtherType of the payload: after the VLAN tag if there is one.
    pub fn ethertype(&self) -> u16 {
        u16_be(self.data(), self.ethertype_at())
    }

    fn ethertype_at(&self) -> usize {
        if self.is_tagged() {
            field::INNER_ETHERTYPE
        } else {
            field::ETHERTYPE
        }
    }

    /// The tag control information of a tagged frame: priority (3 bits),
    /// drop eligible (1 bit) and VLAN identifier (12 bits).
    pub fn vlan_tci(&self) -> Option<u16> {
        self.is_tagged().then(|| u16_be(self.data(), field::TCI))
    }

    /// The VLAN identifier of a tagged frame (12 bits).
    pub fn vlan_id(&self) -> Option<u16> {
        self.vlan_tci().map(|tci| tci & field::VID)
    }

    /// The priority code point of a tagged frame (3 bits).
    pub fn vlan_pcp(&self) -> Option<u8> {
        self.vlan_tci().map(|tci| (tci >> field::PCP_SHIFT) as u8)
    }

    /// The header length: [`HEADER_LEN`], or [`MAX_HEADER_LEN`] if tagged.
    pub fn header_len(&self) -> usize {
        if self.is_tagged() {
            MAX_HEADER_LEN
        } else {
            HEADER_LEN
        }
    }

    /// The header, tag included.
    pub fn header(&self) -> &[u8] {
        clamped(self.data(), 0, self.header_len())
    }

    /// Everything after the header, padding included.
    pub fn payload(&self) -> &[u8] {
        clamped(self.data(), self.header_len(), usize::MAX)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, addr: MacAddr) {
        *fixed_mut(self.data_mut(), field::DST) = addr.0;
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, addr: MacAddr) {
        *fixed_mut(self.data_mut(), field::SRC) = addr.0;
    }

    /// Sets the EtherType of the payload: the one after the VLAN tag if the
    /// frame is tagged, so that a tagged frame stays tagged.
    pub fn set_ethertype(&mut self, value: u16) {
        let at = self.ethertype_at();
        set_u16_be(self.data_mut(), at, value);
    }

    /// The payload, writable; bounded like [`payload`](Self::payload).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        clamped_mut(self.data_mut(), start, usize::MAX)
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Frame<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The fields of an Ethernet II header, for building frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthernetRepr {
    /// Destination address.
    pub dst_addr: MacAddr,
    /// Source address.
    pub src_addr: MacAddr,
    /// EtherType of the payload.
    pub ethertype: u16,
    /// A VLAN identifier to tag the frame with, priority zero; bits above
    /// the low 12 are lost.
    pub vlan_id: Option<u16>,
}

impl EthernetRepr {
    /// The header length this representation emits.
    pub const fn header_len(&self) -> usize {
        if self.vlan_id.is_some() {
            MAX_HEADER_LEN
        } else {
            HEADER_LEN
        }
    }

    /// Writes the header (and tag) into the start of `buf` and returns its
    /// length, or [`Error::Truncated`] if `buf` is shorter.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let len = self.header_len();
        let header = buf.get_mut(..len).ok_or(Error::Truncated)?;
        let mut frame = Frame::new_unchecked(header);
        frame.set_dst_addr(self.dst_addr);
        frame.set_src_addr(self.src_addr);
        if let Some(id) = self.vlan_id {
            set_u16_be(frame.data_mut(), field::ETHERTYPE, ethertype::VLAN);
            set_u16_be(frame.data_mut(), field::TCI, id & field::VID);
        }
        frame.set_ethertype(self.ethertype);
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::captures::hex;
    use std::string::ToString;
    use std::vec::Vec;

    /// ARP request "who has 198.18.0.1, tell 198.18.0.2", broadcast, built
    /// by an independent packet library.
    const ARP_REQUEST: &str = "ffffffffffff020000000002080600010800060400010200\
                               00000002c6120002000000000000c6120001";

    /// ICMP echo request in VLAN 100, priority 5, built by an
    /// independent packet library.
    const VLAN_ECHO: &str = "0200000000010200000000028100b06408004500002400010000\
                             4001eeb0c6120002c612000108002435123400016c696e6572617465";

    const MAC1: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x01]);
    const MAC2: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x02]);

    #[test]
    fn parses_an_untagged_frame() {
        let bytes = hex(ARP_REQUEST);
        let f = Frame::new_checked(&bytes[..]).unwrap();
        assert_eq!(f.dst_addr(), MacAddr::BROADCAST);
        assert_eq!(f.src_addr(), MAC2);
        assert_eq!(f.outer_ethertype(), ethertype::ARP);
        assert_eq!(f.ethertype(), ethertype::ARP);
        assert!(!f.is_tagged());
        assert_eq!(f.vlan_tci(), None);
        assert_eq!(f.vlan_id(), None);
        assert_eq!(f.vlan_pcp(), None);
        assert_eq!(f.header_len(), HEADER_LEN);
        assert_eq!(f.header(), &bytes[..14]);
        assert_eq!(f.payload(), &bytes[14..]);
        assert_eq!(f.payload().len(), 28);
    }

    #[test]
    fn reads_through_one_vlan_tag() {
        let bytes = hex(VLAN_ECHO);
        let f = Frame::new_checked(&bytes[..]).unwrap();
        assert_eq!(f.dst_addr(), MAC1);
        assert_eq!(f.src_addr(), MAC2);
        assert!(f.is_tagged());
        assert_eq!(f.outer_ethertype(), ethertype::VLAN);
        assert_eq!(f.ethertype(), ethertype::IPV4);
        assert_eq!(f.vlan_tci(), Some(0xb064));
        assert_eq!(f.vlan_id(), Some(100));
        assert_eq!(f.vlan_pcp(), Some(5));
        assert_eq!(f.header_len(), MAX_HEADER_LEN);
        let ip = crate::ipv4::Packet::new_checked(f.payload()).unwrap();
        assert!(ip.verify_checksum());
        assert_eq!(&ip.payload()[8..], b"linerate");
    }

    #[test]
    fn rejects_what_it_must() {
        let tagged = hex(VLAN_ECHO);
        let check = |edit: &dyn Fn(&mut Vec<u8>)| {
            let mut b = tagged.clone();
            edit(&mut b);
            Frame::new_checked(&b[..]).map(|_| ())
        };
        assert_eq!(check(&|_| ()), Ok(()));
        assert_eq!(check(&|b| b.truncate(18)), Ok(()));
        assert_eq!(check(&|b| b.truncate(17)), Err(Error::Truncated));
        assert_eq!(check(&|b| b.truncate(13)), Err(Error::Truncated));
        assert_eq!(
            check(&|b| b[12..14].copy_from_slice(&[0x88, 0xa8])),
            Err(Error::UnsupportedTag(ethertype::QINQ))
        );
        assert_eq!(
            check(&|b| b[16..18].copy_from_slice(&[0x81, 0x00])),
            Err(Error::UnsupportedTag(ethertype::VLAN))
        );
        assert_eq!(
            check(&|b| b[16..18].copy_from_slice(&[0x88, 0xa8])),
            Err(Error::UnsupportedTag(ethertype::QINQ))
        );
        // Untagged, a bare header is a frame with an empty payload.
        assert_eq!(
            check(&|b| {
                b.truncate(14);
                b[12..14].copy_from_slice(&[0x86, 0xdd]);
            }),
            Ok(())
        );
    }

    #[test]
    fn no_length_panics() {
        for outer in [ethertype::VLAN, ethertype::QINQ, ethertype::IPV6, 0] {
            for inner in [ethertype::VLAN, ethertype::QINQ, ethertype::ARP] {
                let mut b = std::vec![0xffu8; 24];
                b[12..14].copy_from_slice(&outer.to_be_bytes());
                b[16..18].copy_from_slice(&inner.to_be_bytes());
                for len in 0..=b.len() {
                    if let Ok(f) = Frame::new_checked(&b[..len]) {
                        assert!(f.header_len() <= len);
                        let _ = (f.ethertype(), f.vlan_id(), f.vlan_pcp());
                        let _ = (f.header(), f.payload(), f.dst_addr());
                    }
                }
            }
        }
    }

    #[test]
    fn setters_round_trip_and_keep_the_tag() {
        let mut bytes = hex(VLAN_ECHO);
        let mut f = Frame::new_checked(&mut bytes[..]).unwrap();
        f.set_dst_addr(MAC2);
        f.set_src_addr(MAC1);
        f.set_ethertype(ethertype::IPV6);
        f.payload_mut()[0] = 0x60;
        assert_eq!(f.dst_addr(), MAC2);
        assert_eq!(f.src_addr(), MAC1);
        assert_eq!(f.ethertype(), ethertype::IPV6);
        assert_eq!(f.vlan_id(), Some(100));
        assert_eq!(&bytes[16..19], &[0x86, 0xdd, 0x60]);

        let mut bytes = hex(ARP_REQUEST);
        let mut f = Frame::new_checked(&mut bytes[..]).unwrap();
        f.set_ethertype(ethertype::IPV4);
        assert_eq!(&f.into_inner()[12..14], &[0x08, 0x00]);
    }

    #[test]
    fn emit_writes_the_known_headers() {
        let mut buf = [0xaau8; 20];
        let repr = EthernetRepr {
            dst_addr: MacAddr::BROADCAST,
            src_addr: MAC2,
            ethertype: ethertype::ARP,
            vlan_id: None,
        };
        assert_eq!(repr.emit(&mut buf), Ok(HEADER_LEN));
        assert_eq!(&buf[..14], &hex(ARP_REQUEST)[..14]);
        assert_eq!(buf[14], 0xaa);

        let repr = EthernetRepr {
            dst_addr: MAC1,
            src_addr: MAC2,
            ethertype: ethertype::IPV4,
            vlan_id: Some(0xf064),
        };
        assert_eq!(repr.header_len(), MAX_HEADER_LEN);
        assert_eq!(repr.emit(&mut buf), Ok(MAX_HEADER_LEN));
        let f = Frame::new_checked(&buf[..]).unwrap();
        assert_eq!(f.vlan_id(), Some(100));
        assert_eq!(f.vlan_pcp(), Some(0));
        assert_eq!(f.ethertype(), ethertype::IPV4);
        assert_eq!(repr.emit(&mut buf[..17]), Err(Error::Truncated));
    }

    #[test]
    fn mac_addresses_classify() {
        assert!(MacAddr::BROADCAST.is_broadcast());
        assert!(MacAddr::BROADCAST.is_multicast());
        assert!(!MAC1.is_multicast());
        assert!(MAC1.is_unicast());
        assert!(MAC1.is_locally_administered());
        assert!(!MAC1.is_broadcast());
        assert!(!MAC1.is_unspecified());
        assert!(MacAddr::UNSPECIFIED.is_unspecified());
        assert!(MacAddr([0x33, 0x33, 0, 0, 0, 1]).is_multicast());
        assert!(!MacAddr([0x33, 0x33, 0, 0, 0, 1]).is_broadcast());
        assert!(!MacAddr([0x00, 0x11, 0x22, 0, 0, 1]).is_locally_administered());
        assert_eq!(MacAddr::from([2, 0, 0, 0, 0, 1]), MAC1);
        assert_eq!(<[u8; 6]>::from(MAC1), [2, 0, 0, 0, 0, 1]);
        assert_eq!(MAC1.octets(), [2, 0, 0, 0, 0, 1]);
    }

    #[test]
    fn ipv6_multicast_mac_takes_the_last_four_bytes() {
        // The solicited-node group of any address ending in 00:0001.
        let group: Ipv6Addr = "ff02::1:ff00:1".parse().unwrap();
        assert_eq!(
            MacAddr::ipv6_multicast(&group),
            MacAddr([0x33, 0x33, 0xff, 0x00, 0x00, 0x01])
        );
        let all_nodes: Ipv6Addr = "ff02::1".parse().unwrap();
        assert_eq!(
            MacAddr::ipv6_multicast(&all_nodes).to_string(),
            "33:33:00:00:00:01"
        );
    }

    #[test]
    fn display_and_parse_round_trip() {
        let mac = MacAddr([0x02, 0xab, 0xcd, 0xef, 0x00, 0x09]);
        assert_eq!(mac.to_string(), "02:ab:cd:ef:00:09");
        assert_eq!(std::format!("{mac:?}"), "MacAddr(02:ab:cd:ef:00:09)");
        assert_eq!("02:ab:cd:ef:00:09".parse(), Ok(mac));
        assert_eq!("02:AB:CD:EF:00:09".parse(), Ok(mac));
        assert_eq!(MacAddr::BROADCAST.to_string(), "ff:ff:ff:ff:ff:ff");
        for bad in [
            "",
            "02:ab:cd:ef:00",
            "02:ab:cd:ef:00:09:10",
            "02:ab:cd:ef:00:9",
            "02:ab:cd:ef:00:009",
            "02-ab-cd-ef-00-09",
            "02:ab:cd:ef:00:0g",
            "02:ab:cd:ef:00:+9",
            " 02:ab:cd:ef:00:09",
            "02:ab:cd:ef:00:09:",
            "02:ab:cd:ef:00:é",
        ] {
            assert_eq!(bad.parse::<MacAddr>(), Err(ParseMacAddrError), "{bad:?}");
        }
        assert_eq!(ParseMacAddrError.to_string(), "invalid MAC address syntax");
    }
}
