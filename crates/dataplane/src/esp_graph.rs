//! ESP's two crypto nodes on their own, as `WgGraph` has WireGuard's: what
//! `linerate bench --tunnel esp` measures as the ESP graph, beside the gateway
//! around it. Inner packets (each naming its tunnel in `meta.peer`, as ip-lookup
//! names it) go through `esp-encrypt` to the ESP exit; ESP packets (the outer
//! headers stripped and `meta.addr` set to the outer destination, as ip-local
//! leaves them) go through `esp-decrypt` to the inner exit.
//!
//! ```text
//!   inner ─▶ esp-encrypt ─▶ esp-output  (outer IP + ESP)
//!   ESP   ─▶ esp-decrypt ─▶ inner-output
//! ```

use crate::Handle;
use crate::arena::Arena;
use crate::context::{Context, OutputId};
use crate::counters::NodeCounters;
use crate::esp::EspTunnels;
use crate::graph::{Graph, NodeId, Rebind};
use crate::nodes::{EspDecrypt, EspEncrypt, IpLookup, Output, TunnelInput};
use crypto::EngineSet;
use std::time::Instant;
use wireguard::Device;

/// ESP packets, outer headers in front, as esp-encrypt hands them to routing.
pub const ESP_OUT: OutputId = OutputId(0);
/// Opened inner packets, as esp-decrypt hands them to the tunnel's input.
pub const INNER_OUT: OutputId = OutputId(1);

const ESP_EXIT: &str = "esp-output";
const INNER_EXIT: &str = "inner-output";

pub struct EspGraph {
    graph: Graph<Context>,
    cx: Context,
    encrypt: NodeId,
    decrypt: NodeId,
}

impl EspGraph {
    /// `device` only lends the context its key registry (the SAs' keys go there).
    pub fn new(arena: Arena, device: Device, engines: EngineSet, now: Instant) -> EspGraph {
        let graph: Graph<Context> = Graph::with_rebinds(
            vec![
                Box::new(EspEncrypt::node()),
                Box::new(Output::new(ESP_EXIT, ESP_OUT)),
                Box::new(EspDecrypt::node()),
                Box::new(Output::new(INNER_EXIT, INNER_OUT)),
            ],
            &[
                Rebind {
                    node: EspEncrypt::NAME,
                    edge: IpLookup::NAME,
                    to: ESP_EXIT,
                },
                Rebind {
                    node: EspDecrypt::NAME,
                    edge: TunnelInput::NAME,
                    to: INNER_EXIT,
                },
            ],
        );
        let id = |name| graph.id(name).expect("built above");
        EspGraph {
            encrypt: id(EspEncrypt::NAME),
            decrypt: id(EspDecrypt::NAME),
            cx: Context::new(arena, engines, device, 2, now),
            graph,
        }
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

    /// Inner packets to seal, each with its tunnel in `meta.peer`.
    pub fn from_inner(&mut self, packets: &[Handle]) {
        self.graph.enqueue(self.encrypt, packets);
    }

    /// ESP packets to open: `meta.offset` at the ESP header, `meta.addr` the outer
    /// destination.
    pub fn from_outer(&mut self, packets: &[Handle]) {
        self.graph.enqueue(self.decrypt, packets);
    }

    pub fn run(&mut self, now: Instant) {
        self.cx.now = now;
        self.graph.run(&mut self.cx);
    }
}
