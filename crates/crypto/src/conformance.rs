//! The conformance suite every engine runs in its tests: known answers (Wycheproof for
//! the AEADs; for AES-CBC with HMAC, vectors made by Python's `cryptography`, see
//! [`chained`]) and differential checks against the [`ReferenceEngine`] on random
//! batches, one algorithm at a time and all of them mixed.
//!
//! Each check returns `Err(description)` on the first mismatch so that a failing
//! engine test says which op, size and direction went wrong.

pub mod chained;

use crate::aead::CBC_BLOCK_LEN;
use crate::op_layout::{OpLayout, OpShape};
use crate::reference::ReferenceEngine;
use crate::{
    AeadOp, Algorithm, Direction, Engine, KeyHandle, KeyRegistry, OpStatus, Span, TAG_LEN,
};
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};
use std::sync::Arc;

/// Makes an engine that will be given keys from the registry it is made with (most
/// engines ignore it; an engine with threads of its own keeps it).
pub type MakeEngine<'a> = &'a dyn Fn(&Arc<KeyRegistry>) -> Box<dyn Engine>;

/// Runs the whole suite on engines made by `make`, for every algorithm they serve.
pub fn run_all(make: &dyn Fn() -> Box<dyn Engine>) -> Result<(), String> {
    run_all_with_registry(&|_| make())
}

/// [`run_all`] for engines bound to one key registry.
pub fn run_all_with_registry(make: MakeEngine) -> Result<(), String> {
    let engine = make(&Arc::new(KeyRegistry::new(1)));
    let served: Vec<Algorithm> = Algorithm::ALL
        .into_iter()
        .filter(|&a| engine.supports(a))
        .collect();
    for &alg in &served {
        if alg.is_chained() {
            chained::known_answers(make, alg)?;
        } else {
            wycheproof_vectors(make, alg)?;
        }
        for seed in 0..4 {
            random_batches(make, alg, seed, 1 + (seed as usize * 97) % 300, 9000)?;
        }
        flipped_bits(make, alg, 11)?;
        stale_keys_and_bad_ranges(make, alg)?;
        if alg.is_chained() {
            chained::bad_ranges(make, alg)?;
        }
    }
    for seed in 0..3 {
        mixed_batches(make, &served, seed)?;
    }
    Ok(())
}

/// Every Wycheproof vector with a 12-byte nonce and 16-byte tag for `alg`.
pub fn wycheproof_vectors(make: MakeEngine, alg: Algorithm) -> Result<(), String> {
    use wycheproof::aead::{TestName, TestSet};
    let name = match alg {
        Algorithm::ChaCha20Poly1305 => TestName::ChaCha20Poly1305,
        Algorithm::Aes128Gcm | Algorithm::Aes256Gcm => TestName::AesGcm,
        chained => return Err(format!("Wycheproof has no AEAD vectors for {chained}")),
    };
    let set = TestSet::load(name).map_err(|e| format!("loading vectors: {e:?}"))?;
    let keys = Arc::new(KeyRegistry::new(16));
    let mut engine = make(&keys);
    let mut ran = 0;
    for group in &set.test_groups {
        if group.key_size != alg.key_len() * 8 || group.nonce_size != 96 || group.tag_size != 128 {
            continue;
        }
        for t in &group.tests {
            let h = keys.insert(alg, &t.key).map_err(|e| e.to_string())?;
            let valid = t.result != wycheproof::TestResult::Invalid;
            let nonce: [u8; 12] = t.nonce[..].try_into().map_err(|_| "nonce size")?;
            // memory: aad | text | tag
            let (a, n) = (t.aad.len() as u32, t.pt.len() as u32);
            let mut mem = Vec::new();
            mem.extend_from_slice(&t.aad);
            mem.extend_from_slice(&t.pt);
            mem.extend_from_slice(&[0; TAG_LEN]);
            let make = |d| AeadOp::in_place(alg, h, d, nonce, Span::new(0, a), Span::new(a, n));
            let mut op = make(Direction::Encrypt);
            engine.process(&keys, &mut mem, std::slice::from_mut(&mut op));
            let sealed_ok = op.status == OpStatus::Ok
                && mem[a as usize..(a + n) as usize] == t.ct[..]
                && mem[(a + n) as usize..] == t.tag[..];
            if valid && !sealed_ok {
                return Err(format!(
                    "{alg} wycheproof tc {} encrypt: {:?}",
                    t.tc_id, op.status
                ));
            }
            // decrypt the vector's ciphertext and tag
            mem[a as usize..(a + n) as usize].copy_from_slice(&t.ct);
            mem[(a + n) as usize..].copy_from_slice(&t.tag);
            let mut op = make(Direction::Decrypt);
            engine.process(&keys, &mut mem, std::slice::from_mut(&mut op));
            let opened_ok =
                op.status == OpStatus::Ok && mem[a as usize..(a + n) as usize] == t.pt[..];
            if valid != opened_ok {
                return Err(format!(
                    "{alg} wycheproof tc {} ({:?}) decrypt: {:?}",
                    t.tc_id, t.result, op.status
                ));
            }
            keys.remove(h);
            ran += 1;
        }
    }
    if ran == 0 {
        return Err(format!("no wycheproof vectors ran for {alg}"));
    }
    Ok(())
}

