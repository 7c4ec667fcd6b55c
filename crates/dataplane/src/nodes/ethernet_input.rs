//! `ethernet-input`: frames from a port's driver to the node of their protocol, or,
//! from a cross-connected port, all of them whole to `l2-xconnect`. A
//! frame must be addressed to the port, to broadcast or to a multicast group (the IP
//! nodes decide which groups they take); its Ethernet header is stepped over, so the
//! next node sees the ARP packet or the IP packet. The port is in the packet's
//! metadata, set by the driver.

use crate::arena::Handle;
use crate::context::Context;
use crate::counters::NodeCounters;
use crate::nodes::PerPacket;
use wire::ethernet::{self, MacAddr, ethertype};

crate::node_errors! {
    /// Why ethernet-input drops a frame.
    pub enum EthernetInputError {
        Runt => "runt", "Shorter than an Ethernet header.";
        Tagged => "tagged", "A VLAN-tagged frame: the port has no VLANs.";
        UnknownEthertype => "unknown-ethertype", "Neither IPv4, IPv6 nor ARP.";
        NotForUs => "not-for-us", "Unicast to another station's address.";
        UnicastInBroadcast => "unicast-in-broadcast", "An IP packet in a broadcast or multicast frame whose destination is neither multicast nor the limited broadcast (a unicast or a directed broadcast): never routed (RFC 1812 5.3.4).";
        UnknownPort => "unknown-port", "From a port that is not configured.";
    }
}

#[repr(u16)]
enum Next {
    Arp = 0,
    Ip4 = 1,
    Ip6 = 2,
    Xconnect = 3,
}

pub struct EthernetInput;

impl EthernetInput {
    pub const NAME: &'static str = "ethernet-input";
    pub const ARP: &'static str = "arp-input";
}

impl PerPacket for EthernetInput {
    per_packet_node!(
        errors: EthernetInputError,
        next: [
            Self::ARP,
            crate::nodes::Ip4Input::NAME,
            crate::nodes::Ip6Input::NAME,
            crate::nodes::L2Xconnect::NAME,
        ]
    );

    fn one(
        &mut self,
        cx: &mut Context,
        h: Handle,
        _: &mut NodeCounters,
    ) -> Result<u16, EthernetInputError> {
        let (port, ours) = cx.port_of(h).ok_or(EthernetInputError::UnknownPort)?;
        if cx.l2.port_target(port).is_some() {
            // A cross-connected port: every frame goes on whole, whatever it holds.
            if cx.arena.data(h).len() < ethernet::HEADER_LEN {
                return Err(EthernetInputError::Runt);
            }
            return Ok(Next::Xconnect as u16);
        }
        let (edge, header) = classify(cx.arena.data(h), ours)?;
        let m = cx.arena.meta_mut(h);
        m.offset += header as u16;
        m.len -= header as u16;
        Ok(edge as u16)
    }
}

/// The next edge and header length of a frame that arrived on a port with address
/// `ours`, or why it is dropped.
fn classify(frame: &[u8], ours: MacAddr) -> Result<(Next, usize), EthernetInputError> {
    let f = ethernet::Frame::new_checked(frame).map_err(|e| match e {
        wire::Error::UnsupportedTag(_) => EthernetInputError::Tagged,
        _ => EthernetInputError::Runt,
    })?;
    if f.is_tagged() {
        return Err(EthernetInputError::Tagged);
    }
    let dst = f.dst_addr();
    if dst != ours && !dst.is_multicast() {
        return Err(EthernetInputError::NotForUs);
    }
    let next = match f.ethertype() {
        ethertype::ARP => Next::Arp,
        ethertype::IPV4 => Next::Ip4,
        ethertype::IPV6 => Next::Ip6,
        _ => return Err(EthernetInputError::UnknownEthertype),
    };
    if dst.is_multicast() && ip_dst_is_unicast(&next, &frame[f.header_len()..]) {
        return Err(EthernetInputError::UnicastInBroadcast);
    }
    Ok((next, f.header_len()))
}

