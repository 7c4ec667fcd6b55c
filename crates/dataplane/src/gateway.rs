//! The gateway graph: IP routing between ports and through WireGuard and ESP tunnels, on
//! the same worker context, nodes and protocol core as host mode's graph; only the
//! edges differ (wg-encrypt's exit is `udp-encap` instead of a socket's queue,
//! wg-decrypt's is `tunnel-input` instead of the TUN's).
//!
//! ```text
//!   port rx ─▶ ethernet-input ─┬▶ arp-input ─▶ port-output ─▶ (port tx queues)
//!                              ├▶ ip4-input ─┐
//!                              └▶ ip6-input ─┴▶ ip-lookup ─┬▶ ip-rewrite ─▶ port-output
//!                                      (IPv4 without DF too big: ip4-fragment ─▶ back)
//!          tunnel-input ─▶ ip4/ip6-input ▲                 ├▶ icmp-error (back to ip-lookup)
//!                 ▲                                        ├▶ wg-encrypt ─▶ udp-encap ─▶ ip-rewrite
//!                 └── wg-decrypt ◀─ wg-input ◀─ udp ◀──────└▶ ip-local (echo, ND)
//! ```
//!
//! ESP tunnels are routed into like the WireGuard tunnel, and their packets come
//! back through `ip-local` (IP protocol 50, or UDP to an ESP tunnel's port):
//!
//! ```text
//!   ip-lookup ─▶ esp-encrypt ─▶ ip-lookup (the outer packet, routed like our own)
//!   ip-local (ESP) ─▶ esp-decrypt ─▶ tunnel-input
//! ```
//!
//! So are OpenVPN servers, one tunnel each whose clients are found by inner
//! destination; their data packets come back through `ip-local` (UDP to the
//! server's port), and their control packets go to the control thread:
//!
//! ```text
//!   ip-lookup ─▶ ovpn-encrypt ─▶ udp-encap ─▶ ip-rewrite
//!   ip-local (P_DATA_V2) ─▶ ovpn-decrypt ─▶ tunnel-input
//! ```
//!
//! Layer 2: a cross-connected port's frames, whole, and VXLAN's (the outer packets
//! are routed as above, into the WireGuard tunnel or out of a port):
//!
//! ```text
//!   port rx ─▶ ethernet-input ─▶ l2-xconnect ─┬▶ port-output
//!                                             └▶ vxlan-encap ─▶ ip-lookup
//!   ip-local (UDP to a VXLAN port) ─▶ vxlan-decap ─▶ l2-xconnect
//! ```
//!
//! Between runs of the graph, the neighbor table's events are carried out here:
//! solicitations become ARP requests or neighbor solicitations on their port,
//! packets that waited for a next hop get their Ethernet header and go out, and
//! packets the table gave up on are freed and counted on `ip-rewrite`; and so are the
//! WireGuard device's actions (`wg_actions`), its handshake messages going out
//! through `udp-encap` like its data.

use crate::arena::{Arena, Handle};
use crate::context::Context;
use crate::counters::NodeCounters;
use crate::esp::{EspError, EspTunnel, EspTunnelId, EspTunnels};
use crate::fib::{FibError, PortId, RouteTarget};
use crate::graph::{Graph, NodeId, Rebind};
use crate::interfaces::{Interface, InterfaceError};
use crate::l2::{L2Interface, XconnectError};
use crate::neighbor::{NeighborDrop, NeighborEvent};
use crate::nodes::ip_rewrite::{ip_ethertype, push_ethernet};
use crate::nodes::{
    ArpInput, EspDecrypt, EspEncrypt, EthernetInput, IcmpError, Ip4Fragment, Ip4Input, Ip6Input,
    IpLocal, IpLookup, IpRewrite, IpRewriteError, L2Xconnect, Output, OvpnDecrypt, OvpnEncrypt,
    PortOutput, TunnelInput, UdpEncap, VxlanDecap, VxlanEncap, WgDecrypt, WgEncrypt, WgInput,
};
use crate::ovpn::{OvpnError, OvpnServer, OvpnServerId, OvpnServers};
use crate::vxlan::{VxlanError, VxlanId, VxlanTunnel};
use crate::wg_actions::{ControlTo, WgActions, WgNodes};
use crypto::EngineSet;
use lpm::Prefix;
use std::net::IpAddr;
use std::net::SocketAddr;
use std::time::Instant;
use wire::ethernet::{MacAddr, ethertype};
use wireguard::Device;

