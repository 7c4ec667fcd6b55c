//! Poly1305 for 8 lanes on AVX2, in radix 2^26: the AVX-512F kernel's arithmetic on
//! ymm registers (4 lanes each, two side by side).

use crate::lanes::PolyLanes;
use core::arch::x86_64::*;

#[inline]
#[target_feature(enable = "avx2")]
fn load4(a: &[u64; 16], q: usize) -> __m256i {
    // SAFETY: `q` is 0 or 1: 4 u64 from 4 * q are inside the array.
    unsafe { _mm256_loadu_si256(a.as_ptr().add(4 * q).cast()) }
}

#[inline]
#[target_feature(enable = "avx2")]
fn store4(a: &mut [u64; 16], q: usize, v: __m256i) {
    // SAFETY: as in `load4`.
    unsafe { _mm256_storeu_si256(a.as_mut_ptr().add(4 * q).cast(), v) }
}

/// Four 16-byte blocks as (low 64 bits, high 64 bits) of each.
///
/// # Safety
/// Each of the 4 pointers must be valid for reading 16 bytes.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn load_blocks(p: &[*const u8; 4]) -> (__m256i, __m256i) {
    // SAFETY: the caller guarantees 16 readable bytes at each pointer.
    let x = |i: usize| unsafe { _mm_loadu_si128(p[i].cast()) };
    let a = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(x(0)), x(2));
    let b = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(x(1)), x(3));
    (_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b))
}

/// A block's halves as five 26-bit limbs, `hibit` on the top one.
#[inline]
#[target_feature(enable = "avx2")]
fn limbs(lo: __m256i, hi: __m256i, hibit: __m256i) -> [__m256i; 5] {
    let m26 = _mm256_set1_epi64x((1 << 26) - 1);
    [
        _mm256_and_si256(lo, m26),
        _mm256_and_si256(_mm256_srli_epi64::<26>(lo), m26),
        _mm256_and_si256(
            _mm256_or_si256(_mm256_srli_epi64::<52>(lo), _mm256_slli_epi64::<12>(hi)),
            m26,
        ),
        _mm256_and_si256(_mm256_srli_epi64::<14>(hi), m26),
        _mm256_or_si256(_mm256_srli_epi64::<40>(hi), hibit),
    ]
}

/// `h * r` for five-limb numbers, `s` = 5 * r, partially reduced.
#[inline]
#[target_feature(enable = "avx2")]
fn mul(h: [__m256i; 5], r: &[__m256i; 5], s: &[__m256i; 5]) -> [__m256i; 5] {
    let m = _mm256_mul_epu32;
    let a = _mm256_add_epi64;
    let d0 = a(
        a(m(h[0], r[0]), m(h[1], s[4])),
        a(a(m(h[2], s[3]), m(h[3], s[2])), m(h[4], s[1])),
    );
    let d1 = a(
        a(m(h[0], r[1]), m(h[1], r[0])),
        a(a(m(h[2], s[4]), m(h[3], s[3])), m(h[4], s[2])),
    );
    let d2 = a(
        a(m(h[0], r[2]), m(h[1], r[1])),
        a(a(m(h[2], r[0]), m(h[3], s[4])), m(h[4], s[3])),
    );
    let d3 = a(
        a(m(h[0], r[3]), m(h[1], r[2])),
        a(a(m(h[2], r[1]), m(h[3], r[0])), m(h[4], s[4])),
    );
    let d4 = a(
        a(m(h[0], r[4]), m(h[1], r[3])),
        a(a(m(h[2], r[2]), m(h[3], r[1])), m(h[4], r[0])),
    );
    let mask = _mm256_set1_epi64x((1 << 26) - 1);
    let sr = _mm256_srli_epi64::<26>;
    let and = |x| _mm256_and_si256(x, mask);
    let d1 = a(d1, sr(d0));
    let d2 = a(d2, sr(d1));
    let d3 = a(d3, sr(d2));
    let d4 = a(d4, sr(d3));
    let c = sr(d4);
    let d0 = a(and(d0), a(c, _mm256_slli_epi64::<2>(c)));
    let d1 = a(and(d1), sr(d0));
    [and(d0), d1, and(d2), and(d3), and(d4)]
}

