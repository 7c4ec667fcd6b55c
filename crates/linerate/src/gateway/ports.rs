//! A gateway's ports: each takes over one Linux interface through a driver and moves
//! whole Ethernet frames between it and the graph, a batch at a time both ways. The
//! counters here are the port's own (what the driver saw); what the graph did with
//! the frames is counted on its nodes.
//!
//! AF_XDP works on the arena itself (it is the UMEM): the port lends the kernel free
//! buffers through the fill ring, a received frame's buffer becomes the packet's
//! (no copy), a sent packet's buffer goes to the TX ring and is freed when the
//! kernel gives it back on the completion ring. AF_PACKET copies frames between
//! its rings and arena buffers.

use dataplane::fib::PortId;
use dataplane::gateway::GatewayGraph;
use dataplane::{HEADROOM, Handle, RxStarts};
use io::{Fanout, PacketPort, XdpAttachment, XdpMode, XdpOptions, XdpPort};
use std::os::fd::RawFd;

/// Frames one receive takes at most: a frame of the graph.
pub const RX_BATCH: usize = dataplane::arena::RX_BATCH;
/// Ring slots of an AF_PACKET port, each way.
const PACKET_RING_FRAMES: usize = 2048;

/// Entries in each AF_XDP ring.
const XDP_RING: u32 = 2048;

/// Buffers an AF_XDP port keeps lent to the kernel for receiving, out of an arena
/// of `arena` buffers shared by `ports` ports: as many as the fill ring holds, or,
/// on a smaller arena, the ports' even share of half of it (the other half is the
/// graph's). The kernel drops every frame that arrives while the port has no
/// buffer lent, and one TCP flow delivers bursts of many hundreds of frames
/// between two turns of a busy worker: 512 lost about 3% of such a flow's frames
/// where 2,048 lose none (`tests/net/gateway.sh one_flow`; the largest congestion
/// window iperf3 reported there was 1.4 MB, under 1,000 segments).
pub fn xdp_fill_target(arena: usize, ports: usize) -> usize {
    (arena / (2 * ports.max(1))).clamp(RX_BATCH, XDP_RING as usize)
}
/// The kernel writes a received frame at this offset of its buffer (no UMEM
/// headroom: its own 256 bytes already leave the graph's 128 for outer headers).
const XDP_DATA_OFFSET: usize = io::xdp::XDP_PACKET_HEADROOM as usize;

/// Where an AF_PACKET port on `mtu` has its frames copied in: from 256 bytes in, as
/// an AF_XDP port's (room in front for every outer header a frame may get, VXLAN
/// and WireGuard over IPv6 both), at up to three starts a cache line apart (see
/// `dataplane::rx_starts`) as far as a frame of the MTU, two VLAN tags included,
/// leaves room; from the headroom where an MTU leaves too little for that.
pub fn packet_rx_starts(mtu: u16) -> RxStarts {
    let room = usize::from(mtu) + wire::ethernet::QINQ_HEADER_LEN;
    RxStarts::spread(XDP_DATA_OFFSET, room)
        .or_else(|| RxStarts::spread(HEADROOM, room))
        .unwrap_or(RxStarts::AT_HEADROOM)
}

/// How a port reaches its interface.
pub enum Driver {
    /// AF_PACKET with memory-mapped rings: frames are copied in and out, in at the
    /// starts given.
    Packet(PacketPort, RxStarts),
    /// AF_XDP on the arena: no copy in the gateway (the kernel copies on veth).
    Xdp(Box<XdpDriver>),
}

/// An AF_XDP socket and what it holds of the arena.
pub struct XdpDriver {
    xsk: XdpPort,
    /// Buffers lent through the fill ring and not yet received.
    filled: usize,
    /// How many buffers to keep lent (see [`xdp_fill_target`]).
    fill_target: usize,
    rx: [(u32, u16, u16); RX_BATCH],
    tx: Vec<(u32, u16, u16)>,
    out: Vec<Handle>,
    done: [u32; RX_BATCH],
}

impl XdpDriver {
    /// Lends the kernel free buffers until it holds the fill target (or the arena
    /// has none to spare).
    fn refill(&mut self, gw: &mut GatewayGraph) {
        let arena = gw.context_mut().arena_mut();
        let mut batch = [0u32; RX_BATCH];
        while self.filled < self.fill_target {
            let want = (self.fill_target - self.filled).min(RX_BATCH);
            let mut n = 0;
            while n < want {
                match arena.alloc() {
                    Some(h) => {
                        batch[n] = h;
                        n += 1;
                    }
                    None => break,
                }
            }
            let took = self.xsk.fill(&batch[..n]);
            self.filled += took;
            for &h in &batch[took..n] {
                arena.free(h);
            }
            if took < want {
                return;
            }
        }
    }

