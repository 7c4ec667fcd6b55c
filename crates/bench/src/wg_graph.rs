//! `linerate bench`: the whole WireGuard graph in one process, no privileges, no
//! network. A device has one peer on a loopback session (what it encrypts to the peer
//! it decrypts again); each worker generates inner IPv4/UDP packets of one size and
//! pushes every packet through wg-encrypt, then back through wg-input and wg-decrypt
//! to a sink. Each packet is encrypted once and decrypted once, as on the published
//! single-core DUT; throughput counts both operations times the inner size.
//!
//! With `peers` devices for `workers` workers, worker i serves device i % peers: the
//! first worker of a device owns it, the others follow it (one tunnel on several
//! workers: shared send counters and replay window). One peer (the default) is one
//! tunnel on every worker; as many peers as workers is one independent tunnel each.

use crate::driver::{Driver, FarEnd};
use crate::raw::{RawMeter, engine_at};
use dataplane::counters::clocks;
use dataplane::wg::{TUN_OUT, UDP_OUT, WgGraph};
use dataplane::{Arena, Context, Handle, NodeCounters, RxStarts};
use runtime::engines;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant, SystemTime};
use wireguard::{Device, DropReason, Prefix};

use crate::measure::{Loopback, Measured, Options, Row, Size, peak_rss_kib};
use dataplane::graph::FRAME_LEN as FRAME;

/// A point's time is cut into this many slices of graph, each followed by a slice
/// of its raw engines: the two then see the same machine, and a neighbour busy for
/// a second slows both rather than one.
const SLICES: usize = 4;

/// A worker's graph: a device whose only peer is itself, on a loopback session.
fn loopback_graph(engine: Option<&str>, buffer: usize) -> Result<WgGraph, String> {
    let now = Instant::now();
    let device = loopback_device(now)?;
    let (engines, _) = engines::configured_set(
        device.keys(),
        engine,
        std::time::Duration::from_millis(6),
        &[crypto::Algorithm::ChaCha20Poly1305],
        buffer,
    )?;
    Ok(WgGraph::new(
        Arena::with_buffers(4 * FRAME + 64, buffer),
        device,
        engines,
        now,
    ))
}

/// A device whose only peer is itself, on a loopback session: what it seals for
/// 198.19.0.0/24 it opens again.
pub(crate) fn loopback_device(now: Instant) -> Result<Device, String> {
    let keys = Arc::new(crypto::KeyRegistry::new(64));
    let mut device = Device::new(keys, now, SystemTime::now());
    device.set_private_key(Some(crypto::x25519::PrivateKey::generate()));
    let peer = device
        .add_peer(crypto::x25519::PrivateKey::generate().public_key())
        .ok_or("adding the loopback peer")?;
    // The endpoint is never used for I/O: datagrams go back into the graph.
    device.set_endpoint(peer, "198.18.0.2:51820".parse().expect("literal"));
    device.add_allowed_ip(peer, "198.19.0.0/24".parse::<Prefix>().expect("literal"));
    device
        .install_loopback_session(peer, now)
        .map_err(|e| format!("loopback session: {}", e.name()))?;
    device.publish();
    Ok(device)
}

/// A graph that follows `owner`'s device: the same sessions, its own engines.
fn follower_graph(
    engine: Option<&str>,
    owner: &mut WgGraph,
    buffer: usize,
) -> Result<WgGraph, String> {
    let now = Instant::now();
    let device = owner.context().wg_device();
    let keys = device.keys().clone();
    let (link, inbox) = dataplane::wg_follow::link(device.view_cell());
    owner.context_mut().lead_wg_follower(inbox);
    let (engines, _) = engines::configured_set(
        &keys,
        engine,
        Duration::from_millis(6),
        &[crypto::Algorithm::ChaCha20Poly1305],
        buffer,
    )?;
    let own = Device::new(keys, now, SystemTime::now());
    let mut g = WgGraph::new(
        Arena::with_buffers(4 * FRAME + 64, buffer),
        own,
        engines,
        now,
    );
    g.context_mut().follow_wg_device(link);
    Ok(g)
}

