//! The late check's work on a worker's output queues (see `seal_ledger`, the
//! ledger it reads): the check just before a queue goes to its driver, the check
//! again for a driver held back after taking its packets, and the resealing of the
//! packets found too far behind, with fresh counters and their UDP checksum mended.

use crate::arena::{Arena, Handle};
use crate::context::{Context, OutputId};
use crypto::{AeadOp, Algorithm, Direction, OpStatus, Span, TAG_LEN};
use std::sync::Arc;
use wire::checksum;
use wire::wireguard::{MESSAGE_TRANSPORT_DATA, TRANSPORT_HEADER_LEN};
use wireguard::Keypair;

/// A late packet in a queue about to leave.
struct Late {
    /// Its place in the queue.
    index: usize,
    h: Handle,
    keypair: Arc<Keypair>,
    /// Its transport header's offset in its buffer, and its text's length.
    at: usize,
    text_len: usize,
    counter: u64,
    /// The one's-complement sum of its transport message as it was, when a UDP
    /// checksum in front of it covers it (IPv6).
    covered: Option<u16>,
}

/// A worker held back between the check and handing its packets over for longer
/// than this (TSC clocks; tens of microseconds) checks them again: its driver's
/// own work between the two takes a few.
const CHECK_AGAIN_AFTER: u64 = 100_000;

impl Context {
    /// The late check (see the module doc) of output queue `id`, just before its
    /// driver takes it.
    pub(crate) fn check_late(&mut self, id: OutputId) {
        let ledger = &mut self.tunnels.wg.ledger;
        if ledger.entries.is_empty() {
            return;
        }
        if ledger.judge() {
            let mut queue = std::mem::take(self.outputs.queue(id));
            self.reseal_late(&mut queue);
            *self.outputs.queue(id) = queue;
        }
    }

    /// For a driver that took packets with [`Context::take_output`], just before
    /// it hands them over: if the worker was held back since their check, they are
    /// checked again (so a worker descheduled in between does not send them late).
    pub fn check_late_again(&mut self, taken: &mut Vec<Handle>) {
        let ledger = &mut self.tunnels.wg.ledger;
        if ledger.entries.is_empty()
            || crate::counters::clocks().wrapping_sub(ledger.checked_at) < CHECK_AGAIN_AFTER
        {
            return;
        }
        if ledger.judge() {
            self.reseal_late(taken);
        }
    }

    /// Once no queue holds a packet, no mark can be looked at again (packets are
    /// marked once sealed, so a frame out at an engine holds none): at the start
    /// of a run (what the drivers took at the end of the last one is sent), and
    /// after a queue went to its driver.
    pub(crate) fn forget_marks_if_idle(&mut self) {
        if !self.tunnels.wg.ledger.entries.is_empty() && self.outputs.all_empty() {
            self.tunnels.wg.ledger.forget();
        }
    }

    /// Seals the late packets among `packets` again with fresh counters; drops
    /// (takes out and frees) those that cannot be.
    #[cold]
    #[inline(never)]
    fn reseal_late(&mut self, packets: &mut Vec<Handle>) {
        let late = self.find_late(packets);
        if late.is_empty() {
            return;
        }
        let mut failed = vec![false; late.len()];
        // Open each with the counter it was sealed with.
        let mut ops: Vec<AeadOp> = late
            .iter()
            .map(|l| transport_op(&self.arena, l, Direction::Decrypt, l.counter))
            .collect();
        self.run_ops(&mut ops);
        let mut fresh = Vec::with_capacity(late.len());
        for (i, (l, op)) in late.iter().zip(&ops).enumerate() {
            let counter = (op.status == OpStatus::Ok)
                .then(|| l.keypair.take_counters(1))
                .flatten();
            match counter {
                Some(c) => fresh.push(c),
                None => {
                    failed[i] = true;
                    fresh.push(0);
                }
            }
        }
        // Seal again with the fresh counters, written into the headers.
        let mut ops = Vec::with_capacity(late.len());
        let mut sealed = Vec::with_capacity(late.len());
        for (i, l) in late.iter().enumerate() {
            if failed[i] {
                continue;
            }
            let buf = self.arena.buffer_mut(l.h);
            buf[l.at + 8..l.at + 16].copy_from_slice(&fresh[i].to_le_bytes());
            ops.push(transport_op(&self.arena, l, Direction::Encrypt, fresh[i]));
            sealed.push(i);
        }
        self.run_ops(&mut ops);
        for (&i, op) in sealed.iter().zip(&ops) {
            let l = &late[i];
            if op.status != OpStatus::Ok {
                failed[i] = true;
                continue;
            }
            l.keypair.note_sending(fresh[i]);
            if let Some(old) = l.covered {
                fix_udp_checksum(&mut self.arena, l, old);
            }
        }
        let dropped = failed.iter().filter(|&&f| f).count();
        let counters = &mut self.tunnels.wg.ledger.counters;
        counters.resealed += (late.len() - dropped) as u64;
        counters.dropped += dropped as u64;
        for (l, _) in late.iter().zip(&failed).filter(|(_, f)| **f).rev() {
            let h = packets.remove(l.index);
            self.arena.free(h);
        }
    }

