//! Whole vectors the way the data path hands them over, checked op by op against the
//! reference engine (and, for the mixed vector, against AWS-LC too): mixed
//! algorithms, AEAD and chained, sizes and layouts, with failures of every kind in the
//! same vector as good ops.

use crypto::op_layout::{OpLayout, OpShape};
use crypto::reference::ReferenceEngine;
use crypto::{AeadOp, Algorithm, Direction, Engine, KeyHandle, KeyRegistry, OpStatus, Span};
use crypto_awslc::AwsLcEngine;
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
/// each with its own memory, a random key of its algorithm and random contents. A
/// chained op's text is rounded up to whole blocks, its aad length is the header
/// before its IV, and an odd one has ESN bytes after its text.
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
        let mut shape = OpShape {
            alg,
            key: own[rng.gen_range(0..own.len())].1,
            nonce,
            aad_len,
            len,
            in_place,
        };
        if alg.is_chained() {
            shape.len = len.div_ceil(16).max(1) * 16;
            batch.push_chained(shape, 4 * (aad_len % 2));
        } else {
            batch.push(shape);
        }
    }
    rng.fill_bytes(&mut batch.mem);
    batch.copy_ivs();
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

/// 256 ops of all seven algorithms, every size and aad size above, in and out of
/// place; encrypted as one vector, compared with the reference and with AWS-LC, then
/// decrypted as one vector with stale keys, wrong-algorithm keys, bad ranges, forged
/// tags and ops that are not pending mixed in.
#[test]
fn mixed_vector_of_256_ops() {
    let mut rng = StdRng::seed_from_u64(256);
    let reg = KeyRegistry::new(64);
    let keys = register(&mut rng, &reg, 3);
    let plan: Vec<_> = (0..256)
        .map(|i| {
            (
                Algorithm::ALL[rng.gen_range(0..Algorithm::ALL.len())],
                SIZES[i % SIZES.len()],
                AAD_SIZES[rng.gen_range(0..AAD_SIZES.len())],
                rng.gen_bool(0.5),
            )
        })
        .collect();
    let (plain, mut ops) = lay_out(&mut rng, &keys, &plan);

    let mut ours = plain.clone();
    let mut theirs = plain.clone();
    let mut aws_lc = plain.clone();
    let mut ref_ops = ops.clone();
    let mut aws_lc_ops = ops.clone();
    engine().process(&reg, &mut ours, &mut ops);
    ReferenceEngine::new().process(&reg, &mut theirs, &mut ref_ops);
    AwsLcEngine::new().process(&reg, &mut aws_lc, &mut aws_lc_ops);
    assert!(ops.iter().all(|o| o.status == OpStatus::Ok));
    assert!(ref_ops.iter().all(|o| o.status == OpStatus::Ok));
    assert!(aws_lc_ops.iter().all(|o| o.status == OpStatus::Ok));
    assert!(ours == theirs, "encryption differs from the reference");
    assert!(ours == aws_lc, "encryption differs from AWS-LC");
    assert!(ops.iter().any(|o| o.alg.is_chained()) && ops.iter().any(|o| !o.alg.is_chained()));

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
            OpStatus::BadTag if o.alg.is_chained() => {
                assert_eq!(ours[out.clone()], before[out], "op {i} wrote its output")
            }
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
                    Algorithm::ALL[rng.gen_range(0..Algorithm::ALL.len())],
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

/// Every whole number of blocks from one to a hundred, each chained algorithm, with
/// headers and ESN bytes of several lengths, in and out of place, as one vector per
/// algorithm; then the longest MAC span the library takes (65534 bytes,
/// `MB_MAX_LEN16` in its job checks) and one byte more, which comes back `BadRange`
/// with memory untouched.
#[test]
fn chained_lengths_and_the_librarys_limit() {
    let mut rng = StdRng::seed_from_u64(3602);
    let reg = KeyRegistry::new(64);
    let keys = register(&mut rng, &reg, 2);
    for alg in Algorithm::ALL.into_iter().filter(|a| a.is_chained()) {
        let plan: Vec<_> = (1..=100)
            .map(|blocks| (alg, blocks * 16, blocks % 13, blocks % 3 == 0))
            .collect();
        let (plain, mut ops) = lay_out(&mut rng, &keys, &plan);
        let mut ours = plain.clone();
        let mut theirs = plain.clone();
        let mut ref_ops = ops.clone();
        engine().process(&reg, &mut ours, &mut ops);
        ReferenceEngine::new().process(&reg, &mut theirs, &mut ref_ops);
        for (i, (o, r)) in ops.iter().zip(&ref_ops).enumerate() {
            assert_eq!(
                (o.status, r.status),
                (OpStatus::Ok, OpStatus::Ok),
                "{alg} op {i}"
            );
        }
        assert!(ours == theirs, "{alg}: differs from the reference");
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

        // The library's limit: MAC spans (and CBC encryptions) of at most 65534 bytes.
        let key = keys.iter().find(|(a, _)| *a == alg).unwrap().1;
        // The most whole blocks that fit under the limit with the IV under the MAC.
        let text = 65504u32;
        let mut mem = vec![0x5a; 16 + 65536 + 16];
        let at_limit = |header: u32| {
            let mac = Span::new(16 - header, header + 16 + text);
            let text = Span::new(32, text);
            AeadOp::chained_in_place(
                alg,
                key,
                Direction::Encrypt,
                mac,
                text,
                mac.offset + mac.len,
            )
        };
        let mut ops = [at_limit(0), at_limit(14), at_limit(15)];
        // Three ops on one packet would write each other's bytes: one at a time.
        let mut want = mem.clone();
        let mut reference = ReferenceEngine::new();
        for (k, status) in [
            (0, OpStatus::Ok),
            (1, OpStatus::Ok),
            (2, OpStatus::BadRange),
        ] {
            let before = mem.clone();
            engine().process(&reg, &mut mem, &mut ops[k..=k]);
            assert_eq!(ops[k].status, status, "{alg} MAC span {}", ops[k].aad.len);
            if status == OpStatus::Ok {
                let mut one = [AeadOp {
                    status: OpStatus::Pending,
                    ..ops[k]
                }];
                reference.process(&reg, &mut want, &mut one);
                assert_eq!(one[0].status, OpStatus::Ok);
                assert!(mem == want, "{alg} MAC span {}: differs", ops[k].aad.len);
            } else {
                assert!(mem == before, "{alg}: a refused op wrote memory");
            }
        }
    }
}
