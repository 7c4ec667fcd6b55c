//! From the file as written to a `GatewayConfig`: every value parsed and range-checked,
//! then the checks between tables (names, references, next hops, duplicates). Every
//! error is reported; the configuration is returned only when there are none.

use super::checks::Ctx;
use super::error::Sink;
use super::esp::esp;
use super::l2::{Underlay, l2_ports_connected, vxlan, xconnect};
use super::raw::{Item, RawFile, RawGateway, RawPort};
use super::routes::route;
use super::values::{addr_len, interface_ok, name_ok, socket_addr};
use super::wireguard::wg;
use super::{
    DEFAULT_BUFFERS, DEFAULT_CONTROL, DEFAULT_PORT_MTU, Driver, GatewayConfig, PortConfig, Prefix,
    WgConfig,
};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::ops::{Range, RangeInclusive};
use std::path::{Path, PathBuf};

const MAX_CORES: i64 = 1024;
const BUFFERS: RangeInclusive<i64> = 1024..=262144;
const PORT_MTU_V4: RangeInclusive<i64> = 576..=LARGEST_PORT_MTU as i64;
const PORT_MTU_V6: RangeInclusive<i64> = 1280..=LARGEST_PORT_MTU as i64;
use dataplane::gateway::LARGEST_PORT_MTU;

/// Validates what `raw::split` made of the file; `None` when anything is wrong (the
/// errors are in `sink`).
pub(crate) fn validate(raw: RawFile, base: &Path, sink: &mut Sink<'_>) -> Option<GatewayConfig> {
    let mut cx = Ctx { sink, base };
    let mut ok = true;
    let gateway = gateway(&mut cx, &raw.gateway);
    ok &= gateway.is_some();

    names(&mut cx, &raw);

    let mut ports = Vec::new();
    for (i, p) in raw.ports.iter().enumerate() {
        match p {
            Item::Ok { value, .. } => match port(&mut cx, value, i, &ports_so_far(&raw.ports, i)) {
                Some(p) => ports.push(p),
                None => ok = false,
            },
            Item::Broken(_) => ok = false,
        }
    }
    if !raw.port_given {
        cx.err(
            0..0,
            "port",
            "no [[port]]: a gateway needs at least one port",
        );
        ok = false;
    }

    let mut wireguard = Vec::new();
    let mut listen_ports: HashMap<u16, usize> = HashMap::new();
    for (i, w) in raw.wireguard.iter().enumerate() {
        match w {
            Item::Ok { value, .. } => match wg(&mut cx, value, i, &mut listen_ports) {
                Some(w) => wireguard.push(w),
                None => ok = false,
            },
            Item::Broken(_) => ok = false,
        }
    }

    let mut routes = Vec::new();
    let mut seen: HashMap<Prefix, usize> = HashMap::new();
    for (i, r) in raw.routes.iter().enumerate() {
        match r {
            Item::Ok { value, span } => {
                match route(&mut cx, value, span.clone(), i, &raw, &mut seen) {
                    Some(r) => routes.push(r),
                    None => ok = false,
                }
            }
            Item::Broken(_) => ok = false,
        }
    }

    ok &= tunnel_addresses_unique(&mut cx, &raw, &ports, &wireguard);
    let mut esps = Vec::new();
    for (i, e) in raw.esps.iter().enumerate() {
        let under = Underlay {
            ports: &ports,
            wireguard: &wireguard,
            routes: &routes,
            esps: &esps,
        };
        match e {
            Item::Ok { value, .. } => match esp(&mut cx, value, i, &under, &esps) {
                Some(e) => esps.push(e),
                None => ok = false,
            },
            Item::Broken(_) => ok = false,
        }
    }
    let under = Underlay {
        ports: &ports,
        wireguard: &wireguard,
        routes: &routes,
        esps: &esps,
    };
    let mut vxlans = Vec::new();
    for (i, v) in raw.vxlans.iter().enumerate() {
        match v {
            Item::Ok { value, .. } => match vxlan(&mut cx, value, i, &under, &vxlans) {
                Some(v) => vxlans.push(v),
                None => ok = false,
            },
            Item::Broken(_) => ok = false,
        }
    }
    let mut xconnects = Vec::new();
    for (i, x) in raw.xconnects.iter().enumerate() {
        match x {
            Item::Ok { value, span } => {
                match xconnect(&mut cx, value, i, &ports, &raw.vxlans, &xconnects) {
                    Some(x) => {
                        ok &= segment_fits(&mut cx, &x, span.clone(), i, &ports, &vxlans);
                        xconnects.push(x);
                    }
                    None => ok = false,
                }
            }
            Item::Broken(_) => ok = false,
        }
    }
    ok &= l2_ports_connected(&mut cx, &raw.ports, &ports, &xconnects);

    let mut openvpns = Vec::new();
    // UDP ports the gateway answers on: WireGuard's, ESP's in UDP, OpenVPN's.
    let mut udp_ports: HashMap<u16, String> = HashMap::new();
    for (i, w) in wireguard.iter().enumerate() {
        udp_ports.insert(w.listen_port, format!("wireguard[{i}]"));
    }
    for (i, e) in esps.iter().enumerate() {
        if let Some(p) = e.udp_port {
            udp_ports.entry(p).or_insert_with(|| format!("esp[{i}]"));
        }
    }
    for (i, o) in raw.openvpns.iter().enumerate() {
        match o {
            Item::Ok { value, .. } => {
                match super::ovpn::server(&mut cx, value, i, &mut udp_ports) {
                    Some(o) => openvpns.push(o),
                    None => ok = false,
                }
            }
            Item::Broken(_) => ok = false,
        }
    }

    let GatewayParts {
        workers,
        control,
        metrics,
        buffers,
        spread,
    } = gateway?;
    // The metrics listen on a kernel socket: a port's address is the gateway's own,
    // which the kernel never sees (it has no address on a port).
    if let (Some(m), Some(raw_m)) = (metrics, &raw.gateway.metrics)
        && let Some(p) = ports
            .iter()
            .find(|p| p.addresses.iter().any(|&(a, _)| a == m.ip()))
    {
        cx.err(
            raw_m.span(),
            "gateway.metrics",
            format!(
                "{} is an address of port {}, which the gateway answers itself: the metrics listen on an address of the host's own (of lo, or a management interface)",
                m.ip(),
                p.name
            ),
        );
        ok = false;
    }
    ok.then_some(GatewayConfig {
        workers,
        control,
        metrics,
        buffers,
        spread,
        ports,
        wireguard,
        routes,
        vxlans,
        xconnects,
        esps,
        openvpns,
    })
}

