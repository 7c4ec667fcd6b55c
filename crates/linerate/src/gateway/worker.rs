//! The gateway's first worker, the owner: it runs its own lane (its queue of each
//! port and its graph, see `lane`) like every worker, and owns what is one per
//! gateway: the WireGuard device, which the other workers follow (`follower`), and
//! the control. Requests from the control and UAPI sockets arrive over a channel
//! with an eventfd wake-up and are carried out between batches, a bounded step at a
//! time; a reload arrives the same way. What they change for every worker (routes,
//! the tunnel's port and MTU) goes to the followers over their channels, and what
//! they ask of every worker (counters) comes back the same way.

use super::follower::{FollowerHandle, LaneControl, LaneRequests};
use super::lane::{Lane, LaneSnapshot, NEIGHBOR_TICK};
use super::reload::Changes;
use super::report::{self, Shown};
use crate::control::counter_report::CounterReport;
use crate::control::request::{Control, ControlRequest};
use crate::control::uapi::{self, EINVAL, Job, SocketSettings};
use io::Waker;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::time::{Duration, Instant};

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
    /// Carry out a step of the key exchange: install or remove its SAs, send its
    /// datagrams; the reply says what was done or refused.
    Ike(super::ike::IkeWork),
    /// Carry out a step of the OpenVPN servers' control: add or remove clients
    /// and keys, send its datagrams; the reply says what was refused.
    Ovpn(super::ovpn::OvpnWork),
}

pub struct Worker {
    /// This worker's queues and graph; its graph holds the WireGuard device.
    pub lane: Lane,
    /// The other workers.
    pub followers: Vec<FollowerHandle>,
    /// The WireGuard interface's name, for reports.
    pub tunnel_name: Option<String>,
    pub requests: Receiver<ControlRequest>,
    pub gateway_requests: Receiver<(GatewayControl, SyncSender<String>)>,
    pub waker: Arc<Waker>,
    pub stop: Arc<AtomicBool>,
    jobs: VecDeque<(Job, SyncSender<String>)>,
    socket: TunnelSocket,
    /// The key exchange's state, when the gateway runs one.
    pub ike: Option<Arc<std::sync::Mutex<super::ike::IkeStatus>>>,
    /// The OpenVPN servers' state, when the gateway has any.
    pub ovpn: Option<Arc<std::sync::Mutex<super::ovpn::OvpnStatus>>>,
}

