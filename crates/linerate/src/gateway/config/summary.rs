//! What `linerate gateway --check` prints about a valid file: the gateway's settings,
//! then every port, tunnel, peer and route, one line each. Public keys are shown (as
//! `wg show` does); private and preshared keys never are.

use super::{GatewayConfig, L2Endpoint, RouteTarget, base64_key};
use std::fmt::Write;

pub(super) fn summary(c: &GatewayConfig) -> String {
    let mut out = String::new();
    let cores: Vec<String> = c
        .workers
        .iter()
        .map(|w| w.map_or("not pinned".to_string(), |core| format!("core {core}")))
        .collect();
    let _ = writeln!(out, "workers: {} ({})", c.workers.len(), cores.join(", "));
    let _ = writeln!(out, "control: {}", c.control.display());
    match c.metrics {
        Some(m) => _ = writeln!(out, "metrics: {m}"),
        None => _ = writeln!(out, "metrics: off"),
    }
    let size = c.buffer_size();
    let why = super::jumbo_reason(&c.ports, &c.wireguard, &c.openvpns)
        .map(|r| format!(", jumbo for {r}"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "buffers: {} per worker, {size} bytes each{why} ({} MiB reserved per worker)",
        c.buffers,
        (c.buffers * size) >> 20
    );
    let own = ports::xdp_own_memory(size);
    let xdp = c
        .ports
        .iter()
        .filter(|p| p.driver == super::Driver::AfXdp)
        .count();
    if own > 0 && xdp > 0 {
        let _ = writeln!(
            out,
            "  and {} MiB per AF_XDP port per worker, pinned: page-sized buffers its frames come and go in, in parts",
            own >> 20
        );
    }
    if c.spread {
        let _ = writeln!(out, "spread: full frames shared with idle workers");
    }
    for p in &c.ports {
        let addrs: Vec<String> = p
            .addresses
            .iter()
            .map(|(a, l)| format!("{a}/{l}"))
            .collect();
        let _ = writeln!(
            out,
            "port {}: interface {}, {}{}, mtu {}, {}",
            p.name,
            p.interface,
            p.driver.name(),
            if p.zero_copy { " (zero copy)" } else { "" },
            p.mtu,
            if addrs.is_empty() {
                "L2 (no addresses, cross-connected)".to_string()
            } else {
                addrs.join(" ")
            },
        );
    }
    for w in &c.wireguard {
        let _ = writeln!(
            out,
            "tunnel {}: listen port {}, mtu {}, public key {}, {} peer{}",
            w.name,
            w.listen_port,
            w.mtu,
            base64_key(&w.public_key),
            w.peers.len(),
            if w.peers.len() == 1 { "" } else { "s" },
        );
        if !w.addresses.is_empty() {
            let addrs: Vec<String> = w
                .addresses
                .iter()
                .map(|(a, l)| format!("{a}/{l}"))
                .collect();
            let _ = writeln!(out, "  addresses {}", addrs.join(" "));
        }
        for p in &w.peers {
            let mut line = format!("  peer {}", base64_key(&p.public_key));
            match p.endpoint {
                Some(e) => _ = write!(line, ": endpoint {e}"),
                None => line.push_str(": no endpoint"),
            }
            let ips: Vec<String> = p.allowed_ips.iter().map(|a| a.to_string()).collect();
            if ips.is_empty() {
                line.push_str(", no allowed IPs");
            } else {
                _ = write!(line, ", allowed IPs {}", ips.join(" "));
            }
            if let Some(k) = p.persistent_keepalive {
                _ = write!(line, ", keepalive {k} s");
            }
            if p.preshared_key.is_some() {
                line.push_str(", preshared key");
            }
            let _ = writeln!(out, "{line}");
        }
    }
    for r in &c.routes {
        let target = match r.target {
            RouteTarget::Port { port, via: Some(v) } => {
                format!("via {v} port {}", c.ports[port].name)
            }
            RouteTarget::Port { port, via: None } => format!("port {}", c.ports[port].name),
            RouteTarget::Tunnel { tunnel } => format!("tunnel {}", c.wireguard[tunnel].name),
            RouteTarget::Esp { tunnel } => format!("esp {}", c.esps[tunnel].name),
            RouteTarget::Blackhole => "blackhole".to_string(),
        };
        let _ = writeln!(out, "route {}: {target}", r.prefix);
    }
    for v in &c.vxlans {
        let _ = writeln!(
            out,
            "vxlan {}: vni {}, {} -> {} udp port {}, inner mtu {} (the path carries at most {})",
            v.name, v.vni, v.local, v.remote, v.udp_port, v.mtu, v.max_mtu
        );
    }
    for e in &c.esps {
        let ts = |v: &[super::Prefix]| {
            v.iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        };
        let how = match (&e.ike, e.udp_port) {
            (Some(_), _) => "on IP or in UDP port 4500 (NAT detection)".to_string(),
            (None, Some(p)) => format!("in UDP port {p}"),
            (None, None) => "on IP".to_string(),
        };
        let _ = writeln!(
            out,
            "esp {}: {} -> {} {}, inner mtu {}, local ts {}, remote ts {}",
            e.name,
            e.local,
            if e.remote.is_unspecified() {
                "any peer".to_string()
            } else {
                e.remote.to_string()
            },
            how,
            e.mtu,
            ts(&e.local_ts),
            ts(&e.remote_ts)
        );
        let sa = |dir: &str, s: &super::SaConfig| {
            format!(
                "  {dir} spi {:#010x} {}{}, key {}",
                s.spi,
                s.algorithm,
                if s.esn { " esn" } else { "" },
                s.key_file.display()
            )
        };
        if let Some(o) = &e.outbound {
            let _ = writeln!(out, "{}", sa("out", o));
        }
        for i in &e.inbound {
            let _ = writeln!(out, "{}, replay window {}", sa("in", i), i.replay_window);
        }
        if let Some(k) = &e.ike {
            let _ = writeln!(
                out,
                "  ike: {}, {}, {}{}, dpd {}, nat keepalive {}",
                if k.start { "initiates" } else { "responds" },
                k.auth.describe(),
                if k.encap { "UDP forced, " } else { "" },
                format_args!(
                    "proposals {}, esp {}",
                    k.proposals.join(" "),
                    k.esp_proposals.join(" ")
                ),
                seconds_or_off(k.dpd_delay),
                seconds_or_off(k.nat_keepalive)
            );
        }
    }
    for o in &c.openvpns {
        let pools: Vec<String> = [o.pool, o.pool6]
            .into_iter()
            .flatten()
            .map(|p| p.to_string())
            .collect();
        let _ = writeln!(
            out,
            "openvpn {}: udp port {}, {}, pools {}, pushes {}, ciphers {}, reneg {}, keepalive {}s/{}s, mtu {}",
            o.name,
            o.listen_port,
            o.protection.describe(),
            pools.join(" "),
            if o.push_routes.is_empty() {
                "no routes".to_string()
            } else {
                o.push_routes
                    .iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            },
            o.ciphers
                .iter()
                .map(|c| c.name())
                .collect::<Vec<_>>()
                .join(":"),
            seconds_or_off(o.reneg_sec),
            o.ping,
            o.ping_restart,
            o.mtu
        );
    }
    let name = |e: L2Endpoint| match e {
        L2Endpoint::Port(i) => format!("port {}", c.ports[i].name),
        L2Endpoint::Vxlan(i) => format!("vxlan {}", c.vxlans[i].name),
    };
    for x in &c.xconnects {
        let _ = writeln!(out, "xconnect {} -> {}", name(x.from), name(x.to));
    }
    out
}

/// A period of seconds as the summary says it: "30s", or "off" for 0.
fn seconds_or_off(n: u32) -> String {
    if n == 0 {
        "off".to_string()
    } else {
        format!("{n}s")
    }
}
