//! The data-path thread of a gateway: it owns the ports and the gateway graph and is
//! the only thread that touches them. Each turn it reads a bounded number of batches
//! from every port that has frames, runs the graph and the timers, and sends what
//! the graph queued. Requests from the control and UAPI sockets arrive over a
//! channel with an eventfd wake-up and are carried out between batches, a bounded
//! step at a time; a reload arrives the same way.

use super::ports::Port;
use super::reload::Changes;
use super::report;
use crate::counter_report::CounterReport;
use crate::uapi::{EINVAL, Job, SocketSettings};
use crate::worker::{Control, ControlRequest};
use dataplane::gateway::GatewayGraph;
use io::{Interest, PollFd, Waker};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::time::{Duration, Instant};

/// Batches read from one port per turn before the others get theirs.
const BATCHES_PER_TURN: usize = 8;
/// How often the neighbor table's timers run (probes are a second apart).
const NEIGHBOR_TICK: Duration = Duration::from_millis(10);
/// Longest time one step of a control request may hold the packets back.
const CONTROL_STEP: Duration = Duration::from_micros(300);

/// The WireGuard interface's socket settings as the UAPI sees them: a gateway has no
/// socket of its own; the port is where the graph takes datagrams, the mark is kept
/// for `wg showconf` and marks nothing (no kernel routing to steer).
struct TunnelSocket {
    port: u16,
    fwmark: u32,
}

impl SocketSettings for TunnelSocket {
    fn listen_port(&self) -> u16 {
        self.port
    }

    fn set_listen_port(&mut self, port: u16) -> Result<(), i32> {
        if port == 0 {
            return Err(EINVAL); // no kernel to pick one: the gateway needs a port
        }
        self.port = port;
        Ok(())
    }

    fn fwmark(&self) -> u32 {
        self.fwmark
    }

    fn set_fwmark(&mut self, mark: u32) -> Result<(), i32> {
        self.fwmark = mark;
        Ok(())
    }
}

/// What a control request asks of a gateway worker beyond host mode's.
pub enum GatewayControl {
    /// Apply a reloaded configuration's changes; the reply lists what changed.
    Reload(Box<Changes>),
}

pub struct Worker {
    /// Declared (so dropped) before the graph: an AF_XDP port's UMEM is the graph's
    /// arena, which must outlive the socket.
    pub ports: Vec<Port>,
    pub gw: GatewayGraph,
    /// The WireGuard interface's name, for reports.
    pub tunnel_name: Option<String>,
    pub requests: Receiver<ControlRequest>,
    pub gateway_requests: Receiver<(GatewayControl, SyncSender<String>)>,
    pub waker: Arc<Waker>,
    pub stop: Arc<AtomicBool>,
    jobs: VecDeque<(Job, SyncSender<String>)>,
    socket: TunnelSocket,
    started: Instant,
}

