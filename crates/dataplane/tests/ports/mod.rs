//! What the gateway tests do at a gateway graph's ports, as a driver would: frames
//! in, the frames a port would send out, a node's drop counter.

#![allow(dead_code)]

use dataplane::Handle;
use dataplane::fib::PortId;
use dataplane::gateway::GatewayGraph;
use std::time::Instant;

/// `frame` received on `port`, and the graph run.
pub fn send(gw: &mut GatewayGraph, port: PortId, frame: &[u8], now: Instant) {
    let h = gw.context_mut().arena_mut().alloc_with(frame).unwrap();
    gw.from_port(port, &[h]);
    gw.run(now);
}

/// Frames `port`'s driver would send now, taken out (their buffers freed).
pub fn sent(gw: &mut GatewayGraph, port: PortId) -> Vec<Vec<u8>> {
    let q = gw.port_output(port).unwrap();
    let mut out = Vec::new();
    gw.context_mut().send_output(q, |arena, hs: &[Handle]| {
        out.extend(hs.iter().map(|&h| arena.data(h).to_vec()));
    });
    out
}

/// What `node` dropped for `reason`.
pub fn drops(gw: &GatewayGraph, node: &str, reason: &str) -> u64 {
    gw.counters()
        .find(|(n, _)| *n == node)
        .map_or(0, |(_, c)| c.drops_named(reason))
}

/// An Ethernet frame.
pub fn ether(dst: [u8; 6], src: [u8; 6], kind: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&src);
    f.extend_from_slice(&kind.to_be_bytes());
    f.extend_from_slice(payload);
    f
}
