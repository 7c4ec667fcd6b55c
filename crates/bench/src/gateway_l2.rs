//! The second part of `linerate bench --l2` (after the L2 graph, `l2_graph`):
//! the gateway's whole L2 path in memory, beside the plain WireGuard graph in the
//! same run. Two gateways share one thread: A takes Ethernet
//! frames on a cross-connected port and sends them through `l2-xconnect`,
//! `vxlan-encap`, `ip-lookup`, `wg-encrypt`, `udp-encap` and `ip-rewrite` out of its
//! WAN port; the harness carries A's WAN frames to B's WAN port (a copy, as a wire
//! would), where B takes them through `ethernet-input`, `ip4-input`, `ip-lookup`,
//! `wg-input`, `wg-decrypt`, the IP checks again, `ip-local`, `vxlan-decap` and
//! `l2-xconnect` out of its own cross-connected port, where they are counted and
//! freed. Each frame is encrypted once and decrypted once, as in `linerate bench`
//! (whose graph runs in turns with this one, at the same inner IP packet sizes), so
//! the ratio is what L2, VXLAN and the gateway's IP path cost next to the crypto.
//!
//! A third path runs in the same turns: the same pair routing the packets instead
//! (into A's LAN port, through the tunnel, out of B's LAN port to a host the
//! harness answers ARP for), so that L2 over routed is what L2 and VXLAN alone cost.
//!
//! The pair also has an ESP tunnel between the WAN addresses, which a second host
//! on B's LAN is routed through: `linerate bench --tunnel esp` (`gateway_esp`) drives
//! that path beside the routed WireGuard one.

use crate::measure::{self, Size};
use crate::wg_graph;
use dataplane::fib::{PortId, RouteTarget, TunnelId};
use dataplane::gateway::GatewayGraph;
use dataplane::graph::FRAME_LEN as FRAME;
use dataplane::interfaces::Interface;
use dataplane::l2::L2Interface;
use dataplane::vxlan::VxlanTunnel;
use dataplane::{Arena, OutputId};
use runtime::engines;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use wireguard::{Device, Prefix};

/// The tunnel's inner MTU: the largest inner packet measured (1514 bytes, and
/// IMIX's) fits in VXLAN inside it.
const TUNNEL_MTU: usize = 1600;
const WAN_MTU: u16 = 1700;
/// The L2 and LAN ports': IMIX's largest packet (1518 bytes) fits whole, in a
/// frame, unfragmented.
const L2_MTU: u16 = 1600;
/// Rounds of the wire that the handshake and ARP get to finish in.
const SETUP_ROUNDS: usize = 200;
const HOST_A: [u8; 6] = [0x02, 0, 0, 0, 0x0a, 0x10];
const HOST_B: [u8; 6] = [0x02, 0, 0, 0, 0x0b, 0x10];

/// The way frames cross the pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Path {
    /// A cross-connected port, VXLAN inside the tunnel.
    L2,
    /// IP packets routed from a LAN port into the WireGuard tunnel and out of the
    /// other's.
    Routed,
    /// IP packets routed from a LAN port into the ESP tunnel and out of the other's.
    Esp,
}

/// One gateway of the pair.
pub(crate) struct Site {
    gw: GatewayGraph,
    l2: PortId,
    lan: PortId,
    wan: PortId,
    lan_mac: [u8; 6],
}

/// The host behind B's LAN port, which the harness answers ARP for.
const HOST_B_IP: [u8; 4] = [198, 19, 0, 3];
/// A second host there, which A routes through the ESP tunnel.
const HOST_B_ESP_IP: [u8; 4] = [198, 19, 0, 4];
const HOST_A_IP: [u8; 4] = [198, 19, 1, 10];

