//! `vxlan-decap`: a VXLAN datagram for the gateway (from `ip-local`, its UDP
//! payload, with the outer source address and the UDP port it was sent to in the
//! `addr` metadata) becomes the Ethernet frame it carries, on the tunnel whose VNI,
//! remote and port it matches, and goes to `l2-xconnect`. Each way a datagram can
//! fail is its own counter.

use crate::arena::Handle;
use crate::context::Context;
use crate::counters::NodeCounters;
use crate::nodes::{L2Xconnect, NO_PORT, PerPacket};
use wire::{ethernet, vxlan};

crate::node_errors! {
    /// Why vxlan-decap drops a datagram.
    pub enum VxlanDecapError {
        Truncated => "truncated", "Shorter than a VXLAN header.";
        BadFlags => "bad-flags", "The I flag missing, or another flag or a reserved bit set.";
        UnknownVni => "unknown-vni", "No tunnel has this VNI with this remote and port.";
        RuntInner => "runt-inner", "The frame inside is shorter than an Ethernet header.";
    }
}

#[repr(u16)]
enum Next {
    Xconnect = 0,
}

pub struct VxlanDecap;

impl VxlanDecap {
    pub const NAME: &'static str = "vxlan-decap";
}

impl PerPacket for VxlanDecap {
    per_packet_node!(errors: VxlanDecapError, next: [L2Xconnect::NAME]);

    fn one(
        &mut self,
        cx: &mut Context,
        h: Handle,
        _: &mut NodeCounters,
    ) -> Result<u16, VxlanDecapError> {
        let m = *cx.arena.meta(h);
        let header = vxlan::Header::new_checked(cx.arena.data(h)).map_err(|e| match e {
            wire::Error::Truncated => VxlanDecapError::Truncated,
            _ => VxlanDecapError::BadFlags,
        })?;
        let id = cx
            .tunnels
            .vxlan
            .find(header.vni(), m.addr.ip(), m.addr.port())
            .ok_or(VxlanDecapError::UnknownVni)?;
        if header.payload().len() < ethernet::HEADER_LEN {
            return Err(VxlanDecapError::RuntInner);
        }
        let m = cx.arena.meta_mut(h);
        m.offset += vxlan::HEADER_LEN as u16;
        m.len -= vxlan::HEADER_LEN as u16;
        m.peer = u32::from(id.0);
        m.port = NO_PORT;
        Ok(Next::Xconnect as u16)
    }
}