impl Worker {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        lane: Lane,
        followers: Vec<FollowerHandle>,
        tunnel_name: Option<String>,
        requests: Receiver<ControlRequest>,
        gateway_requests: Receiver<(GatewayControl, SyncSender<String>)>,
        waker: Arc<Waker>,
        stop: Arc<AtomicBool>,
    ) -> Worker {
        let port = lane.gw.context().wg_listen_port();
        Worker {
            lane,
            followers,
            tunnel_name,
            requests,
            gateway_requests,
            waker,
            stop,
            jobs: VecDeque::new(),
            socket: TunnelSocket { port, fwmark: 0 },
            ike: None,
            ovpn: None,
        }
    }

    /// Runs the owner's loop until a signal (or a follower's failure) sets `stop`,
    /// then stops the followers and waits for them; an error when polling fails.
    pub fn run(&mut self) -> Result<(), String> {
        let result = self.run_loop();
        self.stop.store(true, Ordering::Relaxed);
        for f in &mut self.followers {
            f.join();
        }
        result
    }

    fn run_loop(&mut self) -> Result<(), String> {
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            let sleep = if self.jobs.is_empty() {
                let cx = self.lane.gw.context();
                cx.wg_timers_due_in(Instant::now(), NEIGHBOR_TICK)
            } else {
                Duration::ZERO // a request is half done: look at packets, then go on
            };
            if self.lane.receive(&self.waker, sleep)? {
                self.waker.drain();
                // (A follower's nudge wakes the loop too: its report is taken in
                // with the graph's run.)
                self.take_requests();
            }
            self.control_step();
            self.lane.finish();
        }
    }

    fn take_requests(&mut self) {
        let requests: Vec<ControlRequest> = self.requests.try_iter().collect();
        if !requests.is_empty() {
            self.take_in_reports();
        }
        for req in requests {
            let reply = match req.what {
                Control::Counters => self.counter_report().to_text() + "errno=0\n\n",
                Control::Show(what) if what == "ike" => match &self.ike {
                    Some(status) => {
                        let text =
                            super::ike::show(&status.lock().expect("status lock"), Instant::now());
                        format!("{text}errno=0\n\n")
                    }
                    None => "no [esp.ike] in this gateway's file\nerrno=0\n\n".to_string(),
                },
                Control::Show(what) if what == "openvpn" => match &self.ovpn {
                    Some(status) => {
                        let text =
                            super::ovpn::show(&status.lock().expect("status lock"), Instant::now());
                        format!("{text}errno=0\n\n")
                    }
                    None => "no [[openvpn]] in this gateway's file\nerrno=0\n\n".to_string(),
                },
                Control::Show(what) => match report::show(&self.shown(), &what) {
                    Some(text) => format!("{text}errno=0\n\n"),
                    None => uapi::errno(EINVAL),
                },
                Control::Uapi(r) => {
                    let job = Job::new(r, self.lane.gw.context().wg_device());
                    self.jobs.push_back((job, req.reply));
                    continue;
                }
                Control::Esp(r) => match self.esp_change(r) {
                    Ok(text) => format!("{text}\nerrno=0\n\n"),
                    Err(why) => format!("{why}\nerrno={}\n\n", uapi::EINVAL),
                },
            };
            let _ = req.reply.send(reply);
        }
        while let Ok((what, reply)) = self.gateway_requests.try_recv() {
            let text = match what {
                GatewayControl::Reload(changes) => self.reload(*changes),
                GatewayControl::Ike(work) => self.ike_work(work),
                GatewayControl::Ovpn(work) => self.ovpn_work(work),
            };
            let _ = reply.send(text);
        }
    }

    /// Adds or removes an ESP SA on every worker: made once here (its key in the
    /// registry all engines read), applied here first (which checks it), then on
    /// each follower.
    fn esp_change(&mut self, r: crate::control::esp_request::EspRequest) -> Result<String, String> {
        use crate::control::esp_request::{EspRequest, SaDirection};
        use dataplane::esp::EspChange;
        let change = match &r {
            EspRequest::Add {
                tunnel: t,
                direction: SaDirection::Out,
                sa,
            } => EspChange::SetOutbound(self.esp_tunnel(t)?, self.outbound_sa(sa)?),
            EspRequest::Add {
                tunnel: t,
                direction: SaDirection::In,
                sa,
            } => EspChange::AddInbound(self.esp_tunnel(t)?, self.inbound_sa(sa)?),
            EspRequest::Remove {
                tunnel: t,
                direction: SaDirection::Out,
                ..
            } => EspChange::ClearOutbound(self.esp_tunnel(t)?),
            EspRequest::Remove {
                tunnel: t,
                direction: SaDirection::In,
                spi,
            } => EspChange::RemoveInbound(self.esp_tunnel(t)?, spi.ok_or("spi= is missing")?),
        };
        self.apply_esp_change(change)
    }

    fn esp_tunnel(&self, name: &str) -> Result<dataplane::esp::EspTunnelId, String> {
        self.lane
            .gw
            .context()
            .esp()
            .find(name)
            .ok_or_else(|| format!("no ESP tunnel named {name:?}"))
    }

    /// An SA from its spec, its key in the registry every worker's engines read.
    fn outbound_sa(
        &self,
        spec: &dataplane::esp::SaSpec,
    ) -> Result<Arc<dataplane::esp::OutboundSa>, String> {
        let keys = self.lane.gw.context().keys();
        dataplane::esp::OutboundSa::new(keys, spec)
            .map(Arc::new)
            .map_err(|e| e.to_string())
    }

    fn inbound_sa(
        &self,
        spec: &dataplane::esp::SaSpec,
    ) -> Result<Arc<dataplane::esp::InboundSa>, String> {
        let keys = self.lane.gw.context().keys();
        dataplane::esp::InboundSa::new(keys, spec)
            .map(Arc::new)
            .map_err(|e| e.to_string())
    }

    /// Applies an ESP change here (which checks it), then on every follower.
    fn apply_esp_change(&mut self, change: dataplane::esp::EspChange) -> Result<String, String> {
        let text = change
            .apply(self.lane.gw.esp_mut())
            .map_err(|e| e.to_string())?;
        for f in &self.followers {
            match f.esp(change.clone()) {
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(format!("worker {}: {e}", f.index)),
                None => return Err(format!("worker {} did not answer", f.index)),
            }
        }
        eprintln!("linerate: {text}");
        Ok(text)
    }

    /// One of the key exchange's ESP changes, made on every worker.
    fn ike_esp_change(&mut self, c: super::ike::IkeEspChange) -> Result<String, String> {
        use super::ike::IkeEspChange;
        use dataplane::esp::EspChange;
        let change = match c {
            IkeEspChange::Peer(t, remote, encap) => {
                EspChange::SetPeer(self.esp_tunnel(&t)?, remote, encap)
            }
            IkeEspChange::AddInbound(t, sa) => {
                EspChange::AddInbound(self.esp_tunnel(&t)?, self.inbound_sa(&sa)?)
            }
            IkeEspChange::RemoveInbound(t, spi) => {
                EspChange::RemoveInbound(self.esp_tunnel(&t)?, spi)
            }
            IkeEspChange::AddOutbound(t, sa) => {
                EspChange::AddStandbyOutbound(self.esp_tunnel(&t)?, self.outbound_sa(&sa)?)
            }
            IkeEspChange::Seal(t, spi) => EspChange::SealWith(self.esp_tunnel(&t)?, spi),
            IkeEspChange::RemoveOutbound(t, spi) => {
                EspChange::RemoveOutbound(self.esp_tunnel(&t)?, spi)
            }
        };
        self.apply_esp_change(change)
    }

    /// One step of the key exchange: its ESP changes in order (each one's result a
    /// line of the reply), then its datagrams through the graph.
    fn ike_work(&mut self, work: super::ike::IkeWork) -> String {
        let mut text = String::new();
        for c in work.esp {
            let done = self.ike_esp_change(c);
            if let Err(e) = done {
                text.push_str(&format!("refused: {e}\n"));
            }
        }
        text.push_str(&self.send_datagrams(&work.datagrams));
        text
    }

    /// A control thread's datagrams, each from its port, through the graph; what
    /// could not be sent, said.
    fn send_datagrams(&mut self, datagrams: &[(u16, std::net::SocketAddr, Vec<u8>)]) -> String {
        let mut text = String::new();
        let mut unsent = 0;
        for (src_port, to, payload) in datagrams {
            let max = self.lane.gw.context().arena().max_data();
            if payload.len() > max {
                // Only an IKE peer that takes no IKE fragments (RFC 7383) is
                // sent one message this large.
                text.push_str(&format!(
                    "a message of {} bytes to {to} not sent: more than a buffer holds ({}), and the peer takes no IKE fragments\n",
                    payload.len(),
                    max
                ));
                continue;
            }
            if !self.lane.gw.send_udp(*src_port, *to, payload) {
                unsent += 1;
            }
        }
        if unsent > 0 {
            text.push_str(&format!(
                "{unsent} datagram(s) not sent: no buffer (udp-encap no-buffer)\n"
            ));
        }
        self.lane.gw.run(std::time::Instant::now());
        text
    }

    /// One step of the OpenVPN control: its changes in order on every worker
    /// (each refusal a line of the reply), then its datagrams through the graph.
    fn ovpn_work(&mut self, work: super::ovpn::OvpnWork) -> String {
        let mut text = String::new();
        let mut applied = Vec::with_capacity(work.changes.len());
        for change in work.changes {
            match self.lane.gw.ovpn_mut().apply(&change) {
                Ok(()) => applied.push(change),
                Err(e) => text.push_str(&format!("refused: {e}\n")),
            }
        }
        // One round trip per follower for the whole step.
        if !applied.is_empty() {
            for f in &self.followers {
                match f.ovpn(applied.clone()) {
                    Some(refused) => {
                        for e in refused {
                            text.push_str(&format!("worker {}: refused: {e}\n", f.index));
                        }
                    }
                    None => text.push_str(&format!("worker {} did not answer\n", f.index)),
                }
            }
        }
        text.push_str(&self.send_datagrams(&work.datagrams));
        text
    }

    /// Applies a reload: everything on this worker, the routes and tunnel settings
    /// on every follower too.
    fn reload(&mut self, changes: Changes) -> String {
        let mut text = String::new();
        for f in &self.followers {
            if f.reload(changes.for_followers()).is_none() {
                text.push_str(&format!(
                    "worker {} did not answer: its routes may lag\n",
                    f.index
                ));
            }
        }
        text.insert_str(0, &changes.apply(&mut self.lane.gw, Instant::now()));
        text
    }

    /// Takes in every follower's report of its traffic so far, so that an answer to
    /// a request counts it.
    fn take_in_reports(&mut self) {
        if self.followers.is_empty() {
            return;
        }
        self.lane.gw.run(Instant::now());
        for f in &self.followers {
            if !f.report() {
                eprintln!(
                    "linerate: worker {} did not send its report in time",
                    f.index
                );
            }
        }
        self.lane.gw.run(Instant::now());
    }

    /// One bounded step of the oldest UAPI request; its reply goes out when done.
    fn control_step(&mut self) {
        let Some((job, _)) = self.jobs.front_mut() else {
            return;
        };
        let now = Instant::now();
        // The port as it is now (a reload may have changed it since the last job).
        let before = self.lane.gw.context().wg_listen_port();
        self.socket.port = before;
        let done = job.step(
            self.lane.gw.context_mut().wg_device_mut(),
            &mut self.socket,
            now,
            now + CONTROL_STEP,
        );
        let mtu = self.lane.gw.context().wg_mtu();
        if self.socket.port != before {
            self.lane.gw.set_wireguard(self.socket.port, mtu);
            for f in &self.followers {
                f.send(LaneControl::Tunnel {
                    listen_port: self.socket.port,
                    mtu,
                });
            }
        }
        if let Some(reply) = done
            && let Some((_, to)) = self.jobs.pop_front()
        {
            let _ = to.send(reply);
        }
        // A set may have asked for handshakes or keepalives.
        self.lane.gw.run(now);
    }

    /// Every worker's snapshot, this one's first (a follower that does not answer
    /// in time is left out, and said so on stderr).
    fn snapshots(&self) -> Vec<LaneSnapshot> {
        let mut out = vec![self.lane.snapshot()];
        for f in &self.followers {
            match f.snapshot() {
                Some(s) => out.push(s),
                None => eprintln!("linerate: worker {} did not answer in time", f.index),
            }
        }
        out
    }

    fn shown(&self) -> Shown<'_> {
        Shown {
            gw: &self.lane.gw,
            tunnel_name: self.tunnel_name.as_deref(),
            lanes: self.snapshots(),
            ike: self.ike.as_deref(),
            ovpn: self.ovpn.as_deref(),
        }
    }

    /// Every worker's counters added up.
    pub fn counter_report(&self) -> CounterReport {
        let mut r = self.lane.counter_report();
        for f in &self.followers {
            match f.snapshot() {
                Some(s) => r.add(&s.counters),
                None => r.add_other("workers.unanswered", 1),
            }
        }
        r
    }
}
