//! The `linerate` command.

mod bench;
mod bench_crypto;
mod daemon;
mod engines;
mod svg;
mod uapi;
mod worker;

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode, Stdio};

const HELP: &str = "\
linerate: a userspace VPN data plane (WireGuard host mode, a drop-in for wireguard-go)

USAGE:
    linerate [-f|--foreground] [--engine SPEC] IFNAME
        Create the TUN interface IFNAME and serve the WireGuard UAPI socket at
        /var/run/wireguard/IFNAME.sock, so that wg(8) and wg-quick(8) configure it
        (wg-quick: WG_QUICK_USERSPACE_IMPLEMENTATION=linerate). Without --foreground
        it returns once the interface is ready and keeps running in the background.
        It stops on SIGINT or SIGTERM, when the interface is deleted, or when its
        socket file is removed.

    linerate show counters IFNAME
        Per-node packet, vector, clock and drop counters of a running interface.

    linerate show crypto [--seconds S]
        Measures every engine on every algorithm it serves at the calibration
        sizes (64, 570, 1518 bytes; batches of 256) and shows which engine each
        algorithm would get: the one cheapest for an IMIX 7:4:1 mix.

    linerate bench crypto [--engine NAME] [--seconds S] [--sizes LIST]
                          [--json FILE] [--svg FILE] [--no-openssl]
        Raw AEAD throughput of every engine for ChaCha20-Poly1305, AES-128-GCM
        and AES-256-GCM, one core, with `openssl speed -evp` at the same sizes
        measured in the same run when openssl is installed.

    linerate bench [--workers N] [--engine NAME] [--seconds S] [--sizes LIST]
                   [--json FILE] [--svg FILE]
        The whole WireGuard graph in this process, no network: inner IPv4/UDP
        packets of each size are encrypted to a loopback session and decrypted
        again by the same worker. Prints Mpps, Gbit/s and clocks per packet
        operation (an encryption or a decryption; throughput counts both times
        the inner size), and each node's clocks per packet operation.
        Defaults: 1 worker, 2 seconds per size, sizes 64,128,256,512,1024,1280,
        1420,1514,imix (imix = 7:4:1 of 64, 570, 1518 bytes).

    linerate --version | --help

ENGINES:
    SPEC is an engine name for every algorithm it serves, or a list like
    chacha20-poly1305=mb,aes-128-gcm=ipsecmb. Algorithms not named go to the
    engine a calibration at start-up measures cheapest (about a second).

ENVIRONMENT:
    LINERATE_ENGINES               the same as --engine (wg-quick passes no flags)
    LINERATE_LOG_FILE              where a backgrounded daemon writes its log
                                   (default: nowhere)
    LINERATE_UNDER_LOAD_HANDSHAKES handshake messages per second above which
                                   cookies are demanded (default 1000)
";

/// Set in the child of a backgrounding parent: print "ready" on stdout when up.
const NOTIFY_ENV: &str = "LINERATE_NOTIFY_READY";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let strs: Vec<&str> = args.iter().map(String::as_str).collect();
    match strs.as_slice() {
        [] | ["-h"] | ["--help"] | ["help"] => {
            print!("{HELP}");
            ExitCode::SUCCESS
        }
        ["--version"] | ["-v"] => {
            println!("linerate {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        ["bench", "crypto", rest @ ..] => match bench_crypto_command(rest) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(&e),
        },
        ["show", "crypto", rest @ ..] => match show_crypto(rest) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(&e),
        },
        ["bench", rest @ ..] => match bench_command(rest) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(&e),
        },
        ["show", "counters", ifname] => match daemon::ask(ifname, "linerate-counters=1\n") {
            Ok(text) => {
                print_counters(&text);
                ExitCode::SUCCESS
            }
            Err(e) => fail(&e),
        },
        args => match daemon_args(args) {
            Ok((true, ifname, engines)) => foreground(&ifname, engines.as_deref()),
            Ok((false, ifname, engines)) => background(&ifname, engines.as_deref()),
            Err(e) => {
                eprintln!("linerate: {e}\n");
                eprint!("{HELP}");
                ExitCode::from(2)
            }
        },
    }
}

fn fail(msg: &str) -> ExitCode {
    eprintln!("linerate: {msg}");
    ExitCode::FAILURE
}

