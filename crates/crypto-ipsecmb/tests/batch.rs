//! Whole vectors the way the data path hands them over, checked op by op against the
//! reference engine: mixed algorithms, sizes and layouts, with failures of every kind
//! in the same vector as good ops.

use crypto::op_layout::{OpLayout, OpShape};
use crypto::reference::ReferenceEngine;
use crypto::{AeadOp, Algorithm, Direction, Engine, KeyHandle, KeyRegistry, OpStatus};
use crypto_ipsecmb::IpsecMbEngine;
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};

const SIZES: [usize; 16] = [
    0, 1, 15, 16, 17, 31, 63, 64, 65, 255, 256, 570, 1420, 1500, 4096, 9000,
];
const AAD_SIZES: [usize; 9] = [0, 1, 8, 12, 13, 16, 17, 32, 300];

fn engine() -> IpsecMbEngine {
    IpsecMbEngine::new().expect("intel-ipsec-mb engine")
}

/// One op per entry of `plan` (algorithm, text length, aad length, in place),
/// each with its own memory, a random key of its algorithm and random contents.
fn lay_out(
    rng: &mut StdRng,
    keys: &[(Algorithm, KeyHandle)],
    plan: &[(Algorithm, usize, usize, bool)],
) -> (Vec<u8>, Vec<AeadOp>) {
    let mut batch = OpLayout::new();
    for &(alg, len, aad_len, in_place) in plan {
        let own: Vec<_> = keys.iter().filter(|(a, _)| *a == alg).collect();
        let mut nonce = [0u8; 12];
        rng.fill_bytes(&mut nonce);
        batch.push(OpShape {
            alg,
            key: own[rng.gen_range(0..own.len())].1,
            nonce,
            aad_len,
            len,
            in_place,
        });
    }
    rng.fill_bytes(&mut batch.mem);
    (batch.mem, batch.ops)
}

fn register(rng: &mut StdRng, reg: &KeyRegistry, per_alg: usize) -> Vec<(Algorithm, KeyHandle)> {
    let mut keys = Vec::new();
    for alg in Algorithm::ALL {
        for _ in 0..per_alg {
            let mut k = [0u8; 64];
            rng.fill_bytes(&mut k);
            keys.push((alg, reg.insert(alg, &k[..alg.key_len()]).unwrap()));
        }
    }
    keys
}

/// 256 ops of all three algorithms, every size and aad size above, in and out of
/// place; encrypted as one vector, compared with the reference, then decrypted as one
/// vector with stale keys, wrong-algorithm keys, bad ranges, forged tags and ops that
/// are not pending mixed in.
#[test]
fn mixed_vector_of_256_ops() {
    let mut rng = StdRng::seed_from_u64(256);
    let reg = KeyRegistry::new(64);
    let keys = register(&mut rng, &reg, 3);
    let plan: Vec<_> = (0..256)
        .map(|i| {
            (
                Algorithm::ALL[rng.gen_range(0..3)],
                SIZES[i % SIZES.len()],
                AAD_SIZES[rng.gen_range(0..AAD_SIZES.len())],
                rng.gen_bool(0.5),
            )
        })
        .collect();
    let (plain, mut ops) = lay_out(&mut rng, &keys, &plan);

    let mut ours = plain.clone();
    let mut theirs = plain.clone();
    let mut ref_ops = ops.clone();
    engine().process(&reg, &mut ours, &mut ops);
    ReferenceEngine::new().process(&reg, &mut theirs, &mut ref_ops);
    assert!(ops.iter().all(|o| o.status == OpStatus::Ok));
    assert!(ref_ops.iter().all(|o| o.status == OpStatus::Ok));
    assert!(ours == theirs, "encryption differs from the reference");

    // Decrypt back to where the plaintext was, with one fault in every fifth op.
    let mut want = Vec::new();
    let spare = reg.insert(Algorithm::Aes128Gcm, &[9; 16]).unwrap();
    let doomed = reg.insert(Algorithm::ChaCha20Poly1305, &[7; 32]).unwrap();
    for (i, o) in ops.iter_mut().enumerate() {
        o.direction = Direction::Decrypt;
        o.status = OpStatus::Pending;
        core::mem::swap(&mut o.src, &mut o.dst);
        let expect = match i % 5 {
            0 => OpStatus::Ok,
            1 => match i % 4 {
                0 => {
                    o.key = doomed;
                    OpStatus::BadKey
                }
                1 => {
                    // a live key of another algorithm
                    o.key = if o.alg == Algorithm::Aes128Gcm {
                        keys[0].1
                    } else {
                        spare
                    };
                    OpStatus::BadKey
                }
                2 => {
                    o.tag = u32::MAX - 8;
                    OpStatus::BadRange
                }
                _ => {
                    o.status = OpStatus::Unsupported; // as a caller might leave it
                    OpStatus::Unsupported
                }
            },
            2 => {
                ours[o.tag as usize] ^= 0x80;
                OpStatus::BadTag
            }
            3 if o.aad.len > 0 => {
                ours[o.aad.offset as usize + o.aad.len as usize - 1] ^= 1;
                OpStatus::BadTag
            }
            _ => OpStatus::Ok,
        };
        want.push(expect);
    }
    reg.remove(doomed);
    let before = ours.clone();
    engine().process(&reg, &mut ours, &mut ops);
    for (i, (o, w)) in ops.iter().zip(&want).enumerate() {
        assert_eq!(o.status, *w, "op {i} ({}, len {})", o.alg, o.len);
        let out = o.dst_span().range();
        match o.status {
            OpStatus::Ok => assert_eq!(ours[out.clone()], plain[out], "op {i} plaintext"),
            OpStatus::BadTag => {
                assert!(ours[out].iter().all(|&b| b == 0), "op {i} left output")
            }
            _ => assert_eq!(ours[out.clone()], before[out], "op {i} touched its output"),
        }
    }
}

