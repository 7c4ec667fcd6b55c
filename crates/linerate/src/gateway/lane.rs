//! What every gateway worker runs, the owner of the WireGuard device and its
//! followers alike: its own queue of each port, its own graph (arena, engines, FIB,
//! neighbor table), and the turn that moves frames between them. A turn waits for
//! frames on the ports (or the worker's wake-up), reads a bounded number of batches
//! from each port that has some, running the graph after each so buffers go round,
//! then runs the timers and sends what the graph queued.

use crate::control::counter_report::CounterReport;
use crate::service::Heartbeat;
use dataplane::NodeCounters;
use dataplane::fib::PortId;
use dataplane::gateway::GatewayGraph;
use dataplane::neighbor::NeighborInfo;
use io::{Interest, PollFd, Waker};
use ports::{Port, PortCounters, RX_BATCH};
use std::time::{Duration, Instant};

/// Batches read from one port per turn before the others get theirs.
const BATCHES_PER_TURN: usize = 8;
/// How often the neighbor table's timers run (probes are a second apart).
pub const NEIGHBOR_TICK: Duration = Duration::from_millis(10);

pub struct Lane {
    /// The worker's number: 0 is the owner of the WireGuard device.
    pub index: usize,
    /// The worker's queue of each port. (An AF_XDP port keeps the arena's memory
    /// it registered alive itself, whichever of the two is dropped first.)
    pub ports: Vec<Port>,
    pub gw: GatewayGraph,
    started: Instant,
    last_tick: Instant,
    /// When an address conflict was last said (they are said 10 s apart at most).
    last_conflict_said: Option<Instant>,
    fds: Vec<PollFd>,
    /// Bumped every turn, for the service manager's watchdog.
    heartbeat: Heartbeat,
}