/// `[-f|--foreground] [--engine SPEC] IFNAME`, flags in any order.
fn daemon_args(args: &[&str]) -> Result<(bool, String, Option<String>), String> {
    let mut fg = false;
    let mut ifname = None;
    let mut engines = None;
    let mut it = args.iter();
    while let Some(&a) = it.next() {
        match a {
            "-f" | "--foreground" => fg = true,
            "--engine" => engines = Some(it.next().ok_or("--engine needs a value")?.to_string()),
            _ if a.starts_with('-') => return Err(format!("unknown option {a:?}")),
            _ if ifname.is_some() => return Err(format!("one interface name, not {a:?} too")),
            _ => ifname = Some(a.to_string()),
        }
    }
    let ifname = ifname.ok_or("no interface name")?;
    if ifname.len() >= 16 || ifname.contains('/') {
        return Err(format!(
            "{ifname:?} is not an interface name (at most 15 bytes, no '/')"
        ));
    }
    Ok((fg, ifname, engines))
}

fn foreground(ifname: &str, engines: Option<&str>) -> ExitCode {
    let notify = std::env::var_os(NOTIFY_ENV).is_some();
    let ready = move || {
        if notify {
            println!("ready");
        }
    };
    let spec = engines
        .map(str::to_string)
        .or_else(|| std::env::var("LINERATE_ENGINES").ok());
    match daemon::run(ifname, spec.as_deref(), ready) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

/// Starts a copy of ourselves in the foreground in a new session and waits until it
/// says it is ready (or dies), as wireguard-go does, so wg-quick can go on at once.
fn background(ifname: &str, engines: Option<&str>) -> ExitCode {
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return fail(&format!("finding my own executable: {e}")),
    };
    let log = std::env::var("LINERATE_LOG_FILE").ok();
    let stderr = match &log {
        Some(path) => match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            Ok(f) => Stdio::from(f),
            Err(e) => return fail(&format!("opening {path}: {e}")),
        },
        None => Stdio::null(),
    };
    let mut cmd = Command::new(exe);
    cmd.args(["--foreground", ifname]);
    if let Some(spec) = engines {
        cmd.args(["--engine", spec]);
    }
    let mut child = match cmd
        .env(NOTIFY_ENV, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .process_group(0)
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return fail(&format!("starting the daemon: {e}")),
    };
    let mut line = String::new();
    let stdout = child.stdout.take().expect("piped");
    let _ = BufReader::new(stdout).read_line(&mut line);
    if line.trim() == "ready" {
        return ExitCode::SUCCESS;
    }
    let status = child.wait();
    fail(&format!(
        "the daemon did not start ({}){}",
        status.map(|s| s.to_string()).unwrap_or_default(),
        if log.is_none() {
            "; run with --foreground to see why"
        } else {
            ""
        }
    ))
}

