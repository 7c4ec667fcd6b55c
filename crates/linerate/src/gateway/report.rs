//! What a running gateway tells about itself, as text made on the owner's worker
//! from its own state and the other workers' snapshots: `linerate show interfaces |
//! runtime | fib | neighbors | esp`, and the Prometheus metrics. Ports and nodes are
//! counted by every worker and added up here; `runtime` shows each worker apart, as
//! VPP does. (`show counters` and `show errors` use the counter report host mode
//! has too.)

use super::lane::{LaneSnapshot, PortSnapshot};
use base64::Engine as _;
use dataplane::NodeCounters;
use dataplane::fib::{PortId, RouteTarget};
use dataplane::gateway::GatewayGraph;
use dataplane::l2::L2Interface;
use dataplane::neighbor::NeighborInfo;
use std::fmt::Write as _;
use std::time::SystemTime;

/// What a report is made from.
pub struct Shown<'a> {
    /// The owner's graph: its device, FIB and neighbor table (the routes are the
    /// same on every worker; each keeps its own neighbors, told of the others').
    pub gw: &'a GatewayGraph,
    pub tunnel_name: Option<&'a str>,
    /// Every worker's counters, the owner's first.
    pub lanes: Vec<LaneSnapshot>,
    /// The key exchange's state, when the gateway runs one.
    pub ike: Option<&'a std::sync::Mutex<super::ike::IkeStatus>>,
    /// The OpenVPN servers' state, when the gateway has any.
    pub ovpn: Option<&'a std::sync::Mutex<super::ovpn::OvpnStatus>>,
}

/// The text for `what`, or `None` for a name not served.
pub fn show(w: &Shown<'_>, what: &str) -> Option<String> {
    Some(match what {
        "interfaces" => interfaces(w),
        "runtime" => runtime(w),
        "fib" => fib(w),
        "neighbors" => neighbors(w),
        "esp" => super::esp_report::show(w.gw.context()),
        "metrics" => metrics(w),
        _ => return None,
    })
}

impl Shown<'_> {
    /// Each port with its counters added up over the workers, in port order.
    fn ports(&self) -> Vec<PortSnapshot> {
        let mut out: Vec<PortSnapshot> = Vec::new();
        for p in self.lanes.iter().flat_map(|l| &l.ports) {
            let Some(sum) = out.iter_mut().find(|s| s.id == p.id) else {
                out.push(p.clone());
                continue;
            };
            let (a, b) = (&mut sum.counters, &p.counters);
            a.rx_packets += b.rx_packets;
            a.rx_bytes += b.rx_bytes;
            a.tx_packets += b.tx_packets;
            a.tx_bytes += b.tx_bytes;
            a.rx_no_buffer_polls += b.rx_no_buffer_polls;
            a.tx_dropped += b.tx_dropped;
            for (list, more) in [
                (&mut sum.driver_counters, &p.driver_counters),
                (&mut sum.drops, &p.drops),
            ] {
                for &(name, v) in more {
                    match list.iter_mut().find(|(n, _)| *n == name) {
                        Some((_, total)) => *total += v,
                        None => list.push((name, v)),
                    }
                }
            }
        }
        out.sort_by_key(|p| p.id.0);
        out
    }

    /// Each node with its counters added up over the workers, in graph order.
    fn nodes(&self) -> Vec<(&'static str, NodeCounters)> {
        let mut lanes = self.lanes.iter();
        let Some(first) = lanes.next() else {
            return Vec::new();
        };
        let mut out = first.nodes.clone();
        for lane in lanes {
            for ((_, sum), (_, c)) in out.iter_mut().zip(&lane.nodes) {
                sum.add(c);
            }
        }
        out
    }
}

fn port_name(w: &Shown<'_>, id: PortId) -> String {
    w.lanes
        .first()
        .and_then(|l| l.ports.iter().find(|p| p.id == id))
        .map_or_else(|| format!("port{}", id.0), |p| p.name.clone())
}

