//! The AF_XDP driver: a socket on one queue of an interface, on the worker's arena
//! as its UMEM.

use crate::{PortCounters, PortGraph, RX_BATCH};
use dataplane::arena::PageMemory;
use dataplane::fib::PortId;
use dataplane::{Handle, OutputId};
use io::{XdpAttachment, XdpMode, XdpOptions, XdpPort};
use std::os::fd::RawFd;
use std::sync::Arc;

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
pub(crate) const XDP_DATA_OFFSET: usize = io::xdp::XDP_PACKET_HEADROOM as usize;

/// The frames an AF_XDP port on `mtu` needs room for, or why they do not fit a
/// UMEM chunk (a standard buffer) after the kernel's headroom.
pub fn check_mtu(name: &str, mtu: u16) -> Result<(), String> {
    let room = dataplane::STANDARD_BUFFER - XDP_DATA_OFFSET - dataplane::arena::TAILROOM;
    let frame = usize::from(mtu) + wire::ethernet::HEADER_LEN;
    if frame > room {
        return Err(format!(
            "port {name}: MTU {mtu} is more than an AF_XDP port carries ({})",
            room - wire::ethernet::HEADER_LEN
        ));
    }
    Ok(())
}

/// An AF_XDP socket and what it holds of the arena.
pub(crate) struct XdpDriver {
    /// Declared before `umem`, so it is closed before the memory may go.
    xsk: XdpPort,
    /// The arena's memory, registered with `xsk`: kept alive for as long as the
    /// kernel may write into it, whatever the worker drops first.
    _umem: Arc<PageMemory>,
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
    /// A socket on queue `queue` of the interface `program` is attached to, with
    /// the arena of `graph` as its memory. Says on stderr how it runs.
    pub(crate) fn open(
        name: &str,
        program: &XdpAttachment,
        queue: u32,
        zero_copy: bool,
        fill_target: usize,
        graph: &mut impl PortGraph,
    ) -> Result<XdpDriver, String> {
        let ifname = program.ifname();
        let opts = XdpOptions {
            ring_size: XDP_RING,
            zero_copy,
            skb_mode: false,
            headroom: 0,
            ..XdpOptions::default()
        };
        let arena = graph.context_mut().arena_mut();
        let Some(umem) = arena.umem() else {
            return Err(format!(
                "port {name}: AF_XDP lends the kernel {}-byte buffers, and this worker's are {} bytes (jumbo frames run on af_packet ports)",
                io::xdp::FRAME_SIZE,
                arena.buffer_size()
            ));
        };
        // SAFETY: the arena's memory is page-aligned and a whole number of 2048-byte
        // buffers (`umem` is only had from an arena of standard buffers, which are
        // the UMEM's chunks), and the driver keeps it alive past the socket (`_umem`, dropped
        // after `xsk`). The kernel only writes buffers this driver lent it: each is
        // allocated from the arena before it goes on the fill ring and freed only
        // when the kernel hands it back on the receive or completion ring, so
        // nothing else touches it meanwhile. Every AF_XDP port of a worker
        // registers the same memory as its own UMEM; the kernel pins the pages once
        // per registration, and each port lends only its own buffers, so no buffer
        // is ever with two sockets at once. Other workers' ports are on their own
        // arenas.
        #[allow(unsafe_code)]
        let xsk = unsafe { XdpPort::open_on(program, queue, umem.base(), umem.len(), &opts) }
            .map_err(|e| {
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
        Ok(XdpDriver {
            xsk,
            _umem: umem,
            filled: 0,
            fill_target,
            rx: [(0, 0, 0); RX_BATCH],
            tx: Vec::with_capacity(RX_BATCH),
            out: Vec::new(),
            done: [0; RX_BATCH],
        })
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.xsk.as_raw_fd()
    }

    /// Buffers of the arena lent to the kernel now.
    pub(crate) fn buffers_held(&self) -> usize {
        self.filled + self.xsk.tx_in_flight()
    }

    /// Lends the kernel free buffers until it holds the fill target (or the arena
    /// has none to spare).
    pub(crate) fn refill(&mut self, graph: &mut impl PortGraph) {
        let arena = graph.context_mut().arena_mut();
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

    /// Lends the kernel its first buffers, then starts receiving.
    pub(crate) fn start(&mut self, graph: &mut impl PortGraph) -> std::io::Result<()> {
        self.refill(graph);
        self.xsk.start_receiving()
    }

    /// Frees the buffers the kernel finished sending.
    fn reap(&mut self, graph: &mut impl PortGraph) {
        loop {
            let n = self.xsk.complete(&mut self.done);
            let arena = graph.context_mut().arena_mut();
            for &h in &self.done[..n] {
                arena.free(h);
            }
            if n < self.done.len() {
                return;
            }
        }
    }

    /// Hands one batch of received frames to the graph, and lends the kernel as
    /// many buffers again; how many came.
    pub(crate) fn receive(
        &mut self,
        id: PortId,
        c: &mut PortCounters,
        graph: &mut impl PortGraph,
    ) -> usize {
        let n = self.xsk.recv(&mut self.rx);
        self.filled -= n;
        let arena = graph.context_mut().arena_mut();
        let mut handles = [0 as Handle; RX_BATCH];
        for (slot, &(buf, offset, len)) in handles.iter_mut().zip(&self.rx[..n]) {
            let m = arena.meta_mut(buf);
            m.offset = offset;
            m.len = len;
            c.rx_bytes += u64::from(len);
            *slot = buf;
        }
        c.rx_packets += n as u64;
        graph.take_in(id, &handles[..n]);
        self.refill(graph);
        if self.filled == 0 {
            c.rx_no_buffer_polls += 1;
        }
        n
    }

    /// Puts the frames of output queue `queue` on the TX ring (after the late
    /// check, if the worker was held back since it ran); frames the ring does not
    /// take are freed and counted.
    pub(crate) fn transmit(
        &mut self,
        queue: OutputId,
        c: &mut PortCounters,
        graph: &mut impl PortGraph,
    ) {
        self.reap(graph);
        self.out.clear();
        let cx = graph.context_mut();
        cx.take_output(queue, &mut self.out);
        cx.check_late_again(&mut self.out);
        for chunk in self.out.chunks(RX_BATCH) {
            let arena = cx.arena_mut();
            self.tx.clear();
            self.tx.extend(chunk.iter().map(|&h| {
                let m = arena.meta(h);
                (h, m.offset, m.len)
            }));
            let sent = self.xsk.send(&self.tx);
            c.tx_packets += sent as u64;
            c.tx_bytes += self.tx[..sent].iter().map(|t| u64::from(t.2)).sum::<u64>();
            c.tx_dropped += (chunk.len() - sent) as u64;
            for &h in &chunk[sent..] {
                arena.free(h);
            }
        }
        self.reap(graph);
    }

    /// The frames the driver lost, by reason (see `io::port_drops`).
    pub(crate) fn drops(&self, tx_dropped: u64) -> Vec<(&'static str, u64)> {
        let x = &self.xsk;
        io::port_drops::xdp(
            x.rx_dropped(),
            x.rx_fill_empty(),
            x.rx_ring_full(),
            tx_dropped,
            x.tx_invalid(),
        )
    }

    /// What the socket counts, by name.
    pub(crate) fn driver_counters(&self) -> Vec<(&'static str, u64)> {
        let x = &self.xsk;
        vec![
            ("rx_dropped", x.rx_dropped()),
            ("rx_invalid", x.rx_invalid()),
            ("rx_ring_full", x.rx_ring_full()),
            ("rx_fill_empty", x.rx_fill_empty()),
            ("tx_invalid", x.tx_invalid()),
            ("tx_ring_full", x.tx_ring_full()),
            ("tx_kick_errors", x.tx_kick_errors()),
            ("rx_kick_errors", x.rx_kick_errors()),
        ]
    }
}
