//! Full frames of one size, as the data path sends them: encrypt with each path,
//! compare with the reference, decrypt again and compare with the plaintext.
use crypto::reference::ReferenceEngine;
use crypto::{AeadOp, Algorithm, Direction, Engine, KeyRegistry, OpStatus, Span};

#[test]
fn uniform_frames_round_trip() {
    let keys = KeyRegistry::new(8);
    let k = keys.insert(Algorithm::ChaCha20Poly1305, &[7; 32]).unwrap();
    for size in [0usize, 16, 64, 128, 1424] {
        for count in [1usize, 15, 16, 17, 32, 33, 64, 255, 256] {
            let stride = 2048;
            let mut mem = vec![0u8; stride * count + 64];
            for (i, b) in mem.iter_mut().enumerate() {
                *b = (i * 7 + 3) as u8;
            }
            let ops: Vec<AeadOp> = (0..count)
                .map(|i| {
                    let mut nonce = [0u8; 12];
                    nonce[4..].copy_from_slice(&(i as u64).to_le_bytes());
                    AeadOp::in_place(
                        Algorithm::ChaCha20Poly1305,
                        k,
                        Direction::Encrypt,
                        nonce,
                        Span::EMPTY,
                        Span::new((i * stride + 128) as u32, size as u32),
                    )
                })
                .collect();
            let mut ours = mem.clone();
            let mut theirs = mem.clone();
            let (mut o1, mut o2) = (ops.clone(), ops.clone());
            let mut mb = crypto_mb::MbEngine::new();
            mb.process(&keys, &mut ours, &mut o1);
            ReferenceEngine::new().process(&keys, &mut theirs, &mut o2);
            assert!(
                o1.iter().all(|o| o.status == OpStatus::Ok),
                "size {size} count {count}: {:?}",
                o1[0].status
            );
            let first_diff = ours.iter().zip(&theirs).position(|(a, b)| a != b);
            assert_eq!(
                first_diff, None,
                "size {size} count {count}: differs at byte {first_diff:?}"
            );
            for o in o1.iter_mut() {
                o.direction = Direction::Decrypt;
                o.status = OpStatus::Pending;
            }
            mb.process(&keys, &mut ours, &mut o1);
            assert!(
                o1.iter().all(|o| o.status == OpStatus::Ok),
                "size {size} count {count} decrypt: {:?}",
                o1.iter().map(|o| o.status).collect::<Vec<_>>()
            );
            for i in 0..count {
                let text = i * stride + 128..i * stride + 128 + size;
                assert!(
                    ours[text.clone()] == mem[text],
                    "size {size} count {count}: op {i} did not decrypt to its plaintext"
                );
            }
        }
    }
}
