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
unsafe fn load_blocks(p: &[*const u8]) -> (__m256i, __m256i) {
    // SAFETY: the caller guarantees 16 readable bytes at each pointer.
    let x = |i: usize| unsafe { _mm_loadu_si128(p[i].cast()) };
    let a = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(x(0)), x(2));
    let b = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(x(1)), x(3));
    (_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b))
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
/// # Safety
/// The CPU has AVX2; every lane's `ptr + k * stride` (lanes 0..8) is valid for
/// reading 16 bytes for each k < n; `r` of every lane is partially reduced (limbs
/// within a few bits of their widths, as `Limbs::mul` leaves them).
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn steps(st: &mut PolyLanes, n: usize) {
    let m26 = _mm256_set1_epi64x((1 << 26) - 1);
    let halves = [0usize, 1];
    let mut h = halves.map(|k| core::array::from_fn::<_, 5, _>(|i| load4(&st.h[i], k)));
    let r = halves.map(|k| core::array::from_fn::<_, 5, _>(|i| load4(&st.r[i], k)));
    let s = halves.map(|k| r[k].map(|x| _mm256_add_epi64(x, _mm256_slli_epi64::<2>(x))));
    let hibit = halves.map(|k| load4(&st.hibit, k));
    let mut ptr = st.ptr;
    for _ in 0..n {
        for k in halves {
            // SAFETY: the caller guarantees 16 readable bytes at each lane's pointer.
            let (lo, hi) = unsafe { load_blocks(&ptr[4 * k..4 * k + 4]) };
            let m = [
                _mm256_and_si256(lo, m26),
                _mm256_and_si256(_mm256_srli_epi64::<26>(lo), m26),
                _mm256_and_si256(
                    _mm256_or_si256(_mm256_srli_epi64::<52>(lo), _mm256_slli_epi64::<12>(hi)),
                    m26,
                ),
                _mm256_and_si256(_mm256_srli_epi64::<14>(hi), m26),
                _mm256_or_si256(_mm256_srli_epi64::<40>(hi), hibit[k]),
            ];
            let sum = core::array::from_fn(|i| _mm256_add_epi64(h[k][i], m[i]));
            h[k] = mul(sum, &r[k], &s[k]);
        }
        for (p, s) in ptr.iter_mut().zip(st.stride).take(8) {
            *p = p.wrapping_add(s);
        }
    }
    st.ptr = ptr;
    for k in halves {
        for (i, v) in h[k].into_iter().enumerate() {
            store4(&mut st.h[i], k, v);
        }
    }
}
