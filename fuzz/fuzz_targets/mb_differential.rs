//! The multi-buffer engine against the reference engine: a vector of ops built from
//! the input runs through every path this CPU has (scalar, AVX2, AVX-512, IFMA) and
//! through the reference, and memory and statuses must match byte for byte.
//!
//! Input: `split, then ops` where `split` picks the lane/block threshold (default,
//! all lanes, all block path, or `split * 64` bytes) and each op is 6 bytes:
//!   len (2 bytes le, mod 4097), aad len (mod 41), key (mod 4),
//!   flags: bit 0 out of place, bit 1 decrypt, bit 2 flip a bit of the sealed op,
//!          bits 3-7 which bit (over aad, text and tag) to flip,
//!   seed: memory contents and nonce come from an xorshift seeded by the input.
//! Decryptions open a vector the reference sealed first, so most of them verify and
//! the flipped ones must fail alone.
#![no_main]

use crypto::op_layout::{OpLayout, OpShape};
use crypto::reference::ReferenceEngine;
use crypto::{Algorithm, Direction, Engine, KeyHandle, KeyRegistry};
use crypto_mb::{MbEngine, Path};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

struct Keys {
    reg: KeyRegistry,
    handles: Vec<KeyHandle>,
}

fn keys() -> &'static Keys {
    static KEYS: OnceLock<Keys> = OnceLock::new();
    KEYS.get_or_init(|| {
        let reg = KeyRegistry::new(8);
        let handles = (1..=4u8)
            .map(|k| {
                reg.insert(Algorithm::ChaCha20Poly1305, &[k.wrapping_mul(37); 32])
                    .unwrap()
            })
            .collect();
        Keys { reg, handles }
    })
}

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let k = keys();
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15 ^ data.len() as u64);
    let mut batch = OpLayout::new();
    let mut flips = Vec::new();
    for rec in rest.chunks_exact(6).take(300) {
        let flags = rec[4];
        rng.0 ^= u64::from(rec[5]) << 8 | 1;
        let mut nonce = [0u8; 12];
        nonce[..8].copy_from_slice(&rng.next().to_le_bytes());
        nonce[8..].copy_from_slice(&(rng.next() as u32).to_le_bytes());
        batch.push(OpShape {
            alg: Algorithm::ChaCha20Poly1305,
            key: k.handles[(rec[3] % 4) as usize],
            nonce,
            aad_len: (rec[2] % 41) as usize,
            len: u16::from_le_bytes([rec[0], rec[1]]) as usize % 4097,
            in_place: flags & 1 == 0,
        });
        flips.push(flags);
    }
    let OpLayout { mut mem, mut ops } = batch;
    if ops.is_empty() {
        return;
    }
    for b in mem.iter_mut() {
        *b = rng.next() as u8;
    }
    // Seal everything with the reference, then turn the decrypting ops around and
    // flip the bits asked for.
    let mut sealed = mem.clone();
    let mut sealing = ops.clone();
    ReferenceEngine::new().process(&k.reg, &mut sealed, &mut sealing);
    for (op, &flags) in ops.iter_mut().zip(&flips) {
        if flags & 2 == 0 {
            continue;
        }
        op.direction = Direction::Decrypt;
        core::mem::swap(&mut op.src, &mut op.dst);
        if flags & 4 != 0 {
            let spans = [op.aad, op.src_span(), op.tag_span()];
            let total: u32 = spans.iter().map(|s| s.len).sum();
            let mut at = (flags >> 3) as u32 * 131 % total;
            for s in spans {
                if at < s.len {
                    sealed[(s.offset + at) as usize] ^= 1 << (flags >> 5);
                    break;
                }
                at -= s.len;
            }
        }
    }
    // Sealed ops whose direction stayed Encrypt seal their ciphertext again.
    let mut want_mem = sealed.clone();
    let mut want = ops.clone();
    ReferenceEngine::new().process(&k.reg, &mut want_mem, &mut want);
    for path in Path::available_paths() {
        let engine = MbEngine::with_path(path);
        let mut engine = match split % 4 {
            0 => engine,
            1 => engine.with_block_threshold(usize::MAX),
            2 => engine.with_block_threshold(0),
            _ => engine.with_block_threshold(split as usize * 64),
        };
        let mut got_mem = sealed.clone();
        let mut got = ops.clone();
        engine.process(&k.reg, &mut got_mem, &mut got);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.status, w.status, "{path}: op {i} status");
        }
        assert!(
            got_mem == want_mem,
            "{path}: memory differs from the reference"
        );
    }
});
