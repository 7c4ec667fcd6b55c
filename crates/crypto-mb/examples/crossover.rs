//! Where the block-parallel path starts to beat the lane-parallel path: the
//! measurement behind `BLOCK_THRESHOLD_16` and `BLOCK_THRESHOLD_8`.
//!
//! `cargo run --release -p crypto-mb --example crossover [path]`
//!
//! For each packet size and each vector length (how many packets one call gets), the
//! same vector runs with every op forced through the lanes (threshold `usize::MAX`)
//! and with every op forced through the block path (threshold 0); the table shows
//! ns per packet for both, best of 7 rounds. The lanes win when there are enough
//! packets to fill them; the block path wins when a call has too few packets of a
//! size (the lanes would idle) — and, for a full vector, never by much, because both
//! paths do the same work per byte. The scheduler's threshold is the size from
//! which the block path is no slower even in a full vector, and from which it is
//! clearly faster for a lone packet: there, a large packet that lands in a mixed
//! vector stops holding one lane busy long after the others drained.

use crypto::{AeadOp, Algorithm, Direction, Engine, KeyRegistry, OpStatus, Span};
use crypto_mb::{MbEngine, Path};
use std::time::Instant;

fn ns_per_op(engine: &mut MbEngine, keys: &KeyRegistry, n: usize, len: usize) -> f64 {
    let key = keys.insert(Algorithm::ChaCha20Poly1305, &[9; 32]).unwrap();
    let frame = len + 64;
    let mut mem = vec![0x33u8; n * frame];
    let mut ops: Vec<AeadOp> = (0..n)
        .map(|i| {
            let text = Span::new((i * frame) as u32, len as u32);
            let mut nonce = [0u8; 12];
            nonce[..8].copy_from_slice(&(i as u64).to_le_bytes());
            AeadOp::in_place(
                Algorithm::ChaCha20Poly1305,
                key,
                Direction::Encrypt,
                nonce,
                Span::EMPTY,
                text,
            )
        })
        .collect();
    // Enough calls per round for about 4 MB of packets.
    let calls = (4 << 20) / (n * len).max(1) + 1;
    let mut best = f64::MAX;
    for _ in 0..7 {
        let start = Instant::now();
        for _ in 0..calls {
            ops.iter_mut().for_each(|o| o.status = OpStatus::Pending);
            engine.process(keys, &mut mem, &mut ops);
        }
        best = best.min(start.elapsed().as_nanos() as f64 / (calls * n) as f64);
    }
    keys.remove(key);
    best
}

fn main() {
    let path = std::env::args()
        .nth(1)
        .and_then(|p| Path::from_name(&p))
        .unwrap_or_else(Path::best);
    let keys = KeyRegistry::new(4);
    let sizes = [256, 512, 1024, 1536, 2048, 3072, 4096, 6144, 9000, 16384];
    let counts = [1, 4, 16, 256];
    println!("path {path}: ns per packet, lanes / block path (ratio > 1: block path faster)\n");
    print!("{:>6}", "bytes");
    for n in counts {
        print!(" {:>24}", format!("{n} per call"));
    }
    println!();
    for len in sizes {
        print!("{len:>6}");
        for n in counts {
            let mut lanes = MbEngine::with_path(path).with_block_threshold(usize::MAX);
            let mut block = MbEngine::with_path(path).with_block_threshold(0);
            let l = ns_per_op(&mut lanes, &keys, n, len);
            let b = ns_per_op(&mut block, &keys, n, len);
            print!(" {:>8.0} {:>8.0} {:>5.2}x", l, b, l / b);
        }
        println!();
    }
}
