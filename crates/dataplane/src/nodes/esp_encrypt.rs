//! `esp-encrypt`: inner IP packets routed into an ESP tunnel in, ESP packets out
//! (RFC 4303 tunnel mode). Per frame: check each packet against its tunnel's
//! selectors, take a sequence number (never past the last: the SA then stops
//! sending), charge the SA's lifetime, frame it in place (ESP header and explicit
//! IV in the headroom, padding and trailer behind it), seal the whole frame as one
//! batch of AEAD ops, then put the tunnel's outer headers in front (IP, and UDP
//! for RFC 3948; built once per tunnel, see `outer_header`) and hand the packet to
//! `ip-lookup`, which routes it like the gateway's own.
//!
//! For the AEADs the explicit IV is the 64-bit sequence number: unique per key, as
//! RFC 4106 section 3.1 and RFC 7634 section 2 require, and what most
//! implementations send. With ESN the AAD is SPI, high and low halves of the
//! sequence number (RFC 4106 section 5); the twelve bytes are written in the
//! headroom in front of the header, which the outer headers overwrite after
//! sealing. For AES-CBC with HMAC (a chained op: encrypt, then MAC over header, IV
//! and ciphertext) the IV is random, from the worker's generator; with ESN the MAC
//! also covers the high half of the sequence number, put where the ICV goes while
//! the ICV is made in the headroom and moved into place after.

use crate::arena::Handle;
use crate::context::Context;
use crate::esp::{EspTunnel, EspTunnelId, SaCounters};
use crate::nodes::aead::{AeadStage, Skip};
use crate::nodes::{IpLookup, NO_PORT};
use crate::resume::{EspEncryptResume, MovedIcv};
use crypto::{AeadOp, Direction, OpStatus, Span};
use wire::esp::{self, ESN_AAD_LEN};
use wire::ip;

crate::node_errors! {
    /// Why esp-encrypt drops a packet.
    pub enum EspEncryptError {
        NoTunnel => "no-tunnel", "Routed into an ESP tunnel this worker does not have (a bug).";
        NoSa => "no-sa", "The tunnel has no outbound SA (none configured or installed yet).";
        BadInner => "bad-inner", "The inner packet's IP header does not parse.";
        Policy => "policy", "Source or destination outside the tunnel's traffic selectors.";
        Expired => "expired", "The outbound SA's byte or packet lifetime ran out.";
        SeqExhausted => "seq-exhausted", "The outbound SA used its last sequence number: it needs a new key.";
        TooBig => "too-big", "No room in the buffer for the ESP header, trailer and ICV.";
        EngineFailed => "engine-failed", "The crypto engine did not process the op.";
        NotParked => "not-parked", "At the post node without a returned frame, or with another stage's record (a bug).";
    }
}

#[repr(u16)]
enum Next {
    Lookup = 0,
}

/// What an op may use in front of the ESP header while it runs: the ESN AAD, or a
/// chained op's ICV (at most 16 bytes) while the ESN bytes sit where it goes.
const SCRATCH: usize = 16;

pub struct EspEncrypt;

// Its post node never runs: ESP's frames never park (`PARKS` below).
aead_stage!(EspEncrypt, name: "esp-encrypt", post: "esp-encrypt-post", next: [IpLookup::NAME], errors: EspEncryptError);

impl AeadStage for EspEncrypt {
    type Error = EspEncryptError;
    type Resume = EspEncryptResume;
    type Scratch = ();
    type Memo = ();
    const PARKS: bool = false;

    fn end_frame(cx: &mut Context) {
        cx.tunnels.esp.flush();
        if let Some(link) = cx.esp_handoff.as_mut() {
            link.flush();
        }
    }

    #[inline(always)]
    fn prepare(
        cx: &mut Context,
        _memo: &mut (),
        h: Handle,
    ) -> Result<(AeadOp, EspEncryptResume), Skip<EspEncryptError>> {
        if hand_over(cx, h) {
            return Err(Skip::Consumed);
        }
        Ok(frame(cx, h)?)
    }

    fn finish(
        cx: &mut Context,
        h: Handle,
        status: OpStatus,
        EspEncryptResume { tunnel, icv }: EspEncryptResume,
    ) -> Result<u16, Skip<EspEncryptError>> {
        if status != OpStatus::Ok {
            return Err(EspEncryptError::EngineFailed.into());
        }
        let t = cx
            .tunnels
            .esp
            .get(tunnel)
            .ok_or(EspEncryptError::NoTunnel)?;
        let outer = &t.outer;
        let m = *cx.arena.meta(h);
        if let Some(icv) = icv {
            let (from, to, len) = (icv.from as usize, icv.to as usize, icv.len as usize);
            cx.arena.buffer_mut(h).copy_within(from..from + len, to);
        }
        // `frame` left room for the largest outer headers.
        let at = m.offset as usize - outer.len();
        let end = m.offset as usize + m.len as usize;
        outer.write(&mut cx.arena.buffer_mut(h)[at..end]);
        let meta = cx.arena.meta_mut(h);
        meta.offset = at as u16;
        meta.len = (end - at) as u16;
        meta.port = NO_PORT;
        Ok(Next::Lookup as u16)
    }
}

