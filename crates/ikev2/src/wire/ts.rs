//! Traffic selectors (RFC 7296 section 3.13): address ranges with an IP protocol
//! and a port range, IPv4 or IPv6.

use super::{Error, be16};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const TS_IPV4_ADDR_RANGE: u8 = 7;
const TS_IPV6_ADDR_RANGE: u8 = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TrafficSelector {
    /// 0 for any protocol.
    pub ip_protocol: u8,
    pub start_port: u16,
    pub end_port: u16,
    /// Same family as `end`.
    pub start: IpAddr,
    pub end: IpAddr,
}

impl TrafficSelector {
    /// Every address of one family, any protocol and port.
    pub fn any(v6: bool) -> TrafficSelector {
        let (start, end) = if v6 {
            (
                IpAddr::V6(Ipv6Addr::UNSPECIFIED),
                IpAddr::V6(Ipv6Addr::from(u128::MAX)),
            )
        } else {
            (
                IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                IpAddr::V4(Ipv4Addr::BROADCAST),
            )
        };
        TrafficSelector::any_port(start, end)
    }

    /// The addresses from `start` to `end`, any protocol and port.
    pub fn any_port(start: IpAddr, end: IpAddr) -> TrafficSelector {
        TrafficSelector {
            ip_protocol: 0,
            start_port: 0,
            end_port: u16::MAX,
            start,
            end,
        }
    }

    /// The addresses of a prefix, any protocol and port.
    pub fn prefix(addr: IpAddr, len: u8) -> TrafficSelector {
        let (start, end) = match addr {
            IpAddr::V4(a) => {
                let bits = u32::from(a);
                let host = if len >= 32 { 0 } else { u32::MAX >> len };
                (
                    IpAddr::V4((bits & !host).into()),
                    IpAddr::V4((bits | host).into()),
                )
            }
            IpAddr::V6(a) => {
                let bits = u128::from(a);
                let host = if len >= 128 { 0 } else { u128::MAX >> len };
                (
                    IpAddr::V6((bits & !host).into()),
                    IpAddr::V6((bits | host).into()),
                )
            }
        };
        TrafficSelector::any_port(start, end)
    }

    pub fn is_v6(&self) -> bool {
        self.start.is_ipv6()
    }

    /// The part of `self` that `other` also covers, if any (for narrowing, RFC 7296
    /// section 2.9): the overlap of the address ranges, the port ranges, and the
    /// protocols (0 is any).
    pub fn intersect(&self, other: &TrafficSelector) -> Option<TrafficSelector> {
        if self.is_v6() != other.is_v6() {
            return None;
        }
        let ip_protocol = match (self.ip_protocol, other.ip_protocol) {
            (0, p) | (p, 0) => p,
            (a, b) if a == b => a,
            _ => return None,
        };
        let start_port = self.start_port.max(other.start_port);
        let end_port = self.end_port.min(other.end_port);
        let start = self.start.max(other.start);
        let end = self.end.min(other.end);
        (start_port <= end_port && start <= end).then_some(TrafficSelector {
            ip_protocol,
            start_port,
            end_port,
            start,
            end,
        })
    }

    /// Whether `other` lies wholly inside `self`.
    pub fn covers(&self, other: &TrafficSelector) -> bool {
        self.intersect(other).as_ref() == Some(other)
    }

    /// The prefix this range is exactly, if it is one (the ESP data path selects by
    /// prefix).
    pub fn as_prefix(&self) -> Option<(IpAddr, u8)> {
        let (lo, hi, width) = match (self.start, self.end) {
            (IpAddr::V4(s), IpAddr::V4(e)) => {
                (u128::from(u32::from(s)), u128::from(u32::from(e)), 32)
            }
            (IpAddr::V6(s), IpAddr::V6(e)) => (u128::from(s), u128::from(e), 128),
            _ => return None,
        };
        let span = hi.checked_sub(lo)?;
        // A prefix spans 2^k - 1 above an aligned start.
        if span.checked_add(1).is_some_and(|n| !n.is_power_of_two()) || lo & span != 0 {
            return None;
        }
        let host_bits = 128 - span.leading_zeros();
        Some((self.start, (width - host_bits) as u8))
    }
}