/// The largest MTU a port may have with buffers of `buffer` bytes: an Ethernet
/// frame must fit a buffer's room.
pub const fn max_port_mtu(buffer: usize) -> u16 {
    let room = crate::arena::max_data(buffer) - wire::ethernet::HEADER_LEN;
    if room > u16::MAX as usize {
        u16::MAX
    } else {
        room as u16
    }
}

/// The largest MTU a gateway port may be given at all: the jumbo frames of data
/// centres (9216 bytes, what switches take), which need jumbo buffers.
pub const LARGEST_PORT_MTU: u16 = 9216;

/// Every node of the gateway graph that drops packets, with its reasons: what `show
/// errors` explains a gateway's counters with. (A test checks it against the graph.)
pub const NODE_ERRORS: [(&str, &[crate::counters::ErrorInfo]); 24] = [
    (EthernetInput::NAME, crate::nodes::EthernetInputError::TABLE),
    (ArpInput::NAME, crate::nodes::ArpInputError::TABLE),
    (TunnelInput::NAME, crate::nodes::TunnelInputError::TABLE),
    (Ip4Input::NAME, crate::nodes::Ip4InputError::TABLE),
    (Ip6Input::NAME, crate::nodes::Ip6InputError::TABLE),
    (IpLookup::NAME, crate::nodes::IpLookupError::TABLE),
    (IpLocal::NAME, crate::nodes::IpLocalError::TABLE),
    (WgInput::NAME, crate::nodes::InputError::TABLE),
    (WgDecrypt::NAME, crate::nodes::DecryptError::TABLE),
    (WgDecrypt::POST, crate::nodes::DecryptError::TABLE),
    (WgEncrypt::NAME, crate::nodes::EncryptError::TABLE),
    (WgEncrypt::POST, crate::nodes::EncryptError::TABLE),
    (EspEncrypt::NAME, crate::nodes::EspEncryptError::TABLE),
    (EspDecrypt::NAME, crate::nodes::EspDecryptError::TABLE),
    (OvpnEncrypt::NAME, crate::nodes::OvpnEncryptError::TABLE),
    (OvpnDecrypt::NAME, crate::nodes::OvpnDecryptError::TABLE),
    (UdpEncap::NAME, crate::nodes::UdpEncapError::TABLE),
    (Ip4Fragment::NAME, crate::nodes::Ip4FragmentError::TABLE),
    (IpRewrite::NAME, crate::nodes::IpRewriteError::TABLE),
    (IcmpError::NAME, crate::nodes::IcmpErrorError::TABLE),
    (L2Xconnect::NAME, crate::nodes::L2XconnectError::TABLE),
    (VxlanEncap::NAME, crate::nodes::VxlanEncapError::TABLE),
    (VxlanDecap::NAME, crate::nodes::VxlanDecapError::TABLE),
    (PortOutput::NAME, crate::nodes::PortOutputError::TABLE),
];

/// What a drop reason of a gateway node means, from [`NODE_ERRORS`].
pub fn explain(node: &str, reason: &str) -> Option<&'static str> {
    crate::counters::explain(&NODE_ERRORS, node, reason)
}

/// Where the WireGuard nodes lead in a gateway.
const REBINDS: [Rebind; 4] = [
    Rebind {
        node: WgEncrypt::NAME,
        edge: Output::UDP,
        to: UdpEncap::NAME,
    },
    Rebind {
        node: WgEncrypt::POST,
        edge: Output::UDP,
        to: UdpEncap::NAME,
    },
    Rebind {
        node: WgDecrypt::NAME,
        edge: Output::TUN,
        to: TunnelInput::NAME,
    },
    Rebind {
        node: WgDecrypt::POST,
        edge: Output::TUN,
        to: TunnelInput::NAME,
    },
];

