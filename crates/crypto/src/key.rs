//! Keys registered once and named by handle on the hot path.
//!
//! The registry holds the raw key bytes (zeroed when removed or dropped). Engines keep
//! their own expanded form per handle and notice removals through [`KeyRegistry::epoch`],
//! so the data path reads no lock: it compares a handle's generation with the cached one.

use crate::Algorithm;
use crate::aead::MAX_KEY_LEN;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use zeroize::{Zeroize, ZeroizeOnDrop};

/// Names a registered key: a slot and the generation the slot had when the key was
/// stored, so a handle to a removed key never reaches its slot's next key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KeyHandle {
    pub index: u32,
    pub generation: u32,
}

impl KeyHandle {
    /// A handle no registry ever hands out.
    pub const INVALID: KeyHandle = KeyHandle {
        index: u32::MAX,
        generation: 0,
    };
}

/// Raw key bytes and their algorithm; zeroed on drop. A chained algorithm's key is
/// its cipher key followed by its MAC key ([`KeyMaterial::cipher_key`],
/// [`KeyMaterial::auth_key`]).
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct KeyMaterial {
    #[zeroize(skip)]
    pub alg: Algorithm,
    bytes: [u8; MAX_KEY_LEN],
}

impl KeyMaterial {
    pub fn new(alg: Algorithm, key: &[u8]) -> Result<KeyMaterial, KeyError> {
        if key.len() != alg.key_len() {
            return Err(KeyError::WrongLength {
                alg,
                got: key.len(),
            });
        }
        let mut bytes = [0u8; MAX_KEY_LEN];
        bytes[..key.len()].copy_from_slice(key);
        Ok(KeyMaterial { alg, bytes })
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes[..self.alg.key_len()]
    }

    /// The cipher's key: all of an AEAD's key, the first part of a chained one's.
    pub fn cipher_key(&self) -> &[u8] {
        &self.bytes[..self.alg.cipher_key_len()]
    }

    /// The MAC's key, after the cipher's; empty for an AEAD.
    pub fn auth_key(&self) -> &[u8] {
        &self.bytes[self.alg.cipher_key_len()..self.alg.key_len()]
    }
}

impl core::fmt::Debug for KeyMaterial {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "KeyMaterial({}, <redacted>)", self.alg)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyError {
    WrongLength { alg: Algorithm, got: usize },
    Full,
}

impl core::fmt::Display for KeyError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            KeyError::WrongLength { alg, got } => {
                write!(f, "{alg} takes a {}-byte key, got {got}", alg.key_len())
            }
            KeyError::Full => f.write_str("key registry is full"),
        }
    }
}

impl std::error::Error for KeyError {}

struct KeySlot {
    generation: u32,
    key: Option<KeyMaterial>,
}

#[derive(Default)]
struct KeySlots {
    slots: Vec<KeySlot>,
    free: Vec<u32>,
    live: usize,
}

/// All keys of one process, shared by the control plane (which adds and removes
/// them) and every worker's engines (which read them once and cache them expanded).
pub struct KeyRegistry {
    slots: Mutex<KeySlots>,
    capacity: usize,
    epoch: AtomicU64,
    /// Tells registries apart: handles of two registries look alike.
    id: u64,
}

/// Source of registry ids; 0 is never handed out (it means "no registry yet").
static NEXT_REGISTRY_ID: AtomicU64 = AtomicU64::new(1);

impl KeyRegistry {
    /// `capacity` bounds the number of live keys; WireGuard holds up to six per peer
    /// (send and receive for next, current and previous keypairs).
    pub fn new(capacity: usize) -> KeyRegistry {
        KeyRegistry {
            slots: Mutex::new(KeySlots::default()),
            capacity,
            epoch: AtomicU64::new(0),
            id: NEXT_REGISTRY_ID.fetch_add(1, Ordering::Relaxed),
        }
    }

