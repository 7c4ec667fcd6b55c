//! A small direct-mapped cache in front of the tries. A lookup in a trie
//! of a million prefixes walks some twenty nodes; traffic goes to few destinations
//! at a time, so the last answer for an address is kept and reused until the table
//! changes. A miss costs one compare more than no cache; a flood of distinct
//! addresses only evicts entries, it cannot make a lookup slower than the walk.

use std::cell::Cell;

/// Entries, a power of two: 32 KiB of 32-byte entries, few enough collisions for
/// some dozens of flows at a time.
const SLOTS: usize = 1024;

#[derive(Clone, Copy)]
struct Entry<T> {
    key: u128,
    /// The generation it was made in, shifted left one, and 1 for IPv4. Generation
    /// 0 is never current, so an unused entry never matches.
    tag: u32,
    value: Option<T>,
}

pub(crate) struct LookupCache<T: Copy> {
    entries: Box<[Cell<Entry<T>>]>,
    /// Entries of an older generation are stale: the table changed since. At most
    /// 2^31 - 1, so that it fits the tag.
    generation: u32,
}

impl<T: Copy> LookupCache<T> {
    pub(crate) fn new() -> Self {
        LookupCache {
            entries: (0..SLOTS).map(|_| Cell::new(Self::UNUSED)).collect(),
            generation: 1,
        }
    }

    const UNUSED: Entry<T> = Entry {
        key: 0,
        tag: 0,
        value: None,
    };

    fn tag(&self, v4: bool) -> u32 {
        self.generation << 1 | v4 as u32
    }

    fn slot(key: u128) -> usize {
        let folded = (key as u64) ^ ((key >> 64) as u64);
        (folded.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 54) as usize % SLOTS
    }

    /// The cached answer for `key` (`Some(None)`: cached as "no prefix").
    pub(crate) fn get(&self, key: u128, v4: bool) -> Option<Option<T>> {
        let e = self.entries[Self::slot(key)].get();
        (e.tag == self.tag(v4) && e.key == key).then_some(e.value)
    }

    pub(crate) fn put(&self, key: u128, v4: bool, value: Option<T>) {
        self.entries[Self::slot(key)].set(Entry {
            key,
            tag: self.tag(v4),
            value,
        });
    }

    /// Forgets every answer: the table changed.
    pub(crate) fn invalidate(&mut self) {
        self.generation += 1;
        if self.generation >= 1 << 31 {
            // After 2^31 changes an old entry's generation could match again.
            for e in self.entries.iter() {
                e.set(Self::UNUSED);
            }
            self.generation = 1;
        }
    }
}

impl<T: Copy> std::fmt::Debug for LookupCache<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LookupCache")
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_until_invalidated() {
        let mut c = LookupCache::<u32>::new();
        assert_eq!(c.get(7, true), None);
        c.put(7, true, Some(3));
        c.put(9, false, None);
        assert_eq!(c.get(7, true), Some(Some(3)));
        assert_eq!(c.get(7, false), None, "the other family is another key");
        assert_eq!(c.get(9, false), Some(None));
        c.invalidate();
        assert_eq!(c.get(7, true), None);
        c.generation = (1 << 31) - 1;
        c.put(7, true, Some(4));
        c.invalidate();
        assert_eq!(
            c.get(7, true),
            None,
            "no stale answer after the generation wraps"
        );
    }
}
