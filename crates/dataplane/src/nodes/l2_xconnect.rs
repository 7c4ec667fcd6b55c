//! `l2-xconnect`: a frame received on a cross-connected interface goes to the one
//! its cross-connect names (see `l2`), as it is: out of a port (`port-output`) or
//! into a VXLAN tunnel (`vxlan-encap`). Where it came from is in its metadata: a
//! port (from `ethernet-input`) or, with `peer` set, a VXLAN tunnel (from
//! `vxlan-decap`).

use crate::arena::Handle;
use crate::context::Context;
use crate::counters::NodeCounters;
use crate::fib::PortId;
use crate::l2::L2Interface;
use crate::nodes::{NO_PORT, PerPacket, PortOutput, VxlanEncap};
use crate::vxlan::VxlanId;
use wire::ethernet;

crate::node_errors! {
    /// Why l2-xconnect drops a frame.
    pub enum L2XconnectError {
        NoXconnect => "no-xconnect", "From an interface with no cross-connect.";
        NoPort => "no-port", "For a port that is not configured.";
        TooBig => "too-big", "Larger than the port it leaves by carries (its MTU, an Ethernet header and up to two VLAN tags).";
    }
}

#[repr(u16)]
enum Next {
    Port = 0,
    Vxlan = 1,
}

/// Bytes a frame may have past the port's MTU: the Ethernet header and one tag.
/// How many VLAN tags (802.1Q, 802.1ad) lead a frame, up to two: each lets it be
/// 4 bytes over the port's MTU and its Ethernet header.
fn vlan_tags(frame: &[u8]) -> usize {
    let is_tag = |at: usize| matches!(frame.get(at..at + 2), Some([0x81, 0x00] | [0x88, 0xa8]));
    match (is_tag(12), is_tag(16)) {
        (true, true) => 2,
        (true, false) => 1,
        _ => 0,
    }
}

pub struct L2Xconnect;

impl L2Xconnect {
    pub const NAME: &'static str = "l2-xconnect";
}

impl PerPacket for L2Xconnect {
    per_packet_node!(errors: L2XconnectError, next: [PortOutput::NAME, VxlanEncap::NAME]);

    fn one(
        &mut self,
        cx: &mut Context,
        h: Handle,
        _: &mut NodeCounters,
    ) -> Result<u16, L2XconnectError> {
        let m = *cx.arena.meta(h);
        let rx = if m.peer == u32::MAX {
            L2Interface::Port(PortId(m.port))
        } else {
            L2Interface::Vxlan(VxlanId(m.peer as u16))
        };
        match cx.l2.target(rx).ok_or(L2XconnectError::NoXconnect)? {
            L2Interface::Port(p) => {
                let port = cx.ip.interfaces.get(p).ok_or(L2XconnectError::NoPort)?;
                let header =
                    ethernet::HEADER_LEN + ethernet::VLAN_TAG_LEN * vlan_tags(cx.arena.data(h));
                if usize::from(m.len) > usize::from(port.mtu) + header {
                    return Err(L2XconnectError::TooBig);
                }
                let m = cx.arena.meta_mut(h);
                m.port = p.0;
                m.peer = u32::MAX;
                Ok(Next::Port as u16)
            }
            L2Interface::Vxlan(v) => {
                let m = cx.arena.meta_mut(h);
                m.peer = u32::from(v.0);
                m.port = NO_PORT;
                Ok(Next::Vxlan as u16)
            }
        }
    }
}
