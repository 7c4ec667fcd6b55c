//! `ovpn-decrypt`: OpenVPN data packets (P_DATA_V2) for one of the gateway's
//! OpenVPN servers in (from `ip-local`, outer headers off, the client's address
//! in the metadata and the server in `meta.peer`), inner IP packets out to
//! `tunnel-input`. Per frame: find each packet's client by peer-id and its key
//! by key id, check the packet id against the key's replay window (no state
//! changes), open the whole frame as one batch of AEAD ops (the tag sits in
//! front of the ciphertext, where OpenVPN puts it), then for each packet that
//! verified: a keepalive ping is taken; anything else must be an IP packet from
//! one of the client's tunnel addresses. Only then is the packet id committed,
//! the client followed to a new address if it sent from one, and the key's usage
//! counted, so a forged or malformed packet changes nothing.

use crate::arena::Handle;
use crate::context::Context;
use crate::nodes::TunnelInput;
use crate::nodes::aead::{AeadStage, Skip};
use crate::ovpn::{KeyUsage, OvpnInput, OvpnServerId, Way};
use crate::resume::OvpnDecryptResume;
use crypto::{AeadOp, Direction, OpStatus, Span};
use ipsec::ReplayError;
use openvpn::data::{self, DataHeader, HEADER_LEN, Inner, OVERHEAD};

crate::node_errors! {
    /// Why ovpn-decrypt drops a packet.
    pub enum OvpnDecryptError {
        Truncated => "truncated", "Shorter than a P_DATA_V2 header and tag.";
        UnknownServer => "unknown-server", "For an OpenVPN server this worker does not have (a bug).";
        UnknownPeer => "unknown-peer-id", "No client has this peer-id.";
        UnknownKey => "unknown-key-id", "The client has no key with this key id (retired, or never negotiated).";
        Replayed => "replayed", "A packet id the key received before.";
        TooOld => "too-old", "A packet id behind the key's replay window, or 0.";
        BadTag => "bad-tag", "The AEAD tag did not verify.";
        BadInner => "bad-inner", "The plaintext is neither a keepalive nor an IP packet.";
        Policy => "policy", "The inner source is not one of the client's tunnel addresses.";
        EngineFailed => "engine-failed", "The crypto engine did not process the op.";
        NotParked => "not-parked", "At the post node without a returned frame, or with another stage's record (a bug).";
    }
}

#[repr(u16)]
enum Next {
    Tunnel = 0,
}

pub struct OvpnDecrypt;

// Its post node never runs: its frames never park (`PARKS` below).
aead_stage!(OvpnDecrypt, name: "ovpn-decrypt", post: "ovpn-decrypt-post", next: [TunnelInput::NAME], errors: OvpnDecryptError);

impl AeadStage for OvpnDecrypt {
    type Error = OvpnDecryptError;
    type Resume = OvpnDecryptResume;
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
    ) -> Result<(AeadOp, OvpnDecryptResume), Skip<OvpnDecryptError>> {
        Ok(open(cx, h)?)
    }

    fn finish(
        cx: &mut Context,
        h: Handle,
        status: OpStatus,
        resume: OvpnDecryptResume,
    ) -> Result<u16, Skip<OvpnDecryptError>> {
        finish(cx, h, status, resume)
    }
}

fn replay_error(e: ReplayError, usage: &KeyUsage) -> OvpnDecryptError {
    KeyUsage::add(&usage.replayed, 1);
    match e {
        ReplayError::Replayed => OvpnDecryptError::Replayed,
        ReplayError::TooOld => OvpnDecryptError::TooOld,
    }
}

