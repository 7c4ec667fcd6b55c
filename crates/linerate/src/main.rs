//! The `linerate` command: parses the command line (cli.rs) and hands each subcommand
//! to the mode that does it: host mode (`host`), the gateway (`gateway`), the
//! operator's requests to either (`control`), or the benchmarks (the `bench` crate).

// The ports' one unsafe block, lending a worker's arena to the kernel, lives in the
// `ports` crate with its safety argument; nothing here needs one.
#![forbid(unsafe_code)]

mod cli;
mod control;
mod gateway;
mod host;
mod keyfile;
mod service;

use bench::options::{BenchCrypto, Traffic};
use clap::Parser;
use cli::{Cli, Command, Show};
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Show {
            what: Show::Counters(t),
        }) => {
            ask_target(&t, "linerate-counters=1\n").and_then(|text| control::show::counters(&text))
        }
        Some(Command::Show {
            what: Show::Errors(t),
        }) => ask_target(&t, "linerate-counters=1\n").and_then(|text| control::show::errors(&text)),
        Some(Command::Show {
            what: Show::Interfaces(g),
        }) => control::show::gateway(&g.socket, "interfaces"),
        Some(Command::Show {
            what: Show::Runtime(g),
        }) => control::show::gateway(&g.socket, "runtime"),
        Some(Command::Show { what: Show::Fib(g) }) => control::show::gateway(&g.socket, "fib"),
        Some(Command::Show {
            what: Show::Neighbors(g),
        }) => control::show::gateway(&g.socket, "neighbors"),
        Some(Command::Show { what: Show::Esp(g) }) => control::show::gateway(&g.socket, "esp"),
        Some(Command::Show { what: Show::Ike(g) }) => control::show::gateway(&g.socket, "ike"),
        Some(Command::Show {
            what: Show::Openvpn(g),
        }) => control::show::gateway(&g.socket, "openvpn"),
        Some(Command::Show {
            what: Show::Crypto { seconds },
        }) => control::show::crypto(seconds),
        Some(Command::Bench(b)) => match b.crypto {
            Some(BenchCrypto::Crypto(c)) => bench::command::crypto(&c),
            Some(BenchCrypto::Traffic {
                what: Traffic::Send(a),
            }) => bench::traffic::send(&a),
            Some(BenchCrypto::Traffic {
                what: Traffic::Count(a),
            }) => bench::traffic::count(&a),
            None => bench::command::graph(&b.graph),
        },
        Some(Command::Gateway { config, check }) => gateway(&config, check),
        Some(Command::Esp { action }) => control::client::send_esp(&action),
        None => host_mode(cli.daemon),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("linerate: {e}");
            ExitCode::FAILURE
        }
    }
}

/// One request to a host-mode interface's socket or a gateway's control socket.
fn ask_target(t: &cli::Target, request: &str) -> Result<String, String> {
    match (&t.ifname, &t.socket) {
        (_, Some(path)) => control::client::ask_at(path, request),
        (Some(ifname), None) => control::client::ask(ifname, request),
        (None, None) => Err("name an interface or a gateway's --socket".into()),
    }
}

/// `linerate [-f] [--engine SPEC] IFNAME`.
fn host_mode(args: cli::DaemonArgs) -> Result<(), String> {
    let ifname = args
        .ifname
        .expect("clap requires IFNAME without a subcommand");
    let spec = args
        .engine
        .or_else(|| std::env::var("LINERATE_ENGINES").ok());
    // Refused here, before anything is created, so a typo leaves nothing behind.
    runtime::engines::validate(spec.as_deref().unwrap_or(""))?;
    let workers = match args.workers {
        Some(n) => n as usize,
        None => match std::env::var("LINERATE_WORKERS") {
            Ok(v) => cli::worker_count(&v).map_err(|e| format!("LINERATE_WORKERS: {e}"))? as usize,
            Err(_) => std::thread::available_parallelism().map_or(1, |n| n.get()),
        },
    };
    let spread = args.spread || std::env::var("LINERATE_SPREAD").is_ok_and(|v| v == "1");
    if !args.foreground {
        return host::background::start(&ifname, spec.as_deref(), workers, spread);
    }
    let res = host::daemon::run(
        &ifname,
        spec.as_deref(),
        workers,
        spread,
        host::background::report_ready,
    );
    if let Err(e) = &res {
        host::background::report_failure(e);
    }
    res
}

/// `linerate gateway -c FILE [--check]`.
fn gateway(config: &std::path::Path, check: bool) -> Result<(), String> {
    let cfg = match gateway::config::load(config) {
        Ok(cfg) => cfg,
        Err(errors) => {
            for e in &errors.0 {
                eprintln!("{e}");
            }
            let n = errors.0.len();
            return Err(format!(
                "{}: {n} error{}",
                config.display(),
                if n == 1 { "" } else { "s" }
            ));
        }
    };
    if !check {
        return gateway::run(config, cfg);
    }
    println!("{}: valid", config.display());
    print!("{}", cfg.summary());
    Ok(())
}
