//! The Internet checksum of RFC 1071: the one's-complement sum of 16-bit
//! big-endian words, complemented.
//!
//! [`sum`] returns the folded sum (not complemented) so that sums of several
//! pieces (a pseudo-header and a datagram) can be added with [`combine`]
//! before the final complement. A header whose checksum field is correct sums
//! to `0xffff`.

use core::net::{Ipv4Addr, Ipv6Addr};

/// The folded one's-complement sum of `data` as big-endian 16-bit words; an
/// odd final byte counts as the high byte of a word whose low byte is zero
/// (RFC 1071 §1, step 1).
///
/// To sum a message in pieces, every piece but the last must have an even
/// length: a piece that starts at an odd offset would pair its bytes the
/// other way round.
pub fn sum(data: &[u8]) -> u16 {
    // RFC 1071 §2(B): the sum is independent of byte order, so words are read
    // in native order, 16 bytes at a time, and the result swapped once at the
    // end. §2(C): wider words fold down to the same 16-bit sum as long as
    // carries wrap around, which `add_wrapping_carry` does.
    let mut acc = 0u64;
    let mut rest = data;
    while let Some((block, tail)) = rest.split_first_chunk::<16>() {
        acc = add_block(acc, block);
        rest = tail;
    }
    // The tail starts at an even offset, so its words pair up as in the
    // blocks, and an odd last byte padded with zero is exactly the RFC's
    // padding. Short packets (a 20-byte IPv4 header) live here, so the tail
    // is taken in at most four steps rather than byte by byte.
    if let Some((word, tail)) = rest.split_first_chunk::<8>() {
        acc = add_wrapping_carry(acc, u64::from_ne_bytes(*word));
        rest = tail;
    }
    if let Some((word, tail)) = rest.split_first_chunk::<4>() {
        acc = add_wrapping_carry(acc, u64::from(u32::from_ne_bytes(*word)));
        rest = tail;
    }
    if let Some((word, tail)) = rest.split_first_chunk::<2>() {
        acc = add_wrapping_carry(acc, u64::from(u16::from_ne_bytes(*word)));
        rest = tail;
    }
    if let Some(&last) = rest.first() {
        acc = add_wrapping_carry(acc, u64::from(u16::from_ne_bytes([last, 0])));
    }
    let native = fold(acc);
    if cfg!(target_endian = "little") {
        native.swap_bytes()
    } else {
        native
    }
}

/// The Internet checksum of `data`: the complement of [`sum`].
pub fn checksum(data: &[u8]) -> u16 {
    !sum(data)
}

/// One's-complement addition of two folded sums.
pub fn combine(a: u16, b: u16) -> u16 {
    let (s, carry) = a.overflowing_add(b);
    s + u16::from(carry)
}

/// The checksum field `checksum` once the bytes it covers change from a part
/// whose folded [`sum`] was `old` to one whose sum is `new`, without summing
/// the rest again (RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m')). The parts must
/// start at the same even offset.
pub fn update(checksum: u16, old: u16, new: u16) -> u16 {
    !combine(combine(!checksum, !old), new)
}

/// The folded sum of the IPv4 pseudo-header that UDP and TCP checksums cover
/// (RFC 768, RFC 9293 §3.1): source, destination, zero, protocol, length.
pub fn pseudo_header_v4(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, len: u16) -> u16 {
    let mut header = [0u8; 12];
    header[0..4].copy_from_slice(&src.octets());
    header[4..8].copy_from_slice(&dst.octets());
    header[9] = protocol;
    header[10..12].copy_from_slice(&len.to_be_bytes());
    sum(&header)
}

/// The folded sum of the IPv6 pseudo-header (RFC 8200 §8.1): source,
/// destination, upper-layer packet length as 32 bits, three zero bytes, next
/// header.
pub fn pseudo_header_v6(src: &Ipv6Addr, dst: &Ipv6Addr, next_header: u8, len: u32) -> u16 {
    let mut header = [0u8; 40];
    header[0..16].copy_from_slice(&src.octets());
    header[16..32].copy_from_slice(&dst.octets());
    header[32..36].copy_from_slice(&len.to_be_bytes());
    header[39] = next_header;
    sum(&header)
}

#[inline(always)]
fn add_block(acc: u64, block: &[u8; 16]) -> u64 {
    let words = u128::from_ne_bytes(*block);
    let acc = add_wrapping_carry(acc, words as u64);
    add_wrapping_carry(acc, (words >> 64) as u64)
}

#[inline(always)]
fn add_wrapping_carry(acc: u64, word: u64) -> u64 {
    let (s, carry) = acc.overflowing_add(word);
    // After a carry `s` is at most 2^64 - 2, so adding it back cannot
    // overflow.
    s + u64::from(carry)
}

