//! The table: a trie per family, each value's prefixes, and a lookup cache.

use crate::cache::LookupCache;
use crate::prefix::{Prefix, key_of};
use crate::trie::Trie;
use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;

/// Prefixes of both families mapped to values, and each value's prefixes: listing or
/// removing one value's prefixes costs that value's count, not a walk of every
/// prefix (which made `wg show` quadratic in the peers).
#[derive(Debug)]
pub struct PrefixTable<T: Copy> {
    v4: Trie<T>,
    v6: Trie<T>,
    /// Every value's prefixes (host bits cleared), in the order they were added.
    owned: HashMap<T, Vec<Prefix>>,
    /// Recent lookups, forgotten whenever the table changes.
    cache: LookupCache<T>,
}

impl<T: Copy + Eq + Hash> Default for PrefixTable<T> {
    fn default() -> Self {
        PrefixTable {
            v4: Trie::new(32),
            v6: Trie::new(128),
            owned: HashMap::new(),
            cache: LookupCache::new(),
        }
    }
}

impl<T: Copy + Eq + Hash> PrefixTable<T> {
    pub fn new() -> Self {
        Self::default()
    }

    fn trie(&self, addr: IpAddr) -> &Trie<T> {
        if addr.is_ipv4() { &self.v4 } else { &self.v6 }
    }

    fn trie_mut(&mut self, addr: IpAddr) -> &mut Trie<T> {
        if addr.is_ipv4() {
            &mut self.v4
        } else {
            &mut self.v6
        }
    }

    /// Maps `prefix` to `value`, taking it from whichever value held it before.
    pub fn insert(&mut self, prefix: Prefix, value: T) {
        self.cache.invalidate();
        let prefix = prefix.network();
        let old = self
            .trie_mut(prefix.addr)
            .insert(key_of(prefix.addr), prefix.len, value);
        if old == Some(value) {
            return;
        }
        if let Some(old) = old {
            self.disown(old, prefix);
        }
        self.owned.entry(value).or_default().push(prefix);
    }

    /// Removes `prefix` only if it belongs to `value` (wg's `-prefix` removal).
    pub fn remove(&mut self, prefix: Prefix, value: T) -> bool {
        self.cache.invalidate();
        let prefix = prefix.network();
        let removed = self
            .trie_mut(prefix.addr)
            .remove(key_of(prefix.addr), prefix.len, value);
        if removed {
            self.disown(value, prefix);
        }
        removed
    }

    /// Removes every prefix of `value`.
    pub fn remove_value(&mut self, value: T) {
        self.cache.invalidate();
        for prefix in self.owned.remove(&value).unwrap_or_default() {
            self.trie_mut(prefix.addr)
                .remove(key_of(prefix.addr), prefix.len, value);
        }
    }

    fn disown(&mut self, value: T, prefix: Prefix) {
        if let Some(list) = self.owned.get_mut(&value) {
            if let Some(i) = list.iter().position(|p| *p == prefix) {
                list.swap_remove(i);
            }
            if list.is_empty() {
                self.owned.remove(&value);
            }
        }
    }

    /// Longest-prefix match.
    pub fn lookup(&self, addr: IpAddr) -> Option<T> {
        let (key, v4) = (key_of(addr), addr.is_ipv4());
        if let Some(hit) = self.cache.get(key, v4) {
            return hit;
        }
        let value = self.trie(addr).lookup(key);
        self.cache.put(key, v4, value);
        value
    }

    /// Every prefix of `value` (host bits cleared), IPv4 first, each family in
    /// address order.
    pub fn prefixes_of(&self, value: T) -> Vec<Prefix> {
        let mut out = self.owned.get(&value).cloned().unwrap_or_default();
        out.sort_by_key(|p| (p.addr.is_ipv6(), key_of(p.addr), p.len));
        out
    }

