//! Inbound SAs by SPI and outer destination (RFC 4301 section 4.1), as esp-decrypt
//! looks them up once per packet. A frame's packets mostly belong to one SA, so the
//! last pair found is kept beside the table and compared first: one comparison
//! instead of a hash and a probe. The table changes only between frames, and every
//! change clears that pair.

use crate::esp::InboundSlot;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::net::IpAddr;

/// A multiply-and-fold: the SPI is chosen by the receiver, so it is spread already.
#[derive(Default)]
pub(crate) struct SpiHasher(u64);

impl Hasher for SpiHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(w));
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

#[derive(Default)]
pub(crate) struct SpiIndex {
    map: HashMap<(u32, IpAddr), InboundSlot, BuildHasherDefault<SpiHasher>>,
    /// The pair the last lookup found, and its slot.
    last: Option<(u32, IpAddr, InboundSlot)>,
}

impl SpiIndex {
    /// The slot of the SA for `spi` at `dst`.
    #[inline]
    pub(crate) fn get(&mut self, spi: u32, dst: IpAddr) -> Option<InboundSlot> {
        if let Some((s, d, slot)) = self.last
            && s == spi
            && d == dst
        {
            return Some(slot);
        }
        let slot = *self.map.get(&(spi, dst))?;
        self.last = Some((spi, dst, slot));
        Some(slot)
    }

    pub(crate) fn contains(&self, spi: u32, dst: IpAddr) -> bool {
        self.map.contains_key(&(spi, dst))
    }

    pub(crate) fn insert(&mut self, spi: u32, dst: IpAddr, slot: InboundSlot) {
        self.last = None;
        self.map.insert((spi, dst), slot);
    }

    pub(crate) fn remove(&mut self, spi: u32, dst: IpAddr) -> Option<InboundSlot> {
        self.last = None;
        self.map.remove(&(spi, dst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_removed_pair_is_not_found_again_through_the_last_one() {
        let mut index = SpiIndex::default();
        let (a, b) = ("198.18.0.1".parse().unwrap(), "198.18.0.2".parse().unwrap());
        index.insert(0x100, a, InboundSlot(0));
        index.insert(0x100, b, InboundSlot(1));
        assert_eq!(index.get(0x100, a), Some(InboundSlot(0)));
        assert_eq!(
            index.get(0x100, a),
            Some(InboundSlot(0)),
            "from the last pair"
        );
        assert_eq!(index.get(0x100, b), Some(InboundSlot(1)));
        assert_eq!(index.get(0x101, b), None);
        assert_eq!(index.remove(0x100, b), Some(InboundSlot(1)));
        assert_eq!(index.get(0x100, b), None);
        assert_eq!(index.get(0x100, a), Some(InboundSlot(0)));
        assert!(index.contains(0x100, a) && !index.contains(0x100, b));
    }
}
