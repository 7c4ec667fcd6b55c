//! The fast Internet checksum against a word-at-a-time sum written straight
//! from RFC 1071, on arbitrary data and split points.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::checksum;

fn reference(data: &[u8]) -> u16 {
    let mut acc: u32 = 0;
    for pair in data.chunks(2) {
        let hi = u32::from(pair[0]) << 8;
        let lo = pair.get(1).copied().map_or(0, u32::from);
        acc += hi | lo;
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

fuzz_target!(|data: &[u8]| {
    let sum = checksum::sum(data);
    assert_eq!(sum, reference(data));
    assert_eq!(checksum::checksum(data), !sum);
    // Pieces combine when every piece but the last has an even length.
    let split = usize::from(data.first().copied().unwrap_or(0)).min(data.len()) & !1;
    let (a, b) = data.split_at(split);
    assert_eq!(checksum::combine(checksum::sum(a), checksum::sum(b)), sum);
});
