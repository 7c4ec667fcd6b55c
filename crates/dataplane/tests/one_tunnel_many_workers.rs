//! One tunnel on several workers, in memory: two sites, each with an owner worker
//! (the device) and followers on the same sessions, every worker on its own thread.
//! What must hold whatever the interleaving: no (session, counter) pair is ever sent
//! twice, across workers and rekeys; every datagram is accepted once, whichever worker
//! it reaches, duplicates included; and the packets of one inner flow arrive in the
//! order they were sent.

mod sim;

use crypto::EngineSet;
use crypto::x25519::PrivateKey;
use dataplane::wg::{TUN_OUT, UDP_OUT, WgGraph};
use dataplane::{Arena, wg_follow};
use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime};
use wireguard::{Device, DropReason};

const BUFFERS: usize = 2048;

/// A site: its workers' graphs, the owner first.
struct Site {
    workers: Vec<WgGraph>,
    addr: SocketAddr,
}

fn engines() -> EngineSet {
    EngineSet::new(vec![Box::new(crypto_awslc::AwsLcEngine::new())])
}

fn site(
    me: &PrivateKey,
    them: &PrivateKey,
    addr: &str,
    peer_addr: Option<&str>,
    allowed: &str,
    workers: usize,
    now: Instant,
) -> Site {
    let (mut device, _) = sim::device_with_peer(me, them, peer_addr, allowed, now);
    let keys = device.keys().clone();
    device.publish();
    let cell = device.view_cell();
    let mut owner = WgGraph::new(Arena::new(BUFFERS), device, engines(), now);
    let mut followers = Vec::new();
    for _ in 1..workers {
        let (link, inbox) = wg_follow::link(cell.clone());
        owner.context_mut().lead_wg_follower(inbox);
        let own = Device::new(keys.clone(), now, SystemTime::now());
        let mut g = WgGraph::new(Arena::new(BUFFERS), own, engines(), now);
        g.context_mut().follow_wg_device(link);
        followers.push(g);
    }
    let mut all = vec![owner];
    all.extend(followers);
    // Full frames spread over the site's workers, as in host mode and the gateway.
    let board = crypto_async::spread::SpreadBoard::new(workers);
    for (i, g) in all.iter_mut().enumerate() {
        g.context_mut().spread_over(board.spreader(i, || {}));
    }
    Site {
        workers: all,
        addr: addr.parse().unwrap(),
    }
}

/// An inner IPv4/UDP packet of flow `flow` with sequence number `seq`.
fn packet(flow: u8, seq: u32) -> Vec<u8> {
    let mut p = vec![0u8; 60];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&60u16.to_be_bytes());
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&[198, 19, 0, 1]);
    p[16..20].copy_from_slice(&[198, 19, 0, 2]);
    p[20..22].copy_from_slice(&(1000 + flow as u16).to_be_bytes());
    p[22..24].copy_from_slice(&9u16.to_be_bytes());
    p[28] = flow;
    p[29..33].copy_from_slice(&seq.to_be_bytes());
    p
}

/// [`packet`], `len` bytes long.
fn packet_of(flow: u8, seq: u32, len: usize) -> Vec<u8> {
    let mut p = packet(flow, seq);
    p.resize(len, 0);
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p[24..26].copy_from_slice(&((len - 20) as u16).to_be_bytes());
    p
}

fn flow_and_seq(p: &[u8]) -> (u8, u32) {
    (p[28], u32::from_be_bytes(p[29..33].try_into().unwrap()))
}

/// What a worker is given: inner packets to send, datagrams received.
#[derive(Default)]
struct In {
    inner: Vec<Vec<u8>>,
    datagrams: Vec<Vec<u8>>,
}

/// What a worker put out: datagrams for the wire, inner packets delivered.
#[derive(Default)]
struct Out {
    wire: Vec<Vec<u8>>,
    delivered: Vec<Vec<u8>>,
}

