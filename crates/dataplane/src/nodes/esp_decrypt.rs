//! `esp-decrypt`: ESP packets for the gateway in (from `ip-local`, outer headers
//! off, the outer destination in the metadata), inner IP packets out to
//! `tunnel-input`. Per frame: find each packet's inbound SA by SPI and destination,
//! infer its full sequence number and check it against the replay window (no state
//! changes), open the whole frame as one batch of AEAD ops, then for each packet
//! that verified: check the padding and next header, parse the inner packet and
//! check it against the tunnel's selectors, and only then commit its sequence
//! number and charge the lifetime, so a forged or malformed packet changes nothing.

use crate::arena::Handle;
use crate::context::Context;
use crate::esp::SaCounters;
use crate::nodes::TunnelInput;
use crate::nodes::aead::{AeadStage, Skip};
use crate::resume::EspDecryptResume;
use crypto::{AeadOp, Direction, OpStatus, Span};
use ipsec::ReplayError;
use wire::esp::{self, ESN_AAD_LEN};
use wire::ip;

crate::node_errors! {
    /// Why esp-decrypt drops a packet.
    pub enum EspDecryptError {
        Truncated => "truncated", "Shorter than an ESP header, IV, trailer (a block for CBC) and ICV.";
        NotBlocks => "not-blocks", "CBC text that is not whole cipher blocks.";
        ReservedSpi => "reserved-spi", "An SPI below 256, which RFC 4303 reserves.";
        UnknownSpi => "unknown-spi", "No inbound SA has this SPI and destination.";
        Replayed => "replayed", "A sequence number the SA received before.";
        TooOld => "too-old", "A sequence number behind the SA's replay window.";
        BadIcv => "bad-icv", "The integrity check value did not verify.";
        BadPadding => "bad-padding", "Padding that is not 1, 2, 3, ... or longer than the text.";
        BadNextHeader => "bad-next-header", "A next header other than IPv4 or IPv6 (tunnel mode).";
        BadInner => "bad-inner", "The inner packet does not parse, or is not what the next header says.";
        Policy => "policy", "The inner source or destination is outside the tunnel's selectors.";
        Expired => "expired", "The inbound SA's byte or packet lifetime ran out.";
        EngineFailed => "engine-failed", "The crypto engine did not process the op.";
        NotParked => "not-parked", "At the post node without a returned frame, or with another stage's record (a bug).";
    }
}

#[repr(u16)]
enum Next {
    Tunnel = 0,
}

pub struct EspDecrypt;

// Its post node never runs: ESP's frames never park (`PARKS` below).
aead_stage!(EspDecrypt, name: "esp-decrypt", post: "esp-decrypt-post", next: [TunnelInput::NAME], errors: EspDecryptError);

impl AeadStage for EspDecrypt {
    type Error = EspDecryptError;
    type Resume = EspDecryptResume;
    type Scratch = ();
    type Memo = ();
    const PARKS: bool = false;

    fn end_frame(cx: &mut Context) {
        cx.tunnels.esp.flush();
    }

    #[inline(always)]
    fn prepare(
        cx: &mut Context,
        _memo: &mut (),
        h: Handle,
    ) -> Result<(AeadOp, EspDecryptResume), Skip<EspDecryptError>> {
        Ok(open(cx, h)?)
    }

    fn finish(
        cx: &mut Context,
        h: Handle,
        status: OpStatus,
        resume: EspDecryptResume,
    ) -> Result<u16, Skip<EspDecryptError>> {
        finish(cx, h, status, resume)
    }
}

fn replay_error(e: ReplayError, counters: &SaCounters) -> EspDecryptError {
    match e {
        ReplayError::Replayed => {
            SaCounters::add(&counters.replayed);
            EspDecryptError::Replayed
        }
        ReplayError::TooOld => {
            SaCounters::add(&counters.too_old);
            EspDecryptError::TooOld
        }
    }
}