pub struct GatewayGraph {
    graph: Graph<Context>,
    cx: Context,
    input: NodeId,
    lookup: NodeId,
    rewrite: NodeId,
    output: NodeId,
    esp_encrypt: NodeId,
    local: NodeId,
    /// Datagrams the reassembly table let go unfinished, as `ip-local` counted
    /// them so far.
    timeouts_counted: u64,
    /// The packets other workers handed this one to seal (see `esp_handoff`).
    handed: Vec<Handle>,
    wg: WgNodes,
    actions: WgActions,
}

impl GatewayGraph {
    /// A gateway with no ports or routes yet, whose WireGuard tunnel is `device`
    /// (with no private key and no peers it serves nothing).
    pub fn new(arena: Arena, engines: EngineSet, device: Device, now: Instant) -> GatewayGraph {
        // Processing order: a packet's path runs forward wherever it can; the
        // decrypted packets and the errors go back to the IP nodes, another pass.
        let graph: Graph<Context> = Graph::with_rebinds(
            vec![
                Box::new(EthernetInput),
                Box::new(L2Xconnect),
                Box::new(VxlanEncap),
                Box::new(ArpInput),
                Box::new(TunnelInput),
                Box::new(Ip4Input),
                Box::new(Ip6Input),
                Box::new(IpLookup),
                Box::new(IpLocal),
                Box::new(WgInput),
                Box::new(VxlanDecap),
                Box::new(EspDecrypt::node()),
                Box::new(OvpnDecrypt::node()),
                Box::new(WgDecrypt::node()),
                Box::new(WgDecrypt::post()),
                Box::new(WgEncrypt::node()),
                Box::new(WgEncrypt::post()),
                Box::new(EspEncrypt::node()),
                Box::new(OvpnEncrypt::node()),
                Box::new(UdpEncap::new()),
                Box::new(Ip4Fragment),
                Box::new(IpRewrite),
                Box::new(IcmpError::default()),
                Box::new(PortOutput),
            ],
            &REBINDS,
        );
        let id = |name| graph.id(name).expect("built above");
        GatewayGraph {
            input: id(EthernetInput::NAME),
            lookup: id(IpLookup::NAME),
            rewrite: id(IpRewrite::NAME),
            output: id(PortOutput::NAME),
            esp_encrypt: id(EspEncrypt::NAME),
            local: id(IpLocal::NAME),
            timeouts_counted: 0,
            handed: Vec::new(),
            wg: WgNodes {
                input: id(WgInput::NAME),
                encrypt: id(WgEncrypt::NAME),
                encrypt_post: id(WgEncrypt::POST),
                decrypt_post: id(WgDecrypt::POST),
                control: ControlTo::Node(id(UdpEncap::NAME)),
            },
            actions: WgActions::default(),
            cx: Context::new(arena, engines, device, 0, now),
            graph,
        }
    }

    /// Packets other workers handed this one, for the ESP SAs it seals on, go to
    /// `esp-encrypt` with its own (see `esp_handoff`).
    fn take_handed(&mut self) {
        let Some(link) = self.cx.esp_handoff.as_mut() else {
            return;
        };
        self.handed.clear();
        let mut no_buffer = 0;
        for (tunnel, packet) in link.take_in().iter() {
            match self.cx.arena.alloc_with(packet) {
                Some(h) => {
                    self.cx.arena.meta_mut(h).peer = u32::from(tunnel);
                    self.handed.push(h);
                }
                None => no_buffer += 1,
            }
        }
        link.counters.no_buffer += no_buffer;
        self.graph.enqueue(self.esp_encrypt, &self.handed);
    }

