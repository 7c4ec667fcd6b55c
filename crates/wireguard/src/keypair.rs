//! Transport keypairs and the three slots a peer keeps them in (whitepaper section
//! 5.4.6 and 6.x: next, current, previous; responder key confirmation).

use crate::constants::{
    PEER_WINDOW, REJECT_AFTER_MESSAGES, REJECT_AFTER_TIME, REKEY_AFTER_TIME, REKEY_ON_RECEIVE_AFTER,
};
use crate::replay::ReplayWindow;
use crypto::{Algorithm, KeyHandle, KeyRegistry};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// One session's keys, by handle in the key registry (which zeroes them when the
/// keypair is dropped), its counters and birth time.
///
/// The device owns it, and every worker may hold it too (through the data path's
/// view, [`crate::datapath`]): the counters are atomics, so any worker takes send
/// counters and commits received ones without a lock, and the keys leave the registry
/// when the last holder lets go.
pub struct Keypair {
    /// Unique among every keypair this process makes: what a worker's block of send
    /// counters is tied to (an index may be reused by a later keypair; a serial not).
    pub serial: u64,
    pub local_index: u32,
    pub remote_index: u32,
    pub send_key: KeyHandle,
    pub recv_key: KeyHandle,
    /// The next counter to send with; taken in blocks by [`Keypair::take_counters`].
    send_counter: SendCounter,
    pub replay: ReplayWindow,
    pub created: Instant,
    pub initiator: bool,
    /// `created` plus the section 6 limits, computed once: the data path compares
    /// instants per packet rather than subtracting them.
    pub reject_at: Instant,
    pub rekey_at: Instant,
    pub rekey_on_receive_at: Instant,
    registry: Arc<KeyRegistry>,
}

impl Keypair {
    pub fn new(
        registry: &Arc<KeyRegistry>,
        keys: &crate::noise::SessionKeys,
        local_index: u32,
        remote_index: u32,
        initiator: bool,
        now: Instant,
    ) -> Result<Keypair, crypto::KeyError> {
        let send_key = registry.insert(Algorithm::ChaCha20Poly1305, &keys.send)?;
        let recv_key = match registry.insert(Algorithm::ChaCha20Poly1305, &keys.recv) {
            Ok(k) => k,
            Err(e) => {
                registry.remove(send_key);
                return Err(e);
            }
        };
        static SERIAL: AtomicU64 = AtomicU64::new(0);
        Ok(Keypair {
            serial: SERIAL.fetch_add(1, Ordering::Relaxed),
            local_index,
            remote_index,
            send_key,
            recv_key,
            send_counter: SendCounter::default(),
            replay: ReplayWindow::new(),
            created: now,
            initiator,
            reject_at: now + REJECT_AFTER_TIME,
            rekey_at: now + REKEY_AFTER_TIME,
            rekey_on_receive_at: now + REKEY_ON_RECEIVE_AFTER,
            registry: registry.clone(),
        })
    }

    pub fn age(&self, now: Instant) -> std::time::Duration {
        now.saturating_duration_since(self.created)
    }

    /// May we still send on it? (Section 6.1: REJECT_AFTER_TIME and _MESSAGES.)
    pub fn can_send(&self, now: Instant) -> bool {
        now < self.reject_at && self.sent() < REJECT_AFTER_MESSAGES
    }

    /// Counters taken so far (the next one to be handed out).
    pub fn sent(&self) -> u64 {
        self.send_counter.next.load(Ordering::Relaxed)
    }

    /// A worker is about to hand packets sealed up to counter `last` to its driver:
    /// from now on the far end may have seen `last`.
    pub fn note_sending(&self, last: u64) {
        self.send_counter.sending.fetch_max(last, Ordering::Relaxed);
    }

    /// The newest counter any worker has handed to a driver (or is about to): the
    /// most the far end's window can have moved to.
    pub fn newest_sending(&self) -> u64 {
        self.send_counter.sending.load(Ordering::Relaxed)
    }

    /// Whether a packet sealed with `counter` has fallen so far behind the newest
    /// one sent that, sent now, it could arrive outside the far end's window: more
    /// than [`RESEAL_BEHIND`] behind. It must be sealed again with a fresh counter.
    pub fn is_late(&self, counter: u64) -> bool {
        self.newest_sending() > counter.saturating_add(RESEAL_BEHIND)
    }

