//! What a running gateway tells about itself, as text made on the worker from its
//! own state: `linerate show interfaces | runtime | fib | neighbors`, and the
//! Prometheus metrics. (`show counters` and `show errors` use the counter report
//! host mode has too.)

use super::worker::Worker;
use base64::Engine as _;
use dataplane::fib::{PortId, RouteTarget};
use std::fmt::Write as _;
use std::time::SystemTime;

/// The text for `what`, or `None` for a name not served.
pub fn show(w: &Worker, what: &str) -> Option<String> {
    Some(match what {
        "interfaces" => interfaces(w),
        "runtime" => runtime(w),
        "fib" => fib(w),
        "neighbors" => neighbors(w),
        "metrics" => metrics(w),
        _ => return None,
    })
}

fn port_name(w: &Worker, id: PortId) -> String {
    w.ports
        .iter()
        .find(|p| p.id == id)
        .map_or_else(|| format!("port{}", id.0), |p| p.name.clone())
}

fn mac(m: &[u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn interfaces(w: &Worker) -> String {
    let mut out = String::new();
    let ip = w.gw.context().ip();
    for p in &w.ports {
        let Some(iface) = ip.interfaces().get(p.id) else {
            continue;
        };
        let c = p.counters();
        let addrs: Vec<String> = iface.addrs.iter().map(|a| a.to_string()).collect();
        let _ = writeln!(
            out,
            "{} ({}, {}) mac {} mtu {}\n  addresses {}\n  rx {} packets {} bytes, no buffer {}\n  tx {} packets {} bytes, dropped {}",
            p.name,
            p.ifname,
            p.driver_name(),
            mac(&iface.mac),
            iface.mtu,
            if addrs.is_empty() {
                "none".into()
            } else {
                addrs.join(" ")
            },
            c.rx_packets,
            c.rx_bytes,
            c.rx_no_buffer,
            c.tx_packets,
            c.tx_bytes,
            c.tx_dropped,
        );
        let driver: Vec<String> = p
            .driver_counters()
            .into_iter()
            .map(|(n, v)| format!("{n} {v}"))
            .collect();
        let _ = writeln!(out, "  driver {}", driver.join(", "));
    }
    if let Some(name) = &w.tunnel_name {
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
    out
}

/// VPP's `show runtime`: per node, calls, vectors (packets), vectors per call and
/// clocks per vector, for the one worker.
fn runtime(w: &Worker) -> String {
    let mut out = String::new();
    let secs = w.uptime().as_secs_f64();
    let _ = writeln!(out, "worker 0: up {secs:.1} s");
    let _ = writeln!(
        out,
        "{:<18} {:>12} {:>14} {:>12} {:>12} {:>12}",
        "Name", "Calls", "Vectors", "Vectors/Call", "Clocks", "Drops"
    );
    for (name, c) in w.gw.counters() {
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
    out
}

fn fib(w: &Worker) -> String {
    let mut out = String::new();
    for (prefix, target) in w.gw.context().ip().fib().routes() {
        let to = match target {
            RouteTarget::Via { port, next_hop } => {
                format!("via {next_hop} port {}", port_name(w, port))
            }
            RouteTarget::Attached { port } => format!("attached port {}", port_name(w, port)),
            RouteTarget::Tunnel(_) => {
                format!("tunnel {}", w.tunnel_name.as_deref().unwrap_or("(none)"))
            }
            other => other.to_string(),
        };
        let _ = writeln!(out, "{prefix:<44} {to}");
    }
    out
}

fn neighbors(w: &Worker) -> String {
    let mut out = String::new();
    for n in w.gw.context().ip().neighbors().entries() {
        let m = n.mac.as_ref().map_or_else(|| "-".into(), mac);
        let _ = writeln!(
            out,
            "{:<8} {:<40} {m:<17} {}",
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
fn metrics(w: &Worker) -> String {
    let mut out = String::new();
    let mut family = |name: &str, kind: &str, help: &str, rows: Vec<(String, u64)>| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (labels, v) in rows {
            let _ = writeln!(out, "{name}{{{labels}}} {v}");
        }
    };
    let ports = |f: fn(&super::ports::PortCounters) -> u64| -> Vec<(String, u64)> {
        w.ports
            .iter()
            .map(|p| (format!("port=\"{}\"", label(&p.name)), f(&p.counters())))
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
        "Frames the port's driver dropped, by reason.",
        w.ports
            .iter()
            .flat_map(|p| {
                let c = p.counters();
                [
                    ("rx_no_buffer", c.rx_no_buffer),
                    ("tx_dropped", c.tx_dropped),
                ]
                .into_iter()
                .chain(p.driver_counters())
                .map(move |(r, v)| (format!("port=\"{}\",reason=\"{r}\"", label(&p.name)), v))
            })
            .collect(),
    );
    family(
        "linerate_node_packets_total",
        "counter",
        "Packets each graph node processed.",
        w.gw.counters()
            .map(|(n, c)| (format!("node=\"{n}\""), c.packets))
            .collect(),
    );
    family(
        "linerate_node_drops_total",
        "counter",
        "Packets each graph node dropped, by reason.",
        w.gw.counters()
            .flat_map(|(n, c)| {
                c.drops()
                    .map(move |(e, v)| (format!("node=\"{n}\",reason=\"{}\"", e.name), v))
            })
            .collect(),
    );
    if let Some(name) = &w.tunnel_name {
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
    out
}
