//! The whole WireGuard graph, two sites, in memory.

mod sim;
use dataplane::wg::UDP_OUT;
use sim::{Net, inner_v4};
use std::time::Duration;
use wireguard::DropReason;

#[test]
fn handshake_then_data_both_ways() {
    let mut net = Net::new();
    assert!(
        net.ping_a_to_b(1),
        "first packet is staged, then delivered after the handshake"
    );
    assert!(
        net.ping_b_to_a(2),
        "B learned A's endpoint from the handshake"
    );
    for i in 0..50 {
        assert!(net.ping_a_to_b(i));
        assert!(net.ping_b_to_a(i));
    }
    let info = net.a.peer_info();
    assert!(info.last_handshake.is_some());
    assert!(info.tx_bytes > 0 && info.rx_bytes > 0);
}

#[test]
fn padding_is_stripped_and_sizes_survive() {
    let mut net = Net::new();
    assert!(net.ping_a_to_b(0));
    for len in [0usize, 1, 15, 16, 17, 100, 1000, 1400] {
        let p = inner_v4([198, 19, 0, 1], [198, 19, 0, 2], &vec![len as u8; len]);
        net.send(false, &p);
        net.deliver();
        assert_eq!(net.b.delivered.last(), Some(&p), "len {len}");
    }
}

#[test]
fn no_encrypted_packet_is_padded_past_the_mtu() {
    // Transport header and tag: what WireGuard adds to the padded inner packet.
    const OVERHEAD: usize = 16 + 16;
    use dataplane::{JUMBO_BUFFER, STANDARD_BUFFER};
    let standard = [1420usize, 1280, dataplane::wg::max_mtu(STANDARD_BUFFER)];
    let jumbo = [9000, dataplane::wg::max_mtu(JUMBO_BUFFER)];
    let runs = standard
        .map(|m| (m, false))
        .into_iter()
        .chain(jumbo.map(|m| (m, true)));
    for (mtu, large) in runs {
        let mut net = if large { Net::jumbo() } else { Net::new() };
        net.a.graph.set_mtu(mtu);
        net.b.graph.set_mtu(mtu);
        assert!(net.ping_a_to_b(0));
        for len in 20..=mtu {
            let p = inner_v4([198, 19, 0, 1], [198, 19, 0, 2], &vec![len as u8; len - 20]);
            net.send(false, &p);
            for (_, bytes, _) in &net.wire {
                assert!(
                    bytes.len() <= mtu + OVERHEAD,
                    "mtu {mtu}: a {len}-byte inner packet became {} bytes",
                    bytes.len()
                );
            }
            net.deliver();
            assert!(
                net.b.delivered.last() == Some(&p),
                "mtu {mtu}: a {len}-byte inner packet did not arrive intact"
            );
        }
    }
}

#[test]
fn inner_source_outside_allowed_ips_is_dropped() {
    let mut net = Net::new();
    assert!(net.ping_a_to_b(0));
    let spoofed = inner_v4([198, 19, 0, 99], [198, 19, 0, 2], b"spoof");
    let before = net.b.delivered.len();
    net.send(false, &spoofed);
    net.deliver();
    assert_eq!(net.b.delivered.len(), before);
    assert_eq!(
        net.counter(true, "wg-decrypt", DropReason::SourceNotAllowed),
        1
    );
}

#[test]
fn duplicates_dropped_reorder_delivered() {
    let mut net = Net::new();
    assert!(net.ping_a_to_b(0));
    // Capture five datagrams instead of delivering them.
    let mut captured = Vec::new();
    for i in 0..5u8 {
        net.send(false, &inner_v4([198, 19, 0, 1], [198, 19, 0, 2], &[i; 20]));
        captured.append(&mut net.wire);
    }
    let before = net.b.delivered.len();
    // Deliver in reverse order, each twice.
    for d in captured.iter().rev() {
        net.wire.push(d.clone());
        net.wire.push(d.clone());
    }
    net.deliver();
    assert_eq!(net.b.delivered.len() - before, 5, "each delivered once");
    assert_eq!(net.counter(true, "wg-decrypt", DropReason::Replay), 5);
}

