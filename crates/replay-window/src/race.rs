//! A race for the windows built on the ring (with the `race` feature, for their
//! tests): threads commit one stream of numbers, each thread its share and a copy
//! of a few others' (replays racing the originals), reordered, in rounds that keep
//! every thread within the window of the others. Every number must be accepted
//! exactly once, by whichever thread came first, whatever the interleaving.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::sync::Barrier;

/// How many threads race.
pub const THREADS: usize = 4;
/// Numbers in one round, which every thread finishes before the next begins.
pub const ROUND: u64 = 2048;
/// Rounds in a race.
pub const ROUNDS: u64 = 200;

/// Races `commit` over the numbers `first..first + ROUND * ROUNDS`. Each call hands
/// one thread (its index, and a random source seeded by it) its numbers of a round,
/// shuffled, and returns those the window accepted, in any order. Panics, naming
/// `what` a number is, unless each was accepted exactly once.
pub fn accepts_each_once<F>(what: &str, first: u64, commit: F)
where
    F: Fn(usize, &mut StdRng, &mut [u64]) -> Vec<u64> + Sync,
{
    let barrier = Barrier::new(THREADS);
    let mut all: Vec<u64> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                let (barrier, commit) = (&barrier, &commit);
                s.spawn(move || {
                    let mut rng = StdRng::seed_from_u64(t as u64);
                    let mut accepted = Vec::new();
                    for round in 0..ROUNDS {
                        let start = first + round * ROUND;
                        let mut mine: Vec<u64> = (start..start + ROUND)
                            .filter(|n| *n as usize % THREADS == t || rng.gen_ratio(1, 4))
                            .collect();
                        mine.shuffle(&mut rng);
                        accepted.extend(commit(t, &mut rng, &mut mine));
                        barrier.wait();
                    }
                    accepted
                })
            })
            .collect();
        threads
            .into_iter()
            .flat_map(|t| t.join().expect("a committing thread"))
            .collect()
    });
    let total = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), total, "a {what} was accepted twice");
    assert_eq!(
        total as u64,
        ROUND * ROUNDS,
        "a {what} inside the window was lost"
    );
}
