//! `wg-encrypt`: inner IP packets in, transport data out. Per frame: pick each
//! packet's peer by destination (allowed IPs), take a counter on its current session
//! (or stage the packet and ask for a handshake), pad (never past the interface MTU)
//! and frame it in place using the headroom, encrypt the whole frame as one batch of
//! AEAD ops, and queue the results for the outer socket. With an asynchronous engine
//! the frame is parked instead and `wg-encrypt-post` finishes it.

use crate::arena::Handle;
use crate::context::{Context, WgTunnel};
use crate::nodes::Output;
use crate::nodes::aead::{AeadStage, Skip};
use crate::resume::WgEncryptResume;
use crypto::{AeadOp, Algorithm, Direction, OpStatus, Span, TAG_LEN};
use std::net::IpAddr;
use std::time::Instant;
use wire::wireguard::{TRANSPORT_HEADER_LEN, TransportData, padded_len};
use wireguard::{DropReason, PeerId, SendError, SendTicket};

crate::node_errors! {
    /// Why wg-encrypt (and wg-encrypt-post) drop a packet, besides the protocol's
    /// reasons.
    pub enum EncryptError {
        TooBig => "too-big", "Too large for its buffer once framed and padded.";
        EngineFailed => "engine-failed", "The crypto engine did not process the op.";
        NoBuffer => "no-buffer", "No free buffer for a keepalive or handshake message the device made.";
        NotParked => "not-parked", "At the post node without a returned frame, or with another stage's record (a bug).";
    }
    protocol DropReason;
}

#[repr(u16)]
enum Next {
    Udp = 0,
}

/// The wg-encrypt stage: see the module doc.
pub struct WgEncrypt;

/// What wg-encrypt remembers while it prepares a frame, so that a run of packets
/// to one peer looks up the allowed IPs and finds the session once: the last
/// destination and its peer, and the last ticket taken.
#[derive(Default)]
pub struct SendMemo {
    route: Option<(IpAddr, Option<PeerId>)>,
    ticket: Option<(PeerId, SendTicket)>,
}

impl SendMemo {
    /// The ticket for the next packet to `peer`: the last one moved on to its next
    /// counter when it was `peer`'s, else a new one. Lent from the memo, so that the
    /// ticket is written once, where it stays.
    #[inline]
    fn ticket(
        &mut self,
        wg: &mut WgTunnel,
        peer: PeerId,
        now: Instant,
    ) -> Result<&SendTicket, SendError> {
        let advanced = match &mut self.ticket {
            Some((last, t)) if *last == peer => wg.advance_ticket(t),
            _ => false,
        };
        if !advanced {
            self.ticket = Some((peer, wg.send_ticket(peer, now)?));
        }
        // Set just above when it was not advanced.
        self.ticket
            .as_ref()
            .map(|(_, t)| t)
            .ok_or(SendError::NoSession)
    }
}

aead_stage!(WgEncrypt, name: "wg-encrypt", post: "wg-encrypt-post", next: [Output::UDP], errors: EncryptError);

impl AeadStage for WgEncrypt {
    type Error = EncryptError;
    type Resume = WgEncryptResume;
    type Scratch = ();
    type Memo = SendMemo;

    /// The frame's runs of packets go to the device (see `wireguard::runs`).
    fn end_frame(cx: &mut Context) {
        cx.tunnels.wg.end_frame(cx.now);
    }

