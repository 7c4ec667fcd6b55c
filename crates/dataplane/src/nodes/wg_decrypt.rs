//! `wg-decrypt`: transport data in, inner IP packets out. Per frame: find each
//! packet's session by receiver index and pre-check its counter (no state changes),
//! decrypt the whole frame as one batch of AEAD ops, then for each packet that
//! verified: parse the inner header, check its source against the peer's allowed IPs,
//! and commit the counter (which is when the session, timers and endpoint change).
//! With an asynchronous engine the frame is parked instead and `wg-decrypt-post`
//! finishes it.

use crate::arena::Handle;
use crate::context::Context;
use crate::counters::NodeCounters;
use crate::graph::FREE;
use crate::nodes::Output;
use crate::nodes::aead::{AeadStage, Done, Skip, settle};
use crate::resume::WgDecryptResume;
use crypto::{AeadOp, Algorithm, Direction, OpStatus, Span, TAG_LEN};
use std::net::IpAddr;
use wire::wireguard::{TRANSPORT_HEADER_LEN, TransportData};
use wireguard::{DropReason, PeerId, RecvRun, RecvTicket};

crate::node_errors! {
    /// Why wg-decrypt (and wg-decrypt-post) drop a packet, besides the protocol's
    /// reasons.
    pub enum DecryptError {
        EngineFailed => "engine-failed", "The crypto engine did not process the op.";
        NotParked => "not-parked", "At the post node without a returned frame, or with another stage's record (a bug).";
    }
    protocol DropReason;
}

#[repr(u16)]
enum Next {
    Tun = 0,
}

/// The wg-decrypt stage: see the module doc.
pub struct WgDecrypt;

/// What wg-decrypt remembers while it prepares a frame: the session of the last
/// receiver index, so that a run of packets on one session finds it once.
#[derive(Default)]
pub struct RecvMemo {
    run: Option<RecvRun>,
}

aead_stage!(WgDecrypt, name: "wg-decrypt", post: "wg-decrypt-post", next: [Output::TUN], errors: DecryptError);

impl AeadStage for WgDecrypt {
    type Error = DecryptError;
    type Resume = WgDecryptResume;
    type Scratch = Verified;
    type Memo = RecvMemo;

    /// The frame's runs of packets go to the device (see `wireguard::runs`).
    fn end_frame(cx: &mut Context) {
        cx.tunnels.wg.end_frame(cx.now);
    }

    /// Finds the packet's session and makes its op, or drops it (counted).
    #[inline(always)]
    fn prepare(
        cx: &mut Context,
        memo: &mut RecvMemo,
        h: Handle,
    ) -> Result<(AeadOp, WgDecryptResume), Skip<DecryptError>> {
        // wg-input checked the type and the minimum length.
        let msg = TransportData::new_checked(cx.arena.data(h))
            .map_err(|_| Skip::drop(DropReason::Truncated))?;
        let (index, counter) = (msg.receiver_index(), msg.counter());
        let run = match &mut memo.run {
            Some(run) if run.index() == index => run,
            slot => slot.insert(cx.tunnels.wg.recv_run(index).map_err(Skip::drop)?),
        };
        let ticket = run.ticket(counter, cx.now).map_err(Skip::drop)?;
        let m = cx.arena.meta(h);
        let text_len = m.len as usize - TRANSPORT_HEADER_LEN - TAG_LEN;
        let text = cx.arena.offset_of(h) + m.offset as usize + TRANSPORT_HEADER_LEN;
        let op = AeadOp::in_place(
            Algorithm::ChaCha20Poly1305,
            ticket.key,
            Direction::Decrypt,
            crypto::seal::counter_nonce(counter),
            Span::EMPTY,
            Span::new(text as u32, text_len as u32),
        );
        Ok((op, WgDecryptResume { ticket, counter }))
    }