/// Every text length from 0 to 300 and aad lengths up to past 64 KiB, each AEAD,
/// in one vector per algorithm: the job API has length paths (partial
/// blocks, long aad) that packet-sized batches alone would not reach.
#[test]
fn lengths_and_long_aad_match_the_reference() {
    let mut rng = StdRng::seed_from_u64(300);
    let reg = KeyRegistry::new(64);
    let keys = register(&mut rng, &reg, 2);
    for alg in Algorithm::ALL.into_iter().filter(|a| !a.is_chained()) {
        let mut plan: Vec<_> = (0..=300)
            .map(|len| (alg, len, len % 40, len % 3 == 0))
            .collect();
        for aad_len in [255, 256, 1000, 4096, 65535, 65536, 100_000] {
            plan.push((alg, 1420, aad_len, false));
            plan.push((alg, 0, aad_len, true));
        }
        let (plain, mut ops) = lay_out(&mut rng, &keys, &plan);
        let mut ours = plain.clone();
        let mut theirs = plain.clone();
        let mut ref_ops = ops.clone();
        engine().process(&reg, &mut ours, &mut ops);
        ReferenceEngine::new().process(&reg, &mut theirs, &mut ref_ops);
        for (i, (o, r)) in ops.iter().zip(&ref_ops).enumerate() {
            assert_eq!(
                o.status,
                OpStatus::Ok,
                "{alg} op {i} len {} aad {}",
                o.len,
                o.aad.len
            );
            assert_eq!(r.status, OpStatus::Ok);
            for span in [o.dst_span(), o.tag_span()] {
                assert_eq!(
                    ours[span.range()],
                    theirs[span.range()],
                    "{alg} op {i} len {} aad {}",
                    o.len,
                    o.aad.len
                );
            }
        }
        for o in ops.iter_mut() {
            o.direction = Direction::Decrypt;
            o.status = OpStatus::Pending;
            core::mem::swap(&mut o.src, &mut o.dst);
        }
        engine().process(&reg, &mut ours, &mut ops);
        for (i, o) in ops.iter().enumerate() {
            assert_eq!(o.status, OpStatus::Ok, "{alg} decrypt op {i}");
            assert_eq!(ours[o.dst_span().range()], plain[o.dst_span().range()]);
        }
    }
}

/// Keys first seen in the middle of a vector make the engine flush before expanding
/// them; a vector that introduces a new key every few ops must still come out right,
/// and one engine must serve vectors after keys were removed and slots reused.
#[test]
fn keys_expanded_mid_vector_and_slots_reused() {
    let mut rng = StdRng::seed_from_u64(7);
    let reg = KeyRegistry::new(256);
    let mut e = engine();
    for round in 0..4 {
        let keys = register(&mut rng, &reg, 20);
        let plan: Vec<_> = (0..200)
            .map(|_| {
                (
                    Algorithm::ALL[rng.gen_range(0..3)],
                    rng.gen_range(0..2000),
                    13,
                    true,
                )
            })
            .collect();
        let (plain, mut ops) = lay_out(&mut rng, &keys, &plan);
        let mut ours = plain.clone();
        let mut theirs = plain.clone();
        let mut ref_ops = ops.clone();
        e.process(&reg, &mut ours, &mut ops);
        ReferenceEngine::new().process(&reg, &mut theirs, &mut ref_ops);
        assert!(
            ops.iter().all(|o| o.status == OpStatus::Ok),
            "round {round}"
        );
        assert!(ours == theirs, "round {round}: differs from the reference");
        for (_, h) in keys {
            reg.remove(h);
        }
    }
}