    pub fn insert(&self, alg: Algorithm, key: &[u8]) -> Result<KeyHandle, KeyError> {
        let material = KeyMaterial::new(alg, key)?;
        let mut s = self.lock();
        if s.live >= self.capacity {
            return Err(KeyError::Full);
        }
        s.live += 1;
        if let Some(index) = s.free.pop() {
            let slot = &mut s.slots[index as usize];
            slot.key = Some(material);
            return Ok(KeyHandle {
                index,
                generation: slot.generation,
            });
        }
        let index = s.slots.len() as u32;
        s.slots.push(KeySlot {
            generation: 1,
            key: Some(material),
        });
        Ok(KeyHandle {
            index,
            generation: 1,
        })
    }

    /// Removes and zeroes the key. Unknown or stale handles are ignored.
    pub fn remove(&self, h: KeyHandle) {
        let mut s = self.lock();
        let Some(slot) = s.slots.get_mut(h.index as usize) else {
            return;
        };
        if slot.generation != h.generation || slot.key.is_none() {
            return;
        }
        slot.key = None; // KeyMaterial zeroes itself on drop
        slot.generation = slot.generation.wrapping_add(1).max(1);
        s.free.push(h.index);
        s.live -= 1;
        drop(s);
        self.epoch.fetch_add(1, Ordering::Release);
    }

    /// A copy of the key, for an engine to expand; `None` when the handle is stale.
    pub fn get(&self, h: KeyHandle) -> Option<KeyMaterial> {
        let s = self.lock();
        let slot = s.slots.get(h.index as usize)?;
        if slot.generation != h.generation {
            return None;
        }
        slot.key.clone()
    }

    pub fn is_live(&self, h: KeyHandle) -> bool {
        let s = self.lock();
        s.slots
            .get(h.index as usize)
            .is_some_and(|slot| slot.generation == h.generation && slot.key.is_some())
    }

    pub fn live_keys(&self) -> usize {
        self.lock().live
    }

    /// Unique per registry in this process.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Goes up on every removal: an engine whose cached epoch differs sweeps its cache.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, KeySlots> {
        // A panic while holding this lock cannot leave the slots inconsistent (each
        // method finishes its update before anything can panic), so poisoning is moot.
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// An engine's cache of expanded keys, indexed like the registry's slots.
pub struct KeyCache<E> {
    entries: Vec<Option<(u32, Algorithm, E)>>,
    /// Entries replaced by a newer key of the same slot since the last `sync` (or
    /// [`KeyCache::drop_retired`]): kept, not dropped, so that an engine may hold on
    /// to what an earlier lookup of the same call returned (see
    /// [`KeyCache::get_or_expand`]).
    retired: Vec<E>,
    epoch: u64,
    /// The registry the entries came from: an engine may be handed another one (a
    /// calibration's, then the data path's), whose handles reuse the same numbers.
    registry: u64,
}

impl<E> Default for KeyCache<E> {
    fn default() -> Self {
        KeyCache {
            entries: Vec::new(),
            retired: Vec::new(),
            epoch: 0,
            registry: 0,
        }
    }
}

impl<E> KeyCache<E> {
    /// Drops cached keys that the registry no longer holds, and the entries newer
    /// keys replaced during the last call (see [`KeyCache::get_or_expand`]). Cheap
    /// when nothing was removed since the last call: one atomic load.
    pub fn sync(&mut self, reg: &KeyRegistry) {
        self.drop_retired();
        if reg.id() != self.registry {
            self.entries.clear();
            self.registry = reg.id();
            self.epoch = reg.epoch();
            return;
        }
        let epoch = reg.epoch();
        if epoch == self.epoch {
            return;
        }
        self.epoch = epoch;
        for (index, entry) in self.entries.iter_mut().enumerate() {
            if let Some((generation, _, _)) = entry {
                let h = KeyHandle {
                    index: index as u32,
                    generation: *generation,
                };
                if !reg.is_live(h) {
                    *entry = None;
                }
            }
        }
    }

