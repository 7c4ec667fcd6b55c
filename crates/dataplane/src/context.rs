//! The worker context: everything a worker's nodes share. One per worker, used by one
//! thread: the buffer arena, the crypto engines, the time of the batch, the output
//! queues the drivers drain, the frames out at an asynchronous engine, the IP layer
//! of a gateway (ports, routes, neighbors), and the tunnels (WireGuard, VXLAN, ESP;
//! each kind a field of [`Tunnels`]).
//!
//! Nodes, inside this crate, reach the fields directly so that borrows of different
//! parts (the arena and a device, say) stay disjoint; drivers, the bench and tests
//! use the methods.

use crate::arena::{Arena, Handle};
use crate::fib::{PortId, TunnelId};
use crate::graph::HasArena;
use crate::inflight::InFlight;
use crate::ip_layer::IpLayer;
pub use crate::outputs::OutputId;
use crate::outputs::Outputs;
use crate::resume::Resume;
use crate::wg_follow::{FollowerLink, OwnerInbox};
use crypto::{AeadOp, EngineSet, KeyRegistry};
use crypto_async::spread::Spreader;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;
use wire::ethernet::MacAddr;
use wireguard::{
    Device, DropReason, PeerId, ReceivedRun, RecvRun, RecvTicket, RunTally, SendError, SendTicket,
    SentRun, SessionPath,
};

/// Packets waiting on handshakes may hold at most 1/this of the arena.
const MAX_STAGED_SHARE: usize = 4;

/// The WireGuard side of the tunnels: the protocol device, the inner interface's
/// MTU, which bounds the padding (0: not known), and how many buffers the device
/// holds for packets waiting on a handshake.
pub(crate) struct WgTunnel {
    /// The owner's device. A follower's is empty (no key, no peer: it never acts);
    /// its tickets come from `follower`, the owner's sessions shared.
    pub(crate) device: Device,
    pub(crate) follower: Option<FollowerLink>,
    /// The owner's: where its followers' reports arrive.
    pub(crate) inboxes: Vec<OwnerInbox>,
    pub(crate) mtu: usize,
    /// The UDP port the tunnel's datagrams come to and leave from (a gateway's; host
    /// mode's socket knows its own).
    pub(crate) listen_port: u16,
    pub(crate) staged: usize,
    /// The runs of packets sent and received not yet told to the device.
    pub(crate) runs: RunTally,
    /// At most this many buffers wait on handshakes, so that peers that never answer
    /// cannot take the pool the rest of the traffic needs.
    pub(crate) max_staged: usize,
    /// The sessions this worker sealed on whose packets may still wait to leave.
    pub(crate) ledger: crate::seal_ledger::SealLedger,
}

/// Runs `$call` with `$p` bound to this worker's side of the tunnel's data path
/// (`wireguard::SessionPath`): the follower's when the worker follows the device,
/// else the device itself. The one place the two are told apart; both sides are
/// the same trait, so the call is the same code either way.
macro_rules! on_path {
    (ref $device:expr, $follower:expr, $p:ident => $call:expr) => {
        match $follower {
            Some(f) => {
                let $p = &f.follower;
                $call
            }
            None => {
                let $p = $device;
                $call
            }
        }
    };
    (mut $device:expr, $follower:expr, $p:ident => $call:expr) => {
        match $follower {
            Some(f) => {
                let $p = &mut f.follower;
                $call
            }
            None => {
                let $p = $device;
                $call
            }
        }
    };
}

/// The protocol's side of each packet, from the device on its owner and from the
/// shared sessions on a follower (see `wg_follow`).
impl WgTunnel {
    pub(crate) fn peer_for_destination(&self, dst: std::net::IpAddr) -> Option<PeerId> {
        on_path!(ref &self.device, &self.follower, p => p.peer_for_destination(dst))
    }

    pub(crate) fn send_ticket(
        &mut self,
        peer: PeerId,
        now: Instant,
    ) -> Result<SendTicket, SendError> {
        on_path!(mut &mut self.device, &mut self.follower, p => p.send_ticket(peer, now))
    }

