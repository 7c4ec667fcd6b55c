//! The command line, parsed in one place: every subcommand and option, each with its
//! own `--help`. A word that names a subcommand is never taken for an interface name,
//! so `linerate show` asks what to show instead of starting a daemon called "show".

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
    engine a calibration at start-up measures cheapest (about two seconds).

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

#[derive(Subcommand, Debug)]
pub enum EspAction {
    /// Add an SA: inbound, it takes packets at once beside the tunnel's others;
    /// outbound, it seals the tunnel's next packet in place of the one there
    Add(EspAdd),
    /// Remove an SA: inbound by SPI (its packets are unknown from then on);
    /// outbound, the tunnel's (its packets are dropped until another is added)
    Remove(EspRemove),
}

#[derive(Args, Debug)]
pub struct EspAdd {
    #[command(flatten)]
    pub gateway: GatewaySocket,
    /// The tunnel (its `name` in the file)
    #[arg(long)]
    pub tunnel: String,
    /// in or out
    #[arg(long, value_parser = ["in", "out"])]
    pub direction: String,
    /// The SPI, decimal or 0x hex (256 and up)
    #[arg(long)]
    pub spi: String,
    /// aes128gcm16, aes256gcm16 or chacha20poly1305
    #[arg(long)]
    pub algorithm: String,
    /// The key material in hex, key then salt (as in the file's key_file)
    #[arg(long, value_name = "FILE")]
    pub key_file: PathBuf,
    /// 64-bit extended sequence numbers
    #[arg(long)]
    pub esn: bool,
    /// Inbound: the anti-replay window (32 to 16384; 0: off, not with --esn)
    #[arg(long)]
    pub replay_window: Option<u32>,
    /// Hard lifetime in bytes
    #[arg(long)]
    pub lifetime_bytes: Option<u64>,
    /// Hard lifetime in packets
    #[arg(long)]
    pub lifetime_packets: Option<u64>,
}

#[derive(Args, Debug)]
pub struct EspRemove {
    #[command(flatten)]
    pub gateway: GatewaySocket,
    #[arg(long)]
    pub tunnel: String,
    /// in or out
    #[arg(long, value_parser = ["in", "out"])]
    pub direction: String,
    /// Inbound: the SPI of the SA to remove
    #[arg(long)]
    pub spi: Option<String>,
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
    /// Measure every engine on every algorithm it serves at the size of every size
    /// class (64, 256, 570, 1024, 1518 bytes; batches of 256) and show which engine
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

/// A gateway's control socket.
#[derive(Args, Debug)]
pub struct GatewaySocket {
    /// The control socket (the file's `control`)
    #[arg(long, value_name = "PATH", default_value = crate::gateway_config::DEFAULT_CONTROL)]
    pub socket: PathBuf,
}

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub crypto: Option<BenchCrypto>,
    #[command(flatten)]
    pub graph: GraphBench,
}

