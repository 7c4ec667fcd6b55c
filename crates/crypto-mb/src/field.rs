//! Poly1305's field, integers modulo p = 2^130 - 5, in scalar code (RFC 8439
//! section 2.5).
//!
//! Numbers are three limbs of 44, 44 and 42 bits (radix 2^44), the same layout the
//! IFMA lanes use, so that a lane's accumulator moves between vector and scalar code
//! without conversion. Limbs may run a few bits over their width between
//! operations ("partially reduced"); [`Limbs::reduce`] gives the canonical value.
//!
//! Everything here is straight-line arithmetic: no branch and no memory index depends
//! on a value, so it is constant time wherever 64x64-bit multiplication is.

pub(crate) const M44: u64 = (1 << 44) - 1;
pub(crate) const M42: u64 = (1 << 42) - 1;
const M26: u64 = (1 << 26) - 1;

/// 2^130 = 5 (mod p). With limbs at 2^0, 2^44 and 2^88, a product term at 2^132
/// comes back to 2^0 times 4 * 5 = 20; that is where the 20 in [`Limbs::mul`] is from.
const FOLD: u128 = 20;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Limbs(pub [u64; 3]);

impl Limbs {
    pub const ZERO: Limbs = Limbs([0; 3]);

    /// The clamped multiplier r from the first 16 bytes of a one-time key (section 2.5.1).
    pub fn clamped_r(key: &[u8; 16]) -> Limbs {
        let r = u128::from_le_bytes(*key) & 0x0fff_fffc_0fff_fffc_0fff_fffc_0fff_ffff;
        Limbs::from_u128(r, 0)
    }

    /// A 16-byte message block as a number, plus 2^128 when `hibit` (every block of
    /// the AEAD's padded input has it; only a short final block of raw Poly1305 not).
    pub fn block(b: &[u8; 16], hibit: bool) -> Limbs {
        Limbs::from_u128(u128::from_le_bytes(*b), hibit as u64)
    }

    /// `lo + top * 2^128`, `top` < 4.
    fn from_u128(lo: u128, top: u64) -> Limbs {
        Limbs([
            lo as u64 & M44,
            (lo >> 44) as u64 & M44,
            (lo >> 88) as u64 | (top << 40),
        ])
    }

    pub fn add(self, o: Limbs) -> Limbs {
        Limbs([self.0[0] + o.0[0], self.0[1] + o.0[1], self.0[2] + o.0[2]]).carry()
    }

    /// Product modulo p, partially reduced. Inputs may have limbs up to 2^52.
    pub fn mul(self, o: Limbs) -> Limbs {
        let [a0, a1, a2] = self.0.map(u128::from);
        let [b0, b1, b2] = o.0.map(u128::from);
        let (s1, s2) = (b1 * FOLD, b2 * FOLD);
        let d0 = a0 * b0 + a1 * s2 + a2 * s1;
        let d1 = a0 * b1 + a1 * b0 + a2 * s2;
        let d2 = a0 * b2 + a1 * b1 + a2 * b0;
        let d1 = d1 + (d0 >> 44);
        let d2 = d2 + (d1 >> 44);
        // What is left above 2^130 comes back as 5 times itself.
        let h0 = (d0 as u64 & M44) as u128 + (d2 >> 42) * 5;
        let h1 = (d1 as u64 & M44) + (h0 >> 44) as u64;
        Limbs([h0 as u64 & M44, h1, d2 as u64 & M42])
    }

    /// One carry pass: limbs back under (about) their widths, same value mod p.
    fn carry(self) -> Limbs {
        let [mut h0, mut h1, mut h2] = self.0;
        h1 += h0 >> 44;
        h0 &= M44;
        h2 += h1 >> 44;
        h1 &= M44;
        h0 += (h2 >> 42) * 5;
        h2 &= M42;
        h1 += h0 >> 44;
        h0 &= M44;
        h2 += h1 >> 44;
        h1 &= M44;
        Limbs([h0, h1, h2])
    }

    /// The canonical representative, below p, without a data-dependent branch (the
    /// tests' yardstick for `tag`, which reduces its own way).
    #[cfg(test)]
    pub fn reduce(self) -> Limbs {
        // Two passes bring the value under 2^130 (the second folds at most one 2^130).
        let h = self.carry().carry();
        let [h0, h1, h2] = h.0;
        // g = h + 5 - 2^130; if that does not borrow, h >= p and g is the answer.
        let g0 = h0 + 5;
        let g1 = h1 + (g0 >> 44);
        let g2 = h2 + (g1 >> 44);
        let take_g = 0u64.wrapping_sub(g2 >> 42); // all ones when g2 >= 2^42
        let pick = |h: u64, g: u64| (h & !take_g) | (g & take_g);
        Limbs([pick(h0, g0 & M44), pick(h1, g1 & M44), pick(h2, g2 & M42)])
    }

    /// The tag: (h mod p + s) mod 2^128, little endian (section 2.5.1).
    ///
    /// Works on the value as a u128 and a few bits above it rather than limb by
    /// limb: the carry chain is half as long, and this runs once per packet.
    pub fn tag(self, s: &[u8; 16]) -> [u8; 16] {
        let [h0, h1, h2] = self.0;
        // h = a + top * 2^128, with a < 2^128 after the carry out of the addition.
        let (a, carry) = (h0 as u128 + ((h1 as u128) << 44))
            .overflowing_add(((h2 & ((1 << 40) - 1)) as u128) << 88);
        let top = (h2 >> 40) + carry as u64;
        // Fold what is at or above 2^130 back as 5 times itself (2^130 = 5 mod p).
        let (lo, carry) = a.overflowing_add(5 * (top >> 2) as u128);
        let t = (top & 3) + carry as u64; // now h = lo + t * 2^128 < 2^130 + 2^128
        // h mod p is h + 5 - 2^130 when that is not negative, else h; below 2^128
        // the two differ only in the + 5.
        let (g, carry) = lo.overflowing_add(5);
        let take_g = 0u128.wrapping_sub(((t + carry as u64) >> 2) as u128);
        let h = (lo & !take_g) | (g & take_g);
        h.wrapping_add(u128::from_le_bytes(*s)).to_le_bytes()
    }

