//! The x86-64 vector kernels. Each is an `unsafe fn` with `#[target_feature]`, reached
//! only through a [`crate::dispatch::Kernels`] table, which is built only after the
//! runtime check for the features. Pointer work is limited to loading and storing
//! the lanes' blocks; everything else is arithmetic on registers.

pub(crate) mod chacha_avx2;
pub(crate) mod chacha_avx512;
pub(crate) mod poly_avx2;
pub(crate) mod poly_avx512;
pub(crate) mod poly_group_avx512;
pub(crate) mod poly_ifma;

/// What the tests of the kernels' group tags share.
#[cfg(test)]
pub(crate) mod tag_tests {
    use crate::field::Limbs;
    use crate::lanes::{MAX_LANES, PolyLanes, Radix};

    /// Radix-2^26 accumulators at the edges of the final reduction: p, p + 1, just
    /// under and over 2^130, limbs over 26 bits as the kernels leave them.
    pub const R26_EDGES: [[u64; 5]; 8] = {
        let m = (1u64 << 26) - 1;
        [
            [m - 4, m, m, m, m],             // p
            [m - 3, m, m, m, m],             // p + 1
            [m, m, m, m, m],                 // 2^130 - 1
            [4, 0, 0, 0, 1 << 26],           // 2^130 + 4
            [m + 7, m + 1, m, m, m],         // over p with limbs past 26 bits
            [0, 0, 0, 0, 0],                 // zero
            [1 << 27, 3, 1 << 26, 5, m + 2], // limbs of the mul's width
            [m - 5, m, m, m, m],             // p - 1
        ]
    };

    /// Keys whose `s` is near 2^128, so that the low half's addition carries, and
    /// whose `r` half has bits set that the clamp clears, so that it matters:
    /// every byte of lane `l`'s key is `0xff - l`.
    pub fn keys() -> [[u8; 32]; MAX_LANES] {
        core::array::from_fn(|l| [0xff - l as u8; 32])
    }

    /// Runs `tags` on accumulators `h` (one per lane, in the radix's limbs) and
    /// checks the tag of each of the first `lanes` lanes against the scalar code's.
    /// The caller checks that the CPU runs `tags`.
    pub fn tags_match_scalar(
        radix: Radix,
        lanes: usize,
        tags: unsafe fn(&PolyLanes, &[*const u8; MAX_LANES], &[*mut u8; MAX_LANES]),
        h: &[[u64; 5]; MAX_LANES],
        scalar: impl Fn([u64; 5]) -> Limbs,
    ) {
        let keys = keys();
        let mut st = PolyLanes::idle(radix);
        for (l, c) in h.iter().enumerate() {
            for (i, v) in c.iter().enumerate() {
                st.h[i][l] = *v;
            }
        }
        let mut macs = [[0u8; 16]; MAX_LANES];
        let otk: [*const u8; MAX_LANES] = core::array::from_fn(|l| keys[l].as_ptr());
        let mut out = [core::ptr::null_mut(); MAX_LANES];
        for (o, mac) in out.iter_mut().zip(macs.iter_mut()) {
            *o = mac.as_mut_ptr();
        }
        // SAFETY: the caller checked the CPU; every key has 32 bytes and every mac 16.
        unsafe { tags(&st, &otk, &out) };
        for (l, c) in h.iter().enumerate().take(lanes) {
            let s: &[u8; 16] = keys[l][16..].try_into().unwrap();
            assert_eq!(macs[l], scalar(*c).tag(s), "{radix:?} lane {l}: {c:?}");
        }
    }
}
