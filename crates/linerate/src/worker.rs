//! The data-path thread of host mode: it owns the TUN, the outer UDP socket and the
//! WireGuard graph, and is the only thread that touches them. Control requests, parsed
//! by the UAPI threads, arrive over a channel with an eventfd wake-up and are carried
//! out between batches of packets, a bounded step at a time.

use crate::counter_report::CounterReport;
use crate::uapi::{self, EADDRINUSE, EIO, Job, SocketSettings};
use dataplane::graph::FRAME_LEN;
use dataplane::wg::{TUN_OUT, UDP_OUT, WgGraph};
use dataplane::{HEADROOM, Handle};
use io::{
    GsoSendBatch, Interest, PollFd, RecvBatch, RecvMeta, SendBatch, TunDevice, UdpSocket, Waker,
};
use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::time::{Duration, Instant};

/// Batches read per readable socket before the loop looks at the others again.
const BATCHES_PER_WAKE: usize = 8;
/// Longest sleep: the loop also checks that the TUN and the UAPI socket still exist.
const MAX_SLEEP: Duration = Duration::from_millis(500);

/// A placeholder for the unused entries of a batch array.
const NO_ADDR: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));

/// Longest time one step of a control request may hold the packets back.
const CONTROL_STEP: Duration = Duration::from_micros(300);

/// What a control request asks of the worker.
pub enum Control {
    Uapi(uapi::Request),
    /// `linerate show counters`.
    Counters,
    /// `linerate show WHAT` of a gateway (interfaces, runtime, fib, neighbors,
    /// metrics); host mode has none of these and refuses.
    Show(String),
}

pub struct ControlRequest {
    pub what: Control,
    pub reply: SyncSender<String>,
}

/// The outer socket and its settings, as the UAPI sees them.
pub struct Outer {
    pub udp: UdpSocket,
    pub fwmark: u32,
    pub port: u16,
}

impl SocketSettings for Outer {
    fn listen_port(&self) -> u16 {
        self.port
    }

    fn set_listen_port(&mut self, port: u16) -> Result<(), i32> {
        if port == self.port && port != 0 {
            return Ok(());
        }
        let udp = UdpSocket::bind(port).map_err(|e| e.raw_os_error().unwrap_or(EADDRINUSE))?;
        if self.fwmark != 0 {
            udp.set_fwmark(self.fwmark)
                .map_err(|e| e.raw_os_error().unwrap_or(EIO))?;
        }
        let _ = udp.set_buffer_sizes(4 << 20, 4 << 20);
        self.port = udp.local_port();
        self.udp = udp;
        Ok(())
    }

    fn fwmark(&self) -> u32 {
        self.fwmark
    }

    fn set_fwmark(&mut self, mark: u32) -> Result<(), i32> {
        self.udp
            .set_fwmark(mark)
            .map_err(|e| e.raw_os_error().unwrap_or(EIO))?;
        self.fwmark = mark;
        Ok(())
    }
}

/// Why the loop ended.
#[derive(Debug)]
pub enum Exit {
    Signal,
    TunGone,
    SocketGone,
    Fatal(String),
}

pub struct Worker {
    pub tun: TunDevice,
    pub outer: Outer,
    pub wg: WgGraph,
    pub requests: Receiver<ControlRequest>,
    /// UAPI requests being carried out, oldest first, each with where its reply goes.
    jobs: VecDeque<(Job, SyncSender<String>)>,
    pub waker: Arc<Waker>,
    pub stop: Arc<AtomicBool>,
    /// Checked every loop: false once the UAPI socket file is gone.
    pub socket_alive: Box<dyn Fn() -> bool + Send>,
    rx: RecvBatch,
    tx: SendBatch,
    tx_gso: GsoSendBatch,
    metas: Vec<RecvMeta>,
    lens: Vec<usize>,
    /// Datagrams longer than a buffer, dropped before the graph sees them.
    udp_truncated: u64,
    /// Datagrams the kernel refused or the full socket buffer turned away.
    udp_send_failed: u64,
    /// Times the interface MTU was set above what the data path carries and set back.
    mtu_refused: u64,
    /// Buffers for the batch being read, and those of it that go on to the graph.
    handles: Vec<Handle>,
    good: Vec<Handle>,
}

impl Worker {
    pub fn new(
        tun: TunDevice,
        outer: Outer,
        wg: WgGraph,
        requests: Receiver<ControlRequest>,
        waker: Arc<Waker>,
        stop: Arc<AtomicBool>,
        socket_alive: Box<dyn Fn() -> bool + Send>,
    ) -> Worker {
        Worker {
            tun,
            outer,
            wg,
            requests,
            jobs: VecDeque::new(),
            waker,
            stop,
            socket_alive,
            rx: RecvBatch::new(),
            tx: SendBatch::new(),
            tx_gso: GsoSendBatch::new(),
            metas: vec![RecvMeta::default(); io::MAX_BATCH],
            lens: vec![0; io::MAX_BATCH],
            udp_truncated: 0,
            udp_send_failed: 0,
            mtu_refused: 0,
            handles: Vec::with_capacity(io::MAX_BATCH),
            good: Vec::with_capacity(io::MAX_BATCH),
        }
    }