/// The whole graph: inner IPv4/UDP packets of each size are encrypted to a loopback
/// session and decrypted again by the same worker. Prints Mpps, Gbit/s and clocks per
/// packet operation (an encryption or a decryption; throughput counts both times the
/// inner size), and each node's clocks per packet operation. With several workers on
/// one peer, every worker encrypts and decrypts on that one tunnel's shared sessions.
#[derive(Args, Debug)]
pub struct GraphBench {
    /// Worker counts, comma-separated, each measured in turn; `x base` is each row
    /// over the first count's at the same size (each worker has its own graph and
    /// engines; give no more than the cores)
    #[arg(long, default_value = "1", value_parser = worker_counts)]
    pub workers: WorkerCounts,
    /// Tunnels the workers share: 1 puts every worker's traffic on one peer (one
    /// tunnel, every core), `each` gives every worker its own
    #[arg(long, default_value = "1", value_parser = crate::bench::Peers::parse)]
    pub peers: crate::bench::Peers,
    /// Engine SPEC for ChaCha20-Poly1305 (default: the calibrated choice)
    #[arg(long, value_name = "SPEC")]
    pub engine: Option<String>,
    /// Seconds per size (sessions expire at 120 s)
    #[arg(long, default_value_t = 2.0, value_parser = seconds_in(0.01, 100.0))]
    pub seconds: f64,
    /// Inner packet sizes, comma-separated; imix = 7:4:1 of 64, 570, 1518 bytes
    #[arg(long, default_value = crate::bench::DEFAULT_SIZES)]
    pub sizes: String,
    /// Measure each point this many times, the worker counts taking turns, and keep
    /// the median
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=99))]
    pub repeat: u16,
    /// Only the first worker carries traffic (a tunnel whose datagrams all arrive on
    /// one queue); the others help with its full frames of crypto
    #[arg(long)]
    pub spread: bool,
    /// Measure the gateway's L2 path instead: the L2 graph (frames through a
    /// cross-connect, VXLAN and WireGuard and back, each worker on its own tunnel)
    /// in turns with the plain graph at the same sizes; then two whole gateways in
    /// memory on one core, L2 beside routed
    #[arg(long, conflicts_with_all = ["spread", "svg", "peers", "tunnel"])]
    pub l2: bool,
    /// The tunnel measured: wireguard (the host graph, above) or esp (the ESP graph
    /// of --alg on the same workers and tunnels, in turns with the WireGuard graph,
    /// each beside its raw engine; then two gateways in memory on one core, ESP
    /// beside WireGuard on the same path)
    #[arg(long, default_value = "wireguard", value_parser = ["wireguard", "esp"],
          conflicts_with_all = ["spread", "svg", "l2"])]
    pub tunnel: String,
    /// With --tunnel esp: the ESP algorithm (aes128gcm16, aes256gcm16,
    /// chacha20poly1305, aes128-sha1, aes256-sha256, ...)
    #[arg(long, default_value = "aes128gcm16", value_parser = esp_alg)]
    pub alg: ipsec::EspAlgorithm,
    /// Write the results as JSON here
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
    /// Write a chart (SVG) here, with the published figures beside
    #[arg(long, value_name = "FILE")]
    pub svg: Option<String>,
}

/// An ESP algorithm by its name.
fn esp_alg(s: &str) -> Result<ipsec::EspAlgorithm, String> {
    ipsec::EspAlgorithm::from_name(s).ok_or_else(|| {
        let names: Vec<&str> = ipsec::EspAlgorithm::ALL.iter().map(|a| a.name()).collect();
        format!(
            "{s:?} is not an ESP algorithm (one of {})",
            names.join(", ")
        )
    })
}

/// `linerate bench traffic send`: IPv4/UDP packets out of an interface, as fast as it
/// takes them, over AF_XDP.
#[derive(Args, Debug)]
pub struct TrafficSend {
    /// The interface to send from (taken over with AF_XDP while this runs)
    #[arg(long, value_name = "IFNAME")]
    pub interface: String,
    /// The next hop's Ethernet address (aa:bb:cc:dd:ee:ff)
    #[arg(long, value_name = "MAC")]
    pub dst_mac: String,
    #[arg(long)]
    pub src: std::net::Ipv4Addr,
    #[arg(long)]
    pub dst: std::net::Ipv4Addr,
    /// UDP destination port
    #[arg(long, default_value_t = 9)]
    pub port: u16,
    /// IP packet size (28..=1500), or imix (7:4:1 of 64, 570, 1420)
    #[arg(long, default_value = "64")]
    pub size: String,
    /// Flows (UDP source ports) to cycle through
    #[arg(long, default_value_t = 64)]
    pub flows: u16,
    /// Seconds to send for
    #[arg(long, default_value_t = 2.0, value_parser = seconds_in(0.01, 600.0))]
    pub seconds: f64,
    /// Stop after this many packets
    #[arg(long)]
    pub count: Option<u64>,
    /// Offer at most this many packets a second, all queues together (default: as
    /// fast as the interface takes them)
    #[arg(long, value_name = "PPS", value_parser = clap::value_parser!(u64).range(1..))]
    pub rate: Option<u64>,
    /// Send from this many queues of the interface (queue 0 up), the flows dealt
    /// out over them: a receiving gateway's workers each get a queue's share
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub queues: u32,
}

