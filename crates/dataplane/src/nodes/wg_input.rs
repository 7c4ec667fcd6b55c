//! `wg-input`: sorts datagrams from the outer socket by WireGuard message type.
//! Data goes on to `wg-decrypt`; handshake messages are handed to the protocol here
//! (they are rare and each costs a Diffie-Hellman, so they stay off the vector path);
//! anything malformed is dropped with its reason.

use crate::arena::Handle;
use crate::context::Context;
use crate::counters::NodeCounters;
use crate::graph::{FREE, Node, NodeInfo};
use crate::nodes::WgDecrypt;
use wire::wireguard::Message;
use wireguard::DropReason;

crate::node_errors! {
    /// Why wg-input drops a datagram: only what the protocol refuses.
    pub enum InputError {}
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
    const INFO: NodeInfo = NodeInfo {
        name: Self::NAME,
        next: &[WgDecrypt::NAME],
        errors: InputError::TABLE,
    };
}

impl Node<Context> for WgInput {
    fn info(&self) -> &NodeInfo {
        &Self::INFO
    }

    fn process(
        &mut self,
        cx: &mut Context,
        packets: &[Handle],
        next: &mut [u16],
        c: &mut NodeCounters,
    ) {
        for (i, &h) in packets.iter().enumerate() {
            let data = cx.arena.data(h);
            next[i] = match Message::parse(data) {
                Ok(Message::TransportData(_)) => Next::Decrypt as u16,
                Ok(handshake) => {
                    let src = cx.arena.meta(h).addr;
                    match cx
                        .tunnels
                        .wg
                        .device
                        .handle_handshake(handshake, src, cx.now)
                    {
                        Ok(()) => c.consumed += 1,
                        Err(reason) => c.drop(InputError::from(reason)),
                    }
                    FREE
                }
                Err(e) => {
                    c.drop(InputError::from(DropReason::from(e)));
                    FREE
                }
            };
        }
    }
}