/// The graphs of `workers` workers on `peers` devices (see the module doc); with
/// `spread`, every worker on one board that spreads full frames.
pub fn graphs(
    engine: Option<&str>,
    workers: usize,
    peers: usize,
    spread: bool,
    buffer: usize,
) -> Result<Vec<WgGraph>, String> {
    let peers = peers.clamp(1, workers.max(1));
    let mut out: Vec<WgGraph> = Vec::with_capacity(workers);
    for w in 0..workers {
        let g = if w < peers {
            loopback_graph(engine, buffer)?
        } else {
            follower_graph(engine, &mut out[w % peers], buffer)?
        };
        out.push(g);
    }
    if spread && workers > 1 {
        let board = crypto_async::spread::SpreadBoard::new(workers);
        for (i, g) in out.iter_mut().enumerate() {
            g.context_mut().spread_over(board.spreader(i, || {}));
        }
    }
    Ok(out)
}

/// A worker carrying traffic: [`SLICES`] slices of `slice` seconds, each between
/// two meetings at `barrier`; after each it lets the helpers stop (`running`). A
/// panic in the graph is reported, and the worker still keeps every meeting so
/// that the others do not wait for it for ever (every thread at the barrier does
/// the same).
fn carry<G: Loopback>(
    mut d: Driver<G>,
    slice: f64,
    barrier: &Barrier,
    running: &AtomicBool,
) -> Result<Measured, String> {
    let mut panicked = false;
    for _ in 0..SLICES {
        barrier.wait();
        if !panicked {
            let ran = std::panic::catch_unwind(AssertUnwindSafe(|| d.run_for(slice)));
            panicked = ran.is_err();
        }
        running.store(false, Ordering::Release);
        barrier.wait();
    }
    if panicked {
        return Err("worker panicked".into());
    }
    d.finish()
}

/// A worker with no traffic of its own: in each slice it runs pieces of the others'
/// full frames while `running`. Its time counts in the clocks per packet.
fn help<G: Loopback>(
    mut wg: G,
    barrier: &Barrier,
    running: &AtomicBool,
) -> Result<Measured, String> {
    let mut m = Measured::default();
    let mut panicked = false;
    for _ in 0..SLICES {
        barrier.wait();
        let (start, c0) = (Instant::now(), clocks());
        if !panicked {
            let helped = std::panic::catch_unwind(AssertUnwindSafe(|| {
                while running.load(Ordering::Acquire) {
                    wg.context_mut().helper_sleep(Duration::ZERO);
                    if wg.context_mut().help_others() == 0 {
                        std::hint::spin_loop();
                    }
                }
            }));
            panicked = helped.is_err();
        }
        m.clocks = m.clocks.wrapping_add(clocks().wrapping_sub(c0));
        m.elapsed += start.elapsed();
        barrier.wait();
    }
    if panicked {
        return Err("helper panicked".into());
    }
    Ok(m)
}

impl Loopback for WgGraph {
    fn alg(&self) -> crypto::Algorithm {
        crypto::Algorithm::ChaCha20Poly1305
    }

    fn aad_len(&self) -> usize {
        0
    }

    fn text_len(&self, inner: usize) -> usize {
        wire::wireguard::padded_len(inner, self.context().wg_mtu())
    }

    fn context(&self) -> &Context {
        WgGraph::context(self)
    }

    fn context_mut(&mut self) -> &mut Context {
        WgGraph::context_mut(self)
    }

    fn seal(&mut self, inner: &[Handle], back: &mut Vec<Handle>, now: Instant) {
        self.from_tun(inner);
        self.run(now);
        self.context_mut().send_control(|_, _| ());
        back.clear();
        self.context_mut().take_output(UDP_OUT, back);
    }

    fn open(&mut self, back: &[Handle], now: Instant) -> u64 {
        self.from_udp(back);
        self.run(now);
        delivered(self.context_mut(), TUN_OUT)
    }

    /// The transport header's counter: the datagram is the message alone.
    fn wire_counter(&self, h: Handle) -> Option<u64> {
        let d = self.context().arena().data(h);
        let bytes = d.get(8..16)?;
        Some(u64::from_le_bytes(bytes.try_into().ok()?))
    }

    fn node_counters(&self) -> Vec<(&'static str, &NodeCounters)> {
        self.counters().collect()
    }

    fn is_late(reason: &str) -> bool {
        reason == DropReason::Replay.name()
    }

