//! The start and the end of Poly1305 for a whole group of 16 lanes on AVX-512 (see
//! `dispatch::PolyGroup`), in both radices: each lane's `r` clamped from its
//! one-time key, and each lane's tag, made eight lanes to a register instead of by
//! scalar code lane by lane. The two halves of 16 lanes are independent; the
//! choice between `h` and `h - p` in a tag is a mask, not a branch.

use crate::kernels::poly_ifma::{load_blocks, load8, store8};
use crate::kernels::{poly_avx512, poly_ifma};
use crate::lanes::{MAX_LANES, PolyLanes};
use core::arch::x86_64::*;

const HALVES: [usize; 2] = [0, 1];

/// The 16-byte values at `p[l] + at` for the eight lanes of `half`, as the low and
/// high 64 bits of each, in lane order.
///
/// # Safety
/// Each of those eight pointers must be valid for reading 16 bytes from `at`.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn load_at(p: &[*const u8; MAX_LANES], half: usize, at: usize) -> (__m512i, __m512i) {
    let q: [*const u8; 8] = core::array::from_fn(|i| p[8 * half + i].wrapping_add(at));
    // SAFETY: the caller guarantees 16 readable bytes at each `p[l] + at`.
    unsafe { load_blocks(&q) }
}

/// The first 16 bytes of each one-time key of `half`, clamped (RFC 8439 section
/// 2.5.1), as 64-bit halves.
///
/// # Safety
/// As [`load_at`] with `at` = 0.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn clamped_r(otk: &[*const u8; MAX_LANES], half: usize) -> (__m512i, __m512i) {
    // SAFETY: as the caller guarantees.
    let (lo, hi) = unsafe { load_at(otk, half, 0) };
    (
        _mm512_and_si512(lo, _mm512_set1_epi64(0x0fff_fffc_0fff_ffff)),
        _mm512_and_si512(hi, _mm512_set1_epi64(0x0fff_fffc_0fff_fffc)),
    )
}

/// Writes the tags of `half`'s lanes: `lo` and `hi`, the 64-bit halves of each
/// lane's `h mod p` (below 2^128 once reduced, upper bits past 2^128 ignored), plus
/// `s` from bytes 16..32 of the lane's one-time key, modulo 2^128.
///
/// # Safety
/// The lanes' keys are valid for reading 32 bytes, their `mac` for writing 16.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn add_s_and_store(
    lo: __m512i,
    hi: __m512i,
    otk: &[*const u8; MAX_LANES],
    mac: &[*mut u8; MAX_LANES],
    half: usize,
) {
    // SAFETY: the caller guarantees 32 readable bytes at each key.
    let (s_lo, s_hi) = unsafe { load_at(otk, half, 16) };
    let sum_lo = _mm512_add_epi64(lo, s_lo);
    // The low half carried exactly when the sum wrapped below an addend.
    let carried = _mm512_cmplt_epu64_mask(sum_lo, lo);
    let sum_hi = _mm512_add_epi64(hi, s_hi);
    let sum_hi = _mm512_mask_add_epi64(sum_hi, carried, sum_hi, _mm512_set1_epi64(1));
    // Lane l's tag is (sum_lo[l], sum_hi[l]): the even lanes' tags in the 128-bit
    // quarters of `even`, the odd lanes' in `odd`.
    let even = _mm512_unpacklo_epi64(sum_lo, sum_hi);
    let odd = _mm512_unpackhi_epi64(sum_lo, sum_hi);
    let out = [
        _mm512_extracti32x4_epi32::<0>(even),
        _mm512_extracti32x4_epi32::<0>(odd),
        _mm512_extracti32x4_epi32::<1>(even),
        _mm512_extracti32x4_epi32::<1>(odd),
        _mm512_extracti32x4_epi32::<2>(even),
        _mm512_extracti32x4_epi32::<2>(odd),
        _mm512_extracti32x4_epi32::<3>(even),
        _mm512_extracti32x4_epi32::<3>(odd),
    ];
    for (l, v) in out.into_iter().enumerate() {
        // SAFETY: the caller guarantees 16 writable bytes at each `mac`.
        unsafe { _mm_storeu_si128(mac[8 * half + l].cast(), v) };
    }
}

/// Starts all 16 lanes in radix 2^26: `r` clamped from the first 16 bytes of the
/// key at `otk[lane]`, `h` = 0, the 2^128 bit on, stride 16 (`ptr` is the caller's).
///
/// # Safety
/// The CPU has AVX-512F; `otk[0..16]` are each valid for reading 16 bytes.
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn start_r26(st: &mut PolyLanes, otk: &[*const u8; MAX_LANES]) {
    let zero = _mm512_setzero_si512();
    for k in HALVES {
        // SAFETY: the caller guarantees 16 readable bytes at each key.
        let (lo, hi) = unsafe { clamped_r(otk, k) };
        for (i, v) in poly_avx512::limbs(lo, hi, zero).into_iter().enumerate() {
            store8(&mut st.r[i], k, v);
            store8(&mut st.h[i], k, zero);
        }
        store8(&mut st.hibit, k, _mm512_set1_epi64(1 << 24));
    }
    st.stride.fill(16);
}

