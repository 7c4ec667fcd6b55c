//! `linerate bench --tunnel esp --alg ALG`: the gateway's ESP path in memory,
//! beside the same gateway's WireGuard path and the raw engine of ALG, all in the
//! same run. Two gateways on one thread (`gateway_l2`'s pair): A routes IPv4 packets
//! from its LAN port into the tunnel (`ip-lookup`, `esp-encrypt` or `wg-encrypt`,
//! the outer packet routed out of the WAN port), the harness carries the frames to
//! B's WAN port, where B opens them (`ip-local`, `esp-decrypt` or `wg-decrypt`,
//! `tunnel-input`, the IP checks) and routes them out of its LAN port to a host.
//!
//! Counted as `linerate bench` counts: packet operations (each packet is encrypted
//! once and decrypted once) times the inner size, so that graph/raw is the share of
//! the engine's speed the whole path keeps.

use crate::gateway_l2::{Path, drive, median, mpps, pair};
use crate::measure::{self, IMIX, Size};
use ipsec::EspAlgorithm;
use runtime::engines;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct EspRow {
    pub size: Size,
    /// Delivered packets per second (millions), each encrypted and decrypted once.
    pub esp_mpps: f64,
    pub wg_mpps: f64,
    /// Packet operations (two per packet) times the inner size.
    pub esp_gbps: f64,
    pub wg_gbps: f64,
    /// The same, over the time spent in the tunnel's two crypto nodes alone (A's
    /// encrypt, B's decrypt): what the tunnel's nodes keep of the engine's speed,
    /// without the rest of the two gateways' paths.
    pub esp_nodes_gbps: f64,
    pub wg_nodes_gbps: f64,
    /// The raw engine of ALG at this size (IMIX: a 7:4:1 mix), operations per second
    /// times the size.
    pub raw_gbps: f64,
    /// The engines ALG ran on at this size.
    pub engine: String,
}

/// Packet operations (two per packet: sealed by A, opened by B) times the inner
/// size, per second.
fn op_gbps(m: &measure::Measured) -> f64 {
    2.0 * m.bytes as f64 * 8.0 / m.elapsed.as_secs_f64() / 1e9
}

/// The same over the time of A's `encrypt` and B's `decrypt` node alone (their
/// TSC clocks per packet, the TSC's rate from the run).
fn nodes_gbps(m: &measure::Measured, encrypt: &str, decrypt: &str) -> f64 {
    let clocks = |name: &str| {
        m.nodes
            .iter()
            .find(|(n, _)| n == name)
            .map_or(f64::NAN, |(_, c)| *c)
    };
    let per_packet = clocks(&format!("a {encrypt}")) + clocks(&format!("b {decrypt}"));
    let tsc_hz = m.clocks as f64 / m.elapsed.as_secs_f64();
    let mean = m.bytes as f64 / m.packets.max(1) as f64;
    2.0 * mean * 8.0 * tsc_hz / per_packet / 1e9
}

/// The engine `engines` chose for `alg` at each size of `size`, run alone on one
/// core on the pair's crypto (each op sealed and opened): Gbit/s of operations, and
/// the engines' names.
fn raw(
    engines: &crypto::EngineSet,
    alg: crypto::Algorithm,
    size: Size,
    seconds: f64,
) -> Result<(f64, String), String> {
    let time = Duration::from_secs_f64(seconds.max(0.01) / 3.0);
    let mix: Vec<(usize, u32)> = match size {
        Size::Fixed(n) => vec![(n, 1)],
        Size::Imix => IMIX.to_vec(),
    };
    let (mut secs, mut bits) = (0.0, 0.0);
    let mut names: Vec<String> = Vec::new();
    for (n, weight) in mix {
        let name = engines
            .chosen_for(alg, n as u32)
            .ok_or("no engine for it")?;
        if !names.iter().any(|m| m == name) {
            names.push(name.to_string());
        }
        let mut e = engines::all(&Arc::new(crypto::KeyRegistry::new(4)))
            .into_iter()
            .find(|e| e.name() == name)
            .ok_or_else(|| format!("engine {name} vanished"))?;
        // Sealed and opened again, with the AAD of the pair's SAs (SPI and a 64-bit
        // sequence number: they use ESN), as `linerate bench` measures its raw engine.
        let m = crypto::round_trip::measure(e.as_mut(), alg, n, 12, time)
            .ok_or_else(|| format!("{name} failed the raw measurement at {n} bytes"))?;
        secs += f64::from(weight) / (m.mpps * 1e6);
        bits += (weight as usize * n * 8) as f64;
    }
    Ok((bits / secs / 1e9, names.join("+")))
}