/// `n` steps of lanes 0..8: see [`PolyLanes`] (in radix 2^26).
///
/// The two halves of four lanes are independent chains, written out side by side in
/// one loop body so that each one's multiplications fill the other's carry latency.
///
/// # Safety
/// The CPU has AVX2; every lane's `ptr + k * stride` (lanes 0..8) is valid for
/// reading 16 bytes for each k < n; `r` of every lane is partially reduced (limbs
/// within a few bits of their widths, as `Limbs::mul` leaves them).
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn steps(st: &mut PolyLanes, n: usize) {
    let load =
        |a: &[[u64; 16]; 5], k| -> [__m256i; 5] { core::array::from_fn(|i| load4(&a[i], k)) };
    let times5 = |r: [__m256i; 5]| r.map(|x| _mm256_add_epi64(x, _mm256_slli_epi64::<2>(x)));
    let (mut h0, mut h1) = (load(&st.h, 0), load(&st.h, 1));
    let (r0, r1) = (load(&st.r, 0), load(&st.r, 1));
    let (s0, s1) = (times5(r0), times5(r1));
    let (hibit0, hibit1) = (load4(&st.hibit, 0), load4(&st.hibit, 1));
    let add = |h: [__m256i; 5], m: [__m256i; 5]| -> [__m256i; 5] {
        core::array::from_fn(|i| _mm256_add_epi64(h[i], m[i]))
    };
    let mut p: [*const u8; 8] = core::array::from_fn(|l| st.ptr[l]);
    let stride: [usize; 8] = core::array::from_fn(|l| st.stride[l]);
    for _ in 0..n {
        // SAFETY: the caller guarantees 16 readable bytes at each lane's pointer.
        let ((lo0, hi0), (lo1, hi1)) = unsafe {
            (
                load_blocks(&[p[0], p[1], p[2], p[3]]),
                load_blocks(&[p[4], p[5], p[6], p[7]]),
            )
        };
        h0 = mul(add(h0, limbs(lo0, hi0, hibit0)), &r0, &s0);
        h1 = mul(add(h1, limbs(lo1, hi1, hibit1)), &r1, &s1);
        for (p, s) in p.iter_mut().zip(stride) {
            *p = p.wrapping_add(s);
        }
    }
    st.ptr[..8].copy_from_slice(&p);
    for (k, h) in [(0, h0), (1, h1)] {
        for (i, v) in h.into_iter().enumerate() {
            store4(&mut st.h[i], k, v);
        }
    }
}

/// The 4 lanes' 16-byte values at `p[i] + at`, as 64-bit halves (see `load_blocks`).
///
/// # Safety
/// Each pointer must be valid for reading 16 bytes from `at`.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn load_at(p: &[*const u8], at: usize) -> (__m256i, __m256i) {
    let q: [*const u8; 4] = core::array::from_fn(|i| p[i].wrapping_add(at));
    // SAFETY: the caller guarantees 16 readable bytes at each `p[i] + at`.
    unsafe { load_blocks(&q) }
}

/// Starts lanes 0..8 on a packet each: `r` clamped from the first 16 bytes of the
/// lane's one-time key at `otk[lane]`, `h` = 0, the 2^128 bit on, stride 16.
/// (`ptr` is the caller's to set.) One vector pass instead of a scalar conversion
/// per lane.
///
/// # Safety
/// The CPU has AVX2; `otk[0..8]` are each valid for reading 16 bytes.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn start(st: &mut PolyLanes, otk: &[*const u8; crate::lanes::MAX_LANES]) {
    // The clamp of section 2.5.1, on the low and high 64 bits of r.
    let clamp_lo = _mm256_set1_epi64x(0x0fff_fffc_0fff_ffff);
    let clamp_hi = _mm256_set1_epi64x(0x0fff_fffc_0fff_fffc);
    for k in [0usize, 1] {
        // SAFETY: the caller guarantees 16 readable bytes at each key.
        let (lo, hi) = unsafe { load_at(&otk[4 * k..4 * k + 4], 0) };
        let (lo, hi) = (
            _mm256_and_si256(lo, clamp_lo),
            _mm256_and_si256(hi, clamp_hi),
        );
        let r = limbs(lo, hi, _mm256_setzero_si256());
        for (i, v) in r.into_iter().enumerate() {
            store4(&mut st.r[i], k, v);
            store4(&mut st.h[i], k, _mm256_setzero_si256());
        }
        store4(&mut st.hibit, k, _mm256_set1_epi64x(1 << 24));
    }
    st.stride[..8].fill(16);
}

