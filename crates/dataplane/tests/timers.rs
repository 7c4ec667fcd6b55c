//! Section 6 of the whitepaper on a virtual clock: two whole sites in memory.

mod sim;
use sim::{Net, inner_v4};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

/// Every datagram seen: (time since start, to B?, message type).
type WireLog = Rc<RefCell<Vec<(Duration, bool, u8)>>>;

const MS: Duration = Duration::from_millis(1);
const S: Duration = Duration::from_secs(1);

/// Records (time since start, to_b, message type) of every datagram, and loses those
/// `drop` says to.
fn watch(
    net: &mut Net,
    drop: impl Fn(bool, u8) -> bool + 'static,
) -> Rc<RefCell<Vec<(Duration, bool, u8)>>> {
    let log = Rc::new(RefCell::new(Vec::new()));
    let l = log.clone();
    let start = net.now;
    let clock = net.clock();
    net.lose = Box::new(move |to_b, bytes| {
        let t = clock.get().saturating_duration_since(start);
        l.borrow_mut().push((t, to_b, bytes[0]));
        drop(to_b, bytes[0])
    });
    log
}

fn count(log: &WireLog, to_b: bool, kind: u8) -> usize {
    log.borrow()
        .iter()
        .filter(|e| e.1 == to_b && e.2 == kind)
        .count()
}

#[test]
fn rekey_after_120_seconds_of_use() {
    let mut net = Net::new();
    let log = watch(&mut net, |_, _| false);
    assert!(net.ping_a_to_b(0));
    let first = net.a.peer_info().last_handshake;
    for i in 0..125 {
        net.advance(S, 100 * MS);
        assert!(
            net.ping_a_to_b(i as u8),
            "traffic flows across the rekey ({i} s)"
        );
    }
    let later = net.a.peer_info().last_handshake;
    assert!(later > first, "a new handshake happened");
    assert_eq!(
        count(&log, true, 1),
        2,
        "exactly one rekey initiation after 120 s"
    );
}

#[test]
fn retries_for_90_seconds_with_jitter_then_gives_up() {
    let mut net = Net::new();
    let log = watch(&mut net, |_, _| true); // B never hears anything
    net.send(false, &inner_v4([198, 19, 0, 1], [198, 19, 0, 2], b"x"));
    net.deliver();
    net.advance(Duration::from_secs(120), 10 * MS);
    let times: Vec<Duration> = log
        .borrow()
        .iter()
        .filter(|e| e.2 == 1)
        .map(|e| e.0)
        .collect();
    assert_eq!(
        times.len(),
        19,
        "the first initiation and 18 retries: {times:?}"
    );
    for w in times.windows(2) {
        let gap = w[1] - w[0];
        assert!(gap >= 5 * S && gap <= 5 * S + 343 * MS, "retry gap {gap:?}");
    }
    assert!(
        times.windows(3).any(|w| (w[1] - w[0]) != (w[2] - w[1])),
        "jitter varies"
    );
    assert!(*times.last().unwrap() <= 95 * S);
}

#[test]
fn reject_after_180_seconds_without_a_new_session() {
    let mut net = Net::new();
    assert!(net.ping_a_to_b(0));
    // From now on B hears nothing, so no new session can be made.
    let log = watch(&mut net, |to_b, _| to_b);
    net.advance(Duration::from_secs(179), 500 * MS);
    net.send(false, &inner_v4([198, 19, 0, 1], [198, 19, 0, 2], b"late"));
    net.deliver();
    assert!(count(&log, true, 4) >= 1, "still sends data at 179 s");
    let before = count(&log, true, 4);
    net.advance(Duration::from_secs(2), 500 * MS);
    net.send(
        false,
        &inner_v4([198, 19, 0, 1], [198, 19, 0, 2], b"too late"),
    );
    net.deliver();
    assert_eq!(
        count(&log, true, 4),
        before,
        "no data on a key past REJECT_AFTER_TIME"
    );
}

#[test]
fn keepalive_after_10_seconds_of_one_way_data() {
    let mut net = Net::new();
    assert!(net.ping_a_to_b(0));
    let log = watch(&mut net, |_, _| false);
    assert!(net.ping_a_to_b(1));
    net.advance(Duration::from_millis(9_900), 100 * MS);
    assert_eq!(count(&log, false, 4), 0, "B says nothing before 10 s");
    net.advance(Duration::from_millis(300), 100 * MS);
    assert_eq!(count(&log, false, 4), 1, "B sends one keepalive at 10 s");
}