    /// Frames one packet in place for its peer and makes its op, or stages it,
    /// hands it to the device's owner, or drops it.
    #[inline(always)]
    fn prepare(
        cx: &mut Context,
        memo: &mut SendMemo,
        h: Handle,
    ) -> Result<(AeadOp, WgEncryptResume), Skip<EncryptError>> {
        let wg = &mut cx.tunnels.wg;
        let data = cx.arena.data(h);
        // An empty packet is a keepalive the device staged for its peer.
        let peer = if data.is_empty() {
            match cx.arena.meta(h).peer {
                u32::MAX => None,
                p => Some(PeerId(p)),
            }
        } else {
            match wire::ip::dst_addr(data) {
                Ok(dst) => match memo.route {
                    Some((last, peer)) if last == dst => peer,
                    _ => {
                        let peer = wg.peer_for_destination(dst);
                        memo.route = Some((dst, peer));
                        peer
                    }
                },
                Err(_) => return Err(Skip::drop(DropReason::BadInnerPacket)),
            }
        };
        let Some(peer) = peer else {
            return Err(Skip::drop(DropReason::NoPeerForDestination));
        };
        let ticket = match memo.ticket(wg, peer, cx.now) {
            Ok(t) => t,
            Err(SendError::NoSession) if wg.follower.is_some() => {
                // Only the device's owner stages: the packet goes there, copied, and
                // waits in the owner's queue for the session this worker asked for.
                let Some(f) = wg.follower.as_mut().filter(|f| f.can_hand_over()) else {
                    return Err(Skip::drop(DropReason::StagedOverflow));
                };
                f.hand_over_waiting(peer, data);
                return Err(Skip::Consumed);
            }
            Err(SendError::NoSession) => {
                // The packet waits in its own buffer (KEEP) until the session is
                // ready and the device hands it back (see WgGraph::run).
                if wg.staged >= wg.max_staged {
                    return Err(Skip::drop(DropReason::StagedOverflow));
                }
                return match wg.device.stage(peer, h, cx.now) {
                    None => {
                        wg.staged += 1;
                        Err(Skip::Kept)
                    }
                    Some(evicted) if evicted == h => {
                        Err(Skip::drop(DropReason::NoPeerForDestination))
                    }
                    Some(evicted) => {
                        cx.arena.free(evicted);
                        Err(Skip::Replaced(DropReason::StagedOverflow.into()))
                    }
                };
            }
            Err(SendError::NoEndpoint) => return Err(Skip::drop(DropReason::NoEndpoint)),
        };
        let m = *cx.arena.meta(h);
        let inner_len = m.len as usize;
        let padded = padded_len(inner_len, wg.mtu);
        let start = m.offset as usize;
        if start < TRANSPORT_HEADER_LEN || start + padded + TAG_LEN > cx.arena.buffer_size() {
            return Err(EncryptError::TooBig.into());
        }
        let base = cx.arena.offset_of(h);
        let buf = cx.arena.buffer_mut(h);
        if padded > inner_len {
            // Often there is nothing to pad (a length already a multiple of 16, or
            // at the MTU), and an empty fill still calls memset.
            buf[start + inner_len..start + padded].fill(0);
        }
        let header = start - TRANSPORT_HEADER_LEN;
        // Cannot fail: the buffer holds a header, the text and the tag.
        let _ = TransportData::emit(
            &mut buf[header..start + padded + TAG_LEN],
            ticket.receiver_index,
            ticket.counter,
        );
        let op = AeadOp::in_place(
            Algorithm::ChaCha20Poly1305,
            ticket.key,
            Direction::Encrypt,
            crypto::seal::counter_nonce(ticket.counter),
            Span::EMPTY,
            Span::new((base + start) as u32, padded as u32),
        );
        let wire_len = TRANSPORT_HEADER_LEN + padded + TAG_LEN;
        let meta = cx.arena.meta_mut(h);
        meta.offset = header as u16;
        meta.len = wire_len as u16;
        meta.addr = ticket.endpoint;
        meta.peer = peer.0;
        let resume = WgEncryptResume {
            peer,
            inner_len,
            wire_len,
            serial: ticket.serial,
            counter: ticket.counter,
        };
        Ok((op, resume))
    }

    /// After the crypto: count the send and pass the packet on, or drop it.
    #[inline]
    fn finish(
        cx: &mut Context,
        h: Handle,
        status: OpStatus,
        resume: WgEncryptResume,
    ) -> Result<u16, Skip<EncryptError>> {
        let WgEncryptResume {
            peer,
            inner_len,
            wire_len,
            serial,
            counter,
        } = resume;
        if status != OpStatus::Ok {
            return Err(EncryptError::EngineFailed.into());
        }
        cx.tunnels.wg.note_sent(peer, inner_len, wire_len, cx.now);
        // Sealed: marked for the late check, the header where `prepare` put it.
        let at = cx.arena.meta(h).offset;
        cx.arena.meta_mut(h).seal = cx.tunnels.wg.mark_sealed(peer, serial, counter, at);
        Ok(Next::Udp as u16)
    }
}