/// The `[gateway]` table, validated.
struct GatewayParts {
    workers: Vec<Option<usize>>,
    control: PathBuf,
    metrics: Option<SocketAddr>,
    buffers: usize,
    spread: bool,
}

fn gateway(cx: &mut Ctx<'_, '_>, g: &RawGateway) -> Option<GatewayParts> {
    let mut ok = true;
    let mut workers = vec![None];
    if let Some(cores) = &g.cores {
        if cores.get_ref().is_empty() {
            cx.err(
                cores.span(),
                "gateway.cores",
                "empty (leave cores out for one worker that is not pinned)",
            );
            ok = false;
        }
        workers.clear();
        let mut seen: HashMap<i64, usize> = HashMap::new();
        for (i, c) in cores.get_ref().iter().enumerate() {
            let key = format!("gateway.cores[{i}]");
            let n = *c.get_ref();
            if !(0..MAX_CORES).contains(&n) {
                cx.err(
                    c.span(),
                    &key,
                    format!("{n} is not a core number (0..={})", MAX_CORES - 1),
                );
                ok = false;
            } else if let Some(first) = seen.insert(n, i) {
                cx.err(
                    c.span(),
                    &key,
                    format!("core {n} is already gateway.cores[{first}]"),
                );
                ok = false;
            } else {
                workers.push(Some(n as usize));
            }
        }
    }
    let mut control = PathBuf::from(DEFAULT_CONTROL);
    if let Some(c) = &g.control {
        let p = Path::new(c.get_ref());
        if !p.is_absolute() {
            cx.err(
                c.span(),
                "gateway.control",
                format!("{:?} is not an absolute path", c.get_ref()),
            );
            ok = false;
        }
        control = p.to_path_buf();
    }
    let mut metrics = None;
    if let Some(m) = &g.metrics {
        match socket_addr(m.get_ref()) {
            Ok(a) => metrics = Some(a),
            Err(e) => {
                cx.err(m.span(), "gateway.metrics", e);
                ok = false;
            }
        }
    }
    let mut buffers = DEFAULT_BUFFERS;
    if let Some(b) = &g.buffers {
        match cx.int::<usize>(b, BUFFERS, "gateway.buffers") {
            Some(b) => buffers = b,
            None => ok = false,
        }
    }
    let spread = g.spread.as_ref().is_some_and(|s| *s.get_ref());
    if let Some(s) = g.spread.as_ref().filter(|s| *s.get_ref())
        && workers.len() < 2
    {
        cx.err(
            s.span(),
            "gateway.spread",
            "there is one worker, so nothing to spread over (give `cores` two cores or more, or leave spread out)",
        );
        ok = false;
    }
    ok.then_some(GatewayParts {
        workers,
        control,
        metrics,
        buffers,
        spread,
    })
}

