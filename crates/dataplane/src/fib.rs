//! The forwarding table of a gateway: routes of both families, longest prefix wins.
//! A route sends a packet to a next hop on a port, onto a network attached to a
//! port (the destination is its own next hop), into a tunnel interface, to the
//! gateway itself, or nowhere (a blackhole, counted by the node that looks it up).
//!
//! Each worker has its own copy, changed between frames from the control channel, so
//! a lookup takes no lock. Lookups go through the same table as WireGuard's allowed
//! IPs (`lpm`), with its cache of recent destinations.

use lpm::{Prefix, PrefixTable};
use std::collections::HashMap;
use std::net::IpAddr;

/// A port of the gateway, by its place in the configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortId(pub u16);

/// A tunnel interface (a WireGuard interface), by its place in the configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TunnelId(pub u16);

/// Where a route sends a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RouteTarget {
    /// To `next_hop`, a neighbor on `port`.
    Via { port: PortId, next_hop: IpAddr },
    /// A network on `port`: the destination itself is the neighbor.
    Attached { port: PortId },
    /// Into a tunnel interface.
    Tunnel(TunnelId),
    /// One of the gateway's own addresses.
    Local,
    /// Dropped on purpose.
    Blackhole,
}

impl std::fmt::Display for RouteTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RouteTarget::Via { port, next_hop } => write!(f, "via {next_hop} port {}", port.0),
            RouteTarget::Attached { port } => write!(f, "attached port {}", port.0),
            RouteTarget::Tunnel(t) => write!(f, "tunnel {}", t.0),
            RouteTarget::Local => f.write_str("local"),
            RouteTarget::Blackhole => f.write_str("blackhole"),
        }
    }
}

/// Why a route was refused; the table is unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FibError {
    /// A next hop of the other family than the prefix.
    FamilyMismatch { prefix: Prefix, next_hop: IpAddr },
    /// A next hop that is unspecified, multicast or broadcast: no neighbor answers
    /// for it.
    BadNextHop(IpAddr),
}

impl std::fmt::Display for FibError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FibError::FamilyMismatch { prefix, next_hop } => {
                write!(
                    f,
                    "route {prefix}: next hop {next_hop} is of the other family"
                )
            }
            FibError::BadNextHop(a) => write!(f, "next hop {a} cannot be a neighbor"),
        }
    }
}

#[derive(Default)]
pub struct Fib {
    table: PrefixTable<u32>,
    /// Route slots, by the index the table maps to; `None` for a removed route.
    routes: Vec<Option<(Prefix, RouteTarget)>>,
    free: Vec<u32>,
    by_prefix: HashMap<Prefix, u32>,
}

impl Fib {
    pub fn new() -> Fib {
        Fib::default()
    }

    /// Adds a route, or replaces the target of the route for the same prefix (host
    /// bits ignored). Returns the target it replaced.
    pub fn add(
        &mut self,
        prefix: Prefix,
        target: RouteTarget,
    ) -> Result<Option<RouteTarget>, FibError> {
        if let RouteTarget::Via { next_hop, .. } = target {
            if next_hop.is_ipv4() != prefix.addr.is_ipv4() {
                return Err(FibError::FamilyMismatch { prefix, next_hop });
            }
            let bad = next_hop.is_unspecified()
                || next_hop.is_multicast()
                || next_hop == IpAddr::V4(std::net::Ipv4Addr::BROADCAST);
            if bad {
                return Err(FibError::BadNextHop(next_hop));
            }
        }
        let prefix = prefix.network();
        if let Some(&i) = self.by_prefix.get(&prefix) {
            let slot = self.routes[i as usize]
                .as_mut()
                .expect("indexed routes exist");
            return Ok(Some(std::mem::replace(&mut slot.1, target)));
        }
        let i = match self.free.pop() {
            Some(i) => {
                self.routes[i as usize] = Some((prefix, target));
                i
            }
            None => {
                self.routes.push(Some((prefix, target)));
                (self.routes.len() - 1) as u32
            }
        };
        self.by_prefix.insert(prefix, i);
        self.table.insert(prefix, i);
        Ok(None)
    }

    /// Removes the route for `prefix`; returns its target.
    pub fn remove(&mut self, prefix: Prefix) -> Option<RouteTarget> {
        let prefix = prefix.network();
        let i = self.by_prefix.remove(&prefix)?;
        self.table.remove(prefix, i);
        self.free.push(i);
        self.routes[i as usize].take().map(|(_, t)| t)
    }