    /// Moves `t`, a ticket this frame took, on to its session's next counter; false
    /// when this worker's block is used up (see `wireguard::Device::advance_ticket`).
    pub(crate) fn advance_ticket(&mut self, t: &mut SendTicket) -> bool {
        on_path!(mut &mut self.device, &mut self.follower, p => p.advance_ticket(t))
    }

    /// The mark of a packet sealed for `peer` on session `serial` with `counter`,
    /// its transport header at `at` (see `seal_ledger`).
    #[inline]
    pub(crate) fn mark_sealed(
        &mut self,
        peer: PeerId,
        serial: u64,
        counter: u64,
        at: u16,
    ) -> crate::arena::SealMark {
        let (device, follower) = (&self.device, &self.follower);
        let session = || on_path!(ref device, follower, p => p.ticket_session(peer, serial));
        match self.ledger.entry_of(serial, session) {
            Some(e) => self.ledger.mark(e, counter, at),
            None => crate::arena::SealMark::NONE,
        }
    }

    /// One packet sent to `peer`: told to the device (or, on a follower, the run's
    /// report) once its run ends (see `wireguard::runs`). Inlined: per packet it is
    /// a compare and three adds.
    #[inline]
    pub(crate) fn note_sent(
        &mut self,
        peer: PeerId,
        plaintext_len: usize,
        wire_len: usize,
        now: Instant,
    ) {
        if let Some(run) = self.runs.sent(peer, plaintext_len, wire_len) {
            self.tell_sent(&run, now);
        }
    }

    /// The session for packets with receiver index `index`, held for one frame's
    /// packets on it (see `wireguard::RecvRun`).
    pub(crate) fn recv_run(&self, index: u32) -> Result<RecvRun, DropReason> {
        on_path!(ref &self.device, &self.follower, p => p.recv_run(index))
    }

    /// Is `inner_src` one of the allowed IPs of the peer `t` names?
    pub(crate) fn source_allowed(&self, t: &RecvTicket, inner_src: std::net::IpAddr) -> bool {
        on_path!(ref &self.device, &self.follower, p => p.source_allowed(t, inner_src))
    }

    /// Commits the counters of packets on `t`'s session that verified, in order
    /// (see `wireguard::replay::ReplayWindow::commit_all`).
    pub(crate) fn commit_counters(
        &self,
        t: &RecvTicket,
        counters: &[u64],
        accepted: &mut [bool],
    ) -> Result<(), DropReason> {
        on_path!(ref &self.device, &self.follower, p => p.commit_counters(t, counters, accepted))
    }

    /// One packet received, its counter committed: told to the device (or, on a
    /// follower, the run's report) once its run ends (see `wireguard::runs`).
    /// Inlined: per packet it is three compares and three adds.
    #[inline]
    pub(crate) fn note_received(
        &mut self,
        t: &RecvTicket,
        data: bool,
        wire_len: usize,
        src: SocketAddr,
        now: Instant,
    ) {
        if let Some(run) = self.runs.received(t, data, wire_len, src) {
            self.tell_received(&run, now);
        }
    }

    /// Tells the runs gathered so far: after every frame of a node that adds to
    /// them, so that the device sees its traffic in the order the graph ran it.
    pub(crate) fn end_frame(&mut self, now: Instant) {
        if let Some(run) = self.runs.take_sent() {
            self.tell_sent(&run, now);
        }
        if let Some(run) = self.runs.take_received() {
            self.tell_received(&run, now);
        }
    }

    #[inline(never)]
    fn tell_sent(&mut self, run: &SentRun, now: Instant) {
        on_path!(mut &mut self.device, &mut self.follower, p => p.note_sent_run(run, now))
    }

    #[inline(never)]
    fn tell_received(&mut self, run: &ReceivedRun, now: Instant) {
        on_path!(mut &mut self.device, &mut self.follower, p => p.note_received_run(run, now))
    }
}

/// What a route into tunnel `TunnelId` leads to: the WireGuard device (tunnel 0)
/// or an ESP tunnel (1 and up, in the order they were added), with the largest
/// inner packet it takes (0: no limit but the buffer's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TunnelEntry {
    WireGuard {
        mtu: usize,
    },
    Esp {
        id: crate::esp::EspTunnelId,
        mtu: usize,
    },
    OpenVpn {
        id: crate::ovpn::OvpnServerId,
        mtu: usize,
    },
}

