//! The gateway's ports as the IP layer sees them: each port's Ethernet address,
//! MTU, own addresses (with their prefixes) and the output queue its driver drains;
//! and which addresses are the gateway's own, for the nodes that answer ARP, ND and
//! ICMP echo and for the routes marked local.

use crate::fib::PortId;
use crate::neighbor::Mac;
use crate::outputs::OutputId;
use lpm::Prefix;
use std::collections::HashMap;
use std::net::IpAddr;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interface {
    pub name: String,
    pub mac: Mac,
    /// The largest IP packet the port sends (Ethernet payload).
    pub mtu: u16,
    /// The port's own addresses, each with the prefix of its attached network.
    pub addrs: Vec<Prefix>,
    /// Where packets for this port wait for its driver.
    pub output: OutputId,
}

/// Why an interface was refused; nothing changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InterfaceError {
    /// The address is another port's already.
    AddressInUse { addr: IpAddr, port: String },
    /// An MTU below what the family needs (68 for IPv4, RFC 791; 1280 for IPv6,
    /// RFC 8200 section 5) or above what a buffer carries.
    BadMtu { port: String, mtu: u16 },
    /// A multicast or all-zero Ethernet address.
    BadMac { port: String },
}

impl std::fmt::Display for InterfaceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InterfaceError::AddressInUse { addr, port } => {
                write!(f, "address {addr} is already on port {port}")
            }
            InterfaceError::BadMtu { port, mtu } => {
                write!(f, "port {port}: MTU {mtu} out of range")
            }
            InterfaceError::BadMac { port } => {
                write!(f, "port {port}: a multicast or all-zero MAC address")
            }
        }
    }
}

/// The smallest MTU of a port with IPv6 addresses (RFC 8200 section 5).
pub const IPV6_MIN_MTU: u16 = 1280;
/// The smallest MTU of any port (RFC 791: every host takes 68-byte datagrams).
pub const IPV4_MIN_MTU: u16 = 68;

#[derive(Default)]
pub struct Interfaces {
    ports: Vec<Interface>,
    /// Every own address and its port.
    local: HashMap<IpAddr, PortId>,
}

impl Interfaces {
    pub fn new() -> Interfaces {
        Interfaces::default()
    }

    /// Adds a port, numbered in the order added; `max_mtu` is what a buffer carries.
    pub fn add(&mut self, port: Interface, max_mtu: u16) -> Result<PortId, InterfaceError> {
        let v6 = port.addrs.iter().any(|p| p.addr.is_ipv6());
        let min = if v6 { IPV6_MIN_MTU } else { IPV4_MIN_MTU };
        if port.mtu < min || port.mtu > max_mtu {
            return Err(InterfaceError::BadMtu {
                port: port.name,
                mtu: port.mtu,
            });
        }
        if port.mac[0] & 1 == 1 || port.mac == [0; 6] {
            return Err(InterfaceError::BadMac { port: port.name });
        }
        for p in &port.addrs {
            if let Some(other) = self.local.get(&p.addr) {
                return Err(InterfaceError::AddressInUse {
                    addr: p.addr,
                    port: self.ports[other.0 as usize].name.clone(),
                });
            }
        }
        let id = PortId(self.ports.len() as u16);
        for p in &port.addrs {
            self.local.insert(p.addr, id);
        }
        self.ports.push(port);
        Ok(id)
    }

    pub fn get(&self, port: PortId) -> Option<&Interface> {
        self.ports.get(port.0 as usize)
    }

    pub fn iter(&self) -> impl Iterator<Item = (PortId, &Interface)> {
        self.ports
            .iter()
            .enumerate()
            .map(|(i, p)| (PortId(i as u16), p))
    }

    /// The port that owns `addr`, when it is one of the gateway's own.
    #[inline]
    pub fn owner(&self, addr: IpAddr) -> Option<PortId> {
        self.local.get(&addr).copied()
    }

    /// The address a message from `port` about or towards `to` comes from: the
    /// port's address on `to`'s network, else its first of that family.
    pub fn source_for(&self, port: PortId, to: IpAddr) -> Option<IpAddr> {
        let addrs = &self.get(port)?.addrs;
        let same_family = addrs.iter().filter(|p| p.addr.is_ipv4() == to.is_ipv4());
        same_family
            .clone()
            .find(|p| covers(**p, to))
            .or_else(|| same_family.clone().next())
            .map(|p| p.addr)
    }
}

/// Whether `prefix` covers `addr`.
fn covers(prefix: Prefix, addr: IpAddr) -> bool {
    Prefix::new(addr, prefix.len).is_some_and(|a| a.network() == prefix.network())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(name: &str, mac_last: u8, addrs: &[&str]) -> Interface {
        Interface {
            name: name.into(),
            mac: [0x02, 0, 0, 0, 0, mac_last],
            mtu: 1500,
            addrs: addrs.iter().map(|a| a.parse().unwrap()).collect(),
            output: OutputId(mac_last as usize),
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn own_addresses_and_sources() {
        let mut i = Interfaces::new();
        let lan = i
            .add(port("lan", 1, &["198.19.1.1/24", "2001:2:0:1::1/64"]), 1856)
            .unwrap();
        let wan = i
            .add(port("wan", 2, &["198.18.0.1/30", "198.18.5.1/24"]), 1856)
            .unwrap();
        assert_eq!(i.owner(ip("198.19.1.1")), Some(lan));
        assert_eq!(i.owner(ip("198.18.5.1")), Some(wan));
        assert_eq!(i.owner(ip("198.19.1.2")), None);
        assert_eq!(i.source_for(wan, ip("198.18.5.77")), Some(ip("198.18.5.1")));
        assert_eq!(i.source_for(wan, ip("198.19.9.9")), Some(ip("198.18.0.1")));
        assert_eq!(i.source_for(wan, ip("2001:2::1")), None);
        assert_eq!(
            i.source_for(lan, ip("2001:2:0:1::9")),
            Some(ip("2001:2:0:1::1"))
        );
    }

    #[test]
    fn bad_ports_are_refused_and_change_nothing() {
        let mut i = Interfaces::new();
        i.add(port("lan", 1, &["198.19.1.1/24"]), 1856).unwrap();
        assert!(matches!(
            i.add(port("wan", 2, &["198.19.1.1/30"]), 1856),
            Err(InterfaceError::AddressInUse { .. })
        ));
        let mut small = port("wan", 2, &["2001:2::1/64"]);
        small.mtu = 1279;
        assert!(matches!(
            i.add(small, 1856),
            Err(InterfaceError::BadMtu { mtu: 1279, .. })
        ));
        let mut big = port("wan", 2, &[]);
        big.mtu = 9000;
        assert!(matches!(
            i.add(big, 1856),
            Err(InterfaceError::BadMtu { .. })
        ));
        let mut multicast = port("wan", 2, &[]);
        multicast.mac[0] = 0x01;
        assert!(matches!(
            i.add(multicast, 1856),
            Err(InterfaceError::BadMac { .. })
        ));
        assert_eq!(i.iter().count(), 1);
    }
}
