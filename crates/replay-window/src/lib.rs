//! The lock-free anti-replay window that WireGuard's receive counters and ESP's
//! sequence numbers share. A protocol sets its rules around it: the window's size,
//! the numbers it refuses whatever the window says, and, for ESP with extended
//! sequence numbers, which full number a packet's low half stands for.
//!
//! Every worker that opens for a session or an SA checks and commits without a
//! lock. The window is a ring of slots. A slot is one 128-bit atomic word: the upper
//! half holds the number of a 64-number block (its tag), and the lower half records
//! which of that block's numbers were seen. A commit changes one slot with one
//! compare-and-swap. What happens depends on the block the slot holds:
//! - the number's own block: the number's bit decides;
//! - an older block: that block is a whole ring behind this number's, so outside
//!   the window, and the slot starts over with this number's block;
//! - a newer block: this number's block has left the ring, so the number is refused.
//!
//! Consecutive numbers of one block committed together (a frame's packets from one
//! sender) take one compare-and-swap for all of them.
//!
//! A slot's tag only moves forward. So once a number is accepted, every later
//! commit of it meets either its bit or a newer block: no number is accepted twice,
//! whatever the interleaving. The newest block accepted is kept beside the ring and
//! written once per 64 numbers, not once per packet. The newest number itself is
//! the highest bit in that block's slot, and is read only where a decision depends
//! on it, at the window's lower edge. Under concurrency a worker decides with the
//! newest number it has seen. Commits racing it may have moved the window on since,
//! so the window it used may be a moment old, but a number is still accepted at
//! most once.
//!
//! Checking and committing are separate: the data path checks before it spends a
//! decryption on a packet, and commits only after the tag has verified, so a forged
//! packet can never move the window.

#![forbid(unsafe_code)]

#[cfg(feature = "race")]
pub mod race;

use portable_atomic::AtomicU128;
use std::cmp::Ordering as Cmp;
use std::sync::atomic::{AtomicU64, Ordering};

/// Numbers per slot: the lower half of the slot's word.
pub const BLOCK: u64 = 64;
const SLOTS_PER_LINE: usize = 4;

/// Four slots, aligned to a cache line, so that the workers committing neighbouring
/// numbers share as few lines as the numbers allow: a sender's block of 256
/// numbers is one line.
#[repr(align(64))]
struct Line([AtomicU128; SLOTS_PER_LINE]);

/// The newest block, on a line of its own: read by every check and commit, written
/// once per block.
#[repr(align(64))]
#[derive(Default)]
struct NewestBlock(AtomicU64);

/// What the ring says about one number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// Not seen yet.
    Fresh,
    /// Seen already.
    Seen,
    /// Its slot holds a newer block: the number's block has left the ring.
    Evicted,
}

/// The ring of slots and the newest block. The window it keeps is the `size - 1`
/// numbers behind the newest one, the newest included, for a size the ring was made
/// to hold (see [`SeenRing::for_window`]).
pub struct SeenRing {
    /// The newest block accepted, plus one (zero: nothing yet).
    newest: NewestBlock,
    /// The slot count less one: the ring's length is a power of two.
    slot_mask: u64,
    lines: Box<[Line]>,
}

impl SeenRing {
    /// A ring of `slots` slots: a power of two, at least 4 (one cache line).
    ///
    /// # Panics
    /// When `slots` is not such a number.
    pub fn with_slots(slots: usize) -> SeenRing {
        assert!(
            slots.is_power_of_two() && slots >= SLOTS_PER_LINE,
            "a power of two of at least {SLOTS_PER_LINE} slots, not {slots}"
        );
        SeenRing {
            newest: NewestBlock::default(),
            slot_mask: slots as u64 - 1,
            lines: (0..slots / SLOTS_PER_LINE)
                .map(|_| Line(std::array::from_fn(|_| AtomicU128::new(0))))
                .collect(),
        }
    }

    /// The smallest ring that keeps a window of `size` numbers (the newest and the
    /// `size - 1` behind it): the newest number's block and the blocks the numbers
    /// behind it reach when the newest is its block's first, rounded up to a power
    /// of two.
    pub fn for_window(size: u64) -> SeenRing {
        let slots = (size.saturating_sub(1).div_ceil(BLOCK) + 1).next_power_of_two();
        SeenRing::with_slots((slots as usize).max(SLOTS_PER_LINE))
    }

