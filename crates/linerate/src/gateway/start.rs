//! From a validated configuration to a running gateway: the WireGuard device with
//! its peers, the graph with its ports and routes, the ports' drivers, the control
//! and UAPI sockets, the metrics listener, and the signals. What the machine must
//! have (the interfaces, the cores) is checked here, each failure naming what is
//! missing; nothing is left behind when start-up fails half way (the drivers detach
//! what they attached as they are dropped).

use super::config::{self, Driver, GatewayConfig};
use super::follower;
use super::lane::Lane;
use super::metrics;
use super::reload::Changes;
use super::settings::{fib_target, key_of, peer_settings};
use super::worker::{GatewayControl, Worker};
use crate::control::request::ControlRequest;
use crate::control::socket::{SocketFile, bind_socket, serve_uapi, socket_path};
use crate::service::Service;
use crypto::KeyRegistry;
use crypto::x25519::PrivateKey;
use dataplane::Arena;
use dataplane::esp::{Encapsulation, EspTunnel, InboundSa, OutboundSa, SaSpec};
use dataplane::esp_handoff::HandoffBoard;
use dataplane::fib::{PortId, TunnelId};
use dataplane::gateway::GatewayGraph;
use dataplane::interfaces::Interface;
use io::Waker;
use ports::Port;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};
use wireguard::Device;

/// Live transport keys the registry holds: six per peer (three keypairs).
const KEY_CAPACITY: usize = 6 * 65536;
/// Time per engine, algorithm and size class of the start-up calibration.
const CALIBRATION_TIME: Duration = Duration::from_millis(12);
/// The WireGuard interface's tunnel (one per gateway).
const WG_TUNNEL: TunnelId = dataplane::context::WG_TUNNEL;

/// The WireGuard device as configured: its key and peers (none without a
/// WireGuard interface).
fn owner_device(
    config: &GatewayConfig,
    keys: &Arc<KeyRegistry>,
    (now, wall): (Instant, SystemTime),
) -> Result<Device, String> {
    let mut device = Device::new(keys.clone(), now, wall);
    if let Some(wg) = config.wireguard.first() {
        device.set_private_key(Some(PrivateKey::from_bytes(*wg.private_key)));
        for p in &wg.peers {
            let id = device.add_peer(key_of(&p.public_key)).ok_or_else(|| {
                format!(
                    "{}: peer {}: refused",
                    wg.name,
                    config::base64_key(&p.public_key)
                )
            })?;
            peer_settings(&mut device, id, p, now);
        }
    }
    Ok(device)
}

/// One worker's graph as configured: its own arena, `engines` and `device` (the
/// owner's, or an empty one a follower leaves alone), the ports (by their
/// interfaces' Ethernet addresses) and the routes.
fn build_graph(
    config: &GatewayConfig,
    engines: crypto::EngineSet,
    device: Device,
    sas: &[EspSas],
    now: Instant,
) -> Result<GatewayGraph, String> {
    let arena = Arena::with_buffers(config.buffers, config.buffer_size());
    let mut gw = GatewayGraph::new(arena, engines, device, now);
    if let Some(wg) = config.wireguard.first() {
        gw.set_wireguard(wg.listen_port, wg.mtu.into());
    }
    for p in &config.ports {
        let mac = io::netdev::mac_address(&p.interface)
            .map_err(|e| format!("port {}: interface {}: {e}", p.name, p.interface))?;
        let addrs = p
            .addresses
            .iter()
            .map(|&(addr, len)| lpm::Prefix { addr, len })
            .collect();
        gw.add_port(Interface {
            name: p.name.clone(),
            mac,
            mtu: port_mtu(p),
            addrs,
            output: dataplane::OutputId(0),
        })
        .map_err(|e| format!("port {}: {e}", p.name))?;
    }
    // The WireGuard interface's own addresses: each local, its network into the
    // tunnel (a [[route]] for the same prefix, added after, has the last word).
    for &(addr, len) in config.wireguard.iter().flat_map(|w| &w.addresses) {
        let net = lpm::Prefix { addr, len }.network();
        let host = lpm::Prefix {
            addr,
            len: if addr.is_ipv4() { 32 } else { 128 },
        };
        gw.add_route(net, dataplane::fib::RouteTarget::Tunnel(WG_TUNNEL))
            .and_then(|()| gw.add_route(host, dataplane::fib::RouteTarget::Local))
            .map_err(|e| format!("address {addr}/{len}: {e}"))?;
    }
    for r in &config.routes {
        gw.add_route(r.prefix, fib_target(r.target))
            .map_err(|e| format!("route {}: {e}", r.prefix))?;
    }
    add_esp(config, sas, &mut gw)?;
    add_openvpn(config, &mut gw)?;
    add_l2(config, &mut gw)?;
    Ok(gw)
}

