//! The in-memory port: frames handed to a graph's port and taken from it as bytes,
//! for tests and benchmarks that run graphs without interfaces, and a cable that
//! carries what one graph's port sends to another graph's port. Nothing here runs
//! a graph: the caller runs it when it wants the frames to move on.

use crate::PortGraph;
use dataplane::fib::PortId;
use dataplane::{HEADROOM, Handle};

/// Copies `frames` into fresh buffers and hands them to the graph as received on
/// `port`; how many were taken (the rest found the arena empty, or were larger
/// than a buffer holds).
pub fn put<'a>(
    graph: &mut impl PortGraph,
    port: PortId,
    frames: impl IntoIterator<Item = &'a [u8]>,
) -> usize {
    let arena = graph.context_mut().arena_mut();
    let handles: Vec<Handle> = frames
        .into_iter()
        .filter_map(|f| arena.alloc_with(f))
        .collect();
    graph.take_in(port, &handles);
    handles.len()
}

/// Hands the graph up to `n` frames received on `port`, each written by `fill`
/// into a fresh buffer from its headroom on (`fill` returns the frame's length);
/// how many (fewer when the arena runs out).
pub fn put_with(
    graph: &mut impl PortGraph,
    port: PortId,
    n: usize,
    mut fill: impl FnMut(&mut [u8]) -> usize,
) -> usize {
    let mut handles: Vec<Handle> = Vec::with_capacity(n);
    let arena = graph.context_mut().arena_mut();
    for _ in 0..n {
        let Some(h) = arena.alloc() else { break };
        let len = fill(&mut arena.buffer_mut(h)[HEADROOM..]);
        arena.meta_mut(h).len = len as u16;
        handles.push(h);
    }
    graph.take_in(port, &handles);
    handles.len()
}

/// Shows `each` every frame the graph queued for `port`, in order, and frees them:
/// what the port's driver would send now.
///
/// Panics if the graph has no port `port` (a test's or benchmark's mistake).
pub fn take(graph: &mut impl PortGraph, port: PortId, mut each: impl FnMut(&[u8])) {
    let queue = graph
        .port_output(port)
        .unwrap_or_else(|| panic!("no port {port:?} in this graph"));
    graph.context_mut().send_output(queue, |arena, hs| {
        for &h in hs {
            each(arena.data(h));
        }
    });
}

/// The frames the graph queued for `port`, taken out.
pub fn sent(graph: &mut impl PortGraph, port: PortId) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    take(graph, port, |f| out.push(f.to_vec()));
    out
}

/// Carries the frames `from` queued for `from_port` to `to`, received on `to_port`
/// (copied: each graph has its own arena); how many arrived. Frames the far
/// arena has no buffer for are lost, as on a cable into a full ring. Panics if
/// `from` has no port `from_port`.
pub fn cable(
    from: &mut impl PortGraph,
    from_port: PortId,
    to: &mut impl PortGraph,
    to_port: PortId,
) -> usize {
    let queue = from
        .port_output(from_port)
        .unwrap_or_else(|| panic!("no port {from_port:?} in this graph"));
    let mut moved: Vec<Handle> = Vec::with_capacity(crate::RX_BATCH);
    let to_arena = to.context_mut().arena_mut();
    from.context_mut().send_output(queue, |arena, hs| {
        moved.extend(
            hs.iter()
                .filter_map(|&h| to_arena.alloc_with(arena.data(h))),
        );
    });
    if !moved.is_empty() {
        to.take_in(to_port, &moved);
    }
    moved.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use dataplane::context::OutputId;
    use dataplane::gateway::GatewayGraph;
    use dataplane::interfaces::Interface;
    use dataplane::{Arena, STANDARD_BUFFER as FRAME_SIZE};
    use std::time::Instant;

    /// A gateway graph with one port, and no tunnel.
    fn gateway(buffers: usize) -> (GatewayGraph, PortId) {
        let now = Instant::now();
        let keys = std::sync::Arc::new(crypto::KeyRegistry::new(1));
        let device = wireguard::Device::new(keys, now, std::time::SystemTime::now());
        let mut gw = GatewayGraph::new(
            Arena::new(buffers),
            crypto::EngineSet::new(vec![]),
            device,
            now,
        );
        let port = gw
            .add_port(Interface {
                name: "lan".into(),
                mac: [2, 0, 0, 0, 0, 1],
                mtu: 1500,
                addrs: vec!["198.18.1.1/24".parse().unwrap()],
                output: OutputId(0),
            })
            .unwrap();
        (gw, port)
    }

    /// An ARP request for the gateway's address, from 198.18.1.2.
    fn arp_request() -> Vec<u8> {
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&[2, 0, 0, 0, 0, 2, 0x08, 0x06]);
        f.extend_from_slice(&[0, 1, 0x08, 0, 6, 4, 0, 1]);
        f.extend_from_slice(&[2, 0, 0, 0, 0, 2, 198, 18, 1, 2]);
        f.extend_from_slice(&[0; 6]);
        f.extend_from_slice(&[198, 18, 1, 1]);
        f
    }

    /// A frame put in is answered on the same port; every buffer comes back, and
    /// a frame larger than a buffer is not taken.
    #[test]
    fn a_frame_put_in_is_answered_and_the_buffers_come_back() {
        let (mut gw, port) = gateway(8);
        let big = vec![0u8; FRAME_SIZE];
        assert_eq!(put(&mut gw, port, [&arp_request()[..], &big[..]]), 1);
        gw.run(Instant::now());
        let out = sent(&mut gw, port);
        assert_eq!(out.len(), 1, "one ARP reply");
        assert_eq!(&out[0][12..14], &[0x08, 0x06]);
        assert_eq!(&out[0][..6], &[2, 0, 0, 0, 0, 2], "to the asker");
        assert_eq!(gw.context().arena().available(), 8);
    }

    /// A cable carries what one graph sends into the other, as many frames as the
    /// far arena has buffers for.
    #[test]
    fn a_cable_carries_frames_while_the_far_arena_has_buffers() {
        let (mut a, pa) = gateway(8);
        let (mut b, pb) = gateway(1);
        let req = arp_request();
        assert_eq!(
            put_with(&mut a, pa, 3, |buf| {
                buf[..req.len()].copy_from_slice(&req);
                req.len()
            }),
            3
        );
        a.run(Instant::now());
        assert_eq!(cable(&mut a, pa, &mut b, pb), 1, "b has one buffer");
        assert_eq!(a.context().arena().available(), 8);
        assert_eq!(cable(&mut a, pa, &mut b, pb), 0, "nothing queued");
    }
}
