//! What every benchmark of the graph shares: packet sizes (fixed or IMIX), the
//! options and rows of a measurement, the inner packets the drivers make, the
//! `Loopback` shape a tunnel's graph takes to be driven, and the machine's name
//! for result files.

use dataplane::{Context, Handle, NodeCounters, RxStarts};
use std::time::{Duration, Instant};

pub use crypto::calibrate::IMIX;

/// The largest inner packet measured: a 9216-byte jumbo MTU's.
pub const LARGEST_SIZE: usize = 9216;
/// The largest inner packet measured on standard buffers; a larger size puts the
/// whole run on jumbo buffers (every size of it, so that they compare alike).
const LARGEST_STANDARD_SIZE: usize = 1600;
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    Fixed(usize),
    Imix,
}

impl Size {
    pub fn parse(s: &str) -> Result<Size, String> {
        if s.eq_ignore_ascii_case("imix") {
            return Ok(Size::Imix);
        }
        let n: usize = s.parse().map_err(|_| format!("{s:?}: not a packet size"))?;
        if !(28..=LARGEST_SIZE).contains(&n) {
            return Err(format!(
                "{n}: sizes go from 28 (an empty IPv4/UDP packet) to {LARGEST_SIZE}"
            ));
        }
        Ok(Size::Fixed(n))
    }

    /// Whether standard buffers carry every packet of this size.
    pub fn is_standard(self) -> bool {
        self.sizes().into_iter().all(|n| n <= LARGEST_STANDARD_SIZE)
    }

    /// The packet sizes this size is made of.
    pub(crate) fn sizes(self) -> Vec<usize> {
        match self {
            Size::Fixed(n) => vec![n],
            Size::Imix => IMIX.iter().map(|&(n, _)| n).collect(),
        }
    }

    /// The size of packet `i` of a stream.
    pub(crate) fn nth(self, i: usize) -> usize {
        match self {
            Size::Fixed(n) => n,
            Size::Imix => {
                let mut k = (i % 12) as u32;
                for (size, weight) in IMIX {
                    if k < weight {
                        return size;
                    }
                    k -= weight;
                }
                unreachable!("weights add up to 12")
            }
        }
    }

    pub fn label(self) -> String {
        match self {
            Size::Fixed(n) => n.to_string(),
            Size::Imix => "imix".into(),
        }
    }
}

pub const DEFAULT_SIZES: &str = "64,128,256,512,1024,1280,1420,1514,imix";

/// How many devices (tunnels) the workers share.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peers {
    /// This many (at most one per worker).
    Count(usize),
    /// One per worker: independent tunnels.
    Each,
}

impl Peers {
    pub fn parse(s: &str) -> Result<Peers, String> {
        if s == "each" {
            return Ok(Peers::Each);
        }
        match s.parse::<usize>() {
            Ok(n) if (1..=256).contains(&n) => Ok(Peers::Count(n)),
            _ => Err(format!(
                "{s:?}: peers are a count from 1 to 256, or `each` (one per worker)"
            )),
        }
    }

    /// Devices for `workers` workers.
    pub fn for_workers(self, workers: usize) -> usize {
        match self {
            Peers::Count(n) => n.clamp(1, workers.max(1)),
            Peers::Each => workers.max(1),
        }
    }

    pub fn label(self) -> String {
        match self {
            Peers::Count(n) => n.to_string(),
            Peers::Each => "each".into(),
        }
    }
}

pub struct Options {
    /// Worker counts, each measured in turn (the first is the baseline of the
    /// scaling column).
    pub workers: Vec<usize>,
    pub peers: Peers,
    pub engine: Option<String>,
    pub seconds: f64,
    pub sizes: Vec<Size>,
    /// Each point is measured this many times, the worker counts taking turns, and
    /// the median kept: a noisy machine disturbs one turn, not one worker count.
    pub repeat: usize,
    /// Only the first worker carries traffic (as when a tunnel's datagrams all
    /// arrive on one queue); the others help with its full frames
    /// (`crypto_async::spread`).
    pub spread: bool,
}

impl Options {
    /// The size of the graphs' buffers: standard, or jumbo where a size needs them.
    pub fn buffer(&self) -> usize {
        if self.sizes.iter().all(|s| s.is_standard()) {
            dataplane::STANDARD_BUFFER
        } else {
            dataplane::JUMBO_BUFFER
        }
    }
}

/// What one worker measured at one size.
#[derive(Clone, Debug, Default)]
pub struct Measured {
    pub packets: u64,
    pub bytes: u64,
    pub clocks: u64,
    pub elapsed: Duration,
    /// (node, clocks per packet it handled)
    pub nodes: Vec<(String, f64)>,
    /// The choice for ChaCha20-Poly1305, in words ("mb for every size").
    pub choice: String,
    /// The engine the tunnel's algorithm ran on for each size class.
    pub by_class: Vec<String>,
    /// That algorithm (none for a helper, which measures only its clocks).
    pub alg: Option<crypto::Algorithm>,
    /// The AAD of the tunnel's ops.
    pub aad_len: usize,
    /// Per inner size measured: the length of the text the tunnel seals for it
    /// (padding and trailer included), which the raw engine is given too.
    pub text_lens: Vec<(usize, usize)>,
    /// Packets refused as replays: a worker's counters fell behind the window of the
    /// tunnel it shares (it was descheduled for longer than the window lasts). Where
    /// the bench models the far end (WireGuard), what that far end refused as the
    /// packets left, in the order they left.
    pub late: u64,
    /// Where the far end is modelled: packets the worker's own opening refused as
    /// replays (the loopback receives a shared session on every worker, so a worker
    /// held back between checking its packets and committing them finds them
    /// behind the others').
    pub rx_late: u64,
    /// Packets the late check found too far behind as they left and sealed again
    /// with fresh counters (see `dataplane::seal_ledger`).
    pub resealed: u64,
}

