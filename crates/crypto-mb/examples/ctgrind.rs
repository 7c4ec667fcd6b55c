//! Constant-time check under valgrind, the ctgrind way: key bytes and plaintext are
//! marked undefined (as if never written) with memcheck's client requests, so every
//! branch or memory index that depends on them is reported as a use of an
//! undefined value. Outputs computed from secrets are undefined too, which is fine
//! as long as nothing branches on them.
//!
//! `cargo build --release -p crypto-mb --example ctgrind`
//! `valgrind --track-origins=yes target/release/examples/ctgrind`
//!
//! Valgrind runs the scalar and AVX2 paths (it has no AVX-512: the program checks
//! the paths the emulated CPU reports). One report is expected and public by
//! design: the decryption verdict, where the (secret-derived) tag comparison
//! becomes the op's status. Any other report is a leak. Outside valgrind the
//! client requests do nothing.

use crypto::{AeadOp, Algorithm, Direction, Engine, KeyRegistry, OpStatus, Span};
use crypto_mb::{MbEngine, Path};

/// memcheck's client requests (valgrind/memcheck.h: VG_USERREQ_TOOL_BASE('M','C')).
const MAKE_MEM_UNDEFINED: u64 = 0x4d43_0001;

/// Valgrind's client-request sequence for amd64: four rotations of rdi that add up
/// to nothing, then `xchg rbx, rbx`; valgrind recognises it and reads the request
/// from the array at rax. On a real CPU it is a no-op.
#[cfg(target_arch = "x86_64")]
fn client_request(request: u64, addr: *const u8, len: usize) {
    let args: [u64; 6] = [request, addr as u64, len as u64, 0, 0, 0];
    // SAFETY: the sequence changes no register (rdi rotates by 128 bits in total,
    // rdx is declared clobbered) and reads only `args`.
    unsafe {
        core::arch::asm!(
            "rol rdi, 3",
            "rol rdi, 13",
            "rol rdi, 61",
            "rol rdi, 51",
            "xchg rbx, rbx",
            in("rax") args.as_ptr(),
            inout("rdi") 0u64 => _,
            inout("rdx") 0u64 => _,
            options(nostack, preserves_flags),
        );
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn client_request(_: u64, _: *const u8, _: usize) {}

fn secret(bytes: &[u8]) {
    client_request(MAKE_MEM_UNDEFINED, bytes.as_ptr(), bytes.len());
}

fn main() {
    let paths: Vec<Path> = Path::available_paths()
        .into_iter()
        .filter(|p| matches!(p, Path::Scalar | Path::Avx2))
        .collect();
    println!("paths: {paths:?}");
    let keys = KeyRegistry::new(8);
    let mut key_bytes = [[0u8; 32]; 3];
    for (i, k) in key_bytes.iter_mut().enumerate() {
        k.iter_mut()
            .enumerate()
            .for_each(|(j, b)| *b = (i * 31 + j * 7) as u8);
        secret(k);
    }
    let handles: Vec<_> = key_bytes
        .iter()
        .map(|k| keys.insert(Algorithm::ChaCha20Poly1305, k).unwrap())
        .collect();
    let lens = [0usize, 1, 15, 16, 64, 100, 255, 570, 1420, 3000];
    for path in paths {
        for threshold in [None, Some(0)] {
            let e = MbEngine::with_path(path);
            let mut engine = match threshold {
                Some(t) => e.with_block_threshold(t),
                None => e,
            };
            let frame = 3200;
            let mut mem = vec![0u8; lens.len() * 2 * frame];
            for (i, b) in mem.iter_mut().enumerate() {
                *b = (i * 13 + 5) as u8;
            }
            let mut ops: Vec<AeadOp> = lens
                .iter()
                .enumerate()
                .map(|(i, &len)| {
                    let aad = Span::new((i * 2 * frame) as u32, 12);
                    let text = Span::new((i * 2 * frame + 16) as u32, len as u32);
                    let mut op = AeadOp::in_place(
                        Algorithm::ChaCha20Poly1305,
                        handles[i % 3],
                        Direction::Encrypt,
                        [i as u8; 12],
                        aad,
                        text,
                    );
                    if i % 2 == 1 {
                        op.dst = (i * 2 * frame + frame) as u32; // out of place
                    }
                    secret(&mem[text.range()]); // the plaintext
                    op
                })
                .collect();
            engine.process(&keys, &mut mem, &mut ops);
            assert!(ops.iter().all(|o| o.status == OpStatus::Ok));
            // Open what was sealed, some with a forged tag.
            for (i, op) in ops.iter_mut().enumerate() {
                op.direction = Direction::Decrypt;
                op.status = OpStatus::Pending;
                core::mem::swap(&mut op.src, &mut op.dst);
                if i % 3 == 0 {
                    mem[op.tag as usize] ^= 1;
                }
            }
            engine.process(&keys, &mut mem, &mut ops);
            println!("{path} threshold {threshold:?}: done");
        }
    }
}
