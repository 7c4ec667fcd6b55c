//! `wg-decrypt`: transport data in, inner IP packets out. Per frame: find each
//! packet's session by receiver index and pre-check its counter (no state changes),
//! decrypt the whole frame as one batch of AEAD ops, then for each packet that
//! verified: parse the inner header, check its source against the peer's allowed IPs,
//! and commit the counter (which is when the session, timers and endpoint change).
//! With an asynchronous engine the frame is parked instead and `wg-decrypt-post`
//! finishes it.

use crate::arena::{Arena, Handle};
use crate::context::Context;
use crate::counters::NodeCounters;
use crate::graph::{FREE, Node, NodeInfo};
use crate::inflight::{Resume, park_frame};
use crate::nodes::{Output, Resumed};
use crypto::{AeadOp, Algorithm, Direction, OpStatus, Span, TAG_LEN};
use wire::wireguard::{TRANSPORT_HEADER_LEN, TransportData};
use wireguard::{DropReason, RecvTicket};

crate::node_errors! {
    /// Why wg-decrypt (and wg-decrypt-post) drop a packet, besides the protocol's
    /// reasons.
    pub enum DecryptError {
        EngineFailed => "engine-failed", "The crypto engine did not process the op.";
        NotParked => "not-parked", "At the post node without a returned frame (a bug).";
    }
    protocol DropReason;
}

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
    pub const POST: &'static str = "wg-decrypt-post";
    const INFO: NodeInfo = NodeInfo {
        name: Self::NAME,
        next: &[Output::TUN],
        errors: DecryptError::TABLE,
    };

    /// The node that finishes frames an asynchronous engine decrypted.
    pub fn post() -> Resumed {
        let info = NodeInfo {
            name: Self::POST,
            ..Self::INFO
        };
        Resumed::new(info, finish_resumed, DecryptError::NotParked.into())
    }

    /// Finds the packet's session and adds its op, or drops it (counted).
    fn prepare(&mut self, cx: &mut Context, i: usize, h: Handle, c: &mut NodeCounters) {
        // wg-input checked the type and the minimum length.
        let Ok(msg) = TransportData::new_checked(cx.arena.data(h)) else {
            c.drop(DecryptError::from(DropReason::Truncated));
            return;
        };
        let (index, counter) = (msg.receiver_index(), msg.counter());
        let ticket = match cx.tunnels.wg.device.recv_ticket(index, counter, cx.now) {
            Ok(t) => t,
            Err(reason) => {
                c.drop(DecryptError::from(reason));
                return;
            }
        };
        let m = cx.arena.meta(h);
        let text_len = m.len as usize - TRANSPORT_HEADER_LEN - TAG_LEN;
        let text = Arena::offset_of(h) + m.offset as usize + TRANSPORT_HEADER_LEN;
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
}

impl Node<Context> for WgDecrypt {
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
        self.ops.clear();
        self.pending.clear();
        for (i, &h) in packets.iter().enumerate() {
            self.prepare(cx, i, h, c);
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
        cx.run_ops(&mut self.ops);
        for (op, p) in self.ops.iter().zip(&self.pending) {
            next[p.index] = finish(cx, packets[p.index], op.status, &p.ticket, p.counter, c);
        }
    }
}

/// After the crypto: parse the inner packet, check its source, commit the counter,
/// and pass it on, or drop it.
fn finish(
    cx: &mut Context,
    h: Handle,
    status: OpStatus,
    ticket: &RecvTicket,
    counter: u64,
    c: &mut NodeCounters,
) -> u16 {
    match status {
        OpStatus::Ok => {}
        OpStatus::BadTag => {
            c.drop(DecryptError::from(DropReason::BadTag));
            return FREE;
        }
        _ => {
            c.drop(DecryptError::EngineFailed);
            return FREE;
        }
    }
    let meta = *cx.arena.meta(h);
    let plain_len = meta.len as usize - TRANSPORT_HEADER_LEN - TAG_LEN;
    let plain_start = meta.offset as usize + TRANSPORT_HEADER_LEN;
    let (inner_src, inner_len) = if plain_len == 0 {
        (None, 0) // keepalive
    } else {
        let buf = &cx.arena.data(h)[TRANSPORT_HEADER_LEN..TRANSPORT_HEADER_LEN + plain_len];
        match wire::IpPacket::parse(buf) {
            Ok(ip) if ip.total_len() <= plain_len => (Some(ip.src_addr()), ip.total_len()),
            _ => {
                c.drop(DecryptError::from(DropReason::BadInnerPacket));
                return FREE;
            }
        }
    };
    if let Err(reason) = cx.tunnels.wg.device.recv_commit(
        ticket,
        counter,
        inner_src,
        meta.len as usize,
        meta.addr,
        cx.now,
    ) {
        c.drop(DecryptError::from(reason));
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

fn finish_resumed(
    cx: &mut Context,
    h: Handle,
    status: OpStatus,
    resume: Resume,
    c: &mut NodeCounters,
) -> u16 {
    match resume {
        Resume::Decrypt { ticket, counter } => finish(cx, h, status, &ticket, counter, c),
        Resume::Encrypt { .. } => {
            c.drop(DecryptError::NotParked);
            FREE
        }
    }
}
