//! `wg-decrypt`: transport data in, inner IP packets out. Per frame: find each
//! packet's session by receiver index and pre-check its counter (no state changes),
//! decrypt the whole frame as one batch of AEAD ops, then for each packet that
//! verified: parse the inner header, check its source against the peer's allowed IPs,
//! and commit the counter (which is when the session, timers and endpoint change).

use crate::arena::{Arena, Handle};
use crate::counters::NodeCounters;
use crate::graph::Node;
use crate::nodes::Output;
use crate::wg::WgContext;
use crypto::{AeadOp, Algorithm, Direction, OpStatus, Span, TAG_LEN};
use wire::wireguard::{TRANSPORT_HEADER_LEN, TransportData};
use wireguard::{DropReason, RecvTicket};

#[repr(u16)]
enum Next {
    Tun = 0,
}

struct Pending {
    index: usize,
    ticket: RecvTicket,
    counter: u64,
}

#[derive(Default)]
pub struct WgDecrypt {
    ops: Vec<AeadOp>,
    pending: Vec<Pending>,
}

impl WgDecrypt {
    pub const NAME: &'static str = "wg-decrypt";
}

impl Node<WgContext> for WgDecrypt {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn next_nodes(&self) -> &'static [&'static str] {
        &[Output::TUN]
    }

    fn process(
        &mut self,
        cx: &mut WgContext,
        packets: &[Handle],
        next: &mut [u16],
        c: &mut NodeCounters,
    ) {
        self.ops.clear();
        self.pending.clear();
        for (i, &h) in packets.iter().enumerate() {
            // wg-input checked the type and the minimum length.
            let Ok(msg) = TransportData::new_checked(cx.arena.data(h)) else {
                c.drop(DropReason::Truncated);
                continue;
            };
            let (index, counter) = (msg.receiver_index(), msg.counter());
            let ticket = match cx.device.recv_ticket(index, counter, cx.now) {
                Ok(t) => t,
                Err(reason) => {
                    c.drop(reason);
                    continue;
                }
            };
            let m = cx.arena.meta(h);
            let text_len = m.len as usize - TRANSPORT_HEADER_LEN - TAG_LEN;
            let text = Arena::base(h) + m.offset as usize + TRANSPORT_HEADER_LEN;
            self.ops.push(AeadOp::in_place(
                Algorithm::ChaCha20Poly1305,
                ticket.key,
                Direction::Decrypt,
                crypto::seal::counter_nonce(counter),
                Span::EMPTY,
                Span::new(text as u32, text_len as u32),
            ));
            self.pending.push(Pending {
                index: i,
                ticket,
                counter,
            });
        }
        let keys = cx.device.keys().clone();
        cx.engines.process(&keys, cx.arena.mem_mut(), &mut self.ops);

        for (op, p) in self.ops.iter().zip(&self.pending) {
            let h = packets[p.index];
            if op.status != OpStatus::Ok {
                c.drop(if op.status == OpStatus::BadTag {
                    DropReason::BadTag
                } else {
                    DropReason::CryptoFailed
                });
                continue;
            }
            let meta = *cx.arena.meta(h);
            let plain_start = meta.offset as usize + TRANSPORT_HEADER_LEN;
            let plain_len = op.len as usize;
            let (inner_src, inner_len) = if plain_len == 0 {
                (None, 0) // keepalive
            } else {
                let buf = &cx.arena.data(h)[TRANSPORT_HEADER_LEN..TRANSPORT_HEADER_LEN + plain_len];
                match wire::IpPacket::parse(buf) {
                    Ok(ip) if ip.total_len() <= plain_len => (Some(ip.src_addr()), ip.total_len()),
                    _ => {
                        c.drop(DropReason::BadInnerPacket);
                        continue;
                    }
                }
            };
            if let Err(reason) = cx.device.recv_commit(
                &p.ticket,
                p.counter,
                inner_src,
                meta.len as usize,
                meta.addr,
                cx.now,
            ) {
                c.drop(reason);
                continue;
            }
            if inner_src.is_none() {
                c.consumed += 1;
                continue;
            }
            let m = cx.arena.meta_mut(h);
            m.offset = plain_start as u16;
            m.len = inner_len as u16; // strips the padding
            m.peer = p.ticket.peer.0;
            next[p.index] = Next::Tun as u16;
        }
    }
}
