//! `linerate bench crypto`: raw throughput of every engine on every algorithm it serves
//! (the AEADs, and AES-CBC with HMAC laid out as ESP runs it: see
//! [`crypto::calibrate::measure`]), one core, batches of one graph frame, and
//! `openssl speed -evp` at the same sizes in the same run when openssl is installed
//! (a baseline measured beside ours, not a published figure).

use crate::measure::{IMIX, Size, machine};
use crypto::Algorithm;
use crypto::calibrate::{Measurement, measure};
use runtime::engines;
use std::fmt::Write as _;
use std::process::Command;
use std::time::Duration;

pub use crate::measure::DEFAULT_SIZES;

#[derive(Clone, Debug)]
pub struct Row {
    pub engine: String,
    pub alg: Algorithm,
    pub size: Size,
    pub mpps: f64,
    pub gbps: f64,
}

/// IMIX from fixed-size measurements: the time for 7+4+1 packets of 64/570/1518.
fn imix_row(engine: &mut dyn crypto::Engine, alg: Algorithm, time: Duration) -> Option<(f64, f64)> {
    let mut secs = 0.0;
    let mut bytes = 0.0;
    let mut count = 0.0;
    for (size, weight) in IMIX {
        let m: Measurement = measure(engine, alg, size, time)?;
        secs += weight as f64 / (m.mpps * 1e6);
        bytes += (weight as usize * size) as f64;
        count += weight as f64;
    }
    Some((count / secs / 1e6, bytes * 8.0 / secs / 1e9))
}

/// The names in a comma-separated list, each checked against `known`: an unknown
/// name is refused, naming it and what is known, rather than measuring nothing; a
/// name given twice counts once.
pub fn pick<T: Copy + PartialEq>(
    list: &str,
    what: &str,
    known: &[(&str, T)],
) -> Result<Vec<T>, String> {
    let mut picked = Vec::new();
    for name in list.split(',').map(str::trim) {
        let Some(&(_, t)) = known.iter().find(|(n, _)| *n == name) else {
            let names: Vec<&str> = known.iter().map(|(n, _)| *n).collect();
            return Err(format!(
                "no {what} named {name:?} (have: {})",
                names.join(", ")
            ));
        };
        if !picked.contains(&t) {
            picked.push(t);
        }
    }
    Ok(picked)
}

/// Every engine (or those named) on every algorithm in `algs` it serves at every
/// size.
///
/// At each point the engines take turns, `repeat` times, and each keeps the median
/// of its turns: on a shared machine a burst of other work then spoils one turn of
/// one engine, not the ratio between two (measured one engine after another, the
/// ratio moved by a third between runs on a noisy virtual machine).
pub fn run(
    engine_names: Option<&[&str]>,
    algs: &[Algorithm],
    sizes: &[Size],
    seconds: f64,
    repeat: usize,
) -> Result<Vec<Row>, String> {
    let time = Duration::from_secs_f64(seconds);
    let keys = std::sync::Arc::new(crypto::KeyRegistry::new(4));
    let mut engines: Vec<Box<dyn crypto::Engine>> = engines::all(&keys)
        .into_iter()
        .filter(|e| engine_names.is_none_or(|n| n.contains(&e.name())))
        .collect();
    // turns[engine][alg][size]: (Mpps, Gbit/s) of every turn.
    let mut turns = vec![vec![vec![Vec::new(); sizes.len()]; algs.len()]; engines.len()];
    for (a, &alg) in algs.iter().enumerate() {
        for (s, &size) in sizes.iter().enumerate() {
            for _ in 0..repeat.max(1) {
                for (e, engine) in engines.iter_mut().enumerate() {
                    if !engine.supports(alg) {
                        continue;
                    }
                    let got = match size {
                        Size::Fixed(n) => {
                            measure(engine.as_mut(), alg, n, time).map(|m| (m.mpps, m.gbps))
                        }
                        Size::Imix => imix_row(engine.as_mut(), alg, time / 3),
                    };
                    let got = got.ok_or_else(|| {
                        format!("{} failed on {alg} at {}", engine.name(), size.label())
                    })?;
                    turns[e][a][s].push(got);
                }
            }
        }
    }
    let mut rows = Vec::new();
    for (e, engine) in engines.iter().enumerate() {
        for (a, &alg) in algs.iter().enumerate() {
            for (s, &size) in sizes.iter().enumerate() {
                let t = &mut turns[e][a][s];
                if t.is_empty() {
                    continue;
                }
                t.sort_by(|x, y| x.0.total_cmp(&y.0));
                let (mpps, gbps) = t[t.len() / 2];
                rows.push(Row {
                    engine: engine.name().to_string(),
                    alg,
                    size,
                    mpps,
                    gbps,
                });
            }
        }
    }
    Ok(rows)
}