    /// After the crypto, one packet: checked, its counter committed, and passed
    /// on, told to the device at once. The nodes finish whole frames
    /// (`finish_frame`, the same steps in batches); this is the trait's
    /// one-packet form.
    fn finish(
        cx: &mut Context,
        h: Handle,
        status: OpStatus,
        resume: WgDecryptResume,
    ) -> Result<u16, Skip<DecryptError>> {
        let done = Done {
            index: 0,
            status,
            resume,
        };
        let verdict = match verify(cx, &mut SourceMemo::default(), h, &done) {
            Err(e) => Err(Skip::Drop(e)),
            Ok((p, counter)) => {
                let mut accepted = [false];
                let committed = cx
                    .tunnels
                    .wg
                    .commit_counters(&p.ticket, &[counter], &mut accepted);
                match committed {
                    Err(reason) => Err(Skip::drop(reason)),
                    Ok(()) if !accepted[0] => Err(Skip::drop(DropReason::Replay)),
                    Ok(()) => deliver(cx, h, &p),
                }
            }
        };
        // As after a frame: the device hears of its runs.
        cx.tunnels.wg.end_frame(cx.now);
        verdict
    }

    /// After the crypto: each packet's inner header parsed and its source checked;
    /// then the counters of those that passed committed, one batch per run of
    /// packets on one session; then each accepted packet passed on. Every commit of
    /// the frame comes before the device hears of any of its packets, so a packet on
    /// a session the frame's own data retires (a responder's first data on its new
    /// session pushes the oldest out) is still taken: it decrypted under a key the
    /// device held when the frame began.
    fn finish_frame(
        cx: &mut Context,
        v: &mut Verified,
        packets: &[Handle],
        done: &[Done<WgDecryptResume>],
        next: &mut [u16],
        c: &mut NodeCounters,
    ) {
        v.clear();
        let mut sources = SourceMemo::default();
        // Verified packets are gathered in runs on one session as they are checked.
        let mut session = None;
        for d in done {
            match verify(cx, &mut sources, packets[d.index], d) {
                Ok((p, counter)) => {
                    let this = Some((p.ticket.peer, p.ticket.local_index));
                    if session != this {
                        v.end_run();
                        session = this;
                    }
                    v.packets.push(p);
                    v.counters.push(counter);
                }
                Err(e) => {
                    c.drop(e);
                    next[d.index] = FREE;
                }
            }
        }
        v.end_run();
        v.accepted.resize(v.packets.len(), false);
        // The counters committed, one batch per run; a run the device refuses whole
        // (its session gone) keeps the reason.
        let mut start = 0;
        for run in &mut v.runs {
            let range = start..run.0;
            let t = v.packets[start].ticket;
            run.1 = cx
                .tunnels
                .wg
                .commit_counters(&t, &v.counters[range.clone()], &mut v.accepted[range])
                .err();
            start = run.0;
        }
        // Then each packet passed on, or dropped: a counter not taken is a replay
        // unless its run was refused whole.
        let mut start = 0;
        for &(end, refused) in &v.runs {
            let run = v.packets[start..end].iter().zip(&v.accepted[start..end]);
            for (p, &accepted) in run {
                let index = p.index as usize;
                next[index] = if accepted {
                    settle(deliver(cx, packets[index], p), c)
                } else {
                    c.drop(DecryptError::from(refused.unwrap_or(DropReason::Replay)));
                    FREE
                };
            }
            start = end;
        }
    }
}

/// A packet that decrypted and passed the checks before its counter's commit.
#[derive(Clone, Copy)]
struct Packet {
    /// Its place in the frame.
    index: u32,
    /// The inner packet's length (the plaintext less its padding).
    inner_len: u16,
    /// Whether it carries data (a keepalive does not).
    data: bool,
    ticket: RecvTicket,
}

