//! The `linerate` command.

mod bench;
mod daemon;
mod engines;
mod uapi;
mod worker;

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode, Stdio};

const HELP: &str = "\
linerate: a userspace VPN data plane (WireGuard host mode, a drop-in for wireguard-go)

USAGE:
    linerate [-f|--foreground] IFNAME
        Create the TUN interface IFNAME and serve the WireGuard UAPI socket at
        /var/run/wireguard/IFNAME.sock, so that wg(8) and wg-quick(8) configure it
        (wg-quick: WG_QUICK_USERSPACE_IMPLEMENTATION=linerate). Without --foreground
        it returns once the interface is ready and keeps running in the background.
        It stops on SIGINT or SIGTERM, when the interface is deleted, or when its
        socket file is removed.

    linerate show counters IFNAME
        Per-node packet, vector, clock and drop counters of a running interface.

    linerate bench [--workers N] [--engine NAME] [--seconds S] [--sizes LIST]
                   [--json FILE]
        The whole WireGuard graph in this process, no network: inner IPv4/UDP
        packets of each size are encrypted to a loopback session and decrypted
        again by the same worker. Prints Mpps, Gbit/s and clocks per packet
        operation (an encryption or a decryption; throughput counts both times
        the inner size), and each node's clocks per packet operation.
        Defaults: 1 worker, 2 seconds per size, sizes 64,128,256,512,1024,1280,
        1420,1514,imix (imix = 7:4:1 of 64, 570, 1518 bytes).

    linerate --version | --help

ENVIRONMENT:
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
        ["-f" | "--foreground", ifname] | [ifname, "-f" | "--foreground"]
            if !ifname.starts_with('-') =>
        {
            foreground(ifname)
        }
        [ifname] if !ifname.starts_with('-') => background(ifname),
        _ => {
            eprint!("{HELP}");
            ExitCode::from(2)
        }
    }
}

fn fail(msg: &str) -> ExitCode {
    eprintln!("linerate: {msg}");
    ExitCode::FAILURE
}

fn foreground(ifname: &str) -> ExitCode {
    let notify = std::env::var_os(NOTIFY_ENV).is_some();
    let ready = move || {
        if notify {
            println!("ready");
        }
    };
    match daemon::run(ifname, ready) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

/// Starts a copy of ourselves in the foreground in a new session and waits until it
/// says it is ready (or dies), as wireguard-go does, so wg-quick can go on at once.
fn background(ifname: &str) -> ExitCode {
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
    let mut child = match Command::new(exe)
        .args(["--foreground", ifname])
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
    let mut it = args.iter();
    while let Some(&flag) = it.next() {
        let mut value = || it.next().copied().ok_or(format!("{flag} needs a value"));
        match flag {
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
    engines::engine_set(opts.engine.as_deref())?;
    println!(
        "linerate bench: {} worker(s), engine {}, {} s per size, on {}",
        opts.workers,
        opts.engine.as_deref().unwrap_or("default"),
        opts.seconds,
        bench::machine()
    );
    println!(
        "counted: packet operations (an encryption or a decryption) x inner size; clocks are TSC ticks per operation"
    );
    let rows = bench::run(&opts)?;
    print!("{}", bench::table(&rows));
    if let Some(path) = json_path {
        let text =
            serde_json::to_string_pretty(&bench::json(&opts, &rows)).map_err(|e| e.to_string())?;
        std::fs::write(&path, text + "\n").map_err(|e| format!("{path}: {e}"))?;
        println!("wrote {path}");
    }
    Ok(())
}
