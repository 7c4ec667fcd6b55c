//! ARP packet view for Ethernet and IPv4 (RFC 826), the only pairing a
//! gateway on an Ethernet link resolves.
//!
//! The view reads the 28-byte packet of that pairing; any other hardware or
//! protocol type or address length is [`Error::UnsupportedArp`]. Bytes after
//! the 28 (the padding of a minimum-size Ethernet frame) are ignored.

use core::net::Ipv4Addr;

use crate::bytes::{fixed, fixed_mut, set_u16_be, u16_be};
use crate::error::{Error, Result};
use crate::ethernet::{self, MacAddr};

/// The length of an ARP packet for Ethernet and IPv4: an 8-byte fixed part
/// and two (hardware, protocol) address pairs of 6 + 4 bytes (RFC 826,
/// "Packet format").
pub const PACKET_LEN: usize = 28;

/// `ar$hrd` for Ethernet (RFC 826, "Packet format"; IANA "Hardware Types").
pub const HARDWARE_ETHERNET: u16 = 1;

/// `ar$hln` for Ethernet: the length of a MAC address.
pub const HARDWARE_LEN: u8 = ethernet::ADDR_LEN as u8;

/// `ar$pln` for IPv4: the length of an IPv4 address.
pub const PROTOCOL_LEN: u8 = 4;

/// Operation codes, `ar$op` (RFC 826, "Packet format"; IANA "Operation
/// Codes").
pub mod operation {
    /// A request: who has the target protocol address?
    pub const REQUEST: u16 = 1;
    /// A reply: the sender has the sender protocol address.
    pub const REPLY: u16 = 2;
}

mod field {
    pub const HTYPE: usize = 0;
    pub const PTYPE: usize = 2;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: usize = 6;
    pub const SHA: usize = 8;
    pub const SPA: usize = 14;
    pub const THA: usize = 18;
    pub const TPA: usize = 24;
}

