//! `linerate show`: what a running interface counts, and what the engines measure here.

/// Prints the `node.counter=value` lines a running interface answers as one row per
/// node, its drops listed after it; other counters one per line.
pub fn print_counters(text: &str) {
    // node.counter=value lines; show one row per node with drops listed after it.
    let mut rows: Vec<(String, Vec<(String, String)>)> = Vec::new();
    for line in text.lines() {
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        if k == "errno" {
            continue;
        }
        let (node, what) = k.split_once('.').unwrap_or((k, ""));
        match rows.last_mut() {
            Some((n, items)) if n == node => items.push((what.into(), v.into())),
            _ => rows.push((node.into(), vec![(what.into(), v.into())])),
        }
    }
    println!(
        "{:<12} {:>10} {:>10} {:>12} {:>10}  drops",
        "node", "vectors", "packets", "clocks/pkt", "consumed"
    );
    for (node, items) in rows {
        let get = |k: &str| {
            items
                .iter()
                .find(|(w, _)| w == k)
                .map(|(_, v)| v.parse::<u64>().unwrap_or(0))
        };
        let (Some(vectors), Some(packets)) = (get("vectors"), get("packets")) else {
            for (w, v) in items {
                println!("{node}.{w} = {v}");
            }
            continue;
        };
        let clocks = get("clocks").unwrap_or(0);
        let per = if packets > 0 {
            clocks as f64 / packets as f64
        } else {
            0.0
        };
        let drops: Vec<String> = items
            .iter()
            .filter_map(|(w, v)| w.strip_prefix("drop.").map(|r| format!("{r}={v}")))
            .collect();
        println!(
            "{node:<12} {vectors:>10} {packets:>10} {per:>12.1} {:>10}  {}",
            get("consumed").unwrap_or(0),
            drops.join(" ")
        );
    }
}

/// `linerate show crypto`: every engine measured here, and the choice per algorithm.
pub fn crypto(seconds: f64) -> Result<(), String> {
    let keys = std::sync::Arc::new(crypto::KeyRegistry::new(4));
    let mut set = crypto::EngineSet::new(crate::engines::all(&keys));
    let ms =
        crypto::calibrate::calibrate(&mut set, std::time::Duration::from_secs_f64(seconds), &[]);
    println!(
        "engines on {}, one core, batches of {} ops:",
        crate::bench::machine(),
        crypto::calibrate::BATCH
    );
    println!(
        "{:<10} {:<18} {:>14} {:>14} {:>14}",
        "engine", "algorithm", "64 B Gbit/s", "570 B Gbit/s", "1518 B Gbit/s"
    );
    for e in set.engines() {
        for alg in crypto::Algorithm::ALL {
            let g = |size: usize| {
                ms.iter()
                    .find(|m| m.engine == e.name() && m.alg == alg && m.size == size)
                    .map(|m| format!("{:.2}", m.gbps))
            };
            let (Some(a), Some(b), Some(c)) = (g(64), g(570), g(1518)) else {
                continue;
            };
            println!(
                "{:<10} {:<18} {a:>14} {b:>14} {c:>14}",
                e.name(),
                alg.name()
            );
        }
    }
    for (name, why) in crate::engines::unavailable() {
        println!("{name:<10} not available here: {why}");
    }
    println!("chosen (cheapest for an IMIX 7:4:1 mix of 64, 570, 1518 bytes):");
    for alg in crypto::Algorithm::ALL {
        println!("  {:<18} {}", alg.name(), set.chosen(alg).unwrap_or("none"));
    }
    Ok(())
}