/// Our multi-buffer engine over each other engine, per algorithm it serves and
/// size, from the same run's rows (empty when `mb` was not measured).
pub fn mb_over_others(rows: &[Row]) -> String {
    let mpps = |engine: &str, alg: Algorithm, size: Size| {
        rows.iter()
            .find(|r| r.engine == engine && r.alg == alg && r.size == size)
            .map(|r| r.mpps)
    };
    let mut others: Vec<&str> = Vec::new();
    for r in rows {
        if r.engine != crypto_mb::MbEngine::NAME
            && !others.contains(&r.engine.as_str())
            && mpps(crypto_mb::MbEngine::NAME, r.alg, r.size).is_some()
        {
            others.push(&r.engine);
        }
    }
    let mut out = String::new();
    if others.is_empty() {
        return out;
    }
    let _ = write!(out, "{:<23} {:>6}", "mb over (Mpps)", "size");
    for o in &others {
        let _ = write!(out, " {o:>9}");
    }
    out.push('\n');
    for r in rows
        .iter()
        .filter(|r| r.engine == crypto_mb::MbEngine::NAME)
    {
        let _ = write!(out, "{:<23} {:>6}", r.alg.name(), r.size.label());
        for o in &others {
            match mpps(o, r.alg, r.size) {
                Some(m) => write!(out, " {:>8.2}x", r.mpps / m),
                None => write!(out, " {:>9}", "-"),
            }
            .expect("writing to a string");
        }
        out.push('\n');
    }
    out
}

/// `openssl speed -evp ALG -bytes N` for each fixed size, if openssl runs here.
///
/// The AEADs only. openssl's ciphers of the chained algorithms' names
/// (`aes-128-cbc-hmac-sha1` and the like) are TLS's stitched MAC-then-encrypt
/// ciphers: outside a TLS record they run one hash over everything a run feeds
/// them, with no HMAC per packet (here `openssl speed` gave HMAC-SHA-256 at 1420
/// bytes faster than SHA-256 alone runs), so their figures would stand beside ours
/// as if they were the same work, which they are not.
pub fn openssl(algs: &[Algorithm], sizes: &[Size], seconds: f64) -> Vec<Row> {
    let mut rows = Vec::new();
    let secs = seconds.ceil().max(1.0) as u32;
    for &alg in algs.iter().filter(|a| !a.is_chained()) {
        for &size in sizes {
            let Size::Fixed(n) = size else { continue };
            let out = Command::new("openssl")
                .args([
                    "speed",
                    "-evp",
                    alg.name(),
                    "-bytes",
                    &n.to_string(),
                    "-seconds",
                    &secs.to_string(),
                ])
                .output();
            let Ok(out) = out else { return rows };
            // The last line reads: "<alg> <N>k" in 1000s of bytes per second.
            let text = String::from_utf8_lossy(&out.stdout);
            let Some(kbps) = text
                .lines()
                .rev()
                .find(|l| l.to_lowercase().starts_with(alg.name()))
                .and_then(|l| l.split_whitespace().last())
                .and_then(|v| v.trim_end_matches('k').parse::<f64>().ok())
            else {
                continue;
            };
            let bps = kbps * 1000.0;
            rows.push(Row {
                engine: "openssl".into(),
                alg,
                size,
                mpps: bps / n as f64 / 1e6,
                gbps: bps * 8.0 / 1e9,
            });
        }
    }
    rows
}

pub fn table(rows: &[Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<10} {:<23} {:>6} {:>9} {:>9}",
        "engine", "algorithm", "size", "Mpps", "Gbit/s"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:<10} {:<23} {:>6} {:>9.3} {:>9.3}",
            r.engine,
            r.alg.name(),
            r.size.label(),
            r.mpps,
            r.gbps
        );
    }
    out
}

pub fn json(rows: &[Row], seconds: f64, repeat: usize) -> serde_json::Value {
    let results: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            let size = match r.size {
                Size::Fixed(n) => serde_json::json!(n),
                Size::Imix => serde_json::json!("imix"),
            };
            serde_json::json!({"engine": r.engine, "alg": r.alg.name(), "size": size, "mpps": r.mpps, "gbps": r.gbps})
        })
        .collect();
    serde_json::json!({
        "machine": machine(),
        "cores_used": 1,
        "seconds_per_point": seconds,
        "turns_per_point": repeat,
        "counted": "in-place encryptions of one size, batches of 256 ops (AES-CBC with HMAC: the size padded to whole blocks, an 8-byte header and the IV under the MAC, as ESP; the size is what is counted); imix is 7:4:1 of 64, 570, 1518 bytes",
        "results": results,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_of_names_is_picked_in_order_once_each_and_an_unknown_one_is_named() {
        let known = [("mb", 1), ("ipsecmb", 2), ("aws-lc", 3)];
        assert_eq!(pick("ipsecmb, mb", "engine", &known), Ok(vec![2, 1]));
        assert_eq!(pick("aws-lc", "engine", &known), Ok(vec![3]));
        assert_eq!(pick("mb,aws-lc,mb", "engine", &known), Ok(vec![1, 3]));
        let err = pick("mb,nope", "engine", &known).unwrap_err();
        assert!(
            err.contains("\"nope\"") && err.contains("mb, ipsecmb, aws-lc"),
            "{err}"
        );
        assert!(pick("", "engine", &known).is_err());
    }
}
