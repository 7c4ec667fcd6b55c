//! The ESP tunnels and their SAs as `linerate show esp` and the metrics tell them.
//! SA state is shared by every worker (atomics in the SA), so the owner's table
//! tells it whole.

use dataplane::Context;
use dataplane::esp::{InboundSa, OutboundSa, SaCounters};
use std::fmt::Write as _;
use std::sync::atomic::Ordering;

/// One SA's row: its tunnel, direction, SPI and counters.
pub struct SaRow {
    pub tunnel: String,
    pub direction: &'static str,
    pub spi: u32,
    pub algorithm: &'static str,
    pub esn: bool,
    pub packets: u64,
    pub bytes: u64,
    pub replayed: u64,
    pub too_old: u64,
    pub icv_failed: u64,
    pub expired: u64,
    pub seq_exhausted: u64,
    /// Outbound: the next sequence number; inbound: the replay window.
    pub detail: String,
}

/// What both directions' SAs have.
struct SaParts<'a> {
    spi: u32,
    algorithm: &'static str,
    esn: bool,
    usage: &'a ipsec::Usage,
    counters: &'a SaCounters,
}

/// A row's parts from an outbound or an inbound SA, which name them alike.
macro_rules! sa_parts {
    ($sa:expr) => {
        SaParts {
            spi: $sa.spi,
            algorithm: $sa.alg().name(),
            esn: $sa.esn,
            usage: &$sa.usage,
            counters: &$sa.counters,
        }
    };
}

fn row(tunnel: &str, direction: &'static str, sa: SaParts<'_>, detail: String) -> SaRow {
    let get = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let c = sa.counters;
    SaRow {
        tunnel: tunnel.to_string(),
        direction,
        spi: sa.spi,
        algorithm: sa.algorithm,
        esn: sa.esn,
        packets: sa.usage.packets(),
        bytes: sa.usage.bytes(),
        replayed: get(&c.replayed),
        too_old: get(&c.too_old),
        icv_failed: get(&c.icv_failed),
        expired: get(&c.expired),
        seq_exhausted: get(&c.seq_exhausted),
        detail,
    }
}

/// An outbound SA's row; `direction` is "out" for the one sealing, "standby" for
/// one installed beside it.
fn outbound(tunnel: &str, direction: &'static str, sa: &OutboundSa) -> SaRow {
    let parts = sa_parts!(sa);
    let detail = with_lifetime(format!("next seq {}", sa.next_seq()), &sa.lifetime);
    row(tunnel, direction, parts, detail)
}

fn inbound(tunnel: &str, sa: &InboundSa) -> SaRow {
    let parts = sa_parts!(sa);
    let window = match sa.replay_window() {
        0 => "replay check off".to_string(),
        n => format!("replay window {n}"),
    };
    row(tunnel, "in", parts, with_lifetime(window, &sa.lifetime))
}

/// `detail`, and the SA's lifetime after it if it has one.
fn with_lifetime(detail: String, l: &ipsec::Lifetime) -> String {
    if l.bytes.is_none() && l.packets.is_none() {
        return detail;
    }
    let mut parts = Vec::new();
    if let Some(b) = l.bytes {
        parts.push(format!("{b} bytes"));
    }
    if let Some(p) = l.packets {
        parts.push(format!("{p} packets"));
    }
    format!("{detail}, lifetime {}", parts.join(", "))
}

/// Every SA of every ESP tunnel: each tunnel's outbound SA, those standing by,
/// then its inbound ones.
pub fn rows(cx: &Context) -> Vec<SaRow> {
    let esp = cx.esp();
    let mut out = Vec::new();
    for (id, t) in esp.iter() {
        if let Some(sa) = t.outbound() {
            out.push(outbound(&t.name, "out", sa));
        }
        for sa in t.standby() {
            out.push(outbound(&t.name, "standby", sa));
        }
        for (_, sa) in esp.inbound_sas().filter(|(tid, _)| *tid == id) {
            out.push(inbound(&t.name, sa));
        }
    }
    out
}

/// `linerate show esp`: each tunnel, then its SAs with their counters.
pub fn show(cx: &Context) -> String {
    let mut out = String::new();
    let rows = rows(cx);
    for (_, t) in cx.esp().iter() {
        let encap = match t.encap {
            dataplane::esp::Encapsulation::None => "esp".to_string(),
            dataplane::esp::Encapsulation::Udp {
                local_port,
                remote_port,
            } => format!("udp {local_port} -> {remote_port}"),
        };
        let ts = |v: &[lpm::Prefix]| {
            v.iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        };
        let _ = writeln!(
            out,
            "{} (esp) {} -> {} {encap} mtu {}\n  local ts {}\n  remote ts {}",
            t.name,
            t.local,
            t.remote,
            t.mtu,
            ts(&t.local_ts),
            ts(&t.remote_ts)
        );
        if t.outbound().is_none() {
            let _ = writeln!(out, "  out: no SA (packets routed here are dropped, no-sa)");
        }
        for r in rows.iter().filter(|r| r.tunnel == t.name) {
            let _ = writeln!(
                out,
                "  {} spi {:#010x} {}{}: {} packets {} bytes, {}\n    replayed {}, too old {}, icv failed {}, expired {}, seq exhausted {}",
                r.direction,
                r.spi,
                r.algorithm,
                if r.esn { " esn" } else { "" },
                r.packets,
                r.bytes,
                r.detail,
                r.replayed,
                r.too_old,
                r.icv_failed,
                r.expired,
                r.seq_exhausted,
            );
        }
    }
    if out.is_empty() {
        out.push_str("no ESP tunnels\n");
    }
    out
}