/// Gateway `id` (1: A, 2: B): WAN 198.18.2.<id>/24, tunnel address
/// 198.18.10.<id>/30, VXLAN between the tunnel addresses, the L2 port
/// cross-connected to it both ways; a LAN port (A: 198.19.1.1/24, B:
/// 198.19.0.1/24, where bench's packets go), each routing the other's LAN into the
/// tunnel.
fn site(
    id: u8,
    me: &crypto::x25519::PrivateKey,
    them: &crypto::x25519::PrivateKey,
    engine: Option<&str>,
    esp: ipsec::EspAlgorithm,
) -> Result<Site, String> {
    let now = Instant::now();
    let keys = Arc::new(crypto::KeyRegistry::new(64));
    let mut device = Device::new(keys.clone(), now, SystemTime::now());
    device.set_private_key(Some(me.clone()));
    let peer = device
        .add_peer(them.public_key())
        .ok_or("adding the other gateway")?;
    let their_lan = if id == 1 {
        "198.19.0.0/24"
    } else {
        "198.19.1.0/24"
    };
    for p in ["198.18.10.0/30", their_lan] {
        device.add_allowed_ip(peer, p.parse::<Prefix>().expect("literal"));
    }
    if id == 1 {
        device.set_endpoint(peer, "198.18.2.2:51820".parse().expect("literal"));
    }
    let (engines, _) = engines::configured_set(
        &keys,
        engine,
        Duration::from_millis(6),
        &crypto::Algorithm::ALL,
        dataplane::STANDARD_BUFFER,
    )?;
    let mut gw = GatewayGraph::new(Arena::new(4 * FRAME + 256), engines, device, now);
    gw.set_wireguard(51820, TUNNEL_MTU);
    let port = |name: &str, mtu, addrs: Vec<String>| Interface {
        name: name.into(),
        mac: [0x02, 0, 0, 0, id, name.len() as u8],
        mtu,
        addrs: addrs.iter().map(|a| a.parse().expect("literal")).collect(),
        output: OutputId(0),
    };
    let l2 = gw
        .add_port(port("l2", L2_MTU, Vec::new()))
        .map_err(|e| e.to_string())?;
    let wan = gw
        .add_port(port("wan", WAN_MTU, vec![format!("198.18.2.{id}/24")]))
        .map_err(|e| e.to_string())?;
    let our_lan = if id == 1 {
        "198.19.1.1/24"
    } else {
        "198.19.0.1/24"
    };
    let lan = gw
        .add_port(port("lan", L2_MTU, vec![our_lan.to_string()]))
        .map_err(|e| e.to_string())?;
    let lan_mac = [0x02, 0, 0, 0, id, 3];
    let ours: IpAddr = format!("198.18.10.{id}").parse().expect("literal");
    let theirs: IpAddr = format!("198.18.10.{}", 3 - id).parse().expect("literal");
    // The tunnel's own address: local, its network into the tunnel.
    for (p, t) in [
        (
            "198.18.10.0/30".to_string(),
            RouteTarget::Tunnel(TunnelId(0)),
        ),
        (format!("{ours}/32"), RouteTarget::Local),
        (their_lan.to_string(), RouteTarget::Tunnel(TunnelId(0))),
    ] {
        let prefix: lpm::Prefix = p.parse().expect("literal");
        gw.add_route(prefix, t).map_err(|e| e.to_string())?;
    }
    let cx = gw.context();
    let max_frame = dataplane::vxlan::max_frame_to(
        cx.ip().fib(),
        |p| cx.ip().interfaces().get(p).map(|i| i.mtu),
        |t| cx.tunnel_mtu(t),
        theirs,
    )
    .ok_or("no route to the other gateway's tunnel address")?;
    let vx = gw
        .add_vxlan(VxlanTunnel {
            name: "vx0".into(),
            vni: 10,
            local: ours,
            remote: theirs,
            udp_port: wire::vxlan::PORT,
            max_frame,
        })
        .map_err(|e| e.to_string())?;
    for (rx, tx) in [
        (L2Interface::Port(l2), L2Interface::Vxlan(vx)),
        (L2Interface::Vxlan(vx), L2Interface::Port(l2)),
    ] {
        gw.add_xconnect(rx, tx).map_err(|e| e.to_string())?;
    }
    add_esp(&mut gw, id, esp)?;
    Ok(Site {
        gw,
        l2,
        lan,
        wan,
        lan_mac,
    })
}

