//! The command line, parsed in one place: every subcommand and option, each with its
//! own `--help`. A word that names a subcommand is never taken for an interface name,
//! so `linerate show` asks what to show instead of starting a daemon called "show".

use crate::control::options::{EspAction, GatewaySocket};
use bench::options::{BenchArgs, seconds_in};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

const ABOUT: &str =
    "linerate: a userspace VPN data plane (WireGuard host mode, a drop-in for wireguard-go)";

const DAEMON_HELP: &str = "\
Creates the TUN interface IFNAME and serves the WireGuard UAPI socket at
/var/run/wireguard/IFNAME.sock, so that wg(8) and wg-quick(8) configure it
(wg-quick: WG_QUICK_USERSPACE_IMPLEMENTATION=linerate). Without --foreground it
returns once the interface is ready and keeps running in the background. It stops
on SIGINT or SIGTERM, when the interface is deleted, or when its socket file is
removed.";

const AFTER_HELP: &str = "\
ENGINES:
    SPEC is an engine name for every algorithm it serves, or a list like
    chacha20-poly1305=mb,aes-128-gcm=ipsecmb. Algorithms not named go to the
    engine a calibration at start-up measures cheapest (under a second).

ENVIRONMENT:
    LINERATE_ENGINES               the same as --engine (wg-quick passes no flags)
    LINERATE_WORKERS               the same as --workers
    LINERATE_SPREAD                1: the same as --spread
    LINERATE_LOG_FILE              where a backgrounded daemon writes its log
                                   (default: nowhere)
    LINERATE_UNDER_LOAD_HANDSHAKES handshake messages per second above which
                                   cookies are demanded (default 1000)";

#[derive(Parser, Debug)]
#[command(
    name = "linerate",
    version,
    about = ABOUT,
    long_about = format!("{ABOUT}\n\n{DAEMON_HELP}"),
    after_help = AFTER_HELP,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    arg_required_else_help = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub daemon: DaemonArgs,
}

/// `linerate [-f] [--engine SPEC] IFNAME`: host mode.
#[derive(Args, Debug, Clone)]
pub struct DaemonArgs {
    /// Stay in the foreground (log to stderr) instead of going to the background
    /// once the interface is ready
    #[arg(short = 'f', long)]
    pub foreground: bool,
    /// Engines to use instead of the calibrated choice (see ENGINES)
    #[arg(long, value_name = "SPEC")]
    pub engine: Option<String>,
    /// Data-path workers, each with its own TUN queue and UDP socket, all on the same
    /// tunnels (default: the cores available; see ENVIRONMENT)
    #[arg(long, value_name = "N", value_parser = worker_count)]
    pub workers: Option<u16>,
    /// Spread full frames of ops over the workers (a tunnel's datagrams all reach one
    /// worker): pays where the workers have cores to themselves, costs where they
    /// share them with other busy processes (see ENVIRONMENT)
    #[arg(long)]
    pub spread: bool,
    /// The TUN interface to create (at most 15 bytes, no '/')
    #[arg(value_name = "IFNAME", required = true, value_parser = interface_name)]
    pub ifname: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Show the state of a running interface, or this machine's engines
    #[command(arg_required_else_help = true)]
    Show {
        #[command(subcommand)]
        what: Show,
    },
    /// Measure the whole WireGuard graph in this process (or, with `crypto`, the raw
    /// engines); no network, no privileges
    Bench(Box<BenchArgs>),
    /// Gateway mode: route between the ports and the WireGuard interface that one
    /// configuration file declares (docs/gateway.md, docs/gateway.example.toml); runs
    /// in the foreground until SIGINT or SIGTERM, and reloads the file on SIGHUP
    #[command(after_help = GATEWAY_HELP)]
    Gateway {
        /// The configuration file (TOML); relative key file paths in it are taken from
        /// its directory
        #[arg(short = 'c', long, value_name = "FILE")]
        config: PathBuf,
        /// Validate the file (reading the key files it names), print a summary of what
        /// it declares and exit: 0 when it is valid, 1 with every error on stderr as
        /// FILE:LINE: KEY: message
        #[arg(long)]
        check: bool,
    },
    /// Add or remove an ESP SA of a running gateway's tunnel (docs/ipsec.md): what a
    /// key exchange does, by hand
    #[command(arg_required_else_help = true)]
    Esp {
        #[command(subcommand)]
        action: EspAction,
    },
}

const GATEWAY_HELP: &str = "\
Validation checks the file and the key files it names, nothing else of this machine:
whether the interfaces exist and the cores are online is checked at start-up.";