fn fold(acc: u64) -> u16 {
    let (s, carry) = (acc as u32).overflowing_add((acc >> 32) as u32);
    let s = s + u32::from(carry);
    combine(s as u16, (s >> 16) as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A checksum patched for a changed part is the one computed anew, for
    /// parts of a header, of a datagram, and of odd length at the end.
    #[test]
    fn an_updated_checksum_is_the_one_computed_anew() {
        let mut data = [0u8; 61];
        for (i, b) in data.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(37).wrapping_add(11);
        }
        for (from, to) in [(8, 10), (0, 2), (20, 61), (12, 60), (40, 41)] {
            for seed in [1u8, 0x80, 0xff] {
                let before = checksum(&data);
                let old = sum(&data[from..to]);
                let mut changed = data;
                for (i, b) in changed[from..to].iter_mut().enumerate() {
                    *b = b.wrapping_mul(seed).wrapping_add(i as u8);
                }
                let new = sum(&changed[from..to]);
                assert_eq!(update(before, old, new), checksum(&changed), "{from}..{to}");
            }
        }
    }

    /// Word-at-a-time sum, written straight from the RFC, to check the fast
    /// one against.
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

    fn noise(len: usize, seed: u32) -> std::vec::Vec<u8> {
        let mut x = seed;
        (0..len)
            .map(|_| {
                x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (x >> 24) as u8
            })
            .collect()
    }

    #[test]
    fn rfc1071_numerical_example() {
        // RFC 1071 §3: these eight bytes sum to ddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(sum(&data), 0xddf2);
        assert_eq!(checksum(&data), 0x220d);
    }

    #[test]
    fn empty_and_zero_sum_to_zero() {
        assert_eq!(sum(&[]), 0);
        assert_eq!(sum(&[0; 100]), 0);
        assert_eq!(checksum(&[]), 0xffff);
    }

    #[test]
    fn odd_byte_is_the_high_half_of_a_word() {
        assert_eq!(sum(&[0xab]), 0xab00);
        assert_eq!(sum(&[0x12, 0x34, 0xab]), 0x1234 + 0xab00);
    }

    #[test]
    fn carries_wrap_around() {
        // Any number of all-ones words sums to all ones, never to zero.
        for len in [2, 16, 18, 4096, 65536] {
            assert_eq!(sum(&std::vec![0xff; len]), 0xffff, "len {len}");
        }
        assert_eq!(sum(&[0x80, 0x00, 0x80, 0x00]), 0x0001);
    }

    #[test]
    fn matches_reference_on_every_length_and_alignment() {
        let data = noise(700, 7);
        for start in 0..17 {
            for end in start..data.len() {
                let piece = &data[start..end];
                assert_eq!(sum(piece), reference(piece), "[{start}..{end}]");
            }
        }
    }

    #[test]
    fn sums_of_even_pieces_combine() {
        let data = noise(1501, 11);
        for split in (0..data.len()).step_by(2) {
            let (a, b) = data.split_at(split);
            assert_eq!(combine(sum(a), sum(b)), sum(&data), "split {split}");
        }
    }

    #[test]
    fn combine_is_ones_complement_addition() {
        assert_eq!(combine(0xffff, 0x0001), 0x0001);
        assert_eq!(combine(0x8000, 0x8000), 0x0001);
        assert_eq!(combine(0x1234, 0), 0x1234);
    }

    #[test]
    fn a_header_with_its_checksum_sums_to_all_ones() {
        let mut data = noise(64, 3);
        data[10] = 0;
        data[11] = 0;
        let c = checksum(&data);
        data[10..12].copy_from_slice(&c.to_be_bytes());
        assert_eq!(sum(&data), 0xffff);
    }

    #[test]
    fn pseudo_headers_lay_out_their_fields() {
        let v4 = pseudo_header_v4(
            Ipv4Addr::new(198, 18, 0, 1),
            Ipv4Addr::new(198, 18, 0, 2),
            17,
            0x1234,
        );
        assert_eq!(
            v4,
            reference(&[198, 18, 0, 1, 198, 18, 0, 2, 0, 17, 0x12, 0x34])
        );

        let src: Ipv6Addr = "2001:2::1".parse().unwrap();
        let dst: Ipv6Addr = "2001:2::2".parse().unwrap();
        let mut bytes = [0u8; 40];
        bytes[..16].copy_from_slice(&src.octets());
        bytes[16..32].copy_from_slice(&dst.octets());
        bytes[32..36].copy_from_slice(&0x0001_0203u32.to_be_bytes());
        bytes[39] = 17;
        assert_eq!(
            pseudo_header_v6(&src, &dst, 17, 0x0001_0203),
            reference(&bytes)
        );
    }
}
