//! Outbound sequence numbers, shared by every worker that encrypts for an SA.
//!
//! The first packet carries 1 and each packet the next number. Numbers never cycle
//! (RFC 4303 section 3.3.3): once the last one is sent (2^32 - 1, or 2^64 - 1 with
//! extended sequence numbers) the SA sends nothing more and must be rekeyed.
//!
//! A take is one `fetch_add` on a count of takes, never a compare-and-swap loop, so
//! workers that encrypt for one SA at once never retry. The number is where the SA
//! started plus the count; the count is what the atomic holds, not the number, because
//! with extended sequence numbers the last number is `u64::MAX` itself: a counter
//! holding numbers would have to go past it to say "exhausted", and would wrap to 0
//! and hand out 1 again. The count starts at 0 and grows by one per call, so it wraps
//! only after 2^64 calls, which at a billion calls a second takes over 500 years:
//! takes that fail keep counting, and the SA stays exhausted.

use std::sync::atomic::{AtomicU64, Ordering};

/// The SA has sent its last sequence number and must be rekeyed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SequenceExhausted;

#[derive(Debug)]
pub struct SendSequence {
    /// The number of the first take.
    first: u64,
    /// The last number the SA may send.
    last: u64,
    /// Takes so far, those that failed included.
    taken: AtomicU64,
}

impl SendSequence {
    /// A new SA's sequence: the first packet carries 1.
    pub fn new(esn: bool) -> SendSequence {
        SendSequence::starting_at(esn, 1)
    }

    /// A sequence whose next number is `next`: for an SA taken over in mid-life (the
    /// next number is where its previous owner stopped), and for tests near the end.
    /// 0 is never sent, so `next` 0 starts at 1; past the last number, the sequence
    /// is exhausted from the start.
    pub fn starting_at(esn: bool, next: u64) -> SendSequence {
        SendSequence {
            first: next.max(1),
            last: if esn { u64::MAX } else { u64::from(u32::MAX) },
            taken: AtomicU64::new(0),
        }
    }

    /// The number for the next packet; every call gets another, whatever the workers
    /// calling at once.
    pub fn take(&self) -> Result<u64, SequenceExhausted> {
        // Relaxed: the count orders nothing else; uniqueness comes from the single
        // atomic's order of changes.
        let taken = self.taken.fetch_add(1, Ordering::Relaxed);
        self.number(taken).ok_or(SequenceExhausted)
    }

    /// What the next take would give (for show). Once exhausted: one past the last
    /// number, or `u64::MAX` with extended sequence numbers (`is_exhausted` tells).
    pub fn next(&self) -> u64 {
        let taken = self.taken.load(Ordering::Relaxed);
        self.number(taken)
            .unwrap_or_else(|| self.last.saturating_add(1))
    }

    pub fn is_exhausted(&self) -> bool {
        self.number(self.taken.load(Ordering::Relaxed)).is_none()
    }

    /// The number of the take after `taken` others, if the SA may still send it.
    fn number(&self, taken: u64) -> Option<u64> {
        self.first
            .checked_add(taken)
            .filter(|&number| number <= self.last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_at_one() {
        for esn in [false, true] {
            let s = SendSequence::new(esn);
            assert_eq!(s.next(), 1);
            assert_eq!(s.take(), Ok(1));
            assert_eq!(s.take(), Ok(2));
            assert_eq!(s.next(), 3);
            assert!(!s.is_exhausted());
        }
        assert_eq!(SendSequence::starting_at(false, 0).take(), Ok(1));
    }

    #[test]
    fn without_esn_stops_after_the_last_32_bit_number() {
        let s = SendSequence::starting_at(false, 0xFFFF_FFFE);
        assert_eq!(s.take(), Ok(0xFFFF_FFFE));
        assert_eq!(s.next(), 0xFFFF_FFFF);
        assert_eq!(s.take(), Ok(0xFFFF_FFFF));
        assert!(s.is_exhausted());
        for _ in 0..3 {
            assert_eq!(s.take(), Err(SequenceExhausted));
        }
        assert!(s.is_exhausted());
        assert_eq!(s.next(), 0x1_0000_0000);
        assert!(SendSequence::starting_at(false, 0x1_0000_0000).is_exhausted());
    }

    #[test]
    fn with_esn_passes_2_32_and_stops_at_u64_max() {
        let s = SendSequence::starting_at(true, 0xFFFF_FFFF);
        assert_eq!(s.take(), Ok(0xFFFF_FFFF));
        assert_eq!(s.take(), Ok(0x1_0000_0000));
        assert_eq!(s.take(), Ok(0x1_0000_0001));

        let s = SendSequence::starting_at(true, u64::MAX - 1);
        assert_eq!(s.take(), Ok(u64::MAX - 1));
        assert_eq!(s.take(), Ok(u64::MAX));
        assert!(s.is_exhausted());
        for _ in 0..3 {
            assert_eq!(s.take(), Err(SequenceExhausted));
        }
        assert!(s.is_exhausted());
        assert_eq!(s.next(), u64::MAX);
    }

    /// Four threads take at once, across the end of the sequence: every number up to
    /// the last is handed out exactly once, and none after it.
    #[test]
    fn concurrent_takes_are_unique() {
        use std::sync::Arc;
        const THREADS: usize = 4;
        const PER_THREAD: usize = 50_000;
        const AVAILABLE: u64 = 120_000;
        for (esn, last) in [(false, u64::from(u32::MAX)), (true, u64::MAX)] {
            let s = Arc::new(SendSequence::starting_at(esn, last - AVAILABLE + 1));
            let threads: Vec<_> = (0..THREADS)
                .map(|_| {
                    let s = s.clone();
                    std::thread::spawn(move || {
                        (0..PER_THREAD)
                            .filter_map(|_| s.take().ok())
                            .collect::<Vec<u64>>()
                    })
                })
                .collect();
            let mut all: Vec<u64> = threads
                .into_iter()
                .flat_map(|t| t.join().expect("a taking thread"))
                .collect();
            let total = all.len();
            all.sort_unstable();
            all.dedup();
            assert_eq!(all.len(), total, "esn {esn}: a number was handed out twice");
            assert_eq!(total as u64, AVAILABLE, "esn {esn}: a number was skipped");
            assert_eq!(all.last(), Some(&last), "esn {esn}");
            assert!(s.is_exhausted(), "esn {esn}");
        }
    }
}
