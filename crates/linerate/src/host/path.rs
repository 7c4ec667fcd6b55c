//! One host-mode worker's data path: its TUN queue, its UDP socket and its graph, and
//! the loop steps that move packets between them in batches. The owner of the device
//! and every follower run one each (see `worker` and `follower`); only these
//! threads touch them.

use crate::control::counter_report::CounterReport;
use crate::service::Heartbeat;
use dataplane::wg::WgGraph;
use io::{TunDevice, UdpSocket};
use ports::{TunPort, UdpPort};
use std::time::Instant;

/// Batches read per readable socket before the loop looks at the others again.
const BATCHES_PER_WAKE: usize = 8;

pub struct HostPath {
    pub tun: TunPort,
    pub udp: UdpPort,
    pub wg: WgGraph,
    /// Bumped every turn (every [`run`](HostPath::run)), for the service
    /// manager's watchdog.
    heartbeat: Heartbeat,
}

impl HostPath {
    pub fn new(tun: TunDevice, udp: UdpSocket, wg: WgGraph) -> HostPath {
        HostPath {
            tun: TunPort::new(tun),
            udp: UdpPort::new(udp),
            wg,
            heartbeat: Heartbeat::default(),
        }
    }

    /// The worker's heartbeat (see `service`).
    pub fn heartbeat(&self) -> Heartbeat {
        self.heartbeat.clone()
    }

    /// This worker's counters: its graph's and its drivers'.
    pub fn counter_report(&self) -> CounterReport {
        let mut r = CounterReport::from_graph(self.wg.counters());
        let tun = &self.tun.device;
        for (name, value) in [
            ("tun.too_big", tun.too_big()),
            ("tun.malformed", tun.malformed()),
            ("tun.dropped", tun.dropped()),
            ("udp.truncated", self.udp.truncated()),
            ("udp.send_failed", self.udp.send_failed()),
        ] {
            r.add_other(name, value);
        }
        r.add_inflight(self.wg.context().inflight_counters());
        r.add_late(self.wg.context().late_counters());
        r.add_spread(self.wg.context().spread_counters());
        r
    }

    /// Runs the graph (and what it leaves for the device) and sends what it queued.
    pub fn run(&mut self, now: Instant) {
        self.heartbeat.beat();
        self.wg.run(now);
        self.drain();
    }

    pub fn read_udp(&mut self) {
        for _ in 0..BATCHES_PER_WAKE {
            let Some(n) = self.udp.receive(&mut self.wg) else {
                return;
            };
            self.run(Instant::now());
            if n < io::MAX_BATCH {
                return;
            }
        }
    }

    pub fn read_tun(&mut self) -> std::io::Result<()> {
        for _ in 0..BATCHES_PER_WAKE {
            let Some(n) = self.tun.receive(&mut self.wg)? else {
                return Ok(());
            };
            self.run(Instant::now());
            if n < io::MAX_BATCH {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Sends what the graph queued: to the UDP socket, then to the TUN.
    pub fn drain(&mut self) {
        self.udp.transmit(&mut self.wg);
        self.tun.transmit(&mut self.wg);
    }
}