#[test]
fn keys_are_gone_after_540_seconds() {
    let mut net = Net::new();
    assert!(net.ping_a_to_b(0));
    assert!(net.a.graph.context().wg_device().index_count() > 0);
    net.advance(Duration::from_secs(530), S);
    assert!(net.a.graph.context().wg_device().keys().live_keys() > 0);
    net.advance(Duration::from_secs(15), S);
    assert_eq!(net.a.graph.context().wg_device().index_count(), 0);
    assert_eq!(
        net.a.graph.context().wg_device().keys().live_keys(),
        0,
        "key material zeroed"
    );
    assert_eq!(net.b.graph.context().wg_device().keys().live_keys(), 0);
}

#[test]
fn a_lost_response_is_retried() {
    let mut net = Net::new();
    let lost = Rc::new(RefCell::new(false));
    let l = lost.clone();
    let log = watch(&mut net, move |to_b, kind| {
        let first_response = !to_b && kind == 2 && !*l.borrow();
        if first_response {
            *l.borrow_mut() = true;
        }
        first_response
    });
    net.send(false, &inner_v4([198, 19, 0, 1], [198, 19, 0, 2], b"hello"));
    net.deliver();
    assert!(net.b.delivered.is_empty());
    net.advance(Duration::from_secs(6), 10 * MS);
    assert_eq!(count(&log, true, 1), 2, "initiation retried");
    assert_eq!(
        net.b.delivered.len(),
        1,
        "the staged packet arrives after the retry"
    );
}

#[test]
fn simultaneous_initiation_ends_in_one_working_session() {
    let mut net = Net::new();
    let a_addr = net.a.addr;
    let b_peer = net.b.peer;
    net.b
        .graph
        .context_mut()
        .wg_device_mut()
        .set_endpoint(b_peer, a_addr);
    // Both send before either hears the other.
    let pa = inner_v4([198, 19, 0, 1], [198, 19, 0, 2], b"from a");
    let pb = inner_v4([198, 19, 0, 2], [198, 19, 0, 1], b"from b");
    let now = net.now;
    for (b, p) in [(false, &pa), (true, &pb)] {
        let s = net.site(b);
        let h = s.graph.context_mut().arena_mut().alloc_with(p).unwrap();
        s.graph.from_tun(&[h]);
        s.graph.run(now);
    }
    net.advance(Duration::from_secs(12), 10 * MS);
    assert!(
        net.ping_a_to_b(7) && net.ping_b_to_a(8),
        "one session works both ways"
    );
    assert!(
        net.b.delivered.contains(&pa) && net.a.delivered.contains(&pb),
        "staged packets delivered"
    );
}

#[test]
fn persistent_keepalive_every_interval_without_traffic() {
    let mut net = Net::new();
    assert!(net.ping_a_to_b(0));
    let peer = net.a.peer;
    let now = net.now;
    net.a
        .graph
        .context_mut()
        .wg_device_mut()
        .set_persistent_keepalive(peer, 25, now);
    let log = watch(&mut net, |_, _| false);
    // Turning it on sends one at once; after that the link is never quiet for
    // longer than the interval (any authenticated packet, either way, restarts it:
    // here B's own keepalive at 10 s, answering the ping).
    net.advance(Duration::from_secs(76), 500 * MS);
    let from_a: Vec<Duration> = log
        .borrow()
        .iter()
        .filter(|e| e.1 && e.2 == 4)
        .map(|e| e.0)
        .collect();
    let either: Vec<Duration> = log
        .borrow()
        .iter()
        .filter(|e| e.2 == 4)
        .map(|e| e.0)
        .collect();
    assert!(from_a.len() >= 3, "A keeps the link alive: {from_a:?}");
    assert!(from_a[0] <= S, "one at once: {from_a:?}");
    for w in either.windows(2) {
        assert!(
            w[1] - w[0] <= 25 * S + 500 * MS,
            "quiet for {:?}: {either:?}",
            w[1] - w[0]
        );
    }
    assert!(76 * S - *either.last().unwrap() <= 25 * S + 500 * MS);
}
