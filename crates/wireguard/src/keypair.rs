//! Transport keypairs and the three slots a peer keeps them in (whitepaper section
//! 5.4.6 and 6.x: next, current, previous; responder key confirmation).

use crate::constants::{
    REJECT_AFTER_MESSAGES, REJECT_AFTER_TIME, REKEY_AFTER_TIME, REKEY_ON_RECEIVE_AFTER,
};
use crate::replay::ReplayWindow;
use crypto::{Algorithm, KeyHandle, KeyRegistry};
use std::sync::Arc;
use std::time::Instant;

/// One session's keys, by handle in the key registry (which zeroes them when the
/// keypair is dropped), its counters and birth time.
pub struct Keypair {
    pub local_index: u32,
    pub remote_index: u32,
    pub send_key: KeyHandle,
    pub recv_key: KeyHandle,
    pub send_counter: u64,
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
        Ok(Keypair {
            local_index,
            remote_index,
            send_key,
            recv_key,
            send_counter: 0,
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
        now < self.reject_at && self.send_counter < REJECT_AFTER_MESSAGES
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

/// Which of a peer's three keypairs a receiver index names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeypairRole {
    Next,
    Current,
    Previous,
}

#[derive(Default)]
pub struct Keypairs {
    /// Responder only: derived, not yet confirmed by a packet from the initiator.
    pub next: Option<Keypair>,
    pub current: Option<Keypair>,
    pub previous: Option<Keypair>,
}

impl Keypairs {
    pub fn find(&self, local_index: u32) -> Option<(KeypairRole, &Keypair)> {
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

    pub fn find_mut(&mut self, local_index: u32) -> Option<(KeypairRole, &mut Keypair)> {
        if self
            .current
            .as_ref()
            .is_some_and(|k| k.local_index == local_index)
        {
            return self.current.as_mut().map(|k| (KeypairRole::Current, k));
        }
        if self
            .previous
            .as_ref()
            .is_some_and(|k| k.local_index == local_index)
        {
            return self.previous.as_mut().map(|k| (KeypairRole::Previous, k));
        }
        if self
            .next
            .as_ref()
            .is_some_and(|k| k.local_index == local_index)
        {
            return self.next.as_mut().map(|k| (KeypairRole::Next, k));
        }
        None
    }

    /// Installs a new session; returns the keypairs it pushed out (their indices must
    /// leave the index table).
    pub fn install(&mut self, new: Keypair) -> Vec<Keypair> {
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
    pub fn confirm_next(&mut self) -> Option<Keypair> {
        let next = self.next.take()?;
        let dropped = self.previous.take();
        self.previous = self.current.take();
        self.current = Some(next);
        dropped
    }

    pub fn clear(&mut self) -> Vec<Keypair> {
        [self.next.take(), self.current.take(), self.previous.take()]
            .into_iter()
            .flatten()
            .collect()
    }

    pub fn indices(&self) -> impl Iterator<Item = u32> + '_ {
        [&self.next, &self.current, &self.previous]
            .into_iter()
            .flatten()
            .map(|k| k.local_index)
    }
}