    /// The slots in the ring.
    pub fn slots(&self) -> u64 {
        self.slot_mask + 1
    }

    /// The newest block accepted, or `None` before the first number.
    #[inline]
    pub fn newest_block(&self) -> Option<u64> {
        self.newest.0.load(Ordering::Acquire).checked_sub(1)
    }

    /// Whether `block` is past the newest block accepted (true before any): none of
    /// its numbers can have been seen, so no slot needs reading.
    #[inline]
    pub fn is_ahead(&self, block: u64) -> bool {
        block >= self.newest.0.load(Ordering::Acquire)
    }

    /// The newest number accepted; `None` before the first.
    pub fn newest(&self) -> Option<u64> {
        Some(self.newest_in(self.newest_block()?))
    }

    /// Decides with the newest number accepted (0 before any). `decide` must be
    /// monotone in it: its answer, once changed as the newest grows, never changes
    /// back (as the window's edge, or an inferred number, is). Then the answers for
    /// the first and the last number of the newest block are the answer for every
    /// number in it when they agree, and only when they differ is the exact newest
    /// read, from the block's slot.
    #[inline]
    pub fn with_newest<T: PartialEq>(&self, decide: impl Fn(u64) -> T) -> T {
        let Some(block) = self.newest_block() else {
            return decide(0);
        };
        let first = block * BLOCK;
        let at_first = decide(first);
        if at_first == decide(first + BLOCK - 1) {
            return at_first;
        }
        decide(self.newest_in(block))
    }

    /// Whether `n` is at most `size - 1` behind the newest number accepted (or ahead
    /// of it): in the window by its place alone.
    #[inline]
    pub fn within(&self, n: u64, size: u64) -> bool {
        self.with_newest(|newest| newest.saturating_sub(n) < size)
    }

    /// Whether every number of `block` is within a window of `size` by place: its
    /// first number is, which the newest block alone decides for most blocks.
    #[inline]
    pub fn block_within(&self, block: u64, size: u64) -> bool {
        match self.newest_block() {
            None => true,
            // The newest is at most the newest block's last number.
            Some(newest) if (newest * BLOCK + BLOCK - 1).saturating_sub(block * BLOCK) < size => {
                true
            }
            Some(_) => self.within(block * BLOCK, size),
        }
    }

    /// What `n`'s slot says about it now. Changes nothing.
    #[inline]
    pub fn seen(&self, n: u64) -> Seen {
        let word = self.slot(n / BLOCK).load(Ordering::Acquire);
        let held = (word >> 64) as u64;
        match (n / BLOCK).cmp(&held) {
            Cmp::Equal if word & (1u128 << (n % BLOCK)) != 0 => Seen::Seen,
            Cmp::Equal | Cmp::Greater => Seen::Fresh,
            Cmp::Less => Seen::Evicted,
        }
    }

    /// Records the numbers of `block` whose bits are set in `mask`, with one
    /// compare-and-swap; the bits newly recorded (those not seen before), or
    /// `Err(Seen::Evicted)` when the slot holds a newer block. The caller has
    /// decided that the numbers are within its window.
    pub fn record(&self, block: u64, mask: u64) -> Result<u64, Seen> {
        let slot = self.slot(block);
        let mut word = slot.load(Ordering::Acquire);
        let fresh = loop {
            let held = (word >> 64) as u64;
            let (fresh, new) = match block.cmp(&held) {
                Cmp::Less => return Err(Seen::Evicted),
                Cmp::Equal => (mask & !(word as u64), word | u128::from(mask)),
                // An older block, a whole ring behind: the slot starts over.
                Cmp::Greater => (mask, (u128::from(block) << 64) | u128::from(mask)),
            };
            if fresh == 0 {
                return Ok(0);
            }
            match slot.compare_exchange_weak(word, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => break fresh,
                Err(now) => word = now,
            }
        };
        // The block is published after its slot is written, so that whoever reads it
        // as the newest finds the newest number in the slot (`newest_in`).
        if block + 1 > self.newest.0.load(Ordering::Relaxed) {
            self.newest.0.fetch_max(block + 1, Ordering::AcqRel);
        }
        Ok(fresh)
    }

