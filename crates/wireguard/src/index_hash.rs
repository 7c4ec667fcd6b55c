//! Hashing for receiver indices. We pick indices at random, so a multiplicative mix
//! spreads them as well as SipHash does at a fraction of the cost; a sender choosing
//! the indices it sends cannot make our own random keys collide.

use std::hash::{BuildHasherDefault, Hasher};

#[derive(Default, Clone, Copy)]
pub struct IndexHasher(u64);

impl Hasher for IndexHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u32(&mut self, i: u32) {
        // Fibonacci hashing: the high bits the table uses depend on every input bit.
        self.0 = (i as u64 | 1 << 32).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

pub type IndexMap<V> = std::collections::HashMap<u32, V, BuildHasherDefault<IndexHasher>>;