    /// The route for `dst`: the longest prefix that covers it.
    #[inline]
    pub fn lookup(&self, dst: IpAddr) -> Option<RouteTarget> {
        let i = self.table.lookup(dst)?;
        self.routes[i as usize].map(|(_, t)| t)
    }

    /// Every route, IPv4 first, each family by address and then length: what
    /// `show fib` prints.
    pub fn routes(&self) -> Vec<(Prefix, RouteTarget)> {
        let mut out: Vec<_> = self.routes.iter().flatten().copied().collect();
        out.sort_by_key(|(p, _)| (p.addr.is_ipv6(), p.addr, p.len));
        out
    }

    pub fn len(&self) -> usize {
        self.by_prefix.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_prefix.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Prefix {
        s.parse().unwrap()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    const LAN: PortId = PortId(0);
    const WAN: PortId = PortId(1);

    #[test]
    fn the_longest_prefix_wins_in_each_family() {
        let mut f = Fib::new();
        let gw = RouteTarget::Via {
            port: WAN,
            next_hop: ip("198.18.1.1"),
        };
        f.add(p("0.0.0.0/0"), gw).unwrap();
        f.add(p("198.19.0.0/16"), RouteTarget::Tunnel(TunnelId(0)))
            .unwrap();
        f.add(p("198.19.7.0/24"), RouteTarget::Attached { port: LAN })
            .unwrap();
        f.add(p("198.19.7.1/32"), RouteTarget::Local).unwrap();
        f.add(p("2001:2::/64"), RouteTarget::Blackhole).unwrap();
        assert_eq!(f.lookup(ip("198.18.9.9")), Some(gw));
        assert_eq!(
            f.lookup(ip("198.19.200.1")),
            Some(RouteTarget::Tunnel(TunnelId(0)))
        );
        assert_eq!(
            f.lookup(ip("198.19.7.20")),
            Some(RouteTarget::Attached { port: LAN })
        );
        assert_eq!(f.lookup(ip("198.19.7.1")), Some(RouteTarget::Local));
        assert_eq!(f.lookup(ip("2001:2::5")), Some(RouteTarget::Blackhole));
        assert_eq!(f.lookup(ip("2001:2:0:1::5")), None, "no IPv6 default");
    }

    #[test]
    fn replacing_and_removing_routes() {
        let mut f = Fib::new();
        assert_eq!(f.add(p("198.19.0.0/16"), RouteTarget::Local), Ok(None));
        assert_eq!(
            f.add(p("198.19.5.5/16"), RouteTarget::Blackhole),
            Ok(Some(RouteTarget::Local)),
            "host bits are ignored: the same route"
        );
        assert_eq!(f.len(), 1);
        assert_eq!(f.lookup(ip("198.19.1.1")), Some(RouteTarget::Blackhole));
        assert_eq!(f.remove(p("198.19.0.0/16")), Some(RouteTarget::Blackhole));
        assert_eq!(f.lookup(ip("198.19.1.1")), None);
        assert_eq!(f.remove(p("198.19.0.0/16")), None);
        // A freed slot is reused and the new route answers, not the old.
        f.add(p("198.18.0.0/15"), RouteTarget::Local).unwrap();
        assert_eq!(f.routes(), [(p("198.18.0.0/15"), RouteTarget::Local)]);
        assert!(f.lookup(ip("198.19.1.1")).is_some());
    }

    #[test]
    fn next_hops_that_cannot_be_neighbors_are_refused() {
        let mut f = Fib::new();
        let via = |a: &str| RouteTarget::Via {
            port: WAN,
            next_hop: ip(a),
        };
        assert!(matches!(
            f.add(p("2001:2::/48"), via("198.18.0.1")),
            Err(FibError::FamilyMismatch { .. })
        ));
        for bad in ["0.0.0.0", "255.255.255.255", "224.0.0.1"] {
            assert_eq!(
                f.add(p("198.19.0.0/16"), via(bad)),
                Err(FibError::BadNextHop(ip(bad)))
            );
        }
        assert!(f.is_empty(), "nothing refused was added");
    }

    #[test]
    fn routes_list_in_order() {
        let mut f = Fib::new();
        for r in [
            "2001:2::/48",
            "198.19.0.0/16",
            "198.18.0.0/24",
            "198.18.0.0/15",
        ] {
            f.add(p(r), RouteTarget::Local).unwrap();
        }
        let listed: Vec<String> = f.routes().iter().map(|(p, _)| p.to_string()).collect();
        assert_eq!(
            listed,
            [
                "198.18.0.0/15",
                "198.18.0.0/24",
                "198.19.0.0/16",
                "2001:2::/48"
            ]
        );
    }
}