/// The OpenVPN servers: each its port and tunnel, its pools routed into it, and
/// its own address in each pool local (clients ping it).
fn add_openvpn(config: &GatewayConfig, gw: &mut GatewayGraph) -> Result<(), String> {
    use dataplane::fib::RouteTarget as Fib;
    for o in &config.openvpns {
        let id = gw
            .add_ovpn(dataplane::ovpn::OvpnServer::new(
                &o.name,
                o.listen_port,
                o.mtu.into(),
            ))
            .map_err(|e| format!("openvpn {}: {e}", o.name))?;
        for pool in [o.pool, o.pool6].into_iter().flatten() {
            let own = config::OvpnConfig::server_addr(pool);
            let host = lpm::Prefix {
                addr: own,
                len: if own.is_ipv4() { 32 } else { 128 },
            };
            gw.add_route(
                pool.network(),
                Fib::Tunnel(dataplane::context::ovpn_tunnel(id)),
            )
            .and_then(|()| gw.add_route(host, Fib::Local))
            .map_err(|e| format!("openvpn {}: pool {pool}: {e}", o.name))?;
        }
    }
    Ok(())
}

/// An ESP tunnel's SAs, made once and shared by every worker.
pub struct EspSas {
    pub outbound: Option<Arc<OutboundSa>>,
    pub inbound: Vec<Arc<InboundSa>>,
}

fn sa_spec(s: &config::SaConfig) -> SaSpec {
    SaSpec {
        spi: s.spi,
        alg: s.algorithm,
        keymat: s.keymat.clone(),
        esn: s.esn,
        replay_window: s.replay_window,
        lifetime: s.lifetime,
    }
}

/// The manual SAs of every ESP tunnel, their keys in `keys`.
fn esp_sas(config: &GatewayConfig, keys: &Arc<KeyRegistry>) -> Result<Vec<EspSas>, String> {
    config
        .esps
        .iter()
        .map(|e| {
            let outbound = match &e.outbound {
                Some(s) => Some(Arc::new(
                    OutboundSa::new(keys, &sa_spec(s))
                        .map_err(|err| format!("esp {}: {err}", e.name))?,
                )),
                None => None,
            };
            let inbound = e
                .inbound
                .iter()
                .map(|s| {
                    InboundSa::new(keys, &sa_spec(s))
                        .map(Arc::new)
                        .map_err(|err| format!("esp {}: {err}", e.name))
                })
                .collect::<Result<_, _>>()?;
            Ok(EspSas { outbound, inbound })
        })
        .collect()
}

/// The ESP tunnels, each with its SAs (the same on every worker).
fn add_esp(config: &GatewayConfig, sas: &[EspSas], gw: &mut GatewayGraph) -> Result<(), String> {
    for (e, sas) in config.esps.iter().zip(sas) {
        let encap = match e.udp_port {
            Some(port) => Encapsulation::Udp {
                local_port: port,
                remote_port: port,
            },
            None => Encapsulation::None,
        };
        let id = gw
            .add_esp(EspTunnel::new(
                e.name.clone(),
                e.local,
                e.remote,
                encap,
                e.local_ts.clone(),
                e.remote_ts.clone(),
                e.mtu.into(),
            ))
            .map_err(|err| err.to_string())?;
        let table = gw.esp_mut();
        if let Some(o) = &sas.outbound {
            table
                .set_outbound(id, o.clone())
                .map_err(|err| format!("esp {}: {err}", e.name))?;
        }
        for i in &sas.inbound {
            table
                .add_inbound(id, i.clone())
                .map_err(|err| format!("esp {}: {err}", e.name))?;
        }
    }
    Ok(())
}

/// The VXLAN tunnels and the cross-connects. A tunnel's largest frame is what its
/// configured inner MTU allows (with two VLAN tags) and its path carries: the route
/// to its remote in the FIB just built.
fn add_l2(config: &GatewayConfig, gw: &mut GatewayGraph) -> Result<(), String> {
    use dataplane::l2::L2Interface;
    for v in &config.vxlans {
        let cx = gw.context();
        let ip = cx.ip();
        let path = dataplane::vxlan::max_frame_to(
            ip.fib(),
            |p| ip.interfaces().get(p).map(|i| i.mtu),
            |t| cx.tunnel_mtu(t),
            v.remote,
        )
        .ok_or_else(|| format!("vxlan {}: no route to {}", v.name, v.remote))?;
        gw.add_vxlan(dataplane::vxlan::VxlanTunnel {
            name: v.name.clone(),
            vni: v.vni,
            local: v.local,
            remote: v.remote,
            udp_port: v.udp_port,
            max_frame: path.min(usize::from(v.mtu) + wire::ethernet::QINQ_HEADER_LEN),
        })
        .map_err(|e| e.to_string())?;
    }
    let side = |e: config::L2Endpoint| match e {
        config::L2Endpoint::Port(i) => L2Interface::Port(PortId(i as u16)),
        config::L2Endpoint::Vxlan(i) => L2Interface::Vxlan(dataplane::vxlan::VxlanId(i as u16)),
    };
    for x in &config.xconnects {
        gw.add_xconnect(side(x.from), side(x.to))
            .map_err(|e| format!("xconnect: {e}"))?;
    }
    Ok(())
}

