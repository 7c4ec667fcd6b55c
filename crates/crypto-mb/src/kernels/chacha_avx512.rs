//! ChaCha20 for 32 lanes at once (RFC 8439 section 2.3) on AVX-512: two groups
//! of 16, interleaved instruction by instruction (see `quarter_round`).
//!
//! The state is transposed: zmm register `w` holds state word `w` of 16 lanes,
//! so a quarter round is 12 instructions for 16 blocks and lanes never talk to each
//! other. At the end a 16x16 transpose of 32-bit words turns the 16 word-registers
//! into 16 keystream blocks, one per lane, each XORed into its lane's memory. The
//! last block of a packet is partial: AVX-512BW byte masks load and store just its
//! bytes, so nothing past the packet is read or written.

use crate::lanes::ChachaLanes;
#[cfg(doc)]
use crate::lanes::Row;
use core::arch::x86_64::*;

/// A quarter round on two independent groups of 16 lanes, op by op side by side.
///
/// Each quarter round is a chain of 12 dependent instructions, and a round has only
/// four independent ones; with SIMD integer latencies of two cycles that leaves the
/// vector units half idle. Two groups double the independent chains, at the cost of
/// a few spilled registers (32 state registers in a file of 32).
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn quarter_round(x: &mut [[__m512i; 16]; 2], a: usize, b: usize, c: usize, d: usize) {
    // Rotations by 16 and 8 bits as byte shuffles: they issue on other execution
    // ports than `vprold`.
    let rot16 = _mm512_set4_epi32(0x0d0c_0f0e, 0x0908_0b0a, 0x0504_0706, 0x0100_0302);
    let rot8 = _mm512_set4_epi32(0x0e0d_0c0f, 0x0a09_080b, 0x0605_0407, 0x0201_0003);
    for x in x.iter_mut() {
        x[a] = _mm512_add_epi32(x[a], x[b]);
    }
    for x in x.iter_mut() {
        x[d] = _mm512_shuffle_epi8(_mm512_xor_si512(x[d], x[a]), rot16);
    }
    for x in x.iter_mut() {
        x[c] = _mm512_add_epi32(x[c], x[d]);
    }
    for x in x.iter_mut() {
        x[b] = _mm512_rol_epi32::<12>(_mm512_xor_si512(x[b], x[c]));
    }
    for x in x.iter_mut() {
        x[a] = _mm512_add_epi32(x[a], x[b]);
    }
    for x in x.iter_mut() {
        x[d] = _mm512_shuffle_epi8(_mm512_xor_si512(x[d], x[a]), rot8);
    }
    for x in x.iter_mut() {
        x[c] = _mm512_add_epi32(x[c], x[d]);
    }
    for x in x.iter_mut() {
        x[b] = _mm512_rol_epi32::<7>(_mm512_xor_si512(x[b], x[c]));
    }
}

/// Turns 16 registers of one word per lane into 16 registers of one lane's block.
///
/// Three rounds of interleaving: 32-bit pairs, 64-bit pairs (after which each
/// 128-bit quarter holds 4 words of one lane), then 128-bit quarters between
/// registers. Row `4j + r` of the output is lane `4j + r`.
#[inline]
#[target_feature(enable = "avx512f")]
fn transpose(x: [__m512i; 16]) -> [__m512i; 16] {
    let mut t = [_mm512_setzero_si512(); 16];
    for g in 0..4 {
        let b = 4 * g;
        t[b] = _mm512_unpacklo_epi32(x[b], x[b + 1]);
        t[b + 1] = _mm512_unpackhi_epi32(x[b], x[b + 1]);
        t[b + 2] = _mm512_unpacklo_epi32(x[b + 2], x[b + 3]);
        t[b + 3] = _mm512_unpackhi_epi32(x[b + 2], x[b + 3]);
    }
    // u[4g + r]: in 128-bit quarter j, words 4g..4g+4 of lane 4j + r.
    let mut u = [_mm512_setzero_si512(); 16];
    for g in 0..4 {
        let b = 4 * g;
        u[b] = _mm512_unpacklo_epi64(t[b], t[b + 2]);
        u[b + 1] = _mm512_unpackhi_epi64(t[b], t[b + 2]);
        u[b + 2] = _mm512_unpacklo_epi64(t[b + 1], t[b + 3]);
        u[b + 3] = _mm512_unpackhi_epi64(t[b + 1], t[b + 3]);
    }
    let mut rows = [_mm512_setzero_si512(); 16];
    for r in 0..4 {
        let (u0, u1, u2, u3) = (u[r], u[4 + r], u[8 + r], u[12 + r]);
        let v0 = _mm512_shuffle_i32x4::<0b01_00_01_00>(u0, u1); // u0.q0 u0.q1 u1.q0 u1.q1
        let v1 = _mm512_shuffle_i32x4::<0b11_10_11_10>(u0, u1); // u0.q2 u0.q3 u1.q2 u1.q3
        let v2 = _mm512_shuffle_i32x4::<0b01_00_01_00>(u2, u3);
        let v3 = _mm512_shuffle_i32x4::<0b11_10_11_10>(u2, u3);
        rows[r] = _mm512_shuffle_i32x4::<0b10_00_10_00>(v0, v2); // quarter 0 of u0..u3
        rows[4 + r] = _mm512_shuffle_i32x4::<0b11_01_11_01>(v0, v2); // quarter 1
        rows[8 + r] = _mm512_shuffle_i32x4::<0b10_00_10_00>(v1, v3); // quarter 2
        rows[12 + r] = _mm512_shuffle_i32x4::<0b11_01_11_01>(v1, v3); // quarter 3
    }
    rows
}