fn print_counters(text: &str) {
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

fn bench_command(args: &[&str]) -> Result<(), String> {
    let mut opts = bench::Options {
        workers: 1,
        engine: None,
        seconds: 2.0,
        sizes: Vec::new(),
    };
    let mut sizes = bench::DEFAULT_SIZES.to_string();
    let mut json_path = None;
    let mut svg_path = None;
    let mut it = args.iter();
    while let Some(&flag) = it.next() {
        let mut value = || it.next().copied().ok_or(format!("{flag} needs a value"));
        match flag {
            "--svg" => svg_path = Some(value()?.to_string()),
            "--workers" => {
                opts.workers = value()?.parse().map_err(|_| "--workers takes a number")?;
                if opts.workers == 0 || opts.workers > 256 {
                    return Err("--workers goes from 1 to 256".into());
                }
            }
            "--engine" => opts.engine = Some(value()?.to_string()),
            "--seconds" => {
                opts.seconds = value()?.parse().map_err(|_| "--seconds takes a number")?;
                if !(0.01..=100.0).contains(&opts.seconds) {
                    return Err("--seconds goes from 0.01 to 100 (sessions expire at 120 s)".into());
                }
            }
            "--sizes" => sizes = value()?.to_string(),
            "--json" => json_path = Some(value()?.to_string()),
            _ => return Err(format!("unknown option {flag:?}; see linerate --help")),
        }
    }
    opts.sizes = sizes
        .split(',')
        .map(|s| bench::Size::parse(s.trim()))
        .collect::<Result<_, _>>()?;
    engines::parse_choice(opts.engine.as_deref().unwrap_or(""))?;
    println!(
        "linerate bench: {} worker(s), engines {}, {} s per size, on {}",
        opts.workers,
        opts.engine.as_deref().unwrap_or("calibrated"),
        opts.seconds,
        bench::machine()
    );
    println!(
        "counted: packet operations (an encryption or a decryption) x inner size; clocks are TSC ticks per operation"
    );
    let rows = bench::run(&opts)?;
    if let Some(r) = rows.first() {
        println!(
            "chacha20-poly1305 ran on {}; raw = that engine alone on one core; graph/raw is per worker",
            r.engine
        );
    }
    print!("{}", bench::table(&rows));
    if let Some(path) = svg_path {
        let points = rows
            .iter()
            .filter_map(|r| match r.size {
                bench::Size::Fixed(n) => Some((n as f64, r.gbps)),
                bench::Size::Imix => None,
            })
            .collect();
        let label = format!(
            "linerate graph, {} worker(s), {}",
            opts.workers,
            opts.engine.as_deref().unwrap_or("default engines")
        );
        let title = format!(
            "WireGuard through the whole graph: encrypt + decrypt per packet ({})",
            bench::machine()
        );
        let text = svg::chart(&title, &[svg::Series { label, points }], svg::PUBLISHED);
        std::fs::write(&path, text).map_err(|e| format!("{path}: {e}"))?;
        println!("wrote {path}");
    }
    if let Some(path) = json_path {
        let text =
            serde_json::to_string_pretty(&bench::json(&opts, &rows)).map_err(|e| e.to_string())?;
        std::fs::write(&path, text + "\n").map_err(|e| format!("{path}: {e}"))?;
        println!("wrote {path}");
    }
    Ok(())
}

fn show_crypto(args: &[&str]) -> Result<(), String> {
    let seconds = match args {
        [] => 0.2,
        ["--seconds", s] => s.parse::<f64>().map_err(|_| "--seconds takes a number")?,
        _ => return Err("usage: linerate show crypto [--seconds S]".into()),
    };
    if !(0.001..=10.0).contains(&seconds) {
        return Err("--seconds goes from 0.001 to 10".into());
    }
    let keys = std::sync::Arc::new(crypto::KeyRegistry::new(4));
    let mut set = crypto::EngineSet::new(engines::all(&keys));
    let ms =
        crypto::calibrate::calibrate(&mut set, std::time::Duration::from_secs_f64(seconds), &[]);
    println!(
        "engines on {}, one core, batches of {} ops:",
        bench::machine(),
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
    for (name, why) in engines::unavailable() {
        println!("{name:<10} not available here: {why}");
    }
    println!("chosen (cheapest for an IMIX 7:4:1 mix of 64, 570, 1518 bytes):");
    for alg in crypto::Algorithm::ALL {
        println!("  {:<18} {}", alg.name(), set.chosen(alg).unwrap_or("none"));
    }
    Ok(())
}

fn bench_crypto_command(args: &[&str]) -> Result<(), String> {
    let mut engine = None;
    let mut seconds = 0.5;
    let mut sizes = bench_crypto::DEFAULT_SIZES.to_string();
    let mut json_path = None;
    let mut svg_path = None;
    let mut with_openssl = true;
    let mut it = args.iter();
    while let Some(&flag) = it.next() {
        let mut value = || it.next().copied().ok_or(format!("{flag} needs a value"));
        match flag {
            "--engine" => engine = Some(value()?.to_string()),
            "--seconds" => {
                seconds = value()?.parse().map_err(|_| "--seconds takes a number")?;
                if !(0.01..=60.0).contains(&seconds) {
                    return Err("--seconds goes from 0.01 to 60".into());
                }
            }
            "--sizes" => sizes = value()?.to_string(),
            "--json" => json_path = Some(value()?.to_string()),
            "--no-openssl" => with_openssl = false,
            "--svg" => svg_path = Some(value()?.to_string()),
            _ => return Err(format!("unknown option {flag:?}; see linerate --help")),
        }
    }
    let sizes: Vec<bench::Size> = sizes
        .split(',')
        .map(|s| bench::Size::parse(s.trim()))
        .collect::<Result<_, _>>()?;
    println!(
        "linerate bench crypto: one core, batches of 256 in-place encryptions, {seconds} s per point, on {}",
        bench::machine()
    );
    let mut rows = bench_crypto::run(engine.as_deref(), &sizes, seconds)?;
    if with_openssl {
        rows.extend(bench_crypto::openssl(&sizes, seconds));
    }
    print!("{}", bench_crypto::table(&rows));
    if let Some(path) = svg_path {
        let mut series: Vec<svg::Series> = Vec::new();
        for r in rows.iter() {
            let bench::Size::Fixed(n) = r.size else {
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
        let title = format!("Raw AEAD throughput, one core ({})", bench::machine());
        std::fs::write(&path, svg::chart(&title, &series, &[]))
            .map_err(|e| format!("{path}: {e}"))?;
        println!("wrote {path}");
    }
    if let Some(path) = json_path {
        let text = serde_json::to_string_pretty(&bench_crypto::json(&rows, seconds))
            .map_err(|e| e.to_string())?;
        std::fs::write(&path, text + "\n").map_err(|e| format!("{path}: {e}"))?;
        println!("wrote {path}");
    }
    Ok(())
}