/// A frame's packets waiting for their counters' commit, and the verdicts: kept by
/// the node so that a frame allocates nothing.
#[derive(Default)]
pub struct Verified {
    packets: Vec<Packet>,
    counters: Vec<u64>,
    accepted: Vec<bool>,
    /// Each run of packets on one session: where it ends in `packets`, and why the
    /// device refused all of it (`None`: each counter was decided on its own).
    runs: Vec<(usize, Option<DropReason>)>,
}

impl Verified {
    fn clear(&mut self) {
        self.packets.clear();
        self.counters.clear();
        self.accepted.clear();
        self.runs.clear();
    }

    /// Ends the run of packets gathered since the last run ended, if any.
    fn end_run(&mut self) {
        let end = self.packets.len();
        if self.runs.last().map_or(0, |r| r.0) < end {
            self.runs.push((end, None));
        }
    }
}

/// The last inner source checked in a frame, its peer and the verdict: a run of
/// packets from one host is looked up in the allowed IPs once. Kept for one frame
/// (the allowed IPs change only between frames).
#[derive(Default)]
struct SourceMemo {
    last: Option<(IpAddr, PeerId, bool)>,
}

impl SourceMemo {
    fn allowed(&mut self, cx: &Context, t: &RecvTicket, src: IpAddr) -> bool {
        match self.last {
            Some((last, peer, verdict)) if last == src && peer == t.peer => verdict,
            _ => {
                let verdict = cx.tunnels.wg.source_allowed(t, src);
                self.last = Some((src, t.peer, verdict));
                verdict
            }
        }
    }
}

/// The checks before a packet's counter is committed: the op's status, the inner
/// header, and the inner source against the peer's allowed IPs. Changes nothing.
fn verify(
    cx: &Context,
    sources: &mut SourceMemo,
    h: Handle,
    d: &Done<WgDecryptResume>,
) -> Result<(Packet, u64), DecryptError> {
    let WgDecryptResume { ticket, counter } = d.resume;
    match d.status {
        OpStatus::Ok => {}
        OpStatus::BadTag => return Err(DropReason::BadTag.into()),
        _ => return Err(DecryptError::EngineFailed),
    }
    let meta = cx.arena.meta(h);
    let plain_len = meta.len as usize - TRANSPORT_HEADER_LEN - TAG_LEN;
    let (inner_src, inner_len) = if plain_len == 0 {
        (None, 0) // keepalive
    } else {
        let buf = &cx.arena.data(h)[TRANSPORT_HEADER_LEN..TRANSPORT_HEADER_LEN + plain_len];
        match wire::IpPacket::parse(buf) {
            Ok(ip) if ip.total_len() <= plain_len => (Some(ip.src_addr()), ip.total_len()),
            _ => return Err(DropReason::BadInnerPacket.into()),
        }
    };
    if let Some(src) = inner_src
        && !sources.allowed(cx, &ticket, src)
    {
        return Err(DropReason::SourceNotAllowed.into());
    }
    let p = Packet {
        // A frame holds at most FRAME_LEN packets and a buffer at most
        // LARGEST_BUFFER bytes, so both fit.
        index: d.index as u32,
        inner_len: inner_len as u16,
        data: inner_src.is_some(),
        ticket,
    };
    Ok((p, counter))
}

/// An accepted packet: the device hears of it (once per run), and the inner packet
/// goes on to the TUN (a keepalive ends here).
fn deliver(cx: &mut Context, h: Handle, p: &Packet) -> Result<u16, Skip<DecryptError>> {
    // The metadata borrowed once, beside the device.
    let m = cx.arena.meta_mut(h);
    cx.tunnels
        .wg
        .note_received(&p.ticket, p.data, m.len as usize, m.addr, cx.now);
    if !p.data {
        return Err(Skip::Consumed);
    }
    m.offset += TRANSPORT_HEADER_LEN as u16;
    m.len = p.inner_len; // strips the padding
    m.peer = p.ticket.peer.0;
    Ok(Next::Tun as u16)
}
