//! The front ends of `linerate bench` and `linerate bench crypto`: run the measurement,
//! print its table, write JSON and SVG where asked.

use crate::options::{CryptoBench, GraphBench};
use crate::{
    crypto_engines, esp_graph, gateway_esp, gateway_l2, l2_graph, measure, ovpn_graph, svg, table,
    wg_graph,
};
use crypto::Algorithm;
use runtime::engines;

/// `linerate bench`: the whole graph, a table, and optionally JSON and SVG.
pub fn graph(args: &GraphBench) -> Result<(), String> {
    let mut opts = measure::Options {
        workers: args.workers.0.clone(),
        peers: args.peers,
        engine: args.engine.clone(),
        seconds: args.seconds,
        sizes: Vec::new(),
        repeat: args.repeat as usize,
        spread: args.spread,
    };
    let sizes = &args.sizes;
    let (json_path, svg_path) = (args.json.clone(), args.svg.clone());
    opts.sizes = sizes
        .split(',')
        .map(|s| measure::Size::parse(s.trim()))
        .collect::<Result<_, _>>()?;
    engines::parse_choice(opts.engine.as_deref().unwrap_or(""))?;
    if args.l2 {
        return l2(&opts, json_path);
    }
    if args.tunnel == "esp" {
        let alg = crate::options::esp_alg(args.alg.as_deref().unwrap_or("aes128gcm16"))?;
        return esp(&opts, alg, json_path);
    }
    if args.tunnel == "openvpn" {
        let cipher = crate::options::data_cipher(args.alg.as_deref().unwrap_or("aes-256-gcm"))?;
        return openvpn(&opts, cipher, json_path);
    }
    println!(
        "linerate bench: {} worker(s) on {} peer(s){}, engines {}, {} s per size, on {}",
        args.workers
            .0
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        opts.peers.label(),
        if opts.spread {
            ", the first carrying the traffic, the others helping with its frames"
        } else {
            ""
        },
        opts.engine.as_deref().unwrap_or("calibrated"),
        opts.seconds,
        measure::machine()
    );
    println!(
        "counted: packet operations (an encryption or a decryption) x inner size; clocks are TSC ticks per operation; x base: Mpps over the first worker count's at that size; late: packets refused as replays on a shared tunnel; resealed: packets found too far behind as they left and sealed again with fresh counters"
    );
    let rows = wg_graph::run(&opts)?;
    if let Some(r) = rows.first() {
        println!(
            "chacha20-poly1305 ran on {} (op length: inner size padded to 16); raw = the engine of each size alone on one core, sealing and opening each op (seal-only: sealing alone, as bench crypto does); graph/raw is per worker (with --repeat, the median of each run's own ratio)",
            r.choice
        );
    }
    print!("{}", table::table(&rows));
    if let Some(path) = svg_path {
        let series: Vec<svg::Series> = opts
            .workers
            .iter()
            .map(|&w| svg::Series {
                label: format!(
                    "linerate graph, {w} worker(s) on {} peer(s), {}",
                    opts.peers.for_workers(w),
                    opts.engine.as_deref().unwrap_or("default engines")
                ),
                points: rows
                    .iter()
                    .filter(|r| r.workers == w)
                    .filter_map(|r| match r.size {
                        measure::Size::Fixed(n) => Some((n as f64, r.gbps)),
                        measure::Size::Imix => None,
                    })
                    .collect(),
            })
            .collect();
        let title = format!(
            "WireGuard through the whole graph: encrypt + decrypt per packet ({})",
            measure::machine()
        );
        let text = svg::chart(&title, &series, svg::PUBLISHED);
        std::fs::write(&path, text).map_err(|e| format!("{path}: {e}"))?;
        println!("wrote {path}");
    }
    if let Some(path) = json_path {
        write_json(&path, &table::json(&opts, &rows))?;
    }
    Ok(())
}

/// `linerate bench --l2`: the gateway's L2 path beside the plain graph.
fn l2(opts: &measure::Options, json_path: Option<String>) -> Result<(), String> {
    let workers: Vec<String> = opts.workers.iter().map(usize::to_string).collect();
    println!(
        "linerate bench --l2: the L2 graph (l2-xconnect, vxlan-encap, wg-encrypt and back through wg-decrypt, vxlan-decap, l2-xconnect) and the WireGuard graph in turns, {} worker(s), each on its own tunnel, engines {}, {} s per size, median of {}, on {}",
        workers.join(", "),
        opts.engine.as_deref().unwrap_or("calibrated"),
        opts.seconds,
        opts.repeat,
        measure::machine()
    );
    println!(
        "counted: packet operations (an encryption or a decryption) x inner IP packet size (the L2 frame adds its Ethernet header, VXLAN 36 bytes more); clocks are TSC ticks per operation; raw = the engine of each size alone on one core, sealing and opening each op on the text the tunnel seals: for L2 the VXLAN packet padded to 16 (seal-only: the inner size sealed alone, as bench crypto does); graph/raw is per worker (with --repeat, the median of each run's own ratio)"
    );
    let (l2_rows, wg_rows) = l2_graph::turns(opts)?;
    print_beside_wireguard("L2", "L2 over VXLAN over WireGuard", &l2_rows, &wg_rows);
    println!(
        "two gateways in memory on one core (cross-connect, VXLAN, WireGuard, and back), in turns with the plain graph and the same pair routing"
    );
    println!(
        "counted: packets per second, each encrypted once and decrypted once, by inner IP packet size (the L2 frame adds its Ethernet header, VXLAN 36 bytes more)"
    );
    let rows = gateway_l2::run(
        opts.engine.as_deref(),
        &standard_sizes(opts),
        opts.seconds,
        opts.repeat,
    )?;
    print!("{}", gateway_l2::table(&rows));
    if let Some(path) = json_path {
        let mut doc = table::json(opts, &l2_rows);
        doc["path"] = "l2".into();
        doc["counted"] =
            "packet operations (encryptions plus decryptions) times the inner IP packet size"
                .into();
        doc["wireguard"] = table::json(opts, &wg_rows);
        doc["gateway_pair"] = gateway_l2::json(&rows, opts.seconds, opts.repeat);
        write_json(&path, &doc)?;
    }
    Ok(())
}

