//! The IP layer of a gateway worker: its ports, routes and neighbors. Part of every
//! worker context; empty in host mode, where the kernel does all of this.

use crate::fib::Fib;
use crate::interfaces::Interfaces;
use crate::neighbor::{NeighborEvent, NeighborTable};
use std::net::Ipv6Addr;

/// Neighbor entries per worker: enough for a LAN of a few thousand hosts.
pub const NEIGHBOR_CAPACITY: usize = 4096;

pub struct IpLayer {
    pub(crate) interfaces: Interfaces,
    pub(crate) fib: Fib,
    pub(crate) neighbors: NeighborTable,
    /// What the neighbor table asked for and the graph has yet to carry out.
    pub(crate) events: Vec<NeighborEvent>,
    /// Fragments after the first of packets `ip4-fragment` cut, in order, for the
    /// graph to send on after the pass (their port says where: none is the tunnel).
    pub(crate) fragments: Vec<crate::arena::Handle>,
}

impl Default for IpLayer {
    fn default() -> Self {
        IpLayer {
            interfaces: Interfaces::new(),
            fib: Fib::new(),
            neighbors: NeighborTable::new(NEIGHBOR_CAPACITY),
            events: Vec::new(),
            fragments: Vec::new(),
        }
    }
}

impl IpLayer {
    pub fn interfaces(&self) -> &Interfaces {
        &self.interfaces
    }

    pub fn interfaces_mut(&mut self) -> &mut Interfaces {
        &mut self.interfaces
    }

    pub fn fib(&self) -> &Fib {
        &self.fib
    }

    pub fn fib_mut(&mut self) -> &mut Fib {
        &mut self.fib
    }

    pub fn neighbors(&self) -> &NeighborTable {
        &self.neighbors
    }

    /// Whether a packet to the IPv6 multicast group `group` is for the gateway: the
    /// all-nodes group, or the solicited-node group of one of its addresses (where
    /// neighbor solicitations for that address go, RFC 4861 section 7.2.1).
    pub fn listens_to(&self, group: &Ipv6Addr) -> bool {
        if *group == Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1) {
            return true;
        }
        self.interfaces.iter().any(|(_, port)| {
            port.addrs.iter().any(|p| match p.addr {
                std::net::IpAddr::V6(a) => wire::icmpv6::solicited_node(&a) == *group,
                std::net::IpAddr::V4(_) => false,
            })
        })
    }
}
