//! Measuring engines, and choosing one per algorithm and size class by measurement.
//!
//! A measurement runs batches of in-place encryptions of one size through an engine
//! for a short, fixed time on scratch memory (a chained algorithm's laid out as ESP
//! runs it: header, IV, text padded to whole blocks, ICV). Every engine is measured at the size of
//! every class ([`size_class::SIZES`]), and each class of each algorithm goes to the
//! engine with the most packets per second at that size: small packets can go to a
//! multi-buffer engine while large ones go to whatever is fastest for them.
//! Asynchronous engines are measured but only run when configured.

use crate::aead::{CBC_BLOCK_LEN, MAX_KEY_LEN};
use crate::op_layout::{OpLayout, OpShape};
use crate::{AeadOp, Algorithm, Direction, Engine, EngineSet, KeyRegistry, OpStatus, size_class};
use std::time::{Duration, Instant};

pub use crate::size_class::IMIX;
/// Ops per batch: one frame of the data path.
pub const BATCH: usize = crate::FRAME_LEN;

#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    pub engine: &'static str,
    pub alg: Algorithm,
    pub size: usize,
    pub mpps: f64,
    pub gbps: f64,
}

/// The ESP header in front of a measured chained op's IV, under its MAC (SPI and
/// sequence number, RFC 4303 section 2).
const ESP_HEADER_LEN: usize = 8;

/// Encrypts batches of `BATCH` ops of `size` bytes for about `time`; at least one
/// batch. `None` when the engine does not serve `alg` or an op failed.
///
/// An AEAD op is `size` bytes of text and its tag. A chained op carries `size` bytes
/// as ESP would: its text padded to whole AES blocks, its IV in front, the MAC over
/// an 8-byte header, the IV and the ciphertext; the figures count `size` bytes a
/// packet, as for an AEAD.
pub fn measure(
    engine: &mut dyn Engine,
    alg: Algorithm,
    size: usize,
    time: Duration,
) -> Option<Measurement> {
    measure_ops(engine, alg, size, 0, &[Direction::Encrypt], time)
}

/// Runs batches of ops of `size` bytes with `aad_len` bytes of AAD through
/// `engine`, each batch once in each of `directions` in turn, for about `time`;
/// counts every op of every direction. Sealing gives every op a fresh nonce.
pub(crate) fn measure_ops(
    engine: &mut dyn Engine,
    alg: Algorithm,
    size: usize,
    aad_len: usize,
    directions: &[Direction],
    time: Duration,
) -> Option<Measurement> {
    if !engine.supports(alg) {
        return None;
    }
    let Batch {
        keys,
        mut mem,
        mut ops,
    } = batch(alg, size, aad_len)?;
    let mut counter = 0u64;
    let chained = alg.is_chained();
    let (rounds, secs) = timed(time, || {
        for &direction in directions {
            for op in ops.iter_mut() {
                if direction == Direction::Encrypt && !chained {
                    counter += 1;
                    op.nonce[4..].copy_from_slice(&counter.to_le_bytes());
                }
                op.direction = direction;
                op.status = OpStatus::Pending;
            }
            engine.process(&keys, &mut mem, &mut ops);
            if !ops.iter().all(|o| o.status == OpStatus::Ok) {
                return false;
            }
        }
        true
    })?;
    let packets = (rounds * (BATCH * directions.len()) as u64) as f64;
    Some(Measurement {
        engine: engine.name(),
        alg,
        size,
        mpps: packets / secs / 1e6,
        gbps: packets * size as f64 * 8.0 / secs / 1e9,
    })
}

/// A frame of in-place ops of one size, laid out for a measurement, with the key
/// they name.
struct Batch {
    keys: KeyRegistry,
    mem: Vec<u8>,
    ops: Vec<AeadOp>,
}

/// [`BATCH`] ops of `size` bytes with `aad_len` bytes of AAD; a chained algorithm's
/// laid out as ESP runs it instead (ESP's header under the MAC, the text padded to
/// whole blocks).
fn batch(alg: Algorithm, size: usize, aad_len: usize) -> Option<Batch> {
    let keys = KeyRegistry::new(4);
    let key = keys
        .insert(alg, &[0x42; MAX_KEY_LEN][..alg.key_len()])
        .ok()?;
    let (aad_len, len) = if alg.is_chained() {
        (ESP_HEADER_LEN, size.max(1).next_multiple_of(CBC_BLOCK_LEN))
    } else {
        (aad_len, size)
    };
    let mut layout = OpLayout::new();
    for _ in 0..BATCH {
        layout.push(OpShape {
            alg,
            key,
            nonce: [0; 12],
            aad_len,
            len,
            in_place: true,
        });
    }
    let OpLayout { mut mem, ops } = layout;
    mem.fill(0x5a);
    Some(Batch { keys, mem, ops })
}