/// The tunnel number a route names for the WireGuard device.
pub const WG_TUNNEL: TunnelId = TunnelId(0);

/// The tunnel number a route names for ESP tunnel `id`.
pub fn esp_tunnel(id: crate::esp::EspTunnelId) -> TunnelId {
    TunnelId(id.0 + 1)
}

/// Where OpenVPN servers' tunnel numbers begin: above any ESP tunnel's.
const OVPN_TUNNELS: u16 = 0x8000;

/// The tunnel number a route names for OpenVPN server `id`: its clients'
/// addresses (the pool, and routes behind clients) route into it.
pub fn ovpn_tunnel(id: crate::ovpn::OvpnServerId) -> TunnelId {
    TunnelId(OVPN_TUNNELS + id.0)
}

impl Tunnels {
    /// Where a route into `t` leads; `None` for a number no tunnel has.
    pub(crate) fn entry(&self, t: TunnelId) -> Option<TunnelEntry> {
        if let Some(i) = t.0.checked_sub(OVPN_TUNNELS) {
            let id = crate::ovpn::OvpnServerId(i);
            let mtu = self.ovpn.get(id)?.mtu;
            return Some(TunnelEntry::OpenVpn { id, mtu });
        }
        match t.0.checked_sub(1) {
            None => Some(TunnelEntry::WireGuard { mtu: self.wg.mtu }),
            Some(i) => {
                let id = crate::esp::EspTunnelId(i);
                let mtu = self.esp.mtu(id)?;
                Some(TunnelEntry::Esp { id, mtu })
            }
        }
    }
}

/// Every kind of tunnel the worker serves.
pub(crate) struct Tunnels {
    pub(crate) wg: WgTunnel,
    pub(crate) vxlan: crate::vxlan::VxlanTunnels,
    pub(crate) esp: crate::esp::EspTunnels,
    /// The key exchange's inbox, when the gateway runs IKE.
    pub(crate) ike: Option<crate::ike::IkeInbox>,
    pub(crate) ovpn: crate::ovpn::OvpnServers,
}

pub struct Context {
    pub(crate) arena: Arena,
    pub(crate) engines: EngineSet,
    /// The keys the engines' ops name, shared with every tunnel that makes them.
    pub(crate) keys: Arc<KeyRegistry>,
    /// The time of the batch being processed.
    pub(crate) now: Instant,
    pub(crate) outputs: Outputs,
    pub(crate) tunnels: Tunnels,
    pub(crate) inflight: InFlight<Resume>,
    /// Ports, routes and neighbors (a gateway's; empty in host mode).
    pub(crate) ip: IpLayer,
    /// Cross-connects (a gateway's; empty in host mode).
    pub(crate) l2: crate::l2::L2Layer,
    /// This worker's side of the board that spreads full frames over the workers
    /// (none: every frame runs here).
    pub(crate) spread: Option<Spreader>,
    /// This worker's side of the board that gives each outbound ESP SA one
    /// sender (none: this worker seals on every SA itself).
    pub(crate) esp_handoff: Option<crate::esp_handoff::HandoffLink>,
}

impl HasArena for Context {
    fn arena(&mut self) -> &mut Arena {
        &mut self.arena
    }
}

impl Context {
    /// A context with `outputs` output queues, numbered from 0.
    pub fn new(
        arena: Arena,
        engines: EngineSet,
        device: Device,
        outputs: usize,
        now: Instant,
    ) -> Context {
        let buffers = arena.capacity();
        Context {
            arena,
            engines,
            keys: device.keys().clone(),
            now,
            outputs: Outputs::new(outputs),
            tunnels: Tunnels {
                wg: WgTunnel {
                    device,
                    follower: None,
                    inboxes: Vec::new(),
                    mtu: 0,
                    listen_port: 0,
                    staged: 0,
                    runs: RunTally::default(),
                    max_staged: buffers / MAX_STAGED_SHARE,
                    ledger: Default::default(),
                },
                vxlan: Default::default(),
                esp: Default::default(),
                ike: None,
                ovpn: crate::ovpn::OvpnServers::default(),
            },
            inflight: InFlight::new(buffers),
            ip: IpLayer::default(),
            l2: Default::default(),
            spread: None,
            esp_handoff: None,
        }
    }

