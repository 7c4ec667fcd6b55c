//! Measuring engines, and choosing one per algorithm by measurement.
//!
//! A measurement runs batches of in-place encryptions of one size through an engine
//! for a short, fixed time on scratch memory. The choice per algorithm weighs the
//! size classes by a simple IMIX (7:4:1 of 64, 570 and 1518 bytes), the traffic mix
//! VPN gateways are usually judged by: the engine that spends the least time on one
//! such mix wins. Asynchronous engines are measured but only run when configured.

use crate::{
    AeadOp, Algorithm, Direction, Engine, EngineSet, KeyRegistry, OpStatus, Span, TAG_LEN,
};
use std::time::{Duration, Instant};

/// The simple IMIX: packet sizes and their weights, 7:4:1 of 64, 570 and 1518 bytes.
pub const IMIX: [(usize, u32); 3] = [(64, 7), (570, 4), (1518, 1)];
/// Size classes of the calibration and their weights: the IMIX's.
pub const CLASSES: [(usize, u32); 3] = IMIX;
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

/// Encrypts batches of `BATCH` ops of `size` bytes for about `time`; at least one
/// batch. `None` when the engine does not serve `alg` or an op failed.
pub fn measure(
    engine: &mut dyn Engine,
    alg: Algorithm,
    size: usize,
    time: Duration,
) -> Option<Measurement> {
    if !engine.supports(alg) {
        return None;
    }
    let keys = KeyRegistry::new(4);
    let key = keys.insert(alg, &[0x42; 32][..alg.key_len()]).ok()?;
    let stride = size + TAG_LEN;
    let mut mem = vec![0x5a_u8; stride * BATCH];
    let mut ops: Vec<AeadOp> = (0..BATCH)
        .map(|i| {
            AeadOp::in_place(
                alg,
                key,
                Direction::Encrypt,
                [0; 12],
                Span::EMPTY,
                Span::new((i * stride) as u32, size as u32),
            )
        })
        .collect();
    let mut counter = 0u64;
    let mut batches = 0u64;
    // One warm-up batch: key expansion and first-touch page faults are not the engine's speed.
    let mut run = |ops: &mut [AeadOp], engine: &mut dyn Engine| -> bool {
        for op in ops.iter_mut() {
            counter += 1;
            op.nonce[4..].copy_from_slice(&counter.to_le_bytes());
            op.status = OpStatus::Pending;
        }
        engine.process(&keys, &mut mem, ops);
        ops.iter().all(|o| o.status == OpStatus::Ok)
    };
    if !run(&mut ops, engine) {
        return None;
    }
    let start = Instant::now();
    while batches == 0 || start.elapsed() < time {
        if !run(&mut ops, engine) {
            return None;
        }
        batches += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    let packets = (batches * BATCH as u64) as f64;
    Some(Measurement {
        engine: engine.name(),
        alg,
        size,
        mpps: packets / secs / 1e6,
        gbps: packets * size as f64 * 8.0 / secs / 1e9,
    })
}

/// Seconds one engine needs for one IMIX mix of packets, from its measurements.
fn mix_cost(ms: &[Measurement]) -> Option<f64> {
    CLASSES
        .iter()
        .map(|&(size, weight)| {
            ms.iter()
                .find(|m| m.size == size)
                .map(|m| weight as f64 / (m.mpps * 1e6))
        })
        .sum()
}

/// Measures every engine of `set` on every algorithm it serves at every size class,
/// and routes each algorithm to the engine with the cheapest mix. Algorithms already
/// pinned in `keep` are measured but not rerouted. Returns all measurements.
pub fn calibrate(set: &mut EngineSet, time: Duration, keep: &[Algorithm]) -> Vec<Measurement> {
    let mut all = Vec::new();
    for engine in set.engines_mut() {
        for alg in Algorithm::ALL {
            for &(size, _) in &CLASSES {
                if let Some(m) = measure(engine, alg, size, time) {
                    all.push(m);
                }
            }
        }
    }
    for alg in Algorithm::ALL {
        if keep.contains(&alg) {
            continue;
        }
        // Asynchronous engines are measured but never chosen by measurement: on an idle
        // machine they borrow the very cores the workers will need under load, so
        // they would win here and lose in service. They run when configured.
        let names: Vec<&'static str> = set
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
        let best = names
            .iter()
            .filter_map(|&name| {
                let ms: Vec<Measurement> = all
                    .iter()
                    .filter(|m| m.engine == name && m.alg == alg)
                    .cloned()
                    .collect();
                mix_cost(&ms).map(|c| (name, c))
            })
            .min_by(|a, b| a.1.total_cmp(&b.1));
        if let Some((name, _)) = best {
            let _ = set.choose(alg, name);
        }
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::ReferenceEngine;

    /// An engine that says it is asynchronous (and is fast): measured, not chosen.
    struct LooksAsync(ReferenceEngine);

    impl Engine for LooksAsync {
        fn name(&self) -> &'static str {
            "looks-async"
        }
        fn supports(&self, alg: Algorithm) -> bool {
            self.0.supports(alg)
        }
        fn process(&mut self, keys: &KeyRegistry, mem: &mut [u8], ops: &mut [AeadOp]) {
            self.0.process(keys, mem, ops)
        }
        fn as_async(&mut self) -> Option<&mut dyn crate::AsyncOps> {
            Some(self)
        }
    }

    #[allow(unsafe_code)]
    impl crate::AsyncOps for LooksAsync {
        unsafe fn submit(&mut self, _: *mut u8, _: usize, _: Vec<AeadOp>) -> u64 {
            unreachable!("calibration never submits")
        }
        fn poll(&mut self) -> Option<(u64, Vec<AeadOp>)> {
            None
        }
        fn wait(&mut self) -> Option<(u64, Vec<AeadOp>)> {
            None
        }
        fn in_flight(&self) -> usize {
            0
        }
    }

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
        assert_eq!(ms.len(), Algorithm::ALL.len() * CLASSES.len());
        assert!(ms.iter().all(|m| m.mpps > 0.0 && m.gbps > 0.0));
        assert_eq!(set.chosen(Algorithm::Aes128Gcm), Some("reference"));
    }
}