/// Whether an IP packet (as far as it is there) is addressed to a unicast
/// destination: neither multicast nor the IPv4 limited broadcast. A packet too
/// short to tell goes on, for the IP input to refuse.
fn ip_dst_is_unicast(next: &Next, ip: &[u8]) -> bool {
    match next {
        Next::Ip4 => ip
            .get(16..20)
            .is_some_and(|d| d[0] & 0xf0 != 0xe0 && d != [0xff; 4]),
        Next::Ip6 => ip.get(24).is_some_and(|&b| b != 0xff),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OURS: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 1]);

    fn frame(dst: [u8; 6], ethertype: u16) -> Vec<u8> {
        let mut f = dst.to_vec();
        f.extend_from_slice(&[0x02, 0, 0, 0, 0, 9]);
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(&[0; 46]);
        f
    }

    #[test]
    fn frames_go_to_their_protocol() {
        let e = |dst, t| classify(&frame(dst, t), OURS).map(|(n, l)| (n as u16, l));
        assert_eq!(e(OURS.0, ethertype::IPV4), Ok((Next::Ip4 as u16, 14)));
        assert_eq!(e(OURS.0, ethertype::IPV6), Ok((Next::Ip6 as u16, 14)));
        assert_eq!(e([0xff; 6], ethertype::ARP), Ok((Next::Arp as u16, 14)));
        let group = [0x33, 0x33, 0xff, 0, 0, 1];
        // A multicast frame carries a multicast IPv6 destination (ff02::1:ff00:1).
        let mut nd = frame(group, ethertype::IPV6);
        nd[14 + 24] = 0xff;
        assert_eq!(
            classify(&nd, OURS).map(|(n, l)| (n as u16, l)),
            Ok((Next::Ip6 as u16, 14))
        );
    }

    #[test]
    fn unicast_ip_in_a_broadcast_frame_is_refused() {
        let mut f = frame([0xff; 6], ethertype::IPV4);
        f[14] = 0x45;
        f[14 + 16..14 + 20].copy_from_slice(&[198, 19, 3, 10]);
        assert_eq!(
            classify(&f, OURS).err(),
            Some(EthernetInputError::UnicastInBroadcast)
        );
        f[14 + 16..14 + 20].copy_from_slice(&[255; 4]);
        assert!(classify(&f, OURS).is_ok());
        f[14 + 16..14 + 20].copy_from_slice(&[224, 0, 0, 251]);
        assert!(classify(&f, OURS).is_ok());
        let mut f = frame([0x33, 0x33, 0, 0, 0, 1], ethertype::IPV6);
        f.resize(14 + 40, 0);
        f[14 + 24] = 0x20;
        assert_eq!(
            classify(&f, OURS).err(),
            Some(EthernetInputError::UnicastInBroadcast)
        );
        f[14 + 24] = 0xff;
        assert!(classify(&f, OURS).is_ok());
    }

    #[test]
    fn each_fault_has_its_own_reason() {
        use EthernetInputError::*;
        let other = [0x02, 0, 0, 0, 0, 2];
        assert_eq!(
            classify(&frame(OURS.0, 0x0800)[..13], OURS).err(),
            Some(Runt)
        );
        assert_eq!(classify(&frame(other, 0x0800), OURS).err(), Some(NotForUs));
        assert_eq!(
            classify(&frame(OURS.0, 0x88cc), OURS).err(),
            Some(UnknownEthertype)
        );
        let mut tagged = frame(OURS.0, ethertype::VLAN);
        tagged[14..18].copy_from_slice(&[0, 5, 0x08, 0]);
        assert_eq!(classify(&tagged, OURS).err(), Some(Tagged));
        assert_eq!(
            classify(&frame(OURS.0, ethertype::QINQ), OURS).err(),
            Some(Tagged)
        );
    }
}
