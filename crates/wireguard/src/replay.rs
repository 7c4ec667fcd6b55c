//! The receive counter window: 8192 bits kept as a ring of 64-bit blocks, with one
//! redundant block so that sliding forward clears whole words (RFC 6479, as the Linux
//! implementation does it). The window accepts counters up to 8128 behind the newest.
//!
//! Checking and committing are separate: the data path checks before it spends a
//! decryption on a packet, and commits only after the tag has verified, so a forged
//! packet can never move the window.

use crate::constants::{REJECT_AFTER_MESSAGES, REPLAY_WINDOW_BITS};

const BLOCK_BITS: u64 = 64;
const BLOCKS: usize = (REPLAY_WINDOW_BITS / BLOCK_BITS) as usize;
/// Counters this far behind the newest are still accepted.
pub const WINDOW_SIZE: u64 = REPLAY_WINDOW_BITS - BLOCK_BITS;

#[derive(Clone)]
pub struct ReplayWindow {
    /// Newest counter seen, plus one (so zero means "nothing yet").
    top: u64,
    blocks: Box<[u64; BLOCKS]>,
}

impl Default for ReplayWindow {
    fn default() -> Self {
        ReplayWindow {
            top: 0,
            blocks: Box::new([0; BLOCKS]),
        }
    }
}

impl ReplayWindow {
    pub fn new() -> ReplayWindow {
        ReplayWindow::default()
    }

    /// Would `counter` be accepted now? Changes nothing.
    pub fn check(&self, counter: u64) -> bool {
        if counter >= REJECT_AFTER_MESSAGES {
            return false;
        }
        let c = counter + 1;
        if c + WINDOW_SIZE < self.top {
            return false;
        }
        if c > self.top {
            return true;
        }
        let block = self.blocks[((c / BLOCK_BITS) as usize) % BLOCKS];
        block & (1 << (c % BLOCK_BITS)) == 0
    }

    /// Records `counter`; false when it was already seen or is outside the window
    /// (a second packet with one counter inside the same batch ends here).
    pub fn commit(&mut self, counter: u64) -> bool {
        if !self.check(counter) {
            return false;
        }
        let c = counter + 1;
        let index = c / BLOCK_BITS;
        if c > self.top {
            let current = self.top / BLOCK_BITS;
            let advance = (index - current).min(BLOCKS as u64);
            for i in 1..=advance {
                self.blocks[((current + i) as usize) % BLOCKS] = 0;
            }
            self.top = c;
        }
        self.blocks[(index as usize) % BLOCKS] |= 1 << (c % BLOCK_BITS);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Linux selftest's table, step by step: (counter, accepted).
    #[test]
    fn replay_table() {
        const W: u64 = WINDOW_SIZE;
        let steps: &[(u64, bool)] = &[
            (0, true),
            (1, true),
            (1, false),
            (9, true),
            (8, true),
            (7, true),
            (7, false),
            (W, true),
            (W - 1, true),
            (W - 1, false),
            (W - 2, true),
            (2, true),
            (2, false),
            (W + 16, true),
            (3, false),
            (W + 16, false),
            (W * 4, true),
            (W * 4 - (W - 1), true),
            (10, false),
            (W * 4 - W, true),
            (W * 4 - (W + 1), false),
            (W * 4 - (W - 2), true),
            (W * 4 + 1 - W, false),
            (0, false),
            (REJECT_AFTER_MESSAGES, false),
            (REJECT_AFTER_MESSAGES - 1, true),
            (REJECT_AFTER_MESSAGES, false),
            (REJECT_AFTER_MESSAGES - 1, false),
            (REJECT_AFTER_MESSAGES - 2, true),
            (REJECT_AFTER_MESSAGES + 1, false),
            (REJECT_AFTER_MESSAGES + 2, false),
            (REJECT_AFTER_MESSAGES - 2, false),
            (REJECT_AFTER_MESSAGES - 3, true),
            (0, false),
        ];
        let mut w = ReplayWindow::new();
        for (i, &(counter, accepted)) in steps.iter().enumerate() {
            assert_eq!(w.check(counter), accepted, "step {i}: check({counter})");
            assert_eq!(w.commit(counter), accepted, "step {i}: commit({counter})");
        }
    }

    #[test]
    fn every_counter_in_window_once_in_any_order() {
        for &start in &[0u64, 1, 63, 64, 65, 8190, 8191, 8192, 1 << 40] {
            let mut w = ReplayWindow::new();
            w.commit(start + WINDOW_SIZE);
            for c in (start + 1..start + WINDOW_SIZE).rev() {
                assert!(w.commit(c), "{c} first time");
                assert!(!w.commit(c), "{c} again");
            }
        }
    }

    #[test]
    fn bidirectional_sliding() {
        let mut w = ReplayWindow::new();
        for i in 1..=(REPLAY_WINDOW_BITS * 2) {
            assert!(w.commit(i));
        }
        // A jump forward, then everything in between arriving backwards.
        for i in (REPLAY_WINDOW_BITS * 2 + 1..=REPLAY_WINDOW_BITS * 2 + WINDOW_SIZE).rev() {
            assert!(w.commit(i), "{i}");
        }
        for i in REPLAY_WINDOW_BITS * 2 + WINDOW_SIZE + 1..=REPLAY_WINDOW_BITS * 5 {
            assert!(w.commit(i));
        }
    }

    #[test]
    fn check_changes_nothing() {
        let mut w = ReplayWindow::new();
        assert!(w.check(5));
        assert!(w.check(5));
        assert!(w.commit(5));
        assert!(!w.check(5));
    }
}
