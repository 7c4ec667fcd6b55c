//! `wg-decrypt`: transport data in, inner IP packets out. Per frame: find each
//! packet's session by receiver index and pre-check its counter (no state changes),
//! decrypt the whole frame as one batch of AEAD ops, then for each packet that
//! verified: parse the inner header, check its source against the peer's allowed IPs,
//! and commit the counter (which is when the session, timers and endpoint change).
//! With an asynchronous engine the frame is parked instead and `wg-decrypt-post`
//! finishes it.

use crate::arena::{Arena, Handle};
use crate::context::Context;
use crate::counters::{ErrorSlot, NodeCounters};
use crate::graph::{FREE, NodeInfo};
use crate::inflight::Resume;
use crate::nodes::Output;
use crate::nodes::aead::{AeadNode, AeadStage, PostNode};
use crypto::{AeadOp, Algorithm, Direction, OpStatus, Span, TAG_LEN};
use wire::wireguard::{TRANSPORT_HEADER_LEN, TransportData};
use wireguard::DropReason;

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

/// The wg-decrypt stage: see the module doc.
pub struct WgDecrypt;

impl WgDecrypt {
    pub const NAME: &'static str = "wg-decrypt";
    pub const POST: &'static str = "wg-decrypt-post";

    pub fn node() -> AeadNode<WgDecrypt> {
        AeadNode::default()
    }

    /// The node that finishes frames an asynchronous engine decrypted.
    pub fn post() -> PostNode<WgDecrypt> {
        PostNode::default()
    }
}

impl AeadStage for WgDecrypt {
    const INFO: NodeInfo = NodeInfo {
        name: Self::NAME,
        next: &[Output::TUN],
        errors: DecryptError::TABLE,
    };
    const POST_INFO: NodeInfo = NodeInfo {
        name: Self::POST,
        ..Self::INFO
    };

    fn not_parked() -> ErrorSlot {
        DecryptError::NotParked.into()
    }

    /// The frame's runs of packets go to the device (see `wireguard::runs`).
    fn end_frame(cx: &mut Context) {
        cx.tunnels.wg.end_frame(cx.now);
    }

    /// Finds the packet's session and makes its op, or drops it (counted).
    #[inline(always)]
    fn prepare(
        cx: &mut Context,
        h: Handle,
        _next: &mut u16,
        c: &mut NodeCounters,
    ) -> Option<(AeadOp, Resume)> {
        // wg-input checked the type and the minimum length.
        let Ok(msg) = TransportData::new_checked(cx.arena.data(h)) else {
            c.drop(DecryptError::from(DropReason::Truncated));
            return None;
        };
        let (index, counter) = (msg.receiver_index(), msg.counter());
        let ticket = match cx.tunnels.wg.recv_ticket(index, counter, cx.now) {
            Ok(t) => t,
            Err(reason) => {
                c.drop(DecryptError::from(reason));
                return None;
            }
        };
        let m = cx.arena.meta(h);
        let text_len = m.len as usize - TRANSPORT_HEADER_LEN - TAG_LEN;
        let text = Arena::offset_of(h) + m.offset as usize + TRANSPORT_HEADER_LEN;
        let op = AeadOp::in_place(
            Algorithm::ChaCha20Poly1305,
            ticket.key,
            Direction::Decrypt,
            crypto::seal::counter_nonce(counter),
            Span::EMPTY,
            Span::new(text as u32, text_len as u32),
        );
        Some((op, Resume::Decrypt { ticket, counter }))
    }

    /// After the crypto: parse the inner packet, check its source, commit the
    /// counter, and pass it on, or drop it.
    fn finish(
        cx: &mut Context,
        h: Handle,
        status: OpStatus,
        resume: Resume,
        c: &mut NodeCounters,
    ) -> u16 {
        let Resume::Decrypt { ticket, counter } = resume else {
            c.drop(DecryptError::NotParked);
            return FREE;
        };
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
        if let Err(reason) = cx.tunnels.wg.recv_commit(
            &ticket,
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
}
