//! The AF_XDP driver: a socket on one queue of an interface, on the worker's arena
//! as its UMEM; on jumbo buffers, on page-sized memory of its own, frames copied
//! between it and the arena (`xdp_parts`).

use crate::copied_starts::{XDP_DATA_OFFSET, copied_rx_starts};
use crate::xdp_parts::{PART_SIZE, Parts};
use crate::{PortCounters, PortGraph, RX_BATCH};
use dataplane::arena::PageMemory;
use dataplane::fib::PortId;
use dataplane::{Handle, OutputId};
use io::{Fragment, XdpAttachment, XdpMode, XdpOptions, XdpPort};
use std::os::fd::RawFd;
use std::sync::Arc;

/// Entries in each AF_XDP ring.
const XDP_RING: u32 = 2048;

/// Page-sized buffers of an AF_XDP port on jumbo buffers: a fill ring's worth to
/// receive into and a TX ring's worth to send from (16 MiB, which the kernel pins
/// while the port is open).
const PART_BUFFERS: usize = 2 * XDP_RING as usize;

/// The memory an AF_XDP port on a worker with `buffer`-byte buffers holds apart
/// from the arena: none on standard buffers (the arena is its UMEM).
pub fn xdp_own_memory(buffer: usize) -> usize {
    if buffer > dataplane::STANDARD_BUFFER {
        PART_BUFFERS * PART_SIZE
    } else {
        0
    }
}

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

