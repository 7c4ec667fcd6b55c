//! ChaCha20 for 8 lanes at once on AVX2: the AVX-512 kernel's layout on ymm
//! registers (one register per state word, lane `l` in element `l`).
//!
//! AVX2 has no rotate: 16- and 8-bit rotations are byte shuffles, 12 and 7 are two
//! shifts and an OR. It has no byte-masked store either, so a packet's partial last
//! block is XORed through a copy of the keystream on the stack.

use crate::lanes::ChachaLanes;
use core::arch::x86_64::*;

#[inline]
#[target_feature(enable = "avx2")]
fn rotl<const L: i32, const R: i32>(x: __m256i) -> __m256i {
    _mm256_or_si256(_mm256_slli_epi32::<L>(x), _mm256_srli_epi32::<R>(x))
}

/// The byte shuffles that rotate each 32-bit word left by 16 and by 8, bytes in
/// memory order.
#[repr(C, align(32))]
struct Shuffles([[u8; 32]; 2]);

static ROTATIONS: Shuffles = Shuffles([
    [
        2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9,
        14, 15, 12, 13,
    ],
    [
        3, 0, 1, 2, 7, 4, 5, 6, 11, 8, 9, 10, 15, 12, 13, 14, 3, 0, 1, 2, 7, 4, 5, 6, 11, 8, 9, 10,
        15, 12, 13, 14,
    ],
]);

/// Shuffle `r` (0: rotate by 16, 1: by 8), read from memory at each use. Held in
/// registers, the two masks left fourteen for the sixteen state words, and the
/// compiler spilled state inside the quarter rounds (18 stack accesses a double
/// round, now 6); a load per shuffle takes a load port, which the rounds leave
/// idle. (Seen as a constant, the 16-bit rotation also became two word shuffles on
/// the ports the shifts need.)
#[inline]
#[target_feature(enable = "avx2")]
fn rotation(r: usize) -> __m256i {
    // SAFETY: a static, 32-byte aligned; volatile so that the load stays at its use
    // rather than being hoisted out of the loop into a register.
    unsafe { core::ptr::read_volatile(ROTATIONS.0[r].as_ptr().cast::<__m256i>()) }
}

#[inline]
#[target_feature(enable = "avx2")]
fn quarter_round(x: &mut [__m256i; 16], a: usize, b: usize, c: usize, d: usize) {
    x[a] = _mm256_add_epi32(x[a], x[b]);
    x[d] = _mm256_shuffle_epi8(_mm256_xor_si256(x[d], x[a]), rotation(0));
    x[c] = _mm256_add_epi32(x[c], x[d]);
    x[b] = rotl::<12, 20>(_mm256_xor_si256(x[b], x[c]));
    x[a] = _mm256_add_epi32(x[a], x[b]);
    x[d] = _mm256_shuffle_epi8(_mm256_xor_si256(x[d], x[a]), rotation(1));
    x[c] = _mm256_add_epi32(x[c], x[d]);
    x[b] = rotl::<7, 25>(_mm256_xor_si256(x[b], x[c]));
}

/// 8x8 transpose of 32-bit words: in[w] holds word w of lanes 0..8, out[l] holds
/// words 0..8 of lane l (and the other way round: the transpose is its own inverse).
#[inline]
#[target_feature(enable = "avx2")]
fn transpose8(a: [__m256i; 8]) -> [__m256i; 8] {
    let t = [
        _mm256_unpacklo_epi32(a[0], a[1]),
        _mm256_unpackhi_epi32(a[0], a[1]),
        _mm256_unpacklo_epi32(a[2], a[3]),
        _mm256_unpackhi_epi32(a[2], a[3]),
        _mm256_unpacklo_epi32(a[4], a[5]),
        _mm256_unpackhi_epi32(a[4], a[5]),
        _mm256_unpacklo_epi32(a[6], a[7]),
        _mm256_unpackhi_epi32(a[6], a[7]),
    ];
    // u[r] (r < 4): in 128-bit half j, words 0..4 of lane 4j + r; u[4 + r]: words 4..8.
    let u = [
        _mm256_unpacklo_epi64(t[0], t[2]),
        _mm256_unpackhi_epi64(t[0], t[2]),
        _mm256_unpacklo_epi64(t[1], t[3]),
        _mm256_unpackhi_epi64(t[1], t[3]),
        _mm256_unpacklo_epi64(t[4], t[6]),
        _mm256_unpackhi_epi64(t[4], t[6]),
        _mm256_unpacklo_epi64(t[5], t[7]),
        _mm256_unpackhi_epi64(t[5], t[7]),
    ];
    let mut out = [_mm256_setzero_si256(); 8];
    for r in 0..4 {
        out[r] = _mm256_permute2x128_si256::<0x20>(u[r], u[4 + r]);
        out[4 + r] = _mm256_permute2x128_si256::<0x31>(u[r], u[4 + r]);
    }
    out
}

