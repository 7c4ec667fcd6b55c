//! A port: one interface, its driver, and its own counters.

use crate::PortGraph;
use crate::packet::PacketDriver;
use crate::xdp::{self, XdpDriver, XdpQueue};
use dataplane::fib::PortId;
use io::{Fanout, XdpAttachment};
use std::os::fd::RawFd;

/// How a port reaches its interface.
enum Driver {
    /// AF_PACKET with memory-mapped rings: frames are copied in and out.
    Packet(Box<PacketDriver>),
    /// AF_XDP on the arena: no copy in the worker (the kernel copies on veth); on
    /// jumbo buffers, on memory of its own, frames copied to and from the arena.
    Xdp(Box<XdpDriver>),
}

/// What a port counts itself.
#[derive(Clone, Copy, Debug, Default)]
pub struct PortCounters {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Receive turns that found the arena without a free buffer: the frames wait in
    /// the ring meanwhile (what the kernel then drops is in [`Port::drops`]).
    pub rx_no_buffer_polls: u64,
    /// Frames the driver could not send (ring full, refused), freed and counted.
    pub tx_dropped: u64,
}

pub struct Port {
    pub id: PortId,
    pub name: String,
    pub ifname: String,
    driver: Driver,
    counters: PortCounters,
    /// An interface taken whole over AF_XDP: promiscuous while the port lives (an
    /// AF_PACKET port's own socket asks for that).
    promiscuous: Option<io::netdev::Promiscuous>,
}

impl Port {
    /// An AF_PACKET port on `ifname` for a worker whose buffers are `buffer` bytes,
    /// promiscuous (it routes for every address); with `fanout`, one socket of that
    /// fanout group (one per worker).
    pub fn open_packet(
        id: PortId,
        name: &str,
        ifname: &str,
        mtu: u16,
        buffer: usize,
        fanout: Option<(u16, Fanout)>,
    ) -> Result<Port, String> {
        let driver = PacketDriver::open(name, ifname, mtu, buffer, fanout)?;
        Ok(Port::new(
            id,
            name,
            ifname,
            Driver::Packet(Box::new(driver)),
        ))
    }

    /// The frames an AF_XDP port on `mtu` for a worker with `buffer`-byte buffers
    /// needs room for, or why they do not fit a buffer after the kernel's headroom.
    pub fn check_xdp_mtu(name: &str, mtu: u16, buffer: usize) -> Result<(), String> {
        xdp::check_mtu(name, mtu, buffer)
    }

    /// An AF_XDP port on a queue of the interface `program` is attached to, on the
    /// graph's arena (see [`Port::check_xdp_mtu`] for the MTU), or, on jumbo
    /// buffers, on memory of its own, its frames copied to and from the arena (the
    /// program must then be attached for fragments); it receives once
    /// [`primed`](Port::prime).
    pub fn open_xdp(
        id: PortId,
        name: &str,
        program: &XdpAttachment,
        queue: &XdpQueue,
        graph: &mut impl PortGraph,
    ) -> Result<Port, String> {
        let driver = XdpDriver::open(name, program, queue, graph)?;
        Ok(Port::new(
            id,
            name,
            program.ifname(),
            Driver::Xdp(Box::new(driver)),
        ))
    }

    /// Lends an AF_XDP port's kernel its first buffers to receive into, then has
    /// the program send the port its queue's frames (so that none arrives before a
    /// buffer is there for it). Apart from opening, so that a port dropped because
    /// another failed to open has taken nothing from its arena: buffers lent to the
    /// kernel come back only through the port.
    pub fn prime(&mut self, graph: &mut impl PortGraph) -> Result<(), String> {
        match &mut self.driver {
            Driver::Xdp(x) => x
                .start(graph)
                .map_err(|e| format!("port {}: {e}", self.name)),
            Driver::Packet(_) => Ok(()),
        }
    }

    fn new(id: PortId, name: &str, ifname: &str, driver: Driver) -> Port {
        Port {
            id,
            name: name.to_string(),
            ifname: ifname.to_string(),
            driver,
            counters: PortCounters::default(),
            promiscuous: None,
        }
    }

    /// Keeps the interface promiscuous for as long as this port lives.
    pub fn hold_promiscuous(&mut self, hold: io::netdev::Promiscuous) {
        self.promiscuous = Some(hold);
    }

    /// The fd to poll for received frames.
    pub fn fd(&self) -> RawFd {
        match &self.driver {
            Driver::Packet(p) => p.fd(),
            Driver::Xdp(x) => x.fd(),
        }
    }

    pub fn driver_name(&self) -> &'static str {
        match &self.driver {
            Driver::Packet(_) => "af_packet",
            Driver::Xdp(_) => "af_xdp",
        }
    }

    /// Buffers of the arena the driver holds now (lent to the kernel).
    pub fn buffers_held(&self) -> usize {
        match &self.driver {
            Driver::Packet(_) => 0,
            Driver::Xdp(x) => x.buffers_held(),
        }
    }

    /// Reads one batch of frames into the graph; how many came.
    pub fn receive(&mut self, graph: &mut impl PortGraph) -> usize {
        match &mut self.driver {
            Driver::Packet(p) => p.receive(self.id, &mut self.counters, graph),
            Driver::Xdp(x) => x.receive(self.id, &mut self.counters, graph),
        }
    }

    /// Sends what the graph queued for this port; every buffer goes back (at once,
    /// or when the kernel is done with it).
    pub fn transmit(&mut self, graph: &mut impl PortGraph) {
        let Some(queue) = graph.port_output(self.id) else {
            return;
        };
        match &mut self.driver {
            Driver::Packet(p) => p.transmit(queue, &mut self.counters, graph),
            Driver::Xdp(x) => x.transmit(queue, &mut self.counters, graph),
        }
    }

    pub fn counters(&self) -> PortCounters {
        self.counters
    }

    /// The frames the driver lost, by reason, each counted once (see `io::port_drops`).
    pub fn drops(&self) -> Vec<(&'static str, u64)> {
        match &self.driver {
            Driver::Packet(p) => p.drops(),
            Driver::Xdp(x) => x.drops(self.counters.tx_dropped),
        }
    }

    /// What the driver counts beyond the port's own counters, by name.
    pub fn driver_counters(&self) -> Vec<(&'static str, u64)> {
        match &self.driver {
            Driver::Packet(p) => p.driver_counters(),
            Driver::Xdp(x) => x.driver_counters(),
        }
    }
}
