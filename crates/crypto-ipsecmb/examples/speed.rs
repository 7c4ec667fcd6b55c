//! One-core throughput of the intel-ipsec-mb engine next to the library engine
//! (AWS-LC), on the vectors the data path builds: 256 ops per call, one op per
//! 2048-byte arena frame, one key, no aad (WireGuard's data messages).
//!
//! `cargo run --release -p crypto-ipsecmb --example speed [seconds per cell]`
//!
//! Encryption runs in place; decryption runs out of place from a fixed ciphertext so
//! that every call decrypts valid input without a copy. Each cell is the best of
//! seven runs, which keeps other load on the machine out of the figures as far as
//! it can be; it is a quick check, not the project's benchmark.

use crypto::{AeadOp, Algorithm, Direction, Engine, KeyRegistry, OpStatus, Span};
use crypto_awslc::AwsLcEngine;
use crypto_ipsecmb::IpsecMbEngine;
use std::time::{Duration, Instant};

const BATCH: usize = 256;
const FRAME: usize = 2048;
const HEADROOM: usize = 128;
const ROUNDS: usize = 7;

fn ops(alg: Algorithm, key: crypto::KeyHandle, len: usize, dir: Direction) -> Vec<AeadOp> {
    (0..BATCH)
        .map(|i| {
            let text = (i * FRAME + HEADROOM) as u32;
            let mut nonce = [0u8; 12];
            nonce[4..].copy_from_slice(&(i as u64).to_le_bytes());
            let mut op = AeadOp::in_place(
                alg,
                key,
                dir,
                nonce,
                Span::EMPTY,
                Span::new(text, len as u32),
            );
            if dir == Direction::Decrypt {
                // Plaintext goes to a second arena behind the first.
                op.dst = op.src + (BATCH * FRAME) as u32;
            }
            op
        })
        .collect()
}

/// Packets per second of the best of `ROUNDS` runs of about `per_round` each.
fn measure(
    engine: &mut dyn Engine,
    keys: &KeyRegistry,
    mem: &mut [u8],
    ops: &mut [AeadOp],
    per_round: Duration,
) -> f64 {
    let mut best = 0f64;
    for _ in 0..ROUNDS {
        let start = Instant::now();
        let mut calls = 0u64;
        while start.elapsed() < per_round {
            for _ in 0..8 {
                ops.iter_mut().for_each(|o| o.status = OpStatus::Pending);
                engine.process(keys, mem, ops);
                calls += 1;
            }
        }
        assert!(
            ops.iter().all(|o| o.status == OpStatus::Ok),
            "{:?}",
            ops[0].status
        );
        let pps = (calls * BATCH as u64) as f64 / start.elapsed().as_secs_f64();
        best = best.max(pps);
    }
    best
}

fn main() {
    let seconds: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0.1);
    let per_round = Duration::from_secs_f64(seconds);
    let ipsecmb = IpsecMbEngine::new().unwrap_or_else(|e| {
        eprintln!("intel-ipsec-mb engine unavailable: {e}");
        std::process::exit(1);
    });
    println!("{}", ipsecmb.describe());
    println!("{BATCH} ops per call, one core, best of {ROUNDS} x {seconds}s\n");
    let mut engines: Vec<Box<dyn Engine>> = vec![Box::new(ipsecmb), Box::new(AwsLcEngine::new())];

    println!(
        "{:<18} {:>5} {:>8} {:>9} {:>9} {:>9} {:>9} {:>7}",
        "algorithm", "bytes", "dir", "ipsecmb", "", "aws-lc", "", "ratio"
    );
    println!(
        "{:<18} {:>5} {:>8} {:>9} {:>9} {:>9} {:>9} {:>7}",
        "", "", "", "Mpps", "Gbit/s", "Mpps", "Gbit/s", ""
    );
    for alg in [Algorithm::ChaCha20Poly1305, Algorithm::Aes128Gcm] {
        let keys = KeyRegistry::new(4);
        let key = keys.insert(alg, &[0x42; 32][..alg.key_len()]).unwrap();
        for len in [64usize, 1420] {
            // Fill the first arena with ciphertext for the decrypt runs.
            let mut mem = vec![0x5a; 2 * BATCH * FRAME];
            let mut enc = ops(alg, key, len, Direction::Encrypt);
            engines[1].process(&keys, &mut mem, &mut enc);
            for dir in [Direction::Encrypt, Direction::Decrypt] {
                let mut pps = Vec::new();
                for engine in engines.iter_mut() {
                    let mut work = mem.clone();
                    let mut batch = ops(alg, key, len, dir);
                    pps.push(measure(
                        engine.as_mut(),
                        &keys,
                        &mut work,
                        &mut batch,
                        per_round,
                    ));
                }
                let gbps = |p: f64| p * (len * 8) as f64 / 1e9;
                println!(
                    "{:<18} {:>5} {:>8} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>6.2}x",
                    alg.name(),
                    len,
                    if dir == Direction::Encrypt {
                        "encrypt"
                    } else {
                        "decrypt"
                    },
                    pps[0] / 1e6,
                    gbps(pps[0]),
                    pps[1] / 1e6,
                    gbps(pps[1]),
                    pps[0] / pps[1],
                );
            }
        }
    }
}
