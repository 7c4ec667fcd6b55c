//! The WireGuard graph of host mode: its nodes and edges over a worker [`Context`],
//! and the glue that turns the device's actions into packets.
//!
//! ```text
//!   udp rx ─▶ wg-input ─▶ wg-decrypt ─▶ tun-output ─▶ (TUN)
//!                │ handshakes: consumed by the device, replies queued
//!   tun rx ─▶ wg-encrypt ─▶ udp-output ─▶ (UDP socket)
//! ```
//!
//! With an asynchronous engine, `wg-decrypt` and `wg-encrypt` hand each frame over
//! and park its packets; when the frame is back (in order), `wg-decrypt-post` and
//! `wg-encrypt-post` finish them exactly as the synchronous path does (see
//! `wg_actions`, shared with the gateway).

use crate::arena::rx_starts::RxStarts;
use crate::arena::{Arena, Handle};
use crate::context::{Context, OutputId};
use crate::counters::ErrorInfo;
use crate::counters::NodeCounters;
use crate::graph::{Graph, Node, NodeId, Rebind};
use crate::nodes::{DecryptError, EncryptError, InputError, Output, WgDecrypt, WgEncrypt, WgInput};
use crate::wg_actions::{ControlTo, WgActions, WgNodes};
use crypto::EngineSet;
use std::time::Instant;
use wireguard::Device;

pub use crate::wg_limits::{OUTER_OVERHEAD, max_datagram, max_mtu};

/// Where a host reads datagrams from its UDP socket into buffers of `buffer` bytes:
/// nothing is ever put in front of a received datagram in its buffer (it only loses
/// its header on the way in), so no headroom is kept, and every start leaves room
/// for [`max_datagram`].
pub fn udp_rx_starts(buffer: usize) -> RxStarts {
    // buffer - TAILROOM holds max_datagram from offset HEADROOM on (max_mtu's
    // definition), so from 0 too.
    RxStarts::spread(buffer, 0, max_datagram(buffer)).unwrap_or(RxStarts::at_headroom(buffer))
}

/// Where a host reads inner packets from its TUN into buffers of `buffer` bytes:
/// the WireGuard header goes in front of them in place, and every start leaves room
/// for a packet of the interface's `mtu` ([`max_mtu`] while it is not known, 0). An
/// MTU raised on the interface is followed when the worker next looks at it; until
/// then a packet longer than the old MTU's starts leave room for is cut and counted
/// (`tun.too_big`), as one longer than [`max_mtu`] always is.
pub fn tun_rx_starts(buffer: usize, mtu: usize) -> RxStarts {
    let max = max_mtu(buffer);
    let room = if mtu == 0 { max } else { mtu.min(max) };
    RxStarts::spread(buffer, wire::wireguard::TRANSPORT_HEADER_LEN, room)
        .unwrap_or(RxStarts::at_headroom(buffer))
}

/// Encrypted datagrams for the UDP socket; each buffer's meta.addr is its destination.
pub const UDP_OUT: OutputId = OutputId(0);
/// Decrypted inner packets for the TUN.
pub const TUN_OUT: OutputId = OutputId(1);

/// Every node of the graph that drops packets, with its reasons: what `show errors`
/// explains a counter with. (A test checks it against the graph's own nodes.)
pub const NODE_ERRORS: [(&str, &[ErrorInfo]); 5] = [
    (WgInput::NAME, InputError::TABLE),
    (WgDecrypt::NAME, DecryptError::TABLE),
    (WgDecrypt::POST, DecryptError::TABLE),
    (WgEncrypt::NAME, EncryptError::TABLE),
    (WgEncrypt::POST, EncryptError::TABLE),
];

/// What a drop reason of a node means, from [`NODE_ERRORS`].
pub fn explain(node: &str, reason: &str) -> Option<&'static str> {
    crate::counters::explain(&NODE_ERRORS, node, reason)
}

pub struct WgGraph {
    graph: Graph<Context>,
    cx: Context,
    input: NodeId,
    encrypt: NodeId,
    wg: WgNodes,
    actions: WgActions,
}

impl WgGraph {
    pub fn new(arena: Arena, device: Device, engines: EngineSet, now: Instant) -> WgGraph {
        WgGraph::with_front(arena, device, engines, now, Vec::new(), &[], 0)
    }

