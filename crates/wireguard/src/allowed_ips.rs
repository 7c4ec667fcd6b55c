//! Allowed-IPs (whitepaper section 3, "cryptokey routing"): each peer's prefixes, the
//! longest prefix wins. It picks the peer for an outbound packet by destination and
//! checks an inbound packet's source against its peer. The table itself is the
//! general longest-prefix-match table a gateway's FIB is made of too.

pub use lpm::Prefix;

/// Prefixes of both families mapped to peers (or any value).
pub type AllowedIps<T> = lpm::PrefixTable<T>;
