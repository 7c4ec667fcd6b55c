//! One-core throughput of the multi-buffer engine next to intel-ipsec-mb and the
//! library engine (AWS-LC), on the vectors the data path builds: 256 ops per call,
//! one op per 2048-byte arena frame, no aad (WireGuard's data messages), four keys
//! (four peers) mixed through the vector.
//!
//! `cargo run --release -p crypto-mb --example speed [seconds per round] [all]`
//!
//! Sizes: 64, 570, 1420 and 1518 bytes; IMIX: 7:4:1 of 64, 570 and 1518 bytes,
//! shuffled; and small: 30:30:15:10:5:10 of 48, 64, 80, 96, 112 and 128 bytes (small
//! packets padded to 16 bytes, as WireGuard pads them), shuffled. Encryption runs in
//! place; decryption runs out of place from a fixed ciphertext, so every call
//! decrypts valid input without a copy. Each cell is the best of seven rounds, which
//! keeps other load on the machine out of the figures as far as it can. With `all`,
//! every mb path this CPU has gets a column.

use crypto::{AeadOp, Algorithm, Direction, Engine, KeyHandle, KeyRegistry, OpStatus, Span};
use crypto_awslc::AwsLcEngine;
use crypto_ipsecmb::IpsecMbEngine;
use crypto_mb::{MbEngine, Path};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use std::time::{Duration, Instant};

const BATCH: usize = 256;
const FRAME: usize = 2048;
const HEADROOM: usize = 128;
const ROUNDS: usize = 7;

fn sizes(name: &str) -> Vec<usize> {
    match name {
        "imix" => {
            let mut v: Vec<usize> = [64; 7].into_iter().chain([570; 4]).chain([1518]).collect();
            v = v.iter().cycle().take(BATCH).copied().collect();
            v.shuffle(&mut StdRng::seed_from_u64(7));
            v
        }
        "small" => {
            // Small packets of the few lengths WireGuard pads them to, 30:30:15:10:5:10.
            let mix = [(48, 30), (64, 30), (80, 15), (96, 10), (112, 5), (128, 10)];
            let mut v: Vec<usize> = mix
                .iter()
                .flat_map(|&(len, weight)| std::iter::repeat_n(len, weight))
                .collect();
            v = v.iter().cycle().take(BATCH).copied().collect();
            v.shuffle(&mut StdRng::seed_from_u64(7));
            v
        }
        n => vec![n.parse().expect("size"); BATCH],
    }
}

fn ops(keys: &[KeyHandle], lens: &[usize], dir: Direction) -> Vec<AeadOp> {
    lens.iter()
        .enumerate()
        .map(|(i, &len)| {
            let text = (i * FRAME + HEADROOM) as u32;
            let mut nonce = [0u8; 12];
            nonce[4..].copy_from_slice(&(i as u64).to_le_bytes());
            let mut op = AeadOp::in_place(
                Algorithm::ChaCha20Poly1305,
                keys[i % keys.len()],
                dir,
                nonce,
                Span::EMPTY,
                Span::new(text, len as u32),
            );
            if dir == Direction::Decrypt {
                op.dst = op.src + (BATCH * FRAME) as u32; // a second arena behind the first
            }
            op
        })
        .collect()
}

/// Packets per second of the best of `ROUNDS` rounds of about `per_round` each.
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
        best = best.max((calls * BATCH as u64) as f64 / start.elapsed().as_secs_f64());
    }
    best
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let seconds: f64 = args.iter().find_map(|s| s.parse().ok()).unwrap_or(0.1);
    let all = args.iter().any(|a| a == "all");
    let per_round = Duration::from_secs_f64(seconds);

    let mut engines: Vec<(String, Box<dyn Engine>)> = Vec::new();
    let paths = if all {
        Path::available_paths().into_iter().rev().collect()
    } else {
        vec![Path::best()]
    };
    for p in paths {
        engines.push((format!("mb/{p}"), Box::new(MbEngine::with_path(p))));
    }
    match IpsecMbEngine::new() {
        Ok(e) => {
            println!("{}", e.describe());
            engines.push(("ipsecmb".into(), Box::new(e)));
        }
        Err(e) => println!("intel-ipsec-mb engine unavailable: {e}"),
    }
    engines.push(("aws-lc".into(), Box::new(AwsLcEngine::new())));
    let ipsecmb = engines.iter().position(|(n, _)| n == "ipsecmb");
    println!("chacha20-poly1305, {BATCH} ops per call, one core, best of {ROUNDS} x {seconds}s");
    println!("Mpps and Gbit/s of packet bytes; ratio: first column over ipsecmb\n");

    print!("{:<6} {:<8}", "bytes", "dir");
    for (name, _) in &engines {
        print!(" {:>19}", name);
    }
    println!(" {:>7}", "ratio");

    let keys = KeyRegistry::new(8);
    let handles: Vec<KeyHandle> = (1..=4u8)
        .map(|k| keys.insert(Algorithm::ChaCha20Poly1305, &[k; 32]).unwrap())
        .collect();
    for size in ["64", "570", "1420", "1518", "imix", "small"] {
        let lens = sizes(size);
        let mean = lens.iter().sum::<usize>() as f64 / lens.len() as f64;
        let mut mem = vec![0x5a; 2 * BATCH * FRAME];
        let mut enc = ops(&handles, &lens, Direction::Encrypt);
        AwsLcEngine::new().process(&keys, &mut mem, &mut enc);
        for dir in [Direction::Encrypt, Direction::Decrypt] {
            print!(
                "{:<6} {:<8}",
                size,
                if dir == Direction::Encrypt {
                    "encrypt"
                } else {
                    "decrypt"
                }
            );
            let mut pps = Vec::new();
            for (_, engine) in engines.iter_mut() {
                let mut work = mem.clone();
                let mut batch = ops(&handles, &lens, dir);
                let p = measure(engine.as_mut(), &keys, &mut work, &mut batch, per_round);
                print!(" {:>8.2} {:>5.1} Gb/s", p / 1e6, p * mean * 8.0 / 1e9);
                pps.push(p);
            }
            match ipsecmb {
                Some(i) => println!(" {:>6.2}x", pps[0] / pps[i]),
                None => println!(),
            }
        }
    }
}
