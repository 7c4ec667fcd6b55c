//! An ESP tunnel's traffic selectors compiled for the packet path: per family, a
//! flag for "every address" (the common route-based tunnel checks nothing per
//! packet) and the prefixes as network and mask integers, read against the address
//! bytes of the IP header itself, so that no `IpAddr` is built per packet.

use lpm::Prefix;
use std::net::IpAddr;

/// One side's selectors (local or remote), per family.
#[derive(Clone, Debug, Default)]
pub(crate) struct PrefixSet {
    /// Whether a prefix of length 0 holds every IPv4 (`[0]`) or IPv6 (`[1]`) address.
    any: [bool; 2],
    v4: Vec<(u32, u32)>,
    v6: Vec<(u128, u128)>,
}

fn mask4(len: u8) -> u32 {
    u32::MAX
        .checked_shl(32 - u32::from(len.min(32)))
        .unwrap_or(0)
}

fn mask6(len: u8) -> u128 {
    u128::MAX
        .checked_shl(128 - u32::from(len.min(128)))
        .unwrap_or(0)
}

impl PrefixSet {
    pub(crate) fn new(ts: &[Prefix]) -> PrefixSet {
        let mut set = PrefixSet::default();
        for p in ts {
            match p.addr {
                IpAddr::V4(a) => {
                    let m = mask4(p.len);
                    set.any[0] |= m == 0;
                    set.v4.push((a.to_bits() & m, m));
                }
                IpAddr::V6(a) => {
                    let m = mask6(p.len);
                    set.any[1] |= m == 0;
                    set.v6.push((a.to_bits() & m, m));
                }
            }
        }
        set
    }

    fn holds_v4(&self, a: u32) -> bool {
        self.any[0] || self.v4.iter().any(|&(net, m)| a & m == net)
    }

    fn holds_v6(&self, a: u128) -> bool {
        self.any[1] || self.v6.iter().any(|&(net, m)| a & m == net)
    }
}

/// Whether the IP packet `ip` may travel this way: out (`outbound`: its source is
/// ours, its destination theirs) or in (the other way round; RFC 4301 section 5.2
/// step 4). A header too short for its addresses, or of no IP version, is refused.
pub(crate) fn admits(local: &PrefixSet, remote: &PrefixSet, ip: &[u8], outbound: bool) -> bool {
    let (ours, theirs) = if outbound { (12, 16) } else { (16, 12) };
    match ip.first().map(|b| b >> 4) {
        Some(4) if ip.len() >= 20 => {
            if local.any[0] && remote.any[0] {
                return true;
            }
            let word = |at: usize| u32::from_be_bytes(ip[at..at + 4].try_into().expect("4"));
            local.holds_v4(word(ours)) && remote.holds_v4(word(theirs))
        }
        Some(6) if ip.len() >= 40 => {
            if local.any[1] && remote.any[1] {
                return true;
            }
            // IPv6's addresses sit at 8 and 24; the offsets above are IPv4's.
            let (ours, theirs) = if outbound { (8, 24) } else { (24, 8) };
            let word = |at: usize| u128::from_be_bytes(ip[at..at + 16].try_into().expect("16"));
            local.holds_v6(word(ours)) && remote.holds_v6(word(theirs))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ts: &[&str]) -> PrefixSet {
        let ts: Vec<Prefix> = ts.iter().map(|s| s.parse().unwrap()).collect();
        PrefixSet::new(&ts)
    }

    fn v4(src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
        let mut p = vec![0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0];
        p.extend_from_slice(&src);
        p.extend_from_slice(&dst);
        p
    }

    fn v6(src: &str, dst: &str) -> Vec<u8> {
        let mut p = vec![0x60, 0, 0, 0, 0, 0, 17, 64];
        p.extend_from_slice(&src.parse::<std::net::Ipv6Addr>().unwrap().octets());
        p.extend_from_slice(&dst.parse::<std::net::Ipv6Addr>().unwrap().octets());
        p
    }

    /// The compiled check answers as `Prefix::contains` over both sides would.
    fn reference(local: &[&str], remote: &[&str], src: IpAddr, dst: IpAddr, out: bool) -> bool {
        let (ours, theirs) = if out { (src, dst) } else { (dst, src) };
        let has =
            |ts: &[&str], a: IpAddr| ts.iter().any(|s| s.parse::<Prefix>().unwrap().contains(a));
        has(local, ours) && has(remote, theirs)
    }

    #[test]
    fn matches_prefix_containment_both_ways_and_families() {
        let local = ["198.18.1.0/24", "198.18.9.7/32", "2001:2:1::/48"];
        let remote = ["198.19.0.0/16", "2001:2:2::/64", "0.0.0.0/0"];
        let (l, r) = (set(&local), set(&remote));
        let v4s = [
            [198, 18, 1, 5],
            [198, 18, 9, 7],
            [198, 18, 9, 8],
            [198, 19, 3, 3],
            [10, 0, 0, 1],
        ];
        for a in v4s {
            for b in v4s {
                for out in [true, false] {
                    let want = reference(&local, &remote, a.into(), b.into(), out);
                    assert_eq!(admits(&l, &r, &v4(a, b), out), want, "{a:?} {b:?} {out}");
                }
            }
        }
        let v6s = ["2001:2:1::9", "2001:2:2::1", "2001:2:2:1::1", "2001:2:3::1"];
        for a in v6s {
            for b in v6s {
                for out in [true, false] {
                    let want =
                        reference(&local, &remote, a.parse().unwrap(), b.parse().unwrap(), out);
                    assert_eq!(admits(&l, &r, &v6(a, b), out), want, "{a} {b} {out}");
                }
            }
        }
    }

    #[test]
    fn every_address_of_a_family_and_nothing_of_the_other() {
        let (l, r) = (set(&["0.0.0.0/0"]), set(&["0.0.0.0/0"]));
        assert!(admits(&l, &r, &v4([1, 2, 3, 4], [5, 6, 7, 8]), true));
        assert!(!admits(&l, &r, &v6("2001:2::1", "2001:2::2"), true));
    }

    #[test]
    fn short_or_unknown_headers_are_refused() {
        let (l, r) = (set(&["0.0.0.0/0", "::/0"]), set(&["0.0.0.0/0", "::/0"]));
        assert!(!admits(&l, &r, &[], true));
        assert!(!admits(&l, &r, &v4([1, 2, 3, 4], [5, 6, 7, 8])[..19], true));
        assert!(!admits(&l, &r, &v6("2001:2::1", "2001:2::2")[..39], false));
        assert!(!admits(&l, &r, &[0x50; 40], true));
    }
}