    /// The WireGuard tunnel's UDP port and inner MTU (no packet larger goes in; 0:
    /// unlimited, up to what a buffer carries).
    pub fn set_wireguard(&mut self, listen_port: u16, mtu: usize) {
        self.cx.tunnels.wg.listen_port = listen_port;
        self.cx.set_wg_mtu(mtu.min(self.cx.max_wg_mtu()));
    }

    /// Turns IKE on: datagrams to the IKE ports go to `inbox`.
    pub fn set_ike(&mut self, inbox: crate::ike::IkeInbox) {
        self.cx.tunnels.ike = Some(inbox);
    }

    /// Sends one of the gateway's own UDP datagrams (an IKE message) from
    /// `src_port` to `to`: the source address is the port's toward `to`, as for
    /// the tunnels' datagrams. False (counted by `udp-encap` as `no-buffer`) when
    /// no buffer is free or the payload does not fit one; the caller's protocol
    /// retransmits.
    pub fn send_udp(&mut self, src_port: u16, to: SocketAddr, payload: &[u8]) -> bool {
        let encap = self.graph.id(UdpEncap::NAME).expect("built with the graph");
        match self.cx.arena.alloc_with(payload) {
            Some(h) => {
                let m = self.cx.arena.meta_mut(h);
                m.addr = to;
                m.src_port = src_port;
                self.graph.enqueue(encap, &[h]);
                true
            }
            None => {
                self.graph
                    .counters_of(encap)
                    .drop(crate::nodes::UdpEncapError::NoBuffer);
                false
            }
        }
    }

    pub fn context(&self) -> &Context {
        &self.cx
    }

    pub fn context_mut(&mut self) -> &mut Context {
        &mut self.cx
    }

    /// Every node's name and counters, in graph order.
    pub fn counters(&self) -> impl Iterator<Item = (&'static str, &NodeCounters)> {
        self.graph.counters()
    }

    /// Adds a port with its own output queue (the `output` given is replaced), a
    /// local route for each of its addresses and an attached route for each
    /// address's network.
    pub fn add_port(&mut self, mut port: Interface) -> Result<PortId, InterfaceError> {
        port.output = self.cx.add_output();
        let addrs = port.addrs.clone();
        let max = max_port_mtu(self.cx.arena.buffer_size());
        let id = self.cx.ip.interfaces.add(port, max)?;
        for p in addrs {
            let host = Prefix::new(p.addr, if p.addr.is_ipv4() { 32 } else { 128 });
            let fib = &mut self.cx.ip.fib;
            fib.add(p.network(), RouteTarget::Attached { port: id })
                .expect("attached routes have no next hop to refuse");
            fib.add(host.expect("full length"), RouteTarget::Local)
                .expect("local routes have no next hop to refuse");
        }
        Ok(id)
    }

    pub fn add_route(&mut self, prefix: Prefix, target: RouteTarget) -> Result<(), FibError> {
        self.cx.ip.fib.add(prefix, target).map(|_| ())
    }

    /// Adds a VXLAN tunnel (its frames go nowhere until a cross-connect names it).
    pub fn add_vxlan(&mut self, tunnel: VxlanTunnel) -> Result<VxlanId, VxlanError> {
        self.cx.tunnels.vxlan.add(tunnel)
    }

    /// Adds an ESP tunnel (with no SA yet: see [`GatewayGraph::esp_mut`]); routes
    /// name it as `context::esp_tunnel(id)`.
    pub fn add_esp(&mut self, tunnel: EspTunnel) -> Result<EspTunnelId, EspError> {
        self.cx.tunnels.esp.add(tunnel)
    }

    /// The ESP tunnels, to install and remove SAs (between runs).
    pub fn esp_mut(&mut self) -> &mut EspTunnels {
        &mut self.cx.tunnels.esp
    }

    /// Adds an OpenVPN server (with no clients yet: the control thread adds
    /// them with [`GatewayGraph::ovpn_mut`]); routes name it as
    /// `context::ovpn_tunnel(id)`.
    pub fn add_ovpn(&mut self, server: OvpnServer) -> Result<OvpnServerId, OvpnError> {
        self.cx.tunnels.ovpn.add(server)
    }

