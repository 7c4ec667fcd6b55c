//! Allowed-IPs: a path-compressed binary trie per address family, longest prefix
//! wins (whitepaper section 3, "cryptokey routing"). It picks the peer for an outbound
//! packet by destination and checks an inbound packet's source against its peer.
//!
//! Both families share one trie type with keys left-aligned in a `u128`.

use crate::lookup_cache::LookupCache;
use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;

#[derive(Debug)]
struct Node<T> {
    key: u128,
    len: u8,
    value: Option<T>,
    children: [Option<Box<Node<T>>>; 2],
}

fn bit(key: u128, i: u8) -> usize {
    ((key >> (127 - i as u32)) & 1) as usize
}

fn mask(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - len as u32)
    }
}

fn common_len(a: u128, b: u128, max: u8) -> u8 {
    ((a ^ b).leading_zeros() as u8).min(max)
}

#[derive(Debug)]
struct Trie<T> {
    root: Option<Box<Node<T>>>,
    bits: u8,
}

impl<T: Copy + Eq> Trie<T> {
    fn new(bits: u8) -> Self {
        Trie { root: None, bits }
    }

    /// Returns the value the prefix held before, if any.
    fn insert(&mut self, key: u128, len: u8, value: T) -> Option<T> {
        let key = key & mask(len);
        insert_at(&mut self.root, key, len, value)
    }

    fn lookup(&self, addr: u128) -> Option<T> {
        let mut node = self.root.as_deref();
        let mut best = None;
        while let Some(n) = node {
            if common_len(n.key, addr, n.len) < n.len {
                break;
            }
            if n.value.is_some() {
                best = n.value;
            }
            if n.len >= self.bits {
                break;
            }
            node = n.children[bit(addr, n.len)].as_deref();
        }
        best
    }

    fn remove(&mut self, key: u128, len: u8, value: T) -> bool {
        remove_at(&mut self.root, key & mask(len), len, value)
    }
}

fn insert_at<T>(slot: &mut Option<Box<Node<T>>>, key: u128, len: u8, value: T) -> Option<T> {
    let Some(n) = slot else {
        *slot = Some(Box::new(Node {
            key,
            len,
            value: Some(value),
            children: [None, None],
        }));
        return None;
    };
    let common = common_len(n.key, key, n.len.min(len));
    if common == n.len && n.len == len {
        return n.value.replace(value);
    }
    if common == n.len {
        let b = bit(key, n.len);
        return insert_at(&mut n.children[b], key, len, value);
    }
    // The new prefix branches off above `n`: put a node at the common prefix.
    let old = slot.take().expect("checked above");
    let mut parent = Box::new(Node {
        key: key & mask(common),
        len: common,
        value: None,
        children: [None, None],
    });
    let old_bit = bit(old.key, common);
    parent.children[old_bit] = Some(old);
    if common == len {
        parent.value = Some(value);
    } else {
        parent.children[1 - old_bit] = Some(Box::new(Node {
            key,
            len,
            value: Some(value),
            children: [None, None],
        }));
    }
    *slot = Some(parent);
    None
}

/// Removes a node that holds no value and has fewer than two children.
fn prune<T>(slot: &mut Option<Box<Node<T>>>) {
    let Some(n) = slot else { return };
    if n.value.is_some() {
        return;
    }
    match (n.children[0].is_some(), n.children[1].is_some()) {
        (true, true) => {}
        (false, false) => *slot = None,
        _ => {
            let mut n = slot.take().expect("checked above");
            let child = n.children[0].take().or_else(|| n.children[1].take());
            *slot = child;
        }
    }
}

fn remove_at<T: Copy + Eq>(slot: &mut Option<Box<Node<T>>>, key: u128, len: u8, value: T) -> bool {
    let Some(n) = slot else { return false };
    if n.len > len || common_len(n.key, key, n.len) < n.len {
        return false;
    }
    let removed = if n.len == len {
        if n.value == Some(value) {
            n.value = None;
            true
        } else {
            false
        }
    } else {
        let b = bit(key, n.len);
        remove_at(&mut n.children[b], key, len, value)
    };
    if removed {
        prune(slot);
    }
    removed
}

/// An IP prefix: address and length, host bits ignored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Prefix {
    pub addr: IpAddr,
    pub len: u8,
}

impl Prefix {
    /// `None` when `len` exceeds the family's width.
    pub fn new(addr: IpAddr, len: u8) -> Option<Prefix> {
        let max = if addr.is_ipv4() { 32 } else { 128 };
        (len <= max).then_some(Prefix { addr, len })
    }

    /// The same prefix with its host bits cleared.
    pub fn network(self) -> Prefix {
        Prefix {
            addr: addr_of(key_of(self.addr) & mask(self.len), self.addr.is_ipv4()),
            len: self.len,
        }
    }
}

impl std::fmt::Display for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl std::str::FromStr for Prefix {
    type Err = String;
    fn from_str(s: &str) -> Result<Prefix, String> {
        let (a, l) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?}: missing /length"))?;
        let addr: IpAddr = a.parse().map_err(|_| format!("{a:?}: not an IP address"))?;
        let len: u8 = l
            .parse()
            .map_err(|_| format!("{l:?}: not a prefix length"))?;
        Prefix::new(addr, len).ok_or_else(|| format!("{s}: prefix length too long"))
    }
}

fn key_of(addr: IpAddr) -> u128 {
    match addr {
        IpAddr::V4(a) => (u32::from(a) as u128) << 96,
        IpAddr::V6(a) => u128::from(a),
    }
}

fn addr_of(key: u128, v4: bool) -> IpAddr {
    if v4 {
        IpAddr::V4(((key >> 96) as u32).into())
    } else {
        IpAddr::V6(key.into())
    }
}

/// Prefixes of both families mapped to values (peer ids), and each value's prefixes:
/// listing or removing one peer's prefixes costs that peer's count, not a walk of
/// every prefix of every peer (which made `wg show` quadratic in the peers).
#[derive(Debug)]
pub struct AllowedIps<T: Copy> {
    v4: Trie<T>,
    v6: Trie<T>,
    /// Every value's prefixes (host bits cleared), in the order they were added.
    owned: HashMap<T, Vec<Prefix>>,
    /// Recent lookups, forgotten whenever the table changes.
    cache: LookupCache<T>,
}

impl<T: Copy + Eq + Hash> Default for AllowedIps<T> {
    fn default() -> Self {
        AllowedIps {
            v4: Trie::new(32),
            v6: Trie::new(128),
            owned: HashMap::new(),
            cache: LookupCache::new(),
        }
    }
}

impl<T: Copy + Eq + Hash> AllowedIps<T> {
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
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn p(s: &str) -> Prefix {
        s.parse().unwrap()
    }

    #[test]
    fn longest_prefix_wins() {
        let mut t = AllowedIps::new();
        t.insert(p("0.0.0.0/0"), 1);
        t.insert(p("198.18.0.0/15"), 2);
        t.insert(p("198.18.5.0/24"), 3);
        t.insert(p("198.18.5.7/32"), 4);
        t.insert(p("2001:2::/48"), 5);
        fn l(t: &AllowedIps<i32>, s: &str) -> Option<i32> {
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
        let mut t = AllowedIps::new();
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
        assert!(
            t.v4.root.is_none() && t.v6.root.is_none(),
            "every node freed"
        );
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
            let mut trie = AllowedIps::new();
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