    /// Frees the buffers the kernel finished sending.
    fn reap(&mut self, gw: &mut GatewayGraph) {
        loop {
            let n = self.xsk.complete(&mut self.done);
            let arena = gw.context_mut().arena_mut();
            for &h in &self.done[..n] {
                arena.free(h);
            }
            if n < self.done.len() {
                return;
            }
        }
    }
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
    handles: Vec<Handle>,
    lens: [usize; RX_BATCH],
    /// An interface taken whole over AF_XDP: promiscuous while the port lives (an
    /// AF_PACKET port's own socket asks for that).
    promiscuous: Option<io::netdev::Promiscuous>,
}

impl Port {
    /// An AF_PACKET port on `ifname`, promiscuous (it routes for every address);
    /// with `fanout`, one socket of that fanout group (one per worker).
    pub fn open_packet(
        id: PortId,
        name: &str,
        ifname: &str,
        mtu: u16,
        fanout: Option<(u16, Fanout)>,
    ) -> Result<Port, String> {
        let p = PacketPort::open(ifname, PACKET_RING_FRAMES)
            .map_err(|e| format!("port {name}: opening {ifname} with AF_PACKET: {e}"))?;
        p.set_promiscuous(true)
            .map_err(|e| format!("port {name}: promiscuous mode on {ifname}: {e}"))?;
        if let Some((group, how)) = fanout {
            p.join_fanout(group, how)
                .map_err(|e| format!("port {name}: {e}"))?;
        }
        let starts = packet_rx_starts(mtu);
        Ok(Port::new(id, name, ifname, Driver::Packet(p, starts)))
    }

    /// The frames an AF_XDP port on `mtu` needs room for, or why they do not fit a
    /// buffer after the kernel's headroom.
    pub fn check_xdp_mtu(name: &str, mtu: u16) -> Result<(), String> {
        let room = dataplane::FRAME_SIZE - XDP_DATA_OFFSET - dataplane::arena::TAILROOM;
        let frame = usize::from(mtu) + wire::ethernet::HEADER_LEN;
        if frame > room {
            return Err(format!(
                "port {name}: MTU {mtu} is more than an AF_XDP port carries ({})",
                room - wire::ethernet::HEADER_LEN
            ));
        }
        Ok(())
    }

    /// An AF_XDP port on queue `queue` of the interface `program` is attached to, on
    /// the graph's arena (see [`Port::check_xdp_mtu`] for the MTU); it receives once
    /// [`primed`](Port::prime).
    pub fn open_xdp(
        id: PortId,
        name: &str,
        program: &XdpAttachment,
        queue: u32,
        zero_copy: bool,
        fill_target: usize,
        gw: &mut GatewayGraph,
    ) -> Result<Port, String> {
        let ifname = program.ifname();
        let opts = XdpOptions {
            ring_size: XDP_RING,
            zero_copy,
            skb_mode: false,
            headroom: 0,
        };
        let (mem, len) = gw.context_mut().arena_mut().umem();
        // SAFETY: the arena's memory is page-aligned, a whole number of 2048-byte
        // buffers, and outlives the port (a worker drops its ports before its
        // graph: see Lane's field order). The kernel only writes buffers this
        // driver lent it (allocated from the arena and not freed until they come
        // back), which nothing else touches meanwhile. Every AF_XDP port of the
        // worker registers the same block as its own UMEM; the kernel pins the
        // pages once per registration, and each port lends only its own buffers,
        // so no buffer is ever with two sockets at once. Other workers' ports are
        // on their own arenas.
        #[allow(unsafe_code)]
        let xsk = unsafe { XdpPort::open_on(program, queue, mem, len, &opts) }.map_err(|e| {
            format!("port {name}: opening queue {queue} of {ifname} with AF_XDP: {e}")
        })?;
        let mode = match xsk.mode() {
            XdpMode::Native => "native",
            XdpMode::Skb => "generic",
        };
        let copy = if xsk.zero_copy() {
            "zero-copy"
        } else {
            "copy mode"
        };
        let tags = if program.restores_vlan_tags() {
            ", offloaded VLAN tags put back"
        } else {
            ""
        };
        eprintln!(
            "linerate: port {name}: AF_XDP on {ifname} queue {queue}, {mode} XDP, {copy}{tags}"
        );
        let driver = XdpDriver {
            xsk,
            filled: 0,
            fill_target,
            rx: [(0, 0, 0); RX_BATCH],
            tx: Vec::with_capacity(RX_BATCH),
            out: Vec::new(),
            done: [0; RX_BATCH],
        };
        Ok(Port::new(id, name, ifname, Driver::Xdp(Box::new(driver))))
    }

