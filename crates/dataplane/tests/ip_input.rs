//! The gateway's input nodes in a graph of their own: frames from a port go to ARP,
//! IPv4 or IPv6 by EtherType, bad ones are dropped under their own reasons, IPv6
//! multicast reaches local delivery only for groups the gateway listens to, and
//! every buffer comes back.

use crypto::{EngineSet, KeyRegistry};
use dataplane::context::{Context, OutputId};
use dataplane::counters::NodeCounters;
use dataplane::interfaces::Interface;
use dataplane::nodes::{EthernetInput, Ip4Input, Ip6Input};
use dataplane::{Arena, ErrorInfo, FREE, Graph, Handle, Node, NodeInfo};
use std::sync::Arc;
use std::time::{Instant, SystemTime};
use wireguard::Device;

const OURS: [u8; 6] = [0x02, 0, 0, 0, 0, 1];

/// Counts what reaches it, by its name.
struct Sink(NodeInfo);

impl Node<Context> for Sink {
    fn info(&self) -> &NodeInfo {
        &self.0
    }
    fn process(&mut self, _: &mut Context, p: &[Handle], next: &mut [u16], c: &mut NodeCounters) {
        c.consumed += p.len() as u64;
        next.fill(FREE);
    }
}

fn sink(name: &'static str) -> Box<dyn Node<Context>> {
    const NONE: &[ErrorInfo] = &[];
    Box::new(Sink(NodeInfo {
        name,
        next: &[],
        errors: NONE,
    }))
}

fn setup() -> (Graph<Context>, Context) {
    let now = Instant::now();
    let device = Device::new(Arc::new(KeyRegistry::new(4)), now, SystemTime::now());
    let mut cx = Context::new(Arena::new(64), EngineSet::new(vec![]), device, 1, now);
    cx.ip_mut()
        .interfaces_mut()
        .add(
            Interface {
                name: "lan".into(),
                mac: OURS,
                mtu: 1500,
                addrs: vec![
                    "198.19.0.1/24".parse().unwrap(),
                    "2001:2::1/64".parse().unwrap(),
                ],
                output: OutputId(0),
            },
            1856,
        )
        .unwrap();
    let graph = Graph::new(vec![
        Box::new(EthernetInput),
        Box::new(Ip4Input),
        Box::new(Ip6Input),
        sink(EthernetInput::ARP),
        sink(Ip4Input::LOOKUP),
        sink(Ip6Input::LOCAL),
        sink(dataplane::nodes::L2Xconnect::NAME),
    ]);
    (graph, cx)
}

fn ipv4(dst: [u8; 4]) -> Vec<u8> {
    let mut p = vec![
        0x45, 0, 0, 28, 0, 1, 0, 0, 64, 17, 0, 0, 198, 18, 0, 1, 0, 0, 0, 0, 0x30, 0x39, 0x30,
        0x39, 0, 8, 0, 0,
    ];
    p[16..20].copy_from_slice(&dst);
    wire::ipv4::Packet::new_unchecked(&mut p[..]).fill_checksum();
    p
}

fn ipv6(dst: [u8; 16]) -> Vec<u8> {
    let mut p = vec![0u8; 48];
    p[0] = 0x60;
    p[5] = 8;
    p[6] = 17;
    p[7] = 64;
    p[8..24].copy_from_slice(&"2001:2::9".parse::<std::net::Ipv6Addr>().unwrap().octets());
    p[24..40].copy_from_slice(&dst);
    p
}

fn frame(dst: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 9]);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

fn counters(g: &Graph<Context>, node: &str) -> NodeCounters {
    g.counters().find(|(n, _)| *n == node).unwrap().1.clone()
}

#[test]
fn frames_reach_their_protocols_and_bad_ones_are_counted() {
    let (mut g, mut cx) = setup();
    let solicited: std::net::Ipv6Addr = "ff02::1:ff00:1".parse().unwrap();
    let other_group: std::net::Ipv6Addr = "ff02::1:ff00:2".parse().unwrap();
    let mut bad_checksum = ipv4([198, 19, 1, 1]);
    bad_checksum[10] ^= 1;
    let frames = [
        frame(OURS, 0x0800, &ipv4([198, 19, 1, 1])), // routed
        frame([0xff; 6], 0x0806, &[0; 28]),          // arp
        frame(
            OURS,
            0x86dd,
            &ipv6([0x20, 1, 0, 2, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]),
        ), // routed
        frame(
            [0x33, 0x33, 0xff, 0, 0, 1],
            0x86dd,
            &ipv6(solicited.octets()),
        ), // local
        frame(
            [0x33, 0x33, 0xff, 0, 0, 2],
            0x86dd,
            &ipv6(other_group.octets()),
        ), // not ours
        frame(OURS, 0x0800, &bad_checksum),
        frame([0x02, 0, 0, 0, 0, 7], 0x0800, &ipv4([198, 19, 1, 1])), // another station's
        frame(OURS, 0x88cc, &[0; 46]),
        frame(OURS, 0x0800, &[0x45]),
    ];
    let handles: Vec<Handle> = frames
        .iter()
        .map(|f| {
            let h = cx.arena_mut().alloc_with(f).unwrap();
            cx.arena_mut().meta_mut(h).port = 0;
            h
        })
        .collect();
    g.enqueue(0, &handles);
    g.run(&mut cx);
    assert_eq!(counters(&g, "arp-input").consumed, 1);
    assert_eq!(counters(&g, "ip-lookup").consumed, 2);
    assert_eq!(counters(&g, "ip-local").consumed, 1);
    let eth = counters(&g, "ethernet-input");
    assert_eq!(eth.drops_named("not-for-us"), 1);
    assert_eq!(eth.drops_named("unknown-ethertype"), 1);
    assert_eq!(counters(&g, "ip4-input").drops_named("bad-checksum"), 1);
    assert_eq!(counters(&g, "ip4-input").drops_named("truncated"), 1);
    assert_eq!(counters(&g, "ip6-input").drops_named("not-routed"), 1);
    assert_eq!(cx.arena().available(), 64, "every buffer back");
}

#[test]
fn a_frame_from_an_unknown_port_is_counted() {
    let (mut g, mut cx) = setup();
    let h = cx
        .arena_mut()
        .alloc_with(&frame(OURS, 0x0800, &ipv4([198, 19, 1, 1])))
        .unwrap();
    cx.arena_mut().meta_mut(h).port = 3;
    g.enqueue(0, &[h]);
    g.run(&mut cx);
    assert_eq!(
        counters(&g, "ethernet-input").drops_named("unknown-port"),
        1
    );
    assert_eq!(cx.arena().available(), 64);
}