    /// Where a host's TUN read puts them, on an interface whose MTU carries them.
    fn rx_starts(&self, largest: usize) -> RxStarts {
        dataplane::wg::tun_rx_starts(self.context().arena().buffer_size(), largest)
    }
}

/// `workers` workers on `peers` shared tunnels (at least one, at most one per
/// worker): each tunnel made once by `shared`, worker i given tunnel i % peers.
pub(crate) fn on_shared<T, L>(
    workers: usize,
    peers: usize,
    shared: impl Fn() -> Result<T, String>,
    worker: impl Fn(&T) -> Result<L, String>,
) -> Result<Vec<L>, String> {
    let tunnels: Vec<T> = (0..peers.clamp(1, workers.max(1)))
        .map(|_| shared())
        .collect::<Result<_, _>>()?;
    (0..workers)
        .map(|w| worker(&tunnels[w % tunnels.len()]))
        .collect()
}

/// How many packets reached output `out` of a loopback's graph, which are freed:
/// they went all the way round.
pub(crate) fn delivered(cx: &mut Context, out: dataplane::OutputId) -> u64 {
    let mut n = 0;
    cx.send_output(out, |_, packets| n = packets.len() as u64);
    n
}

/// Runs every size on each worker count (the workers at once, summed), `repeat`
/// times in turns, and keeps each point's median run (by Mpps) with the median of
/// the runs' graph-over-raw ratios (see `median_run`).
pub fn run(opts: &Options) -> Result<Vec<Row>, String> {
    run_with(opts, &|workers, peers| graphs_of(opts, workers, peers))
}

/// The WireGuard graphs of `workers` workers on `peers` tunnels, as `opts` asks.
fn graphs_of(opts: &Options, workers: usize, peers: usize) -> Result<Vec<WgGraph>, String> {
    graphs(
        opts.engine.as_deref(),
        workers,
        peers,
        opts.spread,
        opts.buffer(),
    )
}

/// `build`'s graphs and the WireGuard graph on the same workers, each point
/// `repeat` times in turns (the other graph, WireGuard, the other, ...), the median
/// run of each kept (as [`run`] keeps it): the two compared under the same load of
/// the machine.
pub(crate) fn beside_wireguard<G: Loopback>(
    opts: &Options,
    build: &Build<G>,
) -> Result<(Vec<Row>, Vec<Row>), String> {
    in_turns(opts, build, &|workers, peers| {
        graphs_of(opts, workers, peers)
    })
}

/// Two graphs on the same workers, each point `repeat` times in turns (`a`,
/// `b`, `a`, ...), the median run of each kept.
pub(crate) fn in_turns<A: Loopback, B: Loopback>(
    opts: &Options,
    a: &Build<A>,
    b: &Build<B>,
) -> Result<(Vec<Row>, Vec<Row>), String> {
    let once = Options {
        repeat: 1,
        workers: opts.workers.clone(),
        sizes: opts.sizes.clone(),
        engine: opts.engine.clone(),
        ..*opts
    };
    let (mut first, mut second): (Vec<Vec<Row>>, Vec<Vec<Row>>) = (Vec::new(), Vec::new());
    for _ in 0..opts.repeat.max(1) {
        first.push(run_with(&once, a)?);
        second.push(run_with(&once, b)?);
    }
    Ok((medians(first), medians(second)))
}

/// Per point, the run of median Mpps with the median ratio (see [`median_run`]).
fn medians(runs: Vec<Vec<Row>>) -> Vec<Row> {
    let points = runs.first().map_or(0, Vec::len);
    (0..points)
        .map(|i| median_run(runs.iter().map(|r| r[i].clone()).collect()))
        .collect()
}

/// The run of median Mpps among one point's runs, with the median of their
/// graph-over-raw ratios.
fn median_run(mut runs: Vec<Row>) -> Row {
    let mut ratios: Vec<f64> = runs.iter().map(|r| r.graph_over_raw).collect();
    ratios.sort_by(f64::total_cmp);
    runs.sort_by(|a, b| a.mpps.total_cmp(&b.mpps));
    let mut row = runs.swap_remove(runs.len() / 2);
    row.graph_over_raw = ratios[ratios.len() / 2];
    row
}