fn interfaces(w: &Shown<'_>) -> String {
    let mut out = String::new();
    let ip = w.gw.context().ip();
    let workers = w.lanes.len();
    for p in w.ports() {
        let Some(iface) = ip.interfaces().get(p.id) else {
            continue;
        };
        let c = p.counters;
        let addrs: Vec<String> = iface.addrs.iter().map(|a| a.to_string()).collect();
        let _ = writeln!(
            out,
            "{} ({}, {}, {workers} worker{}) mac {} mtu {}\n  addresses {}\n  rx {} packets {} bytes, polls without a free buffer {}\n  tx {} packets {} bytes, dropped {}",
            p.name,
            p.ifname,
            p.driver,
            if workers == 1 { "" } else { "s" },
            wire::ethernet::MacAddr(iface.mac),
            iface.mtu,
            if addrs.is_empty() {
                "none".into()
            } else {
                addrs.join(" ")
            },
            c.rx_packets,
            c.rx_bytes,
            c.rx_no_buffer_polls,
            c.tx_packets,
            c.tx_bytes,
            c.tx_dropped,
        );
        let driver: Vec<String> = p
            .driver_counters
            .iter()
            .map(|(n, v)| format!("{n} {v}"))
            .collect();
        let _ = writeln!(out, "  driver {}", driver.join(", "));
    }
    if let Some(name) = w.tunnel_name {
        let cx = w.gw.context();
        let dev = cx.wg_device();
        let _ = writeln!(
            out,
            "{name} (wireguard) listen port {} mtu {} peers {}",
            cx.wg_listen_port(),
            cx.wg_mtu(),
            dev.peer_ids().len()
        );
    }
    let cx = w.gw.context();
    for (_, t) in cx.vxlans().iter() {
        let _ = writeln!(
            out,
            "{} (vxlan) vni {} {} -> {} udp port {}, frames up to {} bytes",
            t.name, t.vni, t.local, t.remote, t.udp_port, t.max_frame
        );
    }
    let l2_name = |i: L2Interface| match i {
        L2Interface::Port(p) => port_name(w, p),
        L2Interface::Vxlan(v) => cx
            .vxlans()
            .get(v)
            .map_or_else(|| format!("vxlan{}", v.0), |t| t.name.clone()),
    };
    for (rx, tx) in cx.l2().xconnects() {
        let _ = writeln!(out, "xconnect {} -> {}", l2_name(rx), l2_name(tx));
    }
    out
}

/// VPP's `show runtime`: per worker and node, calls, vectors (packets), vectors
/// per call and clocks per vector.
fn runtime(w: &Shown<'_>) -> String {
    let mut out = String::new();
    for lane in &w.lanes {
        let role = if lane.index == 0 {
            " (owns the WireGuard device)"
        } else {
            ""
        };
        let secs = lane.uptime.as_secs_f64();
        let _ = writeln!(out, "worker {}{role}: up {secs:.1} s", lane.index);
        let _ = writeln!(
            out,
            "{:<18} {:>12} {:>14} {:>12} {:>12} {:>12}",
            "Name", "Calls", "Vectors", "Vectors/Call", "Clocks", "Drops"
        );
        for (name, c) in &lane.nodes {
            if c.calls == 0 {
                continue;
            }
            let per_call = c.packets as f64 / c.calls as f64;
            let clocks = if c.packets > 0 {
                c.clocks as f64 / c.packets as f64
            } else {
                0.0
            };
            let _ = writeln!(
                out,
                "{name:<18} {:>12} {:>14} {per_call:>12.2} {clocks:>12.1} {:>12}",
                c.calls,
                c.packets,
                c.dropped()
            );
        }
    }
    out
}

fn fib(w: &Shown<'_>) -> String {
    let mut out = String::new();
    for (prefix, target) in w.gw.context().ip().fib().routes() {
        let to = match target {
            RouteTarget::Via { port, next_hop } => {
                format!("via {next_hop} port {}", port_name(w, port))
            }
            RouteTarget::Attached { port } => format!("attached port {}", port_name(w, port)),
            RouteTarget::Tunnel(_) => {
                format!("tunnel {}", w.tunnel_name.unwrap_or("(none)"))
            }
            other => other.to_string(),
        };
        let _ = writeln!(out, "{prefix:<44} {to}");
    }
    out
}

