//! The late check: no WireGuard packet leaves so far behind its session's newest
//! counter that the far end could refuse it as a replay.
//!
//! Workers that share a session take its send counters in blocks and seal in
//! parallel, so the far end sees their packets a little out of counter order; its
//! window (8,128 counters) absorbs that. But a worker descheduled between sealing a
//! frame and handing it to its driver comes back with counters the others may have
//! left a whole window behind. So each worker keeps a ledger of the sessions it
//! sealed on since its output queues were last empty (first and last counter), and
//! marks each sealed packet with its entry (`PacketMeta::seal`). Just before a queue
//! goes to its driver, each entry's first counter is compared once with the newest
//! counter any worker has handed to a driver (`Keypair::newest_sending`), and the
//! worker's own newest is published. Only when an entry has fallen more than
//! `RESEAL_BEHIND` behind are its packets in the queue looked at one by one: those
//! behind are opened (in place, with their old counter), given fresh counters, and
//! sealed again. The far end then sees them as new. Every such packet is counted.
//!
//! In the usual case the check costs one atomic load and one atomic max per session
//! and batch, and a few stores per packet for the mark.

use crate::arena::SealMark;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;
use wireguard::Keypair;

/// The name the late check's drops are shown under (`show errors`).
pub const NAME: &str = "wg-late-check";

/// Why the late check drops a packet.
pub const ERRORS: &[crate::counters::ErrorInfo] = &[crate::counters::ErrorInfo {
    name: "unsealable",
    doc: "Too far behind its session's newest counter as it left, and could not be sealed again (the session ran out of counters).",
}];

/// What a drop reason of the late check means.
pub fn explain(node: &str, reason: &str) -> Option<&'static str> {
    crate::counters::explain(&[(NAME, ERRORS)], node, reason)
}

/// What the late check did on one worker.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LateCounters {
    /// Packets found too far behind before they left, sealed again with fresh
    /// counters.
    pub resealed: u64,
    /// Packets found too far behind that could not be sealed again (their session
    /// ran out of counters, or they did not open: a bug) and were dropped.
    pub dropped: u64,
}

/// What the last check found of an entry's packets.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Judged {
    OnTime,
    Late,
}

/// One session this worker sealed on since its queues were last empty.
pub(crate) struct Entry {
    keypair: Arc<Keypair>,
    first: u64,
    last: u64,
    judged: Judged,
}

/// See the module doc.
#[derive(Default)]
pub(crate) struct SealLedger {
    /// Which ledger a mark belongs to: the entries are forgotten (and the epoch
    /// moves on) whenever nothing marked can still wait in a queue.
    epoch: u16,
    pub(crate) entries: Vec<Entry>,
    /// When the last check ran (TSC clocks).
    pub(crate) checked_at: u64,
    /// The entry last asked for, by its session's serial (a run of packets to one
    /// peer asks for the same).
    last: Option<(u64, u16)>,
    /// Each entry's place by its session's serial (a frame to many peers asks once
    /// per run of packets to one).
    by_serial: HashMap<u64, u16, BuildHasherDefault<SerialHasher>>,
    pub(crate) counters: LateCounters,
}

/// Serials are handed out one after another: the value is its own hash.
#[derive(Default)]
struct SerialHasher(u64);

impl Hasher for SerialHasher {
    fn finish(&self) -> u64 {
        // Spread the low bits (the table indexes by them) over the word.
        self.0.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

impl SealLedger {
    /// The entry of the session `serial` names, made with `session` if there is
    /// none; `None` when the session is not found or the ledger is full (its packets
    /// then go unchecked). Called once per run of a frame's packets to one peer.
    #[inline]
    pub(crate) fn entry_of(
        &mut self,
        serial: u64,
        session: impl FnOnce() -> Option<Arc<Keypair>>,
    ) -> Option<u16> {
        match self.last {
            Some((s, i)) if s == serial => Some(i),
            _ => self.find_or_add(serial, session),
        }
    }

    #[inline(never)]
    fn find_or_add(
        &mut self,
        serial: u64,
        session: impl FnOnce() -> Option<Arc<Keypair>>,
    ) -> Option<u16> {
        let i = match self.by_serial.get(&serial) {
            Some(&i) => i,
            None => {
                if self.entries.len() >= usize::from(u16::MAX) {
                    return None;
                }
                self.entries.push(Entry {
                    keypair: session()?,
                    first: u64::MAX,
                    last: 0,
                    judged: Judged::OnTime,
                });
                let i = (self.entries.len() - 1) as u16;
                self.by_serial.insert(serial, i);
                i
            }
        };
        self.last = Some((serial, i));
        Some(i)
    }

    /// The mark of a packet sealed with `counter` on entry `entry`, its transport
    /// header at `at` in its buffer.
    #[inline]
    pub(crate) fn mark(&mut self, entry: u16, counter: u64, at: u16) -> SealMark {
        let e = &mut self.entries[usize::from(entry)];
        e.first = e.first.min(counter);
        e.last = e.last.max(counter);
        SealMark {
            epoch: self.epoch,
            run: entry,
            at,
        }
    }

    /// Compares every entry with its session's newest counter sent (again at each
    /// check: the worker may have been held back since the last), then publishes
    /// the entry's own newest; true if any is late.
    pub(crate) fn judge(&mut self) -> bool {
        self.checked_at = crate::counters::clocks();
        let mut late = false;
        for e in &mut self.entries {
            e.judged = if e.keypair.is_late(e.first) {
                Judged::Late
            } else {
                Judged::OnTime
            };
            e.keypair.note_sending(e.last);
            late |= e.judged == Judged::Late;
        }
        late
    }

    /// The session of a late entry that `mark` names, if it is of this ledger.
    pub(crate) fn late_session(&self, mark: SealMark) -> Option<&Arc<Keypair>> {
        if mark.epoch != self.epoch {
            return None;
        }
        let e = self.entries.get(usize::from(mark.run))?;
        (e.judged == Judged::Late).then_some(&e.keypair)
    }

    /// Forgets every entry: nothing marked waits in a queue any longer.
    pub(crate) fn forget(&mut self) {
        if !self.entries.is_empty() {
            self.entries.clear();
            self.by_serial.clear();
            self.last = None;
            self.epoch = self.epoch.wrapping_add(1);
        }
    }
}