/// Lays out `count` ops of random sizes up to `max_len`, random keys out of a few,
/// random aad, half of them out of place (none with `in_place_only`), with random
/// plaintext. Chained ops get whole blocks of text, an ESP-like header of random
/// length in front of their IV and, for some, ESN bytes after the text under the MAC.
fn random_batch(
    rng: &mut StdRng,
    alg: Algorithm,
    keys: &[KeyHandle],
    count: usize,
    max_len: usize,
    in_place_only: bool,
) -> OpLayout {
    let mut batch = OpLayout::new();
    for _ in 0..count {
        push_random(rng, &mut batch, alg, keys, max_len, in_place_only);
    }
    rng.fill_bytes(&mut batch.mem);
    batch.copy_ivs();
    batch
}

/// One op of `alg` with random shape and key (see [`random_batch`]).
fn push_random(
    rng: &mut StdRng,
    batch: &mut OpLayout,
    alg: Algorithm,
    keys: &[KeyHandle],
    max_len: usize,
    in_place_only: bool,
) {
    let mut len = match rng.gen_range(0..4) {
        0 => rng.gen_range(0..=64.min(max_len)),
        _ => rng.gen_range(0..=max_len),
    };
    let mut nonce = [0u8; 12];
    if alg.is_chained() {
        len = (len / CBC_BLOCK_LEN).max(1) * CBC_BLOCK_LEN;
    } else {
        rng.fill_bytes(&mut nonce);
    }
    let shape = OpShape {
        alg,
        key: keys[rng.gen_range(0..keys.len())],
        nonce,
        aad_len: [0, 8, 12, 13, 32][rng.gen_range(0..5)],
        len,
        in_place: in_place_only || rng.gen_bool(0.5),
    };
    if alg.is_chained() {
        batch.push_chained(shape, [0, 4][rng.gen_range(0..2)]);
    } else {
        batch.push(shape);
    }
}

fn fresh_keys(rng: &mut StdRng, reg: &KeyRegistry, alg: Algorithm, n: usize) -> Vec<KeyHandle> {
    (0..n)
        .map(|_| {
            let mut k = [0u8; crate::aead::MAX_KEY_LEN];
            rng.fill_bytes(&mut k);
            reg.insert(alg, &k[..alg.key_len()])
                .expect("registry capacity")
        })
        .collect()
}

