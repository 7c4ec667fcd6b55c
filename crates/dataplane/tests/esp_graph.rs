//! The ESP graph on its own (`esp_graph`): an inner packet sealed by `esp-encrypt`
//! leaves with the tunnel's outer header in front, and opened by `esp-decrypt` it
//! is the packet that went in, for every algorithm, with and without extended
//! sequence numbers; a packet outside the selectors is dropped and counted.

use crypto::{EngineSet, KeyRegistry};
use dataplane::esp::{Encapsulation, EspTunnel, EspTunnelId, InboundSa, OutboundSa, SaSpec};
use dataplane::tunnel_graph::{INNER_OUT, TUNNEL_OUT, TunnelGraph, TunnelKind};
use dataplane::{Arena, HEADROOM, Handle};
use ipsec::{EspAlgorithm, Lifetime};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

const ADDRESS: [u8; 4] = [198, 18, 0, 1];

fn graph(alg: EspAlgorithm, esn: bool, local_ts: &str) -> (TunnelGraph, EspTunnelId) {
    let now = Instant::now();
    let keys = Arc::new(KeyRegistry::new(16));
    let device = wireguard::Device::new(keys.clone(), now, SystemTime::now());
    let engines = EngineSet::new(vec![Box::new(crypto_awslc::AwsLcEngine::new())]);
    let mut g = TunnelGraph::new(TunnelKind::Esp, Arena::new(64), device, engines, now);
    let spec = SaSpec {
        spi: 0x4242,
        alg,
        keymat: zeroize::Zeroizing::new((0..alg.keymat_len() as u8).collect()),
        esn,
        replay_window: 64,
        lifetime: Lifetime::default(),
    };
    let address = IpAddr::from(ADDRESS);
    let table = g.esp_mut();
    let t = table
        .add(EspTunnel::new(
            "t".into(),
            address,
            address,
            Encapsulation::None,
            vec![local_ts.parse().unwrap()],
            vec!["0.0.0.0/0".parse().unwrap()],
            1400,
        ))
        .unwrap();
    table
        .set_outbound(t, Arc::new(OutboundSa::new(&keys, &spec).unwrap()))
        .unwrap();
    table
        .add_inbound(t, Arc::new(InboundSa::new(&keys, &spec).unwrap()))
        .unwrap();
    (g, t)
}

fn inner(len: usize, seq: u8) -> Vec<u8> {
    let mut p: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(31) ^ seq).collect();
    let head = [
        0x45,
        0,
        (len >> 8) as u8,
        len as u8,
        0,
        seq,
        0x40,
        0,
        64,
        17,
        0,
        0,
        198,
        19,
        0,
        2,
        198,
        19,
        0,
        3,
    ];
    p[..20].copy_from_slice(&head);
    p
}

/// Seals `packets`, strips the outer IPv4 header of each sealed one (as ip-local
/// would) and opens them: the ESP packets and what came out.
fn round(g: &mut TunnelGraph, t: EspTunnelId, packets: &[Vec<u8>]) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let now = Instant::now();
    let cx = g.context_mut();
    let handles: Vec<Handle> = packets
        .iter()
        .map(|p| {
            let h = cx.arena_mut().alloc().unwrap();
            cx.arena_mut().buffer_mut(h)[HEADROOM..HEADROOM + p.len()].copy_from_slice(p);
            let m = cx.arena_mut().meta_mut(h);
            m.len = p.len() as u16;
            m.peer = u32::from(t.0);
            h
        })
        .collect();
    g.from_inner(&handles);
    g.run(now);
    let mut sealed = Vec::new();
    let cx = g.context_mut();
    cx.take_output(TUNNEL_OUT, &mut sealed);
    let mut esp = Vec::new();
    for &h in &sealed {
        let data = cx.arena_mut().data(h).to_vec();
        assert_eq!(&data[..2], &[0x45, 0], "an outer IPv4 header");
        assert_eq!(data[9], 50, "protocol ESP");
        assert_eq!(&data[12..20], &[198, 18, 0, 1, 198, 18, 0, 1]);
        esp.push(data);
        let m = cx.arena_mut().meta_mut(h);
        m.offset += 20;
        m.len -= 20;
        m.addr = SocketAddr::new(IpAddr::from(ADDRESS), 0);
    }
    g.from_outer(&sealed);
    g.run(now);
    let mut opened = Vec::new();
    g.context_mut().send_output(INNER_OUT, |arena, hs| {
        opened.extend(hs.iter().map(|&h| arena.data(h).to_vec()))
    });
    (esp, opened)
}

#[test]
fn what_is_sealed_opens_to_the_packet_sent() {
    for alg in EspAlgorithm::ALL {
        for esn in [false, true] {
            let (mut g, t) = graph(alg, esn, "0.0.0.0/0");
            let sent: Vec<Vec<u8>> = [20usize, 64, 333, 1400]
                .iter()
                .enumerate()
                .map(|(i, &n)| inner(n, i as u8))
                .collect();
            let (esp, opened) = round(&mut g, t, &sent);
            assert_eq!(opened, sent, "{alg} esn {esn}");
            // Sequence numbers 1, 2, ... in the ESP header (the low half with ESN).
            for (i, p) in esp.iter().enumerate() {
                assert_eq!(&p[20..24], &0x4242u32.to_be_bytes());
                assert_eq!(&p[24..28], &(i as u32 + 1).to_be_bytes(), "{alg}");
            }
        }
    }
}

#[test]
fn a_packet_outside_the_selectors_is_dropped_and_counted() {
    let (mut g, t) = graph(EspAlgorithm::Aes128Gcm, true, "198.19.9.0/24");
    let (esp, opened) = round(&mut g, t, &[inner(100, 1)]);
    assert!(esp.is_empty() && opened.is_empty());
    let policy: u64 = g
        .counters()
        .filter(|(name, _)| *name == "esp-encrypt")
        .flat_map(|(_, c)| {
            c.drops()
                .filter(|(e, _)| e.name == "policy")
                .map(|(_, n)| n)
        })
        .sum();
    assert_eq!(policy, 1);
}