/// `n` steps of every lane (32: two groups of 16), the lanes' rows unchanged
/// between steps: see [`ChachaLanes`]. The rows are loaded and transposed once for
/// all `n` steps; a step then costs the rounds and the keystream's way out.
///
/// # Safety
/// The CPU has AVX-512F and AVX-512BW; every lane's `row` points at a live [`Row`];
/// every lane with `rem > 0` has `ptr` valid for reading and writing its next
/// `min(rem, 64)` bytes at each of the `n` steps (`ptr` moving on by `stride`; with
/// `keyed`, each of the `n - 1` steps after the first); with `keyed`, every lane's
/// `key` is valid for writing 64 bytes.
#[target_feature(enable = "avx512f,avx512bw")]
pub(crate) unsafe fn steps(st: &mut ChachaLanes, n: usize) {
    // Row l of the input is lane l's state; transposed, register w of a group is
    // word w of its 16 lanes, the layout the rounds work on.
    let mut init = [0usize, 1].map(|g| {
        // SAFETY: every lane's row pointer is valid (the type keeps it so: a job's
        // key row or IDLE_ROW), a row is 64 bytes; the counters and each nonce word
        // are 32 x 4 bytes.
        let (rows, ctr, nonce) = unsafe {
            (
                core::array::from_fn(|l| _mm512_load_si512(st.row[16 * g + l].cast())),
                _mm512_loadu_si512(st.ctr.as_ptr().add(16 * g).cast()),
                st.nonce
                    .map(|words| _mm512_loadu_si512(words.as_ptr().add(16 * g).cast())),
            )
        };
        // The rows' own counter and nonce words are not used (the transpose's
        // shuffles that would make them are dead code).
        let mut w = transpose(rows);
        w[12] = ctr;
        w[13..].copy_from_slice(&nonce);
        w
    });
    let step = _mm512_set1_epi32(st.ctr_step as i32);
    debug_assert!(
        n > 0 || !st.keyed,
        "a keyed call makes at least its key step"
    );
    let mut keyed = core::mem::take(&mut st.keyed);
    for _ in 0..n {
        let mut x = init;
        chacha_rounds!(quarter_round, &mut x);
        for g in 0..2 {
            for (w, i) in x[g].iter_mut().zip(init[g]) {
                *w = _mm512_add_epi32(*w, i);
            }
            let rows = transpose(x[g]);
            if keyed {
                for (l, row) in rows.iter().enumerate() {
                    // SAFETY: with `keyed` every lane's key slot takes 64 bytes (caller).
                    unsafe { _mm512_storeu_si512(st.key[16 * g + l].cast(), *row) };
                }
                init[g][12] = _mm512_add_epi32(init[g][12], step);
                continue;
            }
            for (l, row) in rows.iter().enumerate() {
                let l = 16 * g + l;
                let (p, rem) = (st.ptr[l], st.rem[l]);
                if rem >= 64 {
                    // SAFETY: the caller guarantees 64 valid bytes at `p`.
                    unsafe {
                        let d = _mm512_loadu_si512(p.cast());
                        _mm512_storeu_si512(p.cast(), _mm512_xor_si512(d, *row));
                    }
                } else if rem > 0 {
                    let m: __mmask64 = (1u64 << rem) - 1;
                    // SAFETY: the caller guarantees `rem` valid bytes at `p`; the masked
                    // load and store touch only those (masked-off bytes are never
                    // accessed).
                    unsafe {
                        let d = _mm512_maskz_loadu_epi8(m, p.cast());
                        _mm512_mask_storeu_epi8(p.cast(), m, _mm512_xor_si512(d, *row));
                    }
                }
                st.ptr[l] = p.wrapping_add(st.stride);
                st.rem[l] = rem.saturating_sub(st.stride);
            }
            init[g][12] = _mm512_add_epi32(init[g][12], step);
        }
        keyed = false;
    }
    for (g, init) in init.iter().enumerate() {
        // SAFETY: counters 16 g .. 16 g + 16 are inside the 32-entry array.
        unsafe { _mm512_storeu_si512(st.ctr.as_mut_ptr().add(16 * g).cast(), init[12]) };
    }
}
