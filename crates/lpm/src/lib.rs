//! Longest-prefix-match tables over IPv4 and IPv6 prefixes: what WireGuard's
//! allowed IPs (cryptokey routing) and a gateway's FIB are both made of. A
//! path-compressed binary trie per family, each value's own prefixes for listing and
//! removal by value, and a small cache of recent lookups forgotten on every change.
#![forbid(unsafe_code)]

mod cache;
mod prefix;
mod table;
mod trie;

pub use prefix::Prefix;
pub use table::PrefixTable;
