//! The whole WireGuard graph, two sites, in memory.

mod sim;
use sim::{Net, inner_v4};
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
    let info = net.a.graph.cx.device.peer_info(net.a.peer).unwrap();
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

/// A pool too small for what waits on a handshake drops the excess with a counter;
/// the pool never grows and every buffer comes back.
#[test]
fn a_full_pool_drops_with_a_counter() {
    let mut net = Net::with_buffers(8);
    // Twenty packets wait for the handshake (staged as copies, outside the pool).
    for i in 0..20u8 {
        net.send(false, &inner_v4([198, 19, 0, 1], [198, 19, 0, 2], &[i; 10]));
    }
    net.deliver();
    let a = &net.a.graph.cx;
    assert_eq!(a.arena.capacity(), 8);
    assert_eq!(a.arena.available(), 8, "every buffer back in the pool");
    let dropped = a.glue_drops[DropReason::NoBuffer.index()];
    assert!(
        dropped >= 12,
        "only 8 buffers for 20 staged packets, {dropped} dropped"
    );
    assert_eq!(
        net.b.delivered.len() as u64 + dropped,
        20,
        "each packet delivered or counted"
    );
}