/// Every size: ESP, WireGuard and the raw engine in turns, `repeat` times; the
/// median of each.
pub fn run(
    engine: Option<&str>,
    alg: EspAlgorithm,
    sizes: &[Size],
    seconds: f64,
    repeat: usize,
) -> Result<Vec<EspRow>, String> {
    let mut rows = Vec::new();
    for &size in sizes {
        let (mut esp, mut wg, mut raws) = (Vec::new(), Vec::new(), Vec::new());
        let (mut esp_g, mut wg_g) = (Vec::new(), Vec::new());
        let (mut esp_n, mut wg_n) = (Vec::new(), Vec::new());
        let mut engine_name = String::new();
        for _ in 0..repeat.max(1) {
            let (mut a, mut b) = pair(engine, alg)?;
            let m = drive(&mut a, &mut b, Path::Esp, size, seconds)?;
            esp.push(mpps(&m));
            esp_g.push(op_gbps(&m));
            esp_n.push(nodes_gbps(&m, "esp-encrypt", "esp-decrypt"));
            let m = drive(&mut a, &mut b, Path::Routed, size, seconds)?;
            wg.push(mpps(&m));
            wg_g.push(op_gbps(&m));
            wg_n.push(nodes_gbps(&m, "wg-encrypt", "wg-decrypt"));
            let (g, name) = raw(a.engines(), alg.aead(), size, seconds)?;
            raws.push(g);
            engine_name = name;
        }
        rows.push(EspRow {
            size,
            esp_mpps: median(esp),
            wg_mpps: median(wg),
            esp_gbps: median(esp_g),
            wg_gbps: median(wg_g),
            esp_nodes_gbps: median(esp_n),
            wg_nodes_gbps: median(wg_n),
            raw_gbps: median(raws),
            engine: engine_name,
        });
    }
    Ok(rows)
}

pub fn table(rows: &[EspRow]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<8} {:>8} {:>8} {:>8} {:>8} {:>7} {:>8} {:>8} {:>8} {:>9} {:>9}  engine",
        "size",
        "ESP Mpps",
        "ESP Gb/s",
        "WG Mpps",
        "WG Gb/s",
        "ESP/WG",
        "raw Gb/s",
        "ESP/raw",
        "nodes:",
        "ESP/raw",
        "ESP/WG"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:<8} {:>8.3} {:>8.2} {:>8.3} {:>8.2} {:>6.2}x {:>8.2} {:>8.2} {:>8} {:>9.2} {:>8.2}x  {}",
            r.size.label(),
            r.esp_mpps,
            r.esp_gbps,
            r.wg_mpps,
            r.wg_gbps,
            r.esp_mpps / r.wg_mpps,
            r.raw_gbps,
            r.esp_gbps / r.raw_gbps,
            "",
            r.esp_nodes_gbps / r.raw_gbps,
            r.esp_nodes_gbps / r.wg_nodes_gbps,
            r.engine
        );
    }
    out
}

pub fn json(rows: &[EspRow], alg: EspAlgorithm, seconds: f64, repeat: usize) -> serde_json::Value {
    serde_json::json!({
        "machine": measure::machine(),
        "tunnel": "esp",
        "alg": alg.name(),
        "workers": 1,
        "seconds_per_size": seconds,
        "rounds": repeat,
        "counted": "packet operations (each packet encrypted once and decrypted once) x inner IPv4 packet size; raw: the engine alone, each op sealed and opened, operations x size",
        "results": rows.iter().map(|r| serde_json::json!({
            "size": r.size.label(),
            "mpps": r.esp_mpps,
            "gbps": r.esp_gbps,
            "wireguard_mpps": r.wg_mpps,
            "wireguard_gbps": r.wg_gbps,
            "over_wireguard": r.esp_mpps / r.wg_mpps,
            "raw_gbps": r.raw_gbps,
            "graph_over_raw": r.esp_gbps / r.raw_gbps,
            "nodes_gbps": r.esp_nodes_gbps,
            "wireguard_nodes_gbps": r.wg_nodes_gbps,
            "nodes_over_raw": r.esp_nodes_gbps / r.raw_gbps,
            "nodes_over_wireguard_nodes": r.esp_nodes_gbps / r.wg_nodes_gbps,
            "engine": r.engine,
        })).collect::<Vec<_>>(),
    })
}
