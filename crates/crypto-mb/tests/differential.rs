//! The engine against the reference engine on random op vectors, on every path
//! this CPU runs and with the lane/block split at its default, at the extremes (all
//! lanes, all block path) and at random: 1 to 300 ops of 0 to 9000 bytes, six keys,
//! random nonces and aad, in place and out of place, encryptions and decryptions
//! mixed in one vector. Every byte of memory and every status must match; a single
//! flipped bit anywhere in one op (aad, ciphertext or tag) must fail exactly that op.
//! Vectors made of runs of one shape (the lanes' groups) get the same checks.

use crypto::op_layout::{OpLayout, OpShape};
use crypto::reference::ReferenceEngine;
use crypto::{AeadOp, Algorithm, Direction, Engine, KeyHandle, KeyRegistry, OpStatus};
use crypto_mb::{MbEngine, Path};
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};

fn random_len(rng: &mut StdRng) -> usize {
    match rng.gen_range(0..10) {
        0..=3 => rng.gen_range(0..=64),
        4..=6 => rng.gen_range(0..=1600),
        _ => rng.gen_range(0..=9000),
    }
}

/// `count` ops laid out one after another (aad, input, output when out of place,
/// tag), random contents.
fn random_batch(rng: &mut StdRng, keys: &[KeyHandle], count: usize) -> OpLayout {
    let mut batch = OpLayout::new();
    for _ in 0..count {
        let len = random_len(rng);
        let mut nonce = [0u8; 12];
        rng.fill_bytes(&mut nonce);
        batch.push(OpShape {
            alg: Algorithm::ChaCha20Poly1305,
            key: keys[rng.gen_range(0..keys.len())],
            nonce,
            aad_len: rng.gen_range(0..=40),
            len,
            in_place: rng.gen_bool(0.5),
        });
    }
    rng.fill_bytes(&mut batch.mem);
    batch
}

/// Runs of ops of one shape (text and aad lengths), as a data path's vectors come:
/// the lanes take whole groups of them together. Lengths around a block's edges and
/// short aad, so that groups have partial blocks, aad, or neither.
fn runs_of_one_shape(rng: &mut StdRng, keys: &[KeyHandle], count: usize) -> OpLayout {
    let mut batch = OpLayout::new();
    let mut shape = (0, 0);
    for i in 0..count {
        if i == 0 || rng.gen_bool(0.04) {
            let len = [0, 1, 15, 16, 17, 63, 64, 65, 100, 128, 570, 1420][rng.gen_range(0..12)];
            shape = (len, [0, 0, 8, 12, 16, 20][rng.gen_range(0..6)]);
        }
        let mut nonce = [0u8; 12];
        rng.fill_bytes(&mut nonce);
        batch.push(OpShape {
            alg: Algorithm::ChaCha20Poly1305,
            key: keys[rng.gen_range(0..keys.len())],
            nonce,
            aad_len: shape.1,
            len: shape.0,
            in_place: rng.gen_bool(0.5),
        });
    }
    rng.fill_bytes(&mut batch.mem);
    batch
}

fn keys(rng: &mut StdRng, reg: &KeyRegistry) -> Vec<KeyHandle> {
    (0..6)
        .map(|_| {
            let mut k = [0u8; 32];
            rng.fill_bytes(&mut k);
            reg.insert(Algorithm::ChaCha20Poly1305, &k).unwrap()
        })
        .collect()
}

/// Runs `ops` over `mem` with both engines and demands identical results.
fn same_as_reference(
    what: &str,
    reg: &KeyRegistry,
    ours: &mut MbEngine,
    mem: &[u8],
    ops: &[AeadOp],
) -> (Vec<u8>, Vec<AeadOp>) {
    let (mut m1, mut o1) = (mem.to_vec(), ops.to_vec());
    let (mut m2, mut o2) = (mem.to_vec(), ops.to_vec());
    ours.process(reg, &mut m1, &mut o1);
    ReferenceEngine::new().process(reg, &mut m2, &mut o2);
    for (i, (a, b)) in o1.iter().zip(&o2).enumerate() {
        assert_eq!(
            a.status, b.status,
            "{what}: op {i} (len {}, {:?})",
            a.len, a.direction
        );
    }
    if m1 != m2 {
        let at = m1.iter().zip(&m2).position(|(a, b)| a != b).unwrap();
        let op = o1.iter().position(|o| {
            [o.aad, o.src_span(), o.dst_span(), o.tag_span()]
                .iter()
                .any(|s| s.range().contains(&at))
        });
        panic!("{what}: memory differs at byte {at} (op {op:?})");
    }
    (m1, o1)
}

/// Turns sealed ops into the ops that open them again (out of place ones back into
/// their input range).
fn to_openings(ops: &mut [AeadOp]) {
    for op in ops.iter_mut() {
        op.status = OpStatus::Pending;
        op.direction = Direction::Decrypt;
        core::mem::swap(&mut op.src, &mut op.dst);
    }
}