/// The MTU a port runs with: the configured one, or its interface's where that is
/// smaller (the kernel drops, uncounted, every frame past the interface's MTU,
/// so the gateway must not make them).
fn port_mtu(p: &config::PortConfig) -> u16 {
    match io::netdev::mtu(&p.interface) {
        Ok(m) => p.mtu.min(u16::try_from(m).unwrap_or(u16::MAX)),
        Err(_) => p.mtu,
    }
}

/// Says where a port's interface has another MTU than its configuration.
fn say_port_mtus(config: &GatewayConfig) {
    for p in &config.ports {
        let Ok(m) = io::netdev::mtu(&p.interface) else {
            continue;
        };
        if m < u32::from(p.mtu) {
            eprintln!(
                "linerate: warning: port {}: interface {} has MTU {m}, less than the configured {} (mtu = 1500 when left out): the port runs at {m}",
                p.name, p.interface, p.mtu
            );
        } else if m > u32::from(p.mtu) {
            eprintln!(
                "linerate: note: port {}: interface {} has MTU {m}, more than the configured {}: the port keeps to {}",
                p.name, p.interface, p.mtu, p.mtu
            );
        }
    }
}

/// Says when an OpenVPN server's full-size packets are longer than the narrowest
/// port carries. Over IPv4 they go in IP fragments both ways (the gateway cuts
/// its own and makes the clients' whole), a second packet each; said only for a
/// port narrower than Ethernet's 1500, since at 1500 the clients' own defaults
/// make the same fragments. Over IPv6 the gateway does not cut its own packets:
/// the first too large lowers the server's MTU, for every client. A smaller
/// `mtu` pushes a tun-mtu that fits to clients that take one.
fn say_openvpn_fit(config: &GatewayConfig) {
    let extra = wire::udp::HEADER_LEN + ::openvpn::data::OVERHEAD;
    let narrowest = |v6: bool| {
        config
            .ports
            .iter()
            .filter(|p| !v6 || p.addresses.iter().any(|(a, _)| a.is_ipv6()))
            .map(|p| {
                let m = io::netdev::mtu(&p.interface)
                    .map_or(usize::from(p.mtu), |m| (m as usize).min(usize::from(p.mtu)));
                (m, p.name.as_str())
            })
            .min()
    };
    for o in &config.openvpns {
        let mtu = usize::from(o.mtu);
        // IPv4 packets too large go in fragments, which is said only where a port
        // is narrower than usual or the server wider; IPv6 ones lower the MTU.
        for v6 in [false, true] {
            let ip = if v6 {
                wire::ipv6::HEADER_LEN
            } else {
                wire::ipv4::HEADER_LEN
            };
            let Some((m, port)) = narrowest(v6) else {
                continue;
            };
            if m >= mtu + ip + extra || (!v6 && m >= 1500 && mtu <= 1500) {
                continue;
            }
            let (full, fits) = (mtu + ip + extra, m.saturating_sub(ip + extra));
            if v6 {
                eprintln!(
                    "linerate: note: openvpn {}: over IPv6 its full-size packets (mtu {mtu}) are {full} bytes outside, more than port {port} carries ({m}): the first such packet to a client lowers the server's mtu to {fits} for every client (the gateway does not cut its own IPv6 packets)",
                    o.name
                );
            } else {
                eprintln!(
                    "linerate: note: openvpn {}: its full-size packets (mtu {mtu}) are {full} bytes outside over IPv4, more than port {port} carries ({m}): they go in IP fragments, which the gateway cuts and makes whole; mtu = {fits} in [[openvpn]] pushes a tun-mtu that fits to clients that take one",
                    o.name
                );
            }
        }
    }
}

