//! One tunnel on every worker, both sides together: an owner device and the
//! followers of its published view (`crate::datapath`).

use super::testing::*;
use crate::PeerId;
use crate::datapath::Follower;
use crate::drop::DropReason;
use crate::session::{SendError, SessionPath};
use std::collections::HashSet;
use std::time::Instant;

/// Takes `n` counters for `peer` from `path`, each from a new ticket, or with
/// `advance` from the last ticket moved on while it can be: none seen before.
fn take_counters(
    path: &mut impl SessionPath,
    peer: PeerId,
    n: usize,
    advance: bool,
    seen: &mut HashSet<u64>,
    now: Instant,
) {
    let mut t = path.send_ticket(peer, now).unwrap();
    assert!(seen.insert(t.counter), "{}", t.counter);
    for _ in 1..n {
        if !(advance && path.advance_ticket(&mut t)) {
            t = path.send_ticket(peer, now).unwrap();
        }
        assert!(seen.insert(t.counter), "{}", t.counter);
    }
}

#[test]
fn owner_and_followers_never_share_a_counter() {
    for advance in [false, true] {
        let now = Instant::now();
        let mut p = pair(now);
        p.handshake(now);
        p.a.publish();
        let mut followers: Vec<Follower> = (0..3).map(|_| Follower::new(p.a.view_cell())).collect();
        let mut seen = HashSet::new();
        for round in 0..50 {
            take_counters(
                &mut p.a,
                p.b_in_a,
                1 + round % 5 * 70,
                advance,
                &mut seen,
                now,
            );
            for f in &mut followers {
                take_counters(f, p.b_in_a, 1 + round % 7 * 60, advance, &mut seen, now);
                f.end_run();
            }
        }
    }
}

#[test]
fn a_follower_decrypts_on_the_owners_window_and_reports() {
    let now = Instant::now();
    let mut p = pair(now);
    p.handshake(now);
    p.a.publish();
    p.b.publish();
    let mut fa = Follower::new(p.a.view_cell());
    let mut fb = Follower::new(p.b.view_cell());
    let t = fa.send_ticket(p.b_in_a, now).unwrap();
    fa.note_sent(p.b_in_a, 20, 64, now);
    let r = fb.recv_ticket(t.receiver_index, t.counter, now).unwrap();
    assert_eq!(r.peer, p.a_in_b);
    // A source outside the peer's allowed IPs changes nothing.
    assert_eq!(
        fb.recv_commit(
            &r,
            t.counter,
            Some("10.9.9.9".parse().unwrap()),
            64,
            addr(A_ADDR),
            now
        ),
        Err(DropReason::SourceNotAllowed)
    );
    let moved = addr("198.18.0.9:4000");
    fb.recv_commit(
        &r,
        t.counter,
        Some("10.0.0.1".parse().unwrap()),
        64,
        moved,
        now,
    )
    .unwrap();
    // The owner's own path sees the counter taken, and so does the follower.
    assert_eq!(
        p.b.recv_ticket(t.receiver_index, t.counter, now).err(),
        Some(DropReason::Replay)
    );
    assert_eq!(
        fb.recv_commit(&r, t.counter, None, 64, moved, now),
        Err(DropReason::Replay)
    );
    let tx = p.a.peer_info(p.b_in_a).unwrap().tx_bytes;
    p.a.apply_activity(&fa.end_run(), now);
    assert_eq!(p.a.peer_info(p.b_in_a).unwrap().tx_bytes, tx + 64);
    let rx = p.b.peer_info(p.a_in_b).unwrap().rx_bytes;
    p.b.apply_activity(&fb.end_run(), now);
    let info = p.b.peer_info(p.a_in_b).unwrap();
    assert_eq!(info.rx_bytes, rx + 64);
    assert_eq!(info.endpoint, Some(moved), "the endpoint follows the peer");
    assert!(fb.end_run().is_empty(), "a report is handed out once");
}

#[test]
fn a_follower_without_a_session_has_the_owner_start_one() {
    let now = Instant::now();
    let mut p = pair(now);
    p.a.publish();
    let mut f = Follower::new(p.a.view_cell());
    assert_eq!(
        f.send_ticket(p.b_in_a, now).err(),
        Some(SendError::NoSession)
    );
    p.a.apply_activity(&f.end_run(), now);
    let init = one_sent(&mut p.a);
    p.b.handle_handshake(parse(&init), addr(A_ADDR), now)
        .unwrap();
    let resp = one_sent(&mut p.b);
    p.a.handle_handshake(parse(&resp), addr(B_ADDR), now)
        .unwrap();
    // The session reaches the follower when the owner publishes and the follower
    // starts its next run.
    assert!(f.send_ticket(p.b_in_a, now).is_err());
    p.a.publish();
    f.refresh();
    assert!(f.send_ticket(p.b_in_a, now).is_ok());
}

#[test]
fn allowed_ips_reach_followers() {
    let now = Instant::now();
    let mut p = pair(now);
    p.a.add_allowed_ip(p.b_in_a, "198.19.5.0/24".parse().unwrap());
    p.a.publish();
    let mut f = Follower::new(p.a.view_cell());
    let inside = "198.19.5.7".parse().unwrap();
    assert_eq!(f.peer_for_destination(inside), Some(p.b_in_a));
    p.a.remove_peer(p.b_in_a);
    p.a.publish();
    f.refresh();
    assert_eq!(f.peer_for_destination(inside), None);
}