fn esp(
    opts: &measure::Options,
    alg: ipsec::EspAlgorithm,
    json_path: Option<String>,
) -> Result<(), String> {
    println!(
        "linerate bench --tunnel esp --alg {alg}: the ESP graph (esp-encrypt, esp-decrypt, a tunnel to itself) and the WireGuard graph in turns, {}",
        run_shape(opts, "tunnel(s)")
    );
    println!(
        "{}",
        counted_in_layout(
            ": its AAD, and the text it seals for the inner size, padding and trailer included (seal-only: the inner size sealed alone, as bench crypto does)"
        )
    );
    let (esp_rows, wg_rows) = esp_graph::turns(opts, alg)?;
    print_beside_wireguard("ESP", &format!("ESP, {alg}"), &esp_rows, &wg_rows);
    println!(
        "two gateways in memory on one core (routed into the tunnel, out of the WAN port, into the other gateway and out of its LAN port), ESP and WireGuard in turns"
    );
    println!(
        "counted: packet operations (each packet encrypted once and decrypted once) x inner IPv4 packet size; raw: the engine chosen for {alg} alone, sealing and opening each op, operations x size; ESP/raw is the share the whole path (two gateways) keeps; nodes: the same over the time in the tunnel's encrypt and decrypt nodes alone"
    );
    let rows = gateway_esp::run(
        opts.engine.as_deref(),
        alg,
        &standard_sizes(opts),
        opts.seconds,
        opts.repeat,
    )?;
    print!("{}", gateway_esp::table(&rows));
    if let Some(path) = json_path {
        let mut doc = table::json(opts, &esp_rows);
        doc["tunnel"] = "esp".into();
        doc["alg"] = alg.name().into();
        doc["counted"] =
            "packet operations (encryptions plus decryptions) times the inner packet size".into();
        doc["wireguard"] = table::json(opts, &wg_rows);
        doc["gateway_pair"] = gateway_esp::json(&rows, alg, opts.seconds, opts.repeat);
        write_json(&path, &doc)?;
    }
    Ok(())
}

/// How a tunnel bench runs: its workers on `units`, the engines, the time per
/// size, the repeats, and the machine.
fn run_shape(opts: &measure::Options, units: &str) -> String {
    let workers: Vec<String> = opts.workers.iter().map(usize::to_string).collect();
    format!(
        "{} worker(s) on {} {units}, engines {}, {} s per size, median of {}, on {}",
        workers.join(", "),
        opts.peers.label(),
        opts.engine.as_deref().unwrap_or("calibrated"),
        opts.seconds,
        opts.repeat,
        measure::machine()
    )
}

/// What a tunnel bench beside its raw engine counts; `layout` says what the raw
/// engine seals of the tunnel's layout.
fn counted_in_layout(layout: &str) -> String {
    format!(
        "counted: packet operations (an encryption or a decryption) x inner size; clocks are TSC ticks per operation; raw = the engine of each size alone on one core, sealing and opening each op in the tunnel's layout{layout}; graph/raw is per worker (with --repeat, the median of each run's own ratio)"
    )
}

