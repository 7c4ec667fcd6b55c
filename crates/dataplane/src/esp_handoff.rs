//! One sender per outbound ESP SA, so that its packets leave in sequence order.
//!
//! A peer's ESP replay window is often 32 packets (strongSwan's default; RFC 4303
//! suggests 32 or 64), so two workers sealing on one SA at once reorder its packets
//! by more than the peer accepts: each seals a frame with its own run of sequence
//! numbers. Peers that negotiate an SA per CPU (RFC 9611) are not common yet. So
//! every outbound SA has one sender: the first worker that seals on it
//! (`OutboundSa::sender_for`). Another worker that routes a packet into the tunnel
//! copies it, as the inner packet, into that worker's inbox on this board; the
//! sender takes its inbox in at the start of each run and seals those packets with
//! its own, in one sequence, and sends them in that order.
//!
//! An inbox is a byte buffer and a list under a lock taken once per frame by a
//! worker handing over and once per run by its owner; a handing-over that finds it
//! empty wakes the owner. It holds at most [`MAX_WAITING`] packets: more are dropped
//! and counted (`esp-handoff full`), as a port's full ring would.

use std::sync::{Arc, Mutex, OnceLock};

/// Packets one worker's inbox holds at most: a few frames' worth, about 2 ms of a
/// busy SA while its sender is held back.
pub const MAX_WAITING: usize = 4096;

/// The name the handoff's drops are shown under (`show errors`).
pub const NAME: &str = "esp-handoff";

/// Why the handoff drops a packet.
pub const ERRORS: &[crate::counters::ErrorInfo] = &[
    crate::counters::ErrorInfo {
        name: "full",
        doc: "The SA's sending worker had this many packets from other workers waiting already (it is held back): dropped.",
    },
    crate::counters::ErrorInfo {
        name: "no-buffer",
        doc: "The SA's sending worker had no free buffer for a packet handed to it.",
    },
];

/// What a drop reason of the handoff means.
pub fn explain(node: &str, reason: &str) -> Option<&'static str> {
    crate::counters::explain(&[(NAME, ERRORS)], node, reason)
}

/// Inner packets handed to one worker, back to back.
#[derive(Default)]
pub(crate) struct Handed {
    bytes: Vec<u8>,
    /// Each packet's tunnel, and where its bytes are in `bytes`.
    packets: Vec<(u16, usize, usize)>,
}

impl Handed {
    fn push(&mut self, tunnel: u16, packet: &[u8]) {
        self.packets.push((tunnel, self.bytes.len(), packet.len()));
        self.bytes.extend_from_slice(packet);
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.packets.clear();
    }

    fn len(&self) -> usize {
        self.packets.len()
    }

    /// Each packet: its tunnel and bytes.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u16, &[u8])> + '_ {
        self.packets
            .iter()
            .map(|&(t, at, len)| (t, &self.bytes[at..at + len]))
    }
}

struct Inbox {
    waiting: Mutex<Handed>,
    wake: OnceLock<Box<dyn Fn() + Send + Sync>>,
}

/// Every worker's inbox: see the module doc.
pub struct HandoffBoard {
    inboxes: Vec<Inbox>,
}

/// What one worker's handoff did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HandoffCounters {
    /// Packets this worker handed to an SA's sender.
    pub handed: u64,
    /// Packets other workers handed to this one, taken in.
    pub taken: u64,
    /// Packets dropped: the sender's inbox was full.
    pub full: u64,
    /// Packets dropped: this worker had no buffer for one handed to it.
    pub no_buffer: u64,
}

impl HandoffBoard {
    /// A board for `workers` workers, numbered from 0.
    pub fn new(workers: usize) -> Arc<HandoffBoard> {
        Arc::new(HandoffBoard {
            inboxes: (0..workers)
                .map(|_| Inbox {
                    waiting: Mutex::new(Handed::default()),
                    wake: OnceLock::new(),
                })
                .collect(),
        })
    }

    /// How worker `worker` is woken when packets arrive in its inbox (once).
    pub fn set_wake(&self, worker: usize, wake: impl Fn() + Send + Sync + 'static) {
        if let Some(inbox) = self.inboxes.get(worker) {
            let _ = inbox.wake.set(Box::new(wake));
        }
    }

