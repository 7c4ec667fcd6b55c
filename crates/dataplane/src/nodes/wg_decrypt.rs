//! `wg-decrypt`: transport data in, inner IP packets out. Per frame: find each
//! packet's session by receiver index and pre-check its counter (no state changes),
//! decrypt the whole frame as one batch of AEAD ops, then for each packet that
//! verified: parse the inner header, check its source against the peer's allowed IPs,
//! and commit the counter (which is when the session, timers and endpoint change).

use crate::arena::{Arena, Handle};
use crate::counters::NodeCounters;
use crate::graph::{FREE, Node};
use crate::nodes::Output;
use crate::wg::{Resume, WgContext, park_frame};
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
        if self.ops.is_empty() {
            return;
        }
        let parked = self.pending.iter().map(|p| {
            let resume = Resume::Decrypt {
                ticket: p.ticket,
                counter: p.counter,
            };
            (p.index, packets[p.index], resume)
        });
        if park_frame(cx, &mut self.ops, parked, next) {
            return;
        }
        let keys = cx.device.keys().clone();
        cx.engines.process(&keys, cx.arena.mem_mut(), &mut self.ops);
        for (op, p) in self.ops.iter().zip(&self.pending) {
            next[p.index] = finish(
                cx,
                packets[p.index],
                op.status,
                op.len as usize,
                &p.ticket,
                p.counter,
                c,
            );
        }
    }
}

/// After the crypto: parse the inner packet, check its source, commit the counter,
/// and pass it on, or drop it.
pub(crate) fn finish(
    cx: &mut WgContext,
    h: Handle,
    status: OpStatus,
    plain_len: usize,
    ticket: &RecvTicket,
    counter: u64,
    c: &mut NodeCounters,
) -> u16 {
    if status != OpStatus::Ok {
        c.drop(if status == OpStatus::BadTag {
            DropReason::BadTag
        } else {
            DropReason::CryptoFailed
        });
        return FREE;
    }
    let meta = *cx.arena.meta(h);
    let plain_start = meta.offset as usize + TRANSPORT_HEADER_LEN;
    let (inner_src, inner_len) = if plain_len == 0 {
        (None, 0) // keepalive
    } else {
        let buf = &cx.arena.data(h)[TRANSPORT_HEADER_LEN..TRANSPORT_HEADER_LEN + plain_len];
        match wire::IpPacket::parse(buf) {
            Ok(ip) if ip.total_len() <= plain_len => (Some(ip.src_addr()), ip.total_len()),
            _ => {
                c.drop(DropReason::BadInnerPacket);
                return FREE;
            }
        }
    };
    if let Err(reason) = cx.device.recv_commit(
        ticket,
        counter,
        inner_src,
        meta.len as usize,
        meta.addr,
        cx.now,
    ) {
        c.drop(reason);
        return FREE;
    }
    if inner_src.is_none() {
        c.consumed += 1;
        return FREE;
    }
    let m = cx.arena.meta_mut(h);
    m.offset = plain_start as u16;
    m.len = inner_len as u16; // strips the padding
    m.peer = ticket.peer.0;
    Next::Tun as u16
}

/// `wg-decrypt-post`: finishes packets whose frame an asynchronous engine decrypted.
#[derive(Default)]
pub struct WgDecryptPost;

impl WgDecryptPost {
    pub const NAME: &'static str = "wg-decrypt-post";
}

impl Node<WgContext> for WgDecryptPost {
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
        for (i, &h) in packets.iter().enumerate() {
            let (rh, status, resume) = cx
                .resumed_decrypt
                .pop_front()
                .expect("a resumed packet per packet");
            debug_assert_eq!(rh, h, "resumed in order");
            if let Resume::Decrypt { ticket, counter } = resume {
                let plain_len = cx.arena.meta(h).len as usize - TRANSPORT_HEADER_LEN - TAG_LEN;
                next[i] = finish(cx, h, status, plain_len, &ticket, counter, c);
            }
        }
    }
}