/// `n` steps of lanes 0..8, their rows unchanged between steps: see
/// [`ChachaLanes`]. The rows are loaded and transposed once for all `n` steps.
///
/// # Safety
/// The CPU has AVX2; lanes 0..8 have `row` pointing at a live row, and those with
/// `rem > 0` have `ptr` valid for reading and writing their next `min(rem, 64)`
/// bytes at each of the `n` steps (`ptr` moving on by `stride`; with `keyed`, each
/// of the `n - 1` steps after the first); with `keyed`, lanes 0..8 have `key` valid
/// for writing 64 bytes.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn steps(st: &mut ChachaLanes, n: usize) {
    // SAFETY: every lane's row pointer is valid (a job's key row or IDLE_ROW), a row
    // is 64 bytes; the first 8 counters and nonce words of each kind are 32 bytes.
    let (low, high, ctr, nonce) = unsafe {
        let row = |l: usize, half: usize| _mm256_load_si256(st.row[l].cast::<__m256i>().add(half));
        (
            core::array::from_fn(|l| row(l, 0)),
            core::array::from_fn(|l| row(l, 1)),
            _mm256_loadu_si256(st.ctr.as_ptr().cast()),
            st.nonce
                .map(|words| _mm256_loadu_si256(words.as_ptr().cast())),
        )
    };
    // Rows in, words out: words 0..8 from the rows' first halves, 8..16 from the
    // second; the rows' counter and nonce words are replaced by the lanes' own.
    let (w0, w1) = (transpose8(low), transpose8(high));
    let mut init: [__m256i; 16] = core::array::from_fn(|w| if w < 8 { w0[w] } else { w1[w - 8] });
    init[12] = ctr;
    init[13..].copy_from_slice(&nonce);
    let step = _mm256_set1_epi32(st.ctr_step as i32);
    debug_assert!(
        n > 0 || !st.keyed,
        "a keyed call makes at least its key step"
    );
    let mut keyed = core::mem::take(&mut st.keyed);
    for _ in 0..n {
        let mut x = init;
        chacha_rounds!(quarter_round, &mut x);
        for (w, i) in x.iter_mut().zip(init) {
            *w = _mm256_add_epi32(*w, i);
        }
        let low = transpose8([x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]]);
        let high = transpose8([x[8], x[9], x[10], x[11], x[12], x[13], x[14], x[15]]);
        init[12] = _mm256_add_epi32(init[12], step);
        if core::mem::take(&mut keyed) {
            for l in 0..8 {
                // SAFETY: with `keyed` every lane's key slot takes 64 bytes (caller).
                unsafe {
                    _mm256_storeu_si256(st.key[l].cast(), low[l]);
                    _mm256_storeu_si256(st.key[l].add(32).cast(), high[l]);
                }
            }
            continue;
        }
        for l in 0..8 {
            let (p, rem) = (st.ptr[l], st.rem[l]);
            if rem >= 64 {
                // SAFETY: the caller guarantees 64 valid bytes at `p`.
                unsafe {
                    let d0 = _mm256_loadu_si256(p.cast());
                    let d1 = _mm256_loadu_si256(p.add(32).cast());
                    _mm256_storeu_si256(p.cast(), _mm256_xor_si256(d0, low[l]));
                    _mm256_storeu_si256(p.add(32).cast(), _mm256_xor_si256(d1, high[l]));
                }
            } else if rem > 0 {
                let mut ks = [0u8; 64];
                // SAFETY: `ks` is 64 bytes; the caller guarantees `rem` valid bytes at
                // `p`, and only those are touched.
                unsafe {
                    _mm256_storeu_si256(ks.as_mut_ptr().cast(), low[l]);
                    _mm256_storeu_si256(ks.as_mut_ptr().add(32).cast(), high[l]);
                    for (i, k) in ks.iter().enumerate().take(rem) {
                        *p.add(i) ^= k;
                    }
                }
            }
            st.ptr[l] = p.wrapping_add(st.stride);
            st.rem[l] = rem.saturating_sub(st.stride);
        }
    }
    // SAFETY: the first 8 words of the 16-word counter array.
    unsafe { _mm256_storeu_si256(st.ctr.as_mut_ptr().cast(), init[12]) };
}