/// `linerate bench traffic count`: counts the IPv4/UDP packets to one port that
/// arrive on an interface, over AF_XDP.
#[derive(Args, Debug)]
pub struct TrafficCount {
    /// The interface to count on (taken over with AF_XDP while this runs)
    #[arg(long, value_name = "IFNAME")]
    pub interface: String,
    /// UDP destination port of the packets to count
    #[arg(long, default_value_t = 9)]
    pub port: u16,
    /// Seconds to count for
    #[arg(long, default_value_t = 2.0, value_parser = seconds_in(0.01, 600.0))]
    pub seconds: f64,
    /// Count on this many queues of the interface (queue 0 up): frames on a queue
    /// not listened to go to the kernel, uncounted
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub queues: u32,
}

#[derive(Subcommand, Debug)]
pub enum Traffic {
    /// Send IPv4/UDP packets of a size as fast as the interface takes them
    Send(TrafficSend),
    /// Count the IPv4/UDP packets to a port that arrive
    Count(TrafficCount),
}

#[derive(Subcommand, Debug)]
pub enum BenchCrypto {
    /// Raw throughput of every engine for every algorithm it serves (the AEADs, and
    /// AES-CBC with HMAC laid out as ESP runs it), one core, with `openssl speed -evp`
    /// at the same sizes measured in the same run for the AEADs when openssl is
    /// installed
    Crypto(CryptoBench),
    /// A packet generator and a counting sink on AF_XDP, to measure what forwards
    /// between two interfaces (scripts/gateway-bench.sh uses them)
    #[command(arg_required_else_help = true)]
    Traffic {
        #[command(subcommand)]
        what: Traffic,
    },
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

/// Worker counts for the graph benchmark.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerCounts(pub Vec<usize>);

fn worker_counts(s: &str) -> Result<WorkerCounts, String> {
    let counts = s
        .split(',')
        .map(|w| match w.trim().parse::<usize>() {
            Ok(n) if (1..=256).contains(&n) => Ok(n),
            _ => Err(format!("{w:?}: worker counts go from 1 to 256")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(WorkerCounts(counts))
}

fn seconds_in(lo: f64, hi: f64) -> impl Fn(&str) -> Result<f64, String> + Clone {
    move |s| {
        let v: f64 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
        if (lo..=hi).contains(&v) {
            Ok(v)
        } else {
            Err(format!("goes from {lo} to {hi}"))
        }
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

/// The options of `linerate bench crypto`.
#[derive(Args, Debug)]
pub struct CryptoBench {
    /// Measure only these engines (names comma-separated, e.g. mb,ipsecmb)
    #[arg(long, value_name = "NAMES")]
    pub engine: Option<String>,
    /// Measure only these algorithms (names comma-separated, e.g.
    /// chacha20-poly1305,aes-128-gcm)
    #[arg(long, value_name = "NAMES")]
    pub alg: Option<String>,
    /// Seconds per point
    #[arg(long, default_value_t = 0.5, value_parser = seconds_in(0.01, 60.0))]
    pub seconds: f64,
    /// Packet sizes, comma-separated; imix = 7:4:1 of 64, 570, 1518 bytes
    #[arg(long, default_value = crate::bench_crypto::DEFAULT_SIZES)]
    pub sizes: String,
    /// Measure each point this many times, the engines taking turns, and keep
    /// each engine's median (ratios between engines then hold on a busy machine)
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=99))]
    pub repeat: u32,
    /// Write the results as JSON here
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
    /// Write a chart (SVG) here
    #[arg(long, value_name = "FILE")]
    pub svg: Option<String>,
    /// Do not run `openssl speed` beside
    #[arg(long)]
    pub no_openssl: bool,
}