impl Worker {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        gw: GatewayGraph,
        ports: Vec<Port>,
        tunnel_name: Option<String>,
        requests: Receiver<ControlRequest>,
        gateway_requests: Receiver<(GatewayControl, SyncSender<String>)>,
        waker: Arc<Waker>,
        stop: Arc<AtomicBool>,
    ) -> Worker {
        let port = gw.context().wg_listen_port();
        Worker {
            gw,
            ports,
            tunnel_name,
            requests,
            gateway_requests,
            waker,
            stop,
            jobs: VecDeque::new(),
            socket: TunnelSocket { port, fwmark: 0 },
            started: Instant::now(),
        }
    }

    /// Runs until a signal sets `stop`; an error only when polling fails.
    pub fn run(&mut self) -> Result<(), String> {
        let mut last_tick = Instant::now();
        let mut fds: Vec<PollFd> = Vec::with_capacity(self.ports.len() + 1);
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            let now = Instant::now();
            let sleep = if self.jobs.is_empty() {
                self.gw.context().wg_timers_due_in(now, NEIGHBOR_TICK)
            } else {
                Duration::ZERO
            };
            fds.clear();
            fds.extend(
                self.ports
                    .iter()
                    .map(|p| PollFd::new(p.fd(), Interest::READABLE)),
            );
            fds.push(PollFd::new(self.waker.as_raw_fd(), Interest::READABLE));
            io::poll(&mut fds, Some(sleep)).map_err(|e| format!("poll: {e}"))?;
            let now = Instant::now();
            for (i, port) in self.ports.iter_mut().enumerate() {
                if !fds[i].readable() {
                    continue;
                }
                for _ in 0..BATCHES_PER_TURN {
                    let n = port.receive(&mut self.gw);
                    // Run each batch at once so buffers go round instead of piling up.
                    self.gw.run(now);
                    if n < super::ports::RX_BATCH {
                        break;
                    }
                }
            }
            if fds[self.ports.len()].readable() {
                self.waker.drain();
                self.take_requests();
            }
            self.control_step();
            if now.saturating_duration_since(last_tick) >= NEIGHBOR_TICK {
                last_tick = now;
                self.gw.tick(now);
            }
            self.gw.run(now);
            for port in &mut self.ports {
                port.transmit(&mut self.gw);
            }
        }
    }

    fn take_requests(&mut self) {
        while let Ok(req) = self.requests.try_recv() {
            let reply = match req.what {
                Control::Counters => self.counter_report().to_text() + "errno=0\n\n",
                Control::Show(what) => match report::show(self, &what) {
                    Some(text) => format!("{text}errno=0\n\n"),
                    None => crate::uapi::errno(EINVAL),
                },
                Control::Uapi(r) => {
                    let job = Job::new(r, self.gw.context().wg_device());
                    self.jobs.push_back((job, req.reply));
                    continue;
                }
            };
            let _ = req.reply.send(reply);
        }
        while let Ok((what, reply)) = self.gateway_requests.try_recv() {
            let text = match what {
                GatewayControl::Reload(changes) => changes.apply(&mut self.gw, Instant::now()),
            };
            let _ = reply.send(text);
        }
    }

    /// One bounded step of the oldest UAPI request; its reply goes out when done.
    fn control_step(&mut self) {
        let Some((job, _)) = self.jobs.front_mut() else {
            return;
        };
        let now = Instant::now();
        // The port as it is now (a reload may have changed it since the last job).
        self.socket.port = self.gw.context().wg_listen_port();
        let done = job.step(
            self.gw.context_mut().wg_device_mut(),
            &mut self.socket,
            now,
            now + CONTROL_STEP,
        );
        let mtu = self.gw.context().wg_mtu();
        self.gw.set_wireguard(self.socket.port, mtu);
        if let Some(reply) = done
            && let Some((_, to)) = self.jobs.pop_front()
        {
            let _ = to.send(reply);
        }
        // A set may have asked for handshakes or keepalives.
        self.gw.run(now);
    }

    /// Every node's counters, each port's and the asynchronous engines'.
    pub fn counter_report(&self) -> CounterReport {
        let mut r = CounterReport::from_graph(self.gw.counters());
        for p in &self.ports {
            let c = p.counters();
            for (name, v) in [
                ("rx_packets", c.rx_packets),
                ("rx_bytes", c.rx_bytes),
                ("tx_packets", c.tx_packets),
                ("tx_bytes", c.tx_bytes),
                ("rx_no_buffer", c.rx_no_buffer),
                ("tx_dropped", c.tx_dropped),
            ] {
                r.add_other(&format!("port.{}.{name}", p.name), v);
            }
            for (name, v) in p.driver_counters() {
                r.add_other(&format!("port.{}.{name}", p.name), v);
            }
        }
        let arena = self.gw.context().arena();
        let held: usize = self.ports.iter().map(Port::buffers_held).sum();
        r.add_other("buffers.total", arena.capacity() as u64);
        r.add_other("buffers.free", arena.available() as u64);
        r.add_other("buffers.driver", held as u64);
        r.add_inflight(self.gw.context().inflight_counters());
        r
    }

    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }
}