/// The tags of lanes 0..8: each lane's `h` reduced modulo 2^130 - 5, plus `s` from
/// bytes 16..32 of its one-time key at `otk[lane]`, modulo 2^128, written as 16
/// bytes at `mac[lane]` (section 2.5.1). Straight-line: the choice between `h` and
/// `h - p` is a mask, not a branch.
///
/// # Safety
/// The CPU has AVX2; `otk[0..8]` are each valid for reading 32 bytes and `mac[0..8]`
/// for writing 16; the lanes' `h` limbs are each under 2^32 (as the kernels leave
/// them).
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn tags(
    st: &PolyLanes,
    otk: &[*const u8; crate::lanes::MAX_LANES],
    mac: &[*mut u8; crate::lanes::MAX_LANES],
) {
    let m26 = _mm256_set1_epi64x((1 << 26) - 1);
    let sr = _mm256_srli_epi64::<26>;
    let and = |x| _mm256_and_si256(x, m26);
    let add = _mm256_add_epi64;
    let propagate = |h: &mut [__m256i; 5]| {
        for i in 0..4 {
            h[i + 1] = add(h[i + 1], sr(h[i]));
            h[i] = and(h[i]);
        }
    };
    for k in [0usize, 1] {
        let mut h: [__m256i; 5] = core::array::from_fn(|i| load4(&st.h[i], k));
        // Carry, fold what passes 2^130 back as 5 times itself, carry again: every
        // limb then fits 26 bits, except that limb 4 reaches 2^26 when h >= 2^130.
        propagate(&mut h);
        let c = sr(h[4]);
        h[4] = and(h[4]);
        h[0] = add(h[0], add(c, _mm256_slli_epi64::<2>(c)));
        propagate(&mut h);
        // g = h + 5 - 2^130; h >= p exactly when g does not go below zero.
        let mut g = h;
        g[0] = add(g[0], _mm256_set1_epi64x(5));
        propagate(&mut g);
        g[4] = _mm256_sub_epi64(g[4], _mm256_set1_epi64x(1 << 26));
        let keep_h = _mm256_cmpgt_epi64(_mm256_setzero_si256(), g[4]);
        let h: [__m256i; 5] = core::array::from_fn(|i| _mm256_blendv_epi8(g[i], h[i], keep_h));
        // h mod 2^128 as two 64-bit halves (limbs are 26 bits now: OR is addition).
        let lo = _mm256_or_si256(
            _mm256_or_si256(h[0], _mm256_slli_epi64::<26>(h[1])),
            _mm256_slli_epi64::<52>(h[2]),
        );
        let hi = _mm256_or_si256(
            _mm256_or_si256(_mm256_srli_epi64::<12>(h[2]), _mm256_slli_epi64::<14>(h[3])),
            _mm256_slli_epi64::<40>(h[4]),
        );
        // + s, with the carry from the low half found by an unsigned comparison
        // (signed after flipping the top bits: AVX2 compares only signed).
        // SAFETY: the caller guarantees 32 readable bytes at each key.
        let (s_lo, s_hi) = unsafe { load_at(&otk[4 * k..4 * k + 4], 16) };
        let sum_lo = add(lo, s_lo);
        let top = _mm256_set1_epi64x(i64::MIN);
        let carried = _mm256_cmpgt_epi64(_mm256_xor_si256(lo, top), _mm256_xor_si256(sum_lo, top));
        let sum_hi = _mm256_sub_epi64(add(hi, s_hi), carried);
        // Lane l's tag is (sum_lo[l], sum_hi[l]): lanes 0 and 2 in `a`, 1 and 3 in `b`.
        let a = _mm256_unpacklo_epi64(sum_lo, sum_hi);
        let b = _mm256_unpackhi_epi64(sum_lo, sum_hi);
        let out = [
            _mm256_castsi256_si128(a),
            _mm256_castsi256_si128(b),
            _mm256_extracti128_si256::<1>(a),
            _mm256_extracti128_si256::<1>(b),
        ];
        for (l, v) in out.into_iter().enumerate() {
            // SAFETY: the caller guarantees 16 writable bytes at each `mac`.
            unsafe { _mm_storeu_si128(mac[4 * k + l].cast(), v) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::Limbs;
    use crate::kernels::tag_tests::{R26_EDGES, tags_match_scalar};
    use crate::lanes::Radix;

    /// The vector tags against the scalar ones for accumulators at the edges of the
    /// final reduction and with `s` that carries out of the low half.
    #[test]
    fn tags_reduce_like_the_scalar_code_at_the_edges() {
        if !std::is_x86_feature_detected!("avx2") {
            return;
        }
        let h = core::array::from_fn(|l| R26_EDGES[l % 8]);
        tags_match_scalar(Radix::R26, 8, tags, &h, Limbs::from_radix26);
    }
}