/// Parses a TS payload's body.
pub fn parse(body: &[u8]) -> Result<Vec<TrafficSelector>, Error> {
    if body.len() < 4 {
        return Err(Error::Truncated);
    }
    let count = body[0];
    let mut rest = &body[4..];
    let mut out = Vec::with_capacity(usize::from(count));
    for _ in 0..count {
        if rest.len() < 8 {
            return Err(Error::Truncated);
        }
        let len = usize::from(be16(rest, 2));
        let addr_len = match rest[0] {
            TS_IPV4_ADDR_RANGE => 4,
            TS_IPV6_ADDR_RANGE => 16,
            _ => return Err(Error::Malformed("traffic selector type")),
        };
        if len != 8 + 2 * addr_len || len > rest.len() {
            return Err(Error::BadLength);
        }
        let addr = |b: &[u8]| -> IpAddr {
            match addr_len {
                4 => IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(b).expect("4 bytes"))),
                _ => IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(b).expect("16 bytes"))),
            }
        };
        let ts = TrafficSelector {
            ip_protocol: rest[1],
            start_port: be16(rest, 4),
            end_port: be16(rest, 6),
            start: addr(&rest[8..8 + addr_len]),
            end: addr(&rest[8 + addr_len..len]),
        };
        out.push(ts);
        rest = &rest[len..];
    }
    if !rest.is_empty() {
        return Err(Error::BadLength);
    }
    Ok(out)
}

/// Appends a TS payload's body.
pub fn emit(selectors: &[TrafficSelector], out: &mut Vec<u8>) {
    out.extend_from_slice(&[selectors.len() as u8, 0, 0, 0]);
    for ts in selectors {
        let (kind, len) = if ts.is_v6() {
            (TS_IPV6_ADDR_RANGE, 40u16)
        } else {
            (TS_IPV4_ADDR_RANGE, 16u16)
        };
        out.extend_from_slice(&[kind, ts.ip_protocol]);
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&ts.start_port.to_be_bytes());
        out.extend_from_slice(&ts.end_port.to_be_bytes());
        for a in [ts.start, ts.end] {
            match a {
                IpAddr::V4(a) => out.extend_from_slice(&a.octets()),
                IpAddr::V6(a) => out.extend_from_slice(&a.octets()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_both_families() {
        let v = vec![
            TrafficSelector::prefix("198.18.10.0".parse().unwrap(), 24),
            TrafficSelector::prefix("2001:2:10::".parse().unwrap(), 64),
        ];
        let mut b = Vec::new();
        emit(&v, &mut b);
        assert_eq!(parse(&b).unwrap(), v);
        for cut in 0..b.len() {
            assert!(parse(&b[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn prefixes_and_narrowing() {
        let net = TrafficSelector::prefix("198.18.10.7".parse().unwrap(), 24);
        assert_eq!(net.start, "198.18.10.0".parse::<IpAddr>().unwrap());
        assert_eq!(net.end, "198.18.10.255".parse::<IpAddr>().unwrap());
        assert_eq!(net.as_prefix(), Some(("198.18.10.0".parse().unwrap(), 24)));
        let any = TrafficSelector::any(false);
        assert_eq!(any.as_prefix(), Some(("0.0.0.0".parse().unwrap(), 0)));
        assert_eq!(any.intersect(&net), Some(net));
        assert!(any.covers(&net) && !net.covers(&any));
        assert_eq!(net.intersect(&TrafficSelector::any(true)), None);
        let mut odd = net;
        odd.end = "198.18.10.254".parse().unwrap();
        assert_eq!(odd.as_prefix(), None);
        let host = TrafficSelector::prefix("2001:2::1".parse().unwrap(), 128);
        assert_eq!(host.as_prefix(), Some(("2001:2::1".parse().unwrap(), 128)));
    }
}