/// The WireGuard tunnel's MTU, lowered where its outer packets could not leave by
/// the port the FIB routes a peer's configured endpoint through (IPv4 adds 60
/// bytes, IPv6 80); said on stderr. Endpoints learned later are covered as the
/// packets go: `ip-rewrite` lowers the MTU the same way on the first outer packet
/// that does not fit.
fn fit_tunnel_to_ports(config: &GatewayConfig, graphs: &mut [GatewayGraph]) {
    let Some(wg) = config.wireguard.first() else {
        return;
    };
    let Some(first) = graphs.first() else {
        return;
    };
    let ip = first.context().ip();
    let mut least: Option<(usize, String, u16)> = None;
    for e in wg.peers.iter().filter_map(|p| p.endpoint) {
        let port = match ip.fib().lookup(e.ip()) {
            Some(dataplane::fib::RouteTarget::Via { port, .. })
            | Some(dataplane::fib::RouteTarget::Attached { port }) => port,
            _ => continue,
        };
        let Some(iface) = ip.interfaces().get(port) else {
            continue;
        };
        let outer = if e.is_ipv4() {
            wire::ipv4::HEADER_LEN
        } else {
            wire::ipv6::HEADER_LEN
        } + wire::udp::HEADER_LEN
            + dataplane::wg::OUTER_OVERHEAD;
        let fits = usize::from(iface.mtu).saturating_sub(outer);
        if least.as_ref().is_none_or(|l| fits < l.0) {
            least = Some((fits, iface.name.clone(), iface.mtu));
        }
    }
    let configured = usize::from(wg.mtu);
    if let Some((fits, port, mtu)) = least
        && fits < configured
    {
        eprintln!(
            "linerate: warning: wireguard {}: with mtu {configured} its outer packets are larger than port {port} (mtu {mtu}) carries toward the peers' endpoints: the tunnel runs at mtu {fits} (write mtu = {fits} in [[wireguard]] to say so)",
            wg.name
        );
        for g in graphs {
            g.set_wireguard(wg.listen_port, fits);
        }
    }
}

/// Every worker's graph: the owner's (first) holds the device; each other follows
/// it, with its own arena and engines, and hears the neighbors the others hear.
/// `clock` is the gateway's one time base: an instant and the wall-clock time read
/// together, so that handshake timestamps and `wg show`'s times never run ahead
/// of the wall clock by however long the calibration took.
fn build_graphs(
    config: &GatewayConfig,
    owner_waker: &Arc<Waker>,
    handoff: &Arc<HandoffBoard>,
    clock: (Instant, SystemTime),
) -> Result<Vec<GatewayGraph>, String> {
    let now = clock.0;
    let keys = Arc::new(KeyRegistry::new(KEY_CAPACITY));
    let (engines, choices) = runtime::engines::configured_set(
        &keys,
        None,
        CALIBRATION_TIME,
        &crypto::Algorithm::ALL,
        config.buffer_size(),
    )?;
    for line in choices {
        eprintln!("linerate: engine for {line}");
    }
    let mut device = owner_device(config, &keys, clock)?;
    device.publish();
    let cell = device.view_cell();
    let sas = esp_sas(config, &keys)?;
    let mut graphs = vec![build_graph(config, engines, device, &sas, now)?];
    for _ in 1..config.workers.len() {
        let (mut link, inbox) = dataplane::wg_follow::link(cell.clone());
        let owner = owner_waker.clone();
        link.set_nudge(move || {
            let _ = owner.wake();
        });
        graphs[0].context_mut().lead_wg_follower(inbox);
        let set = runtime::engines::replica(&keys, graphs[0].context().engines())?;
        let own = Device::new(keys.clone(), now, clock.1);
        let mut g = build_graph(config, set, own, &sas, now)?;
        g.context_mut().follow_wg_device(link);
        graphs.push(g);
    }
    if graphs.len() > 1 {
        let mesh = dataplane::neighbor_share::mesh(graphs.len());
        for (g, share) in graphs.iter_mut().zip(mesh) {
            g.context_mut().ip_mut().share_neighbors(share);
        }
        // Each outbound ESP SA is sealed on one worker, in sequence order.
        for (i, g) in graphs.iter_mut().enumerate() {
            g.context_mut().hand_esp_over(handoff.link(i));
        }
    }
    Ok(graphs)
}

