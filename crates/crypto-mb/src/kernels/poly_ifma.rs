//! Poly1305 for 16 lanes on AVX-512 IFMA, in radix 2^44 (limbs of 44, 44, 42 bits).
//!
//! `vpmadd52luq`/`vpmadd52huq` multiply 52-bit numbers and add the low or high 52
//! bits of the 104-bit product to an accumulator, so a 3x3 limb product is 9 of each
//! and needs no widening. The 16 lanes are two registers of 8 (a lane per 64-bit
//! element), processed side by side so that their dependency chains overlap.
//!
//! Bounds (why nothing overflows): entering a step, h0, h1 < 2^45 and h2 < 2^43
//! after adding the block; r limbs < 2^44 and r2 < 2^42 (r < 2^130), so 20*r1 < 2^49
//! and 20*r2 < 2^47, every product is < 2^94, each low-half sum < 3 * 2^52 and each
//! high-half sum < 2^42. After the carries h0, h2 fit their widths and h1 < 2^45.

use crate::lanes::PolyLanes;
use core::arch::x86_64::*;

#[inline]
#[target_feature(enable = "avx512f")]
pub(crate) fn load8(a: &[u64; 16], half: usize) -> __m512i {
    // SAFETY: `half` is 0 or 1, so 8 u64 from 8 * half are inside the array.
    unsafe { _mm512_loadu_si512(a.as_ptr().add(8 * half).cast()) }
}

#[inline]
#[target_feature(enable = "avx512f")]
pub(crate) fn store8(a: &mut [u64; 16], half: usize, v: __m512i) {
    // SAFETY: as in `load8`.
    unsafe { _mm512_storeu_si512(a.as_mut_ptr().add(8 * half).cast(), v) }
}

/// Eight 16-byte blocks, one per pointer, as (low 64 bits, high 64 bits) of each.
///
/// # Safety
/// Each of the 8 pointers must be valid for reading 16 bytes.
#[inline]
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn load_blocks(p: &[*const u8]) -> (__m512i, __m512i) {
    // SAFETY: the caller guarantees 16 readable bytes at each pointer.
    let x = |i: usize| unsafe { _mm_loadu_si128(p[i].cast()) };
    // Even lanes in `a`, odd in `b`: unpacking 64-bit halves then gives lane order.
    let a = _mm512_castsi128_si512(x(0));
    let a = _mm512_inserti32x4::<1>(a, x(2));
    let a = _mm512_inserti32x4::<2>(a, x(4));
    let a = _mm512_inserti32x4::<3>(a, x(6));
    let b = _mm512_castsi128_si512(x(1));
    let b = _mm512_inserti32x4::<1>(b, x(3));
    let b = _mm512_inserti32x4::<2>(b, x(5));
    let b = _mm512_inserti32x4::<3>(b, x(7));
    (_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b))
}

/// A block's halves as limbs of 44, 44 and 42 bits, `hibit` on the top one.
#[inline]
#[target_feature(enable = "avx512f")]
pub(crate) fn limbs(lo: __m512i, hi: __m512i, hibit: __m512i) -> [__m512i; 3] {
    let m44 = _mm512_set1_epi64((1 << 44) - 1);
    [
        _mm512_and_si512(lo, m44),
        _mm512_and_si512(
            _mm512_or_si512(_mm512_srli_epi64::<44>(lo), _mm512_slli_epi64::<20>(hi)),
            m44,
        ),
        _mm512_or_si512(_mm512_srli_epi64::<24>(hi), hibit),
    ]
}

#[inline]
#[target_feature(enable = "avx512f")]
fn times20(x: __m512i) -> __m512i {
    _mm512_add_epi64(_mm512_slli_epi64::<4>(x), _mm512_slli_epi64::<2>(x))
}

