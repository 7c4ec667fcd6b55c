//! The receive counter window, shared by every worker that decrypts for a session.
//! It accepts a counter once, and only while it is at most [`WINDOW_SIZE`] behind the
//! newest counter accepted (32,704: see `constants::REPLAY_WINDOW_BITS`), and never
//! one past the last a session may use.
//!
//! Workers check and commit without a lock, on the ring of tagged 64-counter blocks
//! that ESP's window uses too (`replay_window::SeenRing`), 512 slots. Consecutive
//! counters of one block committed together (`commit_all`, a frame's packets from
//! one sender) take one compare-and-swap for all of them. Each 256-counter block a
//! sender takes (`datapath::COUNTER_BLOCK`) is one cache line of slots, so workers
//! that commit at once rarely write the same line.
//!
//! Checking and committing are separate: the data path checks before it spends a
//! decryption on a packet, and commits only after the tag has verified, so a forged
//! packet can never move the window.

use crate::constants::{REJECT_AFTER_MESSAGES, REPLAY_WINDOW_BITS};
use replay_window::{BLOCK, Seen, SeenRing};

/// Counters this far behind the newest are always accepted (the ring less one slot,
/// as the Linux implementation reckons it).
pub const WINDOW_SIZE: u64 = REPLAY_WINDOW_BITS - BLOCK;
/// The window as the ring reckons it: the newest counter and those behind it.
const RING_WINDOW: u64 = WINDOW_SIZE + 1;

pub struct ReplayWindow {
    ring: SeenRing,
}

impl Default for ReplayWindow {
    fn default() -> Self {
        ReplayWindow {
            ring: SeenRing::for_window(RING_WINDOW),
        }
    }
}

impl ReplayWindow {
    pub fn new() -> ReplayWindow {
        ReplayWindow::default()
    }

    /// More than the window behind the newest counter, or past the last counter a
    /// session may use.
    fn out_of_range(&self, counter: u64) -> bool {
        counter >= REJECT_AFTER_MESSAGES || !self.ring.within(counter, RING_WINDOW)
    }

    /// Would `counter` be accepted now? Changes nothing.
    #[inline]
    pub fn check(&self, counter: u64) -> bool {
        // A block newer than the newest accepted cannot have been seen: in order, a
        // frame's counters are mostly past the blocks earlier frames committed, and
        // are decided without reading their slots. (Another worker may be committing
        // that block right now, ahead of its move of the newest: the check then says
        // yes, as it would have a moment earlier, and the commit decides.)
        if self.ring.is_ahead(counter / BLOCK) {
            return counter < REJECT_AFTER_MESSAGES;
        }
        self.check_in_ring(counter)
    }

    /// `check` for a counter of a block the window has reached: its slot decides.
    #[inline(never)]
    fn check_in_ring(&self, counter: u64) -> bool {
        !self.out_of_range(counter) && self.ring.seen(counter) == Seen::Fresh
    }

    /// Records `counter`; false when it was already seen or is outside the window
    /// (a second packet with one counter, on this worker or another, ends here).
    pub fn commit(&self, counter: u64) -> bool {
        let mut accepted = [false];
        self.commit_all(&[counter], &mut accepted);
        accepted[0]
    }

    /// Records `counters` in their order: `accepted[i]` is what `commit(counters[i])`
    /// one after another would have returned. Consecutive counters of one 64-counter
    /// block (a sender's packets in order, the common case) take one
    /// compare-and-swap together rather than one each.
    ///
    /// # Panics
    /// When the two slices differ in length.
    pub fn commit_all(&self, counters: &[u64], accepted: &mut [bool]) {
        assert_eq!(counters.len(), accepted.len(), "a verdict per counter");
        let mut start = 0;
        while start < counters.len() {
            let block = counters[start] / BLOCK;
            let len = counters[start..]
                .iter()
                .take_while(|&&c| c / BLOCK == block)
                .count();
            let end = start + len;
            self.commit_block(block, &counters[start..end], &mut accepted[start..end]);
            start = end;
        }
    }

