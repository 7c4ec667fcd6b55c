//! `vxlan-encap`: an Ethernet frame into its VXLAN tunnel (the tunnel's number is in
//! the `peer` metadata, from `l2-xconnect`): the VXLAN header, then the outer UDP
//! and IP headers in the headroom, from the tunnel's local address to its remote,
//! and on to `ip-lookup`, which routes the outer packet like the gateway's own:
//! into the WireGuard tunnel or out of a port.
//!
//! The outer header is what Linux's vxlan device sends by default: UDP source port
//! from a hash of the inner frame's flow (so a flow keeps one path and one queue at
//! the far end, RFC 7348 section 5), in the dynamic range; DF set on IPv4 (VXLAN
//! must not be fragmented, RFC 7348 section 4.3; a frame too large for the path is
//! dropped and counted here instead), no UDP checksum over IPv4, the checksum IPv6
//! requires.

use crate::arena::Handle;
use crate::context::Context;
use crate::counters::NodeCounters;
use crate::nodes::{IpLookup, NO_PORT, PerPacket};
use crate::vxlan::VxlanId;
use wire::{ethernet, ip, ipv4, ipv6, vxlan};

crate::node_errors! {
    /// Why vxlan-encap drops a frame.
    pub enum VxlanEncapError {
        NoTunnel => "no-tunnel", "For a VXLAN tunnel that is not configured.";
        TooBig => "too-big", "An inner frame larger than the tunnel's path carries without fragmenting.";
        NoHeadroom => "no-headroom", "No room in front of the frame for the outer headers.";
    }
}

#[repr(u16)]
enum Next {
    Lookup = 0,
}

pub struct VxlanEncap;

impl VxlanEncap {
    pub const NAME: &'static str = "vxlan-encap";
}

impl PerPacket for VxlanEncap {
    per_packet_node!(errors: VxlanEncapError, next: [IpLookup::NAME]);

    fn one(
        &mut self,
        cx: &mut Context,
        h: Handle,
        _: &mut NodeCounters,
    ) -> Result<u16, VxlanEncapError> {
        let m = *cx.arena.meta(h);
        let id = VxlanId(u16::try_from(m.peer).map_err(|_| VxlanEncapError::NoTunnel)?);
        let (t, headers) = cx
            .tunnels
            .vxlan
            .with_outer(id)
            .ok_or(VxlanEncapError::NoTunnel)?;
        let (start, len) = (usize::from(m.offset), usize::from(m.len));
        if len > t.max_frame {
            return Err(VxlanEncapError::TooBig);
        }
        let udp_end = headers.len();
        let outer = udp_end + vxlan::HEADER_LEN;
        let at = start
            .checked_sub(outer)
            .ok_or(VxlanEncapError::NoHeadroom)?;
        let sport = source_port(cx.arena.data(h));
        let vni = t.vni;
        let buf = &mut cx.arena.buffer_mut(h)[at..start + len];
        // Cannot fail: `outer` bytes lie in front of the frame.
        let _ = vxlan::emit(&mut buf[udp_end..], vni);
        headers.write_from_port(buf, sport);
        let m = cx.arena.meta_mut(h);
        m.offset = at as u16;
        m.len = (len + outer) as u16;
        m.peer = u32::MAX;
        m.port = NO_PORT;
        Ok(Next::Lookup as u16)
    }
}

/// The outer UDP source port for `frame`: 49152 up (the dynamic range), by a hash
/// of what stays the same across a flow's frames: the addresses and EtherType, and
/// for IPv4 and IPv6 the inner addresses, protocol and (TCP, UDP, not a later
/// fragment) ports. TTLs, lengths and checksums are left out: they change within a
/// flow, which must keep one port.
pub fn source_port(frame: &[u8]) -> u16 {
    let Some(header) = frame.get(..ethernet::HEADER_LEN) else {
        return 49152;
    };
    let mut h = Mix::default();
    h.word(u64_at(header, 0));
    h.word(u64::from(u32_at(header, 8)));
    let (mut kind, mut rest) = ([header[12], header[13]], &frame[ethernet::HEADER_LEN..]);
    if kind == [0x81, 0x00] && rest.len() >= 4 {
        h.word(u64::from(u32_at(rest, 0))); // the tag (its VLAN) and the real EtherType
        kind = [rest[2], rest[3]];
        rest = &rest[4..];
    }
    h.word(u64::from(u16::from_ne_bytes(kind)));
    let ports_at = match kind {
        [0x08, 0x00] if rest.len() >= ipv4::HEADER_LEN => {
            h.word(u64_at(rest, 12)); // source and destination
            h.word(u64::from(rest[9]));
            let ihl = usize::from(rest[0] & 0x0f) * 4;
            let later_fragment = u16::from_be_bytes([rest[6], rest[7]]) & 0x1fff != 0;
            (!later_fragment).then_some((rest[9], ihl))
        }
        [0x86, 0xdd] if rest.len() >= ipv6::HEADER_LEN => {
            for at in [8, 16, 24, 32] {
                h.word(u64_at(rest, at));
            }
            h.word(u64::from(rest[6]));
            Some((rest[6], ipv6::HEADER_LEN))
        }
        _ => None,
    };
    if let Some((proto, at)) = ports_at
        && (proto == ip::protocol::TCP || proto == ip::protocol::UDP)
        && rest.len() >= at + 4
    {
        h.word(u64::from(u32_at(rest, at)));
    }
    49152 | (h.finish() as u16 & 0x3fff)
}

/// `buf[at..at + 8]` as a word (the caller checked the length).
fn u64_at(buf: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[at..at + 8]);
    u64::from_ne_bytes(b)
}

fn u32_at(buf: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&buf[at..at + 4]);
    u32::from_ne_bytes(b)
}

/// A word-at-a-time multiplicative mix (as FxHash): a few cycles a word, good
/// enough to spread flows over paths. Not keyed: a sender choosing its flows can
/// choose their paths, which it can anyway by choosing its ports.
#[derive(Default)]
struct Mix(u64);

impl Mix {
    fn word(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn finish(&self) -> u64 {
        // Fold the high bits in: the port keeps only 14 of them.
        let h = self.0 ^ (self.0 >> 32);
        h ^ (h >> 16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipv4_udp(sport: u16, ttl: u8, id: u16) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
        let mut ip = vec![
            0x45, 0, 0, 32, 0, 0, 0x40, 0, ttl, 17, 0, 0, 198, 19, 0, 1, 198, 19, 0, 2,
        ];
        ip[4..6].copy_from_slice(&id.to_be_bytes());
        f.extend(ip);
        f.extend(sport.to_be_bytes());
        f.extend([0, 9, 0, 12, 0, 0, 1, 2, 3, 4]);
        f
    }

    #[test]
    fn a_flow_keeps_its_port_and_flows_spread() {
        let p = source_port(&ipv4_udp(1000, 64, 1));
        assert!(p >= 49152);
        assert_eq!(
            p,
            source_port(&ipv4_udp(1000, 12, 999)),
            "TTL and id left out"
        );
        let ports: std::collections::HashSet<u16> = (0..64)
            .map(|i| source_port(&ipv4_udp(1000 + i, 64, 1)))
            .collect();
        assert!(ports.len() > 48, "64 flows on {} ports", ports.len());
        // Anything short or unknown still gets a port.
        assert_eq!(source_port(&[1, 2, 3]), 49152);
        assert!(source_port(&[0u8; 60]) >= 49152);
    }
}