/// `n` steps of every lane: see [`PolyLanes`] (in radix 2^44).
///
/// # Safety
/// The CPU has AVX-512F and IFMA; every lane's `ptr + k * stride` is valid for
/// reading 16 bytes for each k < n; `r` of every lane is partially reduced (limbs
/// within a few bits of their widths, as `Limbs::mul` leaves them).
#[target_feature(enable = "avx512f,avx512ifma")]
pub(crate) unsafe fn steps(st: &mut PolyLanes, n: usize) {
    let m44 = _mm512_set1_epi64((1 << 44) - 1);
    let m42 = _mm512_set1_epi64((1 << 42) - 1);
    let zero = _mm512_setzero_si512();
    let halves = [0usize, 1];
    let mut h = halves.map(|k| [load8(&st.h[0], k), load8(&st.h[1], k), load8(&st.h[2], k)]);
    let r = halves.map(|k| [load8(&st.r[0], k), load8(&st.r[1], k), load8(&st.r[2], k)]);
    let s = halves.map(|k| [times20(r[k][1]), times20(r[k][2])]);
    let hibit = halves.map(|k| load8(&st.hibit, k));
    let mut ptr = st.ptr;
    for _ in 0..n {
        for k in halves {
            // SAFETY: the caller guarantees 16 readable bytes at each lane's pointer.
            let (lo, hi) = unsafe { load_blocks(&ptr[8 * k..8 * k + 8]) };
            let [m0, m1, m2] = limbs(lo, hi, hibit[k]);
            let [h0, h1, h2] = h[k];
            let (h0, h1, h2) = (
                _mm512_add_epi64(h0, m0),
                _mm512_add_epi64(h1, m1),
                _mm512_add_epi64(h2, m2),
            );
            let [r0, r1, r2] = r[k];
            let [s1, s2] = s[k];
            // d0 = h0 r0 + h1 20r2 + h2 20r1, d1 = h0 r1 + h1 r0 + h2 20r2,
            // d2 = h0 r2 + h1 r1 + h2 r0; t = low 52 bits, u = high bits of each term.
            let t0 = _mm512_madd52lo_epu64(zero, h0, r0);
            let t0 = _mm512_madd52lo_epu64(t0, h1, s2);
            let t0 = _mm512_madd52lo_epu64(t0, h2, s1);
            let u0 = _mm512_madd52hi_epu64(zero, h0, r0);
            let u0 = _mm512_madd52hi_epu64(u0, h1, s2);
            let u0 = _mm512_madd52hi_epu64(u0, h2, s1);
            let t1 = _mm512_madd52lo_epu64(zero, h0, r1);
            let t1 = _mm512_madd52lo_epu64(t1, h1, r0);
            let t1 = _mm512_madd52lo_epu64(t1, h2, s2);
            let u1 = _mm512_madd52hi_epu64(zero, h0, r1);
            let u1 = _mm512_madd52hi_epu64(u1, h1, r0);
            let u1 = _mm512_madd52hi_epu64(u1, h2, s2);
            let t2 = _mm512_madd52lo_epu64(zero, h0, r2);
            let t2 = _mm512_madd52lo_epu64(t2, h1, r1);
            let t2 = _mm512_madd52lo_epu64(t2, h2, r0);
            let u2 = _mm512_madd52hi_epu64(zero, h0, r2);
            let u2 = _mm512_madd52hi_epu64(u2, h1, r1);
            let u2 = _mm512_madd52hi_epu64(u2, h2, r0);
            // High halves sit 52 bits up: 8 bits into the next limb (52 = 44 + 8);
            // u2 is at 2^140 = 2^130 * 2^10, which folds back as 5 * 2^10.
            let c = _mm512_srli_epi64::<44>(t0);
            let h0 = _mm512_and_si512(t0, m44);
            let t1 = _mm512_add_epi64(t1, _mm512_add_epi64(c, _mm512_slli_epi64::<8>(u0)));
            let c = _mm512_srli_epi64::<44>(t1);
            let h1 = _mm512_and_si512(t1, m44);
            let t2 = _mm512_add_epi64(t2, _mm512_add_epi64(c, _mm512_slli_epi64::<8>(u1)));
            let c = _mm512_add_epi64(_mm512_srli_epi64::<42>(t2), _mm512_slli_epi64::<10>(u2));
            let h2 = _mm512_and_si512(t2, m42);
            let h0 = _mm512_add_epi64(h0, _mm512_add_epi64(c, _mm512_slli_epi64::<2>(c)));
            let c = _mm512_srli_epi64::<44>(h0);
            let h0 = _mm512_and_si512(h0, m44);
            let h1 = _mm512_add_epi64(h1, c);
            h[k] = [h0, h1, h2];
        }
        for (p, s) in ptr.iter_mut().zip(st.stride) {
            *p = p.wrapping_add(s);
        }
    }
    st.ptr = ptr;
    for k in halves {
        for (i, v) in h[k].into_iter().enumerate() {
            store8(&mut st.h[i], k, v);
        }
    }
}