/// Each worker keeps its own table (told of what the others hear): one row per
/// neighbor, in the best state any worker has it in, with the workers that hold it
/// when not all do.
fn neighbors(w: &Shown<'_>) -> String {
    let rank = |state: &str| match state {
        "reachable" => 3,
        "probing" => 2,
        "stale" => 1,
        _ => 0,
    };
    let mut rows: Vec<(NeighborInfo, Vec<usize>)> = Vec::new();
    for lane in &w.lanes {
        for n in &lane.neighbors {
            match rows
                .iter_mut()
                .find(|(r, _)| (r.port, r.ip) == (n.port, n.ip))
            {
                Some((best, holders)) => {
                    holders.push(lane.index);
                    if rank(n.state) > rank(best.state) {
                        *best = *n;
                    }
                }
                None => rows.push((*n, vec![lane.index])),
            }
        }
    }
    rows.sort_by_key(|(n, _)| (n.port, n.ip));
    let mut out = String::new();
    for (n, holders) in rows {
        let m = n
            .mac
            .map_or_else(|| "-".into(), |m| wire::ethernet::MacAddr(m).to_string());
        let held = if holders.len() == w.lanes.len() {
            String::new()
        } else {
            let list: Vec<String> = holders.iter().map(usize::to_string).collect();
            format!(" (worker {})", list.join(","))
        };
        let _ = writeln!(
            out,
            "{:<8} {:<40} {m:<17} {}{held}",
            port_name(w, n.port),
            n.ip,
            n.state
        );
    }
    out
}

