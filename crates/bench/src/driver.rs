//! One worker's traffic in the graph bench: inner packets of one size made, pushed
//! through the worker's graph and counted, in as many timed slices as the caller
//! asks for. The slices let the bench measure the raw engines between them, so that
//! the graph and its baseline share whatever else the machine is doing (see
//! `wg_graph::run_workers`).

use crate::measure::{Loopback, Measured, Size, inner_packet};
use dataplane::counters::clocks;
use dataplane::graph::FRAME_LEN as FRAME;
use dataplane::{Handle, RxStarts};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The far end of a tunnel the workers share, as the bench models it: a receive
/// window of the usual size (`wireguard::constants::PEER_WINDOW`, the Linux and Go
/// implementations') that sees every datagram the moment its worker hands it over
/// (a wire that neither delays nor reorders). A counter more than the window
/// behind the newest it has seen is what a real far end would refuse as late: a
/// packet a worker sent too far behind the others'. (Counters are never sent twice,
/// `one_tunnel_many_workers` checks, so lateness is the only refusal modelled.)
#[derive(Default)]
pub(crate) struct FarEnd {
    /// The newest counter seen, plus one (0: none yet).
    newest: AtomicU64,
}

impl FarEnd {
    /// Sees the counters of one handing-over, in order; how many are late.
    fn take(&self, counters: &[u64]) -> u64 {
        const W: u64 = wireguard::constants::PEER_WINDOW;
        // What every handing-over before this one left, this one's newest taken
        // at once: a worker handing over at the same moment is seen either way.
        let batch_newest = counters.iter().map(|&c| c + 1).max().unwrap_or(0);
        let mut newest = self.newest.fetch_max(batch_newest, Ordering::AcqRel);
        let mut late = 0;
        for &c in counters {
            if newest > c + 1 + W {
                late += 1;
            }
            newest = newest.max(c + 1);
        }
        late
    }
}

/// A worker's graph and what it has measured so far.
pub(crate) struct Driver<G: Loopback> {
    g: G,
    size: Size,
    handles: Vec<Handle>,
    back: Vec<Handle>,
    /// The number of the next packet made (its size, for IMIX, and its IP id).
    seq: usize,
    /// Where each buffer's packet is made: where the tunnel's source of inner
    /// packets would receive it (see `Loopback::rx_starts`).
    starts: RxStarts,
    /// The far end the tunnel's datagrams reach, if the tunnel says their counters.
    far_end: Option<Arc<FarEnd>>,
    counters: Vec<u64>,
    /// Whether any datagram was handed to the far end: the graph's own replay
    /// refusals then count as `rx_late`.
    modelled: bool,
    m: Measured,
}

impl<G: Loopback> Driver<G> {
    /// Ready to drive `g` with packets of `size`; nothing measured yet.
    pub(crate) fn new(g: G, size: Size, far_end: Option<Arc<FarEnd>>) -> Driver<G> {
        let set = g.context().engines();
        let alg = g.alg();
        let m = Measured {
            alg: Some(alg),
            aad_len: g.aad_len(),
            text_lens: size
                .sizes()
                .into_iter()
                .map(|n| (n, g.text_len(n)))
                .collect(),
            choice: set.describe(alg),
            by_class: crypto::size_class::SIZES
                .iter()
                .map(|&n| set.chosen_for(alg, n as u32).unwrap_or("none").to_string())
                .collect(),
            ..Measured::default()
        };
        let starts = g.rx_starts(size.sizes().into_iter().max().unwrap_or(0));
        Driver {
            g,
            starts,
            size,
            handles: Vec::with_capacity(FRAME),
            back: Vec::with_capacity(FRAME),
            seq: 0,
            far_end,
            counters: Vec::with_capacity(FRAME),
            modelled: false,
            m,
        }
    }

    /// What the graph is set up to run (its algorithm, AAD, texts and engines), and
    /// what it has measured so far.
    pub(crate) fn measured(&self) -> &Measured {
        &self.m
    }