/// Names: the charset, and unique across ports, WireGuard interfaces, VXLAN and
/// ESP tunnels (the later one in the file is the error).
fn names(cx: &mut Ctx<'_, '_>, raw: &RawFile) {
    let mut all: Vec<(Range<usize>, String, String)> = Vec::new();
    for (i, p) in raw.ports.iter().enumerate() {
        if let Item::Ok { value, .. } = p {
            all.push((
                value.name.span(),
                format!("port[{i}]"),
                value.name.get_ref().clone(),
            ));
        }
    }
    for (i, w) in raw.wireguard.iter().enumerate() {
        if let Item::Ok { value, .. } = w {
            let n = &value.wg.name;
            all.push((n.span(), format!("wireguard[{i}]"), n.get_ref().clone()));
        }
    }
    for (i, v) in raw.vxlans.iter().enumerate() {
        if let Item::Ok { value, .. } = v {
            let n = &value.name;
            all.push((n.span(), format!("vxlan[{i}]"), n.get_ref().clone()));
        }
    }
    for (i, e) in raw.esps.iter().enumerate() {
        if let Item::Ok { value, .. } = e {
            let n = &value.name;
            all.push((n.span(), format!("esp[{i}]"), n.get_ref().clone()));
        }
    }
    for (i, o) in raw.openvpns.iter().enumerate() {
        if let Item::Ok { value, .. } = o {
            let n = &value.name;
            all.push((n.span(), format!("openvpn[{i}]"), n.get_ref().clone()));
        }
    }
    all.sort_by_key(|(span, ..)| span.start);
    let mut seen: HashMap<&str, &str> = HashMap::new();
    for (span, path, name) in &all {
        let key = format!("{path}.name");
        if !name_ok(name) {
            cx.err(
                span.clone(),
                &key,
                format!("{name:?} is not a name (1 to 15 of a-z, 0-9, _ and -)"),
            );
        } else if let Some(first) = seen.insert(name, path) {
            cx.err(
                span.clone(),
                &key,
                format!("{name:?} is already the name of {first}"),
            );
        }
    }
}

/// The ports before `i` that deserialized (for duplicate interfaces and addresses).
fn ports_so_far(ports: &[Item<RawPort>], i: usize) -> Vec<(usize, &RawPort)> {
    ports[..i]
        .iter()
        .enumerate()
        .filter_map(|(j, p)| match p {
            Item::Ok { value, .. } => Some((j, value)),
            Item::Broken(_) => None,
        })
        .collect()
}