    /// Lends an AF_XDP port's kernel its first buffers to receive into, then has
    /// the program send the port its queue's frames (so that none arrives before a
    /// buffer is there for it). Apart from opening, so that a port dropped because
    /// another failed to open has taken nothing from its arena: buffers lent to the
    /// kernel come back only through the port.
    pub fn prime(&mut self, gw: &mut GatewayGraph) -> Result<(), String> {
        if let Driver::Xdp(x) = &mut self.driver {
            x.refill(gw);
            x.xsk
                .start_receiving()
                .map_err(|e| format!("port {}: {e}", self.name))?;
        }
        Ok(())
    }

    fn new(id: PortId, name: &str, ifname: &str, driver: Driver) -> Port {
        Port {
            id,
            name: name.to_string(),
            ifname: ifname.to_string(),
            driver,
            counters: PortCounters::default(),
            handles: Vec::with_capacity(RX_BATCH),
            lens: [0; RX_BATCH],
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
            Driver::Packet(p, _) => p.as_raw_fd(),
            Driver::Xdp(x) => x.xsk.as_raw_fd(),
        }
    }

    pub fn driver_name(&self) -> &'static str {
        match &self.driver {
            Driver::Packet(..) => "af_packet",
            Driver::Xdp(_) => "af_xdp",
        }
    }

    /// Buffers of the arena the driver holds now (lent to the kernel).
    pub fn buffers_held(&self) -> usize {
        match &self.driver {
            Driver::Packet(..) => 0,
            Driver::Xdp(x) => x.filled + x.xsk.tx_in_flight(),
        }
    }

    /// Reads one batch of frames into the graph; how many came.
    pub fn receive(&mut self, gw: &mut GatewayGraph) -> usize {
        let (port, starts) = match &mut self.driver {
            Driver::Packet(p, starts) => (p, *starts),
            Driver::Xdp(x) => return Self::receive_xdp(x, self.id, &mut self.counters, gw),
        };
        self.handles.clear();
        let arena = gw.context_mut().arena_mut();
        while self.handles.len() < RX_BATCH {
            match arena.alloc() {
                Some(h) => self.handles.push(h),
                None => break,
            }
        }
        if self.handles.is_empty() {
            self.counters.rx_no_buffer_polls += 1;
            return 0;
        }
        let lens = &mut self.lens;
        let n = arena.with_rx_slices(&self.handles, starts, |bufs| port.recv_batch(bufs, lens));
        for (&h, &len) in self.handles.iter().zip(lens.iter()).take(n) {
            arena.meta_mut(h).len = len as u16;
            self.counters.rx_bytes += len as u64;
        }
        for &h in &self.handles[n..] {
            arena.free(h);
        }
        self.counters.rx_packets += n as u64;
        gw.from_port(self.id, &self.handles[..n]);
        n
    }

    fn receive_xdp(
        x: &mut XdpDriver,
        id: PortId,
        c: &mut PortCounters,
        gw: &mut GatewayGraph,
    ) -> usize {
        let n = x.xsk.recv(&mut x.rx);
        x.filled -= n;
        let arena = gw.context_mut().arena_mut();
        let mut handles = [0 as Handle; RX_BATCH];
        for (slot, &(buf, offset, len)) in handles.iter_mut().zip(&x.rx[..n]) {
            let m = arena.meta_mut(buf);
            m.offset = offset;
            m.len = len;
            c.rx_bytes += u64::from(len);
            *slot = buf;
        }
        c.rx_packets += n as u64;
        gw.from_port(id, &handles[..n]);
        x.refill(gw);
        if x.filled == 0 {
            c.rx_no_buffer_polls += 1;
        }
        n
    }

    fn transmit_xdp(
        x: &mut XdpDriver,
        queue: dataplane::OutputId,
        c: &mut PortCounters,
        gw: &mut GatewayGraph,
    ) {
        x.reap(gw);
        x.out.clear();
        gw.context_mut().take_output(queue, &mut x.out);
        gw.context_mut().check_late_again(&mut x.out);
        for chunk in x.out.chunks(RX_BATCH) {
            let arena = gw.context_mut().arena_mut();
            x.tx.clear();
            x.tx.extend(chunk.iter().map(|&h| {
                let m = arena.meta(h);
                (h, m.offset, m.len)
            }));
            let sent = x.xsk.send(&x.tx);
            c.tx_packets += sent as u64;
            c.tx_bytes += x.tx[..sent].iter().map(|t| u64::from(t.2)).sum::<u64>();
            c.tx_dropped += (chunk.len() - sent) as u64;
            for &h in &chunk[sent..] {
                arena.free(h);
            }
        }
        x.reap(gw);
    }

    /// Sends what the graph queued for this port; every buffer goes back (at once,
    /// or when the kernel is done with it).
    pub fn transmit(&mut self, gw: &mut GatewayGraph) {
        let Some(queue) = gw.port_output(self.id) else {
            return;
        };
        let port = match &mut self.driver {
            Driver::Packet(p, _) => p,
            Driver::Xdp(x) => return Self::transmit_xdp(x, queue, &mut self.counters, gw),
        };
        let c = &mut self.counters;
        gw.context_mut().send_output(queue, |arena, hs| {
            for chunk in hs.chunks(RX_BATCH) {
                let mut frames: [&[u8]; RX_BATCH] = [&[]; RX_BATCH];
                for (f, &h) in frames.iter_mut().zip(chunk) {
                    *f = arena.data(h);
                }
                let sent = port.send_batch(&frames[..chunk.len()]);
                c.tx_packets += sent as u64;
                c.tx_bytes += frames[..sent].iter().map(|f| f.len() as u64).sum::<u64>();
                c.tx_dropped += (chunk.len() - sent) as u64;
            }
        });
    }

    pub fn counters(&self) -> PortCounters {
        self.counters
    }

    /// The frames the driver lost, by reason, each counted once (see `io::port_drops`).
    pub fn drops(&self) -> Vec<(&'static str, u64)> {
        match &self.driver {
            Driver::Packet(p, _) => io::port_drops::packet(
                p.rx_truncated(),
                p.rx_dropped(),
                p.tx_too_big(),
                p.tx_ring_full(),
                p.tx_rejected(),
            ),
            Driver::Xdp(x) => io::port_drops::xdp(
                x.xsk.rx_dropped(),
                x.xsk.rx_fill_empty(),
                x.xsk.rx_ring_full(),
                self.counters.tx_dropped,
                x.xsk.tx_invalid(),
            ),
        }
    }

    /// What the driver counts beyond the port's own counters, by name.
    pub fn driver_counters(&self) -> Vec<(&'static str, u64)> {
        match &self.driver {
            Driver::Packet(p, _) => vec![
                ("rx_truncated", p.rx_truncated()),
                ("rx_dropped", p.rx_dropped()),
                ("tx_too_big", p.tx_too_big()),
                ("tx_ring_full", p.tx_ring_full()),
                ("tx_rejected", p.tx_rejected()),
                ("tx_flush_errors", p.tx_flush_errors()),
            ],
            Driver::Xdp(x) => vec![
                ("rx_dropped", x.xsk.rx_dropped()),
                ("rx_invalid", x.xsk.rx_invalid()),
                ("rx_ring_full", x.xsk.rx_ring_full()),
                ("rx_fill_empty", x.xsk.rx_fill_empty()),
                ("tx_invalid", x.xsk.tx_invalid()),
                ("tx_ring_full", x.xsk.tx_ring_full()),
                ("tx_kick_errors", x.xsk.tx_kick_errors()),
                ("rx_kick_errors", x.xsk.rx_kick_errors()),
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dataplane::FRAME_SIZE;

    fn distinct(s: RxStarts) -> Vec<usize> {
        let mut v: Vec<usize> = (0..4).map(|h| s.of(h)).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// An AF_PACKET port's frames get an AF_XDP port's room in front and room for a
    /// tagged frame of the MTU behind, spread where the MTU leaves room; a large MTU
    /// gets the headroom and the room the buffers had before.
    #[test]
    fn packet_ports_receive_past_the_xdp_headroom_while_the_mtu_leaves_room() {
        assert_eq!(distinct(packet_rx_starts(1500)), [256, 320, 384]);
        assert_eq!(distinct(packet_rx_starts(1700)), [256]);
        for mtu in [576, 1280, 1500, 1600, 1700, 1738] {
            let s = packet_rx_starts(mtu);
            assert!((0..4).all(|h| s.of(h) >= XDP_DATA_OFFSET), "{mtu}");
            assert!(s.least_room() >= usize::from(mtu) + 22, "{mtu}");
        }
        for mtu in [1740, 1800, 1866] {
            let s = packet_rx_starts(mtu);
            assert!((0..4).all(|h| s.of(h) >= HEADROOM), "{mtu}");
            assert!(s.least_room() >= usize::from(mtu) + 22, "{mtu}");
        }
        let s = packet_rx_starts(9000);
        assert_eq!(s, RxStarts::AT_HEADROOM);
        assert_eq!(
            s.least_room(),
            FRAME_SIZE - HEADROOM - dataplane::arena::TAILROOM
        );
    }
}