/// Runs `round` once to warm up (key expansion and first-touch page faults are not
/// the engine's speed), then until `time` has passed, at least once: the timed
/// rounds and their seconds, or `None` when a round failed.
fn timed(time: Duration, mut round: impl FnMut() -> bool) -> Option<(u64, f64)> {
    if !round() {
        return None;
    }
    let mut rounds = 0u64;
    let start = Instant::now();
    while rounds == 0 || start.elapsed() < time {
        if !round() {
            return None;
        }
        rounds += 1;
    }
    Some((rounds, start.elapsed().as_secs_f64()))
}

/// Engines that measured within this fraction of a class's fastest count as fast as
/// it: the class then stays with the engine of the class below, when that engine is
/// among them. A difference this small is more often a shared machine's noise than
/// the engines', and a class that changed engine on it sent a size range to an
/// engine a fifth slower there now and then.
pub const SAME_SPEED: f64 = 0.05;

/// Measures every engine of `set` on every algorithm it serves at the size of every
/// class, `time` each (in three turns), and routes each class of each algorithm to
/// the engine with the most Mpps at that size (or the class below's, within
/// [`SAME_SPEED`] of it). Algorithms pinned in `keep` are measured but not
/// rerouted. Returns all measurements.
pub fn calibrate(set: &mut EngineSet, time: Duration, keep: &[Algorithm]) -> Vec<Measurement> {
    calibrate_only(set, time, keep, &Algorithm::ALL, usize::MAX)
}

/// [`calibrate`] for the algorithms in `only`: the others are neither measured
/// nor rerouted (a process that runs one algorithm spends no start-up time on the
/// rest). Classes whose size is past `largest` (the most a worker's buffers hold)
/// are not measured either, since no op of theirs can come: they follow the
/// largest class measured, so the choice stays whole.
pub fn calibrate_only(
    set: &mut EngineSet,
    time: Duration,
    keep: &[Algorithm],
    only: &[Algorithm],
    largest: usize,
) -> Vec<Measurement> {
    // Rounds of a part of the time each, the engines taking turns at each point,
    // and the best of each engine's turns kept: a burst of other work on the
    // machine then spoils one measurement of one engine, not the choice (measured
    // one engine after another, a burst during one engine's turn handed the class
    // to another, the portable reference engine included). Three rounds, not two:
    // with two, a shared 2-vCPU machine still now and then spoiled both of the
    // faster engine's turns at one size and gave the class to an engine a fifth
    // slower there.
    const ROUNDS: u32 = 3;
    let mut all: Vec<Measurement> = Vec::new();
    for _ in 0..ROUNDS {
        for &alg in only {
            for &size in size_class::SIZES.iter().filter(|&&s| s <= largest) {
                for engine in set.engines_mut() {
                    let Some(m) = measure(engine, alg, size, time / ROUNDS) else {
                        continue;
                    };
                    let same = |o: &&mut Measurement| {
                        o.engine == m.engine && o.alg == m.alg && o.size == m.size
                    };
                    match all.iter_mut().find(same) {
                        Some(best) if best.mpps >= m.mpps => {}
                        Some(best) => *best = m,
                        None => all.push(m),
                    }
                }
            }
        }
    }
    for &alg in only {
        if keep.contains(&alg) {
            continue;
        }
        // Asynchronous engines are measured but never chosen by measurement: on an idle
        // machine they borrow the very cores the workers will need under load, so
        // they would win here and lose in service. They run when configured.
        let sync: Vec<&'static str> = set
            .engines_mut()
            .filter(|e| e.supports(alg))
            .filter_map(|e| {
                if e.as_async().is_some() {
                    None
                } else {
                    Some(e.name())
                }
            })
            .collect();
        let mut names = choose_classes(alg, &all, &sync);
        for class in 1..names.len() {
            if size_class::SIZES[class] > largest {
                names[class] = names[class - 1];
            }
        }
        // Refused only when a class went unmeasured while an asynchronous engine
        // serves the algorithm; the choice then stays as it was.
        let _ = set.choose_by_class(alg, names);
    }
    all
}

