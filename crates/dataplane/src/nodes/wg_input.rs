//! `wg-input`: sorts datagrams from the outer socket by WireGuard message type.
//! Data goes on to `wg-decrypt`; handshake messages are handed to the protocol here
//! (they are rare and each costs a Diffie-Hellman, so they stay off the vector path);
//! anything malformed is dropped with its reason.

use crate::arena::Handle;
use crate::counters::NodeCounters;
use crate::graph::{FREE, Node};
use crate::nodes::WgDecrypt;
use crate::wg::WgContext;
use wire::wireguard::Message;
use wireguard::DropReason;

#[repr(u16)]
enum Next {
    Decrypt = 0,
}

#[derive(Default)]
pub struct WgInput;

impl WgInput {
    pub const NAME: &'static str = "wg-input";
}

impl Node<WgContext> for WgInput {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn next_nodes(&self) -> &'static [&'static str] {
        &[WgDecrypt::NAME]
    }

    fn process(
        &mut self,
        cx: &mut WgContext,
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
                    match cx.device.handle_handshake(handshake, src, cx.now) {
                        Ok(()) => c.consumed += 1,
                        Err(reason) => c.drop(reason),
                    }
                    FREE
                }
                Err(e) => {
                    c.drop(DropReason::from(e));
                    FREE
                }
            };
        }
    }
}