/// Flips one random bit of one random op's aad, input or tag; returns that op.
fn flip_one_bit(rng: &mut StdRng, mem: &mut [u8], ops: &[AeadOp]) -> usize {
    let victim = rng.gen_range(0..ops.len());
    let v = ops[victim];
    let mut spans = vec![v.aad, v.src_span(), v.tag_span()];
    spans.retain(|s| s.len > 0);
    let span = spans[rng.gen_range(0..spans.len())];
    mem[span.offset as usize + rng.gen_range(0..span.len as usize)] ^= 1 << rng.gen_range(0..8);
    victim
}

fn engine(path: Path, split: usize, rng: &mut StdRng) -> MbEngine {
    let e = MbEngine::with_path(path);
    match split {
        0 => e,
        1 => e.with_block_threshold(usize::MAX),
        2 => e.with_block_threshold(0),
        _ => e.with_block_threshold(rng.gen_range(0..9000)),
    }
}

/// What one round of a test gets: a fresh engine on one path (its lane/block split
/// by `round % 4`, see `engine`), the name the failures print, the random source,
/// and the path's key registry and keys.
struct Round<'a> {
    round: usize,
    ours: MbEngine,
    what: String,
    rng: &'a mut StdRng,
    reg: &'a KeyRegistry,
    keys: &'a [KeyHandle],
}

/// Runs `body` for `rounds` rounds on every path this CPU has, each path seeded
/// from `seed`.
fn each_round(seed: u64, rounds: usize, mut body: impl FnMut(Round)) {
    for path in Path::available_paths() {
        let mut rng = StdRng::seed_from_u64(seed ^ path as u64);
        let reg = KeyRegistry::new(16);
        let keys = keys(&mut rng, &reg);
        for round in 0..rounds {
            let ours = engine(path, round % 4, &mut rng);
            let what = format!(
                "{path} threshold {:?} round {round}",
                ours.block_threshold()
            );
            body(Round {
                round,
                ours,
                what,
                rng: &mut rng,
                reg: &reg,
                keys: &keys,
            });
        }
    }
}

#[test]
fn random_vectors_match_the_reference() {
    each_round(0x6d62, 12, |r| {
        let Round {
            round,
            mut ours,
            what,
            rng,
            reg,
            keys,
        } = r;
        let count = [1, 2, 15, 16, 17, 300][round % 6].max(rng.gen_range(1..=300) * (round / 6));
        let OpLayout { mem, ops } = random_batch(rng, keys, count.min(300));
        let (sealed, mut ops) = same_as_reference(&what, reg, &mut ours, &mem, &ops);
        // A mixed vector: some ops open what was sealed (out of place ones back into
        // their input range), the rest seal their ciphertext again.
        for op in ops.iter_mut() {
            op.status = OpStatus::Pending;
            if rng.gen_bool(0.6) {
                op.direction = Direction::Decrypt;
                core::mem::swap(&mut op.src, &mut op.dst);
            }
        }
        let (opened, _) = same_as_reference(&what, reg, &mut ours, &sealed, &ops);
        for (i, op) in ops.iter().enumerate() {
            if op.direction == Direction::Decrypt {
                let r = op.dst_span().range();
                assert_eq!(opened[r.clone()], mem[r], "{what}: op {i} round trip");
            }
        }
    });
}

#[test]
fn one_flipped_bit_fails_exactly_that_op() {
    each_round(0xf11b, 40, |r| {
        let Round {
            mut ours,
            what,
            rng,
            reg,
            keys,
            ..
        } = r;
        let count = rng.gen_range(1..=64);
        let OpLayout { mut mem, mut ops } = random_batch(rng, keys, count);
        ReferenceEngine::new().process(reg, &mut mem, &mut ops);
        to_openings(&mut ops);
        let victim = flip_one_bit(rng, &mut mem, &ops);
        let (_, done) = same_as_reference(&what, reg, &mut ours, &mem, &ops);
        for (i, o) in done.iter().enumerate() {
            let want = if i == victim {
                OpStatus::BadTag
            } else {
                OpStatus::Ok
            };
            assert_eq!(o.status, want, "{what}: op {i}");
        }
    });
}

#[test]
fn runs_of_one_shape_match_the_reference_and_fail_alone() {
    each_round(0x5a9e, 24, |r| {
        let Round {
            mut ours,
            what,
            rng,
            reg,
            keys,
            ..
        } = r;
        let count = rng.gen_range(1..=300);
        let OpLayout { mem, ops } = runs_of_one_shape(rng, keys, count);
        let (mut sealed, mut ops) = same_as_reference(&what, reg, &mut ours, &mem, &ops);
        to_openings(&mut ops);
        // One flipped bit in one op of the vector: that op fails, its group's
        // other lanes do not.
        let victim = flip_one_bit(rng, &mut sealed, &ops);
        let (opened, done) = same_as_reference(&what, reg, &mut ours, &sealed, &ops);
        for (i, o) in done.iter().enumerate() {
            if i == victim {
                assert_eq!(o.status, OpStatus::BadTag, "{what}: op {i}");
            } else {
                assert_eq!(o.status, OpStatus::Ok, "{what}: op {i}");
                let r = o.dst_span().range();
                assert_eq!(opened[r.clone()], mem[r], "{what}: op {i} round trip");
            }
        }
    });
}