#[derive(Subcommand, Debug)]
pub enum Show {
    /// Per-node call, packet, clock and drop counters of a running interface or
    /// gateway
    Counters(Target),
    /// Every drop counter of a running interface or gateway that is not zero, most
    /// first, with what its reason means
    Errors(Target),
    /// A running gateway's ports: driver, Ethernet address, MTU, addresses and
    /// counters; and its WireGuard interface
    Interfaces(GatewaySocket),
    /// A running gateway's nodes as VPP shows them: calls, vectors, vectors per call,
    /// clocks per vector, drops
    Runtime(GatewaySocket),
    /// A running gateway's routes
    Fib(GatewaySocket),
    /// A running gateway's neighbor table (ARP and ND)
    Neighbors(GatewaySocket),
    /// A running gateway's ESP tunnels and SAs, with each SA's counters
    Esp(GatewaySocket),
    /// A running gateway's IKE SAs: state, peer, algorithms, age and child SA, the
    /// messages dropped by reason, and the key exchange's recent log
    Ike(GatewaySocket),
    /// A running gateway's OpenVPN servers: each client's name, address, tunnel
    /// addresses, cipher, keys and their ages, and bytes; the control packets
    /// refused by reason, and the recent log
    Openvpn(GatewaySocket),
    /// Measure every engine on every algorithm it serves at the size of every size
    /// class (64, 256, 570, 1024, 1518, 9000 bytes; batches of 256) and show which engine
    /// each algorithm would get for each class: the one with the most packets per
    /// second at that size
    Crypto {
        /// Time per engine, algorithm and size
        #[arg(long, default_value_t = 0.12, value_parser = seconds_in(0.001, 10.0))]
        seconds: f64,
    },
}

/// Which running instance to ask: a host-mode interface, or a gateway's control
/// socket.
#[derive(Args, Debug)]
#[group(required = true, multiple = false)]
pub struct Target {
    /// The interface, as given to `linerate IFNAME`
    #[arg(value_parser = interface_name)]
    pub ifname: Option<String>,
    /// A gateway's control socket (its file's `control`)
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
}

/// An interface name the kernel accepts: 1 to 15 bytes, no '/', no whitespace.
fn interface_name(s: &str) -> Result<String, String> {
    if s.is_empty()
        || s.len() >= 16
        || s.contains('/')
        || s.chars().any(char::is_whitespace)
        || s == "."
        || s == ".."
    {
        return Err(format!(
            "{s:?} is not an interface name (1 to 15 bytes, no '/' or spaces)"
        ));
    }
    Ok(s.to_string())
}

/// A host-mode worker count: 1 to 256.
pub fn worker_count(s: &str) -> Result<u16, String> {
    match s.trim().parse::<u16>() {
        Ok(n) if (1..=256).contains(&n) => Ok(n),
        _ => Err(format!("{s:?}: workers go from 1 to 256")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("linerate").chain(args.iter().copied()))
    }

    #[test]
    fn definitions_are_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn an_interface_name_starts_host_mode() {
        let cli = parse(&["-f", "--engine", "mb", "wg0"]).unwrap();
        assert!(cli.command.is_none());
        assert!(cli.daemon.foreground);
        assert_eq!(cli.daemon.engine.as_deref(), Some("mb"));
        assert_eq!(cli.daemon.ifname.as_deref(), Some("wg0"));
        let cli = parse(&["wg0"]).unwrap();
        assert!(!cli.daemon.foreground);
    }

    #[test]
    fn a_subcommand_word_is_never_an_interface() {
        let err = parse(&["show"]).unwrap_err();
        assert_ne!(err.exit_code(), 0, "{err}");
        let err = parse(&["bench", "crypto", "wg0"]).unwrap_err();
        assert_ne!(err.exit_code(), 0, "{err}");
        assert!(matches!(
            parse(&["show", "counters", "wg0"]).unwrap().command,
            Some(Command::Show {
                what: Show::Counters { .. }
            })
        ));
    }

    #[test]
    fn every_subcommand_has_help() {
        for args in [
            &["--help"][..],
            &["show", "--help"],
            &["show", "counters", "--help"],
            &["show", "errors", "--help"],
            &["show", "crypto", "--help"],
            &["bench", "--help"],
            &["bench", "crypto", "--help"],
            &["gateway", "--help"],
        ] {
            let err = parse(args).unwrap_err();
            assert_eq!(err.kind(), clap::error::ErrorKind::DisplayHelp, "{args:?}");
            assert_eq!(err.exit_code(), 0, "{args:?}");
        }
    }

    #[test]
    fn bad_values_are_refused() {
        for args in [
            &["bench", "--workers", "0"][..],
            &["bench", "--seconds", "1000"],
            &["show", "crypto", "--seconds", "x"],
            &["a/b"],
            &["sixteen-bytes-xx"],
            &["wg0", "wg1"],
            &["--frob", "wg0"],
            &["gateway", "--check"],
        ] {
            assert!(parse(args).is_err(), "{args:?}");
        }
    }
}
