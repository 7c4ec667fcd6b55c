//! What a tunnel asks of an engine per packet, measured alone: each op sealed and
//! then opened again, in place, in the tunnel's layout (its AAD length; a chained
//! algorithm laid out as ESP runs it), batches of a frame. The graph benchmarks
//! divide a graph's speed by this: the crypto work the graph cannot avoid, opening
//! included (an AEAD opens more slowly than it seals: it checks the tag), so that
//! the ratio is what the graph itself costs.

use crate::calibrate::{Measurement, measure_ops};
use crate::{Algorithm, Direction, Engine};
use std::time::Duration;

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
    let both = [Direction::Encrypt, Direction::Decrypt];
    measure_ops(engine, alg, size, aad_len, &both, time)
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
