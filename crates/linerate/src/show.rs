//! `linerate show`: what a running interface counts, and what the engines measure here.

use crate::counter_report::CounterReport;

/// Prints what a running interface answered as one row per node, its drops by the
/// node's own reason names after it, then the other counters one per line.
pub fn counters(text: &str) -> Result<(), String> {
    let report = CounterReport::parse(text)?;
    println!(
        "{:<16} {:>10} {:>12} {:>10} {:>12} {:>10} {:>10}  drops by reason",
        "node", "calls", "packets", "pkts/call", "clocks/pkt", "consumed", "dropped"
    );
    for n in &report.nodes {
        let per = |a: u64, b: u64| if b > 0 { a as f64 / b as f64 } else { 0.0 };
        let drops: Vec<String> = n
            .drops
            .iter()
            .filter(|(_, v)| *v > 0)
            .map(|(r, v)| format!("{r}={v}"))
            .collect();
        println!(
            "{:<16} {:>10} {:>12} {:>10.1} {:>12.1} {:>10} {:>10}  {}",
            n.name,
            n.calls,
            n.packets,
            per(n.packets, n.calls),
            per(n.clocks, n.packets),
            n.consumed,
            n.dropped(),
            drops.join(" ")
        );
    }
    for (name, v) in &report.other {
        println!("{name} = {v}");
    }
    Ok(())
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
