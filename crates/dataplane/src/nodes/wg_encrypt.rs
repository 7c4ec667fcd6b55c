//! `wg-encrypt`: inner IP packets in, transport data out. Per frame: pick each
//! packet's peer by destination (allowed IPs), take a counter on its current session
//! (or stage the packet and ask for a handshake), pad (never past the interface MTU)
//! and frame it in place using the
//! headroom, encrypt the whole frame as one batch of AEAD ops, and queue the results
//! for the outer socket.

use crate::arena::{Arena, FRAME_SIZE, Handle};
use crate::counters::NodeCounters;
use crate::graph::Node;
use crate::nodes::Output;
use crate::wg::{Resume, WgContext, park_frame};
use crypto::{AeadOp, Algorithm, Direction, OpStatus, Span, TAG_LEN};
use wire::wireguard::{TRANSPORT_HEADER_LEN, TransportData, padded_len};
use wireguard::{DropReason, PeerId, SendError};

#[repr(u16)]
enum Next {
    Udp = 0,
}

struct Pending {
    index: usize,
    peer: PeerId,
    inner_len: usize,
}

#[derive(Default)]
pub struct WgEncrypt {
    ops: Vec<AeadOp>,
    pending: Vec<Pending>,
}

impl WgEncrypt {
    pub const NAME: &'static str = "wg-encrypt";
}

impl Node<WgContext> for WgEncrypt {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn next_nodes(&self) -> &'static [&'static str] {
        &[Output::UDP]
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
            let data = cx.arena.data(h);
            // An empty packet is a keepalive the device staged for its peer.
            let peer = if data.is_empty() {
                match cx.arena.meta(h).peer {
                    u32::MAX => None,
                    p => Some(PeerId(p)),
                }
            } else {
                match wire::ip::addrs(data) {
                    Ok((_, dst)) => cx.device.peer_for_destination(dst),
                    Err(_) => {
                        c.drop(DropReason::BadInnerPacket);
                        continue;
                    }
                }
            };
            let Some(peer) = peer else {
                c.drop(DropReason::NoPeerForDestination);
                continue;
            };
            let ticket = match cx.device.send_ticket(peer, cx.now) {
                Ok(t) => t,
                Err(SendError::NoSession) => {
                    let bytes = cx.arena.data(h).to_vec();
                    if !cx.device.stage(peer, bytes, cx.now) {
                        c.drop(DropReason::StagedOverflow);
                    }
                    c.consumed += 1;
                    continue;
                }
                Err(SendError::NoEndpoint) => {
                    c.drop(DropReason::NoEndpoint);
                    continue;
                }
            };
            let m = *cx.arena.meta(h);
            let inner_len = m.len as usize;
            let padded = padded_len(inner_len, cx.mtu);
            let start = m.offset as usize;
            if start < TRANSPORT_HEADER_LEN || start + padded + TAG_LEN > FRAME_SIZE {
                c.drop(DropReason::TooBig);
                continue;
            }
            let buf = cx.arena.buffer_mut(h);
            buf[start + inner_len..start + padded].fill(0);
            let header = start - TRANSPORT_HEADER_LEN;
            // Cannot fail: the buffer holds a header, the text and the tag.
            let _ = TransportData::emit(
                &mut buf[header..start + padded + TAG_LEN],
                ticket.receiver_index,
                ticket.counter,
            );
            let text = Arena::base(h) + start;
            self.ops.push(AeadOp::in_place(
                Algorithm::ChaCha20Poly1305,
                ticket.key,
                Direction::Encrypt,
                crypto::seal::counter_nonce(ticket.counter),
                Span::EMPTY,
                Span::new(text as u32, padded as u32),
            ));
            let meta = cx.arena.meta_mut(h);
            meta.offset = header as u16;
            meta.len = (TRANSPORT_HEADER_LEN + padded + TAG_LEN) as u16;
            meta.addr = ticket.endpoint;
            meta.peer = peer.0;
            self.pending.push(Pending {
                index: i,
                peer,
                inner_len,
            });
        }
        if self.ops.is_empty() {
            return;
        }
        let parked = self.pending.iter().map(|p| {
            let resume = Resume::Encrypt {
                peer: p.peer,
                inner_len: p.inner_len,
            };
            (p.index, packets[p.index], resume)
        });
        if park_frame(cx, &mut self.ops, parked, next) {
            return;
        }
        let keys = cx.device.keys().clone();
        cx.engines.process(&keys, cx.arena.mem_mut(), &mut self.ops);
        for (op, p) in self.ops.iter().zip(&self.pending) {
            next[p.index] = finish(cx, packets[p.index], op.status, p.peer, p.inner_len, c);
        }
    }
}

/// After the crypto: count the send and pass the packet on, or drop it.
pub(crate) fn finish(
    cx: &mut WgContext,
    h: Handle,
    status: OpStatus,
    peer: PeerId,
    inner_len: usize,
    c: &mut NodeCounters,
) -> u16 {
    if status != OpStatus::Ok {
        c.drop(DropReason::CryptoFailed);
        return crate::graph::FREE;
    }
    let wire_len = cx.arena.meta(h).len as usize;
    cx.device.note_sent(peer, inner_len, wire_len, cx.now);
    Next::Udp as u16
}

/// `wg-encrypt-post`: finishes packets whose frame an asynchronous engine encrypted.
#[derive(Default)]
pub struct WgEncryptPost;

impl WgEncryptPost {
    pub const NAME: &'static str = "wg-encrypt-post";
}

impl Node<WgContext> for WgEncryptPost {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn next_nodes(&self) -> &'static [&'static str] {
        &[Output::UDP]
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
                .resumed_encrypt
                .pop_front()
                .expect("a resumed packet per packet");
            debug_assert_eq!(rh, h, "resumed in order");
            if let Resume::Encrypt { peer, inner_len } = resume {
                next[i] = finish(cx, h, status, peer, inner_len, c);
            }
        }
    }
}