/// Finds packet `h`'s SA, checks its sequence number and makes its op.
#[inline(always)]
fn open(cx: &mut Context, h: Handle) -> Result<(AeadOp, EspDecryptResume), EspDecryptError> {
    let m = *cx.arena.meta(h);
    let data = cx.arena.data(h);
    let p = esp::Packet::new_checked(data).map_err(|e| match e {
        wire::Error::ReservedSpi => EspDecryptError::ReservedSpi,
        _ => EspDecryptError::Truncated,
    })?;
    let (spi, seq_low) = (p.spi(), p.seq());
    let slot = cx
        .tunnels
        .esp
        .inbound_for(spi, m.addr.ip())
        .ok_or(EspDecryptError::UnknownSpi)?;
    let (_, sa) = cx
        .tunnels
        .esp
        .inbound(slot)
        .ok_or(EspDecryptError::UnknownSpi)?;
    let alg = sa.alg();
    let Some(text_len) = text_len(alg, data.len()) else {
        return Err(EspDecryptError::Truncated);
    };
    if alg.is_chained() && text_len % alg.pad_align() != 0 {
        return Err(EspDecryptError::NotBlocks);
    }
    let seq = sa
        .replay
        .check(seq_low)
        .map_err(|e| replay_error(e, &sa.counters))?;
    let front = esp::HEADER_LEN + alg.iv_len();
    let (key, esn, icv_len) = (sa.key.key, sa.esn, alg.icv_len());
    let header = m.offset as usize;
    let text_end = header + front + text_len;
    let base = cx.arena.offset_of(h);
    let at = |offset: usize| (base + offset) as u32;
    let text = Span::new(at(header + front), text_len as u32);
    // With ESN, what the ICV or AAD needs beside the packet goes in front of the
    // header, where the outer headers were: they are spent.
    let scratch = |len: usize| header.checked_sub(len).ok_or(EspDecryptError::Truncated);
    let op = if alg.is_chained() {
        let (mac_len, tag) = if esn {
            // The MAC covers the high half of the sequence number after the
            // ciphertext, where the ICV is: the ICV moves out of its way first.
            let icv = scratch(icv_len)?;
            let buf = cx.arena.buffer_mut(h);
            buf.copy_within(text_end..text_end + icv_len, icv);
            buf[text_end..text_end + 4].copy_from_slice(&((seq >> 32) as u32).to_be_bytes());
            (text_end + 4 - header, icv)
        } else {
            (text_end - header, text_end)
        };
        let mac = Span::new(at(header), mac_len as u32);
        AeadOp::chained_in_place(alg.aead(), key, Direction::Decrypt, mac, text, at(tag))
    } else {
        let iv: [u8; 8] = data[esp::HEADER_LEN..front]
            .try_into()
            .expect("length checked");
        let nonce = sa.key.nonce(iv);
        let aad = if esn {
            let a = scratch(ESN_AAD_LEN)?;
            let buf = cx.arena.buffer_mut(h);
            buf[a..a + ESN_AAD_LEN].copy_from_slice(&esp::esn_aad(spi, seq));
            Span::new(at(a), ESN_AAD_LEN as u32)
        } else {
            Span::new(at(header), esp::HEADER_LEN as u32)
        };
        AeadOp::in_place(alg.aead(), key, Direction::Decrypt, nonce, aad, text)
    };
    Ok((op, EspDecryptResume { slot, seq }))
}

/// The length of the encrypted text (payload, padding, trailer) of an ESP packet of
/// `len` bytes under `alg`, if it holds at least a trailer (a block for CBC).
fn text_len(alg: ipsec::EspAlgorithm, len: usize) -> Option<usize> {
    let least = if alg.is_chained() {
        alg.pad_align()
    } else {
        esp::TRAILER_LEN
    };
    len.checked_sub(esp::HEADER_LEN + alg.iv_len() + alg.icv_len())
        .filter(|&n| n >= least)
}

/// After the crypto: the trailer, the inner packet and the selectors, then the
/// commit. A dummy packet is consumed once its number is committed.
fn finish(
    cx: &mut Context,
    h: Handle,
    status: OpStatus,
    EspDecryptResume { slot, seq }: EspDecryptResume,
) -> Result<u16, Skip<EspDecryptError>> {
    let Some((tunnel, sa)) = cx.tunnels.esp.inbound(slot) else {
        return Err(EspDecryptError::UnknownSpi.into());
    };
    match status {
        OpStatus::Ok => {}
        OpStatus::BadTag => {
            SaCounters::add(&sa.counters.icv_failed);
            return Err(EspDecryptError::BadIcv.into());
        }
        _ => return Err(EspDecryptError::EngineFailed.into()),
    }
    let m = *cx.arena.meta(h);
    let alg = sa.alg();
    let front = esp::HEADER_LEN + alg.iv_len();
    let text_len = text_len(alg, m.len as usize).ok_or(EspDecryptError::Truncated)?;
    let text = &cx.arena.data(h)[front..front + text_len];
    let (payload_len, next_header) =
        esp::parse_trailer(text).map_err(|_| EspDecryptError::BadPadding)?;
    let version = match next_header {
        ip::protocol::IPV4 => 4,
        ip::protocol::IPV6 => 6,
        ip::protocol::NO_NEXT_HEADER => 0,
        _ => return Err(EspDecryptError::BadNextHeader.into()),
    };
    let inner = if version == 0 {
        None
    } else {
        // Anything after the inner packet is traffic flow confidentiality padding
        // (RFC 4303 section 2.7): the inner header's length says where it ends.
        let p =
            wire::IpPacket::parse(&text[..payload_len]).map_err(|_| EspDecryptError::BadInner)?;
        if p.version() != version {
            return Err(EspDecryptError::BadInner.into());
        }
        let t = cx
            .tunnels
            .esp
            .get(*tunnel)
            .ok_or(EspDecryptError::UnknownSpi)?;
        if !t.selects(&text[..payload_len], false) {
            return Err(EspDecryptError::Policy.into());
        }
        Some(p.total_len())
    };
    sa.replay
        .commit(seq)
        .map_err(|e| replay_error(e, &sa.counters))?;
    let Some(inner_len) = inner else {
        return Err(Skip::Consumed);
    };
    cx.tunnels
        .esp
        .charge_in(slot, inner_len)
        .map_err(|_| EspDecryptError::Expired)?;
    let meta = cx.arena.meta_mut(h);
    meta.offset += front as u16;
    meta.len = inner_len as u16;
    Ok(Next::Tunnel as u16)
}
