//! `ovpn-encrypt`: inner IP packets routed into an OpenVPN server's tunnel in,
//! P_DATA_V2 packets out to `udp-encap`, addressed to the client the inner
//! destination belongs to, from the server's port. Per frame: find each packet's
//! client and the key it sends with, take a packet id (never past the last: the
//! key then sends nothing, and the control thread is asked to renegotiate well
//! before), write the header in the headroom (opcode and key id, peer-id,
//! packet id, and room for the tag, which OpenVPN puts before the ciphertext),
//! and seal the whole frame as one batch of AEAD ops.

use crate::arena::Handle;
use crate::context::Context;
use crate::nodes::UdpEncap;
use crate::nodes::aead::{AeadStage, Skip};
use crate::ovpn::{OvpnInput, OvpnServerId, Way};
use crate::resume::OvpnEncryptResume;
use crypto::{AeadOp, Direction, OpStatus, Span};
use openvpn::KeyId;
use openvpn::data::{DataHeader, HEADER_LEN, OVERHEAD};

crate::node_errors! {
    /// Why ovpn-encrypt drops a packet.
    pub enum OvpnEncryptError {
        UnknownServer => "unknown-server", "Routed into an OpenVPN server this worker does not have (a bug).";
        BadInner => "bad-inner", "The inner packet's IP header does not parse.";
        NoClient => "no-client", "No connected client has the inner destination as its address.";
        NoKey => "no-key", "The client has no data key yet (its key exchange is not done).";
        IdsExhausted => "ids-exhausted", "The key used its last packet id: it needs a renegotiation.";
        NoHeadroom => "no-headroom", "No room in front of the packet for its header and the outer headers.";
        EngineFailed => "engine-failed", "The crypto engine did not process the op.";
        NotParked => "not-parked", "At the post node without a returned frame, or with another stage's record (a bug).";
    }
}

#[repr(u16)]
enum Next {
    Encap = 0,
}

/// What must stay free in front of the OpenVPN header: the outer IPv6 and UDP
/// headers `udp-encap` writes, and the Ethernet header after them.
const OUTER_ROOM: usize = 40 + 8 + 14;

pub struct OvpnEncrypt;

// Its post node never runs: its frames never park (`PARKS` below).
aead_stage!(OvpnEncrypt, name: "ovpn-encrypt", post: "ovpn-encrypt-post", next: [UdpEncap::NAME], errors: OvpnEncryptError);

impl AeadStage for OvpnEncrypt {
    type Error = OvpnEncryptError;
    type Resume = OvpnEncryptResume;
    type Scratch = ();
    type Memo = ();

    fn end_frame(cx: &mut Context) {
        cx.tunnels.ovpn.flush();
    }
    // Its ops may be of any algorithm: every frame runs on the synchronous path.
    const PARKS: bool = false;

    #[inline(always)]
    fn prepare(
        cx: &mut Context,
        _memo: &mut (),
        h: Handle,
    ) -> Result<(AeadOp, OvpnEncryptResume), Skip<OvpnEncryptError>> {
        Ok(frame(cx, h)?)
    }

    fn finish(
        cx: &mut Context,
        h: Handle,
        status: OpStatus,
        r: OvpnEncryptResume,
    ) -> Result<u16, Skip<OvpnEncryptError>> {
        if status != OpStatus::Ok {
            return Err(OvpnEncryptError::EngineFailed.into());
        }
        let s = cx
            .tunnels
            .ovpn
            .get(r.server)
            .ok_or(OvpnEncryptError::UnknownServer)?;
        let client = s.client(r.peer_id).ok_or(OvpnEncryptError::NoClient)?;
        let (to, port) = (client.remote, s.port);
        let len = usize::from(cx.arena.meta(h).len);
        cx.tunnels
            .ovpn
            .tally(r.server, r.peer_id, r.key_id, Way::Sealed, len);
        let m = cx.arena.meta_mut(h);
        m.addr = to;
        m.src_port = port;
        Ok(Next::Encap as u16)
    }
}

/// Frames packet `h` for its client and makes its op.
#[inline(always)]
fn frame(cx: &mut Context, h: Handle) -> Result<(AeadOp, OvpnEncryptResume), OvpnEncryptError> {
    let m = *cx.arena.meta(h);
    let server = OvpnServerId(u16::try_from(m.peer).map_err(|_| OvpnEncryptError::UnknownServer)?);
    let s = cx
        .tunnels
        .ovpn
        .get(server)
        .ok_or(OvpnEncryptError::UnknownServer)?;
    let dst = wire::IpPacket::parse(cx.arena.data(h))
        .map_err(|_| OvpnEncryptError::BadInner)?
        .dst_addr();
    let peer_id = s.peer_for(dst).ok_or(OvpnEncryptError::NoClient)?;
    let key = s
        .client(peer_id)
        .and_then(|c| c.send_key())
        .ok_or(OvpnEncryptError::NoKey)?;
    let (start, inner_len) = (m.offset as usize, m.len as usize);
    if start < OVERHEAD + OUTER_ROOM || start + inner_len > cx.arena.buffer_size() {
        return Err(OvpnEncryptError::NoHeadroom);
    }
    let (packet_id, due) = key.take_packet_id().ok_or(OvpnEncryptError::IdsExhausted)?;
    let (alg, send, key_id) = (key.alg, key.send, key.key_id);
    let nonce = key.send_nonce(packet_id);
    // The ids passed the point where a new key is due: the control thread is
    // asked; when its inbox has no room, the next packet asks again.
    let told = !due
        || cx.tunnels.ovpn.tell(OvpnInput::KeyExhausted {
            server,
            peer_id,
            key_id,
        });
    if !told {
        key.ask_again();
        cx.tunnels.ovpn.exhausted_backlog += 1;
    }
    let header = start - OVERHEAD;
    let head = DataHeader {
        key_id: KeyId::new(key_id).expect("installed keys have ids 0 to 7"),
        peer_id,
        packet_id,
    };
    cx.arena.buffer_mut(h)[header..header + HEADER_LEN].copy_from_slice(&head.to_bytes());
    let base = cx.arena.offset_of(h);
    let at = |offset: usize| (base + offset) as u32;
    let op = AeadOp::in_place_tag_at(
        alg,
        send,
        Direction::Encrypt,
        nonce,
        Span::new(at(header), HEADER_LEN as u32),
        Span::new(at(start), inner_len as u32),
        at(header + HEADER_LEN),
    );
    let meta = cx.arena.meta_mut(h);
    meta.offset = header as u16;
    meta.len = (OVERHEAD + inner_len) as u16;
    Ok((
        op,
        OvpnEncryptResume {
            server,
            peer_id,
            key_id,
        },
    ))
}