/// An AF_XDP socket on queue `w` of the port's interface for each worker `w`, all
/// under one XDP program; or why not (nothing is left attached or taken then).
fn open_xdp_queues(
    id: PortId,
    p: &config::PortConfig,
    config: &GatewayConfig,
    graphs: &mut [GatewayGraph],
) -> Result<Vec<Port>, String> {
    let jumbo = config.buffer_size() > dataplane::STANDARD_BUFFER;
    Port::check_xdp_mtu(&p.name, port_mtu(p), config.buffer_size())?;
    let workers = graphs.len();
    match io::netdev::rx_queues(&p.interface) {
        Ok(q) if (q as usize) < workers => {
            return Err(format!(
                "port {}: {} has {q} receive queue{} for {workers} workers (one each: `ethtool -L {} combined {workers}`, or numrxqueues for veth)",
                p.name,
                p.interface,
                if q == 1 { "" } else { "s" },
                p.interface
            ));
        }
        Ok(q) if q as usize > workers => eprintln!(
            "linerate: warning: port {}: {} has {q} receive queues and the gateway {workers} worker{}: frames the interface puts on queue {workers} or later go to the kernel, not the gateway (`ethtool -L {} combined {workers}`)",
            p.name,
            p.interface,
            if workers == 1 { "" } else { "s" },
            p.interface
        ),
        _ => {}
    }
    // Jumbo frames come to a jumbo gateway's sockets in parts.
    let program = io::XdpAttachment::attach(&p.interface, false, jumbo)
        .map_err(|e| format!("port {}: {e}", p.name))?;
    // A port without addresses is cross-connected: every frame is the gateway's,
    // whatever it holds and whoever it is for.
    let whole = p.addresses.is_empty();
    if whole {
        program
            .take_all(true)
            .map_err(|e| format!("port {}: {e}", p.name))?;
        if !program.restores_vlan_tags() {
            eprintln!(
                "linerate: warning: port {}: this kernel or driver gives XDP no receive metadata, so a VLAN tag the NIC takes out of a frame (rx VLAN offload) is lost on AF_XDP: for a VLAN trunk, turn the offload off (`ethtool -K {} rxvlan off`) or give the port driver = \"af_packet\"",
                p.name, p.interface
            );
        }
    }
    let mut ports = Vec::with_capacity(workers);
    let fill = ports::xdp_fill_target(config.buffers, config.ports.len());
    for (w, gw) in graphs.iter_mut().enumerate() {
        let queue = ports::XdpQueue {
            queue: w as u32,
            zero_copy: p.zero_copy,
            fill_target: fill,
            mtu: port_mtu(p),
        };
        ports.push(Port::open_xdp(id, &p.name, &program, &queue, gw)?);
    }
    if whole {
        let hold = io::netdev::Promiscuous::on(&p.interface)
            .map_err(|e| format!("port {}: {e}", p.name))?;
        ports[0].hold_promiscuous(hold);
    }
    Ok(ports)
}

/// Opens each port's driver, one queue (AF_XDP) or fanout member (AF_PACKET) per
/// worker; AF_XDP falls back to AF_PACKET where XDP cannot serve the port. The
/// result has one list of ports per worker, in config order.
fn open_ports(
    config: &GatewayConfig,
    graphs: &mut [GatewayGraph],
) -> Result<Vec<Vec<Port>>, String> {
    let workers = graphs.len();
    let mut per_worker: Vec<Vec<Port>> = (0..workers).map(|_| Vec::new()).collect();
    for (i, p) in config.ports.iter().enumerate() {
        let id = PortId(i as u16);
        let xdp = match p.driver {
            Driver::AfPacket => None,
            Driver::AfXdp => match open_xdp_queues(id, p, config, graphs) {
                Ok(ports) => Some(ports),
                Err(e) => {
                    eprintln!("linerate: {e}; falling back to AF_PACKET");
                    None
                }
            },
        };
        let ports = match xdp {
            Some(ports) => ports,
            None => {
                // One fanout group per port and process. Worker `w` serves queue `w`
                // where the interface has a queue per worker, as with AF_XDP (and a
                // NIC spreads flows over its queues); with fewer, the kernel hands
                // each flow to one worker by its hash.
                let how = match io::netdev::rx_queues(&p.interface) {
                    Ok(q) if q as usize >= workers => io::Fanout::Queue,
                    _ => io::Fanout::Hash,
                };
                let group = (workers > 1)
                    .then(|| ((std::process::id() as u16).wrapping_add(i as u16), how));
                // Each worker's port copies into that worker's buffers.
                graphs
                    .iter()
                    .map(|g| {
                        let buffer = g.context().arena().buffer_size();
                        Port::open_packet(id, &p.name, &p.interface, port_mtu(p), buffer, group)
                    })
                    .collect::<Result<Vec<_>, _>>()?
            }
        };
        eprintln!(
            "linerate: port {} on {} ({}, {workers} worker{})",
            p.name,
            p.interface,
            ports[0].driver_name(),
            if workers == 1 { "" } else { "s" }
        );
        for (w, port) in ports.into_iter().enumerate() {
            per_worker[w].push(port);
        }
    }
    for (ports, gw) in per_worker.iter_mut().zip(graphs.iter_mut()) {
        for port in ports {
            port.prime(gw)?;
        }
    }
    Ok(per_worker)
}