/// Encrypts a random batch with the engine and the reference, compares every byte of
/// memory, then decrypts the engine's output and compares with the plaintext.
pub fn random_batches(
    make: MakeEngine,
    alg: Algorithm,
    seed: u64,
    count: usize,
    max_len: usize,
) -> Result<(), String> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x6c69_6e65_7261_7465);
    let reg = Arc::new(KeyRegistry::new(64));
    let mut engine = make(&reg);
    let keys = fresh_keys(&mut rng, &reg, alg, 5);
    let mut reference = ReferenceEngine::new();
    let OpLayout {
        mem: plain,
        mut ops,
    } = random_batch(&mut rng, alg, &keys, count, max_len, false);

    let mut ours = plain.clone();
    let mut theirs = plain.clone();
    let mut ref_ops = ops.clone();
    engine.process(&reg, &mut ours, &mut ops);
    reference.process(&reg, &mut theirs, &mut ref_ops);
    for (i, (o, r)) in ops.iter().zip(&ref_ops).enumerate() {
        if o.status != OpStatus::Ok || r.status != OpStatus::Ok {
            return Err(format!(
                "{alg} op {i} (len {}): encrypt status {:?}, reference {:?}",
                o.len, o.status, r.status
            ));
        }
        for span in [o.dst_span(), o.tag_span()] {
            if ours[span.range()] != theirs[span.range()] {
                return Err(format!(
                    "{alg} op {i} (len {}, {}): encrypt output differs from the reference",
                    o.len,
                    if o.src == o.dst {
                        "in place"
                    } else {
                        "out of place"
                    }
                ));
            }
        }
    }
    if ours != theirs {
        return Err(format!(
            "{alg}: engine wrote outside its ops' output ranges"
        ));
    }
    // Decrypt: ciphertext now sits at dst; decrypt back to src (out of place) or in place.
    turn_around(&mut ops);
    engine.process(&reg, &mut ours, &mut ops);
    for (i, o) in ops.iter().enumerate() {
        if o.status != OpStatus::Ok {
            return Err(format!(
                "{alg} op {i} (len {}): decrypt status {:?}",
                o.len, o.status
            ));
        }
        if ours[o.dst_span().range()] != plain[o.dst_span().range()] {
            return Err(format!(
                "{alg} op {i} (len {}): decrypt gave wrong plaintext",
                o.len
            ));
        }
    }
    Ok(())
}

/// Flips one random bit of ciphertext, tag or aad in one op of a batch; exactly that op
/// must fail, its output must not hold the plaintext (for a chained op: must be
/// untouched), and all others must pass.
pub fn flipped_bits(make: MakeEngine, alg: Algorithm, seed: u64) -> Result<(), String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let reg = Arc::new(KeyRegistry::new(64));
    let mut engine = make(&reg);
    let keys = fresh_keys(&mut rng, &reg, alg, 3);
    for round in 0..40 {
        let count = rng.gen_range(1..=40);
        // In place, so the flipped ciphertext is what gets decrypted.
        let OpLayout { mut mem, mut ops } = random_batch(&mut rng, alg, &keys, count, 2000, true);
        let plain = mem.clone();
        engine.process(&reg, &mut mem, &mut ops);
        let victim = rng.gen_range(0..ops.len());
        let v = ops[victim];
        let mut targets = vec![v.tag_span(), v.src_span(), v.aad];
        targets.retain(|s| s.len > 0);
        let span = targets[rng.gen_range(0..targets.len())];
        let byte = span.offset as usize + rng.gen_range(0..span.len as usize);
        mem[byte] ^= 1 << rng.gen_range(0..8);
        for o in ops.iter_mut() {
            o.direction = Direction::Decrypt;
            o.status = OpStatus::Pending;
        }
        let flipped = mem.clone();
        engine.process(&reg, &mut mem, &mut ops);
        for (i, o) in ops.iter().enumerate() {
            let want = if i == victim {
                OpStatus::BadTag
            } else {
                OpStatus::Ok
            };
            if o.status != want {
                return Err(format!(
                    "{alg} round {round} op {i}: status {:?}, want {want:?}",
                    o.status
                ));
            }
            let out = o.dst_span().range();
            if i == victim && o.len > 0 && mem[out.clone()] == plain[out.clone()] {
                return Err(format!(
                    "{alg} round {round}: a failed op released its plaintext"
                ));
            }
            if i == victim && alg.is_chained() && mem[out.clone()] != flipped[out] {
                return Err(format!(
                    "{alg} round {round}: a failed chained op wrote its output"
                ));
            }
        }
    }
    Ok(())
}