/// One frame of good packets, a replay of one of them, a forged copy of another
/// and a packet whose inner source the peer may not use: wg-decrypt checks every
/// packet, commits the frame's counters together, drops each bad one under its own
/// reason, and passes the good ones on in their order. The forged copy, dropped
/// before its commit, does not take its counter from the real packet behind it.
#[test]
fn a_frame_of_good_and_bad_packets_is_sorted_packet_by_packet() {
    let mut net = Net::new();
    assert!(net.ping_a_to_b(0));
    let good: Vec<Vec<u8>> = (0..4u8)
        .map(|i| inner_v4([198, 19, 0, 1], [198, 19, 0, 2], &[i; 30]))
        .collect();
    let mut sent = Vec::new();
    for p in &good {
        net.send(false, p);
        sent.append(&mut net.wire);
    }
    net.send(
        false,
        &inner_v4([198, 19, 0, 99], [198, 19, 0, 2], b"spoof"),
    );
    let spoofed = net.wire.pop().expect("the spoofed datagram");
    let mut forged = sent[1].clone();
    *forged.1.last_mut().expect("a tag") ^= 1;
    let before = net.b.delivered.len();
    let counts = |net: &Net| {
        [
            DropReason::Replay,
            DropReason::BadTag,
            DropReason::SourceNotAllowed,
        ]
        .map(|r| net.counter(true, "wg-decrypt", r))
    };
    let counted = counts(&net);
    net.wire = vec![
        sent[0].clone(),
        sent[0].clone(),
        forged,
        sent[1].clone(),
        spoofed,
        sent[2].clone(),
        sent[3].clone(),
    ];
    net.deliver_together();
    assert_eq!(
        net.b.delivered[before..],
        good[..],
        "the good ones, in order"
    );
    let now = counts(&net);
    let added: Vec<u64> = now.iter().zip(counted).map(|(n, c)| n - c).collect();
    assert_eq!(
        added,
        [1, 1, 1],
        "one replay, one forgery, one spoofed source"
    );
}

/// One frame of inner packets to the peer, with two to an address no peer has
/// among them: wg-encrypt looks the destination up again wherever it changes and
/// takes the peer's counters in turn across the frame, so the peer's packets all
/// arrive, in order, and the strays are counted.
#[test]
fn a_frame_to_mixed_destinations_keeps_each_packets_peer() {
    let mut net = Net::new();
    assert!(net.ping_a_to_b(0));
    let to_b = |i: u8| inner_v4([198, 19, 0, 1], [198, 19, 0, 2], &[i; 24]);
    let stray = inner_v4([198, 19, 0, 1], [198, 19, 0, 77], b"nobody's");
    let frame = [to_b(1), to_b(2), stray.clone(), to_b(3), stray, to_b(4)];
    let before = net.b.delivered.len();
    let strays = |net: &Net| net.counter(false, "wg-encrypt", DropReason::NoPeerForDestination);
    let counted = strays(&net);
    net.send_together(false, &frame);
    let counters: Vec<u64> = net
        .wire
        .iter()
        .map(|(_, bytes, _)| u64::from_le_bytes(bytes[8..16].try_into().expect("a counter")))
        .collect();
    assert_eq!(counters.len(), 4, "one datagram per packet to the peer");
    assert!(
        counters.windows(2).all(|w| w[1] == w[0] + 1),
        "the peer's counters in turn: {counters:?}"
    );
    net.deliver_together();
    assert_eq!(
        net.b.delivered[before..],
        [to_b(1), to_b(2), to_b(3), to_b(4)]
    );
    assert_eq!(strays(&net) - counted, 2);
}

/// One frame of data on two sessions of the peer, interleaved: the last packets
/// sent on a session past its rekey time, and the first on the session the rekey
/// made. wg-decrypt finds each packet's session by its receiver index again
/// wherever the index changes, so all four arrive, in order.
#[test]
fn a_frame_across_two_sessions_finds_each_packets_session() {
    let mut net = Net::new();
    assert!(net.ping_a_to_b(0));
    // Idle past REKEY_AFTER_TIME: the next data sent asks for a new session.
    net.advance(Duration::from_secs(121), Duration::from_secs(1));
    let packet = |i: u8| inner_v4([198, 19, 0, 1], [198, 19, 0, 2], &[i; 36]);
    let mut sent = Vec::new();
    for i in [1, 3] {
        net.send(false, &packet(i));
        sent.append(&mut net.wire);
    }
    let is_data = |d: &(bool, Vec<u8>, std::net::SocketAddr)| d.1[0] == 4;
    let (old, handshake): (Vec<_>, Vec<_>) = sent.into_iter().partition(is_data);
    assert_eq!(
        (old.len(), handshake.len()),
        (2, 1),
        "two data, one initiation"
    );
    net.wire = handshake;
    net.deliver();
    let mut new = Vec::new();
    for i in [2, 4] {
        net.send(false, &packet(i));
        new.append(&mut net.wire);
    }
    let index = |d: &(bool, Vec<u8>, std::net::SocketAddr)| d.1[4..8].to_vec();
    assert!(new.iter().all(is_data));
    assert_ne!(index(&old[0]), index(&new[0]), "two sessions");
    let before = net.b.delivered.len();
    net.wire = vec![
        old[0].clone(),
        new[0].clone(),
        old[1].clone(),
        new[1].clone(),
    ];
    net.deliver_together();
    assert_eq!(
        net.b.delivered[before..],
        [packet(1), packet(2), packet(3), packet(4)]
    );
}