/// Each port's interface locked for this process (see `io::port_lock`): a second
/// gateway on any of them is refused here, before anything is opened or attached.
fn lock_ports(config: &GatewayConfig, path: &Path) -> Result<Vec<io::PortLock>, String> {
    let holder = format!(
        "linerate gateway, pid {}, control socket {}, configuration {}",
        std::process::id(),
        config.control.display(),
        path.display()
    );
    config
        .ports
        .iter()
        .map(|p| {
            io::PortLock::take(Path::new(io::port_lock::LOCK_DIR), &p.interface, &holder)
                .map_err(|e| format!("port {}: interface {} {e}", p.name, p.interface))
        })
        .collect()
}

/// Takes off the XDP program a gateway killed without a clean stop left on the
/// port's interface (this process holds the interface's lock, so no live gateway
/// uses it), and refuses an AF_XDP port whose interface another XDP program holds.
fn clear_left_over_xdp(p: &config::PortConfig) -> Result<(), String> {
    match io::xdp::detach_ours(&p.interface) {
        Ok(gone) => {
            for g in gone {
                eprintln!(
                    "linerate: port {}: took off the XDP program (id {}) a linerate gateway left on {} when it ended without a clean stop",
                    p.name, g.id, p.interface
                );
            }
        }
        // An interface that is not there is said when the port is made.
        Err(e) => eprintln!(
            "linerate: warning: port {}: {}: looking for an XDP program a gateway left there: {e}",
            p.name, p.interface
        ),
    }
    if p.driver == Driver::AfXdp {
        match io::xdp::attached_programs(&p.interface) {
            Ok(others) => {
                if let Some(o) = others.first() {
                    return Err(format!(
                        "port {}: interface {} has another XDP program attached ({:?}, id {}): take it off (`ip link set dev {} xdp off`) or give the port driver = \"af_packet\"",
                        p.name, p.interface, o.name, o.id, p.interface
                    ));
                }
            }
            Err(e) => eprintln!(
                "linerate: warning: port {}: could not list the XDP programs on {}: {e}",
                p.name, p.interface
            ),
        }
    }
    Ok(())
}

/// Refuses a port whose interface holds a kernel address (IPv4, or IPv6 beyond
/// link-local): the kernel would answer ARP and pings and route beside the
/// gateway, each frame answered twice.
fn no_kernel_addresses(p: &config::PortConfig) -> Result<(), String> {
    let Ok(addrs) = io::netdev::kernel_addresses(&p.interface) else {
        return Ok(());
    };
    let held = addrs.iter().find(|a| match a {
        std::net::IpAddr::V4(_) => true,
        std::net::IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 != 0xfe80,
    });
    match held {
        Some(a) => Err(format!(
            "port {}: interface {} has the kernel address {a}: the kernel would answer and route beside the gateway; take it off (`ip addr flush dev {}`; the gateway's own addresses belong in the configuration)",
            p.name, p.interface, p.interface
        )),
        None => Ok(()),
    }
}

