//! A gateway tunnel's two crypto nodes on their own, as `WgGraph` has
//! WireGuard's: what `linerate bench --tunnel esp|openvpn` measures as the
//! tunnel's graph, beside the gateway around it. Inner packets (each naming its
//! tunnel or server in `meta.peer`, as ip-lookup names it) go through the
//! encrypt node to the tunnel exit; the tunnel's packets (the outer headers
//! stripped and `meta.addr` set as ip-local leaves it) go through the decrypt
//! node to the inner exit.
//!
//! ```text
//!   inner ─▶ esp-encrypt  ─▶ tunnel-output  (outer IP + ESP)
//!   ESP   ─▶ esp-decrypt  ─▶ inner-output
//!   inner ─▶ ovpn-encrypt ─▶ tunnel-output  (P_DATA_V2, the client's address in the metadata)
//!   P_DATA_V2 ─▶ ovpn-decrypt ─▶ inner-output
//! ```

use crate::Handle;
use crate::arena::Arena;
use crate::context::{Context, OutputId};
use crate::counters::NodeCounters;
use crate::esp::EspTunnels;
use crate::graph::{Graph, NodeId, Rebind};
use crate::nodes::{
    EspDecrypt, EspEncrypt, IpLookup, Output, OvpnDecrypt, OvpnEncrypt, TunnelInput, UdpEncap,
};
use crate::ovpn::OvpnServers;
use crypto::EngineSet;
use std::time::Instant;
use wireguard::Device;

/// The tunnel's packets, as the encrypt node hands them on (ESP: outer headers
/// in front, to routing; OpenVPN: the P_DATA_V2 packet, to udp-encap).
pub const TUNNEL_OUT: OutputId = OutputId(0);
/// Opened inner packets, as the decrypt node hands them to the tunnel's input.
pub const INNER_OUT: OutputId = OutputId(1);

const TUNNEL_EXIT: &str = "tunnel-output";
const INNER_EXIT: &str = "inner-output";

/// Which tunnel's nodes the graph has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TunnelKind {
    Esp,
    OpenVpn,
}

pub struct TunnelGraph {
    graph: Graph<Context>,
    cx: Context,
    encrypt: NodeId,
    decrypt: NodeId,
}

impl TunnelGraph {
    /// `device` only lends the context its key registry (the SAs' or clients'
    /// keys go there).
    pub fn new(
        kind: TunnelKind,
        arena: Arena,
        device: Device,
        engines: EngineSet,
        now: Instant,
    ) -> TunnelGraph {
        let (encrypt, encrypt_next, decrypt): (
            Box<dyn crate::graph::Node<Context>>,
            _,
            Box<dyn crate::graph::Node<Context>>,
        ) = match kind {
            TunnelKind::Esp => (
                Box::new(EspEncrypt::node()),
                IpLookup::NAME,
                Box::new(EspDecrypt::node()),
            ),
            TunnelKind::OpenVpn => (
                Box::new(OvpnEncrypt::node()),
                UdpEncap::NAME,
                Box::new(OvpnDecrypt::node()),
            ),
        };
        let (encrypt_name, decrypt_name) = (encrypt.info().name, decrypt.info().name);
        let graph: Graph<Context> = Graph::with_rebinds(
            vec![
                encrypt,
                Box::new(Output::new(TUNNEL_EXIT, TUNNEL_OUT)),
                decrypt,
                Box::new(Output::new(INNER_EXIT, INNER_OUT)),
            ],
            &[
                Rebind {
                    node: encrypt_name,
                    edge: encrypt_next,
                    to: TUNNEL_EXIT,
                },
                Rebind {
                    node: decrypt_name,
                    edge: TunnelInput::NAME,
                    to: INNER_EXIT,
                },
            ],
        );
        let id = |name| graph.id(name).expect("built above");
        TunnelGraph {
            encrypt: id(encrypt_name),
            decrypt: id(decrypt_name),
            cx: Context::new(arena, engines, device, 2, now),
            graph,
        }
    }

    /// The OpenVPN servers and their clients (between runs).
    pub fn ovpn_mut(&mut self) -> &mut OvpnServers {
        &mut self.cx.tunnels.ovpn
    }

    pub fn context(&self) -> &Context {
        &self.cx
    }

    pub fn context_mut(&mut self) -> &mut Context {
        &mut self.cx
    }

    /// The tunnels and their SAs (between runs).
    pub fn esp_mut(&mut self) -> &mut EspTunnels {
        &mut self.cx.tunnels.esp
    }

    /// Every node's name and counters, in graph order.
    pub fn counters(&self) -> impl Iterator<Item = (&'static str, &NodeCounters)> {
        self.graph.counters()
    }

    /// Inner packets to seal, each with its tunnel or server in `meta.peer`.
    pub fn from_inner(&mut self, packets: &[Handle]) {
        self.graph.enqueue(self.encrypt, packets);
    }

    /// The tunnel's packets to open: `meta.offset` at the ESP or OpenVPN header,
    /// `meta.addr` the outer destination (ESP) or source (OpenVPN), and for
    /// OpenVPN the server in `meta.peer`.
    pub fn from_outer(&mut self, packets: &[Handle]) {
        self.graph.enqueue(self.decrypt, packets);
    }

    pub fn run(&mut self, now: Instant) {
        self.cx.now = now;
        self.graph.run(&mut self.cx);
    }

    /// Seals `inner` for tunnel or server `peer` (what `ip-lookup` would set) and
    /// gives what left the tunnel's output, in order, in `out`.
    pub fn seal(&mut self, peer: u32, inner: &[Handle], out: &mut Vec<Handle>, now: Instant) {
        let arena = self.cx.arena_mut();
        for &h in inner {
            arena.meta_mut(h).peer = peer;
        }
        self.from_inner(inner);
        self.run(now);
        out.clear();
        self.cx.take_output(TUNNEL_OUT, out);
    }

    /// Opens the tunnel's `packets` (see `from_outer`); what came through waits
    /// at `INNER_OUT`.
    pub fn open(&mut self, packets: &[Handle], now: Instant) {
        self.from_outer(packets);
        self.run(now);
    }
}
