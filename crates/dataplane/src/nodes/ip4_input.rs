//! `ip4-input`: the checks every IPv4 packet from a port passes before it is routed
//! (RFC 1812 section 5.2.2): length, version, header length, checksum, total length
//! against the frame (Ethernet padding beyond it is cut off), and a source address
//! that a host can have (section 5.3.7). Each failure has its own counter. TTL is
//! checked where a packet is forwarded, not here: a packet for the gateway itself
//! may arrive with TTL 1.

use crate::arena::Handle;
use crate::context::Context;
use crate::counters::NodeCounters;
use crate::nodes::PerPacket;
use std::net::Ipv4Addr;
use wire::ipv4;

crate::node_errors! {
    /// Why ip4-input drops a packet.
    pub enum Ip4InputError {
        Truncated => "truncated", "Shorter than an IPv4 header, or than its own header length.";
        BadVersion => "bad-version", "The version field is not 4.";
        BadHeaderLength => "bad-header-length", "A header length under 20 bytes.";
        BadChecksum => "bad-checksum", "The header checksum does not verify.";
        BadLength => "bad-length", "A total length under the header's or past the frame.";
        MartianSource => "martian-source", "A source no host has: multicast, broadcast, 0.0.0.0 or loopback.";
        NotRouted => "not-routed", "A multicast or broadcast destination: the gateway routes neither.";
    }
}

#[repr(u16)]
enum Next {
    Lookup = 0,
}

pub struct Ip4Input;

impl Ip4Input {
    pub const NAME: &'static str = "ip4-input";
    /// The node that routes what passes.
    pub const LOOKUP: &'static str = "ip-lookup";
}

impl PerPacket for Ip4Input {
    per_packet_node!(errors: Ip4InputError, next: [Self::LOOKUP]);

    fn one(
        &mut self,
        cx: &mut Context,
        h: Handle,
        _: &mut NodeCounters,
    ) -> Result<u16, Ip4InputError> {
        let total = check(cx.arena.data(h))?;
        cx.arena.meta_mut(h).len = total as u16;
        Ok(Next::Lookup as u16)
    }
}

/// The packet's true length, or why it is refused.
fn check(data: &[u8]) -> Result<usize, Ip4InputError> {
    if data.len() < ipv4::HEADER_LEN {
        return Err(Ip4InputError::Truncated);
    }
    let p = ipv4::Packet::new_unchecked(data);
    if p.version() != ipv4::VERSION {
        return Err(Ip4InputError::BadVersion);
    }
    let header = p.header_len();
    if header < ipv4::HEADER_LEN {
        return Err(Ip4InputError::BadHeaderLength);
    }
    if header > data.len() {
        return Err(Ip4InputError::Truncated);
    }
    if !p.verify_checksum() {
        return Err(Ip4InputError::BadChecksum);
    }
    let total = usize::from(p.total_len());
    if total < header || total > data.len() {
        return Err(Ip4InputError::BadLength);
    }
    let src = p.src_addr();
    if src.is_multicast() || src.is_broadcast() || src.is_unspecified() || src.is_loopback() {
        return Err(Ip4InputError::MartianSource);
    }
    let dst = p.dst_addr();
    if dst.is_multicast() || dst == Ipv4Addr::BROADCAST {
        return Err(Ip4InputError::NotRouted);
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A valid 28-byte UDP packet from 198.18.0.1 to 198.19.0.1, checksum filled.
    fn packet() -> Vec<u8> {
        let mut p = vec![
            0x45, 0, 0, 28, 0, 1, 0, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 19, 0, 1, 0x30, 0x39,
            0x30, 0x39, 0, 8, 0, 0,
        ];
        ipv4::Packet::new_unchecked(&mut p[..]).fill_checksum();
        p
    }

    fn with(f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut p = packet();
        f(&mut p);
        p
    }

    fn refilled(f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        with(|p| {
            f(p);
            ipv4::Packet::new_unchecked(&mut p[..]).fill_checksum();
        })
    }

    #[test]
    fn a_good_packet_passes_and_padding_is_cut() {
        assert_eq!(check(&packet()), Ok(28));
        let padded = with(|p| p.extend_from_slice(&[0; 18]));
        assert_eq!(
            check(&padded),
            Ok(28),
            "Ethernet padding is not the packet's"
        );
    }

    #[test]
    fn each_fault_has_its_own_reason() {
        use Ip4InputError::*;
        let cases: Vec<(&str, Vec<u8>, Ip4InputError)> = vec![
            ("19 bytes", packet()[..19].to_vec(), Truncated),
            ("version 6", refilled(|p| p[0] = 0x65), BadVersion),
            (
                "header length 16",
                refilled(|p| p[0] = 0x44),
                BadHeaderLength,
            ),
            (
                "header length 60 in 28 bytes",
                with(|p| p[0] = 0x4f),
                Truncated,
            ),
            ("a flipped header bit", with(|p| p[8] ^= 1), BadChecksum),
            ("total length 19", refilled(|p| p[3] = 19), BadLength),
            (
                "total length past the frame",
                refilled(|p| p[3] = 29),
                BadLength,
            ),
            ("multicast source", refilled(|p| p[12] = 224), MartianSource),
            (
                "source 0.0.0.0",
                refilled(|p| p[12..16].fill(0)),
                MartianSource,
            ),
            ("loopback source", refilled(|p| p[12] = 127), MartianSource),
            (
                "broadcast destination",
                refilled(|p| p[16..20].fill(255)),
                NotRouted,
            ),
            (
                "multicast destination",
                refilled(|p| p[16] = 239),
                NotRouted,
            ),
        ];
        for (what, bytes, want) in cases {
            assert_eq!(check(&bytes), Err(want), "{what}");
        }
    }

    #[test]
    fn no_length_panics() {
        let p = packet();
        for n in 0..p.len() {
            let _ = check(&p[..n]);
        }
    }
}