    /// Takes `n` consecutive send counters and returns the first, or `None` once the
    /// session may not send `n` more (section 6.1: REJECT_AFTER_MESSAGES). No counter
    /// is ever handed out twice, whichever workers ask at once.
    pub fn take_counters(&self, n: u64) -> Option<u64> {
        self.send_counter
            .next
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| {
                c.checked_add(n).filter(|&end| end <= REJECT_AFTER_MESSAGES)
            })
            .ok()
    }

    pub fn can_receive(&self, now: Instant) -> bool {
        now < self.reject_at
    }
}

impl Drop for Keypair {
    fn drop(&mut self) {
        self.registry.remove(self.send_key);
        self.registry.remove(self.recv_key);
    }
}

/// How far behind the newest counter sent a sealed packet may be when its worker
/// hands it to the driver: three quarters of the far end's window (which may be
/// the usual 8,128 counters, smaller than ours). Workers sharing a session
/// send out of counter order by about a frame per worker in normal operation (far
/// below this), and a worker descheduled between sealing and sending falls further
/// behind; past this its packets are sealed again (see `dataplane`'s late check).
/// The quarter left is the slack for the time between that check and the wire.
pub const RESEAL_BEHIND: u64 = PEER_WINDOW / 4 * 3;

/// The send counters on a cache line of their own: workers write them once per block
/// of counters and once per batch sent, and must not slow the reads of the keys and
/// deadlines beside them.
#[repr(align(64))]
#[derive(Default)]
struct SendCounter {
    /// The next counter to hand out.
    next: AtomicU64,
    /// The newest counter handed to a driver (see [`Keypair::note_sending`]).
    sending: AtomicU64,
}

/// Which of a peer's three keypairs a receiver index names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeypairRole {
    Next,
    Current,
    Previous,
}

/// A peer's sessions. Shared (`Arc`) so that the data path's view can hold them too.
#[derive(Default)]
pub struct Keypairs {
    /// Responder only: derived, not yet confirmed by a packet from the initiator.
    pub next: Option<Arc<Keypair>>,
    pub current: Option<Arc<Keypair>>,
    pub previous: Option<Arc<Keypair>>,
}

impl Keypairs {
    pub fn find(&self, local_index: u32) -> Option<(KeypairRole, &Arc<Keypair>)> {
        [
            (KeypairRole::Current, &self.current),
            (KeypairRole::Previous, &self.previous),
            (KeypairRole::Next, &self.next),
        ]
        .into_iter()
        .find_map(|(s, k)| {
            k.as_ref()
                .filter(|k| k.local_index == local_index)
                .map(|k| (s, k))
        })
    }

    /// Every session held, with its role.
    pub fn all(&self) -> impl Iterator<Item = &Arc<Keypair>> + '_ {
        [&self.next, &self.current, &self.previous]
            .into_iter()
            .flatten()
    }

    /// Installs a new session; returns the keypairs it pushed out (their indices must
    /// leave the index table).
    pub fn install(&mut self, new: Keypair) -> Vec<Arc<Keypair>> {
        let new = Arc::new(new);
        let mut dropped = Vec::new();
        if new.initiator {
            // The initiator uses a new session at once. An unconfirmed `next` becomes
            // `previous` so its late packets still decrypt; otherwise `current` does.
            if let Some(next) = self.next.take() {
                dropped.extend(self.previous.replace(next));
                dropped.extend(self.current.take());
            } else {
                dropped.extend(self.previous.take());
                self.previous = self.current.take();
            }
            self.current = Some(new);
        } else {
            // The responder waits for the initiator's first packet before sending.
            dropped.extend(self.next.replace(new));
            dropped.extend(self.previous.take());
        }
        dropped
    }

    /// Data arrived on `next`: it is confirmed and becomes `current`. Returns the
    /// keypair that fell off the end.
    pub fn confirm_next(&mut self) -> Option<Arc<Keypair>> {
        let next = self.next.take()?;
        let dropped = self.previous.take();
        self.previous = self.current.take();
        self.current = Some(next);
        dropped
    }

    pub fn clear(&mut self) -> Vec<Arc<Keypair>> {
        [self.next.take(), self.current.take(), self.previous.take()]
            .into_iter()
            .flatten()
            .collect()
    }

    pub fn indices(&self) -> impl Iterator<Item = u32> + '_ {
        self.all().map(|k| k.local_index)
    }
}