/// Packets waiting on a handshake stay in their own buffers, but never more than a
/// quarter of the pool: the excess is dropped with a counter, the pool never grows,
/// and every buffer comes back once the session is up.
#[test]
fn staged_packets_hold_at_most_a_quarter_of_the_pool() {
    let mut net = Net::with_buffers(8);
    for i in 0..20u8 {
        net.send(false, &inner_v4([198, 19, 0, 1], [198, 19, 0, 2], &[i; 10]));
    }
    let arena = net.a.graph.context().arena();
    assert_eq!(arena.available(), 6, "two buffers wait for the handshake");
    net.deliver();
    let arena = net.a.graph.context().arena();
    assert_eq!(arena.capacity(), 8);
    assert_eq!(arena.available(), 8, "every buffer back in the pool");
    let dropped = net.drops_named(false, "wg-encrypt", "staged-overflow");
    assert_eq!(dropped, 18, "only 2 of 8 buffers may wait");
    assert_eq!(
        net.b.delivered,
        [0u8, 1].map(|i| inner_v4([198, 19, 0, 1], [198, 19, 0, 2], &[i; 10])),
        "the first two, in order, unchanged"
    );
}

/// A packet waiting on a handshake that never completes is handed back when the
/// device gives up, freed and counted.
#[test]
fn staged_packets_of_a_handshake_that_never_completes_are_counted() {
    let mut net = Net::new();
    net.lose = Box::new(|_, _| true);
    net.send(false, &inner_v4([198, 19, 0, 1], [198, 19, 0, 2], &[7; 10]));
    let before = net.a.graph.context().arena().available();
    // 18 attempts, REKEY_TIMEOUT plus jitter apart, then one more timeout.
    net.advance(Duration::from_secs(120), Duration::from_millis(500));
    assert_eq!(net.drops_named(false, "wg-encrypt", "staged-expired"), 1);
    assert_eq!(net.a.graph.context().arena().available(), before + 1);
}

/// Through the asynchronous engine (frames on crypto threads, resumed by the post
/// nodes): everything arrives, once, in the order it was sent, both ways.
#[test]
fn async_engine_keeps_order_and_loses_nothing() {
    let mut net = Net::with_async();
    assert!(
        net.ping_a_to_b(0),
        "handshake and first packet through the async engine"
    );
    assert!(net.ping_b_to_a(0));
    let sent: Vec<Vec<u8>> = (0..600u32)
        .map(|i| {
            inner_v4(
                [198, 19, 0, 1],
                [198, 19, 0, 2],
                &i.to_be_bytes().repeat(1 + (i % 300) as usize),
            )
        })
        .collect();
    let before = net.b.delivered.len();
    // Several frames in flight at once: queue everything, then run.
    let now = net.now;
    let handles: Vec<u32> = sent
        .iter()
        .map(|p| net.a.graph.context_mut().arena_mut().alloc_with(p).unwrap())
        .collect();
    net.a.graph.from_tun(&handles);
    net.a.graph.run(now);
    let mut out: Vec<Vec<u8>> = Vec::new();
    net.a.graph.context_mut().send_output(UDP_OUT, |arena, hs| {
        out.extend(hs.iter().map(|&h| arena.data(h).to_vec()));
    });
    assert_eq!(
        net.a.graph.context().inflight_counters(),
        Default::default(),
        "every frame came back as it left"
    );
    let from = net.a.addr;
    net.wire.extend(out.into_iter().map(|d| (true, d, from)));
    net.deliver();
    assert_eq!(&net.b.delivered[before..], &sent[..], "all 600, in order");
    assert_eq!(net.a.graph.context().arena().available(), 1024);
    assert_eq!(net.b.graph.context().arena().available(), 1024);
}

/// `show errors` explains a counter from `wg::NODE_ERRORS`: it must list every node
/// of the graph that declares reasons, with the same reasons.
#[test]
fn every_dropping_node_is_explained() {
    let net = Net::new();
    for (node, c) in net.a.graph.counters() {
        let declared: Vec<&str> = c.drops().map(|(e, _)| e.name).collect();
        let listed: Vec<&str> = dataplane::wg::NODE_ERRORS
            .iter()
            .find(|(n, _)| *n == node)
            .map(|(_, t)| t.iter().map(|e| e.name).collect())
            .unwrap_or_default();
        assert_eq!(declared, listed, "{node}");
        for name in declared {
            assert!(dataplane::wg::explain(node, name).is_some_and(|d| !d.is_empty()));
        }
    }
}

/// A keepalive the timers ask for after the session has long expired waits for a
/// handshake that no one answers (the wire loses everything); past
/// REKEY_ATTEMPT_TIME it is given up, and every buffer is back.
#[test]
fn a_keepalive_after_expiry_does_not_keep_its_buffer() {
    let mut net = Net::new();
    assert!(net.ping_a_to_b(1));
    net.lose = Box::new(|_, _| true);
    // One step far past every session timer, then the handshake's whole life.
    net.advance(Duration::from_secs(740), Duration::from_secs(740));
    net.advance(Duration::from_secs(200), Duration::from_secs(1));
    assert_eq!(net.a.graph.context().arena().available(), 1024);
    assert_eq!(net.b.graph.context().arena().available(), 1024);
}