/// The workers' graphs for a worker count and a number of tunnels they share.
pub(crate) type Build<'a, G> = dyn Fn(usize, usize) -> Result<Vec<G>, String> + 'a;

/// [`run`] on the graphs `build` makes.
pub(crate) fn run_with<G: Loopback>(opts: &Options, build: &Build<G>) -> Result<Vec<Row>, String> {
    let points: Vec<(usize, Size)> = opts
        .workers
        .iter()
        .flat_map(|&w| opts.sizes.iter().map(move |&s| (w, s)))
        .collect();
    let mut runs: Vec<Vec<Row>> = vec![Vec::new(); points.len()];
    for _ in 0..opts.repeat.max(1) {
        for &size in &opts.sizes {
            for (i, &(workers, s)) in points.iter().enumerate() {
                if s == size {
                    runs[i].push(run_workers(opts, build, workers, size)?);
                }
            }
        }
    }
    Ok(runs.into_iter().map(median_run).collect())
}

/// One size on `workers` workers at once.
fn run_workers<G: Loopback>(
    opts: &Options,
    build: &Build<G>,
    workers: usize,
    size: Size,
) -> Result<Row, String> {
    let peers = if opts.spread {
        1
    } else {
        opts.peers.for_workers(workers)
    };
    // The far end of each tunnel, shared by the workers on it (worker w is on
    // tunnel w % peers, as `graphs` builds them).
    let far_ends: Vec<Arc<FarEnd>> = (0..peers.max(1)).map(|_| Arc::default()).collect();
    let drivers: Vec<Driver<G>> = build(workers, peers)?
        .into_iter()
        .enumerate()
        .map(|(w, g)| Driver::new(g, size, Some(far_ends[w % far_ends.len()].clone())))
        .collect();
    let first = drivers.first().ok_or("no worker")?.measured();
    let alg = first.alg.ok_or("the first worker carries traffic")?;
    let (by_class, text_lens) = (first.by_class.clone(), first.text_lens.clone());
    let mut raw = RawMeter::new(alg, Some(first.aad_len), &by_class, &text_lens, size)?;
    let mut seal = RawMeter::new(alg, None, &by_class, &text_lens, size)?;
    let slice = opts.seconds / SLICES as f64;
    // Every worker and this thread meet before and after each slice of traffic;
    // between them this thread measures the raw engines, the workers waiting.
    let barrier = &Barrier::new(drivers.len() + 1);
    let running = &AtomicBool::new(false);
    let (results, raw_done): (Vec<Result<Measured, String>>, Result<(), String>) =
        std::thread::scope(|s| {
            let handles: Vec<_> = drivers
                .into_iter()
                .enumerate()
                .map(|(i, d)| {
                    s.spawn(move || {
                        if opts.spread && i > 0 {
                            help(d.into_graph(), barrier, running)
                        } else {
                            carry(d, slice, barrier, running)
                        }
                    })
                })
                .collect();
            let mut raw_done = Ok(());
            for _ in 0..SLICES {
                running.store(true, Ordering::Release);
                barrier.wait();
                barrier.wait();
                if raw_done.is_ok() {
                    // A panic here is an error too: the workers are waiting.
                    raw_done = std::panic::catch_unwind(AssertUnwindSafe(|| {
                        seal.measure(slice / 4.0)
                            .and_then(|()| raw.measure(slice / 2.0))
                    }))
                    .unwrap_or(Err("the raw measurement panicked".into()));
                }
            }
            let results = handles
                .into_iter()
                .map(|h| h.join().unwrap_or(Err("worker panicked".into())))
                .collect();
            (results, raw_done)
        });
    let ms: Vec<Measured> = results.into_iter().collect::<Result<_, _>>()?;
    raw_done?;
    let secs = ms
        .iter()
        .map(|m| m.elapsed.as_secs_f64())
        .fold(0.0, f64::max);
    let ops: u64 = ms.iter().map(|m| 2 * m.packets).sum();
    let bytes: u64 = ms.iter().map(|m| 2 * m.bytes).sum();
    let clocks: u64 = ms.iter().map(|m| m.clocks).sum();
    let mut nodes = ms[0].nodes.clone();
    for m in &ms[1..] {
        for (a, b) in nodes.iter_mut().zip(&m.nodes) {
            a.1 += b.1;
        }
    }
    for n in nodes.iter_mut() {
        n.1 /= ms.len() as f64 * 2.0; // per packet operation
    }
    let mut engine: Vec<&str> = Vec::new();
    for &(_, text) in &text_lens {
        let e = engine_at(&by_class, text);
        if !engine.contains(&e) {
            engine.push(e);
        }
    }
    let (raw_gbps, raw_seal_gbps) = (raw.gbps(), seal.gbps());
    let gbps = bytes as f64 * 8.0 / secs / 1e9;
    Ok(Row {
        size,
        mpps: ops as f64 / secs / 1e6,
        gbps,
        clocks_per_packet: clocks as f64 / ops as f64,
        nodes,
        peak_rss_kib: peak_rss_kib(),
        engine: engine.join("+"),
        choice: ms[0].choice.clone(),
        raw_gbps,
        raw_seal_gbps,
        graph_over_raw: gbps / workers as f64 / raw_gbps,
        workers,
        peers,
        late: ms.iter().map(|m| m.late).sum(),
        rx_late: ms.iter().map(|m| m.rx_late).sum(),
        resealed: ms.iter().map(|m| m.resealed).sum(),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::measure::Peers;

    #[test]
    fn imix_is_7_4_1() {
        let mut c = std::collections::HashMap::new();
        for i in 0..1200 {
            *c.entry(Size::Imix.nth(i)).or_insert(0) += 1;
        }
        assert_eq!((c[&64], c[&570], c[&1518]), (700, 400, 100));
    }

    #[test]
    fn a_short_run_delivers_everything() {
        let m = crate::driver::drive(
            loopback_graph(None, dataplane::STANDARD_BUFFER).unwrap(),
            Size::Fixed(200),
            0.05,
        )
        .unwrap();
        assert!(m.packets >= 64 * FRAME as u64 / 2);
    }

    #[test]
    fn helpers_run_pieces_of_one_workers_frames() {
        let opts = Options {
            workers: vec![2],
            peers: Peers::Count(1),
            engine: None,
            seconds: 0.1,
            sizes: vec![Size::Fixed(1420)],
            repeat: 1,
            spread: true,
        };
        let row = run(&opts).unwrap().remove(0);
        assert!(row.mpps > 0.0 && row.late == 0);
    }

    /// Of three runs, the point keeps the one of median Mpps, and beside it the
    /// median of the runs' own graph-over-raw ratios (not the kept run's).
    #[test]
    fn repeats_keep_the_median_run_and_the_median_ratio() {
        let base = run(&two_workers_one_tunnel(64)).unwrap().remove(0);
        let runs = |points: [(f64, f64); 3]| -> Vec<Row> {
            points
                .iter()
                .map(|&(mpps, graph_over_raw)| Row {
                    mpps,
                    graph_over_raw,
                    ..base.clone()
                })
                .collect()
        };
        let kept = median_run(runs([(3.0, 0.9), (1.0, 0.5), (2.0, 0.6)]));
        assert_eq!((kept.mpps, kept.graph_over_raw), (2.0, 0.6));
        let kept = median_run(runs([(1.0, 0.9), (2.0, 0.1), (3.0, 0.5)]));
        assert_eq!((kept.mpps, kept.graph_over_raw), (2.0, 0.5));
    }

    /// Two workers on one tunnel, one short run of one size.
    pub(crate) fn two_workers_one_tunnel(size: usize) -> Options {
        Options {
            workers: vec![2],
            peers: Peers::Count(1),
            engine: None,
            seconds: 0.05,
            sizes: vec![Size::Fixed(size)],
            repeat: 1,
            spread: false,
        }
    }

    #[test]
    fn workers_on_one_peer_share_its_tunnel() {
        let rows = run(&two_workers_one_tunnel(100)).unwrap();
        assert_eq!((rows[0].workers, rows[0].peers), (2, 1));
        assert!(rows[0].mpps > 0.0);
        assert_eq!(Peers::parse("each").unwrap().for_workers(4), 4);
        assert_eq!(Peers::parse("9").unwrap().for_workers(4), 4);
        assert!(Peers::parse("0").is_err());
    }
}