/// The frames an AF_XDP port on `mtu` needs room for, or why they do not fit a
/// UMEM chunk (a standard buffer) after the kernel's headroom. On jumbo buffers
/// frames come in parts and are joined in an arena buffer, which holds those of
/// any port MTU the configuration takes.
pub fn check_mtu(name: &str, mtu: u16, buffer: usize) -> Result<(), String> {
    if buffer > dataplane::STANDARD_BUFFER {
        return Ok(());
    }
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

/// Which queue an AF_XDP port serves, and how.
#[derive(Clone, Copy, Debug)]
pub struct XdpQueue {
    /// The interface's queue.
    pub queue: u32,
    /// Ask the driver for zero-copy (copy mode where it refuses).
    pub zero_copy: bool,
    /// Arena buffers to keep lent to the kernel (see [`xdp_fill_target`]); a port
    /// on jumbo buffers lends its own instead.
    pub fill_target: usize,
    /// The port's MTU: on jumbo buffers, where joined frames are put is chosen for
    /// frames of it.
    pub mtu: u16,
}

/// An AF_XDP socket and what it holds of the arena.
pub(crate) struct XdpDriver {
    /// Declared before `umem`, so it is closed before the memory may go.
    xsk: XdpPort,
    /// The memory registered with `xsk` (the arena's, or the port's own): kept
    /// alive for as long as the kernel may write into it, whatever the worker
    /// drops first.
    _umem: Arc<PageMemory>,
    /// On jumbo buffers, the port's own buffers, which frames come and go in.
    parts: Option<Box<Parts>>,
    /// Buffers lent through the fill ring and not yet received.
    filled: usize,
    /// How many buffers to keep lent (see [`xdp_fill_target`]).
    fill_target: usize,
    rx: [(u32, u16, u16); RX_BATCH],
    rx_parts: [Fragment; RX_BATCH],
    tx: Vec<(u32, u16, u16)>,
    tx_parts: Vec<Fragment>,
    out: Vec<Handle>,
    done: [u32; RX_BATCH],
}

impl XdpDriver {
    /// A socket on queue `q` of the interface `program` is attached to, with the
    /// arena of `graph` as its memory, or, where the arena's buffers are jumbo,
    /// page-sized buffers of its own whose frames are copied to and from the arena
    /// (the program must then take fragments). Says on stderr how it runs.
    pub(crate) fn open(
        name: &str,
        program: &XdpAttachment,
        q: &XdpQueue,
        graph: &mut impl PortGraph,
    ) -> Result<XdpDriver, String> {
        let XdpQueue {
            queue,
            zero_copy,
            fill_target,
            mtu,
        } = *q;
        let ifname = program.ifname();
        let mut opts = XdpOptions {
            ring_size: XDP_RING,
            zero_copy,
            skb_mode: false,
            headroom: 0,
            ..XdpOptions::default()
        };
        let arena = graph.context_mut().arena_mut();
        let (umem, parts, fill_target) = match arena.umem() {
            Some(umem) => (umem, None, fill_target),
            None => {
                let parts = Parts::new(
                    PART_BUFFERS as u32,
                    copied_rx_starts(arena.buffer_size(), mtu),
                );
                opts.chunk_size = PART_SIZE as u32;
                opts.multi_buffer = true;
                let memory = parts.memory().clone();
                (memory, Some(Box::new(parts)), XDP_RING as usize)
            }
        };
        // SAFETY: the memory is page-aligned and a whole number of the options'
        // buffers: the arena's, had from an arena of standard buffers (2048 bytes,
        // the default chunk), or the port's own page-sized ones. The driver keeps
        // it alive past the socket (`_umem`, dropped after `xsk`). The kernel only
        // writes buffers this driver lent it: each is allocated (from the arena or
        // the port's own free list) before it goes on the fill ring and freed only
        // when the kernel hands it back on the receive or completion ring, so
        // nothing else touches it meanwhile. Every AF_XDP port of a worker on
        // standard buffers registers the arena as its own UMEM; the kernel pins the
        // pages once per registration, and each port lends only its own buffers,
        // so no buffer is ever with two sockets at once. Other workers' ports are
        // on their own arenas.
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
        let multi = if parts.is_some() {
            ", multi-buffer, frames copied to and from jumbo buffers"
        } else {
            ""
        };
        eprintln!(
            "linerate: port {name}: AF_XDP on {ifname} queue {queue}, {mode} XDP, {copy}{tags}{multi}"
        );
        Ok(XdpDriver {
            xsk,
            _umem: umem,
            parts,
            filled: 0,
            fill_target,
            rx: [(0, 0, 0); RX_BATCH],
            rx_parts: [Fragment::default(); RX_BATCH],
            tx: Vec::with_capacity(RX_BATCH),
            tx_parts: Vec::with_capacity(RX_BATCH * 3),
            out: Vec::new(),
            done: [0; RX_BATCH],
        })
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.xsk.as_raw_fd()
    }

    /// Buffers of the arena lent to the kernel now (none where the port has its
    /// own).
    pub(crate) fn buffers_held(&self) -> usize {
        if self.parts.is_some() {
            return 0;
        }
        self.filled + self.xsk.tx_in_flight()
    }

    /// Lends the kernel free buffers until it holds the fill target (or the arena,
    /// or the port's own memory, has none to spare).
    pub(crate) fn refill(&mut self, graph: &mut impl PortGraph) {
        let arena = graph.context_mut().arena_mut();
        let mut batch = [0u32; RX_BATCH];
        while self.filled < self.fill_target {
            let want = (self.fill_target - self.filled).min(RX_BATCH);
            let n = match &mut self.parts {
                Some(parts) => parts.take(want, &mut batch),
                None => {
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
                    n
                }
            };
            let took = self.xsk.fill(&batch[..n]);
            self.filled += took;
            self.give_back(arena, &batch[took..n]);
            if took < want {
                return;
            }
        }
    }

    /// Buffers the kernel gave back or did not take: to the port's own memory or
    /// to the arena.
    fn give_back(&mut self, arena: &mut dataplane::arena::Arena, bufs: &[u32]) {
        match &mut self.parts {
            Some(parts) => parts.give_back(bufs),
            None => bufs.iter().for_each(|&h| arena.free(h)),
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
            let done = self.done;
            self.give_back(graph.context_mut().arena_mut(), &done[..n]);
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
        if self.parts.is_some() {
            return self.receive_parts(id, c, graph);
        }
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

    /// [`receive`](XdpDriver::receive) on the port's own memory: parts joined into
    /// arena buffers, no more parts taken than the arena has free buffers for (the
    /// rest wait in the ring, as AF_PACKET's do); how many parts came.
    fn receive_parts(
        &mut self,
        id: PortId,
        c: &mut PortCounters,
        graph: &mut impl PortGraph,
    ) -> usize {
        let arena = graph.context_mut().arena_mut();
        let room = arena.available().min(RX_BATCH);
        if room == 0 {
            c.rx_no_buffer_polls += 1;
            return 0;
        }
        let n = self.xsk.recv_fragments(&mut self.rx_parts[..room]);
        self.filled -= n;
        self.out.clear();
        let parts = self
            .parts
            .as_mut()
            .expect("receive_parts on a port with parts");
        parts.gather(arena, &self.rx_parts[..n], &mut self.out);
        for &h in &self.out {
            c.rx_bytes += u64::from(arena.meta(h).len);
        }
        c.rx_packets += self.out.len() as u64;
        graph.take_in(id, &self.out);
        self.refill(graph);
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
        if let Some(parts) = &mut self.parts {
            let arena = cx.arena_mut();
            for chunk in self.out.chunks(RX_BATCH) {
                self.tx_parts.clear();
                let mut frames = 0;
                for &h in chunk {
                    if parts.scatter(arena.data(h), &mut self.tx_parts) {
                        frames += 1;
                    } else {
                        // Every buffer is on the TX ring or waiting to complete:
                        // as good as a full ring.
                        c.tx_dropped += 1;
                    }
                    arena.free(h);
                }
                let queued = self.xsk.send_fragments(&self.tx_parts);
                let (sent, rest) = self.tx_parts.split_at(queued);
                let sent_frames = sent.iter().filter(|f| !f.more).count();
                c.tx_packets += sent_frames as u64;
                c.tx_bytes += sent.iter().map(|f| u64::from(f.len)).sum::<u64>();
                c.tx_dropped += (frames - sent_frames) as u64;
                for f in rest {
                    parts.give_back(&[f.buf]);
                }
            }
            self.reap(graph);
            return;
        }
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
        let mut drops = io::port_drops::xdp(
            x.rx_dropped(),
            x.rx_fill_empty(),
            x.rx_ring_full(),
            tx_dropped,
            x.tx_invalid(),
        );
        if let Some(p) = &self.parts {
            drops.extend(io::port_drops::xdp_parts(p.rx_too_big, p.rx_no_buffer));
        }
        drops
    }

    /// What the socket counts, by name.
    pub(crate) fn driver_counters(&self) -> Vec<(&'static str, u64)> {
        let x = &self.xsk;
        let mut counters = vec![
            ("rx_dropped", x.rx_dropped()),
            ("rx_invalid", x.rx_invalid()),
            ("rx_ring_full", x.rx_ring_full()),
            ("rx_fill_empty", x.rx_fill_empty()),
            ("tx_invalid", x.tx_invalid()),
            ("tx_ring_full", x.tx_ring_full()),
            ("tx_kick_errors", x.tx_kick_errors()),
            ("rx_kick_errors", x.rx_kick_errors()),
        ];
        if let Some(p) = &self.parts {
            counters.push(("rx_too_big", p.rx_too_big));
            counters.push(("rx_no_buffer", p.rx_no_buffer));
        }
        counters
    }
}
