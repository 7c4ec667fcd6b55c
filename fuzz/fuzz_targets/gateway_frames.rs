//! The gateway graph from its ports: arbitrary Ethernet frames go in on the LAN, the
//! WAN or the cross-connected L2 port of a gateway with addresses, routes (a next
//! hop, a tunnel, a blackhole), a WireGuard interface with one peer, an ESP tunnel
//! (inbound SPI 0x100 with ESN, outbound into 198.19.5.0/24) and a VXLAN tunnel the
//! L2 port is cross-connected to both ways, and the graph runs. It must
//! never panic, and every buffer must come back: once the clock has moved past every
//! timer (neighbor probes, packets waiting for a handshake) and the output queues
//! are drained, the arena is full again.
//!
//! Record: `kind, len, bytes[len]`, where `kind`
//!   bit 0     the port: 0 LAN, 1 WAN (with bit 4: the L2 port)
//!   bit 1     prepend an Ethernet header to the port's own address (IPv4) so the
//!             bytes reach the IP nodes; else the bytes are the whole frame
//!   bit 2     run the graph now (else frames pile up to a frame's worth)
//!   bit 3     advance the clock by a second and run the timers
//!   bit 5     with bit 1: also an IPv4 and UDP header from the VXLAN remote to
//!             the VXLAN port, so the bytes reach vxlan-decap
//!   bit 6     with bit 1 (not 5): also an IPv4 header of protocol 50 from the ESP
//!             peer, so the bytes reach esp-decrypt
#![no_main]

use crypto::x25519::PrivateKey;
use crypto::{EngineSet, KeyRegistry};
use dataplane::context::{OutputId, esp_tunnel};
use dataplane::esp::{Encapsulation, EspTunnel, InboundSa, OutboundSa, SaSpec};
use dataplane::fib::{PortId, RouteTarget, TunnelId};
use dataplane::gateway::GatewayGraph;
use dataplane::interfaces::Interface;
use dataplane::l2::L2Interface;
use dataplane::vxlan::VxlanTunnel;
use dataplane::{Arena, Handle};
use libfuzzer_sys::fuzz_target;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

const BUFFERS: usize = 256;
const LAN_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 1];
const WAN_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 2];
const VXLAN_REMOTE: [u8; 4] = [198, 18, 2, 2];
const ESP_REMOTE: [u8; 4] = [198, 18, 2, 3];

fn gateway(now: Instant) -> (GatewayGraph, [PortId; 3]) {
    let keys = Arc::new(KeyRegistry::new(64));
    let mut device = wireguard::Device::new(keys, now, SystemTime::now());
    device.set_private_key(Some(PrivateKey::from_bytes([7; 32])));
    let peer = device
        .add_peer(PrivateKey::from_bytes([9; 32]).public_key())
        .unwrap();
    device.set_endpoint(peer, "198.18.2.2:51820".parse().unwrap());
    device.add_allowed_ip(peer, "198.19.3.0/24".parse().unwrap());
    let engines = EngineSet::new(vec![Box::new(crypto_awslc::AwsLcEngine::new())]);
    let mut gw = GatewayGraph::new(Arena::new(BUFFERS), engines, device, now);
    gw.set_wireguard(51820, 1420);
    let port = |name: &str, mac, addrs: &[&str], mtu| Interface {
        name: name.into(),
        mac,
        mtu,
        addrs: addrs.iter().map(|a| a.parse().unwrap()).collect(),
        output: OutputId(0),
    };
    let lan = gw
        .add_port(port(
            "lan",
            LAN_MAC,
            &["198.19.1.1/24", "2001:2:0:1::1/64"],
            1500,
        ))
        .unwrap();
    let wan = gw
        .add_port(port(
            "wan",
            WAN_MAC,
            &["198.18.2.1/24", "2001:2:0:2::1/64"],
            1400,
        ))
        .unwrap();
    let l2 = gw
        .add_port(port("l2", [0x02, 0, 0, 0, 0, 3], &[], 1500))
        .unwrap();
    let vx = gw
        .add_vxlan(VxlanTunnel {
            name: "vx0".into(),
            vni: 10,
            local: "198.18.2.1".parse().unwrap(),
            remote: VXLAN_REMOTE.into(),
            udp_port: wire::vxlan::PORT,
            max_frame: 1400 - 36,
        })
        .unwrap();
    gw.add_xconnect(L2Interface::Port(l2), L2Interface::Vxlan(vx))
        .unwrap();
    gw.add_xconnect(L2Interface::Vxlan(vx), L2Interface::Port(l2))
        .unwrap();
    let all: Vec<lpm::Prefix> = vec!["0.0.0.0/0".parse().unwrap(), "::/0".parse().unwrap()];
    let esp = gw
        .add_esp(EspTunnel::new(
            "esp0".into(),
            "198.18.2.1".parse().unwrap(),
            ESP_REMOTE.into(),
            Encapsulation::None,
            all.clone(),
            all,
            1300,
        ))
        .unwrap();
    let keys = gw.context().keys().clone();
    let spec = |spi, esn| SaSpec {
        spi,
        alg: ipsec::EspAlgorithm::Aes128Gcm,
        keymat: zeroize::Zeroizing::new(vec![1; 20]),
        esn,
        replay_window: 64,
        lifetime: Default::default(),
    };
    let out = OutboundSa::new(&keys, &spec(0x200, false)).unwrap();
    let inbound = InboundSa::new(&keys, &spec(0x100, true)).unwrap();
    gw.esp_mut().set_outbound(esp, Arc::new(out)).unwrap();
    gw.esp_mut().add_inbound(esp, Arc::new(inbound)).unwrap();
    let route = |gw: &mut GatewayGraph, p: &str, t| gw.add_route(p.parse().unwrap(), t).unwrap();
    route(&mut gw, "198.19.5.0/24", RouteTarget::Tunnel(esp_tunnel(esp)));
    route(&mut gw, "198.19.3.0/24", RouteTarget::Tunnel(TunnelId(0)));
    route(&mut gw, "2001:2:0:3::/64", RouteTarget::Tunnel(TunnelId(0)));
    route(&mut gw, "198.19.9.0/24", RouteTarget::Blackhole);
    route(
        &mut gw,
        "0.0.0.0/0",
        RouteTarget::Via {
            port: wan,
            next_hop: "198.18.2.254".parse().unwrap(),
        },
    );
    (gw, [lan, wan, l2])
}