    pub fn arena(&self) -> &Arena {
        &self.arena
    }

    pub fn arena_mut(&mut self) -> &mut Arena {
        &mut self.arena
    }

    pub fn engines(&self) -> &EngineSet {
        &self.engines
    }

    pub fn now(&self) -> Instant {
        self.now
    }

    pub fn set_now(&mut self, now: Instant) {
        self.now = now;
    }

    pub fn wg_device(&self) -> &Device {
        &self.tunnels.wg.device
    }

    pub fn wg_device_mut(&mut self) -> &mut Device {
        &mut self.tunnels.wg.device
    }

    /// How long a worker may sleep at `now` before the WireGuard timers are due, at
    /// most `at_most`.
    pub fn wg_timers_due_in(
        &self,
        now: Instant,
        at_most: std::time::Duration,
    ) -> std::time::Duration {
        self.tunnels
            .wg
            .device
            .next_deadline()
            .map_or(at_most, |d| d.saturating_duration_since(now))
            .min(at_most)
    }

    /// Makes this worker a follower of another worker's WireGuard device: it encrypts
    /// and decrypts on that device's sessions and reports to it (see `wg_follow`).
    /// Its own device stays empty.
    pub fn follow_wg_device(&mut self, link: FollowerLink) {
        self.tunnels.wg.follower = Some(link);
    }

    /// This worker owns its WireGuard device and takes in the reports of the
    /// follower at the other end of `inbox`.
    pub fn lead_wg_follower(&mut self, inbox: OwnerInbox) {
        self.tunnels.wg.inboxes.push(inbox);
    }

    pub fn wg_mtu(&self) -> usize {
        self.tunnels.wg.mtu
    }

    /// The largest inner WireGuard MTU this worker's buffers carry.
    pub fn max_wg_mtu(&self) -> usize {
        crate::wg_limits::max_mtu(self.arena.buffer_size())
    }

    pub(crate) fn set_wg_mtu(&mut self, mtu: usize) {
        self.tunnels.wg.mtu = mtu;
    }

    /// The largest inner packet tunnel `t` takes (a WireGuard MTU of 0 is what a
    /// buffer carries); `None` for a number no tunnel has.
    pub fn tunnel_mtu(&self, t: TunnelId) -> Option<usize> {
        match self.tunnels.entry(t)? {
            TunnelEntry::WireGuard { mtu: 0 } => Some(self.max_wg_mtu()),
            TunnelEntry::WireGuard { mtu }
            | TunnelEntry::Esp { mtu, .. }
            | TunnelEntry::OpenVpn { mtu, .. } => Some(mtu),
        }
    }

    pub fn wg_listen_port(&self) -> u16 {
        self.tunnels.wg.listen_port
    }

    /// The port packet `h` is on, and that port's Ethernet address; `None` for a
    /// port that is not configured.
    pub(crate) fn port_of(&self, h: Handle) -> Option<(PortId, MacAddr)> {
        let port = PortId(self.arena.meta(h).port);
        let mac = self.ip.interfaces.get(port)?.mac;
        Some((port, MacAddr(mac)))
    }

    /// The gateway's ESP tunnels and their SAs.
    pub fn esp(&self) -> &crate::esp::EspTunnels {
        &self.tunnels.esp
    }

    pub fn esp_mut(&mut self) -> &mut crate::esp::EspTunnels {
        &mut self.tunnels.esp
    }

    /// The key registry every engine of this worker reads (shared by the workers).
    pub fn keys(&self) -> &Arc<KeyRegistry> {
        &self.keys
    }

    /// The gateway's VXLAN tunnels.
    pub fn vxlans(&self) -> &crate::vxlan::VxlanTunnels {
        &self.tunnels.vxlan
    }

    pub fn l2(&self) -> &crate::l2::L2Layer {
        &self.l2
    }

    pub fn ip(&self) -> &IpLayer {
        &self.ip
    }