/// `linerate bench --tunnel openvpn`: the OpenVPN data channel's graph and the
/// ESP graph of the same AEAD, in turns, each beside its raw engine.
fn openvpn(
    opts: &measure::Options,
    cipher: openvpn::DataCipher,
    json_path: Option<String>,
) -> Result<(), String> {
    use openvpn::DataCipher;
    let esp = match cipher {
        DataCipher::Aes128Gcm => ipsec::EspAlgorithm::Aes128Gcm,
        DataCipher::Aes256Gcm => ipsec::EspAlgorithm::Aes256Gcm,
        DataCipher::Chacha20Poly1305 => ipsec::EspAlgorithm::ChaCha20Poly1305,
    };
    println!(
        "linerate bench --tunnel openvpn --alg {}: the OpenVPN data channel's graph (ovpn-encrypt, ovpn-decrypt, a client whose key opens what it seals) and the ESP graph of {esp} in turns, {}",
        cipher.name().to_ascii_lowercase(),
        run_shape(opts, "client(s)/tunnel(s)")
    );
    println!("{}", counted_in_layout(" (its AAD, and the text it seals)"));
    let (ovpn_rows, esp_rows) = ovpn_graph::turns(opts, cipher, esp)?;
    println!("OpenVPN, {}:", cipher.name());
    print!("{}", table::table(&ovpn_rows));
    println!("ESP, {esp}:");
    print!("{}", table::table(&esp_rows));
    print!(
        "{}",
        table::comparison_with("OpenVPN", "ESP", &ovpn_rows, &esp_rows)
    );
    if let Some(path) = json_path {
        let mut doc = table::json(opts, &ovpn_rows);
        doc["tunnel"] = "openvpn".into();
        doc["alg"] = cipher.name().into();
        doc["counted"] =
            "packet operations (encryptions plus decryptions) times the inner packet size".into();
        doc["esp"] = table::json(opts, &esp_rows);
        write_json(&path, &doc)?;
    }
    Ok(())
}

/// `linerate bench crypto`: raw throughput per engine and algorithm, openssl beside.
pub fn crypto(args: &CryptoBench) -> Result<(), String> {
    let (seconds, repeat) = (args.seconds, args.repeat as usize);
    let sizes: Vec<measure::Size> = args
        .sizes
        .split(',')
        .map(|s| measure::Size::parse(s.trim()))
        .collect::<Result<_, _>>()?;
    let engine_names = match &args.engine {
        None => None,
        Some(list) => {
            let known: Vec<(&str, &str)> = engines::names().into_iter().map(|n| (n, n)).collect();
            Some(crypto_engines::pick(list, "engine", &known)?)
        }
    };
    let algs = match &args.alg {
        None => Algorithm::ALL.to_vec(),
        Some(list) => {
            let known = Algorithm::ALL.map(|a| (a.name(), a));
            crypto_engines::pick(list, "algorithm", &known)?
        }
    };
    println!(
        "linerate bench crypto: one core, batches of 256 in-place encryptions, {seconds} s per point, {}, on {}",
        match repeat {
            1 => "one turn per engine".to_string(),
            n => format!("median of {n} turns, the engines taking turns at each point"),
        },
        measure::machine()
    );
    let mut rows = crypto_engines::run(engine_names.as_deref(), &algs, &sizes, seconds, repeat)?;
    // Over the engines that took turns only: openssl runs after them.
    let ratios = crypto_engines::mb_over_others(&rows);
    if !args.no_openssl {
        rows.extend(crypto_engines::openssl(&algs, &sizes, seconds));
    }
    print!("{}", crypto_engines::table(&rows));
    print!("{ratios}");
    if let Some(path) = &args.svg {
        let mut series: Vec<svg::Series> = Vec::new();
        for r in rows.iter() {
            let measure::Size::Fixed(n) = r.size else {
                continue;
            };
            let label = format!("{} {}", r.engine, r.alg.name());
            match series.iter_mut().find(|s| s.label == label) {
                Some(s) => s.points.push((n as f64, r.gbps)),
                None => series.push(svg::Series {
                    label,
                    points: vec![(n as f64, r.gbps)],
                }),
            }
        }
        let title = format!("Raw crypto throughput, one core ({})", measure::machine());
        std::fs::write(path, svg::chart(&title, &series, &[]))
            .map_err(|e| format!("{path}: {e}"))?;
        println!("wrote {path}");
    }
    if let Some(path) = &args.json {
        write_json(path, &crypto_engines::json(&rows, seconds, repeat))?;
    }
    Ok(())
}

/// A graph's table, WireGuard's measured in turns with it, and the one over the
/// other per point.
fn print_beside_wireguard(label: &str, title: &str, rows: &[measure::Row], wg: &[measure::Row]) {
    println!("{title}:");
    print!("{}", table::table(rows));
    println!("WireGuard, chacha20-poly1305:");
    print!("{}", table::table(wg));
    print!("{}", table::comparison(label, rows, wg));
    println!();
}

/// Writes `doc` as pretty JSON to `path` and says so.
fn write_json(path: &str, doc: &serde_json::Value) -> Result<(), String> {
    let text = serde_json::to_string_pretty(doc).map_err(|e| e.to_string())?;
    std::fs::write(path, text + "\n").map_err(|e| format!("{path}: {e}"))?;
    println!("wrote {path}");
    Ok(())
}

/// The sizes the two gateways in memory measure: their ports are standard, so a
/// jumbo size is left out, and said.
fn standard_sizes(opts: &measure::Options) -> Vec<measure::Size> {
    let (fit, left): (Vec<measure::Size>, Vec<measure::Size>) =
        opts.sizes.iter().partition(|s| s.is_standard());
    if !left.is_empty() {
        let left: Vec<String> = left.iter().map(|s| s.label()).collect();
        println!(
            "(the two gateways in memory have standard ports: {} left out there)",
            left.join(", ")
        );
    }
    fit
}