    /// The whole `process` of an engine that runs one op at a time: sync with the
    /// registry, then for every pending op check its ranges, find its expanded key
    /// and hand both to `run`, which returns the op's status.
    pub fn process_each(
        &mut self,
        keys: &KeyRegistry,
        mem: &mut [u8],
        ops: &mut [crate::AeadOp],
        expand: impl Fn(&KeyMaterial) -> Option<E>,
        mut run: impl FnMut(&E, &mut [u8], &crate::AeadOp) -> crate::OpStatus,
    ) {
        use crate::OpStatus;
        self.sync(keys);
        for op in ops.iter_mut().filter(|o| o.status == OpStatus::Pending) {
            op.status = match op.validate(mem.len()) {
                Err(status) => status,
                Ok(()) => match self.get_or_expand(keys, op.key, op.alg, &expand) {
                    Some(key) => run(key, mem, op),
                    None => OpStatus::BadKey,
                },
            };
        }
        self.drop_retired();
    }

    /// Drops the entries that newer keys replaced (see [`KeyCache::get_or_expand`]).
    pub fn drop_retired(&mut self) {
        self.retired.clear();
    }

    /// The expanded key for `h`, expanding it with `expand` on first use.
    /// `None` when the handle is stale or names a key of another algorithm.
    ///
    /// An entry that a newer key of the same slot replaces is kept until the next
    /// `sync` or `drop_retired`, and growing the cache moves entries but not what
    /// they own on the heap: so where `E` keeps the expanded key behind a pointer
    /// (one that moving does not reassert, such as a raw pointer it frees on drop),
    /// the key a lookup found stays where it is, unchanged, until then.
    #[inline]
    pub fn get_or_expand(
        &mut self,
        reg: &KeyRegistry,
        h: KeyHandle,
        alg: Algorithm,
        expand: impl FnOnce(&KeyMaterial) -> Option<E>,
    ) -> Option<&E> {
        let i = h.index as usize;
        let hit =
            matches!(self.entries.get(i), Some(Some((g, a, _))) if *g == h.generation && *a == alg);
        if !hit {
            let material = reg.get(h)?;
            if material.alg != alg {
                return None;
            }
            let expanded = expand(&material)?;
            if self.entries.len() <= i {
                self.entries.resize_with(i + 1, || None);
            }
            if let Some((_, _, old)) = self.entries[i].replace((h.generation, alg, expanded)) {
                self.retired.push(old);
            }
        }
        self.entries[i].as_ref().map(|(_, _, e)| e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_handles_never_reach_a_new_key() {
        let reg = KeyRegistry::new(4);
        let a = reg.insert(Algorithm::ChaCha20Poly1305, &[1; 32]).unwrap();
        reg.remove(a);
        let b = reg.insert(Algorithm::ChaCha20Poly1305, &[2; 32]).unwrap();
        assert_eq!(a.index, b.index);
        assert!(reg.get(a).is_none());
        assert_eq!(reg.get(b).unwrap().bytes(), &[2; 32]);
    }

    /// A cached key that a newer key of its slot replaces is dropped only when the
    /// engine says its call is done (or at the next call's sync): a lookup earlier
    /// in the same call may still be in use.
    #[test]
    fn a_replaced_cache_entry_lives_until_the_call_is_done() {
        use std::cell::Cell;
        use std::rc::Rc;
        struct Tracked(Rc<Cell<u32>>);
        impl Drop for Tracked {
            fn drop(&mut self) {
                self.0.set(self.0.get() + 1);
            }
        }
        let alg = Algorithm::ChaCha20Poly1305;
        let reg = KeyRegistry::new(4);
        let drops = Rc::new(Cell::new(0));
        let expand = |_: &KeyMaterial| Some(Tracked(drops.clone()));
        let mut cache = KeyCache::default();
        let replace_in_one_call = |cache: &mut KeyCache<Tracked>, key: u8| {
            let a = reg.insert(alg, &[key; 32]).unwrap();
            cache.sync(&reg);
            cache.get_or_expand(&reg, a, alg, expand).unwrap();
            reg.remove(a);
            let b = reg.insert(alg, &[key + 1; 32]).unwrap();
            assert_eq!(a.index, b.index);
            cache.get_or_expand(&reg, b, alg, expand).unwrap();
            reg.remove(b);
        };
        replace_in_one_call(&mut cache, 1);
        assert_eq!(drops.get(), 0, "dropped while the call may still use it");
        cache.drop_retired();
        assert_eq!(drops.get(), 1);
        replace_in_one_call(&mut cache, 3);
        // The first round's second key goes at this sync (its key was removed).
        assert_eq!(drops.get(), 2);
        cache.sync(&reg);
        assert_eq!(drops.get(), 4, "the retired entry and the removed key's");
    }

    #[test]
    fn capacity_and_lengths_are_enforced() {
        let reg = KeyRegistry::new(1);
        assert!(matches!(
            reg.insert(Algorithm::Aes128Gcm, &[0; 32]),
            Err(KeyError::WrongLength { .. })
        ));
        reg.insert(Algorithm::Aes128Gcm, &[0; 16]).unwrap();
        assert_eq!(
            reg.insert(Algorithm::Aes128Gcm, &[0; 16]),
            Err(KeyError::Full)
        );
    }

    #[test]
    fn chained_keys_are_cipher_then_mac_key() {
        let mut key = [0u8; 64];
        key.iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
        for alg in Algorithm::ALL {
            let m = KeyMaterial::new(alg, &key[..alg.key_len()]).unwrap();
            assert_eq!(m.bytes(), &key[..alg.key_len()], "{alg}");
            assert_eq!(m.cipher_key(), &key[..alg.cipher_key_len()], "{alg}");
            assert_eq!(
                m.auth_key(),
                &key[alg.cipher_key_len()..alg.key_len()],
                "{alg}"
            );
            assert!(
                KeyMaterial::new(alg, &key[..alg.key_len() - 1]).is_err(),
                "{alg}"
            );
        }
        let m = KeyMaterial::new(Algorithm::Aes256CbcHmacSha256, &key).unwrap();
        assert_eq!((m.cipher_key().len(), m.auth_key().len()), (32, 32));
    }

    /// Handle numbers repeat across registries; a cache never serves one registry's
    /// key for another's handle.
    #[test]
    fn cache_tells_registries_apart() {
        let first = KeyRegistry::new(4);
        let h1 = first.insert(Algorithm::ChaCha20Poly1305, &[1; 32]).unwrap();
        let mut cache: KeyCache<u8> = KeyCache::default();
        cache.sync(&first);
        assert_eq!(
            cache.get_or_expand(&first, h1, Algorithm::ChaCha20Poly1305, |m| Some(
                m.bytes()[0]
            )),
            Some(&1)
        );
        let second = KeyRegistry::new(4);
        let h2 = second
            .insert(Algorithm::ChaCha20Poly1305, &[2; 32])
            .unwrap();
        assert_eq!(h1, h2, "the same handle in both registries");
        cache.sync(&second);
        assert_eq!(
            cache.get_or_expand(&second, h2, Algorithm::ChaCha20Poly1305, |m| Some(
                m.bytes()[0]
            )),
            Some(&2)
        );
    }

    #[test]
    fn cache_drops_removed_keys() {
        let reg = KeyRegistry::new(8);
        let h = reg.insert(Algorithm::ChaCha20Poly1305, &[7; 32]).unwrap();
        let mut cache: KeyCache<u8> = KeyCache::default();
        let got = cache.get_or_expand(&reg, h, Algorithm::ChaCha20Poly1305, |m| Some(m.bytes()[0]));
        assert_eq!(got, Some(&7));
        assert!(
            cache
                .get_or_expand(&reg, h, Algorithm::Aes256Gcm, |_| Some(0))
                .is_none()
        );
        reg.remove(h);
        cache.sync(&reg);
        assert!(
            cache
                .get_or_expand(&reg, h, Algorithm::ChaCha20Poly1305, |_| Some(9))
                .is_none()
        );
    }
}
