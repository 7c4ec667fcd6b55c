//! Constant-time check by timing, dudect-style (Reparaz, Balasch, Verbauwhede,
//! "Dude, is my code constant time?", 2017), on every path this CPU runs:
//! measurements of two input classes are interleaved at random and compared with
//! Welch's t-test; |t| above 4.5 says the classes are told apart by time.
//!
//! `cargo run --release -p crypto-mb --example ct_timing [measurements per test]`
//!
//! Tests, each a vector of 16 ops of 256 bytes:
//! - seal: a fixed key and plaintext against fresh random ones;
//! - open, forged: a tag wrong in its first byte against one wrong in its last
//!   byte (both fail; a comparison that stops early would differ).
//!
//! Each test prints t over all measurements and over the fastest 90% (dudect crops
//! the slow tail, where interrupts and other load live).

use crypto::{AeadOp, Algorithm, Direction, Engine, KeyRegistry, OpStatus, Span};
use crypto_mb::{MbEngine, Path};
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};
use std::time::Instant;

const OPS: usize = 16;
const LEN: usize = 256;
const FRAME: usize = 512;

fn welch(a: &[f64], b: &[f64]) -> f64 {
    let stats = |x: &[f64]| {
        let n = x.len() as f64;
        let m = x.iter().sum::<f64>() / n;
        let v = x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (n - 1.0);
        (m, v, n)
    };
    let ((ma, va, na), (mb, vb, nb)) = (stats(a), stats(b));
    (ma - mb) / (va / na + vb / nb).sqrt()
}

fn cropped(x: &[f64], cut: f64) -> Vec<f64> {
    x.iter().copied().filter(|&v| v <= cut).collect()
}

fn report(name: &str, samples: &[(usize, f64)]) -> f64 {
    let class = |c: usize| {
        samples
            .iter()
            .filter(|s| s.0 == c)
            .map(|s| s.1)
            .collect::<Vec<_>>()
    };
    let (a, b) = (class(0), class(1));
    let mut all: Vec<f64> = samples.iter().map(|s| s.1).collect();
    all.sort_by(f64::total_cmp);
    let cut = all[all.len() * 9 / 10];
    let t_all = welch(&a, &b);
    let t_crop = welch(&cropped(&a, cut), &cropped(&b, cut));
    let verdict = if t_all.abs().max(t_crop.abs()) < 4.5 {
        "ok"
    } else {
        "LEAK?"
    };
    println!(
        "  {name:<14} n={:<7} t={t_all:>7.2}  t(90%)={t_crop:>7.2}  {verdict}",
        samples.len()
    );
    t_all.abs().max(t_crop.abs())
}

fn ops(key: crypto::KeyHandle, dir: Direction) -> Vec<AeadOp> {
    (0..OPS)
        .map(|i| {
            let text = Span::new((i * FRAME) as u32, LEN as u32);
            AeadOp::in_place(
                Algorithm::ChaCha20Poly1305,
                key,
                dir,
                [i as u8; 12],
                Span::EMPTY,
                text,
            )
        })
        .collect()
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(40_000);
    let mut rng = StdRng::seed_from_u64(1);
    let mut worst = 0f64;
    for path in Path::available_paths() {
        println!("{path}:");
        let mut engine = MbEngine::with_path(path);
        let keys = KeyRegistry::new(4);

        // Seal: one fixed key and plaintext (random-looking, as dudect does: an
        // all-zero input measures the hardware's data-dependent power and clock
        // more than the code) against fresh random ones. Both classes copy their
        // input from a buffer of the same size and re-register a key per
        // measurement, so both pay the same copies and key expansion.
        let mut mem = vec![0u8; OPS * FRAME];
        let (mut fixed_key, mut fixed_mem) = ([0u8; 32], vec![0u8; OPS * FRAME]);
        rng.fill_bytes(&mut fixed_key);
        rng.fill_bytes(&mut fixed_mem);
        let (mut fresh_key, mut fresh_mem) = ([0u8; 32], vec![0u8; OPS * FRAME]);
        let mut samples = Vec::with_capacity(n);
        for _ in 0..n {
            let class = rng.gen_range(0..2);
            rng.fill_bytes(&mut fresh_key);
            rng.fill_bytes(&mut fresh_mem);
            let (k, m) = if class == 0 {
                (&fixed_key, &fixed_mem)
            } else {
                (&fresh_key, &fresh_mem)
            };
            mem.copy_from_slice(m);
            let k = *k;
            let h = keys.insert(Algorithm::ChaCha20Poly1305, &k).unwrap();
            let mut batch = ops(h, Direction::Encrypt);
            let t = Instant::now();
            engine.process(&keys, &mut mem, &mut batch);
            samples.push((class, t.elapsed().as_nanos() as f64));
            keys.remove(h);
        }
        worst = worst.max(report("seal", &samples));

        // Open, forged: the tag wrong at its first byte against wrong at its last.
        let h = keys.insert(Algorithm::ChaCha20Poly1305, &[7; 32]).unwrap();
        rng.fill_bytes(&mut mem);
        let mut sealed_ops = ops(h, Direction::Encrypt);
        engine.process(&keys, &mut mem, &mut sealed_ops);
        let sealed = mem.clone();
        let mut samples = Vec::with_capacity(n);
        for _ in 0..n {
            let class = rng.gen_range(0..2);
            mem.copy_from_slice(&sealed);
            let mut batch = ops(h, Direction::Decrypt);
            for o in &batch {
                mem[o.tag as usize + if class == 0 { 0 } else { 15 }] ^= 0x40;
            }
            let t = Instant::now();
            engine.process(&keys, &mut mem, &mut batch);
            samples.push((class, t.elapsed().as_nanos() as f64));
            assert!(batch.iter().all(|o| o.status == OpStatus::BadTag));
        }
        worst = worst.max(report("open, forged", &samples));
    }
    println!("largest |t|: {worst:.2} (dudect's threshold: 4.5)");
}