    /// The graph with `front` nodes before WireGuard's (so that their edges into
    /// it point forward), and edges bound as `rebinds` say: a path that leads into
    /// the tunnel or out of it, on the same WireGuard nodes and actions. The front
    /// nodes' own output queues (`more_outputs` of them) follow WireGuard's two.
    pub fn with_front(
        arena: Arena,
        device: Device,
        engines: EngineSet,
        now: Instant,
        mut front: Vec<Box<dyn Node<Context>>>,
        rebinds: &[Rebind],
        more_outputs: usize,
    ) -> WgGraph {
        front.extend([
            Box::new(WgInput) as Box<dyn Node<Context>>,
            Box::new(WgDecrypt::node()),
            Box::new(WgDecrypt::post()),
            Box::new(Output::new(Output::TUN, TUN_OUT)),
            Box::new(WgEncrypt::node()),
            Box::new(WgEncrypt::post()),
            Box::new(Output::new(Output::UDP, UDP_OUT)),
        ]);
        let graph: Graph<Context> = Graph::with_rebinds(front, rebinds);
        let id = |name| graph.id(name).expect("built above");
        WgGraph {
            input: id(WgInput::NAME),
            encrypt: id(WgEncrypt::NAME),
            wg: WgNodes {
                input: id(WgInput::NAME),
                encrypt: id(WgEncrypt::NAME),
                encrypt_post: id(WgEncrypt::POST),
                decrypt_post: id(WgDecrypt::POST),
                control: ControlTo::Queue,
            },
            actions: WgActions::default(),
            cx: Context::new(arena, engines, device, 2 + more_outputs, now),
            graph,
        }
    }

    pub fn context(&self) -> &Context {
        &self.cx
    }

    pub fn context_mut(&mut self) -> &mut Context {
        &mut self.cx
    }

    /// Packets waiting inside the graph (none once `run` returns).
    pub fn pending(&self) -> usize {
        self.graph.pending()
    }

    /// Every node's name and counters, in graph order.
    pub fn counters(&self) -> impl Iterator<Item = (&'static str, &NodeCounters)> {
        self.graph.counters()
    }

    /// The inner interface's MTU: no encrypted packet is padded past it. At most
    /// [`WgGraph::max_mtu`]; larger values are clamped (the caller refuses them first).
    pub fn set_mtu(&mut self, mtu: usize) {
        self.cx.set_wg_mtu(mtu.min(self.max_mtu()));
    }

    /// The largest inner MTU this graph's buffers carry.
    pub fn max_mtu(&self) -> usize {
        self.cx.max_wg_mtu()
    }

    /// A node of the graph by name.
    pub fn node_id(&self, name: &str) -> Option<NodeId> {
        self.graph.id(name)
    }

    /// Packets for any node of the graph; they run at the next [`WgGraph::run`].
    pub fn enqueue(&mut self, node: NodeId, packets: &[Handle]) {
        self.graph.enqueue(node, packets);
    }

    /// Datagrams from the UDP socket (meta.addr = source).
    pub fn from_udp(&mut self, packets: &[Handle]) {
        self.graph.enqueue(self.input, packets);
    }

    /// Inner IP packets from the TUN.
    pub fn from_tun(&mut self, packets: &[Handle]) {
        self.graph.enqueue(self.encrypt, packets);
    }

    /// Runs the timers due at `now`.
    pub fn tick(&mut self, now: Instant) {
        self.cx.now = now;
        self.cx.tunnels.wg.device.tick(now);
    }

    /// Runs the graph and then the device's actions until nothing is left: frames back
    /// from an asynchronous engine go to their post nodes, staged packets of a peer
    /// whose session is ready go through `wg-encrypt`, and handshake messages wait as
    /// control messages.
    pub fn run(&mut self, now: Instant) {
        self.cx.now = now;
        WgActions::begin(&mut self.cx);
        loop {
            self.graph.run(&mut self.cx);
            if !self.actions.run(&mut self.cx, &mut self.graph, self.wg) {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arena::rx_starts::LINE;
    use crate::arena::{JUMBO_BUFFER, STANDARD_BUFFER};
    use wire::wireguard::TRANSPORT_HEADER_LEN;

    /// Every start leaves what each direction does in place room in its buffer, in
    /// standard and jumbo buffers alike.
    #[test]
    fn host_receive_starts_leave_each_packet_its_room() {
        for buffer in [STANDARD_BUFFER, JUMBO_BUFFER] {
            let udp = udp_rx_starts(buffer);
            assert_eq!(udp.least_room(), max_datagram(buffer));
            let max = max_mtu(buffer);
            for mtu in [0, 576, 1280, 1420, 1500, 1800, max, max + 1, 9000, 9216] {
                let tun = tun_rx_starts(buffer, mtu);
                let largest = if mtu == 0 { max } else { mtu.min(max) };
                assert!(tun.least_room() >= largest, "{mtu}");
                for h in 0..4 {
                    let at = tun.of(h);
                    // The header goes in front; the padded packet and its tag behind.
                    assert!(at >= TRANSPORT_HEADER_LEN, "{mtu}: {at}");
                    let padded = wire::wireguard::padded_len(largest, mtu);
                    assert!(at + padded + crypto::TAG_LEN <= buffer, "{mtu}: {at}");
                }
            }
        }
        assert!(max_mtu(JUMBO_BUFFER) >= 9216, "a 9216-byte tunnel MTU fits");
        // At the usual MTUs the starts spread over three lines, on their boundaries.
        let mut at: Vec<usize> = (0..4)
            .map(|h| tun_rx_starts(STANDARD_BUFFER, 1420).of(h))
            .collect();
        at.sort_unstable();
        at.dedup();
        assert_eq!(at.len(), 3);
        assert!(at.iter().all(|a| a % LINE == 0));
    }
}