/// The engine for each class of `alg`, from measurements `all`, among the engines
/// `eligible`: the fastest at the class's size, or the class below's engine when it
/// measured within [`SAME_SPEED`] of the fastest there. `None` for a class with no
/// measurement.
fn choose_classes(
    alg: Algorithm,
    all: &[Measurement],
    eligible: &[&'static str],
) -> [Option<&'static str>; size_class::COUNT] {
    let mut names: [Option<&'static str>; size_class::COUNT] = [None; size_class::COUNT];
    for (class, &size) in size_class::SIZES.iter().enumerate() {
        let here = || {
            all.iter()
                .filter(|m| m.alg == alg && m.size == size && eligible.contains(&m.engine))
        };
        let Some(best) = here().max_by(|a, b| a.mpps.total_cmp(&b.mpps)) else {
            continue;
        };
        names[class] = Some(best.engine);
        let below = class.checked_sub(1).and_then(|c| names[c]);
        if let Some(below) = below
            && here().any(|m| m.engine == below && m.mpps >= best.mpps * (1.0 - SAME_SPEED))
        {
            names[class] = Some(below);
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::looks_async::LooksAsync;
    use crate::reference::ReferenceEngine;

    #[test]
    fn asynchronous_engines_are_not_chosen_by_measurement() {
        let mut set = EngineSet::new(vec![
            Box::new(LooksAsync(ReferenceEngine::new())),
            Box::new(ReferenceEngine::new()),
        ]);
        let ms = calibrate(&mut set, Duration::from_millis(1), &[]);
        assert!(ms.iter().any(|m| m.engine == "looks-async"), "measured");
        assert_eq!(set.chosen(Algorithm::ChaCha20Poly1305), Some("reference"));
    }

    #[test]
    fn measures_and_chooses() {
        let mut set = EngineSet::new(vec![Box::new(ReferenceEngine::new())]);
        let ms = calibrate(&mut set, Duration::from_millis(2), &[]);
        assert_eq!(ms.len(), Algorithm::ALL.len() * size_class::SIZES.len());
        assert!(ms.iter().all(|m| m.mpps > 0.0 && m.gbps > 0.0));
        assert_eq!(set.chosen(Algorithm::Aes128Gcm), Some("reference"));
        assert_eq!(set.chosen(Algorithm::Aes256CbcHmacSha1), Some("reference"));
    }

    /// A class past what the buffers hold is not measured and goes where the
    /// largest measured class goes.
    #[test]
    fn classes_past_the_largest_op_follow_the_class_below() {
        let mut set = EngineSet::new(vec![Box::new(ReferenceEngine::new())]);
        let only = [Algorithm::ChaCha20Poly1305];
        let ms = calibrate_only(&mut set, Duration::from_millis(2), &[], &only, 2048);
        let largest = size_class::SIZES[size_class::COUNT - 1];
        assert!(ms.iter().all(|m| m.size <= 2048), "measured only what fits");
        assert_eq!(ms.len(), size_class::COUNT - 1);
        assert_eq!(
            set.chosen_for(Algorithm::ChaCha20Poly1305, largest as u32),
            set.chosen_for(Algorithm::ChaCha20Poly1305, 1518)
        );
    }

    /// Chained ops are measured at sizes that are no whole number of blocks too
    /// (padded as ESP pads), and what they count is the size asked for.
    #[test]
    fn chained_algorithms_are_measured_at_any_size() {
        let mut engine = ReferenceEngine::new();
        for alg in Algorithm::ALL.into_iter().filter(|a| a.is_chained()) {
            for size in [1, 64, 570, 1420, 1518] {
                let m = measure(&mut engine, alg, size, Duration::from_millis(1))
                    .unwrap_or_else(|| panic!("{alg} at {size} B"));
                assert_eq!((m.alg, m.size), (alg, size));
                assert!(m.mpps > 0.0);
            }
        }
    }

    /// Does no crypto (marks every op done) and is slow (a pause per call) for ops
    /// of `slow` sizes: fast at some sizes, slow at the others.
    struct SizeBound {
        name: &'static str,
        slow: fn(u32) -> bool,
    }

    impl Engine for SizeBound {
        fn name(&self) -> &'static str {
            self.name
        }
        fn supports(&self, alg: Algorithm) -> bool {
            alg != Algorithm::Aes256Gcm
        }
        fn process(&mut self, _: &KeyRegistry, _: &mut [u8], ops: &mut [AeadOp]) {
            if ops.iter().any(|o| (self.slow)(o.len)) {
                std::thread::sleep(Duration::from_micros(300));
            }
            ops.iter_mut().for_each(|o| o.status = OpStatus::Ok);
        }
    }

    /// A class stays with the class below's engine when another beat it there by
    /// less than `SAME_SPEED`, and goes to the other when it beat it by more; an
    /// engine not eligible (asynchronous) is never chosen, however fast.
    #[test]
    fn a_class_changes_engine_only_for_a_clear_lead() {
        let alg = Algorithm::ChaCha20Poly1305;
        let m = |engine, size, mpps| Measurement {
            engine,
            alg,
            size,
            mpps,
            gbps: 0.0,
        };
        let [s0, s1, s2, s3, s4, s5] = size_class::SIZES;
        let all = [
            m("a", s0, 10.0),
            m("b", s0, 5.0),
            // b ahead by 3%: a keeps the class.
            m("a", s1, 8.0),
            m("b", s1, 8.24),
            // b ahead by 10%: b takes it.
            m("a", s2, 5.0),
            m("b", s2, 5.5),
            // a ahead of b by 4%: b, the class below's engine, keeps it.
            m("a", s3, 3.12),
            m("b", s3, 3.0),
            // An asynchronous engine far ahead, and a within 5% of b: b.
            m("a", s4, 1.96),
            m("b", s4, 2.0),
            m("async", s4, 9.0),
            // a ahead by 20% at a jumbo frame's size: a takes it back.
            m("a", s5, 0.36),
            m("b", s5, 0.30),
        ];
        let names = choose_classes(alg, &all, &["a", "b"]);
        assert_eq!(
            names,
            [
                Some("a"),
                Some("a"),
                Some("b"),
                Some("b"),
                Some("b"),
                Some("a")
            ]
        );
        // Nothing measured for another algorithm: no choice.
        assert_eq!(
            choose_classes(Algorithm::Aes128Gcm, &all, &["a", "b"]),
            [None; size_class::COUNT]
        );
    }

    #[test]
    fn each_class_goes_to_the_engine_fastest_at_its_size() {
        let mut set = EngineSet::new(vec![
            // Fast up to 570 bytes, slow above.
            Box::new(SizeBound {
                name: "small",
                slow: |len| len > 570,
            }),
            // Slow up to 256 bytes, fast above.
            Box::new(SizeBound {
                name: "large",
                slow: |len| len <= 256,
            }),
        ]);
        let ms = calibrate(&mut set, Duration::from_millis(3), &[Algorithm::Aes128Gcm]);
        let chacha = Algorithm::ChaCha20Poly1305;
        let fast = |name: &str, size: usize| {
            ms.iter()
                .find(|m| m.engine == name && m.alg == chacha && m.size == size)
                .unwrap()
                .mpps
        };
        assert!(fast("small", 64) > fast("large", 64));
        assert!(fast("large", 1518) > fast("small", 1518));
        // At 570 bytes both are fast: the class below's engine keeps it unless the
        // other measured faster by more than `SAME_SPEED`.
        let at_570 = if fast("large", 570) * (1.0 - SAME_SPEED) > fast("small", 570) {
            "large"
        } else {
            "small"
        };
        let want = [
            ("small", 64),
            ("small", 256),
            (at_570, 570),
            ("large", 1024),
            ("large", 1518),
        ];
        for (name, size) in want {
            assert_eq!(set.chosen_for(chacha, size as u32), Some(name), "{size} B");
        }
        assert_eq!(set.chosen_for(chacha, 159), Some("small"));
        assert_eq!(set.chosen_for(chacha, 1424), Some("large"));
        // Pinned: measured, left alone (every size on the first engine, as made).
        assert!(ms.iter().any(|m| m.alg == Algorithm::Aes128Gcm));
        assert_eq!(set.describe(Algorithm::Aes128Gcm), "small for every size");
        // Nobody serves it: nothing measured, nothing chosen.
        assert!(!ms.iter().any(|m| m.alg == Algorithm::Aes256Gcm));
        assert_eq!(set.chosen(Algorithm::Aes256Gcm), None);
    }
}