/// `linerate gateway -c FILE`: runs until SIGINT or SIGTERM; SIGHUP reloads FILE.
pub fn run(path: &Path, config: GatewayConfig) -> Result<(), String> {
    // Held until the process ends, whichever way.
    let _port_locks = lock_ports(&config, path)?;
    for p in &config.ports {
        no_kernel_addresses(p)?;
        clear_left_over_xdp(p)?;
    }
    io::heap::keep_large_blocks_mapped();
    // The control threads this thread starts run where no worker is pinned (they
    // take its cores when they are made); this thread is worker 0.
    let worker_cores: Vec<usize> = config.workers.iter().flatten().copied().collect();
    let control_cores = io::affinity::control_cores(&io::affinity::allowed()?, &worker_cores);
    if let Some(Some(core)) = config.workers.first() {
        io::affinity::pin_to(*core)?;
    }
    let clock = (Instant::now(), SystemTime::now());
    let service = Service::from_env();
    let waker = Arc::new(Waker::new().map_err(|e| format!("eventfd: {e}"))?);
    say_port_mtus(&config);
    say_openvpn_fit(&config);
    let handoff = HandoffBoard::new(config.workers.len());
    {
        let owner = waker.clone();
        handoff.set_wake(0, move || {
            let _ = owner.wake();
        });
    }
    let mut graphs = build_graphs(&config, &waker, &handoff, clock)?;
    fit_tunnel_to_ports(&config, &mut graphs);
    let ike_conns = super::ike::connections(&config)?;
    let ike_inbox = (!ike_conns.is_empty()).then(|| {
        let (inbox, rx) = dataplane::ike::IkeInbox::bounded(dataplane::ike::INBOX_LEN);
        for g in &mut graphs {
            g.set_ike(inbox.clone());
        }
        rx
    });
    let ovpn_inbox = (!config.openvpns.is_empty()).then(|| {
        let (inbox, rx) = dataplane::ovpn::OvpnInbox::bounded(dataplane::ovpn::INBOX_LEN);
        for g in &mut graphs {
            g.set_ovpn_inbox(inbox.clone());
        }
        rx
    });
    let keys = graphs[0].context().keys().clone();
    let mut ports = open_ports(&config, &mut graphs)?;
    let cores = config.workers.clone();
    let board = config
        .spread
        .then(|| crypto_async::spread::SpreadBoard::new(graphs.len()));

    let stop = Arc::new(AtomicBool::new(false));
    let reload = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())
            .map_err(|e| format!("signal handler: {e}"))?;
    }
    signal_hook::flag::register(signal_hook::consts::SIGHUP, reload.clone())
        .map_err(|e| format!("signal handler: {e}"))?;

    let (req_tx, req_rx) = mpsc::channel::<ControlRequest>();
    let (gw_tx, gw_rx) = mpsc::channel();
    let mut socket_files = Vec::new();
    let mut listeners = vec![(bind_socket(&config.control)?, config.control.clone())];
    let tunnel_name = config.wireguard.first().map(|w| w.name.clone());
    if let Some(name) = &tunnel_name {
        let p = socket_path(name);
        listeners.push((bind_socket(&p)?, p));
    }
    // Every thread started from here to the workers' is a control thread.
    let owner_core = config.workers.first().copied().flatten();
    io::affinity::run_on(&control_cores)?;
    for (listener, p) in listeners {
        socket_files.push(SocketFile::at(&p));
        let (tx, w, s) = (req_tx.clone(), waker.clone(), stop.clone());
        std::thread::Builder::new()
            .name("control".into())
            .spawn(move || serve_uapi(listener, tx, w, s))
            .map_err(|e| format!("starting the control thread: {e}"))?;
    }
    if let Some(addr) = config.metrics {
        metrics::serve(addr, req_tx.clone(), waker.clone())?;
    }
    let ike_status = match ike_inbox {
        Some(rx) => {
            let (gw_tx, waker) = (gw_tx.clone(), waker.clone());
            let to_worker: super::ike::ToWorker = Box::new(move |work, answer| {
                let sent = gw_tx.send((GatewayControl::Ike(work), answer)).is_ok();
                let _ = waker.wake();
                sent
            });
            Some(super::ike::spawn(ike_conns, rx, to_worker, stop.clone())?)
        }
        None => None,
    };
    let (ovpn_updates, updates_rx) = mpsc::channel();
    let ovpn_status = match ovpn_inbox {
        Some(rx) => {
            let (gw_tx, waker) = (gw_tx.clone(), waker.clone());
            let to_worker: super::ovpn::ToWorker = Box::new(move |work, answer| {
                let sent = gw_tx.send((GatewayControl::Ovpn(work), answer)).is_ok();
                let _ = waker.wake();
                sent
            });
            Some(super::ovpn::spawn(
                &config,
                keys,
                rx,
                updates_rx,
                to_worker,
                stop.clone(),
            )?)
        }
        None => None,
    };
    {
        let (path, waker, stop, reload, service) = (
            path.to_path_buf(),
            waker.clone(),
            stop.clone(),
            reload.clone(),
            service.clone(),
        );
        std::thread::Builder::new()
            .name("reload".into())
            .spawn(move || {
                let to = Reloaded {
                    worker: &gw_tx,
                    waker: &waker,
                    ovpn: &ovpn_updates,
                    service: &service,
                };
                reloader(&path, config, &reload, &stop, to)
            })
            .map_err(|e| format!("starting the reload thread: {e}"))?;
    }
    if let Some(core) = owner_core {
        io::affinity::pin_to(core)?;
    }
    if let Some(b) = &board {
        let owner = waker.clone();
        let s = b.spreader(0, move || {
            let _ = owner.wake();
        });
        graphs[0].context_mut().spread_over(s);
    }
    let mut lanes = graphs
        .into_iter()
        .zip(ports.drain(..))
        .enumerate()
        .map(|(i, (gw, ports))| Lane::new(i, gw, ports));
    let owner = lanes.next().expect("one worker at least");
    let mut beats = vec![owner.heartbeat()];
    let mut followers = Vec::new();
    for (mut lane, core) in lanes.zip(cores.iter().skip(1)) {
        let follower_waker = Arc::new(Waker::new().map_err(|e| format!("eventfd: {e}"))?);
        {
            let w = follower_waker.clone();
            handoff.set_wake(lane.index, move || {
                let _ = w.wake();
            });
        }
        if let Some(b) = &board {
            let w = follower_waker.clone();
            let s = b.spreader(lane.index, move || {
                let _ = w.wake();
            });
            lane.gw.context_mut().spread_over(s);
        }
        beats.push(lane.heartbeat());
        let spawned = follower::spawn(lane, *core, follower_waker, stop.clone(), waker.clone());
        match spawned {
            Ok(f) => followers.push(f),
            Err(e) => {
                stop.store(true, Ordering::Relaxed);
                for f in &mut followers {
                    f.join();
                }
                return Err(e);
            }
        }
    }
    let ports = owner.ports.len();
    let workers = 1 + followers.len();
    let mut worker = Worker::new(
        owner,
        followers,
        tunnel_name,
        req_rx,
        gw_rx,
        waker,
        stop.clone(),
    );
    worker.ike = ike_status;
    worker.ovpn = ovpn_status;
    let up = format!(
        "gateway up ({ports} ports, {workers} worker{})",
        if workers == 1 { "" } else { "s" }
    );
    eprintln!("linerate: {up}");
    service.ready(&up);
    service.watch(beats, stop.clone());
    let result = worker.run();
    stop.store(true, Ordering::Relaxed);
    service.stopping();
    eprintln!("linerate: gateway stopping");
    drop(worker); // detaches the XDP programs before the socket files go
    drop(socket_files);
    result
}

