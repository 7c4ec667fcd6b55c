//! The L2 path's nodes around WireGuard's, on their own, as `WgGraph` has the
//! tunnel's and `TunnelGraph` ESP's: what `linerate bench --l2` measures as the L2
//! graph. One port is cross-connected to one VXLAN tunnel both ways; the tunnel's
//! outer packets go straight into `wg-encrypt` (the route ip-lookup would find),
//! and what `wg-decrypt` opens comes out for the caller to hand to `vxlan-decap`
//! once its outer IP and UDP headers are off (what ip-local does).
//!
//! ```text
//!   frames    ─▶ l2-xconnect ─▶ vxlan-encap ─▶ wg-encrypt ─▶ udp-output
//!   datagrams ─▶ wg-input ─▶ wg-decrypt ─▶ tun-output      (outer VXLAN packets)
//!   VXLAN     ─▶ vxlan-decap ─▶ l2-xconnect ─▶ l2-output   (frames for the port)
//! ```

use crate::Handle;
use crate::arena::Arena;
use crate::context::{Context, OutputId};
use crate::counters::NodeCounters;
use crate::fib::PortId;
use crate::gateway::{LARGEST_PORT_MTU, max_port_mtu};
use crate::graph::{NodeId, Rebind};
use crate::interfaces::Interface;
use crate::l2::L2Interface;
use crate::nodes::{IpLookup, L2Xconnect, Output, PortOutput, VxlanDecap, VxlanEncap, WgEncrypt};
use crate::vxlan::{OVERHEAD_V4, OVERHEAD_V6, VxlanId, VxlanTunnel};
use crate::wg::WgGraph;
use crypto::EngineSet;
use std::net::IpAddr;
use std::time::Instant;
use wireguard::Device;

pub use crate::wg::{TUN_OUT, UDP_OUT};
/// Frames for the cross-connected port, as `port-output` would send them.
pub const L2_OUT: OutputId = OutputId(2);

const L2_EXIT: &str = "l2-output";
/// The cross-connected port's MTU on standard buffers: the largest IP packet in a
/// frame it sends. On jumbo buffers the port is a jumbo one, of
/// [`LARGEST_PORT_MTU`].
pub const PORT_MTU: u16 = 1600;

pub struct L2Graph {
    wg: WgGraph,
    port: PortId,
    xconnect: NodeId,
    decap: NodeId,
}

impl L2Graph {
    /// The graph around `wg`'s device (whose peer must take the tunnel's outer
    /// packets: `vtep` in its allowed IPs), with a VXLAN tunnel whose both ends are
    /// `vtep` (what it seals comes back to it) under `vni`.
    pub fn new(
        arena: Arena,
        device: Device,
        engines: EngineSet,
        now: Instant,
        vtep: IpAddr,
        vni: u32,
    ) -> Result<L2Graph, String> {
        let mut wg = WgGraph::with_front(
            arena,
            device,
            engines,
            now,
            vec![
                Box::new(VxlanDecap),
                Box::new(L2Xconnect),
                Box::new(VxlanEncap),
                Box::new(Output::new(L2_EXIT, L2_OUT)),
            ],
            &[
                Rebind {
                    node: VxlanEncap::NAME,
                    edge: IpLookup::NAME,
                    to: WgEncrypt::NAME,
                },
                Rebind {
                    node: L2Xconnect::NAME,
                    edge: PortOutput::NAME,
                    to: L2_EXIT,
                },
            ],
            1,
        );
        let cx = wg.context_mut();
        let mtu = if cx.arena.buffer_size() == crate::arena::STANDARD_BUFFER {
            PORT_MTU
        } else {
            LARGEST_PORT_MTU
        };
        let port = cx
            .ip
            .interfaces
            .add(
                Interface {
                    name: "l2".into(),
                    mac: [0x02, 0, 0, 0, 0, 0x01],
                    mtu,
                    addrs: Vec::new(),
                    output: L2_OUT,
                },
                max_port_mtu(cx.arena.buffer_size()),
            )
            .map_err(|e| e.to_string())?;
        let overhead = if vtep.is_ipv4() {
            OVERHEAD_V4
        } else {
            OVERHEAD_V6
        };
        let tunnel = VxlanTunnel {
            name: "vxlan0".into(),
            vni,
            local: vtep,
            remote: vtep,
            udp_port: wire::vxlan::PORT,
            // The most the WireGuard tunnel it leads into carries.
            max_frame: cx.max_wg_mtu() - overhead,
        };
        let vxlan: VxlanId = cx.tunnels.vxlan.add(tunnel).map_err(|e| e.to_string())?;
        for (rx, tx) in [
            (L2Interface::Port(port), L2Interface::Vxlan(vxlan)),
            (L2Interface::Vxlan(vxlan), L2Interface::Port(port)),
        ] {
            cx.l2.connect(rx, tx).map_err(|e| e.to_string())?;
        }
        let id = |name| wg.node_id(name).expect("built above");
        Ok(L2Graph {
            xconnect: id(L2Xconnect::NAME),
            decap: id(VxlanDecap::NAME),
            port,
            wg,
        })
    }

    pub fn context(&self) -> &Context {
        self.wg.context()
    }

    pub fn context_mut(&mut self) -> &mut Context {
        self.wg.context_mut()
    }

    /// Every node's name and counters, in graph order.
    pub fn counters(&self) -> impl Iterator<Item = (&'static str, &NodeCounters)> {
        self.wg.counters()
    }

    /// Ethernet frames received on the cross-connected port.
    pub fn from_port(&mut self, frames: &[Handle]) {
        let port = self.port.0;
        let arena = self.wg.context_mut().arena_mut();
        for &h in frames {
            let m = arena.meta_mut(h);
            m.port = port;
            m.peer = u32::MAX;
        }
        self.wg.enqueue(self.xconnect, frames);
    }

    /// Datagrams from the peer (meta.addr = source).
    pub fn from_udp(&mut self, datagrams: &[Handle]) {
        self.wg.from_udp(datagrams);
    }

    /// VXLAN headers and what follows, from the tunnel's remote: `meta.addr` the
    /// outer source address and the UDP port they were sent to, as ip-local
    /// leaves them.
    pub fn from_vxlan(&mut self, packets: &[Handle]) {
        self.wg.enqueue(self.decap, packets);
    }

    pub fn run(&mut self, now: Instant) {
        self.wg.run(now);
    }
}
