//! Size classes: the ranges of op length (bytes of text, [`AeadOp::len`]) for which an
//! [`EngineSet`] chooses engines separately.
//!
//! The calibration measures every engine at one size per class, [`SIZES`]. A class
//! runs from the midpoint between its measured size and the one below it up to the
//! midpoint with the one above (a length exactly on a midpoint goes to the upper
//! class); the first class starts at 0 and the last has no end. With the sizes 64,
//! 256, 570, 1024, 1518 and 9000 the classes are 0-159, 160-412, 413-796,
//! 797-1270, 1271-5258 and 5259 bytes and up.
//!
//! The sizes are the simple IMIX's three (64, 570 and 1518 bytes) with one between
//! each pair, where the multi-buffer and the single-buffer engines change places
//! on the CPUs measured so far, and a jumbo frame's (9000): there the engines
//! change places again (on a Zen 4, intel-ipsec-mb's ChaCha20-Poly1305 runs 9000
//! bytes 1.2x as fast as the multi-buffer engine, which leads it at 1518).
//!
//! [`AeadOp::len`]: crate::AeadOp::len
//! [`EngineSet`]: crate::EngineSet

/// The sizes the calibration measures, one per class, ascending.
pub const SIZES: [usize; 6] = [64, 256, 570, 1024, 1518, 9000];
/// How many classes there are.
pub const COUNT: usize = SIZES.len();

/// Where each class but the first starts: the midpoints between measured sizes.
pub const STARTS: [u32; COUNT - 1] = {
    let mut starts = [0u32; COUNT - 1];
    let mut i = 0;
    while i < COUNT - 1 {
        starts[i] = ((SIZES[i] + SIZES[i + 1]) / 2) as u32;
        i += 1;
    }
    starts
};

/// The simple IMIX: packet sizes and their weights, 7:4:1 of 64, 570 and 1518 bytes.
pub const IMIX: [(usize, u32); 3] = [(64, 7), (570, 4), (1518, 1)];

/// The class of an op of `len` bytes of text.
#[inline]
pub fn of(len: u32) -> usize {
    // Five compares; no lookup table is smaller or faster for so few classes.
    STARTS.iter().take_while(|&&s| len >= s).count()
}

/// The lengths class `class` covers: its first length and, except for the last
/// class, its last.
pub fn range(class: usize) -> (u32, Option<u32>) {
    let lo = if class == 0 { 0 } else { STARTS[class - 1] };
    let hi = STARTS.get(class).map(|&s| s - 1);
    (lo, hi)
}

/// Describes a run of classes `first..=last` in words: "0-412 B", "1271 B and up",
/// "every size".
pub fn describe(first: usize, last: usize) -> String {
    let (lo, _) = range(first);
    match (lo, range(last).1) {
        (0, None) => "every size".to_string(),
        (lo, None) => format!("{lo} B and up"),
        (lo, Some(hi)) => format!("{lo}-{hi} B"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_cover_every_length_once_around_their_sizes() {
        assert_eq!(STARTS, [160, 413, 797, 1271, 5259]);
        for (c, &size) in SIZES.iter().enumerate() {
            assert_eq!(of(size as u32), c, "{size} B is in its own class");
            let (lo, hi) = range(c);
            assert_eq!(of(lo), c);
            if let Some(hi) = hi {
                assert_eq!(of(hi), c);
                assert_eq!(of(hi + 1), c + 1);
            }
        }
        assert_eq!(of(0), 0);
        assert_eq!(of(159), 0);
        assert_eq!(of(160), 1);
        assert_eq!(of(1424), COUNT - 2);
        assert_eq!(of(9000), COUNT - 1);
        assert_eq!(of(u32::MAX), COUNT - 1);
    }

    #[test]
    fn descriptions() {
        assert_eq!(describe(0, COUNT - 1), "every size");
        assert_eq!(describe(0, 1), "0-412 B");
        assert_eq!(describe(4, 4), "1271-5258 B");
        assert_eq!(describe(4, 5), "1271 B and up");
        assert_eq!(describe(2, 3), "413-1270 B");
    }
}