/// A Prometheus label value, escaped.
fn label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The Prometheus text exposition: ports, nodes, and WireGuard peers under the names
/// the usual WireGuard exporters use, so existing dashboards work.
fn metrics(w: &Shown<'_>) -> String {
    let mut out = String::new();
    let mut family = |name: &str, kind: &str, help: &str, rows: Vec<(String, u64)>| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (labels, v) in rows {
            let _ = writeln!(out, "{name}{{{labels}}} {v}");
        }
    };
    let port_totals = w.ports();
    let node_totals = w.nodes();
    let ports = |f: fn(&ports::PortCounters) -> u64| -> Vec<(String, u64)> {
        port_totals
            .iter()
            .map(|p| (format!("port=\"{}\"", label(&p.name)), f(&p.counters)))
            .collect()
    };
    family(
        "linerate_port_rx_packets_total",
        "counter",
        "Frames received on the port.",
        ports(|c| c.rx_packets),
    );
    family(
        "linerate_port_rx_bytes_total",
        "counter",
        "Bytes received on the port.",
        ports(|c| c.rx_bytes),
    );
    family(
        "linerate_port_tx_packets_total",
        "counter",
        "Frames sent on the port.",
        ports(|c| c.tx_packets),
    );
    family(
        "linerate_port_tx_bytes_total",
        "counter",
        "Bytes sent on the port.",
        ports(|c| c.tx_bytes),
    );
    family(
        "linerate_port_drops_total",
        "counter",
        "Frames the port's driver lost, each once, by reason (`linerate show errors`).",
        port_totals
            .iter()
            .flat_map(|p| {
                p.drops
                    .iter()
                    .map(move |(r, v)| (format!("port=\"{}\",reason=\"{r}\"", label(&p.name)), *v))
            })
            .collect(),
    );
    family(
        "linerate_node_packets_total",
        "counter",
        "Packets each graph node processed.",
        node_totals
            .iter()
            .map(|(n, c)| (format!("node=\"{n}\""), c.packets))
            .collect(),
    );
    family(
        "linerate_node_drops_total",
        "counter",
        "Packets each graph node dropped, by reason.",
        node_totals
            .iter()
            .flat_map(|(n, c)| {
                c.drops()
                    .map(move |(e, v)| (format!("node=\"{n}\",reason=\"{}\"", e.name), v))
            })
            .collect(),
    );
    let sas = super::esp_report::rows(w.gw.context());
    if !sas.is_empty() {
        let sa = |f: fn(&super::esp_report::SaRow) -> u64| -> Vec<(String, u64)> {
            sas.iter()
                .map(|r| {
                    (
                        format!(
                            "tunnel=\"{}\",direction=\"{}\",spi=\"{:#010x}\"",
                            label(&r.tunnel),
                            r.direction,
                            r.spi
                        ),
                        f(r),
                    )
                })
                .collect()
        };
        family(
            "linerate_esp_sa_packets_total",
            "counter",
            "Packets the ESP SA sealed (out) or opened and took in (in).",
            sa(|r| r.packets),
        );
        family(
            "linerate_esp_sa_bytes_total",
            "counter",
            "Inner bytes the ESP SA carried.",
            sa(|r| r.bytes),
        );
        family(
            "linerate_esp_sa_replay_drops_total",
            "counter",
            "Packets the inbound SA refused as replayed or behind its window.",
            sa(|r| r.replayed + r.too_old),
        );
        family(
            "linerate_esp_sa_icv_failures_total",
            "counter",
            "Packets whose integrity check value did not verify.",
            sa(|r| r.icv_failed),
        );
        family(
            "linerate_esp_sa_lifetime_drops_total",
            "counter",
            "Packets refused because the SA's lifetime ran out or its sequence numbers did.",
            sa(|r| r.expired + r.seq_exhausted),
        );
    }
    if let Some(status) = w.ike {
        let status = status.lock().expect("status lock");
        let mut by_state: std::collections::BTreeMap<String, u64> = Default::default();
        for s in &status.sas {
            *by_state
                .entry(format!(
                    "connection=\"{}\",state=\"{:?}\"",
                    label(&s.connection),
                    s.state
                ))
                .or_default() += 1;
        }
        family(
            "linerate_ike_sas",
            "gauge",
            "IKE SAs by connection and state (InitReplied: half open).",
            by_state.into_iter().collect(),
        );
        family(
            "linerate_ike_dropped_total",
            "counter",
            "IKE messages the key exchange ignored, by reason.",
            status
                .dropped
                .iter()
                .map(|(r, v)| (format!("reason=\"{r}\""), *v))
                .collect(),
        );
    }
    if let Some(name) = w.tunnel_name {
        let dev = w.gw.context().wg_device();
        let peers: Vec<_> = dev
            .peer_ids()
            .into_iter()
            .filter_map(|id| dev.peer_info(id))
            .collect();
        let key = |p: &wireguard::PeerInfo| {
            let k = base64::engine::general_purpose::STANDARD.encode(p.public_key.as_bytes());
            format!("interface=\"{}\",public_key=\"{k}\"", label(name))
        };
        family(
            "wireguard_peer_received_bytes_total",
            "counter",
            "Bytes received from the peer.",
            peers.iter().map(|p| (key(p), p.rx_bytes)).collect(),
        );
        family(
            "wireguard_peer_sent_bytes_total",
            "counter",
            "Bytes sent to the peer.",
            peers.iter().map(|p| (key(p), p.tx_bytes)).collect(),
        );
        family(
            "wireguard_peer_last_handshake_seconds",
            "gauge",
            "Unix time of the peer's last handshake (0: none).",
            peers
                .iter()
                .map(|p| {
                    let t = p
                        .last_handshake
                        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
                        .map_or(0, |d| d.as_secs());
                    (key(p), t)
                })
                .collect(),
        );
    }
    if let Some(status) = w.ovpn {
        let st = status.lock().expect("status lock");
        family(
            "linerate_openvpn_clients",
            "gauge",
            "Clients connected to the OpenVPN server.",
            st.servers
                .iter()
                .map(|s| {
                    (
                        format!("server=\"{}\"", label(&s.name)),
                        s.clients.len() as u64,
                    )
                })
                .collect(),
        );
        family(
            "linerate_openvpn_refused_total",
            "counter",
            "Control packets the OpenVPN server refused, by reason.",
            st.servers
                .iter()
                .flat_map(|s| {
                    s.refused.iter().map(move |(r, v)| {
                        (format!("server=\"{}\",reason=\"{r}\"", label(&s.name)), *v)
                    })
                })
                .collect(),
        );
        let client = |s: &super::ovpn::ServerStatus, c: &super::ovpn::ClientStatus, dir: &str| {
            format!(
                "server=\"{}\",client=\"{}\",peer_id=\"{}\",direction=\"{dir}\"",
                label(&s.name),
                label(&c.common_name),
                c.peer_id
            )
        };
        family(
            "linerate_openvpn_client_bytes_total",
            "counter",
            "Bytes of the client's data packets, in (from it) and out (to it).",
            st.servers
                .iter()
                .flat_map(|s| {
                    s.clients.iter().flat_map(move |c| {
                        [
                            (client(s, c, "in"), c.bytes_in),
                            (client(s, c, "out"), c.bytes_out),
                        ]
                    })
                })
                .collect(),
        );
    }
    out
}