    pub fn ip_mut(&mut self) -> &mut IpLayer {
        &mut self.ip
    }

    /// A new output queue (a port's, when the port is added).
    pub fn add_output(&mut self) -> OutputId {
        self.outputs.add()
    }

    /// Packets waiting in an output queue.
    pub fn output(&self, id: OutputId) -> &[Handle] {
        &self.outputs.queues[id.0]
    }

    /// Hands an output queue's packets to a driver (`send` sees them with the arena),
    /// then frees them all: what was sent and what the driver could not send alike
    /// (the driver counts its failures).
    /// WireGuard packets sealed so long ago that they would arrive late are sealed
    /// again first (see `seal_ledger`).
    pub fn send_output(&mut self, id: OutputId, send: impl FnOnce(&Arena, &[Handle])) {
        if self.outputs.queues[id.0].is_empty() {
            return;
        }
        self.check_late(id);
        let queue = &mut self.outputs.queues[id.0];
        send(&self.arena, queue);
        for h in queue.drain(..) {
            self.arena.free(h);
        }
        self.forget_marks_if_idle();
    }

    /// Moves an output queue's packets to `into`; the caller owns them now and
    /// hands them to its driver at once. Late packets are sealed again first, as
    /// [`Context::send_output`] does; the caller checks them again with
    /// [`Context::check_late_again`] just before it hands them over.
    pub fn take_output(&mut self, id: OutputId, into: &mut Vec<Handle>) {
        if self.outputs.queues[id.0].is_empty() {
            return;
        }
        self.check_late(id);
        into.append(&mut self.outputs.queues[id.0]);
    }

    /// What the late check of this worker's WireGuard packets did.
    pub fn late_counters(&self) -> crate::seal_ledger::LateCounters {
        self.tunnels.wg.ledger.counters
    }

    /// Hands every control message to `send`, oldest first, and forgets them.
    pub fn send_control(&mut self, mut send: impl FnMut(SocketAddr, &[u8])) {
        for (to, msg) in self.outputs.control.drain(..) {
            send(to, &msg);
        }
    }

    /// Runs ops on the synchronous engine chosen for their algorithm, in the arena.
    pub(crate) fn run_ops(&mut self, ops: &mut [AeadOp]) {
        match self.spread.as_mut() {
            Some(s) => s.process(&mut self.engines, &self.keys, self.arena.mem_mut(), ops),
            None => self.engines.process(&self.keys, self.arena.mem_mut(), ops),
        }
    }

    /// Spreads this worker's full frames over the workers on `spreader`'s board, and
    /// lets it run theirs (see `crypto_async::spread`).
    pub fn spread_over(&mut self, spreader: Spreader) {
        self.spread = Some(spreader);
    }

    /// Runs the pieces other workers posted for help; how many. A worker calls it
    /// between its own batches.
    pub fn help_others(&mut self) -> usize {
        match self.spread.as_mut() {
            Some(s) => s.help(&mut self.engines),
            None => 0,
        }
    }

    /// How long the worker may sleep waiting for its own packets, given `own`: not at
    /// all while it lingers to help others.
    pub fn helper_sleep(&mut self, own: std::time::Duration) -> std::time::Duration {
        match self.spread.as_mut() {
            Some(s) => s.sleep(own),
            None => own,
        }
    }

    /// Seals on an outbound ESP SA only when this worker is its sender, and hands
    /// packets for the others' SAs over (see `esp_handoff`).
    pub fn hand_esp_over(&mut self, link: crate::esp_handoff::HandoffLink) {
        self.esp_handoff = Some(link);
    }

    /// What the ESP handoff did on this worker.
    pub fn handoff_counters(&self) -> Option<crate::esp_handoff::HandoffCounters> {
        self.esp_handoff.as_ref().map(|l| l.counters)
    }

    /// What spreading did on this worker.
    pub fn spread_counters(&self) -> Option<crypto_async::spread::SpreadCounters> {
        self.spread.as_ref().map(Spreader::counters)
    }

    /// What happened to frames handed to asynchronous engines.
    pub fn inflight_counters(&self) -> crate::inflight::InFlightCounters {
        self.inflight.counters()
    }
}