    /// The packets among `packets` that are of a late entry and behind themselves.
    fn find_late(&self, packets: &[Handle]) -> Vec<Late> {
        let ledger = &self.tunnels.wg.ledger;
        let mut late = Vec::new();
        for (index, &h) in packets.iter().enumerate() {
            let m = self.arena.meta(h);
            let Some(k) = ledger.late_session(m.seal) else {
                continue;
            };
            let at = usize::from(m.seal.at);
            let start = usize::from(m.offset);
            let data = self.arena.data(h);
            // What the mark points at must still be the whole transport message it
            // sealed: nothing since has cut or moved it.
            let Some(message) = at
                .checked_sub(start)
                .and_then(|from| data.get(from..))
                .filter(|m| m.len() >= TRANSPORT_HEADER_LEN + TAG_LEN)
            else {
                continue;
            };
            let text_len = message.len() - TRANSPORT_HEADER_LEN - TAG_LEN;
            // (The text is a multiple of 16 bytes unless padding stopped at the
            // MTU; opening it proves it whole either way.)
            let t = wire::wireguard::TransportData::new_unchecked(message);
            if u32::from_le_bytes([message[0], message[1], message[2], message[3]])
                != MESSAGE_TRANSPORT_DATA
                || t.receiver_index() != k.remote_index
                || !k.is_late(t.counter())
            {
                continue;
            }
            // A UDP header in front (a gateway's outer headers) has a checksum over
            // the message unless it is zero (IPv4 may leave it out).
            let covered = (at >= start + 8)
                .then(|| &data[at - start - 2..at - start])
                .filter(|c| c != &[0, 0])
                .map(|_| checksum::sum(message));
            late.push(Late {
                index,
                h,
                keypair: k.clone(),
                at,
                text_len,
                counter: t.counter(),
                covered,
            });
        }
        late
    }
}

/// The in-place op over a late packet's text with `counter`.
fn transport_op(arena: &Arena, l: &Late, dir: Direction, counter: u64) -> AeadOp {
    AeadOp::in_place(
        Algorithm::ChaCha20Poly1305,
        l.keypair.send_key,
        dir,
        crypto::seal::counter_nonce(counter),
        Span::EMPTY,
        Span::new(
            (arena.offset_of(l.h) + l.at + TRANSPORT_HEADER_LEN) as u32,
            l.text_len as u32,
        ),
    )
}

/// Updates the UDP checksum in front of a resealed message whose bytes summed to
/// `old` (RFC 1624, without summing the rest again).
fn fix_udp_checksum(arena: &mut Arena, l: &Late, old: u16) {
    let end = l.at + TRANSPORT_HEADER_LEN + l.text_len + TAG_LEN;
    let buf = arena.buffer_mut(l.h);
    let new = checksum::sum(&buf[l.at..end]);
    let before = u16::from_be_bytes([buf[l.at - 2], buf[l.at - 1]]);
    // A UDP checksum that computes to zero is sent as all ones (RFC 768).
    let fixed = match checksum::update(before, old, new) {
        0 => 0xffff,
        c => c,
    };
    buf[l.at - 2..l.at].copy_from_slice(&fixed.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_incremental_checksum_matches_one_computed_anew() {
        // A UDP header's checksum over a pseudo-header sum and a message; the
        // message changes; the fixed checksum equals the one computed from scratch.
        let pseudo: u16 = 0x1234;
        let full = |msg: &[u8]| !checksum::combine(pseudo, checksum::sum(msg));
        let mut arena = Arena::new(4);
        let h = arena.alloc().unwrap();
        let at = 200;
        let text_len = 48;
        let end = at + TRANSPORT_HEADER_LEN + text_len + TAG_LEN;
        let old: Vec<u8> = (0..end - at).map(|i| (i * 7 + 3) as u8).collect();
        arena.buffer_mut(h)[at..end].copy_from_slice(&old);
        let before = full(&old);
        arena.buffer_mut(h)[at - 2..at].copy_from_slice(&before.to_be_bytes());
        let new: Vec<u8> = (0..end - at).map(|i| (i * 13 + 1) as u8).collect();
        arena.buffer_mut(h)[at..end].copy_from_slice(&new);
        let keys = Arc::new(crypto::KeyRegistry::new(4));
        let keys_pair = wireguard::noise::SessionKeys {
            send: [1; 32],
            recv: [2; 32],
        };
        let k = Keypair::new(&keys, &keys_pair, 1, 2, true, std::time::Instant::now()).unwrap();
        let l = Late {
            index: 0,
            h,
            keypair: Arc::new(k),
            at,
            text_len,
            counter: 0,
            covered: Some(checksum::sum(&old)),
        };
        fix_udp_checksum(&mut arena, &l, checksum::sum(&old));
        let buf = arena.buffer_mut(h);
        let got = u16::from_be_bytes([buf[at - 2], buf[at - 1]]);
        assert_eq!(got, full(&new));
    }
}
