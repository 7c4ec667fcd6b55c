//! `linerate show`: what a running interface counts, and what the engines measure here.

use super::counter_report::CounterReport;
use std::path::Path;

/// Prints what a gateway's control socket answers to `linerate-show=WHAT`.
pub fn gateway(socket: &Path, what: &str) -> Result<(), String> {
    let text = super::client::ask_at(socket, &format!("linerate-show={what}\n"))?;
    match text.rsplit_once("errno=") {
        Some((body, errno)) if errno.trim() == "0" => print_all(body),
        _ => Err(format!(
            "{}: the gateway did not answer `show {what}`: {}",
            socket.display(),
            text.trim()
        )),
    }
}

/// Writes `text` to stdout. A reader that stopped early (`| head`, `| grep -q`) is
/// no error: what it did not read was not wanted.
fn print_all(text: &str) -> Result<(), String> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(format!("writing to stdout: {e}"))
        }
        _ => Ok(()),
    }
}

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

/// Prints every drop counter that is not zero, most first: count, node, reason and
/// what the reason means (VPP's `show errors`).
pub fn errors(text: &str) -> Result<(), String> {
    let report = CounterReport::parse(text)?;
    let mut rows: Vec<(u64, &str, &str)> = report
        .nodes
        .iter()
        .flat_map(|n| {
            n.drops
                .iter()
                .filter(|(_, v)| *v > 0)
                .map(move |(r, v)| (*v, n.name.as_str(), r.as_str()))
        })
        .collect();
    rows.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)).then(a.2.cmp(b.2)));
    println!("{:>12}  {:<16} {:<20} meaning", "count", "node", "reason");
    for (count, node, reason) in &rows {
        let meaning = dataplane::wg::explain(node, reason)
            .or_else(|| dataplane::gateway::explain(node, reason))
            .or_else(|| dataplane::seal_ledger::explain(node, reason))
            .or_else(|| dataplane::esp_handoff::explain(node, reason))
            .or_else(|| {
                node.starts_with("port-")
                    .then(|| io::port_drops::meaning(reason))
                    .flatten()
            })
            .unwrap_or("");
        println!("{count:>12}  {node:<16} {reason:<20} {meaning}");
    }
    if rows.is_empty() {
        println!("{:>12}  no packet dropped", 0);
    }
    Ok(())
}

/// `linerate show crypto`: every engine measured here at the size of every size
/// class, and the choice per algorithm and class.
pub fn crypto(seconds: f64) -> Result<(), String> {
    use crypto::size_class::{self, SIZES};
    let keys = std::sync::Arc::new(crypto::KeyRegistry::new(4));
    let mut set = crypto::EngineSet::new(runtime::engines::all(&keys));
    let ms =
        crypto::calibrate::calibrate(&mut set, std::time::Duration::from_secs_f64(seconds), &[]);
    println!(
        "engines on {}, one core, batches of {} ops, Gbit/s:",
        bench::measure::machine(),
        crypto::calibrate::BATCH
    );
    print!("{:<10} {:<23}", "engine", "algorithm");
    for size in SIZES {
        print!(" {:>9}", format!("{size} B"));
    }
    println!();
    for e in set.engines() {
        for alg in crypto::Algorithm::ALL {
            let g: Option<Vec<String>> = SIZES
                .iter()
                .map(|&size| {
                    ms.iter()
                        .find(|m| m.engine == e.name() && m.alg == alg && m.size == size)
                        .map(|m| format!("{:.2}", m.gbps))
                })
                .collect();
            let Some(g) = g else {
                continue;
            };
            print!("{:<10} {:<23}", e.name(), alg.name());
            for v in g {
                print!(" {v:>9}");
            }
            println!();
        }
    }
    for (name, why) in runtime::engines::unavailable() {
        println!("{name:<10} not available here: {why}");
    }
    println!(
        "chosen per size class (op length in bytes; the engine with the most packets per second at the class's size):"
    );
    print!("{:<34}", "");
    for class in 0..size_class::COUNT {
        let label = match size_class::range(class) {
            (lo, Some(hi)) => format!("{lo}-{hi}"),
            (lo, None) => format!("{lo}+"),
        };
        print!(" {label:>9}");
    }
    println!();
    for alg in crypto::Algorithm::ALL {
        print!("  {:<32}", alg.name());
        for size in SIZES {
            print!(" {:>9}", set.chosen_for(alg, size as u32).unwrap_or("none"));
        }
        println!();
    }
    Ok(())
}