fn collect(g: &mut WgGraph, out: &mut Out) {
    let cx = g.context_mut();
    cx.send_output(UDP_OUT, |arena, hs| {
        out.wire.extend(hs.iter().map(|&h| arena.data(h).to_vec()))
    });
    cx.send_output(TUN_OUT, |arena, hs| {
        out.delivered
            .extend(hs.iter().map(|&h| arena.data(h).to_vec()))
    });
}

/// `g` takes `datagrams` from `from`, in frames of 200; what it puts out goes to
/// `out`.
fn receive(g: &mut WgGraph, from: SocketAddr, datagrams: &[Vec<u8>], now: Instant, out: &mut Out) {
    for chunk in datagrams.chunks(200) {
        let hs: Vec<_> = chunk
            .iter()
            .map(|d| {
                let arena = g.context_mut().arena_mut();
                let h = arena.alloc_with(d).expect("arena");
                arena.meta_mut(h).addr = from;
                h
            })
            .collect();
        g.from_udp(&hs);
        g.run(now);
        collect(g, out);
    }
}

/// Each worker on its own thread: `input(worker)` gives its (inner packets, datagrams)
/// to push through, in frames.
fn run_workers(site: &mut Site, now: Instant, from: SocketAddr, inputs: Vec<In>) -> Vec<Out> {
    // Workers done with their own input help the others until every one is done.
    let busy = std::sync::atomic::AtomicUsize::new(site.workers.len());
    let busy = &busy;
    std::thread::scope(|s| {
        let handles: Vec<_> = site
            .workers
            .iter_mut()
            .zip(inputs)
            .map(|(g, In { inner, datagrams })| {
                s.spawn(move || {
                    let mut out = Out::default();
                    for chunk in inner.chunks(200) {
                        let hs: Vec<_> = chunk
                            .iter()
                            .map(|p| g.context_mut().arena_mut().alloc_with(p).expect("arena"))
                            .collect();
                        g.from_tun(&hs);
                        g.run(now);
                        collect(g, &mut out);
                    }
                    receive(g, from, &datagrams, now, &mut out);
                    busy.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
                    while busy.load(std::sync::atomic::Ordering::Acquire) > 0 {
                        g.context_mut().helper_sleep(Duration::ZERO);
                        if g.context_mut().help_others() == 0 {
                            std::thread::yield_now();
                        }
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a worker"))
            .collect()
    })
}

/// Runs timers and the owners' handshakes until the wire is quiet (one thread).
fn settle(a: &mut Site, b: &mut Site, now: Instant) {
    let mut wire: Vec<(bool, Vec<u8>)> = Vec::new();
    for _ in 0..50 {
        for (to_b, site) in [(true, &mut *a), (false, &mut *b)] {
            for g in site.workers.iter_mut() {
                g.tick(now);
                g.run(now);
                g.context_mut()
                    .send_control(|_, m| wire.push((to_b, m.to_vec())));
                let mut out = Out::default();
                collect(g, &mut out);
                wire.extend(out.wire.into_iter().map(|d| (to_b, d)));
            }
        }
        if wire.is_empty() {
            return;
        }
        for (to_b, d) in wire.drain(..) {
            let (site, from) = if to_b {
                (&mut *b, a.addr)
            } else {
                (&mut *a, b.addr)
            };
            let g = &mut site.workers[0];
            let arena = g.context_mut().arena_mut();
            let h = arena.alloc_with(&d).expect("arena");
            arena.meta_mut(h).addr = from;
            g.from_udp(&[h]);
        }
    }
    panic!("the two sites never went quiet");
}

fn two_sites(workers: usize, now: Instant) -> (Site, Site) {
    let (ka, kb) = (PrivateKey::generate(), PrivateKey::generate());
    let a = site(
        &ka,
        &kb,
        "198.18.0.1:51820",
        Some("198.18.0.2:51820"),
        "198.19.0.2/32",
        workers,
        now,
    );
    let b = site(
        &kb,
        &ka,
        "198.18.0.2:51820",
        None,
        "198.19.0.1/32",
        workers,
        now,
    );
    (a, b)
}

/// Starts the tunnel: one packet from A's owner, the handshake, and B's view.
fn handshake(a: &mut Site, b: &mut Site, now: Instant) {
    let h = a.workers[0]
        .context_mut()
        .arena_mut()
        .alloc_with(&packet(0, 0))
        .unwrap();
    a.workers[0].from_tun(&[h]);
    settle(a, b, now);
}

fn receiver_index_and_counter(d: &[u8]) -> (u32, u64) {
    (
        u32::from_le_bytes(d[4..8].try_into().unwrap()),
        u64::from_le_bytes(d[8..16].try_into().unwrap()),
    )
}

/// The wire as the sending workers fill it: each worker's datagrams in its own order,
/// the workers interleaved as their counters were taken, give or take `slack` (a
/// worker sends a block's packets as soon as it took the block; which worker goes
/// first within the slack is up to the scheduler, here a seeded generator).
fn merge_as_sent(outs: Vec<Vec<Vec<u8>>>, slack: u64, seed: u64) -> Vec<Vec<u8>> {
    let mut queues: Vec<std::collections::VecDeque<Vec<u8>>> =
        outs.into_iter().map(Into::into).collect();
    let mut state = seed | 1;
    let mut wire = Vec::new();
    loop {
        let heads: Vec<(usize, u64)> = queues
            .iter()
            .enumerate()
            .filter_map(|(i, q)| q.front().map(|d| (i, receiver_index_and_counter(d).1)))
            .collect();
        let Some(lowest) = heads.iter().map(|&(_, c)| c).min() else {
            return wire;
        };
        let ready: Vec<usize> = heads
            .iter()
            .filter(|&&(_, c)| c <= lowest + slack)
            .map(|&(i, _)| i)
            .collect();
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let pick = ready[(state % ready.len() as u64) as usize];
        wire.push(queues[pick].pop_front().expect("a head"));
    }
}

fn drops(site: &Site, node: &str, reason: DropReason) -> u64 {
    site.workers
        .iter()
        .map(|g| {
            g.counters()
                .find(|(n, _)| *n == node)
                .map_or(0, |(_, c)| c.drops_named(reason.name()))
        })
        .sum()
}

#[test]
fn no_counter_is_sent_twice_across_workers_and_rekeys_and_each_datagram_is_taken_once() {
    const WORKERS: usize = 4;
    const PER_WORKER: usize = 4096;
    const ROUNDS: usize = 64;
    let mut now = Instant::now();
    let (mut a, mut b) = two_sites(WORKERS, now);
    handshake(&mut a, &mut b, now);
    let mut sent: HashSet<(u32, u64)> = HashSet::new();
    let mut sessions: HashSet<u32> = HashSet::new();
    let (mut datagrams, mut delivered, mut duplicates) = (0u64, 0u64, 0u64);
    for round in 0..ROUNDS {
        let inputs = (0..WORKERS)
            .map(|w| {
                let inner = (0..PER_WORKER)
                    .map(|i| packet(w as u8, (round * PER_WORKER + i) as u32))
                    .collect();
                In {
                    inner,
                    datagrams: Vec::new(),
                }
            })
            .collect();
        let outs = run_workers(&mut a, now, b.addr, inputs);
        for d in outs.iter().flat_map(|o| &o.wire) {
            let key = receiver_index_and_counter(d);
            assert!(
                sent.insert(key),
                "round {round}: session {:#x} counter {} sent twice",
                key.0,
                key.1
            );
            sessions.insert(key.0);
        }
        let wire = merge_as_sent(
            outs.into_iter().map(|o| o.wire).collect(),
            1024,
            round as u64,
        );
        datagrams += wire.len() as u64;
        // B's workers take the wire a slice at a time, all at once, each datagram on
        // some worker and one in 16 also on another: their commits race on the
        // shared window.
        for slice in wire.chunks(1024) {
            let mut inputs: Vec<In> = (0..WORKERS).map(|_| In::default()).collect();
            for (i, d) in slice.iter().enumerate() {
                if i % 16 == 0 {
                    inputs[(i / 16 + 1) % WORKERS].datagrams.push(d.clone());
                    duplicates += 1;
                }
                inputs[i % WORKERS].datagrams.push(d.clone());
            }
            for out in run_workers(&mut b, now, a.addr, inputs) {
                delivered += out.delivered.len() as u64;
            }
        }
        // Time passes: the sessions are renewed every few rounds.
        now += Duration::from_secs(40);
        settle(&mut a, &mut b, now);
    }
    assert!(datagrams >= (WORKERS * PER_WORKER * ROUNDS) as u64);
    assert!(
        sessions.len() >= 10,
        "the sessions were renewed: {} seen",
        sessions.len()
    );
    assert_eq!(delivered, datagrams, "every datagram delivered once");
    assert_eq!(
        drops(&b, "wg-decrypt", DropReason::Replay),
        duplicates,
        "every copy refused"
    );
}

#[test]
fn the_packets_of_each_flow_arrive_in_order() {
    // Whether the other workers get a core in time to help is up to the scheduler
    // (here, with the other tests, many threads on few cores): the order must hold
    // every time, and some attempt must have had help.
    let mut helped = 0;
    for _ in 0..8 {
        helped += one_tunnel_in_order();
        if helped > 0 {
            break;
        }
    }
    assert!(
        helped > 0,
        "the receiving worker never had help with its frames"
    );
}

/// One run of 8 flows through one tunnel on 4 workers per site, checked for order;
/// returns how many pieces of the receiving worker's frames other workers ran.
fn one_tunnel_in_order() -> u64 {
    const WORKERS: usize = 4;
    const FLOWS: u8 = 8;
    const PER_FLOW: u32 = 3000;
    let now = Instant::now();
    let (mut a, mut b) = two_sites(WORKERS, now);
    handshake(&mut a, &mut b, now);
    // As a multi-queue TUN does: each flow to one worker, by its hash.
    let mut inputs: Vec<In> = (0..WORKERS).map(|_| In::default()).collect();
    for seq in 0..PER_FLOW {
        for flow in 0..FLOWS {
            inputs[flow as usize % WORKERS]
                .inner
                .push(packet(flow, seq));
        }
    }
    let outs = run_workers(&mut a, now, b.addr, inputs);
    let wire = merge_as_sent(outs.into_iter().map(|o| o.wire).collect(), 1024, 7);
    // One outer 5-tuple: everything arrives on one queue, B's first worker's.
    let mut inputs: Vec<In> = (0..WORKERS).map(|_| In::default()).collect();
    inputs[0].datagrams = wire;
    let outs = run_workers(&mut b, now, a.addr, inputs);
    let mut next = [0u32; FLOWS as usize];
    let mut count = 0;
    for p in outs.iter().flat_map(|o| &o.delivered) {
        let (flow, seq) = flow_and_seq(p);
        assert_eq!(seq, next[flow as usize], "flow {flow} out of order");
        next[flow as usize] += 1;
        count += 1;
    }
    assert_eq!(count, FLOWS as u32 * PER_FLOW, "every packet delivered");
    let spread = b.workers[0].context().spread_counters().unwrap();
    assert_eq!(
        spread.pieces_helped + spread.pieces_taken_back,
        b.workers[1..]
            .iter()
            .map(|g| g.context().spread_counters().unwrap().pieces_run_for_others)
            .sum::<u64>()
            + spread.pieces_taken_back,
        "every piece was run once, by a helper or taken back"
    );
    spread.pieces_helped
}

/// Seals `n` inner packets of `flow`, `len` bytes each, on worker `w` of `site` in
/// frames of 200; what it sealed goes to `sent` after each frame, or with `None`
/// stays in its output queue.
fn seal_on(
    site: &mut Site,
    w: usize,
    (flow, len): (u8, usize),
    n: u32,
    now: Instant,
    mut sent: Option<&mut Out>,
) {
    let g = &mut site.workers[w];
    for chunk in (0..n).collect::<Vec<_>>().chunks(200) {
        let hs: Vec<_> = chunk
            .iter()
            .map(|&seq| {
                g.context_mut()
                    .arena_mut()
                    .alloc_with(&packet_of(flow, seq, len))
                    .expect("arena")
            })
            .collect();
        g.from_tun(&hs);
        g.run(now);
        if let Some(out) = sent.as_deref_mut() {
            collect(g, out);
        }
    }
}

/// B's owner takes `wire` in order; how many inner packets it delivered.
fn deliver(b: &mut Site, from: SocketAddr, wire: &[Vec<u8>], now: Instant) -> usize {
    let mut out = Out::default();
    receive(&mut b.workers[0], from, wire, now, &mut out);
    out.delivered.len()
}

#[test]
fn a_worker_held_back_past_the_window_seals_its_packets_again_and_none_arrives_late() {
    held_back(60);
}

/// The same with packets of the MTU, whose padding stops at the MTU (1420: not a
/// multiple of 16).
#[test]
fn a_worker_held_back_with_full_size_packets_seals_them_again() {
    held_back(1420);
}

/// A follower seals a frame of `len`-byte packets and is held back while the
/// owner sends more than a window; its frame leaves sealed again.
fn held_back(len: usize) {
    let now = Instant::now();
    let (mut a, mut b) = two_sites(2, now);
    for g in a.workers.iter_mut().chain(b.workers.iter_mut()) {
        g.set_mtu(1420);
    }
    handshake(&mut a, &mut b, now);
    // A's follower seals a frame and stalls before its driver takes it...
    seal_on(&mut a, 1, (1, len), 200, now, None);
    // ...while the owner sends more than a window on the same session.
    let window = wireguard::replay::WINDOW_SIZE as u32;
    let mut first = Out::default();
    seal_on(&mut a, 0, (0, 60), window + 1000, now, Some(&mut first));
    assert_eq!(first.wire.len(), (window + 1000) as usize);
    let delivered = deliver(&mut b, a.addr, &first.wire, now);
    assert_eq!(delivered, first.wire.len());
    // The follower comes back: its frame is far behind, so it is sealed again.
    let mut late = Out::default();
    collect(&mut a.workers[1], &mut late);
    assert_eq!(late.wire.len(), 200);
    let newest_before = first
        .wire
        .iter()
        .map(|d| receiver_index_and_counter(d).1)
        .max()
        .unwrap();
    for d in &late.wire {
        assert!(receiver_index_and_counter(d).1 > newest_before);
    }
    let counters = a.workers[1].context().late_counters();
    assert_eq!((counters.resealed, counters.dropped), (200, 0));
    assert_eq!(a.workers[0].context().late_counters().resealed, 0);
    let delivered = deliver(&mut b, a.addr, &late.wire, now);
    assert_eq!(delivered, 200, "every resealed packet opens at the far end");
    assert_eq!(drops(&b, "wg-decrypt", DropReason::Replay), 0);
}

#[test]
fn a_worker_a_little_behind_sends_as_sealed() {
    let len = 60;
    let now = Instant::now();
    let (mut a, mut b) = two_sites(2, now);
    handshake(&mut a, &mut b, now);
    seal_on(&mut a, 1, (1, len), 200, now, None);
    let (mut first, mut second) = (Out::default(), Out::default());
    seal_on(&mut a, 0, (0, 60), 2000, now, Some(&mut first));
    collect(&mut a.workers[1], &mut second);
    let mut wire = first.wire;
    wire.extend(second.wire);
    assert_eq!(deliver(&mut b, a.addr, &wire, now), 2200);
    assert_eq!(a.workers[1].context().late_counters().resealed, 0);
    assert_eq!(drops(&b, "wg-decrypt", DropReason::Replay), 0);
}