/// Hands packet `h` to the worker that seals on its tunnel's outbound SA, if that
/// is another (see `esp_handoff`); false when it is this one, or when the packet is
/// for `frame` to refuse.
#[inline(always)]
fn hand_over(cx: &mut Context, h: Handle) -> bool {
    let Some(link) = cx.esp_handoff.as_mut() else {
        return false;
    };
    let Ok(id) = u16::try_from(cx.arena.meta(h).peer) else {
        return false;
    };
    let Some(sa) = cx
        .tunnels
        .esp
        .get(EspTunnelId(id))
        .and_then(EspTunnel::outbound)
    else {
        return false;
    };
    let sender = sa.sender_for(link.me());
    if sender == link.me() {
        return false;
    }
    link.push(sender, id, cx.arena.data(h));
    true
}

/// Frames packet `h` for its tunnel (named by `meta.peer`) and makes its op.
#[inline(always)]
fn frame(cx: &mut Context, h: Handle) -> Result<(AeadOp, EspEncryptResume), EspEncryptError> {
    let m = *cx.arena.meta(h);
    let id = EspTunnelId(u16::try_from(m.peer).map_err(|_| EspEncryptError::NoTunnel)?);
    let t: &EspTunnel = cx.tunnels.esp.get(id).ok_or(EspEncryptError::NoTunnel)?;
    let sa = t.outbound().ok_or(EspEncryptError::NoSa)?;
    let data = cx.arena.data(h);
    let version = wire::IpPacket::parse(data)
        .map_err(|_| EspEncryptError::BadInner)?
        .version();
    if !t.selects(data, true) {
        return Err(EspEncryptError::Policy);
    }
    let next_header = if version == 4 {
        ip::protocol::IPV4
    } else {
        ip::protocol::IPV6
    };
    let (start, inner_len) = (m.offset as usize, m.len as usize);
    let alg = sa.alg();
    let (iv_len, icv_len) = (alg.iv_len(), alg.icv_len());
    let front = esp::HEADER_LEN + iv_len;
    let text_len = esp::padded_len(inner_len, alg.pad_align());
    // In front: the header and IV, and before them room for whichever is longest:
    // the outer headers (written after sealing), or what the op reads or writes
    // there while sealing (the ESN AAD, or a chained op's ICV with ESN).
    let room = front + SCRATCH.max(t.outer_len());
    if start < room || start + text_len + icv_len > cx.arena.buffer_size() {
        return Err(EspEncryptError::TooBig);
    }
    // The number first: an exhausted SA charges nothing. A packet the lifetime
    // then refuses leaves its number unused, a gap the receiver's window ignores.
    let Ok(seq) = sa.seq.take() else {
        SaCounters::add(&sa.counters.seq_exhausted);
        return Err(EspEncryptError::SeqExhausted);
    };
    let (spi, esn, key) = (sa.spi, sa.esn, sa.key.key);
    let nonce = sa.key.nonce(seq.to_be_bytes());
    cx.tunnels
        .esp
        .charge_out(id, inner_len)
        .map_err(|_| EspEncryptError::Expired)?;
    let iv = if alg.is_chained() {
        // CBC needs an IV the sender cannot predict (RFC 3602 section 3).
        cx.tunnels.esp.random_iv()
    } else {
        [0; 16]
    };
    let header = start - front;
    let text_end = start + text_len;
    let base = cx.arena.offset_of(h);
    let buf = cx.arena.buffer_mut(h);
    esp::emit_trailer(&mut buf[start..text_end], inner_len, next_header)
        .expect("padded_len leaves room for the trailer");
    esp::emit_header(&mut buf[header..], spi, seq).expect("room checked");
    let at = |offset: usize| (base + offset) as u32;
    let text = Span::new(at(start), text_len as u32);
    let (op, icv) = if alg.is_chained() {
        buf[header + esp::HEADER_LEN..start].copy_from_slice(&iv);
        // The MAC covers header, IV and ciphertext, and with ESN the high half of
        // the sequence number after them (RFC 4303 section 2.2.1), where the ICV
        // goes: the ICV is made in front of the header meanwhile, and moved.
        let (mac_len, tag, icv) = if esn {
            buf[text_end..text_end + 4].copy_from_slice(&((seq >> 32) as u32).to_be_bytes());
            let scratch = header - icv_len;
            let icv = MovedIcv {
                from: scratch as u16,
                to: text_end as u16,
                len: icv_len as u8,
            };
            (text_end + 4 - header, scratch, Some(icv))
        } else {
            (text_end - header, text_end, None)
        };
        let mac = Span::new(at(header), mac_len as u32);
        let op = AeadOp::chained_in_place(alg.aead(), key, Direction::Encrypt, mac, text, at(tag));
        (op, icv)
    } else {
        buf[header + esp::HEADER_LEN..start].copy_from_slice(&seq.to_be_bytes());
        let aad = if esn {
            let a = header - ESN_AAD_LEN;
            buf[a..a + ESN_AAD_LEN].copy_from_slice(&esp::esn_aad(spi, seq));
            Span::new(at(a), ESN_AAD_LEN as u32)
        } else {
            Span::new(at(header), esp::HEADER_LEN as u32)
        };
        let op = AeadOp::in_place(alg.aead(), key, Direction::Encrypt, nonce, aad, text);
        (op, None)
    };
    let meta = cx.arena.meta_mut(h);
    meta.offset = header as u16;
    meta.len = (front + text_len + icv_len) as u16;
    Ok((op, EspEncryptResume { tunnel: id, icv }))
}