/// One port as one worker saw it.
#[derive(Clone, Debug)]
pub struct PortSnapshot {
    pub id: PortId,
    pub name: String,
    pub ifname: String,
    pub driver: &'static str,
    pub counters: PortCounters,
    pub driver_counters: Vec<(&'static str, u64)>,
    /// The frames the driver lost, by reason, each once.
    pub drops: Vec<(&'static str, u64)>,
}

/// What one worker has done, for `show` and the metrics, taken on its own thread.
#[derive(Clone, Debug)]
pub struct LaneSnapshot {
    pub index: usize,
    pub uptime: Duration,
    pub nodes: Vec<(&'static str, NodeCounters)>,
    pub ports: Vec<PortSnapshot>,
    pub neighbors: Vec<NeighborInfo>,
    pub counters: CounterReport,
}

impl Lane {
    pub fn new(index: usize, gw: GatewayGraph, ports: Vec<Port>) -> Lane {
        let now = Instant::now();
        Lane {
            index,
            ports,
            gw,
            started: now,
            last_tick: now,
            last_conflict_said: None,
            fds: Vec::new(),
            heartbeat: Heartbeat::default(),
        }
    }

    /// The worker's heartbeat, which every turn bumps (see `service`).
    pub fn heartbeat(&self) -> Heartbeat {
        self.heartbeat.clone()
    }

    /// Waits up to `sleep` for frames or `waker` (not at all while it lingers to
    /// help other workers with their frames), and reads what came into the graph.
    /// True when `waker` fired (it is not drained here).
    pub fn receive(&mut self, waker: &Waker, sleep: Duration) -> Result<bool, String> {
        let sleep = self.gw.context_mut().helper_sleep(sleep);
        self.fds.clear();
        self.fds.extend(
            self.ports
                .iter()
                .map(|p| PollFd::new(p.fd(), Interest::READABLE)),
        );
        self.fds
            .push(PollFd::new(waker.as_raw_fd(), Interest::READABLE));
        io::poll(&mut self.fds, Some(sleep)).map_err(|e| format!("poll: {e}"))?;
        let now = Instant::now();
        for (i, port) in self.ports.iter_mut().enumerate() {
            if !self.fds[i].readable() {
                continue;
            }
            for _ in 0..BATCHES_PER_TURN {
                let n = port.receive(&mut self.gw);
                // Run each batch at once so buffers go round instead of piling up.
                self.gw.run(now);
                if n < RX_BATCH {
                    break;
                }
            }
        }
        Ok(self.fds[self.ports.len()].readable())
    }

    /// Ends a turn: the timers when due, the graph, what it queued sent, and the
    /// pieces of other workers' frames posted for help run.
    pub fn finish(&mut self) {
        self.heartbeat.beat();
        let now = Instant::now();
        if now.saturating_duration_since(self.last_tick) >= NEIGHBOR_TICK {
            self.last_tick = now;
            self.gw.tick(now);
            self.say_conflict(now);
        }
        self.gw.run(now);
        self.transmit();
        self.gw.context_mut().help_others();
    }

    /// Says on stderr that a station claims one of the gateway's addresses (the
    /// graph counts each such ARP as `arp-input address-conflict`), every 10 s at
    /// most.
    fn say_conflict(&mut self, now: Instant) {
        const EVERY: Duration = Duration::from_secs(10);
        if self
            .last_conflict_said
            .is_some_and(|t| now.saturating_duration_since(t) < EVERY)
        {
            return;
        }
        let Some((port, addr, mac)) = self.gw.context_mut().ip_mut().take_conflict() else {
            return;
        };
        self.last_conflict_said = Some(now);
        let name = self
            .ports
            .iter()
            .find(|p| p.id == port)
            .map_or("?", |p| p.name.as_str());
        eprintln!(
            "linerate: warning: port {name}: the station at {} claims {addr}, an address of the gateway's own (an address conflict on that network; not learned, counted as arp-input address-conflict)",
            wire::ethernet::MacAddr(mac)
        );
    }

    /// Sends what the graph queued on every port.
    pub fn transmit(&mut self) {
        for port in &mut self.ports {
            port.transmit(&mut self.gw);
        }
    }

    /// This worker's node counters, its ports' and the asynchronous engines'.
    pub fn counter_report(&self) -> CounterReport {
        let mut r = CounterReport::from_graph(self.gw.counters());
        for p in &self.ports {
            let c = p.counters();
            for (name, v) in [
                ("rx_packets", c.rx_packets),
                ("rx_bytes", c.rx_bytes),
                ("tx_packets", c.tx_packets),
                ("tx_bytes", c.tx_bytes),
                ("rx_no_buffer_polls", c.rx_no_buffer_polls),
                ("tx_dropped", c.tx_dropped),
            ] {
                r.add_other(&format!("port.{}.{name}", p.name), v);
            }
            for (name, v) in p.driver_counters() {
                r.add_other(&format!("port.{}.{name}", p.name), v);
            }
            r.add_drops(&io::port_drops::node_name(&p.name), &p.drops());
        }
        let cx = self.gw.context();
        let arena = cx.arena();
        let held: usize = self.ports.iter().map(Port::buffers_held).sum();
        r.add_other("buffers.total", arena.capacity() as u64);
        r.add_other("buffers.free", arena.available() as u64);
        r.add_other("buffers.driver", held as u64);
        r.add_other("neighbors.news_lost", cx.ip().neighbor_news_lost());
        r.add_other("ip.reassembled", cx.ip().reassembled());
        r.add_inflight(cx.inflight_counters());
        r.add_late(cx.late_counters());
        r.add_handoff(cx.handoff_counters());
        r.add_spread(cx.spread_counters());
        r
    }

    pub fn snapshot(&self) -> LaneSnapshot {
        LaneSnapshot {
            index: self.index,
            uptime: self.started.elapsed(),
            nodes: self.gw.counters().map(|(n, c)| (n, c.clone())).collect(),
            ports: self
                .ports
                .iter()
                .map(|p| PortSnapshot {
                    id: p.id,
                    name: p.name.clone(),
                    ifname: p.ifname.clone(),
                    driver: p.driver_name(),
                    counters: p.counters(),
                    driver_counters: p.driver_counters(),
                    drops: p.drops(),
                })
                .collect(),
            neighbors: self.gw.context().ip().neighbors().entries(),
            counters: self.counter_report(),
        }
    }
}