checked_view! {
    /// A view of an ARP packet for Ethernet and IPv4.
    pub struct Packet, at least PACKET_LEN;
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Checks that the buffer holds [`PACKET_LEN`] bytes and that the hardware type is
    /// Ethernet, the protocol type IPv4, and the address lengths 6 and 4. The operation
    /// is not checked: see [`operation`].
    pub fn check_len(&self) -> Result<()> {
        self.check_min_len()?;
        if self.hardware_type() != HARDWARE_ETHERNET
            || self.protocol_type() != ethernet::ethertype::IPV4
            || self.hardware_len() != HARDWARE_LEN
            || self.protocol_len() != PROTOCOL_LEN
        {
            return Err(Error::UnsupportedArp);
        }
        Ok(())
    }

    /// Hardware address space, `ar$hrd`.
    pub fn hardware_type(&self) -> u16 {
        u16_be(self.data(), field::HTYPE)
    }

    /// Protocol address space, `ar$pro`: an EtherType.
    pub fn protocol_type(&self) -> u16 {
        u16_be(self.data(), field::PTYPE)
    }

    /// Hardware address length, `ar$hln`.
    pub fn hardware_len(&self) -> u8 {
        self.data()[field::HLEN]
    }

    /// Protocol address length, `ar$pln`.
    pub fn protocol_len(&self) -> u8 {
        self.data()[field::PLEN]
    }

    /// Operation, `ar$op` (see [`operation`]).
    pub fn operation(&self) -> u16 {
        u16_be(self.data(), field::OPER)
    }

    /// Sender hardware address, `ar$sha`.
    pub fn sender_mac(&self) -> MacAddr {
        MacAddr(*fixed(self.data(), field::SHA))
    }

    /// Sender protocol address, `ar$spa`.
    pub fn sender_ip(&self) -> Ipv4Addr {
        Ipv4Addr::from(*fixed::<4>(self.data(), field::SPA))
    }

    /// Target hardware address, `ar$tha`; meaningless in a request.
    pub fn target_mac(&self) -> MacAddr {
        MacAddr(*fixed(self.data(), field::THA))
    }

    /// Target protocol address, `ar$tpa`.
    pub fn target_ip(&self) -> Ipv4Addr {
        Ipv4Addr::from(*fixed::<4>(self.data(), field::TPA))
    }

    /// The fields that vary, for building an answer.
    pub fn repr(&self) -> ArpRepr {
        ArpRepr {
            operation: self.operation(),
            sender_mac: self.sender_mac(),
            sender_ip: self.sender_ip(),
            target_mac: self.target_mac(),
            target_ip: self.target_ip(),
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the hardware type.
    pub fn set_hardware_type(&mut self, value: u16) {
        set_u16_be(self.data_mut(), field::HTYPE, value);
    }

    /// Sets the protocol type.
    pub fn set_protocol_type(&mut self, value: u16) {
        set_u16_be(self.data_mut(), field::PTYPE, value);
    }

    /// Sets the hardware address length.
    pub fn set_hardware_len(&mut self, value: u8) {
        self.data_mut()[field::HLEN] = value;
    }

    /// Sets the protocol address length.
    pub fn set_protocol_len(&mut self, value: u8) {
        self.data_mut()[field::PLEN] = value;
    }

    /// Sets the operation.
    pub fn set_operation(&mut self, value: u16) {
        set_u16_be(self.data_mut(), field::OPER, value);
    }

    /// Sets the sender hardware address.
    pub fn set_sender_mac(&mut self, addr: MacAddr) {
        *fixed_mut(self.data_mut(), field::SHA) = addr.0;
    }

    /// Sets the sender protocol address.
    pub fn set_sender_ip(&mut self, addr: Ipv4Addr) {
        *fixed_mut(self.data_mut(), field::SPA) = addr.octets();
    }

    /// Sets the target hardware address.
    pub fn set_target_mac(&mut self, addr: MacAddr) {
        *fixed_mut(self.data_mut(), field::THA) = addr.0;
    }

    /// Sets the target protocol address.
    pub fn set_target_ip(&mut self, addr: Ipv4Addr) {
        *fixed_mut(self.data_mut(), field::TPA) = addr.octets();
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The fields of an ARP packet for Ethernet and IPv4 that vary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArpRepr {
    /// Operation (see [`operation`]).
    pub operation: u16,
    /// Sender hardware address.
    pub sender_mac: MacAddr,
    /// Sender protocol address.
    pub sender_ip: Ipv4Addr,
    /// Target hardware address.
    pub target_mac: MacAddr,
    /// Target protocol address.
    pub target_ip: Ipv4Addr,
}

impl ArpRepr {
    /// Writes the whole packet into the first [`PACKET_LEN`] bytes of `buf`
    /// and returns its length, or [`Error::Truncated`] if `buf` is shorter.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let bytes = buf.get_mut(..PACKET_LEN).ok_or(Error::Truncated)?;
        let mut packet = Packet::new_unchecked(bytes);
        packet.set_hardware_type(HARDWARE_ETHERNET);
        packet.set_protocol_type(ethernet::ethertype::IPV4);
        packet.set_hardware_len(HARDWARE_LEN);
        packet.set_protocol_len(PROTOCOL_LEN);
        packet.set_operation(self.operation);
        packet.set_sender_mac(self.sender_mac);
        packet.set_sender_ip(self.sender_ip);
        packet.set_target_mac(self.target_mac);
        packet.set_target_ip(self.target_ip);
        Ok(PACKET_LEN)
    }
}

/// Writes a request from `sender_mac`, `sender_ip` asking who has
/// `target_ip`, with an all-zero target hardware address, into the first
/// [`PACKET_LEN`] bytes of `buf`; returns its length, or
/// [`Error::Truncated`] if `buf` is shorter.
pub fn emit_request(
    buf: &mut [u8],
    sender_mac: MacAddr,
    sender_ip: Ipv4Addr,
    target_ip: Ipv4Addr,
) -> Result<usize> {
    ArpRepr {
        operation: operation::REQUEST,
        sender_mac,
        sender_ip,
        target_mac: MacAddr::UNSPECIFIED,
        target_ip,
    }
    .emit(buf)
}

/// Writes the reply to `request` saying that `our_mac` has the address the
/// request asked for: sender is `our_mac` and the request's target
/// protocol address, target is the request's sender (RFC 826, "Packet
/// Reception"). Returns its length, or [`Error::Truncated`] if `buf` is
/// shorter than [`PACKET_LEN`].
///
/// `buf` may be the request's own buffer: the request is read in full
/// before anything is written.
pub fn emit_reply(buf: &mut [u8], request: &ArpRepr, our_mac: MacAddr) -> Result<usize> {
    ArpRepr {
        operation: operation::REPLY,
        sender_mac: our_mac,
        sender_ip: request.target_ip,
        target_mac: request.sender_mac,
        target_ip: request.sender_ip,
    }
    .emit(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::captures::hex;
    use std::vec::Vec;

    /// "Who has 198.18.0.1, tell 198.18.0.2", built by an independent
    /// packet library (without its Ethernet header).
    const REQUEST: &str = "0001080006040001020000000002c6120002000000000000c6120001";

    /// "198.18.0.1 is at 02:00:00:00:00:01", to 198.18.0.2, built by an
    /// independent packet library.
    const REPLY: &str = "0001080006040002020000000001c6120001020000000002c6120002";

    const MAC1: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x01]);
    const MAC2: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x02]);
    const IP1: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
    const IP2: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

    #[test]
    fn parses_a_request_and_a_reply() {
        let bytes = hex(REQUEST);
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.hardware_type(), 1);
        assert_eq!(p.protocol_type(), 0x0800);
        assert_eq!(p.hardware_len(), 6);
        assert_eq!(p.protocol_len(), 4);
        assert_eq!(p.operation(), operation::REQUEST);
        assert_eq!(p.sender_mac(), MAC2);
        assert_eq!(p.sender_ip(), IP2);
        assert_eq!(p.target_mac(), MacAddr::UNSPECIFIED);
        assert_eq!(p.target_ip(), IP1);

        let bytes = hex(REPLY);
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(
            p.repr(),
            ArpRepr {
                operation: operation::REPLY,
                sender_mac: MAC1,
                sender_ip: IP1,
                target_mac: MAC2,
                target_ip: IP2,
            }
        );
    }

    #[test]
    fn parses_through_an_ethernet_frame_with_padding() {
        let mut frame = hex("ffffffffffff0200000000020806");
        frame.extend_from_slice(&hex(REQUEST));
        frame.resize(60, 0);
        let f = crate::ethernet::Frame::new_checked(&frame[..]).unwrap();
        assert_eq!(f.ethertype(), crate::ethernet::ethertype::ARP);
        let p = Packet::new_checked(f.payload()).unwrap();
        assert_eq!(p.target_ip(), IP1);
    }

    #[test]
    fn builders_write_the_known_packets() {
        let mut buf = [0xaau8; 30];
        assert_eq!(emit_request(&mut buf, MAC2, IP2, IP1), Ok(PACKET_LEN));
        assert_eq!(&buf[..28], &hex(REQUEST)[..]);
        assert_eq!(&buf[28..], &[0xaa; 2]);

        // Answered in the request's own buffer.
        let request = Packet::new_checked(&buf[..]).unwrap().repr();
        assert_eq!(emit_reply(&mut buf, &request, MAC1), Ok(PACKET_LEN));
        assert_eq!(&buf[..28], &hex(REPLY)[..]);

        assert_eq!(
            emit_request(&mut buf[..27], MAC2, IP2, IP1),
            Err(Error::Truncated)
        );
        assert_eq!(
            emit_reply(&mut buf[..27], &request, MAC1),
            Err(Error::Truncated)
        );
    }

    #[test]
    fn rejects_what_it_must() {
        let good = hex(REQUEST);
        let check = |edit: &dyn Fn(&mut Vec<u8>)| {
            let mut b = good.clone();
            edit(&mut b);
            Packet::new_checked(&b[..]).map(|_| ())
        };
        assert_eq!(check(&|_| ()), Ok(()));
        assert_eq!(check(&|b| b.truncate(27)), Err(Error::Truncated));
        assert_eq!(check(&|b| b.truncate(0)), Err(Error::Truncated));
        // IEEE 802 networks (hardware type 6) are another space.
        assert_eq!(check(&|b| b[1] = 6), Err(Error::UnsupportedArp));
        assert_eq!(
            check(&|b| b[2..4].copy_from_slice(&[0x86, 0xdd])),
            Err(Error::UnsupportedArp)
        );
        assert_eq!(check(&|b| b[4] = 8), Err(Error::UnsupportedArp));
        assert_eq!(check(&|b| b[5] = 16), Err(Error::UnsupportedArp));
        // Unknown operations are the caller's to ignore.
        assert_eq!(check(&|b| b[7] = 3), Ok(()));
    }

    #[test]
    fn no_length_panics() {
        let mut bytes = hex(REPLY);
        bytes.resize(40, 0xff);
        for len in 0..=bytes.len() {
            if let Ok(p) = Packet::new_checked(&bytes[..len]) {
                assert!(len >= PACKET_LEN);
                let _ = p.repr();
            }
        }
    }

    #[test]
    fn setters_round_trip() {
        let mut buf = [0u8; PACKET_LEN];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_hardware_type(HARDWARE_ETHERNET);
        p.set_protocol_type(0x0800);
        p.set_hardware_len(6);
        p.set_protocol_len(4);
        p.set_operation(operation::REPLY);
        p.set_sender_mac(MAC1);
        p.set_sender_ip(IP1);
        p.set_target_mac(MAC2);
        p.set_target_ip(IP2);
        assert_eq!(p.into_inner(), &hex(REPLY)[..]);
    }
}
