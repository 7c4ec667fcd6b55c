//! A fast keyed hash for tables the packet path reads per packet whose keys a
//! sender may choose (next hops on an attached network: any destination there is
//! one). SipHash costs tens of clocks per lookup, a good share of what forwarding
//! one packet costs; this is a folded multiply (the 128-bit product of the state
//! and a constant, its halves XORed) per word, starting from and finished with a
//! random key per table so that a sender cannot compute collisions offline, and
//! every table bounded anyway.
//!
//! It does not resist an attacker who can measure our timing over many probes as
//! SipHash would; what it guards is the table's shape, with random keys, as the
//! folded-multiply hashes of hashbrown's own default do.

use std::hash::{BuildHasher, Hasher};

/// Odd constants from the digits of pi: any odd 64-bit values with both halves
/// dense in ones work.
const MUL: u64 = 0x243f_6a88_85a3_08d3;
const FINAL: u64 = 0x1319_8a2e_0370_7344;

fn fold_mul(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

/// Builds the hashers of one table, with that table's random key.
#[derive(Clone, Copy, Debug)]
pub struct KeyedState {
    key: [u64; 2],
}

impl KeyedState {
    pub fn new() -> KeyedState {
        KeyedState {
            key: [rand::random(), rand::random()],
        }
    }
}

impl Default for KeyedState {
    fn default() -> KeyedState {
        KeyedState::new()
    }
}

impl BuildHasher for KeyedState {
    type Hasher = KeyedHasher;

    fn build_hasher(&self) -> KeyedHasher {
        KeyedHasher {
            state: self.key[0],
            key: self.key[1],
        }
    }
}

pub struct KeyedHasher {
    state: u64,
    key: u64,
}

impl KeyedHasher {
    #[inline]
    fn mix(&mut self, word: u64) {
        self.state = fold_mul(self.state ^ word, MUL);
    }
}

impl Hasher for KeyedHasher {
    #[inline]
    fn finish(&self) -> u64 {
        fold_mul(self.state ^ self.key, FINAL)
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.mix(u64::from_le_bytes(c.try_into().expect("eight bytes")));
        }
        let rest = chunks.remainder();
        let mut last = [0u8; 8];
        last[..rest.len()].copy_from_slice(rest);
        // The length goes in with the tail, so that "ab" and "ab\0" differ.
        self.mix(u64::from_le_bytes(last) ^ ((rest.len() as u64) << 59));
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.mix(u64::from(i));
    }

    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.mix(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.mix(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.mix(i);
    }

    #[inline]
    fn write_u128(&mut self, i: u128) {
        self.mix(i as u64);
        self.mix((i >> 64) as u64);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.mix(i as u64);
    }

    #[inline]
    fn write_isize(&mut self, i: isize) {
        self.mix(i as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::net::{IpAddr, Ipv4Addr};

    fn hash<T: std::hash::Hash>(s: &KeyedState, v: T) -> u64 {
        s.hash_one(v)
    }

    #[test]
    fn equal_keys_hash_alike_and_tables_differ() {
        let s = KeyedState::new();
        let a = (7u16, IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)));
        assert_eq!(hash(&s, a), hash(&s, a));
        let t = KeyedState::new();
        assert_ne!(hash(&s, a), hash(&t, a), "two tables share no key");
    }

    #[test]
    fn addresses_of_one_subnet_spread_over_the_buckets() {
        // A /16 of next hops, as a sender sweeping an attached network makes them:
        // the low bits hashbrown picks buckets by must all be taken about evenly.
        let s = KeyedState::new();
        let buckets = 1024u64;
        let mut used = vec![0u32; buckets as usize];
        for i in 0..65536u32 {
            let ip = IpAddr::V4(Ipv4Addr::from(0xc612_0000 | i));
            used[(hash(&s, (1u16, ip)) % buckets) as usize] += 1;
        }
        let (min, max) = (used.iter().min().unwrap(), used.iter().max().unwrap());
        assert!(*min > 20 && *max < 110, "buckets between {min} and {max}");
        // hashbrown's control bytes come from the top seven bits.
        let tags: HashSet<u64> = (0..4096u32)
            .map(|i| hash(&s, IpAddr::V4(Ipv4Addr::from(0xc612_0000 | i))) >> 57)
            .collect();
        assert_eq!(tags.len(), 128);
    }

    #[test]
    fn byte_strings_of_other_lengths_differ() {
        let s = KeyedState::new();
        let mut seen = HashSet::new();
        for n in 0..20 {
            let mut h = s.build_hasher();
            h.write(&vec![0u8; n]);
            assert!(seen.insert(h.finish()), "length {n} collides");
        }
    }
}
