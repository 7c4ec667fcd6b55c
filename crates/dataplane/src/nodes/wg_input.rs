//! `wg-input`: sorts datagrams from the outer socket by WireGuard message type.
//! Data goes on to `wg-decrypt`; handshake messages are handed to the protocol here
//! (they are rare and each costs a Diffie-Hellman, so they stay off the vector path);
//! anything malformed is dropped with its reason. A worker that follows the device's
//! owner hands handshake messages over to it.

use crate::arena::Handle;
use crate::context::Context;
use crate::counters::NodeCounters;
use crate::graph::FREE;
use crate::nodes::PerPacket;
use crate::nodes::WgDecrypt;
use wire::wireguard::Message;
use wireguard::DropReason;

crate::node_errors! {
    /// Why wg-input drops a datagram: only what the protocol refuses.
    pub enum InputError {
        HandOverFull => "hand-over-full", "A worker that follows the tunnel's owner had no room left in this run to hand it a handshake message.";
    }
    protocol DropReason;
}

#[repr(u16)]
enum Next {
    Decrypt = 0,
}

#[derive(Default)]
pub struct WgInput;

impl WgInput {
    pub const NAME: &'static str = "wg-input";
}

impl PerPacket for WgInput {
    per_packet_node!(errors: InputError, next: [WgDecrypt::NAME]);

    /// Data is nearly every datagram: once its type word and length check out it
    /// goes on, decided here; anything else is classified (and a handshake
    /// parsed) out of line.
    #[inline(always)]
    fn one(
        &mut self,
        cx: &mut Context,
        h: Handle,
        c: &mut NodeCounters,
    ) -> Result<u16, InputError> {
        if Message::is_transport_data(cx.arena.data(h)) {
            return Ok(Next::Decrypt as u16);
        }
        self.not_data(cx, h, c)
    }
}

impl WgInput {
    /// A datagram that is not transport data: a handshake message for the device,
    /// or refused with the reason the classification gives.
    #[inline(never)]
    fn not_data(
        &mut self,
        cx: &mut Context,
        h: Handle,
        c: &mut NodeCounters,
    ) -> Result<u16, InputError> {
        let data = cx.arena.data(h);
        let refused = |e| InputError::from(DropReason::from(e));
        match Message::parse(data).map_err(refused)? {
            Message::TransportData(_) => Ok(Next::Decrypt as u16),
            _ if cx.tunnels.wg.follower.is_some() => {
                // Handshakes are the device's, and the device is on its owner.
                let src = cx.arena.meta(h).addr;
                let f = cx
                    .tunnels
                    .wg
                    .follower
                    .as_mut()
                    .filter(|f| f.can_hand_over());
                let f = f.ok_or(InputError::HandOverFull)?;
                f.hand_over_handshake(src, data);
                c.consumed += 1;
                Ok(FREE)
            }
            handshake => {
                let src = cx.arena.meta(h).addr;
                cx.tunnels
                    .wg
                    .device
                    .handle_handshake(handshake, src, cx.now)?;
                c.consumed += 1;
                Ok(FREE)
            }
        }
    }
}