    /// The OpenVPN servers, to change their clients (between runs).
    pub fn ovpn_mut(&mut self) -> &mut OvpnServers {
        &mut self.cx.tunnels.ovpn
    }

    /// Control packets to the OpenVPN servers' ports go to `inbox`.
    pub fn set_ovpn_inbox(&mut self, inbox: crate::ovpn::OvpnInbox) {
        self.cx.tunnels.ovpn.inbox = Some(inbox);
    }

    /// Frames received on `rx` leave by `tx` from now on, as they are.
    pub fn add_xconnect(&mut self, rx: L2Interface, tx: L2Interface) -> Result<(), XconnectError> {
        self.cx.l2.connect(rx, tx)
    }

    /// Frames received on `port`.
    pub fn from_port(&mut self, port: PortId, frames: &[Handle]) {
        for &h in frames {
            self.cx.arena.meta_mut(h).port = port.0;
        }
        self.graph.enqueue(self.input, frames);
    }

    /// The output queue of `port`, for its driver (or a test).
    pub fn port_output(&self, port: PortId) -> Option<crate::context::OutputId> {
        self.cx.ip.interfaces.get(port).map(|p| p.output)
    }

    /// Runs the neighbor table's and the WireGuard device's timers due at `now`.
    pub fn tick(&mut self, now: Instant) {
        self.cx.now = now;
        let ip = &mut self.cx.ip;
        ip.neighbors.tick(now, &mut ip.events);
        ip.reassembly.expire(now);
        let timeouts = ip
            .reassembly
            .dropped()
            .get(crate::reassembly::ReassemblyError::TimedOut.name())
            .copied()
            .unwrap_or(0);
        if timeouts > self.timeouts_counted {
            self.graph.counters_of(self.local).drop_n(
                crate::nodes::IpLocalError::FragmentTimedOut,
                timeouts - self.timeouts_counted,
            );
            self.timeouts_counted = timeouts;
        }
        self.cx.tunnels.wg.device.tick(now);
    }

    /// Runs the graph, the neighbor table's events and the WireGuard device's
    /// actions until nothing is left; with other workers, learns what they heard of
    /// neighbors first and tells them what this run heard at the end.
    pub fn run(&mut self, now: Instant) {
        self.cx.now = now;
        self.cx.ip.take_news(now);
        self.take_handed();
        WgActions::begin(&mut self.cx);
        loop {
            self.graph.run(&mut self.cx);
            let mut more = self.send_fragments();
            more |= self.actions.run(&mut self.cx, &mut self.graph, self.wg);
            if self.cx.ip.events.is_empty() {
                if more {
                    continue;
                }
                self.cx.ip.send_news();
                return;
            }
            let events = std::mem::take(&mut self.cx.ip.events);
            for &e in &events {
                self.carry_out(e);
            }
            // Keep the vector's memory for the next events.
            let mut events = events;
            events.clear();
            if self.cx.ip.events.is_empty() {
                self.cx.ip.events = events;
            }
        }
    }

    /// Hands the fragments `ip4-fragment` cut, each packet's together and in
    /// order, to `ip-rewrite` (for a port) or `ip-lookup` (for the tunnel); true
    /// when there were any.
    fn send_fragments(&mut self) -> bool {
        if self.cx.ip.fragments.is_empty() {
            return false;
        }
        let fragments = std::mem::take(&mut self.cx.ip.fragments);
        for &h in &fragments {
            let to_tunnel = self.cx.arena.meta(h).port == crate::nodes::NO_PORT;
            let node = if to_tunnel { self.lookup } else { self.rewrite };
            self.graph.enqueue(node, &[h]);
        }
        // Keep the vector's memory for the next ones.
        let mut fragments = fragments;
        fragments.clear();
        self.cx.ip.fragments = fragments;
        true
    }