/// The tags of all 16 lanes from accumulators in radix 2^26 (see [`add_s_and_store`]).
///
/// # Safety
/// The CPU has AVX-512F; `otk[0..16]` are each valid for reading 32 bytes and
/// `mac[0..16]` for writing 16; the lanes' `h` limbs are each under 2^32 (as the
/// kernels leave them).
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn tags_r26(
    st: &PolyLanes,
    otk: &[*const u8; MAX_LANES],
    mac: &[*mut u8; MAX_LANES],
) {
    let m26 = _mm512_set1_epi64((1 << 26) - 1);
    let sr = _mm512_srli_epi64::<26>;
    let and = |x| _mm512_and_si512(x, m26);
    let add = _mm512_add_epi64;
    let propagate = |h: &mut [__m512i; 5]| {
        for i in 0..4 {
            h[i + 1] = add(h[i + 1], sr(h[i]));
            h[i] = and(h[i]);
        }
    };
    for k in HALVES {
        let mut h: [__m512i; 5] = core::array::from_fn(|i| load8(&st.h[i], k));
        // Carry, fold what passes 2^130 back as 5 times itself, carry again: every
        // limb then fits 26 bits, except that limb 4 reaches 2^26 when h >= 2^130.
        propagate(&mut h);
        let c = sr(h[4]);
        h[4] = and(h[4]);
        h[0] = add(h[0], add(c, _mm512_slli_epi64::<2>(c)));
        propagate(&mut h);
        // g = h + 5 - 2^130; h >= p exactly when g does not go below zero.
        let mut g = h;
        g[0] = add(g[0], _mm512_set1_epi64(5));
        propagate(&mut g);
        g[4] = _mm512_sub_epi64(g[4], _mm512_set1_epi64(1 << 26));
        let keep_h = _mm512_cmplt_epi64_mask(g[4], _mm512_setzero_si512());
        let h: [__m512i; 5] = core::array::from_fn(|i| _mm512_mask_blend_epi64(keep_h, g[i], h[i]));
        // h mod 2^128 as two 64-bit halves (limbs are 26 bits now: OR is addition).
        let lo = _mm512_or_si512(
            _mm512_or_si512(h[0], _mm512_slli_epi64::<26>(h[1])),
            _mm512_slli_epi64::<52>(h[2]),
        );
        let hi = _mm512_or_si512(
            _mm512_or_si512(_mm512_srli_epi64::<12>(h[2]), _mm512_slli_epi64::<14>(h[3])),
            _mm512_slli_epi64::<40>(h[4]),
        );
        // SAFETY: as the caller guarantees.
        unsafe { add_s_and_store(lo, hi, otk, mac, k) };
    }
}

/// Starts all 16 lanes in radix 2^44, as [`start_r26`] does in radix 2^26.
///
/// # Safety
/// The CPU has AVX-512F; `otk[0..16]` are each valid for reading 16 bytes.
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn start_r44(st: &mut PolyLanes, otk: &[*const u8; MAX_LANES]) {
    let zero = _mm512_setzero_si512();
    for k in HALVES {
        // SAFETY: the caller guarantees 16 readable bytes at each key.
        let (lo, hi) = unsafe { clamped_r(otk, k) };
        for (i, v) in poly_ifma::limbs(lo, hi, zero).into_iter().enumerate() {
            store8(&mut st.r[i], k, v);
            store8(&mut st.h[i], k, zero);
        }
        store8(&mut st.hibit, k, _mm512_set1_epi64(1 << 40));
    }
    st.stride.fill(16);
}

