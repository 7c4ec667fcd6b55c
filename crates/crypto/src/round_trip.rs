//! What a tunnel asks of an engine per packet, measured alone: each op sealed and
//! then opened again, in place, in the tunnel's layout (its AAD length; a chained
//! algorithm laid out as ESP runs it), batches of a frame. The graph benchmarks
//! divide a graph's speed by this: the crypto work the graph cannot avoid, opening
//! included (an AEAD opens more slowly than it seals: it checks the tag), so that
//! the ratio is what the graph itself costs.

use crate::aead::{CBC_BLOCK_LEN, MAX_KEY_LEN};
use crate::calibrate::{BATCH, Measurement};
use crate::op_layout::{OpLayout, OpShape};
use crate::{Algorithm, Direction, Engine, KeyRegistry, OpStatus};
use std::time::{Duration, Instant};

/// The ESP header under a chained op's MAC, before its IV.
const ESP_HEADER_LEN: usize = 8;

/// Seals and opens batches of ops of `size` bytes with `aad_len` bytes of AAD (a
/// chained algorithm: ESP's header instead) for about `time`, at least once. Counts
/// operations: two per op and round. `None` when the engine does not serve `alg`,
/// or an op failed (an open that does not verify is a broken engine).
pub fn measure(
    engine: &mut dyn Engine,
    alg: Algorithm,
    size: usize,
    aad_len: usize,
    time: Duration,
) -> Option<Measurement> {
    if !engine.supports(alg) {
        return None;
    }
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
    let OpLayout { mut mem, mut ops } = layout;
    mem.fill(0x5a);
    let mut counter = 0u64;
    let chained = alg.is_chained();
    let mut round = |ops: &mut [crate::AeadOp], engine: &mut dyn Engine| -> bool {
        for direction in [Direction::Encrypt, Direction::Decrypt] {
            for op in ops.iter_mut() {
                if direction == Direction::Encrypt && !chained {
                    counter += 1;
                    op.nonce[4..].copy_from_slice(&counter.to_le_bytes());
                }
                op.direction = direction;
                op.status = OpStatus::Pending;
            }
            engine.process(&keys, &mut mem, ops);
            if !ops.iter().all(|o| o.status == OpStatus::Ok) {
                return false;
            }
        }
        true
    };
    // One warm-up round: key expansion and first-touch page faults are not the
    // engine's speed.
    if !round(&mut ops, engine) {
        return None;
    }
    let mut rounds = 0u64;
    let start = Instant::now();
    while rounds == 0 || start.elapsed() < time {
        if !round(&mut ops, engine) {
            return None;
        }
        rounds += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    let operations = (2 * rounds * BATCH as u64) as f64;
    Some(Measurement {
        engine: engine.name(),
        alg,
        size,
        mpps: operations / secs / 1e6,
        gbps: operations * size as f64 * 8.0 / secs / 1e9,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::ReferenceEngine;

    #[test]
    fn every_algorithm_round_trips_on_the_reference_engine() {
        for alg in Algorithm::ALL {
            for aad in [0, 8, 12] {
                let m = measure(
                    &mut ReferenceEngine::new(),
                    alg,
                    64,
                    aad,
                    Duration::from_millis(1),
                )
                .unwrap_or_else(|| panic!("{alg:?} with {aad} bytes of AAD"));
                assert!(m.mpps > 0.0 && m.gbps > 0.0);
            }
        }
    }
}