    fn carry_out(&mut self, event: NeighborEvent) {
        match event {
            NeighborEvent::Send { handle, port, mac } => {
                let src = self.cx.ip.interfaces.get(port).map(|p| p.mac);
                let kind = ip_ethertype(&self.cx, handle);
                match src {
                    Some(src) if push_ethernet(&mut self.cx, handle, mac, src, kind) => {
                        self.graph.enqueue(self.output, &[handle]);
                    }
                    _ => self.drop_packet(handle, IpRewriteError::NoHeadroom),
                }
            }
            NeighborEvent::Drop { handle, why } => {
                let reason = match why {
                    NeighborDrop::QueueFull => IpRewriteError::QueueFull,
                    NeighborDrop::Unresolved => IpRewriteError::Unresolved,
                    NeighborDrop::TableFull => IpRewriteError::TableFull,
                };
                self.drop_packet(handle, reason);
            }
            NeighborEvent::Solicit { port, target, to } => self.solicit(port, target, to),
        }
    }

    fn drop_packet(&mut self, h: Handle, reason: IpRewriteError) {
        self.cx.arena.free(h);
        self.graph.counters_of(self.rewrite).drop(reason);
    }

    /// An ARP request (IPv4) or a neighbor solicitation (IPv6) for `target` on
    /// `port`: broadcast or to the solicited-node group, or unicast to `to`.
    fn solicit(&mut self, port: PortId, target: IpAddr, to: Option<[u8; 6]>) {
        let Some(iface) = self.cx.ip.interfaces.get(port) else {
            return;
        };
        let ours = MacAddr(iface.mac);
        let Some(source) = self.cx.ip.interfaces.source_for(port, target) else {
            // No address of that family on the port: nothing can be asked.
            return;
        };
        let Some(h) = self.cx.arena.alloc() else {
            self.graph
                .counters_of(self.rewrite)
                .drop(IpRewriteError::NoBuffer);
            return;
        };
        let start = crate::arena::HEADROOM;
        let buf = self.cx.arena.buffer_mut(h);
        let (len, kind, dst) = match (source, target) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => {
                let n = wire::arp::emit_request(&mut buf[start..], ours, src, dst)
                    .expect("a buffer holds an ARP packet");
                let mac = to.unwrap_or(MacAddr::BROADCAST.0);
                (n, ethertype::ARP, mac)
            }
            (IpAddr::V6(src), IpAddr::V6(dst)) => {
                let group = to.map_or_else(|| wire::icmpv6::solicited_node(&dst), |_| dst);
                let n = ipv6_solicit(&mut buf[start..], ours, src, dst, group);
                let mac = to.unwrap_or(wire::icmpv6::solicited_node_mac(&dst).0);
                (n, ethertype::IPV6, mac)
            }
            _ => unreachable!("source_for gives an address of the target's family"),
        };
        let m = self.cx.arena.meta_mut(h);
        m.len = len as u16;
        m.port = port.0;
        push_ethernet(&mut self.cx, h, dst, ours.0, kind);
        self.graph.enqueue(self.output, &[h]);
    }
}

/// Writes an IPv6 packet holding a neighbor solicitation for `target` from `src` to
/// `dst` (hop limit 255, RFC 4861 section 7.1.1) into `buf`; returns its length.
fn ipv6_solicit(
    buf: &mut [u8],
    ours: MacAddr,
    src: std::net::Ipv6Addr,
    target: std::net::Ipv6Addr,
    dst: std::net::Ipv6Addr,
) -> usize {
    let header = wire::ipv6::HEADER_LEN;
    let ns = wire::icmpv6::NeighborSolicitRepr {
        target,
        source_link_addr: Some(ours),
    };
    let n = ns
        .emit(&mut buf[header..], &src, &dst)
        .expect("a buffer holds a solicitation");
    let p = &mut buf[..header];
    p.fill(0);
    p[0] = 0x60;
    p[4..6].copy_from_slice(&(n as u16).to_be_bytes());
    p[6] = wire::ip::protocol::ICMPV6;
    p[7] = wire::icmpv6::ND_HOP_LIMIT;
    p[8..24].copy_from_slice(&src.octets());
    p[24..40].copy_from_slice(&dst.octets());
    header + n
}
