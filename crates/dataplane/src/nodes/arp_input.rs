//! `arp-input`: ARP for the gateway's IPv4 addresses (RFC 826). A request for an
//! address of the port it came in on is answered in place, in the same buffer, and
//! its sender is kept as a neighbor; a reply to us completes a neighbor (and sends
//! what waited for it); anything else only refreshes a neighbor already known and
//! is dropped. A storm of requests costs one reply each and at most a bounded
//! neighbor table.

use crate::arena::Handle;
use crate::context::Context;
use crate::counters::NodeCounters;
use crate::graph::FREE;
use crate::neighbor::Heard;
use crate::nodes::PerPacket;
use crate::nodes::ip_rewrite::push_ethernet;
use std::net::IpAddr;
use wire::arp;
use wire::ethernet::ethertype;

crate::node_errors! {
    /// Why arp-input drops a packet.
    pub enum ArpInputError {
        Malformed => "malformed", "Not an ARP packet for Ethernet and IPv4.";
        BadSender => "bad-sender", "A sender with a multicast Ethernet address.";
        NotForUs => "not-for-us", "For an address that is not the port's (neighbors learnt only).";
        UnknownPort => "unknown-port", "From a port that is not configured.";
        AddressConflict => "address-conflict", "Another station claims one of the gateway's own addresses (a duplicate address on the LAN): not learned.";
    }
}

#[repr(u16)]
enum Next {
    Output = 0,
}

pub struct ArpInput;

impl ArpInput {
    pub const NAME: &'static str = "arp-input";
}

impl PerPacket for ArpInput {
    per_packet_node!(errors: ArpInputError, next: [crate::nodes::PortOutput::NAME]);

    fn one(
        &mut self,
        cx: &mut Context,
        h: Handle,
        c: &mut NodeCounters,
    ) -> Result<u16, ArpInputError> {
        let (port, ours) = cx.port_of(h).ok_or(ArpInputError::UnknownPort)?;
        let packet =
            arp::Packet::new_checked(cx.arena.data(h)).map_err(|_| ArpInputError::Malformed)?;
        let request = packet.repr();
        if !request.sender_mac.is_unicast() {
            return Err(ArpInputError::BadSender);
        }
        let for_us = cx.ip.interfaces.owner(IpAddr::V4(request.target_ip)) == Some(port);
        let sender = IpAddr::V4(request.sender_ip);
        // Never a neighbor entry for an address of our own: whoever claims one is
        // in conflict with us (a gratuitous ARP, a misconfigured host).
        if cx.ip.interfaces.owner(sender).is_some() {
            cx.ip.note_conflict(port, sender, request.sender_mac.0);
            return Err(ArpInputError::AddressConflict);
        }
        let heard = match (for_us, request.operation) {
            (true, arp::operation::REPLY) => Heard::Answer,
            (true, _) => Heard::ToUs,
            (false, _) => Heard::InPassing,
        };
        // An address probe (RFC 5227) has sender 0.0.0.0: nothing to learn.
        if !request.sender_ip.is_unspecified() {
            let now = cx.now;
            cx.ip
                .learn((port, sender, request.sender_mac.0), heard, now);
        }
        if !for_us {
            return Err(ArpInputError::NotForUs);
        }
        if request.operation != arp::operation::REQUEST {
            c.consumed += 1;
            return Ok(FREE);
        }
        // The reply takes the request's place in its buffer.
        if arp::emit_reply(cx.arena.data_mut(h), &request, ours).is_err() {
            return Err(ArpInputError::Malformed);
        }
        cx.arena.meta_mut(h).len = arp::PACKET_LEN as u16;
        push_ethernet(cx, h, request.sender_mac.0, ours.0, ethertype::ARP);
        Ok(Next::Output as u16)
    }
}
