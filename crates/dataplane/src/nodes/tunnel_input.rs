//! `tunnel-input`: inner packets a tunnel decrypted, on their way into the gateway's
//! routing. They pass the same checks as packets from a port (`ip4-input`,
//! `ip6-input`): the peer that sent them is authenticated, but what it wraps is not
//! trusted. They arrived on no port, which the metadata says from here on.

use crate::arena::Handle;
use crate::context::Context;
use crate::counters::NodeCounters;
use crate::nodes::{Ip4Input, Ip6Input, PerPacket};

crate::node_errors! {
    /// Why tunnel-input drops a packet.
    pub enum TunnelInputError {
        NotIp => "not-ip", "Neither IPv4 nor IPv6 (the tunnel checked this; a bug if counted).";
    }
}

#[repr(u16)]
enum Next {
    Ip4 = 0,
    Ip6 = 1,
}

/// The port number of a packet that came out of a tunnel.
pub const NO_PORT: u16 = u16::MAX;

pub struct TunnelInput;

impl TunnelInput {
    pub const NAME: &'static str = "tunnel-input";
}

impl PerPacket for TunnelInput {
    per_packet_node!(errors: TunnelInputError, next: [Ip4Input::NAME, Ip6Input::NAME]);

    fn one(
        &mut self,
        cx: &mut Context,
        h: Handle,
        _: &mut NodeCounters,
    ) -> Result<u16, TunnelInputError> {
        let version = cx.arena.data(h).first().map(|b| b >> 4);
        cx.arena.meta_mut(h).port = NO_PORT;
        match version {
            Some(4) => Ok(Next::Ip4 as u16),
            Some(6) => Ok(Next::Ip6 as u16),
            _ => Err(TunnelInputError::NotIp),
        }
    }
}
