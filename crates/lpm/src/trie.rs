//! A path-compressed binary trie over keys left-aligned in a `u128`: IPv4 addresses
//! in the top 32 bits, IPv6 in all 128. Longest prefix wins.

use crate::prefix::{bit, common_len, mask};

#[derive(Debug)]
pub(crate) struct Node<T> {
    key: u128,
    len: u8,
    value: Option<T>,
    children: [Option<Box<Node<T>>>; 2],
}

#[derive(Debug)]
pub(crate) struct Trie<T> {
    root: Option<Box<Node<T>>>,
    bits: u8,
}

impl<T: Copy + Eq> Trie<T> {
    pub(crate) fn new(bits: u8) -> Self {
        Trie { root: None, bits }
    }

    /// No prefix left (removal prunes every empty node).
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.root.is_none()
    }

    /// Returns the value the prefix held before, if any.
    pub(crate) fn insert(&mut self, key: u128, len: u8, value: T) -> Option<T> {
        let key = key & mask(len);
        insert_at(&mut self.root, key, len, value)
    }

    pub(crate) fn lookup(&self, addr: u128) -> Option<T> {
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

    pub(crate) fn remove(&mut self, key: u128, len: u8, value: T) -> bool {
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
