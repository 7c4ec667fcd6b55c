//! How a measurement is shown: the table printed, each row's scaling over the
//! first worker count, one tunnel's figures over WireGuard's, and the JSON written.

use crate::measure::{Options, Row, Size, machine};
use std::fmt::Write as _;

/// `label`'s Gbit/s over WireGuard's at each point, on one line.
pub(crate) fn comparison(label: &str, rows: &[Row], wg: &[Row]) -> String {
    comparison_with(label, "WireGuard", rows, wg)
}

/// Each point's Gbit/s of `rows` over that of `base`, the same point.
pub(crate) fn comparison_with(label: &str, base_label: &str, rows: &[Row], base: &[Row]) -> String {
    let mut out = format!("{label} over {base_label}, Gbit/s:");
    for (e, w) in rows.iter().zip(base) {
        let _ = write!(
            out,
            " {}w {}: {:.2}x;",
            e.workers,
            e.size.label(),
            e.gbps / w.gbps
        );
    }
    out.pop();
    out.push('\n');
    out
}

/// How many times the first worker count's figure at the same size each row is
/// (1.0 for the first worker count itself).
pub fn scaling(rows: &[Row]) -> Vec<f64> {
    let first = rows.first().map_or(0, |r| r.workers);
    rows.iter()
        .map(|r| {
            rows.iter()
                .find(|b| b.workers == first && b.size == r.size)
                .map_or(f64::NAN, |b| r.mpps / b.mpps)
        })
        .collect()
}

pub fn table(rows: &[Row]) -> String {
    let mut out = String::new();
    let names: Vec<&str> = rows
        .first()
        .map(|r| r.nodes.iter().map(|n| n.0.as_str()).collect())
        .unwrap_or_default();
    let _ = write!(
        out,
        "{:>7} {:>5} {:>6} {:>9} {:>9} {:>7} {:>9} {:>10} {:>9} {:>11} {:>9} {:>7} {:>7} {:>9} {:>12}",
        "workers",
        "peers",
        "size",
        "Mpps",
        "Gbit/s",
        "x base",
        "raw Gb/s",
        "graph/raw",
        "seal-only",
        "clk/pkt",
        "peak MiB",
        "late",
        "rx-late",
        "resealed",
        "engine"
    );
    for n in &names {
        let _ = write!(out, " {:>11}", n);
    }
    out.push('\n');
    for (r, x) in rows.iter().zip(scaling(rows)) {
        let _ = write!(
            out,
            "{:>7} {:>5} {:>6} {:>9.3} {:>9.3} {:>7.2} {:>9.3} {:>10.2} {:>9.3} {:>11.1} {:>9.1} {:>7} {:>7} {:>9} {:>12}",
            r.workers,
            r.peers,
            r.size.label(),
            r.mpps,
            r.gbps,
            x,
            r.raw_gbps,
            r.graph_over_raw,
            r.raw_seal_gbps,
            r.clocks_per_packet,
            r.peak_rss_kib as f64 / 1024.0,
            r.late,
            r.rx_late,
            r.resealed,
            r.engine
        );
        for n in &r.nodes {
            let _ = write!(out, " {:>11.1}", n.1);
        }
        out.push('\n');
    }
    out
}

pub fn json(opts: &Options, rows: &[Row]) -> serde_json::Value {
    let results: Vec<serde_json::Value> = rows
        .iter()
        .zip(scaling(rows))
        .map(|(r, x)| {
            let size = match r.size {
                Size::Fixed(n) => serde_json::json!(n),
                Size::Imix => serde_json::json!("imix"),
            };
            let nodes: serde_json::Map<String, serde_json::Value> = r
                .nodes
                .iter()
                .map(|(n, c)| (n.clone(), serde_json::json!(c)))
                .collect();
            serde_json::json!({
                "workers": r.workers,
                "peers": r.peers,
                "size": size,
                "mpps": r.mpps,
                "over_first_worker_count": x,
                "late_replays": r.late,
                "rx_late_replays": r.rx_late,
                "resealed": r.resealed,
                "gbps": r.gbps,
                "clocks_per_packet": r.clocks_per_packet,
                "node_clocks_per_packet": nodes,
                "peak_rss_kib": r.peak_rss_kib,
                "engine": r.engine,
                "chacha_engine": r.engine,
                "raw_engine_gbps": r.raw_gbps,
                "raw_engine_seal_only_gbps": r.raw_seal_gbps,
                "graph_over_raw_per_worker": r.graph_over_raw,
            })
        })
        .collect();
    serde_json::json!({
        "machine": machine(),
        "engine": rows.first().map(|r| r.choice.clone()).unwrap_or_default(),
        "engine_choice": opts.engine.clone().unwrap_or_else(|| "calibrated".into()),
        "workers": opts.workers,
        "peers": opts.peers.label(),
        "spread": opts.spread,
        "seconds_per_size": opts.seconds,
        "repeat_median_of": opts.repeat,
        "counted": "packet operations (encryptions plus decryptions) times the inner packet size",
        "results": results,
    })
}