fn port(
    cx: &mut Ctx<'_, '_>,
    p: &RawPort,
    i: usize,
    earlier: &[(usize, &RawPort)],
) -> Option<PortConfig> {
    let path = format!("port[{i}]");
    let mut ok = name_ok(p.name.get_ref());
    let interface = p.interface.get_ref();
    let key = format!("{path}.interface");
    if !interface_ok(interface) {
        cx.err(
            p.interface.span(),
            &key,
            format!("{interface:?} is not an interface name (1 to 15 bytes, no '/' or spaces)"),
        );
        ok = false;
    } else if let Some((j, _)) = earlier
        .iter()
        .find(|(_, q)| q.interface.get_ref() == interface)
    {
        cx.err(
            p.interface.span(),
            &key,
            format!("interface {interface:?} is already taken by port[{j}]"),
        );
        ok = false;
    }

    let mut driver = Driver::AfXdp;
    if let Some(d) = &p.driver {
        match d.get_ref().as_str() {
            "af_xdp" => driver = Driver::AfXdp,
            "af_packet" => driver = Driver::AfPacket,
            other => {
                cx.err(
                    d.span(),
                    &format!("{path}.driver"),
                    format!("{other:?} is not a driver (af_xdp or af_packet)"),
                );
                ok = false;
            }
        }
    }

    // A port without addresses is an L2 port: the cross-connects are checked to
    // name exactly those (see `l2`).
    let taken = |addr: IpAddr| {
        earlier.iter().find_map(|(j, q)| {
            q.addresses
                .iter()
                .flat_map(|a| a.get_ref().iter())
                .position(|b| addr_len(b.get_ref(), "").is_ok_and(|(b, _)| b == addr))
                .map(|m| format!("port[{j}].addresses[{m}]"))
        })
    };
    let (addresses, addresses_ok) = cx.addresses(p.addresses.as_ref(), &path, taken);
    ok &= addresses_ok;
    ok &= networks_apart(cx, p, &path, &addresses, earlier);

    let v6 = addresses.iter().find(|(a, _)| a.is_ipv6());
    let mut mtu = DEFAULT_PORT_MTU;
    if let Some(m) = &p.mtu {
        let key = format!("{path}.mtu");
        let n = *m.get_ref();
        match v6 {
            Some(&(a, l)) if n < *PORT_MTU_V6.start() && PORT_MTU_V4.contains(&n) => {
                cx.err(
                    m.span(),
                    &key,
                    format!(
                        "{n} is below 1280, the least MTU of a port with an IPv6 address ({a}/{l})"
                    ),
                );
                ok = false;
            }
            _ => {
                let range = if v6.is_some() {
                    PORT_MTU_V6
                } else {
                    PORT_MTU_V4
                };
                match cx.int::<u16>(m, range, &key) {
                    Some(n) => mtu = n,
                    None => ok = false,
                }
            }
        }
    }

    let mut zero_copy = false;
    if let Some(z) = &p.zero_copy {
        zero_copy = *z.get_ref();
        if zero_copy && driver == Driver::AfPacket {
            cx.err(
                z.span(),
                &format!("{path}.zero_copy"),
                "zero copy is an af_xdp option (this port's driver is af_packet)",
            );
            ok = false;
        }
    }

    ok.then(|| PortConfig {
        name: p.name.get_ref().clone(),
        interface: interface.clone(),
        driver,
        addresses,
        mtu,
        zero_copy,
    })
}

/// Each network of port `p` (its `addresses`, parsed) lies apart from every network
/// of the ports before it: two ports on overlapping networks would leave the FIB
/// to pick one of them for hosts of both, and cut the other's off.
fn networks_apart(
    cx: &mut Ctx<'_, '_>,
    p: &RawPort,
    path: &str,
    addresses: &[(IpAddr, u8)],
    earlier: &[(usize, &RawPort)],
) -> bool {
    let mut ok = true;
    let spans = p.addresses.iter().flat_map(|a| a.get_ref().iter());
    for (k, (&(addr, len), span)) in addresses.iter().zip(spans).enumerate() {
        let net = Prefix { addr, len }.network();
        let clash = earlier.iter().find_map(|(j, q)| {
            q.addresses
                .iter()
                .flat_map(|a| a.get_ref().iter())
                .filter_map(|b| addr_len(b.get_ref(), "").ok())
                .map(|(a, l)| Prefix { addr: a, len: l }.network())
                .find(|other| overlap(net, *other))
                .map(|other| (*j, other, q.name.get_ref()))
        });
        if let Some((j, other, name)) = clash {
            cx.err(
                span.span(),
                &format!("{path}.addresses[{k}]"),
                format!(
                    "network {net} overlaps {other}, a network of port[{j}] ({name:?}): ports need networks apart"
                ),
            );
            ok = false;
        }
    }
    ok
}