/// An ESP tunnel between the WAN addresses, sealing with an SA of `alg` whose SPI
/// is the other side's inbound one; A routes B's second host into it.
fn add_esp(gw: &mut GatewayGraph, id: u8, alg: ipsec::EspAlgorithm) -> Result<(), String> {
    use dataplane::esp::{Encapsulation, EspTunnel, InboundSa, OutboundSa, SaSpec};
    let all: Vec<lpm::Prefix> = vec!["0.0.0.0/0".parse().expect("literal")];
    let t = gw
        .add_esp(EspTunnel::new(
            "esp0".into(),
            format!("198.18.2.{id}").parse().expect("literal"),
            format!("198.18.2.{}", 3 - id).parse().expect("literal"),
            Encapsulation::None,
            all.clone(),
            all,
            TUNNEL_MTU,
        ))
        .map_err(|e| e.to_string())?;
    // Fixed key material: both ends of an in-memory bench, no secret to keep.
    let spec = |spi| SaSpec {
        spi,
        alg,
        keymat: zeroize::Zeroizing::new(vec![0x5a; alg.keymat_len()]),
        esn: true,
        replay_window: ipsec::DEFAULT_WINDOW,
        lifetime: Default::default(),
    };
    let keys = gw.context().keys().clone();
    let (out, inb) = (0x1000 + u32::from(id), 0x1000 + u32::from(3 - id));
    let out = OutboundSa::new(&keys, &spec(out)).map_err(|e| e.to_string())?;
    let inb = InboundSa::new(&keys, &spec(inb)).map_err(|e| e.to_string())?;
    let table = gw.esp_mut();
    table
        .set_outbound(t, Arc::new(out))
        .map_err(|e| e.to_string())?;
    table
        .add_inbound(t, Arc::new(inb))
        .map_err(|e| e.to_string())?;
    if id == 1 {
        let host = lpm::Prefix::new(IpAddr::from(HOST_B_ESP_IP), 32).expect("a host route");
        gw.add_route(host, RouteTarget::Tunnel(dataplane::context::esp_tunnel(t)))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

impl Site {
    fn port(&self, path: Path) -> PortId {
        if path == Path::L2 { self.l2 } else { self.lan }
    }

    /// The gateway's engines.
    pub(crate) fn engines(&self) -> &crypto::EngineSet {
        self.gw.context().engines()
    }

    /// Takes frames made by `fill` (at most a frame of the graph) in on the port
    /// of `path`.
    fn take_in(&mut self, path: Path, n: usize, fill: impl FnMut(&mut [u8]) -> usize) -> usize {
        let port = self.port(path);
        ports::memory::put_with(&mut self.gw, port, n, fill)
    }

    /// Frames this gateway's port of `path` sends, counted and freed; on the LAN,
    /// ARP requests for the host are answered (and not counted).
    fn delivered(&mut self, path: Path, now: Instant) -> u64 {
        let mut n = 0;
        let mut answers: Vec<[u8; 42]> = Vec::new();
        let port = self.port(path);
        ports::memory::take(&mut self.gw, port, |frame| match arp_answer(frame) {
            Some(a) => answers.push(a),
            None => n += 1,
        });
        if !answers.is_empty() {
            ports::memory::put(&mut self.gw, self.lan, answers.iter().map(|a| &a[..]));
            self.gw.run(now);
        }
        n
    }
}

/// The host's answer to an ARP request for it, as a frame.
fn arp_answer(frame: &[u8]) -> Option<[u8; 42]> {
    if frame.len() < 42 || frame[12..14] != [0x08, 0x06] {
        return None;
    }
    let req = wire::arp::Packet::new_checked(&frame[14..]).ok()?;
    let target = req.target_ip().octets();
    if req.operation() != wire::arp::operation::REQUEST
        || (target != HOST_B_IP && target != HOST_B_ESP_IP)
    {
        return None;
    }
    let mut out = [0u8; 42];
    out[..6].copy_from_slice(&frame[6..12]);
    out[6..12].copy_from_slice(&HOST_B);
    out[12..14].copy_from_slice(&[0x08, 0x06]);
    wire::arp::emit_reply(&mut out[14..], &req.repr(), wire::ethernet::MacAddr(HOST_B)).ok()?;
    Some(out)
}

/// Carries the frames `from`'s WAN port sends to `to`'s WAN port; how many.
fn wire(from: &mut Site, to: &mut Site, now: Instant) -> usize {
    let n = ports::memory::cable(&mut from.gw, from.wan, &mut to.gw, to.wan);
    if n > 0 {
        to.gw.run(now);
    }
    n
}

/// An Ethernet frame from host A holding bench's inner IPv4/UDP packet of `len`
/// bytes (sequence `seq`): to host B across the L2 path, or, routed, to A's LAN
/// port from A's LAN (a valid header: the gateway checks it); its length.
fn frame(buf: &mut [u8], len: usize, seq: u16, path: Path, gw_mac: [u8; 6]) -> usize {
    buf[..6].copy_from_slice(if path == Path::L2 { &HOST_B } else { &gw_mac });
    buf[6..12].copy_from_slice(&HOST_A);
    buf[12..14].copy_from_slice(&[0x08, 0x00]);
    measure::inner_packet(&mut buf[14..], len, seq);
    if path != Path::L2 {
        buf[14 + 12..14 + 16].copy_from_slice(&HOST_A_IP);
        if path == Path::Esp {
            buf[14 + 16..14 + 20].copy_from_slice(&HOST_B_ESP_IP);
        }
        wire::ipv4::Packet::new_unchecked(&mut buf[14..14 + len]).fill_checksum();
    }
    14 + len
}

/// The pair, with the handshake done and the WAN neighbors resolved; its ESP
/// tunnel seals with `esp`.
pub(crate) fn pair(engine: Option<&str>, esp: ipsec::EspAlgorithm) -> Result<(Site, Site), String> {
    let (ka, kb) = (
        crypto::x25519::PrivateKey::generate(),
        crypto::x25519::PrivateKey::generate(),
    );
    let mut a = site(1, &ka, &kb, engine, esp)?;
    let mut b = site(2, &kb, &ka, engine, esp)?;
    // One frame of each path starts it all (ARP, the handshake); the wire runs
    // until both are across. (More would wait for ARP, and past its queue be
    // dropped.)
    let mac = a.lan_mac;
    const PATHS: [Path; 3] = [Path::L2, Path::Routed, Path::Esp];
    for path in PATHS {
        a.take_in(path, 1, |buf| frame(buf, 64, 0, path, mac));
    }
    // The routed and ESP paths leave by the same LAN port: two frames out of it
    // are both across.
    let (mut l2_across, mut lan_across) = (false, 0);
    for _ in 0..SETUP_ROUNDS {
        let now = Instant::now();
        a.gw.run(now);
        a.gw.tick(now);
        b.gw.tick(now);
        wire(&mut a, &mut b, now);
        wire(&mut b, &mut a, now);
        l2_across |= b.delivered(Path::L2, now) > 0;
        lan_across += b.delivered(Path::Routed, now);
        for path in PATHS {
            a.delivered(path, now);
        }
        if l2_across && lan_across >= 2 {
            return Ok((a, b));
        }
    }
    let drops: Vec<String> = [("a", &a.gw), ("b", &b.gw)]
        .iter()
        .flat_map(|(side, gw)| {
            drops_of(gw)
                .into_iter()
                .map(move |(k, n)| format!("{side} {k}: {n}"))
        })
        .collect();
    Err(format!(
        "the two gateways did not get frames across (L2: {l2_across}, routed and ESP: {lan_across} of 2; drops: {})",
        if drops.is_empty() {
            "none".to_string()
        } else {
            drops.join(", ")
        }
    ))
}

/// Frames of `size` from A's port of `path` to B's for `seconds`.
pub(crate) fn drive(
    a: &mut Site,
    b: &mut Site,
    path: Path,
    size: Size,
    seconds: f64,
) -> Result<measure::Measured, String> {
    let mac = a.lan_mac;
    let base = [drops_of(&a.gw), drops_of(&b.gw)];
    let mut m = measure::Measured::default();
    let start = Instant::now();
    let c0 = dataplane::counters::clocks();
    let deadline = start + Duration::from_secs_f64(seconds);
    let mut seq = 0usize;
    let mut rounds = 0u64;
    while !rounds.is_multiple_of(64) || Instant::now() < deadline {
        rounds += 1;
        let now = Instant::now();
        let first = seq;
        let n = a.take_in(path, FRAME, |buf| {
            let len = size.nth(seq);
            seq += 1;
            frame(buf, len, seq as u16, path, mac)
        });
        m.bytes += (first..first + n).map(|i| size.nth(i) as u64).sum::<u64>();
        a.gw.run(now);
        wire(a, b, now);
        m.packets += b.delivered(path, now);
        // Anything B sends back (keepalives) goes to A, as on a wire.
        wire(b, a, now);
        a.delivered(path, now);
    }
    m.clocks = dataplane::counters::clocks().wrapping_sub(c0);
    m.elapsed = start.elapsed();
    let delivered = m.packets.max(1) as f64;
    m.nodes = [("a", &a.gw), ("b", &b.gw)]
        .iter()
        .flat_map(|(side, gw)| {
            gw.counters()
                .filter(|(_, c)| c.packets > 0)
                .map(move |(name, c)| (format!("{side} {name}"), c.clocks as f64 / delivered))
        })
        .collect();
    // Only what this run dropped counts (the setup's are in the counters too).
    let after = [("a", drops_of(&a.gw)), ("b", drops_of(&b.gw))];
    let drops: Vec<String> = after
        .iter()
        .zip(&base)
        .flat_map(|((side, now), before)| {
            now.iter()
                .map(move |(k, n)| {
                    let was = before.iter().find(|(b, _)| b == k).map_or(0, |(_, m)| *m);
                    (k, n - was)
                })
                .filter(|&(_, n)| n > 0)
                .map(move |(k, n)| format!("{side} {k}: {n}"))
        })
        .collect();
    if !drops.is_empty() {
        return Err(format!(
            "frames dropped on the {path:?} path ({})",
            drops.join(", ")
        ));
    }
    if m.packets == 0 {
        return Err(format!("no frame made it through the {path:?} path"));
    }
    Ok(m)
}

/// Every drop counter of `gw` that is not zero, by node and reason.
fn drops_of(gw: &GatewayGraph) -> Vec<(String, u64)> {
    gw.counters()
        .flat_map(|(node, c)| {
            c.drops()
                .filter(|&(_, n)| n > 0)
                .map(move |(e, n)| (format!("{node} {}", e.name), n))
        })
        .collect()
}

/// One size: the plain graph's and the L2 path's packets per second (millions), each
/// packet encrypted once and decrypted once.
#[derive(Clone, Debug)]
pub struct L2Row {
    pub size: Size,
    pub plain_mpps: f64,
    pub routed_mpps: f64,
    pub l2_mpps: f64,
}

pub(crate) fn mpps(m: &measure::Measured) -> f64 {
    m.packets as f64 / m.elapsed.as_secs_f64() / 1e6
}

pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Every size, the plain graph and the L2 path in turns, `repeat` times; the
/// median of each.
pub fn run(
    engine: Option<&str>,
    sizes: &[Size],
    seconds: f64,
    repeat: usize,
) -> Result<Vec<L2Row>, String> {
    let mut rows = Vec::new();
    for &size in sizes {
        let (mut plain, mut routed, mut l2) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..repeat.max(1) {
            let g = wg_graph::graphs(engine, 1, 1, false, dataplane::STANDARD_BUFFER)?
                .pop()
                .ok_or("no graph")?;
            // Delivered packets, each encrypted and decrypted once, as here.
            plain.push(mpps(&crate::driver::drive(g, size, seconds)?));
            let (mut a, mut b) = pair(engine, ipsec::EspAlgorithm::Aes128Gcm)?;
            routed.push(mpps(&drive(&mut a, &mut b, Path::Routed, size, seconds)?));
            l2.push(mpps(&drive(&mut a, &mut b, Path::L2, size, seconds)?));
        }
        rows.push(L2Row {
            size,
            plain_mpps: median(plain),
            routed_mpps: median(routed),
            l2_mpps: median(l2),
        });
    }
    Ok(rows)
}

pub fn table(rows: &[L2Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<8} {:>12} {:>12} {:>12} {:>10} {:>11}",
        "size", "plain Mpps", "routed Mpps", "L2 Mpps", "L2/plain", "L2/routed"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:<8} {:>12.3} {:>12.3} {:>12.3} {:>9.0}% {:>10.0}%",
            r.size.label(),
            r.plain_mpps,
            r.routed_mpps,
            r.l2_mpps,
            100.0 * r.l2_mpps / r.plain_mpps,
            100.0 * r.l2_mpps / r.routed_mpps
        );
    }
    out
}

pub fn json(rows: &[L2Row], seconds: f64, repeat: usize) -> serde_json::Value {
    serde_json::json!({
        "machine": measure::machine(),
        "seconds_per_size": seconds,
        "rounds": repeat,
        "counted": "packets per second, each encrypted once and decrypted once, by inner IP packet size (the L2 frame adds its 14-byte Ethernet header)",
        "results": rows.iter().map(|r| serde_json::json!({
            "size": r.size.label(),
            "plain_mpps": r.plain_mpps,
            "routed_mpps": r.routed_mpps,
            "l2_mpps": r.l2_mpps,
            "l2_over_plain": r.l2_mpps / r.plain_mpps,
            "l2_over_routed": r.l2_mpps / r.routed_mpps,
        })).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_cross_the_l2_pair_and_none_is_dropped() {
        let (mut a, mut b) = pair(
            Some("chacha20-poly1305=aws-lc"),
            ipsec::EspAlgorithm::Aes128Gcm,
        )
        .unwrap();
        for path in [Path::L2, Path::Routed, Path::Esp] {
            let m = drive(&mut a, &mut b, path, Size::Imix, 0.05).unwrap();
            assert!(m.packets > 100, "{path:?}: {} frames", m.packets);
        }
    }
}