    pub fn run(&mut self) -> Exit {
        let mut last_check = Instant::now();
        self.check_mtu();
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return Exit::Signal;
            }
            let now = Instant::now();
            let sleep = if self.jobs.is_empty() {
                self.wg.context().wg_timers_due_in(now, MAX_SLEEP)
            } else {
                Duration::ZERO // a request is half done: look at packets, then go on
            };
            let mut fds = [
                PollFd::new(self.tun.as_raw_fd(), Interest::READABLE),
                PollFd::new(self.outer.udp.as_raw_fd(), Interest::READABLE),
                PollFd::new(self.waker.as_raw_fd(), Interest::READABLE),
            ];
            if let Err(e) = io::poll(&mut fds, Some(sleep)) {
                return Exit::Fatal(format!("poll: {e}"));
            }
            if fds[1].readable() {
                self.read_udp();
            }
            if (fds[0].readable() || fds[0].error())
                && let Err(e) = self.read_tun()
            {
                if io::is_gone(&e) {
                    return Exit::TunGone;
                }
                return Exit::Fatal(format!("reading the TUN: {e}"));
            }
            if fds[2].readable() {
                self.waker.drain();
                while let Ok(req) = self.requests.try_recv() {
                    match req.what {
                        Control::Counters => {
                            let _ = req
                                .reply
                                .send(self.counter_report().to_text() + "errno=0\n\n");
                        }
                        Control::Show(_) => {
                            let _ = req.reply.send(uapi::errno(uapi::EINVAL));
                        }
                        Control::Uapi(r) => {
                            let job = Job::new(r, self.wg.context().wg_device());
                            self.jobs.push_back((job, req.reply));
                        }
                    }
                }
            }
            self.control_step();
            let now = Instant::now();
            self.wg.tick(now);
            self.wg.run(now);
            self.drain();
            if now.saturating_duration_since(last_check) >= MAX_SLEEP {
                last_check = now;
                if !self.tun.still_exists() {
                    return Exit::TunGone;
                }
                self.check_mtu();
                if !(self.socket_alive)() {
                    return Exit::SocketGone;
                }
            }
        }
    }

    /// Follows the interface MTU, which bounds the padding, and refuses one larger than
    /// the data path's buffers carry: the MTU is set back to the largest it carries, so
    /// the kernel fragments larger packets before they reach us instead of our dropping
    /// them, and the refusal is logged and counted.
    fn check_mtu(&mut self) {
        let Ok(mtu) = self.tun.mtu() else {
            return; // the interface is going; the loop notices
        };
        let mut mtu = mtu as usize;
        if mtu > dataplane::wg::MAX_MTU {
            let max = dataplane::wg::MAX_MTU;
            self.mtu_refused += 1;
            match self.tun.set_mtu(max as u32) {
                Ok(()) => {
                    eprintln!(
                        "linerate: {}: MTU {mtu} refused: this data path carries inner packets of at most {max} bytes (2048-byte buffers); MTU set back to {max}",
                        self.tun.name()
                    );
                    mtu = max;
                }
                Err(e) => eprintln!(
                    "linerate: {}: MTU {mtu} is more than this data path carries ({max} bytes), and setting it back failed: {e}; packets over {max} bytes are dropped and counted as tun.too_big",
                    self.tun.name()
                ),
            }
        }
        self.wg.set_mtu(mtu);
    }

    /// One bounded step of the oldest control request; its reply goes out when done.
    fn control_step(&mut self) {
        let Some((job, _)) = self.jobs.front_mut() else {
            return;
        };
        let now = Instant::now();
        let done = job.step(
            self.wg.context_mut().wg_device_mut(),
            &mut self.outer,
            now,
            now + CONTROL_STEP,
        );
        if let Some(reply) = done
            && let Some((_, to)) = self.jobs.pop_front()
        {
            let _ = to.send(reply);
        }
        // A set may have asked for handshakes or keepalives.
        self.wg.run(now);
        self.drain();
    }

    /// Everything the interface counts, for `linerate show counters`.
    pub fn counter_report(&self) -> CounterReport {
        let mut r = CounterReport::from_graph(self.wg.counters());
        for (name, value) in [
            ("tun.too_big", self.tun.too_big()),
            ("tun.malformed", self.tun.malformed()),
            ("tun.dropped", self.tun.dropped()),
            ("tun.mtu_refused", self.mtu_refused),
            ("udp.truncated", self.udp_truncated),
            ("udp.send_failed", self.udp_send_failed),
        ] {
            r.add_other(name, value);
        }
        r.add_inflight(self.wg.context().inflight_counters());
        r
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

    fn read_udp(&mut self) {
        for _ in 0..BATCHES_PER_WAKE {
            if self.alloc_batch() == 0 {
                return;
            }
            let (udp, rx, metas) = (&self.outer.udp, &mut self.rx, &mut self.metas);
            let arena = self.wg.context_mut().arena_mut();
            let n = arena.with_rx_slices(&self.handles, HEADROOM, |bufs| {
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
            let now = Instant::now();
            self.wg.run(now);
            self.drain();
            if n < io::MAX_BATCH {
                return;
            }
        }
    }

    fn read_tun(&mut self) -> std::io::Result<()> {
        for _ in 0..BATCHES_PER_WAKE {
            if self.alloc_batch() == 0 {
                return Ok(());
            }
            let (tun, lens) = (&self.tun, &mut self.lens);
            let arena = self.wg.context_mut().arena_mut();
            let res =
                arena.with_rx_slices(&self.handles, HEADROOM, |bufs| tun.read_batch(bufs, lens));
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
            let now = Instant::now();
            self.wg.run(now);
            self.drain();
            if n < io::MAX_BATCH {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Sends what the graph queued: control messages one by one, datagrams in batches
    /// of up to a frame, inner packets to the TUN. The slices for a batch live on the
    /// stack, so sending allocates nothing.
    fn drain(&mut self) {
        let cx = self.wg.context_mut();
        let udp = &self.outer.udp;
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