    /// Worker `me`'s side of the board, for its context
    /// ([`crate::Context::hand_esp_over`]).
    pub fn link(self: &Arc<Self>, me: usize) -> HandoffLink {
        HandoffLink {
            board: self.clone(),
            me: me as u32,
            outgoing: (0..self.inboxes.len()).map(|_| Handed::default()).collect(),
            incoming: Handed::default(),
            counters: HandoffCounters::default(),
        }
    }

    fn lock(&self, worker: usize) -> std::sync::MutexGuard<'_, Handed> {
        // A poisoned lock only means a worker panicked mid-copy; the lists it left
        // are consistent (a packet is pushed whole or not at all).
        self.inboxes[worker]
            .waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }
}

/// One worker's side of the board.
pub struct HandoffLink {
    board: Arc<HandoffBoard>,
    me: u32,
    /// This frame's packets for each worker, sent at the frame's end.
    outgoing: Vec<Handed>,
    /// The last inbox taken in, kept for its memory.
    incoming: Handed,
    pub(crate) counters: HandoffCounters,
}

impl HandoffLink {
    /// This worker's number on the board.
    pub(crate) fn me(&self) -> u32 {
        self.me
    }

    /// Hands an inner packet for `tunnel` to worker `to`, at the end of the frame.
    pub(crate) fn push(&mut self, to: u32, tunnel: u16, packet: &[u8]) {
        if let Some(out) = self.outgoing.get_mut(to as usize) {
            out.push(tunnel, packet);
        }
    }

    /// The end of a frame: each worker's packets go into its inbox, as many as fit.
    pub(crate) fn flush(&mut self) {
        for (to, out) in self.outgoing.iter_mut().enumerate() {
            if out.len() == 0 {
                continue;
            }
            let was_empty;
            {
                let mut inbox = self.board.lock(to);
                was_empty = inbox.len() == 0;
                let room = MAX_WAITING.saturating_sub(inbox.len());
                for (tunnel, p) in out.iter().take(room) {
                    inbox.push(tunnel, p);
                }
                let taken = out.len().min(room);
                self.counters.handed += taken as u64;
                self.counters.full += (out.len() - taken) as u64;
            }
            out.clear();
            if was_empty && let Some(wake) = self.board.inboxes[to].wake.get() {
                wake();
            }
        }
    }

    /// Takes in what other workers handed this one: for the caller to seal.
    pub(crate) fn take_in(&mut self) -> &Handed {
        self.incoming.clear();
        std::mem::swap(&mut *self.board.lock(self.me as usize), &mut self.incoming);
        self.counters.taken += self.incoming.len() as u64;
        &self.incoming
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn packets_reach_their_worker_whole_in_order_and_an_inbox_is_bounded() {
        let board = HandoffBoard::new(2);
        let woken = Arc::new(AtomicU64::new(0));
        let w = woken.clone();
        board.set_wake(1, move || {
            w.fetch_add(1, Ordering::Relaxed);
        });
        let mut a = board.link(0);
        let mut b = board.link(1);
        for i in 0..10u8 {
            a.push(1, u16::from(i % 3), &[i; 40][..20 + usize::from(i)]);
        }
        a.flush();
        assert_eq!(woken.load(Ordering::Relaxed), 1);
        let got: Vec<(u16, Vec<u8>)> = b.take_in().iter().map(|(t, p)| (t, p.to_vec())).collect();
        assert_eq!(got.len(), 10);
        for (i, (t, p)) in got.iter().enumerate() {
            assert_eq!(*t, (i % 3) as u16);
            assert_eq!(p, &vec![i as u8; 20 + i]);
        }
        assert_eq!(b.take_in().iter().count(), 0);
        // Past MAX_WAITING, packets are dropped and counted.
        for _ in 0..MAX_WAITING + 5 {
            a.push(1, 0, &[1; 64]);
        }
        a.flush();
        assert_eq!(a.counters.full, 5);
        assert_eq!(a.counters.handed, 10 + MAX_WAITING as u64);
        assert_eq!(b.take_in().iter().count(), MAX_WAITING);
        assert_eq!(b.counters.taken, 10 + MAX_WAITING as u64);
    }
}