    /// How many prefixes `value` holds.
    pub fn count_of(&self, value: T) -> usize {
        self.owned.get(&value).map_or(0, Vec::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prefix::{addr_of, mask};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn p(s: &str) -> Prefix {
        s.parse().unwrap()
    }

    #[test]
    fn longest_prefix_wins() {
        let mut t = PrefixTable::new();
        t.insert(p("0.0.0.0/0"), 1);
        t.insert(p("198.18.0.0/15"), 2);
        t.insert(p("198.18.5.0/24"), 3);
        t.insert(p("198.18.5.7/32"), 4);
        t.insert(p("2001:2::/48"), 5);
        fn l(t: &PrefixTable<i32>, s: &str) -> Option<i32> {
            t.lookup(s.parse().unwrap())
        }
        assert_eq!(l(&t, "1.2.3.4"), Some(1));
        assert_eq!(l(&t, "198.19.0.1"), Some(2));
        assert_eq!(l(&t, "198.18.5.1"), Some(3));
        assert_eq!(l(&t, "198.18.5.7"), Some(4));
        assert_eq!(l(&t, "2001:2::1"), Some(5));
        assert_eq!(l(&t, "2001:3::1"), None);
        assert!(t.remove(p("198.18.5.0/24"), 3));
        assert!(!t.remove(p("198.18.5.0/24"), 3));
        assert!(!t.remove(p("198.18.0.0/15"), 9), "belongs to another value");
        assert_eq!(l(&t, "198.18.5.1"), Some(2));
        t.remove_value(2);
        assert_eq!(l(&t, "198.18.5.1"), Some(1));
        assert_eq!(t.prefixes_of(4), vec![p("198.18.5.7/32")]);
        assert_eq!(p("198.18.5.9/24").to_string(), "198.18.5.9/24");
    }

    #[test]
    fn removing_every_value_leaves_nothing_behind() {
        let mut t = PrefixTable::new();
        for v in 0..500u32 {
            t.insert(p(&format!("198.18.{}.{}/32", v >> 8, v & 0xff)), v);
            t.insert(p(&format!("2001:2::{v:x}/128")), v);
            t.insert(p("198.19.0.0/16"), v); // taken from the value before
        }
        assert_eq!(t.count_of(499), 3);
        assert_eq!(t.count_of(10), 2);
        for v in 0..500u32 {
            t.remove_value(v);
        }
        assert!(t.v4.is_empty() && t.v6.is_empty(), "every node freed");
        assert!(t.owned.is_empty());
    }

    /// The longest of a list's prefixes that covers `a`.
    fn naive_lookup(naive: &[(u128, u8, u32)], a: IpAddr) -> Option<u32> {
        let k = key_of(a);
        naive
            .iter()
            .filter(|&&(pk, l, _)| k & mask(l) == pk)
            .max_by_key(|&&(_, l, _)| l)
            .map(|&(_, _, v)| v)
    }

    /// Against a naive list of prefixes, on random prefixes and lookups.
    #[test]
    fn matches_naive_list() {
        let mut rng = StdRng::seed_from_u64(42);
        for round in 0..40 {
            let v4 = round % 2 == 0;
            let bits: u8 = if v4 { 32 } else { 128 };
            let mut trie = PrefixTable::new();
            let mut naive: Vec<(u128, u8, u32)> = Vec::new();
            // Addresses from a narrow pool so prefixes nest and collide often.
            let base: u128 = rng.r#gen::<u128>() & !0xffff;
            let addr = |rng: &mut StdRng| -> IpAddr {
                let k = base ^ (rng.gen_range(0..0x10000u128) << rng.gen_range(0..8));
                if v4 {
                    IpAddr::V4(Ipv4Addr::from((k & 0xffff_ffff) as u32))
                } else {
                    IpAddr::V6(Ipv6Addr::from(k))
                }
            };
            for i in 0..300u32 {
                let len = rng.gen_range(0..=bits);
                let a = addr(&mut rng);
                let pre = Prefix::new(a, len).unwrap();
                let key = key_of(a) & mask(len);
                if rng.gen_bool(0.2) && !naive.is_empty() {
                    let (k, l, v) = naive.swap_remove(rng.gen_range(0..naive.len()));
                    let pa = addr_of(k, v4);
                    assert!(trie.remove(Prefix::new(pa, l).unwrap(), v));
                    continue;
                }
                let value = i % 17;
                naive.retain(|&(k, l, _)| !(k == key && l == len));
                naive.push((key, len, value));
                // Asked before and after the change: a cached answer must not outlive it.
                let _ = trie.lookup(a);
                trie.insert(pre, value);
                assert_eq!(
                    trie.lookup(a),
                    naive_lookup(&naive, a),
                    "round {round} step {i}: {a} after a change"
                );
            }
            for _ in 0..2000 {
                let a = addr(&mut rng);
                let want = naive_lookup(&naive, a);
                assert_eq!(trie.lookup(a), want, "round {round} lookup {a}");
            }
            for v in 0..17 {
                let mut got: Vec<_> = trie
                    .prefixes_of(v)
                    .into_iter()
                    .map(|p| (key_of(p.addr), p.len))
                    .collect();
                let mut want: Vec<_> = naive
                    .iter()
                    .filter(|e| e.2 == v)
                    .map(|e| (e.0, e.1))
                    .collect();
                got.sort();
                want.sort();
                assert_eq!(got, want);
            }
        }
    }
}