    /// Five 26-bit limbs of the same value, for the radix-2^26 lanes.
    pub fn to_radix26(self) -> [u64; 5] {
        let [h0, h1, h2] = self.carry().0;
        let lo = h0 as u128 | (h1 as u128) << 44 | (h2 as u128) << 88;
        let top = h2 >> 40; // bits 128 and 129
        [
            lo as u64 & M26,
            (lo >> 26) as u64 & M26,
            (lo >> 52) as u64 & M26,
            (lo >> 78) as u64 & M26,
            (lo >> 104) as u64 | top << 24,
        ]
    }

    /// From five radix-2^26 limbs (each under 2^40), partially reduced.
    pub fn from_radix26(l: [u64; 5]) -> Limbs {
        // Carry in radix 2^26, fold what passes 2^130, and carry again without folding:
        // then limbs 0..3 fit 26 bits and do not overlap, and limb 4 is at most 2^26.
        let mut l = l;
        let propagate = |l: &mut [u64; 5]| {
            for i in 0..4 {
                l[i + 1] += l[i] >> 26;
                l[i] &= M26;
            }
        };
        propagate(&mut l);
        l[0] += (l[4] >> 26) * 5;
        l[4] &= M26;
        propagate(&mut l);
        let lo = l[0] as u128
            | (l[1] as u128) << 26
            | (l[2] as u128) << 52
            | (l[3] as u128) << 78
            | (l[4] as u128) << 104; // bits past 128 drop here and come back as `top`
        Limbs::from_u128(lo, l[4] >> 24).carry()
    }
}

/// Poly1305 over whole 16-byte blocks, each with the 2^128 bit: the shape of every
/// block of the AEAD's MAC input (section 2.8: aad and ciphertext are zero-padded).
pub(crate) fn absorb_blocks(mut h: Limbs, r: Limbs, blocks: &[u8]) -> Limbs {
    debug_assert_eq!(blocks.len() % 16, 0);
    for b in blocks.chunks_exact(16) {
        let b: &[u8; 16] = b.try_into().expect("16-byte chunk");
        h = h.add(Limbs::block(b, true)).mul(r);
    }
    h
}

/// Raw Poly1305 of any message (section 2.5), for the known-answer tests.
pub fn poly1305(key: &[u8; 32], msg: &[u8]) -> [u8; 16] {
    let (r, s) = key.split_at(16);
    let r = Limbs::clamped_r(r.try_into().expect("16 bytes"));
    let s: &[u8; 16] = s.try_into().expect("16 bytes");
    let full = msg.len() / 16 * 16;
    let mut h = absorb_blocks(Limbs::ZERO, r, &msg[..full]);
    let rest = &msg[full..];
    if !rest.is_empty() {
        // A short last block gets its 1 byte right after the message, not at 2^128.
        let mut b = [0u8; 16];
        b[..rest.len()].copy_from_slice(rest);
        b[rest.len()] = 1;
        h = h.add(Limbs::block(&b, false)).mul(r);
    }
    h.tag(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(l: Limbs) -> (u128, u64) {
        let [h0, h1, h2] = l.reduce().0;
        (
            h0 as u128 | (h1 as u128) << 44 | (h2 as u128) << 88,
            h2 >> 40,
        )
    }

    #[test]
    fn reduce_is_canonical_at_the_edges() {
        // p itself, p + 1, 2^130 - 1 and 2^130 + 4.
        let p = Limbs([M44 - 4, M44, M42]);
        assert_eq!(p.reduce(), Limbs::ZERO);
        assert_eq!(Limbs([M44 - 3, M44, M42]).reduce(), Limbs([1, 0, 0]));
        assert_eq!(Limbs([M44, M44, M42]).reduce(), Limbs([4, 0, 0]));
        assert_eq!(Limbs([4, 0, 1 << 42]).reduce(), Limbs([9, 0, 0]));
    }

    #[test]
    fn tag_reduces_fully() {
        let s = [0u8; 16];
        let cases = [
            Limbs([M44 - 4, M44, M42]), // p
            Limbs([M44, M44, M42]),     // 2^130 - 1
            Limbs([4, 0, 1 << 42]),     // 2^130 + 4
            Limbs([M44, (1 << 45) - 1, (1 << 43) - 1]),
            Limbs([123, 456, 789]),
        ];
        for h in cases {
            let (v, _) = value(h);
            assert_eq!(h.tag(&s), v.to_le_bytes(), "{h:?}");
        }
    }

    #[test]
    fn radix26_round_trips() {
        let x = Limbs([0x0abc_dead_beef, 0x0f00_0000_0001, 0x3ff_ffff_ffff]);
        assert_eq!(value(Limbs::from_radix26(x.to_radix26())), value(x));
    }

    #[test]
    fn mul_matches_schoolbook_for_small_values() {
        let a = Limbs([123_456_789, 0, 0]);
        let b = Limbs([987_654_321, 0, 0]);
        assert_eq!(value(a.mul(b)).0, 123_456_789u128 * 987_654_321);
        // 2^129 * 2 = 2^130 = 5.
        assert_eq!(value(Limbs([0, 0, 1 << 41]).mul(Limbs([2, 0, 0]))).0, 5);
    }
}