    /// `commit_all` for counters of one block. Committing some of a block's counters
    /// cannot put others of it out of range (a block is out of range only behind a
    /// newer block), so each counter's range is decided before the one swap, and a
    /// counter that comes twice is taken the first time only.
    fn commit_block(&self, block: u64, counters: &[u64], accepted: &mut [bool]) {
        let in_range = (block + 1)
            .checked_mul(BLOCK)
            .is_some_and(|end| end <= REJECT_AFTER_MESSAGES)
            && self.ring.block_within(block, RING_WINDOW);
        let mut mask = 0u64;
        for (&c, a) in counters.iter().zip(accepted.iter_mut()) {
            let bit = 1u64 << (c % BLOCK);
            *a = mask & bit == 0 && (in_range || !self.out_of_range(c));
            if *a {
                mask |= bit;
            }
        }
        if mask == 0 {
            return;
        }
        let fresh = self.ring.record(block, mask).unwrap_or(0);
        for (&c, a) in counters.iter().zip(accepted.iter_mut()) {
            *a &= fresh & (1 << (c % BLOCK)) != 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SLOT_BITS: u64 = BLOCK;
    const SLOTS: usize = (REPLAY_WINDOW_BITS / BLOCK) as usize;

    /// The ring is no larger than the window needs: a keypair's window is 8 KiB.
    #[test]
    fn the_ring_is_the_window_and_one_block() {
        assert_eq!(ReplayWindow::new().ring.slots(), SLOTS as u64);
    }

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
        let w = ReplayWindow::new();
        for (i, &(counter, accepted)) in steps.iter().enumerate() {
            assert_eq!(w.check(counter), accepted, "step {i}: check({counter})");
            assert_eq!(w.commit(counter), accepted, "step {i}: commit({counter})");
        }
    }

    #[test]
    fn every_counter_in_window_once_in_any_order() {
        for &start in &[0u64, 1, 63, 64, 65, 8190, 8191, 8192, 1 << 40] {
            let w = ReplayWindow::new();
            w.commit(start + WINDOW_SIZE);
            for c in (start + 1..start + WINDOW_SIZE).rev() {
                assert!(w.commit(c), "{c} first time");
                assert!(!w.commit(c), "{c} again");
            }
        }
    }

    #[test]
    fn bidirectional_sliding() {
        let w = ReplayWindow::new();
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
        let w = ReplayWindow::new();
        assert!(w.check(5));
        assert!(w.check(5));
        assert!(w.commit(5));
        assert!(!w.check(5));
    }

    /// The window as the protocol states it, one commit at a time: a counter is taken
    /// once, and only while at most WINDOW_SIZE behind the newest taken.
    #[derive(Default)]
    struct Model {
        newest: Option<u64>,
        seen: std::collections::HashSet<u64>,
    }

    impl Model {
        fn accepts(&self, counter: u64) -> bool {
            counter < REJECT_AFTER_MESSAGES
                && self
                    .newest
                    .is_none_or(|n| n.saturating_sub(counter) <= WINDOW_SIZE)
                && !self.seen.contains(&counter)
        }

        fn commit(&mut self, counter: u64) -> bool {
            let in_window = counter < REJECT_AFTER_MESSAGES
                && self
                    .newest
                    .is_none_or(|n| n.saturating_sub(counter) <= WINDOW_SIZE);
            if !in_window || !self.seen.insert(counter) {
                return false;
            }
            self.newest = Some(self.newest.map_or(counter, |n| n.max(counter)));
            true
        }
    }

    /// A random stream of counters: runs in order, small reorderings, leaps
    /// forward, replays far back and at the window's edge, the same counter again.
    fn stream(seed: u64, len: usize) -> Vec<u64> {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut base = 0u64;
        (0..len)
            .map(|_| match rng.gen_range(0..100) {
                0 => {
                    base += rng.gen_range(0..3 * REPLAY_WINDOW_BITS);
                    base
                }
                1..=6 => base.saturating_sub(rng.gen_range(0..2 * WINDOW_SIZE)),
                7..=14 => base.saturating_sub(rng.gen_range(WINDOW_SIZE - 40..WINDOW_SIZE + 40)),
                15..=19 => base,
                20..=59 => {
                    base += rng.gen_range(0..4);
                    base.saturating_sub(rng.gen_range(0..64))
                }
                _ => {
                    base += 1;
                    base
                }
            })
            .collect()
    }

    #[test]
    fn agrees_with_the_model_one_commit_at_a_time() {
        for round in 0..40 {
            let w = ReplayWindow::new();
            let mut model = Model::default();
            for (i, &counter) in stream(round, 20_000).iter().enumerate() {
                assert_eq!(
                    w.commit(counter),
                    model.commit(counter),
                    "round {round} step {i}: counter {counter}"
                );
            }
        }
    }

    /// The check before a decryption says what the commit after it would, on the
    /// same random streams: counters of blocks past the newest (decided without
    /// their slots), of the ring, behind it and at the last counter a session may use.
    #[test]
    fn check_agrees_with_the_model() {
        for (round, start) in [(0, 0), (1, 0), (2, REJECT_AFTER_MESSAGES - 30_000)] {
            let w = ReplayWindow::new();
            let mut model = Model::default();
            for (i, counter) in stream(round, 20_000).into_iter().enumerate() {
                let counter = start + counter;
                let want = model.accepts(counter);
                assert_eq!(w.check(counter), want, "round {round} step {i}: {counter}");
                assert_eq!(w.commit(counter), model.commit(counter));
            }
        }
    }

    /// Committing in batches of any length changes nothing in what is accepted:
    /// the random streams cut into random batches, against the model committing one
    /// at a time.
    #[test]
    fn batches_agree_with_the_model_one_commit_at_a_time() {
        batches_agree_with_the_model(100, 40, 0);
    }

    /// The same near the last counter a session may use, where a block's counters
    /// are not all in range and each is decided alone.
    #[test]
    fn batches_agree_with_the_model_near_the_last_counter() {
        batches_agree_with_the_model(200, 10, REJECT_AFTER_MESSAGES - 300_000);
    }

    /// The two edges where a block is not all in range, one batch each against
    /// the model: the block of the last counter a session may use (only its last
    /// counter, `REJECT_AFTER_MESSAGES`, is refused), and the ring's oldest block,
    /// which the window ends inside.
    #[test]
    fn a_block_at_either_edge_of_the_range_is_decided_counter_by_counter() {
        let last_block: Vec<u64> = (REJECT_AFTER_MESSAGES - 63..=REJECT_AFTER_MESSAGES).collect();
        let w = ReplayWindow::new();
        let mut accepted = vec![false; last_block.len()];
        w.commit_all(&last_block, &mut accepted);
        let (refused, taken) = accepted.split_last().unwrap();
        assert!(taken.iter().all(|&a| a) && !refused);

        let newest_block = SLOTS as u64 + 72;
        let newest = newest_block * SLOT_BITS + 10;
        let oldest: Vec<u64> = (0..SLOT_BITS)
            .map(|i| (newest_block - (SLOTS as u64 - 1)) * SLOT_BITS + i)
            .collect();
        let w = ReplayWindow::new();
        let mut model = Model::default();
        assert!(w.commit(newest) && model.commit(newest));
        let mut accepted = vec![false; oldest.len()];
        w.commit_all(&oldest, &mut accepted);
        let want: Vec<bool> = oldest.iter().map(|&c| model.commit(c)).collect();
        assert_eq!(accepted, want);
        assert!(want.contains(&true) && want.contains(&false));
    }

    /// `rounds` random streams from `seed` on, each counter moved up by `shift`
    /// (saturating), cut into random batches.
    fn batches_agree_with_the_model(seed: u64, rounds: u64, shift: u64) {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed + 11);
        for round in 0..rounds {
            let w = ReplayWindow::new();
            let mut model = Model::default();
            let stream: Vec<u64> = stream(seed + round, 20_000)
                .into_iter()
                .map(|c| c.saturating_add(shift))
                .collect();
            let mut at = 0;
            while at < stream.len() {
                let n = rng.gen_range(1..=300).min(stream.len() - at);
                let batch = &stream[at..at + n];
                let mut accepted = vec![false; n];
                w.commit_all(batch, &mut accepted);
                for (i, (&c, &a)) in batch.iter().zip(&accepted).enumerate() {
                    assert_eq!(
                        a,
                        model.commit(c),
                        "round {round} at {}: counter {c}",
                        at + i
                    );
                }
                at += n;
            }
        }
    }

    /// Threads commit one stream of counters (the race of `replay_window::race`),
    /// half of them in sorted batches as a worker's frames of one sender mostly
    /// are: each counter is accepted exactly once.
    #[test]
    fn concurrent_commits_accept_each_counter_exactly_once() {
        use rand::Rng;
        use replay_window::race::{ROUND, ROUNDS, accepts_each_once};
        let w = ReplayWindow::new();
        accepts_each_once("counter", 0, |t, rng, mine| {
            if t % 2 == 0 {
                return mine.iter().copied().filter(|&c| w.commit(c)).collect();
            }
            let mut accepted = Vec::new();
            for batch in mine.chunks_mut(rng.gen_range(1..200)) {
                batch.sort_unstable();
                let mut ok = vec![false; batch.len()];
                w.commit_all(batch, &mut ok);
                accepted.extend(batch.iter().zip(ok).filter(|(_, a)| *a).map(|(c, _)| *c));
            }
            accepted
        });
        assert!(!w.check(ROUND * ROUNDS - 1));
        assert!(w.check(ROUND * ROUNDS));
    }
}