#[derive(Clone, Debug)]
pub struct Row {
    pub size: Size,
    /// Packet operations (encryptions plus decryptions) per second, millions.
    pub mpps: f64,
    pub gbps: f64,
    /// TSC clocks per packet operation, all workers together.
    pub clocks_per_packet: f64,
    pub nodes: Vec<(String, f64)>,
    /// The process's peak resident memory after this size (VmHWM), KiB.
    pub peak_rss_kib: u64,
    /// The engine that ran ChaCha20-Poly1305 in the graph at this size (IMIX: the
    /// engines of its sizes, joined by '+').
    pub engine: String,
    /// The choice for ChaCha20-Poly1305 at every size, in words.
    pub choice: String,
    /// Those engines alone, one core, doing the graph's crypto: each op of this
    /// size sealed and opened again in place, in the tunnel's layout (IMIX: each of
    /// its sizes on its own engine), measured in slices between the graph's own in
    /// the same run (Gbit/s of operations).
    pub raw_gbps: f64,
    /// The same engines sealing only, without AAD: the figure `linerate bench crypto`
    /// prints, for comparison.
    pub raw_seal_gbps: f64,
    /// Graph over raw, per worker: with repeats, the median of each run's ratio (a
    /// run's graph and raw engine measured in alternating slices), which a busy
    /// machine shifts less than the ratio of two medians taken at different times.
    pub graph_over_raw: f64,
    pub workers: usize,
    pub peers: usize,
    /// Packets refused as replays, all workers (see [`Measured::late`]).
    pub late: u64,
    /// See [`Measured::rx_late`], all workers.
    pub rx_late: u64,
    /// Packets sealed again before they left, all workers (see [`Measured::resealed`]).
    pub resealed: u64,
}

/// The process's peak resident set size so far, from /proc (0 where there is none).
pub fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

pub(crate) fn inner_packet(buf: &mut [u8], len: usize, seq: u16) {
    let p = &mut buf[..len];
    p[..28].fill(0);
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p[4..6].copy_from_slice(&seq.to_be_bytes());
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&[198, 19, 0, 2]);
    p[16..20].copy_from_slice(&[198, 19, 0, 3]);
    p[20..22].copy_from_slice(&9u16.to_be_bytes());
    p[22..24].copy_from_slice(&9u16.to_be_bytes());
    p[24..26].copy_from_slice(&((len - 20) as u16).to_be_bytes());
}

/// One worker's graph of a tunnel as the bench drives it: inner packets in, what
/// it seals handed straight back in as if from the peer, what it opens counted.
pub(crate) trait Loopback: Send + Sized {
    /// The algorithm the tunnel seals with.
    fn alg(&self) -> crypto::Algorithm;
    /// The AAD of the tunnel's ops, for the raw engine's measurement.
    fn aad_len(&self) -> usize;
    /// The length of the text the tunnel seals for an inner packet of `inner`
    /// bytes: the packet, its padding and any trailer the protocol adds.
    fn text_len(&self, inner: usize) -> usize;
    fn context(&self) -> &Context;
    fn context_mut(&mut self) -> &mut Context;
    /// Seals `inner`; what was sealed, as it would leave, into `back`.
    fn seal(&mut self, inner: &[Handle], back: &mut Vec<Handle>, now: Instant);
    /// Hands what `seal` made back in, as if from the peer, and opens it; how many
    /// inner packets came out.
    fn open(&mut self, back: &[Handle], now: Instant) -> u64;
    /// The send counter of a datagram `seal` made, for a tunnel whose far end the
    /// bench models (see `driver::FarEnd`); `None`: not modelled.
    fn wire_counter(&self, _h: Handle) -> Option<u64> {
        None
    }
    /// Every node's name and counters, in graph order.
    fn node_counters(&self) -> Vec<(&'static str, &NodeCounters)>;
    /// Whether a drop for `reason` is a packet a worker sealed too late for the
    /// window of a tunnel it shares (counted, not an error).
    fn is_late(reason: &str) -> bool;
    /// Where the driver makes inner packets of at most `largest` bytes in their
    /// buffers: where the tunnel's source of them receives them (a port's frames at
    /// the headroom, unless the tunnel says otherwise).
    fn rx_starts(&self, _largest: usize) -> RxStarts {
        RxStarts::at_headroom(self.context().arena().buffer_size())
    }
}

/// CPU model and core count, for result files.
/// The CPU as the figures need it named: the model, its family and model numbers
/// (a virtual machine's model name can be just the vendor's brand, the same for
/// two generations with different vector units), the widest path the multi-buffer
/// engine runs on it, and the cores.
pub fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |name: &str| {
        cpuinfo
            .lines()
            .take_while(|l| !l.is_empty()) // the first processor's block
            .find(|l| l.split(':').next().is_some_and(|k| k.trim() == name))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    };
    let model = field("model name").unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let numbers = match (field("cpu family"), field("model")) {
        (Some(f), Some(m)) => format!("family {f} model {m}, "),
        _ => String::new(),
    };
    format!(
        "{model} ({numbers}widest vector path {}), {cores} cores",
        crypto_mb::Path::best()
    )
}
