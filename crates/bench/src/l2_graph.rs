//! The L2 graph for `linerate bench --l2`, as `linerate bench` has the WireGuard
//! one: per worker an [`L2Graph`] whose port is cross-connected to a VXLAN tunnel
//! that leads to itself, inside a WireGuard loopback session. Each frame goes
//! through `l2-xconnect`, `vxlan-encap` and `wg-encrypt`, comes straight back in
//! through `wg-input` and `wg-decrypt`, then `vxlan-decap` and `l2-xconnect` out of
//! the port. The harness does what the port's driver and ip-local would around the
//! nodes: it puts an Ethernet header on each inner packet (a frame as received),
//! and takes the outer IP and UDP headers off each opened VXLAN packet.

use crate::measure::{self, Loopback};
use crate::wg_graph;
use dataplane::l2_graph::{L2_OUT, L2Graph, TUN_OUT, UDP_OUT};
use dataplane::{Arena, Context, Handle, NodeCounters};
use runtime::engines;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};
use wire::{ethernet, ipv4, udp};
use wireguard::DropReason;

/// Both ends of the VXLAN tunnel: inside the loopback peer's allowed IPs, so that
/// its outer packets are sealed for that peer and opened from it.
const VTEP: [u8; 4] = [198, 19, 0, 2];
const VNI: u32 = 10;
/// The frame's addresses: the hosts on each side of the cross-connect.
const DST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x0b, 0x10];
const SRC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x0a, 0x10];

pub(crate) struct L2Loopback {
    graph: L2Graph,
    /// Opened outer packets between `wg-decrypt` and `vxlan-decap`.
    vxlan: Vec<Handle>,
}

fn worker(engine: Option<&str>, buffer: usize) -> Result<L2Loopback, String> {
    let now = Instant::now();
    let device = wg_graph::loopback_device(now)?;
    let (engines, _) = engines::configured_set(
        device.keys(),
        engine,
        Duration::from_millis(6),
        &[crypto::Algorithm::ChaCha20Poly1305],
        buffer,
    )?;
    let graph = L2Graph::new(
        Arena::with_buffers(4 * dataplane::graph::FRAME_LEN + 64, buffer),
        device,
        engines,
        now,
        IpAddr::from(VTEP),
        VNI,
    )?;
    Ok(L2Loopback {
        graph,
        vxlan: Vec::with_capacity(dataplane::graph::FRAME_LEN),
    })
}

/// The graphs of `workers` workers, each with its own tunnel.
pub(crate) fn graphs(
    engine: Option<&str>,
    workers: usize,
    buffer: usize,
) -> Result<Vec<L2Loopback>, String> {
    (0..workers).map(|_| worker(engine, buffer)).collect()
}

/// What ip4-input and ip-local would do with an opened VXLAN packet: the outer
/// IPv4 and UDP headers off, the outer source and the UDP port it was sent to in
/// `meta.addr`. `false` for anything else (the graph sends nothing else).
fn to_vxlan(cx: &mut Context, h: Handle) -> bool {
    let data = cx.arena().data(h);
    let Ok(p) = ipv4::Packet::new_checked(data) else {
        return false;
    };
    let (src, header) = (p.src_addr(), p.header_len());
    let Some(u) = data.get(header..header + udp::HEADER_LEN) else {
        return false;
    };
    let port = u16::from_be_bytes([u[2], u[3]]);
    let m = cx.arena_mut().meta_mut(h);
    let outer = (header + udp::HEADER_LEN) as u16;
    m.offset += outer;
    m.len -= outer;
    m.addr = SocketAddr::new(IpAddr::V4(src), port);
    true
}

impl Loopback for L2Loopback {
    fn alg(&self) -> crypto::Algorithm {
        crypto::Algorithm::ChaCha20Poly1305
    }

    fn aad_len(&self) -> usize {
        0
    }

    /// The frame (the packet and its Ethernet header) in VXLAN over IPv4, padded to
    /// 16 bytes as WireGuard does.
    fn text_len(&self, inner: usize) -> usize {
        let outer = inner + ethernet::HEADER_LEN + dataplane::vxlan::OVERHEAD_V4;
        wire::wireguard::padded_len(outer, self.context().wg_mtu())
    }

    fn context(&self) -> &Context {
        self.graph.context()
    }

    fn context_mut(&mut self) -> &mut Context {
        self.graph.context_mut()
    }

    fn seal(&mut self, inner: &[Handle], back: &mut Vec<Handle>, now: Instant) {
        let arena = self.graph.context_mut().arena_mut();
        for &h in inner {
            let m = *arena.meta(h);
            let at = usize::from(m.offset) - ethernet::HEADER_LEN;
            let header = &mut arena.buffer_mut(h)[at..at + ethernet::HEADER_LEN];
            header[..6].copy_from_slice(&DST_MAC);
            header[6..12].copy_from_slice(&SRC_MAC);
            header[12..].copy_from_slice(&ethernet::ethertype::IPV4.to_be_bytes());
            let m = arena.meta_mut(h);
            m.offset = at as u16;
            m.len += ethernet::HEADER_LEN as u16;
        }
        self.graph.from_port(inner);
        self.graph.run(now);
        let cx = self.graph.context_mut();
        cx.send_control(|_, _| ());
        back.clear();
        cx.take_output(UDP_OUT, back);
    }

    fn open(&mut self, back: &[Handle], now: Instant) -> u64 {
        self.graph.from_udp(back);
        self.graph.run(now);
        let cx = self.graph.context_mut();
        self.vxlan.clear();
        cx.take_output(TUN_OUT, &mut self.vxlan);
        self.vxlan.retain(|&h| {
            let ok = to_vxlan(cx, h);
            if !ok {
                cx.arena_mut().free(h);
            }
            ok
        });
        self.graph.from_vxlan(&self.vxlan);
        self.graph.run(now);
        wg_graph::delivered(self.graph.context_mut(), L2_OUT)
    }

    fn node_counters(&self) -> Vec<(&'static str, &NodeCounters)> {
        self.graph.counters().collect()
    }

    fn is_late(reason: &str) -> bool {
        reason == DropReason::Replay.name()
    }
}

/// The L2 graph and the WireGuard graph on the same workers, in turns; each worker
/// has its own tunnel.
pub(crate) fn turns(
    opts: &measure::Options,
) -> Result<(Vec<measure::Row>, Vec<measure::Row>), String> {
    let opts = measure::Options {
        peers: measure::Peers::Each,
        workers: opts.workers.clone(),
        sizes: opts.sizes.clone(),
        engine: opts.engine.clone(),
        ..*opts
    };
    let build =
        |workers: usize, _peers: usize| graphs(opts.engine.as_deref(), workers, opts.buffer());
    wg_graph::beside_wireguard(&opts, &build)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::Size;

    #[test]
    fn a_short_run_delivers_every_frame_at_every_size() {
        for size in [Size::Fixed(64), Size::Fixed(1514), Size::Imix] {
            let g = graphs(None, 1, dataplane::STANDARD_BUFFER)
                .unwrap()
                .remove(0);
            let m = crate::driver::drive(g, size, 0.02).unwrap();
            assert!(m.packets >= dataplane::graph::FRAME_LEN as u64, "{size:?}");
            assert_eq!(m.late, 0);
        }
    }
}