/// Removed keys, unknown handles and out-of-range ops fail with their own status and
/// leave the rest of the batch alone.
pub fn stale_keys_and_bad_ranges(make: MakeEngine, alg: Algorithm) -> Result<(), String> {
    let mut rng = StdRng::seed_from_u64(99);
    let reg = Arc::new(KeyRegistry::new(64));
    let mut engine = make(&reg);
    let keys = fresh_keys(&mut rng, &reg, alg, 2);
    let OpLayout { mut mem, mut ops } = random_batch(&mut rng, alg, &keys[..1], 6, 100, false);
    engine.process(&reg, &mut mem, &mut ops); // warm the engine's key cache
    for o in ops.iter_mut() {
        o.status = OpStatus::Pending;
    }
    reg.remove(keys[0]);
    let _replacement = reg.insert(alg, &[0x55; crate::aead::MAX_KEY_LEN][..alg.key_len()]);
    ops[1].key = KeyHandle::INVALID;
    ops[2].tag = u32::MAX - 3;
    ops[3].key = keys[1];
    engine.process(&reg, &mut mem, &mut ops);
    let got: Vec<_> = ops.iter().map(|o| o.status).collect();
    let want = [
        OpStatus::BadKey,
        OpStatus::BadKey,
        OpStatus::BadRange,
        OpStatus::Ok,
        OpStatus::BadKey,
        OpStatus::BadKey,
    ];
    if got != want {
        return Err(format!("{alg}: statuses {got:?}, want {want:?}"));
    }
    Ok(())
}

/// Batches of every algorithm in `algs` at once (AEAD and chained ops side by side,
/// sizes, keys and layouts random): encrypted by the engine and by the reference,
/// compared byte for byte, then decrypted back by the engine.
pub fn mixed_batches(make: MakeEngine, algs: &[Algorithm], seed: u64) -> Result<(), String> {
    if algs.is_empty() {
        return Ok(());
    }
    let mut rng = StdRng::seed_from_u64(seed ^ 0x6d69_7865_645f_6f70);
    let reg = Arc::new(KeyRegistry::new(64));
    let mut engine = make(&reg);
    let keys: Vec<Vec<KeyHandle>> = algs
        .iter()
        .map(|&a| fresh_keys(&mut rng, &reg, a, 3))
        .collect();
    let mut batch = OpLayout::new();
    for _ in 0..rng.gen_range(50..=256) {
        let a = rng.gen_range(0..algs.len());
        push_random(&mut rng, &mut batch, algs[a], &keys[a], 1600, false);
    }
    rng.fill_bytes(&mut batch.mem);
    batch.copy_ivs();
    let OpLayout {
        mem: plain,
        mut ops,
    } = batch;
    let (mut ours, mut theirs, mut ref_ops) = (plain.clone(), plain.clone(), ops.clone());
    engine.process(&reg, &mut ours, &mut ops);
    ReferenceEngine::new().process(&reg, &mut theirs, &mut ref_ops);
    for (i, (o, r)) in ops.iter().zip(&ref_ops).enumerate() {
        if o.status != OpStatus::Ok || r.status != OpStatus::Ok {
            return Err(format!(
                "mixed seed {seed} op {i} ({}, len {}): encrypt status {:?}, reference {:?}",
                o.alg, o.len, o.status, r.status
            ));
        }
    }
    if ours != theirs {
        let i = ops
            .iter()
            .position(|o| {
                [o.dst_span(), o.tag_span()]
                    .iter()
                    .any(|s| ours[s.range()] != theirs[s.range()])
            })
            .map_or("outside every op".to_string(), |i| {
                format!("op {i} ({}, len {})", ops[i].alg, ops[i].len)
            });
        return Err(format!("mixed seed {seed}: {i} differs from the reference"));
    }
    turn_around(&mut ops);
    engine.process(&reg, &mut ours, &mut ops);
    for (i, o) in ops.iter().enumerate() {
        if o.status != OpStatus::Ok || ours[o.dst_span().range()] != plain[o.dst_span().range()] {
            return Err(format!(
                "mixed seed {seed} op {i} ({}, len {}): decrypt status {:?} or wrong plaintext",
                o.alg, o.len, o.status
            ));
        }
    }
    Ok(())
}

/// Makes sealing ops into the ops that open what they sealed: the ciphertext
/// they wrote (at `dst`) is read, and the text goes back to `src`.
fn turn_around(ops: &mut [AeadOp]) {
    for op in ops {
        op.direction = Direction::Decrypt;
        op.status = OpStatus::Pending;
        core::mem::swap(&mut op.src, &mut op.dst);
    }
}
