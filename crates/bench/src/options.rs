//! The options of `linerate bench` and its subcommands, as the command line
//! takes them (the binary's `cli` flattens them in).

use clap::{Args, Subcommand};

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
    #[arg(long, default_value = "1", value_parser = crate::measure::Peers::parse)]
    pub peers: crate::measure::Peers,
    /// Engine SPEC for ChaCha20-Poly1305 (default: the calibrated choice)
    #[arg(long, value_name = "SPEC")]
    pub engine: Option<String>,
    /// Seconds per size (sessions expire at 120 s)
    #[arg(long, default_value_t = 2.0, value_parser = seconds_in(0.01, 100.0))]
    pub seconds: f64,
    /// Inner packet sizes, comma-separated; imix = 7:4:1 of 64, 570, 1518 bytes
    #[arg(long, default_value = crate::measure::DEFAULT_SIZES)]
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
    /// The tunnel measured: wireguard (the host graph, above); esp (the ESP graph
    /// of --alg on the same workers and tunnels, in turns with the WireGuard graph,
    /// each beside its raw engine; then two gateways in memory on one core, ESP
    /// beside WireGuard on the same path); or openvpn (the OpenVPN data channel's
    /// graph of --alg in turns with the ESP graph of the same AEAD, each beside its
    /// raw engine)
    #[arg(long, default_value = "wireguard", value_parser = ["wireguard", "esp", "openvpn"],
          conflicts_with_all = ["spread", "svg", "l2"])]
    pub tunnel: String,
    /// With --tunnel esp: the ESP algorithm (aes128gcm16, the default;
    /// aes256gcm16, chacha20poly1305, aes128-sha1, aes256-sha256, ...). With
    /// --tunnel openvpn: the data cipher (aes-256-gcm, the default; aes-128-gcm,
    /// chacha20-poly1305)
    #[arg(long)]
    pub alg: Option<String>,
    /// Write the results as JSON here
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
    /// Write a chart (SVG) here, with the published figures beside
    #[arg(long, value_name = "FILE")]
    pub svg: Option<String>,
}

/// An ESP algorithm by its name.
pub(crate) fn esp_alg(s: &str) -> Result<ipsec::EspAlgorithm, String> {
    ipsec::EspAlgorithm::from_name(s).ok_or_else(|| {
        let names: Vec<&str> = ipsec::EspAlgorithm::ALL.iter().map(|a| a.name()).collect();
        format!(
            "{s:?} is not an ESP algorithm (one of {})",
            names.join(", ")
        )
    })
}

/// An OpenVPN data cipher by OpenVPN's name, or the ESP name of the same AEAD.
pub(crate) fn data_cipher(s: &str) -> Result<openvpn::DataCipher, String> {
    use openvpn::DataCipher;
    DataCipher::from_name(s)
        .or_else(|| match ipsec::EspAlgorithm::from_name(s)? {
            ipsec::EspAlgorithm::Aes128Gcm => Some(DataCipher::Aes128Gcm),
            ipsec::EspAlgorithm::Aes256Gcm => Some(DataCipher::Aes256Gcm),
            ipsec::EspAlgorithm::ChaCha20Poly1305 => Some(DataCipher::Chacha20Poly1305),
            _ => None,
        })
        .ok_or_else(|| {
            format!(
                "{s:?} is not an OpenVPN data cipher this gateway serves (one of {})",
                DataCipher::ALL
                    .map(|c| c.name().to_ascii_lowercase())
                    .join(", ")
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
    /// IP packet size (28..=9216), or imix (7:4:1 of 64, 570, 1420); a frame past
    /// a 2048-byte buffer goes out in parts (multi-buffer AF_XDP, Linux 6.6 on)
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
    /// Take frames past 1514 bytes, which come in parts (multi-buffer AF_XDP,
    /// Linux 6.6 on); without it they are dropped by the kernel
    #[arg(long)]
    pub jumbo: bool,
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

/// A number of seconds from `lo` to `hi`, for an option's parser.
pub fn seconds_in(lo: f64, hi: f64) -> impl Fn(&str) -> Result<f64, String> + Clone {
    move |s| {
        let v: f64 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
        if (lo..=hi).contains(&v) {
            Ok(v)
        } else {
            Err(format!("goes from {lo} to {hi}"))
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
    #[arg(long, default_value = crate::crypto_engines::DEFAULT_SIZES)]
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
