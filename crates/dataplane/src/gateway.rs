//! The gateway graph: IP routing between ports, on the same worker context as host
//! mode's WireGuard graph.
//!
//! ```text
//!   port rx ─▶ ethernet-input ─┬▶ arp-input ─▶ port-output ─▶ (port tx queues)
//!                              ├▶ ip4-input ─┐
//!                              └▶ ip6-input ─┴▶ ip-lookup ─┬▶ ip-rewrite ─▶ port-output
//!                                                         ├▶ ip-local     │
//!                                                         └▶ icmp-error ◀─┘ (back to ip-lookup)
//! ```
//!
//! Between runs of the graph, the neighbor table's events are carried out here:
//! solicitations become ARP requests or neighbor solicitations on their port,
//! packets that waited for a next hop get their Ethernet header and go out, and
//! packets the table gave up on are freed and counted on `ip-rewrite`.

use crate::arena::{Arena, Handle};
use crate::context::Context;
use crate::counters::NodeCounters;
use crate::fib::{FibError, PortId, RouteTarget};
use crate::graph::{Graph, NodeId};
use crate::interfaces::{Interface, InterfaceError};
use crate::neighbor::{NeighborDrop, NeighborEvent};
use crate::nodes::ip_rewrite::{ip_ethertype, push_ethernet};
use crate::nodes::{
    ArpInput, EthernetInput, IcmpError, Ip4Input, Ip6Input, IpLocal, IpLookup, IpRewrite,
    IpRewriteError, PortOutput,
};
use crypto::{EngineSet, KeyRegistry};
use lpm::Prefix;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Instant, SystemTime};
use wire::ethernet::{MacAddr, ethertype};

/// The largest MTU a port may have: an Ethernet frame must fit a buffer's room.
pub const MAX_PORT_MTU: u16 = (crate::arena::FRAME_SIZE
    - crate::arena::HEADROOM
    - crate::arena::TAILROOM
    - wire::ethernet::HEADER_LEN) as u16;

pub struct GatewayGraph {
    graph: Graph<Context>,
    cx: Context,
    input: NodeId,
    rewrite: NodeId,
    output: NodeId,
}

impl GatewayGraph {
    pub fn new(arena: Arena, engines: EngineSet, now: Instant) -> GatewayGraph {
        // The WireGuard device of the context serves no tunnel here yet.
        let device = wireguard::Device::new(Arc::new(KeyRegistry::new(1)), now, SystemTime::now());
        let graph: Graph<Context> = Graph::new(vec![
            Box::new(EthernetInput),
            Box::new(ArpInput),
            Box::new(Ip4Input),
            Box::new(Ip6Input),
            Box::new(IpLookup),
            Box::new(IpLocal),
            Box::new(IpRewrite),
            Box::new(IcmpError::default()),
            Box::new(PortOutput),
        ]);
        let id = |name| graph.id(name).expect("built above");
        GatewayGraph {
            input: id(EthernetInput::NAME),
            rewrite: id(IpRewrite::NAME),
            output: id(PortOutput::NAME),
            cx: Context::new(arena, engines, device, 0, now),
            graph,
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
        let id = self.cx.ip.interfaces.add(port, MAX_PORT_MTU)?;
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

    /// Runs the neighbor table's timers due at `now`.
    pub fn tick(&mut self, now: Instant) {
        self.cx.now = now;
        let ip = &mut self.cx.ip;
        ip.neighbors.tick(now, &mut ip.events);
    }

    /// Runs the graph and the neighbor table's events until nothing is left.
    pub fn run(&mut self, now: Instant) {
        self.cx.now = now;
        loop {
            self.graph.run(&mut self.cx);
            if self.cx.ip.events.is_empty() {
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