    /// The newest number accepted, `block` being the newest block published.
    fn newest_in(&self, block: u64) -> u64 {
        let word = self.slot(block).load(Ordering::Acquire);
        let held = (word >> 64) as u64;
        // A commit writes the slot before it publishes the block (acquired by the
        // caller), and a slot's block only moves forward: the slot holds this block,
        // or one a whole ring newer whose commit has yet to publish it, whose numbers
        // are newer still.
        debug_assert!(held >= block, "slot {held} behind published block {block}");
        let highest_bit = 63 - (word as u64).leading_zeros().min(63);
        held * BLOCK + u64::from(highest_bit)
    }

    #[inline]
    fn slot(&self, block: u64) -> &AtomicU128 {
        let index = (block & self.slot_mask) as usize;
        &self.lines[index / SLOTS_PER_LINE].0[index % SLOTS_PER_LINE]
    }
}

impl Default for SeenRing {
    /// The smallest ring: one cache line, 256 numbers.
    fn default() -> SeenRing {
        SeenRing::with_slots(SLOTS_PER_LINE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The newest number's block and the blocks the `size - 1` numbers behind it
    /// reach when the newest is its block's first: 193 numbers reach back three
    /// blocks, 16321 reach back 255.
    #[test]
    fn a_ring_holds_the_window_and_no_more() {
        for (size, slots) in [
            (32, 4),
            (64, 4),
            (65, 4),
            (193, 4),
            (194, 8),
            (1024, 32),
            (16321, 256),
            (16322, 512),
            (16384, 512),
            (32705, 512),
        ] {
            assert_eq!(SeenRing::for_window(size).slots(), slots, "window {size}");
        }
    }

    #[test]
    fn a_number_is_recorded_once() {
        let r = SeenRing::for_window(256);
        assert_eq!(r.newest(), None);
        assert!(r.is_ahead(0));
        assert_eq!(r.seen(5), Seen::Fresh);
        assert_eq!(r.record(0, 1 << 5), Ok(1 << 5));
        assert_eq!(r.seen(5), Seen::Seen);
        assert_eq!(r.record(0, 1 << 5 | 1 << 6), Ok(1 << 6));
        assert_eq!(r.record(0, 1 << 5 | 1 << 6), Ok(0));
        assert_eq!(r.newest(), Some(6));
        assert!(!r.is_ahead(0));
        assert!(r.is_ahead(1));
    }

    #[test]
    fn a_block_a_whole_ring_newer_evicts_the_old_one() {
        let r = SeenRing::with_slots(4);
        assert_eq!(r.record(1, 1), Ok(1));
        assert_eq!(r.record(5, 1 << 3), Ok(1 << 3));
        assert_eq!(r.newest(), Some(5 * BLOCK + 3));
        assert_eq!(r.seen(BLOCK), Seen::Evicted);
        assert_eq!(r.record(1, 2), Err(Seen::Evicted));
        // Its bits went with it: the new block starts with only its own.
        assert_eq!(r.seen(5 * BLOCK + 1), Seen::Fresh);
    }

    #[test]
    fn the_window_edge_reads_the_newest_number_exactly() {
        let r = SeenRing::for_window(100);
        r.record(3, 1 << 10).unwrap(); // newest: 202
        assert!(r.within(202 - 99, 100));
        assert!(!r.within(202 - 100, 100));
        assert!(r.within(500, 100), "ahead of the newest");
        assert!(r.block_within(2, 100), "128..=191: all within");
        assert!(!r.block_within(1, 100), "64 is not");
    }

    #[test]
    fn workers_racing_accept_each_number_once() {
        let r = std::sync::Arc::new(SeenRing::for_window(4096));
        let taken: Vec<u64> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    let r = r.clone();
                    s.spawn(move || {
                        let mut mine = 0;
                        for n in 0..20_000u64 {
                            if r.record(n / BLOCK, 1 << (n % BLOCK)) == Ok(1 << (n % BLOCK)) {
                                mine += 1;
                            }
                        }
                        mine
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(taken.iter().sum::<u64>(), 20_000);
    }
}