    /// The graph, for a worker that helps others instead of carrying traffic.
    pub(crate) fn into_graph(self) -> G {
        self.g
    }

    /// Pushes frames through the graph for about `seconds` (in steps of 64 frames
    /// between readings of the clock), adding to the totals.
    pub(crate) fn run_for(&mut self, seconds: f64) {
        let start = Instant::now();
        let c0 = clocks();
        let deadline = start + Duration::from_secs_f64(seconds);
        let mut rounds = 0u64;
        // The clock is read once per 64 frames.
        while !rounds.is_multiple_of(64) || Instant::now() < deadline {
            rounds += 1;
            self.handles.clear();
            let arena = self.g.context_mut().arena_mut();
            for _ in 0..FRAME {
                let Some(h) = arena.alloc() else { break };
                let len = self.size.nth(self.seq);
                let start = self.starts.of(h);
                let buf = arena.buffer_mut(h);
                inner_packet(&mut buf[start..], len, self.seq as u16);
                let meta = arena.meta_mut(h);
                meta.offset = start as u16;
                meta.len = len as u16;
                self.m.bytes += len as u64;
                self.seq += 1;
                self.handles.push(h);
            }
            let now = Instant::now();
            self.g.seal(&self.handles, &mut self.back, now);
            if let Some(far) = &self.far_end {
                self.counters.clear();
                self.counters
                    .extend(self.back.iter().filter_map(|&h| self.g.wire_counter(h)));
                // As a driver does just before it hands the datagrams over; what it
                // sealed again has new counters.
                let before = self.g.context().late_counters();
                self.g.context_mut().check_late_again(&mut self.back);
                if self.g.context().late_counters() != before {
                    self.counters.clear();
                    self.counters
                        .extend(self.back.iter().filter_map(|&h| self.g.wire_counter(h)));
                }
                if !self.counters.is_empty() {
                    self.modelled = true;
                    self.m.late += far.take(&self.counters);
                }
            }
            self.m.packets += self.g.open(&self.back, now);
        }
        self.m.clocks = self.m.clocks.wrapping_add(clocks().wrapping_sub(c0));
        self.m.elapsed += start.elapsed();
    }

    /// The totals, with each node's clocks per packet; an error when a packet was
    /// dropped (say where), except a late packet on a shared tunnel, which is
    /// counted, or when none made it through.
    pub(crate) fn finish(self) -> Result<Measured, String> {
        let mut m = self.m;
        let delivered = m.packets.max(1) as f64;
        let counters = self.g.node_counters();
        m.nodes = counters
            .iter()
            .map(|(name, c)| (name.to_string(), c.clocks as f64 / delivered))
            .collect();
        let mut drops: Vec<String> = Vec::new();
        let late_check = self.g.context().late_counters();
        m.resealed = late_check.resealed;
        if late_check.dropped > 0 {
            drops.push(format!(
                "{}: {} unsealable",
                dataplane::seal_ledger::NAME,
                late_check.dropped
            ));
        }
        for (node, c) in &counters {
            for (e, n) in c.drops().filter(|&(_, n)| n > 0) {
                if G::is_late(e.name) && self.modelled {
                    m.rx_late += n;
                } else if G::is_late(e.name) {
                    m.late += n;
                } else {
                    drops.push(format!("{node}: {n} {}", e.name));
                }
            }
        }
        if !drops.is_empty() {
            return Err(format!(
                "packets dropped in the graph ({})",
                drops.join(", ")
            ));
        }
        if m.packets == 0 {
            return Err("no packet made it through the graph".into());
        }
        Ok(m)
    }
}

/// Pushes packets of `size` through `g` for `seconds`, in one slice.
pub(crate) fn drive<G: Loopback>(g: G, size: Size, seconds: f64) -> Result<Measured, String> {
    let mut d = Driver::new(g, size, None);
    d.run_for(seconds);
    d.finish()
}
