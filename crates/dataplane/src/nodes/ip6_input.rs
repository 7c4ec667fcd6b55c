//! `ip6-input`: the checks every IPv6 packet from a port passes (RFC 8200): length,
//! version, payload length against the frame (anything beyond it is cut off), and a
//! source that a host can have. Multicast is not routed: a packet to a group the
//! gateway listens to (all nodes, or the solicited-node group of one of its
//! addresses, where neighbor solicitations come) goes to local delivery, any other
//! is dropped and counted. Hop limits are checked where a packet is forwarded.

use crate::arena::Handle;
use crate::context::Context;
use crate::counters::NodeCounters;
use crate::nodes::PerPacket;
use wire::ipv6;

crate::node_errors! {
    /// Why ip6-input drops a packet.
    pub enum Ip6InputError {
        Truncated => "truncated", "Shorter than an IPv6 header.";
        BadVersion => "bad-version", "The version field is not 6.";
        BadLength => "bad-length", "A payload length past the frame.";
        MartianSource => "martian-source", "A multicast or loopback source.";
        NotRouted => "not-routed", "A multicast destination the gateway does not listen to.";
    }
}

#[repr(u16)]
enum Next {
    Lookup = 0,
    Local = 1,
}

pub struct Ip6Input;

impl Ip6Input {
    pub const NAME: &'static str = "ip6-input";
    /// The node that routes what passes.
    pub const LOOKUP: &'static str = "ip-lookup";
    /// The node that takes what is for the gateway itself.
    pub const LOCAL: &'static str = "ip-local";
}

impl PerPacket for Ip6Input {
    per_packet_node!(errors: Ip6InputError, next: [Self::LOOKUP, Self::LOCAL]);

    fn one(
        &mut self,
        cx: &mut Context,
        h: Handle,
        _: &mut NodeCounters,
    ) -> Result<u16, Ip6InputError> {
        let (total, edge) = match check(cx.arena.data(h))? {
            Checked::Unicast(total) => (total, Next::Lookup),
            Checked::Multicast(total, group) if cx.ip.listens_to(&group) => (total, Next::Local),
            Checked::Multicast(..) => return Err(Ip6InputError::NotRouted),
        };
        cx.arena.meta_mut(h).len = total as u16;
        Ok(edge as u16)
    }
}

/// What the packet is, or why it is refused.
enum Checked {
    /// Unicast: to be routed. Holds the packet's true length.
    Unicast(usize),
    /// To a group: holds the length and the group.
    Multicast(usize, std::net::Ipv6Addr),
}

fn check(data: &[u8]) -> Result<Checked, Ip6InputError> {
    if data.len() < ipv6::HEADER_LEN {
        return Err(Ip6InputError::Truncated);
    }
    let p = ipv6::Packet::new_unchecked(data);
    if p.version() != ipv6::VERSION {
        return Err(Ip6InputError::BadVersion);
    }
    let total = p.total_len();
    if total > data.len() {
        return Err(Ip6InputError::BadLength);
    }
    let src = p.src_addr();
    if src.is_multicast() || src.is_loopback() {
        return Err(Ip6InputError::MartianSource);
    }
    let dst = p.dst_addr();
    Ok(if dst.is_multicast() {
        Checked::Multicast(total, dst)
    } else {
        Checked::Unicast(total)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A valid IPv6 packet with an 8-byte UDP payload, 2001:2::1 to 2001:2:1::1.
    fn packet() -> Vec<u8> {
        let mut p = vec![0u8; 48];
        p[0] = 0x60;
        p[5] = 8; // payload length
        p[6] = 17;
        p[7] = 64;
        p[8..10].copy_from_slice(&[0x20, 0x01]);
        p[10..12].copy_from_slice(&[0, 2]);
        p[23] = 1;
        p[24..26].copy_from_slice(&[0x20, 0x01]);
        p[26..28].copy_from_slice(&[0, 2]);
        p[28..30].copy_from_slice(&[0, 1]);
        p[39] = 1;
        p
    }

    fn with(f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut p = packet();
        f(&mut p);
        p
    }

    #[test]
    fn good_packets_pass_and_padding_is_cut() {
        assert!(matches!(check(&packet()), Ok(Checked::Unicast(48))));
        let padded = with(|p| p.extend_from_slice(&[0; 12]));
        assert!(matches!(check(&padded), Ok(Checked::Unicast(48))));
        let to_group = with(|p| {
            p[24..40].copy_from_slice(&[0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 1])
        });
        assert!(matches!(check(&to_group), Ok(Checked::Multicast(48, _))));
    }

    #[test]
    fn each_fault_has_its_own_reason() {
        use Ip6InputError::*;
        let cases: Vec<(&str, Vec<u8>, Ip6InputError)> = vec![
            ("39 bytes", packet()[..39].to_vec(), Truncated),
            ("version 4", with(|p| p[0] = 0x40), BadVersion),
            (
                "payload length past the frame",
                with(|p| p[5] = 9),
                BadLength,
            ),
            ("multicast source", with(|p| p[8] = 0xff), MartianSource),
            (
                "loopback source",
                with(|p| {
                    p[8..24].fill(0);
                    p[23] = 1;
                }),
                MartianSource,
            ),
        ];
        for (what, bytes, want) in cases {
            assert!(matches!(check(&bytes), Err(e) if e == want), "{what}");
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