/// Where a reload's changes go: the owner worker's (and its wake-up), and the
/// OpenVPN servers' new settings to their control thread.
struct Reloaded<'a> {
    worker: &'a mpsc::Sender<(GatewayControl, mpsc::SyncSender<String>)>,
    waker: &'a Waker,
    ovpn: &'a mpsc::Sender<super::ovpn::ServerUpdate>,
    /// Told of the reload, and that the gateway is ready again after it,
    /// whatever came of it.
    service: &'a Service,
}

/// Waits for SIGHUP; then reads and validates the file again and hands the worker
/// (and the OpenVPN control thread) what changed. A file with errors, or one that
/// changes what only a restart may, is refused with the reasons on stderr, and
/// nothing changes.
fn reloader(
    path: &Path,
    mut current: GatewayConfig,
    reload: &AtomicBool,
    stop: &AtomicBool,
    to: Reloaded<'_>,
) {
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
        if !reload.swap(false, Ordering::Relaxed) {
            continue;
        }
        to.service.reloading();
        let outcome = reload_once(path, &mut current, &to);
        if outcome == GONE {
            return;
        }
        to.service.reloaded(outcome);
    }
}

/// What [`reload_once`] says, for the service manager's status line.
const RELOADED: &str = "gateway up, configuration reloaded";
const REFUSED: &str = "gateway up, last reload refused (see the log), running as before";
const GONE: &str = "stopping";

/// One SIGHUP's reload; what came of it, for the service manager's status.
fn reload_once(path: &Path, current: &mut GatewayConfig, to: &Reloaded<'_>) -> &'static str {
    let new = match config::load(path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("linerate: reload refused, nothing changed:\n{e}");
            return REFUSED;
        }
    };
    let changes = match Changes::between(current, &new) {
        Ok(c) => c,
        Err(why) => {
            eprintln!(
                "linerate: reload refused, nothing changed: {}: {why}",
                path.display()
            );
            return REFUSED;
        }
    };
    if changes.is_empty() {
        eprintln!("linerate: reload: nothing changed");
        *current = new;
        return RELOADED;
    }
    let (changes, servers) = changes.take_ovpn();
    for i in servers {
        let o = &new.openvpns[i];
        eprintln!(
            "linerate: reload: openvpn {}: new settings (connected clients renegotiate under them)",
            o.name
        );
        // The thread is gone only when the gateway stops.
        let _ = to.ovpn.send((i, super::ovpn::ServerSettings::of(o)));
    }
    if changes.is_empty() {
        *current = new;
        return RELOADED;
    }
    let (tx, rx) = mpsc::sync_channel(1);
    if to
        .worker
        .send((GatewayControl::Reload(Box::new(changes)), tx))
        .is_err()
    {
        return GONE;
    }
    let _ = to.waker.wake();
    if let Ok(text) = rx.recv() {
        for line in text.lines() {
            eprintln!("linerate: reload: {line}");
        }
    }
    *current = new;
    RELOADED
}
