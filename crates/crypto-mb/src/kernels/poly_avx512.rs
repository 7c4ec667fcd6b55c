//! Poly1305 for 16 lanes on AVX-512F without IFMA, in radix 2^26 (five limbs).
//!
//! `vpmuludq` multiplies the low 32 bits of each 64-bit element, so limbs stay under
//! 2^27 and a 5x5 product (with 5*r folded in for terms past 2^130) is 25 multiplies
//! whose sums stay under 2^60. The 16 lanes are two registers of 8, side by side.

use crate::kernels::poly_ifma::{load_blocks, load8, store8};
use crate::lanes::PolyLanes;
use core::arch::x86_64::*;

/// A block's halves as five 26-bit limbs, `hibit` on the top one.
#[inline]
#[target_feature(enable = "avx512f")]
pub(crate) fn limbs(lo: __m512i, hi: __m512i, hibit: __m512i) -> [__m512i; 5] {
    let m26 = _mm512_set1_epi64((1 << 26) - 1);
    [
        _mm512_and_si512(lo, m26),
        _mm512_and_si512(_mm512_srli_epi64::<26>(lo), m26),
        _mm512_and_si512(
            _mm512_or_si512(_mm512_srli_epi64::<52>(lo), _mm512_slli_epi64::<12>(hi)),
            m26,
        ),
        _mm512_and_si512(_mm512_srli_epi64::<14>(hi), m26),
        _mm512_or_si512(_mm512_srli_epi64::<40>(hi), hibit),
    ]
}

/// `h * r` for five-limb numbers, `s` = 5 * r, partially reduced.
#[inline]
#[target_feature(enable = "avx512f")]
fn mul(h: [__m512i; 5], r: &[__m512i; 5], s: &[__m512i; 5]) -> [__m512i; 5] {
    let m = _mm512_mul_epu32;
    let a = _mm512_add_epi64;
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
    let mask = _mm512_set1_epi64((1 << 26) - 1);
    let sr = _mm512_srli_epi64::<26>;
    let and = |x| _mm512_and_si512(x, mask);
    let d1 = a(d1, sr(d0));
    let d2 = a(d2, sr(d1));
    let d3 = a(d3, sr(d2));
    let d4 = a(d4, sr(d3));
    let c = sr(d4);
    // 2^130 = 5: what passed limb 4 comes back to limb 0 times 5.
    let d0 = a(and(d0), a(c, _mm512_slli_epi64::<2>(c)));
    let d1 = a(and(d1), sr(d0));
    [and(d0), d1, and(d2), and(d3), and(d4)]
}

/// `n` steps of every lane: see [`PolyLanes`] (in radix 2^26).
///
/// # Safety
/// The CPU has AVX-512F; every lane's `ptr + k * stride` is valid for reading 16
/// bytes for each k < n; `r` of every lane is partially reduced (limbs within a
/// few bits of their widths, as `Limbs::mul` leaves them).
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn steps(st: &mut PolyLanes, n: usize) {
    let halves = [0usize, 1];
    let mut h = halves.map(|k| core::array::from_fn::<_, 5, _>(|i| load8(&st.h[i], k)));
    let r = halves.map(|k| core::array::from_fn::<_, 5, _>(|i| load8(&st.r[i], k)));
    let s = halves.map(|k| r[k].map(|x| _mm512_add_epi64(x, _mm512_slli_epi64::<2>(x))));
    let hibit = halves.map(|k| load8(&st.hibit, k));
    let mut ptr = st.ptr;
    for _ in 0..n {
        for k in halves {
            // SAFETY: the caller guarantees 16 readable bytes at each lane's pointer.
            let (lo, hi) = unsafe { load_blocks(&ptr[8 * k..8 * k + 8]) };
            let m = limbs(lo, hi, hibit[k]);
            let sum = core::array::from_fn(|i| _mm512_add_epi64(h[k][i], m[i]));
            h[k] = mul(sum, &r[k], &s[k]);
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