/// An IPv4 header of protocol 50 from the ESP peer to the gateway, for an ESP
/// packet of `len` bytes.
fn esp_header(len: usize) -> [u8; 20] {
    let mut h = [0u8; 20];
    let total = (20 + len).min(usize::from(u16::MAX)) as u16;
    h[0] = 0x45;
    h[2..4].copy_from_slice(&total.to_be_bytes());
    h[8] = 64;
    h[9] = 50;
    h[12..16].copy_from_slice(&ESP_REMOTE);
    h[16..20].copy_from_slice(&[198, 18, 2, 1]);
    wire::ipv4::Packet::new_unchecked(&mut h[..]).fill_checksum();
    h
}

/// An IPv4 and UDP header from the VXLAN remote to the gateway's VXLAN port, for a
/// payload of `len` bytes (the UDP checksum left 0, which IPv4 allows).
fn outer_headers(len: usize) -> [u8; 28] {
    let mut h = [0u8; 28];
    let total = (28 + len).min(usize::from(u16::MAX)) as u16;
    let ip = &mut h[..20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&VXLAN_REMOTE);
    ip[16..20].copy_from_slice(&[198, 18, 2, 1]);
    wire::ipv4::Packet::new_unchecked(&mut h[..20]).fill_checksum();
    h[20..22].copy_from_slice(&50000u16.to_be_bytes());
    h[22..24].copy_from_slice(&wire::vxlan::PORT.to_be_bytes());
    h[24..26].copy_from_slice(&(total - 20).to_be_bytes());
    h
}

fn drain(gw: &mut GatewayGraph, ports: [PortId; 3]) {
    for p in ports {
        let q = gw.port_output(p).unwrap();
        gw.context_mut().send_output(q, |_, _: &[Handle]| {});
    }
}

fuzz_target!(|data: &[u8]| {
    let mut now = Instant::now();
    let (mut gw, ports) = gateway(now);
    let mut rest = data;
    let mut frame = Vec::with_capacity(2048);
    while let [kind, len, tail @ ..] = rest {
        let len = usize::from(*len).min(tail.len());
        let (bytes, next) = tail.split_at(len);
        rest = next;
        let port = if kind & 16 != 0 {
            ports[2]
        } else {
            ports[usize::from(kind & 1)]
        };
        frame.clear();
        if kind & 2 != 0 {
            frame.extend_from_slice(if kind & 1 == 0 { &LAN_MAC } else { &WAN_MAC });
            frame.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x10, 0x08, 0x00]);
            if kind & 32 != 0 {
                frame.extend_from_slice(&outer_headers(bytes.len()));
            } else if kind & 64 != 0 {
                frame.extend_from_slice(&esp_header(bytes.len()));
            }
        }
        frame.extend_from_slice(bytes);
        if let Some(h) = gw.context_mut().arena_mut().alloc_with(&frame) {
            gw.from_port(port, &[h]);
        }
        if kind & 4 != 0 {
            gw.run(now);
            drain(&mut gw, ports);
        }
        if kind & 8 != 0 {
            now += Duration::from_secs(1);
            gw.tick(now);
            gw.run(now);
            drain(&mut gw, ports);
        }
    }
    gw.run(now);
    drain(&mut gw, ports);
    // Past every timer: unresolved neighbors give up, staged packets expire.
    for _ in 0..4 {
        now += Duration::from_secs(60);
        gw.tick(now);
        gw.run(now);
        drain(&mut gw, ports);
    }
    assert_eq!(gw.context().arena().available(), BUFFERS, "a buffer leaked");
});
