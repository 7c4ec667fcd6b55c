//! An IP prefix of either family, and the `u128` keys the tries use (IPv4 in the top
//! 32 bits).

use std::net::IpAddr;

pub(crate) fn bit(key: u128, i: u8) -> usize {
    ((key >> (127 - i as u32)) & 1) as usize
}

pub(crate) fn mask(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - len as u32)
    }
}

pub(crate) fn common_len(a: u128, b: u128, max: u8) -> u8 {
    ((a ^ b).leading_zeros() as u8).min(max)
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

    /// Whether `addr` (of the same family) lies in this prefix.
    pub fn contains(self, addr: IpAddr) -> bool {
        addr.is_ipv4() == self.addr.is_ipv4()
            && (key_of(addr) ^ key_of(self.addr)) & mask(self.len) == 0
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

pub(crate) fn key_of(addr: IpAddr) -> u128 {
    match addr {
        IpAddr::V4(a) => (u32::from(a) as u128) << 96,
        IpAddr::V6(a) => u128::from(a),
    }
}

pub(crate) fn addr_of(key: u128, v4: bool) -> IpAddr {
    if v4 {
        IpAddr::V4(((key >> 96) as u32).into())
    } else {
        IpAddr::V6(key.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contains_checks_family_and_network_bits() {
        let p: Prefix = "198.18.1.0/24".parse().unwrap();
        assert!(p.contains("198.18.1.200".parse().unwrap()));
        assert!(!p.contains("198.18.2.1".parse().unwrap()));
        assert!(!p.contains("::ffff:198.18.1.1".parse().unwrap()));
        let all: Prefix = "::/0".parse().unwrap();
        assert!(all.contains("2001:2::1".parse().unwrap()));
        assert!(!all.contains("198.18.1.1".parse().unwrap()));
    }
}