/// A port cross-connected with a VXLAN tunnel: the tunnel must carry the port's
/// full-size frames (its MTU, with up to two VLAN tags, as the tunnel's own inner
/// MTU is reckoned), or every such frame of the segment would be dropped.
fn segment_fits(
    cx: &mut Ctx<'_, '_>,
    x: &super::XconnectConfig,
    span: Range<usize>,
    i: usize,
    ports: &[PortConfig],
    vxlans: &[super::VxlanConfig],
) -> bool {
    use super::L2Endpoint::{Port, Vxlan};
    let (p, v) = match (x.from, x.to) {
        (Port(p), Vxlan(v)) | (Vxlan(v), Port(p)) => (p, v),
        _ => return true,
    };
    let (Some(port), Some(vx)) = (ports.get(p), vxlans.get(v)) else {
        return true;
    };
    if vx.mtu >= port.mtu {
        return true;
    }
    let how = if vx.max_mtu >= port.mtu {
        format!("raise vxlan {}'s mtu to {}", vx.name, port.mtu)
    } else {
        format!(
            "give the path to {} {} bytes more MTU",
            vx.remote,
            port.mtu - vx.max_mtu
        )
    };
    cx.err(
        span,
        &format!("xconnect[{i}]"),
        format!(
            "vxlan {} carries frames of an inner MTU of {}, less than port {}'s MTU {}: the segment's full-size frames would be dropped ({how}, or lower port {}'s mtu)",
            vx.name, vx.mtu, port.name, port.mtu, port.name
        ),
    );
    false
}

/// Whether two networks share an address: the shorter one holds the other's start.
fn overlap(a: Prefix, b: Prefix) -> bool {
    if a.addr.is_ipv4() != b.addr.is_ipv4() {
        return false;
    }
    let len = a.len.min(b.len);
    Prefix { addr: a.addr, len }.network() == Prefix { addr: b.addr, len }.network()
}

/// A WireGuard interface's addresses are the gateway's own: none may be a port's or
/// another interface's too.
fn tunnel_addresses_unique(
    cx: &mut Ctx<'_, '_>,
    raw: &RawFile,
    ports: &[PortConfig],
    wireguard: &[WgConfig],
) -> bool {
    let mut ok = true;
    let mut seen: Vec<(std::net::IpAddr, String)> = ports
        .iter()
        .flat_map(|p| {
            p.addresses
                .iter()
                .map(move |&(a, _)| (a, format!("an address of port {}", p.name)))
        })
        .collect();
    for (i, w) in raw.wireguard.iter().enumerate() {
        let Item::Ok { value, .. } = w else { continue };
        let Some(cfg) = wireguard
            .iter()
            .find(|c| c.name == *value.wg.name.get_ref())
        else {
            continue;
        };
        let spans = value.wg.addresses.iter().flat_map(|a| a.get_ref().iter());
        for (k, (&(a, _), s)) in cfg.addresses.iter().zip(spans).enumerate() {
            if let Some((_, whose)) = seen.iter().find(|(b, _)| *b == a) {
                cx.err(
                    s.span(),
                    &format!("wireguard[{i}].addresses[{k}]"),
                    format!("{a} is already {whose}"),
                );
                ok = false;
            } else {
                seen.push((a, format!("an address of {}", cfg.name)));
            }
        }
    }
    ok
}