/// Finds packet `h`'s key, checks its packet id and makes its op.
#[inline(always)]
fn open(cx: &mut Context, h: Handle) -> Result<(AeadOp, OvpnDecryptResume), OvpnDecryptError> {
    let m = *cx.arena.meta(h);
    let data = cx.arena.data(h);
    let header = DataHeader::parse(data).map_err(|_| OvpnDecryptError::Truncated)?;
    let server = OvpnServerId(u16::try_from(m.peer).map_err(|_| OvpnDecryptError::UnknownServer)?);
    let s = cx
        .tunnels
        .ovpn
        .get(server)
        .ok_or(OvpnDecryptError::UnknownServer)?;
    let client = s
        .client(header.peer_id)
        .ok_or(OvpnDecryptError::UnknownPeer)?;
    let key = client
        .key(header.key_id.get())
        .ok_or(OvpnDecryptError::UnknownKey)?;
    key.replay
        .check(header.packet_id)
        .map_err(|e| replay_error(e, &key.usage))?;
    let start = m.offset as usize;
    let base = cx.arena.offset_of(h);
    let at = |offset: usize| (base + offset) as u32;
    let text = Span::new(at(start + OVERHEAD), (data.len() - OVERHEAD) as u32);
    let op = AeadOp::in_place_tag_at(
        key.alg,
        key.recv,
        Direction::Decrypt,
        key.recv_nonce(header.packet_id),
        Span::new(at(start), HEADER_LEN as u32),
        text,
        at(start + HEADER_LEN),
    );
    let resume = OvpnDecryptResume {
        server,
        peer_id: header.peer_id,
        key_id: header.key_id.get(),
        packet_id: header.packet_id,
    };
    Ok((op, resume))
}

/// After the crypto: what the plaintext is, whose address it comes from, then the
/// commit.
fn finish(
    cx: &mut Context,
    h: Handle,
    status: OpStatus,
    r: OvpnDecryptResume,
) -> Result<u16, Skip<OvpnDecryptError>> {
    let m = *cx.arena.meta(h);
    let s = cx
        .tunnels
        .ovpn
        .get(r.server)
        .ok_or(OvpnDecryptError::UnknownServer)?;
    let client = s.client(r.peer_id).ok_or(OvpnDecryptError::UnknownPeer)?;
    let key = client.key(r.key_id).ok_or(OvpnDecryptError::UnknownKey)?;
    match status {
        OpStatus::Ok => {}
        OpStatus::BadTag => {
            KeyUsage::add(&key.usage.bad_tag, 1);
            return Err(OvpnDecryptError::BadTag.into());
        }
        _ => return Err(OvpnDecryptError::EngineFailed.into()),
    }
    let plain = &cx.arena.data(h)[OVERHEAD..];
    let inner_len = match data::classify(plain) {
        Inner::Ping | Inner::Exit => None,
        Inner::Packet => {
            let p = wire::IpPacket::parse(plain).map_err(|_| OvpnDecryptError::BadInner)?;
            if !client.addrs.contains(&p.src_addr()) {
                return Err(OvpnDecryptError::Policy.into());
            }
            Some(p.total_len())
        }
    };
    key.replay
        .commit(u64::from(r.packet_id))
        .map_err(|e| replay_error(e, &key.usage))?;
    let moved = client.remote != m.addr;
    cx.tunnels.ovpn.tally(
        r.server,
        r.peer_id,
        r.key_id,
        Way::Opened,
        usize::from(m.len),
    );
    if moved {
        follow(cx, r.server, r.peer_id, m.addr);
    }
    let Some(inner_len) = inner_len else {
        // A keepalive (or the old exit notice): the client is alive, which its
        // key's usage now shows.
        return Err(Skip::Consumed);
    };
    let meta = cx.arena.meta_mut(h);
    meta.offset += OVERHEAD as u16;
    meta.len = inner_len as u16;
    Ok(Next::Tunnel as u16)
}

/// An authentic packet came from a client's new address: this worker sends there
/// from now on, and the control thread hears of it to tell the others (when its
/// inbox is full, the others follow on the client's next packet to them).
#[inline(never)]
fn follow(cx: &mut Context, server: OvpnServerId, peer_id: u32, remote: std::net::SocketAddr) {
    let ovpn = &mut cx.tunnels.ovpn;
    if !ovpn.tell(OvpnInput::Float {
        server,
        peer_id,
        remote,
    }) {
        ovpn.float_backlog += 1;
    }
    if let Some(c) = ovpn.get_mut(server).and_then(|s| s.client_mut(peer_id)) {
        c.remote = remote;
    }
}