/// The tags of all 16 lanes from accumulators in radix 2^44.
///
/// # Safety
/// The CPU has AVX-512F; `otk[0..16]` are each valid for reading 32 bytes and
/// `mac[0..16]` for writing 16; the lanes' `h` limbs are under 2^45, 2^45 and 2^43
/// (as the IFMA kernel leaves them).
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn tags_r44(
    st: &PolyLanes,
    otk: &[*const u8; MAX_LANES],
    mac: &[*mut u8; MAX_LANES],
) {
    let m44 = _mm512_set1_epi64((1 << 44) - 1);
    let m42 = _mm512_set1_epi64((1 << 42) - 1);
    let add = _mm512_add_epi64;
    let propagate = |h: &mut [__m512i; 3]| {
        h[1] = add(h[1], _mm512_srli_epi64::<44>(h[0]));
        h[0] = _mm512_and_si512(h[0], m44);
        h[2] = add(h[2], _mm512_srli_epi64::<44>(h[1]));
        h[1] = _mm512_and_si512(h[1], m44);
    };
    for k in HALVES {
        let mut h: [__m512i; 3] = core::array::from_fn(|i| load8(&st.h[i], k));
        // Carry, fold what passes 2^130 (limb 2 past 42 bits) back as 5 times
        // itself, carry again: limbs then fit 44, 44 and 42 bits, except that limb
        // 2 reaches 2^42 when h >= 2^130.
        propagate(&mut h);
        let c = _mm512_srli_epi64::<42>(h[2]);
        h[2] = _mm512_and_si512(h[2], m42);
        h[0] = add(h[0], add(c, _mm512_slli_epi64::<2>(c)));
        propagate(&mut h);
        // g = h + 5 - 2^130; h >= p exactly when g does not go below zero.
        let mut g = h;
        g[0] = add(g[0], _mm512_set1_epi64(5));
        propagate(&mut g);
        g[2] = _mm512_sub_epi64(g[2], _mm512_set1_epi64(1 << 42));
        let keep_h = _mm512_cmplt_epi64_mask(g[2], _mm512_setzero_si512());
        let h: [__m512i; 3] = core::array::from_fn(|i| _mm512_mask_blend_epi64(keep_h, g[i], h[i]));
        // h mod 2^128 as two 64-bit halves: limb 1 straddles them.
        let lo = _mm512_or_si512(h[0], _mm512_slli_epi64::<44>(h[1]));
        let hi = _mm512_or_si512(_mm512_srli_epi64::<20>(h[1]), _mm512_slli_epi64::<24>(h[2]));
        // SAFETY: as the caller guarantees.
        unsafe { add_s_and_store(lo, hi, otk, mac, k) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::{Limbs, M44};
    use crate::kernels::tag_tests::{R26_EDGES, keys, tags_match_scalar};
    use crate::lanes::Radix;

    fn avx512() -> bool {
        std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("avx512vl")
    }

    /// The vector tags against the scalar ones for accumulators at the edges of the
    /// final reduction (p, p + 1, just under and over 2^130, limbs over their widths
    /// as the kernels leave them), in every lane of both halves.
    #[test]
    fn tags_reduce_like_the_scalar_code_at_the_edges() {
        if !avx512() {
            return;
        }
        // The second half's lanes take the cases in another order, so that a mix-up of
        // the halves fails too.
        let lanes = |cases: &[[u64; 5]; 8], shift: usize| {
            core::array::from_fn(|l| cases[(l + shift + 3 * (l / 8)) % 8])
        };
        for shift in [0, 3] {
            let h = lanes(&R26_EDGES, shift);
            tags_match_scalar(Radix::R26, 16, tags_r26, &h, Limbs::from_radix26);
        }
        let (m, m2) = (M44, (1u64 << 42) - 1);
        let r44: [[u64; 5]; 8] = [
            [m - 4, m, m2, 0, 0],                                // p
            [m - 3, m, m2, 0, 0],                                // p + 1
            [m, m, m2, 0, 0],                                    // 2^130 - 1
            [4, 0, 1 << 42, 0, 0],                               // 2^130 + 4
            [m + 7, m + 1, m2, 0, 0],                            // over p with limbs past width
            [0, 0, 0, 0, 0],                                     // zero
            [(1 << 45) - 1, (1 << 45) - 1, (1 << 43) - 1, 0, 0], // the kernel's bounds
            [m - 5, m, m2, 0, 0],                                // p - 1
        ];
        let as_limbs = |c: [u64; 5]| Limbs([c[0], c[1], c[2]]);
        for shift in [0, 5] {
            tags_match_scalar(Radix::R44, 16, tags_r44, &lanes(&r44, shift), as_limbs);
        }
    }

    /// Each lane's `r` is the scalar clamp of its own key, in the radix's limbs, with
    /// `h` zero, the 2^128 bit on and stride 16.
    #[test]
    fn start_clamps_each_lanes_key_like_the_scalar_code() {
        if !avx512() {
            return;
        }
        type Start = unsafe fn(&mut PolyLanes, &[*const u8; MAX_LANES]);
        let keys = keys();
        let otk: [*const u8; MAX_LANES] = core::array::from_fn(|l| keys[l].as_ptr());
        for (radix, start) in [
            (Radix::R26, start_r26 as Start),
            (Radix::R44, start_r44 as Start),
        ] {
            let mut st = PolyLanes::idle(radix);
            st.h = [[7; MAX_LANES]; 5];
            // SAFETY: AVX-512F is here (checked); every key has 16 readable bytes.
            unsafe { start(&mut st, &otk) };
            let mut want = PolyLanes::idle(radix);
            for (l, key) in keys.iter().enumerate() {
                want.set_r(l, Limbs::clamped_r(key[..16].try_into().unwrap()));
                want.set_hibit(l, true);
                assert_eq!(st.get_h(l), Limbs::ZERO, "{radix:?} lane {l}");
            }
            assert_eq!(st.r, want.r, "{radix:?}");
            assert_eq!(st.hibit, want.hibit, "{radix:?}");
            assert_eq!(st.stride, [16; MAX_LANES], "{radix:?}");
        }
    }
}
