//! The IP layer of a gateway worker: its ports, routes and neighbors. Part of every
//! worker context; empty in host mode, where the kernel does all of this.

use crate::fib::Fib;
use crate::fib::PortId;
use crate::interfaces::Interfaces;
use crate::neighbor::{Heard, Mac, NeighborEvent, NeighborTable};
use crate::neighbor_share::{NeighborShare, News};
use crate::reassembly::{Limits, Reassembler};
use std::net::IpAddr;
use std::net::Ipv6Addr;
use std::time::Instant;

/// Neighbor entries per worker: enough for a LAN of a few thousand hosts.
pub const NEIGHBOR_CAPACITY: usize = 4096;

pub struct IpLayer {
    pub(crate) interfaces: Interfaces,
    pub(crate) fib: Fib,
    pub(crate) neighbors: NeighborTable,
    /// What the neighbor table asked for and the graph has yet to carry out.
    pub(crate) events: Vec<NeighborEvent>,
    /// The fragments of packets `ip4-fragment` cut, each packet's together and in
    /// order, for the graph to send on after the pass (their port says where: none
    /// is the tunnel).
    pub(crate) fragments: Vec<crate::arena::Handle>,
    /// Where neighbors heard here go to the other workers, and theirs come from
    /// (none with one worker).
    share: Option<NeighborShare>,
    news: Vec<News>,
    /// The latest station heard claiming one of our addresses, for the worker to
    /// say (taken with [`IpLayer::take_conflict`]).
    conflict: Option<(PortId, IpAddr, Mac)>,
    /// IP fragments addressed to the gateway, until their datagrams are whole: a
    /// tunnel's peer on a path narrower than its packets (an OpenVPN client at
    /// tun-mtu 1500 behind a 1400-byte link) sends its datagrams cut by its kernel.
    /// The fragments of one datagram come to one queue (a NIC and the kernel's
    /// fanout hash them by addresses alone, as they carry no ports after the first),
    /// so each worker keeps its own table.
    pub(crate) reassembly: Reassembler,
}

/// The reassembly table's bounds on each worker.
pub const REASSEMBLY_LIMITS: Limits = Limits {
    datagrams: 256,
    bytes: 4 << 20,
    datagram_len: 65535 - wire::ipv4::HEADER_LEN,
    timeout: std::time::Duration::from_secs(5),
};

impl Default for IpLayer {
    fn default() -> Self {
        IpLayer {
            interfaces: Interfaces::new(),
            fib: Fib::new(),
            neighbors: NeighborTable::new(NEIGHBOR_CAPACITY),
            events: Vec::new(),
            fragments: Vec::new(),
            share: None,
            news: Vec::new(),
            conflict: None,
            reassembly: Reassembler::new(REASSEMBLY_LIMITS),
        }
    }
}

impl IpLayer {
    /// Datagrams addressed to the gateway that this worker made whole from IP
    /// fragments.
    pub fn reassembled(&self) -> u64 {
        self.reassembly.made_whole()
    }

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

    /// Shares this worker's neighbors with the other workers at the mesh's other
    /// ends (see `neighbor_share`).
    pub fn share_neighbors(&mut self, share: NeighborShare) {
        self.share = Some(share);
    }

    /// Neighbor news not passed on to the other workers, in all.
    pub fn neighbor_news_lost(&self) -> u64 {
        self.share.as_ref().map_or(0, NeighborShare::lost)
    }

    /// `ip` on `port` is at `mac`, as a message on the wire said: into the table (see
    /// [`NeighborTable::learn`]) and into the news for the other workers. An address
    /// of the gateway's own is never a neighbor, whoever claims it.
    pub(crate) fn learn(&mut self, neighbor: (PortId, IpAddr, Mac), heard: Heard, now: Instant) {
        if self.interfaces.owner(neighbor.1).is_some() {
            return;
        }
        self.neighbors.learn(neighbor, heard, now, &mut self.events);
        if let Some(share) = &mut self.share {
            share.heard((neighbor, heard));
        }
    }

    /// A station at `mac` on `port` claims `addr`, one of ours.
    pub(crate) fn note_conflict(&mut self, port: PortId, addr: IpAddr, mac: Mac) {
        self.conflict = Some((port, addr, mac));
    }

    /// The latest address conflict heard since the last call, if any.
    pub fn take_conflict(&mut self) -> Option<(PortId, IpAddr, Mac)> {
        self.conflict.take()
    }

    /// Learns what the other workers heard since the last run.
    pub(crate) fn take_news(&mut self, now: Instant) {
        let Some(share) = &mut self.share else {
            return;
        };
        share.received(&mut self.news);
        for &(neighbor, heard) in &self.news {
            self.neighbors.learn(neighbor, heard, now, &mut self.events);
        }
        self.news.clear();
    }

    /// Passes what this run heard on to the other workers.
    pub(crate) fn send_news(&mut self) {
        if let Some(share) = &mut self.share {
            share.send();
        }
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
