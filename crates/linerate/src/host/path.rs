//! One host-mode worker's data path: its TUN queue, its UDP socket and its graph, and
//! the loop steps that move packets between them in batches. The owner of the device
//! and every follower run one each (see `worker` and `follower`); only these
//! threads touch them.

use crate::control::counter_report::CounterReport;
use dataplane::Handle;
use dataplane::graph::FRAME_LEN;
use dataplane::wg::{TUN_OUT, UDP_OUT, WgGraph, tun_rx_starts, udp_rx_starts};
use io::{GsoSendBatch, RecvBatch, RecvMeta, SendBatch, TunDevice, UdpSocket};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Instant;

/// Batches read per readable socket before the loop looks at the others again.
const BATCHES_PER_WAKE: usize = 8;

/// A placeholder for the unused entries of a batch array.
const NO_ADDR: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));

pub struct HostPath {
    pub tun: TunDevice,
    pub udp: UdpSocket,
    pub wg: WgGraph,
    rx: RecvBatch,
    tx: SendBatch,
    tx_gso: GsoSendBatch,
    metas: Vec<RecvMeta>,
    lens: Vec<usize>,
    /// Datagrams longer than a buffer, dropped before the graph sees them.
    udp_truncated: u64,
    /// Datagrams the kernel refused or the full socket buffer turned away.
    udp_send_failed: u64,
    /// Buffers for the batch being read, and those of it that go on to the graph.
    handles: Vec<Handle>,
    good: Vec<Handle>,
}

impl HostPath {
    pub fn new(tun: TunDevice, udp: UdpSocket, wg: WgGraph) -> HostPath {
        HostPath {
            tun,
            udp,
            wg,
            rx: RecvBatch::new(),
            tx: SendBatch::new(),
            tx_gso: GsoSendBatch::new(),
            metas: vec![RecvMeta::default(); io::MAX_BATCH],
            lens: vec![0; io::MAX_BATCH],
            udp_truncated: 0,
            udp_send_failed: 0,
            handles: Vec::with_capacity(io::MAX_BATCH),
            good: Vec::with_capacity(io::MAX_BATCH),
        }
    }

    /// This worker's counters: its graph's and its drivers'.
    pub fn counter_report(&self) -> CounterReport {
        let mut r = CounterReport::from_graph(self.wg.counters());
        for (name, value) in [
            ("tun.too_big", self.tun.too_big()),
            ("tun.malformed", self.tun.malformed()),
            ("tun.dropped", self.tun.dropped()),
            ("udp.truncated", self.udp_truncated),
            ("udp.send_failed", self.udp_send_failed),
        ] {
            r.add_other(name, value);
        }
        r.add_inflight(self.wg.context().inflight_counters());
        r.add_late(self.wg.context().late_counters());
        if let Some(c) = self.wg.context().spread_counters() {
            for (name, value) in [
                ("spread.frames", c.spread),
                ("spread.pieces_helped", c.pieces_helped),
                ("spread.pieces_taken_back", c.pieces_taken_back),
                ("spread.pieces_run_for_others", c.pieces_run_for_others),
                ("spread.asks", c.asks),
            ] {
                r.add_other(name, value);
            }
        }
        r
    }

    /// Runs the graph (and what it leaves for the device) and sends what it queued.
    pub fn run(&mut self, now: Instant) {
        self.wg.run(now);
        self.drain();
    }

    fn alloc_batch(&mut self) -> usize {
        self.handles.clear();
        let arena = self.wg.context_mut().arena_mut();
        // Keep a reserve so that decrypted and staged packets always find a buffer.
        let want = io::MAX_BATCH.min(arena.available().saturating_sub(64));
        for _ in 0..want {
            match arena.alloc() {
                Some(h) => self.handles.push(h),
                None => break,
            }
        }
        self.handles.len()
    }

    pub fn read_udp(&mut self) {
        for _ in 0..BATCHES_PER_WAKE {
            if self.alloc_batch() == 0 {
                return;
            }
            let (udp, rx, metas) = (&self.udp, &mut self.rx, &mut self.metas);
            let arena = self.wg.context_mut().arena_mut();
            let n = arena.with_rx_slices(&self.handles, udp_rx_starts(), |bufs| {
                udp.recv_batch_with(rx, bufs, metas).unwrap_or(0)
            });
            self.good.clear();
            for (&h, m) in self.handles[..n].iter().zip(&self.metas) {
                if m.truncated {
                    // No WireGuard message is this long; the graph never sees it.
                    self.udp_truncated += 1;
                    arena.free(h);
                    continue;
                }
                let meta = arena.meta_mut(h);
                meta.len = m.len as u16;
                meta.addr = m.src;
                self.good.push(h);
            }
            for &h in &self.handles[n..] {
                arena.free(h);
            }
            self.wg.from_udp(&self.good);
            self.run(Instant::now());
            if n < io::MAX_BATCH {
                return;
            }
        }
    }

    pub fn read_tun(&mut self) -> std::io::Result<()> {
        for _ in 0..BATCHES_PER_WAKE {
            if self.alloc_batch() == 0 {
                return Ok(());
            }
            let (tun, lens) = (&self.tun, &mut self.lens);
            let starts = tun_rx_starts(self.wg.context().wg_mtu());
            let arena = self.wg.context_mut().arena_mut();
            let res =
                arena.with_rx_slices(&self.handles, starts, |bufs| tun.read_batch(bufs, lens));
            let n = match res {
                Ok(n) => n,
                Err(e) => {
                    for &h in &self.handles {
                        arena.free(h);
                    }
                    return Err(e);
                }
            };
            for (&h, &len) in self.handles[..n].iter().zip(&self.lens) {
                arena.meta_mut(h).len = len as u16;
            }
            for &h in &self.handles[n..] {
                arena.free(h);
            }
            self.wg.from_tun(&self.handles[..n]);
            self.run(Instant::now());
            if n < io::MAX_BATCH {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Sends what the graph queued: control messages one by one, datagrams in batches
    /// of up to a frame, inner packets to the TUN. The slices for a batch live on the
    /// stack, so sending allocates nothing.
    pub fn drain(&mut self) {
        let cx = self.wg.context_mut();
        let udp = &self.udp;
        let failed = &mut self.udp_send_failed;
        cx.send_control(|to, msg| {
            if udp.send_to(msg, to).is_err() {
                *failed += 1;
            }
        });
        let (gso, tx) = (&mut self.tx_gso, &mut self.tx);
        cx.send_output(UDP_OUT, |arena, queue| {
            let mut pkts: [(&[u8], SocketAddr); FRAME_LEN] = [(&[], NO_ADDR); FRAME_LEN];
            for chunk in queue.chunks(FRAME_LEN) {
                for (p, &h) in pkts.iter_mut().zip(chunk) {
                    *p = (arena.data(h), arena.meta(h).addr);
                }
                let res = udp.send_gso_batch_with(gso, tx, &pkts[..chunk.len()]);
                *failed += res.failed as u64;
            }
        });
        let tun = &self.tun;
        cx.send_output(TUN_OUT, |arena, queue| {
            let mut pkts: [&[u8]; FRAME_LEN] = [&[]; FRAME_LEN];
            for chunk in queue.chunks(FRAME_LEN) {
                for (p, &h) in pkts.iter_mut().zip(chunk) {
                    *p = arena.data(h);
                }
                tun.write_batch(&pkts[..chunk.len()]);
            }
        });
    }
}
