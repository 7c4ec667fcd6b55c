//! Two endpoints of this crate against each other, in memory: the exchanges, the
//! keys both ends derive, and what happens when a peer refuses, lies or vanishes.

use ikev2::cert::{Certificate, PrivateKey};
use ikev2::config::{PubkeyAuth, parse_identity};
use ikev2::proposal::{Kind, Offer};
use ikev2::wire::TrafficSelector;
use ikev2::{ChildSa, Connection, Datagram, Endpoint, Event, Output, Timers};
use std::sync::Arc;
use std::time::{Duration, Instant};
use zeroize::Zeroizing;

const A: &str = "198.18.1.1";
const B: &str = "198.18.1.2";

struct Side {
    ike: &'static str,
    esp: &'static str,
    psk: &'static str,
    local_net: &'static str,
    remote_net: &'static str,
    encap: bool,
    child_rekey: Option<u64>,
    ike_rekey: Option<u64>,
    /// Certificates instead of the key: this end's (a file name under
    /// tests/data/certs), the CA it trusts, the peer's DN it wants.
    cert: Option<(&'static str, &'static str, Option<&'static str>)>,
}

impl Default for Side {
    fn default() -> Side {
        Side {
            ike: "aes256gcm16-prfsha256-x25519",
            esp: "aes128gcm16",
            psk: "a shared secret of some length",
            local_net: "198.18.10.0/24",
            remote_net: "198.18.20.0/24",
            encap: false,
            child_rekey: None,
            ike_rekey: None,
            cert: None,
        }
    }
}

fn ts(net: &str) -> Vec<TrafficSelector> {
    let (a, l) = net.split_once('/').unwrap();
    vec![TrafficSelector::prefix(
        a.parse().unwrap(),
        l.parse().unwrap(),
    )]
}

fn cert_file(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/data/certs/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn pubkey(own: &str, trust: &str, remote_dn: Option<&str>) -> PubkeyAuth {
    // The certificate, then the CAs between it and the trusted one.
    let mut chain = Certificate::all_from_pem(&cert_file(&format!("{own}.pem"))).unwrap();
    let intermediates = chain.split_off(1);
    let cert = chain.pop().unwrap();
    PubkeyAuth {
        key: PrivateKey::from_pem(&cert_file(&format!("{own}.key")), &cert).unwrap(),
        intermediates,
        cert,
        ca: Certificate::from_pem(&cert_file(&format!("{trust}.pem"))).unwrap(),
        remote_dn: remote_dn.map(str::to_string),
    }
}

fn conn(name: &str, local: &str, remote: &str, side: &Side, start: bool) -> Arc<Connection> {
    let pubkey = side.cert.map(|(own, trust, dn)| pubkey(own, trust, dn));
    let (local_id, remote_id) = match &pubkey {
        Some(p) => (
            ikev2::wire::Identification {
                kind: ikev2::wire::id_type::DER_ASN1_DN,
                data: p.cert.subject().to_vec(),
            },
            None,
        ),
        None => (
            parse_identity(local).unwrap(),
            Some(parse_identity(remote).unwrap()),
        ),
    };
    Arc::new(Connection {
        name: name.into(),
        local_addr: local.parse().unwrap(),
        remote_addr: remote.parse().unwrap(),
        local_id,
        remote_id,
        pubkey,
        psk: Zeroizing::new(side.psk.as_bytes().to_vec()),
        ike: side
            .ike
            .split(',')
            .map(|p| Offer::parse(Kind::Ike, p).unwrap())
            .collect(),
        esp: side
            .esp
            .split(',')
            .map(|p| Offer::parse(Kind::Esp, p).unwrap())
            .collect(),
        local_ts: ts(side.local_net),
        remote_ts: ts(side.remote_net),
        start,
        encap: side.encap,
        timers: Timers {
            retransmit_base: Duration::from_secs(1),
            retransmit_tries: 3,
            dpd: Some(Duration::from_secs(10)),
            child_rekey: side.child_rekey.map(Duration::from_secs),
            ike_rekey: side.ike_rekey.map(Duration::from_secs),
            nat_keepalive: Some(Duration::from_secs(20)),
        },
    })
}

struct Pair {
    a: Endpoint,
    b: Endpoint,
    now: Instant,
    a_events: Vec<Event>,
    b_events: Vec<Event>,
}

impl Pair {
    fn new(a: Side, b: Side) -> Pair {
        let now = Instant::now();
        let b_side = Side {
            local_net: a.remote_net,
            remote_net: a.local_net,
            ..b
        };
        Pair {
            a: Endpoint::new(vec![conn("a-to-b", A, B, &a, true)], now),
            b: Endpoint::new(vec![conn("b-to-a", B, A, &b_side, false)], now),
            now,
            a_events: Vec::new(),
            b_events: Vec::new(),
        }
    }

    /// Delivers datagrams back and forth until none are left (bounded); `lose`
    /// says which to drop, by their order.
    fn run(&mut self, mut from_a: Vec<Datagram>, lose: &mut dyn FnMut(usize) -> bool) {
        let mut n = 0;
        let mut from_b = Vec::new();
        for _ in 0..50 {
            if from_a.is_empty() && from_b.is_empty() {
                return;
            }
            for d in std::mem::take(&mut from_a) {
                n += 1;
                if lose(n) {
                    continue;
                }
                let out = self.b.receive(&d.payload(), d.remote, d.local, self.now);
                from_b.extend(out.datagrams);
                self.b_events.extend(out.events);
            }
            for d in std::mem::take(&mut from_b) {
                n += 1;
                if lose(n) {
                    continue;
                }
                let out = self.a.receive(&d.payload(), d.remote, d.local, self.now);
                from_a.extend(out.datagrams);
                self.a_events.extend(out.events);
            }
        }
        panic!("the exchange did not settle");
    }

    fn start(&mut self) {
        let out = self.a.tick(self.now);
        self.a_events.extend(out.events);
        self.run(out.datagrams, &mut |_| false);
    }

    fn advance(&mut self, by: Duration) -> (Output, Output) {
        self.now += by;
        (self.a.tick(self.now), self.b.tick(self.now))
    }

    /// `seconds` of time a second at a time, both ends' timers run and their
    /// messages delivered.
    fn live(&mut self, seconds: u64) {
        for _ in 0..seconds {
            let (a_out, b_out) = self.advance(Duration::from_secs(1));
            self.a_events.extend(a_out.events);
            self.b_events.extend(b_out.events);
            let mut from_b = Vec::new();
            for d in b_out.datagrams {
                let out = self.a.receive(&d.payload(), d.remote, d.local, self.now);
                from_b.extend(out.datagrams);
                self.a_events.extend(out.events);
            }
            // a's answers to b, and a's own requests.
            let mut to_b = a_out.datagrams;
            to_b.extend(from_b);
            self.run(to_b, &mut |_| false);
        }
    }
}

fn child(events: &[Event]) -> Option<&ChildSa> {
    events.iter().find_map(|e| {
        if let Event::ChildUp(c) = e {
            Some(c)
        } else {
            None
        }
    })
}

fn closed(events: &[Event]) -> Option<&str> {
    events.iter().find_map(|e| {
        if let Event::Closed { reason } = e {
            Some(reason.as_str())
        } else {
            None
        }
    })
}

fn assert_children_match(p: &Pair) {
    let (ca, cb) = (
        child(&p.a_events).expect("a's child"),
        child(&p.b_events).expect("b's child"),
    );
    assert_eq!(ca.outbound_spi, cb.inbound_spi);
    assert_eq!(ca.inbound_spi, cb.outbound_spi);
    assert_eq!(ca.outbound_keys, cb.inbound_keys);
    assert_eq!(ca.inbound_keys, cb.outbound_keys);
    assert_ne!(ca.outbound_keys, ca.inbound_keys);
    assert_eq!(ca.outbound_keys.len(), ca.algorithm.keymat_len());
    assert_eq!(ca.algorithm, cb.algorithm);
    assert_eq!(ca.local_ts, cb.remote_ts);
    assert_eq!(ca.remote_ts, cb.local_ts);
    assert!(ca.inbound_spi >= 256 && ca.outbound_spi >= 256);
}

#[test]
fn every_ike_and_esp_proposal_brings_up_matching_children() {
    for ike in [
        "aes128gcm16-prfsha256-ecp256",
        "aes256gcm16-prfsha384-ecp384",
        "chacha20poly1305-prfsha256-x25519",
    ] {
        for esp in [
            "aes128gcm16",
            "aes256gcm16-esn",
            "chacha20poly1305",
            "aes128-sha1",
            "aes256-sha256",
        ] {
            let side = || Side {
                ike,
                esp,
                ..Side::default()
            };
            let mut p = Pair::new(side(), side());
            p.start();
            assert_children_match(&p);
            let c = child(&p.a_events).unwrap();
            assert_eq!(
                c.algorithm.name(),
                esp.trim_end_matches("-esn"),
                "{ike} {esp}"
            );
            assert_eq!(c.esn, esp.ends_with("-esn"));
            assert!(c.udp_encap.is_none());
            assert!(
                p.a_events
                    .iter()
                    .any(|e| matches!(e, Event::Established { .. }))
            );
            assert!(closed(&p.a_events).is_none() && closed(&p.b_events).is_none());
        }
    }
}

#[test]
fn forced_encapsulation_moves_to_port_4500() {
    let mut p = Pair::new(
        Side {
            encap: true,
            ..Side::default()
        },
        Side::default(),
    );
    p.start();
    assert_children_match(&p);
    assert_eq!(child(&p.a_events).unwrap().udp_encap, Some((4500, 4500)));
    assert_eq!(child(&p.b_events).unwrap().udp_encap, Some((4500, 4500)));
}

#[test]
fn a_group_the_responder_prefers_is_asked_for_and_used() {
    let a = Side {
        ike: "aes256gcm16-prfsha256-x25519-ecp256",
        ..Side::default()
    };
    let b = Side {
        ike: "aes256gcm16-prfsha256-ecp256",
        ..Side::default()
    };
    let mut p = Pair::new(a, b);
    p.start();
    assert_children_match(&p);
    let summary = &p.a.summaries(p.now)[0];
    assert_eq!(
        summary.algorithms.as_deref(),
        Some("aes256gcm16-prfsha256-ecp256")
    );
}

#[test]
fn mismatches_fail_with_a_reason_on_both_sides() {
    let mut p = Pair::new(
        Side::default(),
        Side {
            ike: "chacha20poly1305-prfsha384-ecp384",
            ..Side::default()
        },
    );
    p.start();
    assert!(child(&p.a_events).is_none());
    assert!(
        closed(&p.a_events).unwrap().contains("NO_PROPOSAL_CHOSEN"),
        "{:?}",
        p.a_events
    );
    assert_eq!(p.b.dropped.get("refused"), Some(&1));
    assert!(
        p.b.summaries(p.now).is_empty(),
        "the responder keeps no state"
    );

    let mut p = Pair::new(
        Side::default(),
        Side {
            esp: "aes256-sha256",
            ..Side::default()
        },
    );
    p.start();
    assert!(child(&p.a_events).is_none() && child(&p.b_events).is_none());
    assert!(
        closed(&p.a_events).unwrap().contains("NO_PROPOSAL_CHOSEN"),
        "{:?}",
        p.a_events
    );
    assert!(
        closed(&p.b_events)
            .unwrap()
            .contains("no ESP proposal in common")
    );

    let mut p = Pair::new(
        Side::default(),
        Side {
            psk: "another secret",
            ..Side::default()
        },
    );
    p.start();
    assert!(child(&p.a_events).is_none() && child(&p.b_events).is_none());
    assert!(
        closed(&p.b_events).unwrap().contains("does not verify"),
        "{:?}",
        p.b_events
    );
    assert!(
        closed(&p.a_events)
            .unwrap()
            .contains("AUTHENTICATION_FAILED"),
        "{:?}",
        p.a_events
    );

    let mut p = Pair::new(
        Side::default(),
        Side {
            local_net: "198.18.30.0/24",
            ..Side::default()
        },
    );
    // b's local net is forced by Pair::new to a's remote; give b another remote.
    p.b = Endpoint::new(
        vec![conn(
            "b-to-a",
            B,
            A,
            &Side {
                local_net: "198.18.20.0/24",
                remote_net: "198.18.99.0/24",
                ..Side::default()
            },
            false,
        )],
        p.now,
    );
    p.start();
    assert!(
        closed(&p.a_events).unwrap().contains("TS_UNACCEPTABLE"),
        "{:?}",
        p.a_events
    );
}

#[test]
fn responder_narrows_traffic_selectors() {
    let a = Side {
        local_net: "198.18.0.0/16",
        remote_net: "198.18.0.0/16",
        ..Side::default()
    };
    let mut p = Pair::new(a, Side::default());
    p.b = Endpoint::new(
        vec![conn(
            "b-to-a",
            B,
            A,
            &Side {
                local_net: "198.18.20.0/24",
                remote_net: "198.18.10.0/24",
                ..Side::default()
            },
            false,
        )],
        p.now,
    );
    p.start();
    assert_children_match(&p);
    let c = child(&p.a_events).unwrap();
    assert_eq!(c.local_ts, ts("198.18.10.0/24"));
    assert_eq!(c.remote_ts, ts("198.18.20.0/24"));
}

#[test]
fn lost_messages_are_retransmitted_and_answered_once() {
    let mut p = Pair::new(Side::default(), Side::default());
    let out = p.a.tick(p.now);
    // Lose b's answer to IKE_AUTH (the fourth datagram).
    p.run(out.datagrams, &mut |n| n == 4);
    assert!(child(&p.b_events).is_some() && child(&p.a_events).is_none());
    let (a_out, _) = p.advance(Duration::from_millis(1100));
    assert_eq!(a_out.datagrams.len(), 1, "a retransmits IKE_AUTH");
    p.run(a_out.datagrams, &mut |_| false);
    assert_children_match(&p);
    // b answered the copy from its cache: one child only.
    assert_eq!(
        p.b_events
            .iter()
            .filter(|e| matches!(e, Event::ChildUp(_)))
            .count(),
        1
    );
    assert_eq!(p.b.dropped.get("retransmitted-request"), Some(&1));
}

#[test]
fn dead_peer_detection_closes_and_the_initiator_starts_again() {
    let mut p = Pair::new(Side::default(), Side::default());
    p.start();
    assert_children_match(&p);
    // b vanishes: a probes after 10 s of silence, retransmits, gives up.
    let mut a_events = Vec::new();
    for _ in 0..40 {
        let (a_out, _) = p.advance(Duration::from_secs(1));
        a_events.extend(a_out.events);
        if closed(&a_events).is_some() {
            break;
        }
    }
    let reason = closed(&a_events).expect("a gives up on b");
    assert!(reason.contains("no answer"), "{reason}");
    assert!(
        a_events
            .iter()
            .any(|e| matches!(e, Event::ChildDown { .. }))
    );
    // A fresh b: a starts again by itself.
    p.b = Endpoint::new(p.b.connections().to_vec(), p.now);
    p.a_events.clear();
    p.b_events.clear();
    let (a_out, _) = p.advance(Duration::from_secs(3));
    p.run(a_out.datagrams, &mut |_| false);
    assert_children_match(&p);
}

/// A caller that runs the timers only when `next_deadline` says misses none: in a
/// vanished peer's story (rekeys or liveness checks, their retransmissions, giving
/// up, starting again), a tick just before each deadline does nothing, the tick at
/// it does what was due, and no timer stays due after its tick.
#[test]
fn ticking_only_at_the_next_deadline_misses_no_timer() {
    let mut p = Pair::new(Side::default(), Side::default());
    p.start();
    assert_children_match(&p);
    let mut events = Vec::new();
    let mut sent = 0;
    for _ in 0..200 {
        let due = p.a.next_deadline(p.now).expect("an SA has timers");
        assert!(due >= p.now, "a deadline in the past");
        let early = due - Duration::from_millis(1);
        if early > p.now {
            let out = p.a.tick(early);
            assert!(
                out.datagrams.is_empty() && out.events.is_empty(),
                "a tick before the deadline did something"
            );
        }
        p.now = due;
        let out = p.a.tick(p.now);
        sent += out.datagrams.len();
        events.extend(out.events);
        assert!(
            p.a.next_deadline(p.now).is_none_or(|d| d > p.now),
            "a timer is still due after its tick"
        );
        if closed(&events).is_some() {
            break;
        }
    }
    let reason = closed(&events).expect("a gives up on the vanished b");
    assert!(reason.contains("no answer"), "{reason}");
    assert!(
        sent >= 2,
        "a sent its request and retransmitted it ({sent})"
    );
    // Then the connection starts itself again, when the next deadline says.
    let due = p.a.next_deadline(p.now).expect("a restart is due");
    assert!(due > p.now);
    p.now = due;
    let out = p.a.tick(p.now);
    assert_eq!(out.datagrams.len(), 1, "IKE_SA_INIT again");
}

#[test]
fn delete_tells_the_peer() {
    let mut p = Pair::new(Side::default(), Side::default());
    p.start();
    let out = p.a.delete("a-to-b", p.now);
    assert!(
        out.events
            .iter()
            .any(|e| matches!(e, Event::ChildDown { .. }))
    );
    p.run(out.datagrams, &mut |_| false);
    assert!(closed(&p.b_events).unwrap().contains("peer deleted"));
    assert!(p.b.summaries(p.now).is_empty() && p.a.summaries(p.now).is_empty());
}

#[test]
fn garbage_and_replays_change_nothing() {
    let mut p = Pair::new(Side::default(), Side::default());
    let first = p.a.tick(p.now).datagrams;
    let copy = first[0].clone();
    p.run(first, &mut |_| false);
    assert_children_match(&p);
    let before = p.b.summaries(p.now).len();
    // The IKE_SA_INIT again: the cached answer, no second SA.
    let again = p.b.receive(&copy.payload(), copy.remote, copy.local, p.now);
    assert_eq!(p.b.summaries(p.now).len(), before);
    assert!(again.events.is_empty());
    for junk in [&b""[..], &[0u8; 27][..], &[1u8; 28][..], &[0xff; 300][..]] {
        let out = p.b.receive(junk, copy.remote, copy.local, p.now);
        assert!(out.events.is_empty() && out.datagrams.is_empty());
    }
    // A flipped bit in an encrypted request is dropped as unauthenticated.
    let probe = {
        let (a_out, _) = p.advance(Duration::from_secs(11));
        a_out.datagrams
    };
    assert_eq!(probe.len(), 1, "a sends a liveness probe");
    let mut bad = probe[0].clone();
    let last = bad.message.len() - 1;
    bad.message[last] ^= 1;
    let out = p.b.receive(&bad.payload(), bad.remote, bad.local, p.now);
    assert_eq!(out.dropped, Some("bad-icv"));
    assert!(out.datagrams.is_empty());
    p.run(probe, &mut |_| false);
    assert_eq!(p.a.summaries(p.now).len(), 1);
}

fn children_up(events: &[Event]) -> Vec<&ChildSa> {
    events
        .iter()
        .filter_map(|e| {
            if let Event::ChildUp(c) = e {
                Some(c)
            } else {
                None
            }
        })
        .collect()
}

fn children_down(events: &[Event]) -> Vec<(u32, u32)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ChildDown {
                inbound_spi,
                outbound_spi,
            } => Some((*inbound_spi, *outbound_spi)),
            _ => None,
        })
        .collect()
}

/// After rekeys: the newest child of each end match, every older one is down on
/// both ends, and nothing closed.
fn assert_rekeyed_children_match(p: &Pair, rekeys: usize) {
    let (ua, ub) = (children_up(&p.a_events), children_up(&p.b_events));
    assert_eq!(
        (ua.len(), ub.len()),
        (rekeys + 1, rekeys + 1),
        "{:?} {:?}",
        p.a_events,
        p.b_events
    );
    let (ca, cb) = (ua.last().unwrap(), ub.last().unwrap());
    assert_eq!(ca.outbound_spi, cb.inbound_spi);
    assert_eq!(ca.inbound_spi, cb.outbound_spi);
    assert_eq!(ca.outbound_keys, cb.inbound_keys);
    assert_eq!(ca.inbound_keys, cb.outbound_keys);
    assert_ne!(ca.outbound_keys, ua[0].outbound_keys, "new keys");
    assert_eq!(
        ca.replaces,
        Some((ua[rekeys - 1].inbound_spi, ua[rekeys - 1].outbound_spi))
    );
    let (da, db) = (children_down(&p.a_events), children_down(&p.b_events));
    assert_eq!(da.len(), rekeys, "a: every old child down");
    assert_eq!(db.len(), rekeys, "b: every old child down");
    for old in &ua[..rekeys] {
        assert!(da.contains(&(old.inbound_spi, old.outbound_spi)));
    }
    assert!(closed(&p.a_events).is_none() && closed(&p.b_events).is_none());
    let (sa, sb) = (p.a.summaries(p.now), p.b.summaries(p.now));
    assert_eq!((sa.len(), sb.len()), (1, 1));
    assert_eq!(sa[0].child.unwrap().outbound, ca.outbound_spi);
}

#[test]
fn either_end_rekeys_the_child_sa() {
    for (a_rekey, b_rekey) in [(Some(20), None), (None, Some(20))] {
        let mut p = Pair::new(
            Side {
                child_rekey: a_rekey,
                ..Side::default()
            },
            Side {
                child_rekey: b_rekey,
                ..Side::default()
            },
        );
        p.start();
        p.live(25);
        assert_rekeyed_children_match(&p, 1);
        p.live(20);
        assert_rekeyed_children_match(&p, 2);
    }
}

#[test]
fn a_child_rekey_with_pfs_uses_a_new_shared_secret() {
    let side = || Side {
        esp: "aes128gcm16-x25519",
        child_rekey: Some(20),
        ..Side::default()
    };
    let mut p = Pair::new(
        side(),
        Side {
            child_rekey: None,
            ..side()
        },
    );
    p.start();
    p.live(25);
    assert_rekeyed_children_match(&p, 1);
}

#[test]
fn both_ends_rekeying_at_once_settle_on_one_child() {
    let side = || Side {
        child_rekey: Some(20),
        ..Side::default()
    };
    let mut p = Pair::new(side(), side());
    p.start();
    p.live(40);
    let (ua, ub) = (children_up(&p.a_events), children_up(&p.b_events));
    assert!(ua.len() >= 2, "{:?}", p.a_events);
    let (ca, cb) = (ua.last().unwrap(), ub.last().unwrap());
    assert_eq!(
        (ca.outbound_spi, ca.inbound_spi),
        (cb.inbound_spi, cb.outbound_spi)
    );
    assert_eq!(ca.outbound_keys, cb.inbound_keys);
    // Every child but the last is down on both ends.
    assert_eq!(children_down(&p.a_events).len(), ua.len() - 1);
    assert_eq!(children_down(&p.b_events).len(), ub.len() - 1);
    assert!(closed(&p.a_events).is_none() && closed(&p.b_events).is_none());
}

#[test]
fn either_end_rekeys_the_ike_sa_and_keeps_the_child() {
    for (a_rekey, b_rekey) in [(Some(30), None), (None, Some(30))] {
        let mut p = Pair::new(
            Side {
                ike_rekey: a_rekey,
                ..Side::default()
            },
            Side {
                ike_rekey: b_rekey,
                ..Side::default()
            },
        );
        p.start();
        let before = p.a.summaries(p.now)[0].clone();
        p.live(35);
        let (sa, sb) = (p.a.summaries(p.now), p.b.summaries(p.now));
        assert_eq!(
            (sa.len(), sb.len()),
            (1, 1),
            "the old IKE SA is gone on both ends"
        );
        assert_ne!(
            sa[0].spi_i, before.spi_i,
            "{:?} {:?} {:?} {:?}",
            p.a.dropped, p.b.dropped, p.a_events, p.b_events
        );
        assert_eq!((sa[0].spi_i, sa[0].spi_r), (sb[0].spi_i, sb[0].spi_r));
        assert_eq!(sa[0].child, before.child, "the child moved over");
        assert!(
            p.a_events
                .iter()
                .any(|e| matches!(e, Event::Rekeyed { .. }))
        );
        assert!(
            p.b_events
                .iter()
                .any(|e| matches!(e, Event::Rekeyed { .. }))
        );
        assert!(closed(&p.a_events).is_none() && closed(&p.b_events).is_none());
        assert!(children_down(&p.a_events).is_empty() && children_down(&p.b_events).is_empty());
        // The new SA works: liveness checks pass, a delete reaches the peer.
        p.live(25);
        assert!(closed(&p.a_events).is_none());
        let out = p.a.delete("a-to-b", p.now);
        p.run(out.datagrams, &mut |_| false);
        assert!(closed(&p.b_events).unwrap().contains("peer deleted"));
    }
}

#[test]
fn under_a_flood_of_half_open_sas_cookies_let_the_real_peer_in() {
    let mut p = Pair::new(Side::default(), Side::default());
    // Someone with a's address floods b with IKE_SA_INIT and never goes on.
    let mut flooder = Endpoint::new(p.a.connections().to_vec(), p.now);
    for _ in 0..ikev2::endpoint::COOKIE_THRESHOLD + 20 {
        let out = flooder.initiate("a-to-b", p.now).unwrap();
        for d in out.datagrams {
            let _ = p.b.receive(&d.payload(), d.remote, d.local, p.now);
        }
    }
    assert_eq!(
        p.b.summaries(p.now).len(),
        ikev2::endpoint::COOKIE_THRESHOLD
    );
    assert_eq!(p.b.dropped.get("cookie-sent"), Some(&20));
    // The real a is asked for a cookie, returns it, and gets in.
    p.start();
    assert_children_match(&p);
    assert_eq!(p.b.dropped.get("cookie-sent"), Some(&21));
    // A forged cookie is refused.
    let out = flooder.initiate("a-to-b", p.now).unwrap();
    let d = &out.datagrams[0];
    let mut forged = d.message.clone();
    // Put a wrong cookie first: rebuild the request with one.
    let h = ikev2::wire::Header::parse(&forged).unwrap();
    let mut payloads = ikev2::wire::parse_chain(h.next_payload, &forged[28..]).unwrap();
    payloads.insert(
        0,
        ikev2::wire::Payload::Notify(ikev2::wire::Notify::new(
            ikev2::wire::notify::COOKIE,
            vec![0; 17],
        )),
    );
    forged = ikev2::wire::message(h, &payloads);
    let out = p.b.receive(&forged, d.remote, d.local, p.now);
    assert_eq!(out.dropped, Some("bad-cookie"));
}

#[test]
fn a_responder_refuses_what_it_cannot_take_and_keeps_no_state() {
    use ikev2::wire::{Header, Payload, message, notify, parse_chain};
    let mut p = Pair::new(Side::default(), Side::default());
    let out = p.a.tick(p.now);
    let d = out.datagrams[0].clone();
    let h = Header::parse(&d.message).unwrap();
    let payloads = parse_chain(h.next_payload, &d.message[28..]).unwrap();
    let answer_notify = |out: &Output| -> Option<u16> {
        let m = &out.datagrams.first()?.message;
        let h = Header::parse(m).ok()?;
        match parse_chain(h.next_payload, &m[28..]).ok()?.first()? {
            Payload::Notify(n) => Some(n.kind),
            _ => None,
        }
    };

    // An unknown payload marked critical: UNSUPPORTED_CRITICAL_PAYLOAD.
    let mut with_critical = message(h, &payloads);
    let len = with_critical.len();
    let first = with_critical[16];
    with_critical[16] = 200;
    with_critical.splice(28..28, [first, 0x80, 0, 5, 0xee]);
    let total = (len + 5) as u32;
    with_critical[24..28].copy_from_slice(&total.to_be_bytes());
    let out = p.b.receive(&with_critical, d.remote, d.local, p.now);
    assert_eq!(
        answer_notify(&out),
        Some(notify::UNSUPPORTED_CRITICAL_PAYLOAD)
    );
    assert_eq!(out.dropped, Some("unsupported-critical"));

    // Version 3: INVALID_MAJOR_VERSION, in a version 2 header.
    let mut v3 = d.message.clone();
    v3[17] = 0x30;
    let out = p.b.receive(&v3, d.remote, d.local, p.now);
    assert_eq!(answer_notify(&out), Some(notify::INVALID_MAJOR_VERSION));
    assert_eq!(out.datagrams[0].message[17], 0x20);

    // Lengths that do not add up, a cut payload chain, trailing bytes: dropped.
    let mut short = d.message.clone();
    short[27] = short[27].wrapping_sub(1);
    let mut cut = d.message[..d.message.len() - 3].to_vec();
    let n = cut.len() as u32;
    cut[24..28].copy_from_slice(&n.to_be_bytes());
    let mut bad_chain = d.message.clone();
    bad_chain[28 + 2] = 0xff; // the first payload's length past the message
    for m in [short, cut, bad_chain] {
        let out = p.b.receive(&m, d.remote, d.local, p.now);
        assert!(
            out.datagrams.is_empty() && out.events.is_empty(),
            "{:?}",
            out.dropped
        );
    }
    assert!(p.b.summaries(p.now).is_empty(), "no state from any of it");
    assert!(p.b.dropped.get("malformed").copied().unwrap_or(0) >= 3);

    // The real request still gets through.
    p.run(vec![d], &mut |_| false);
    assert_children_match(&p);
}

#[test]
fn an_old_request_replayed_is_dropped() {
    let mut p = Pair::new(Side::default(), Side::default());
    p.start();
    // Two liveness checks from a, both answered.
    let (first, _) = p.advance(Duration::from_secs(11));
    let first = first.datagrams[0].clone();
    p.run(vec![first.clone()], &mut |_| false);
    let (second, _) = p.advance(Duration::from_secs(11));
    p.run(second.datagrams, &mut |_| false);
    // The first again: older than the last answered, so not even re-answered.
    let out =
        p.b.receive(&first.payload(), first.remote, first.local, p.now);
    assert_eq!(out.dropped, Some("unexpected-message-id"));
    assert!(out.datagrams.is_empty());
    assert!(closed(&p.a_events).is_none() && closed(&p.b_events).is_none());
}

#[test]
fn certificates_rsa_and_ecdsa_authenticate_both_ways() {
    let mut p = Pair::new(
        Side {
            cert: Some(("gw-a", "ca", Some("C=CH, O=linerate tests, CN=gw-b"))),
            ..Side::default()
        },
        Side {
            cert: Some(("gw-b", "ca", None)),
            ..Side::default()
        },
    );
    p.start();
    assert_children_match(&p);
}

#[test]
fn certificates_from_another_ca_or_subject_are_refused() {
    // b's certificate is not from the CA a trusts.
    let mut p = Pair::new(
        Side {
            cert: Some(("gw-a", "ca", None)),
            ..Side::default()
        },
        Side {
            cert: Some(("other", "ca", None)),
            ..Side::default()
        },
    );
    p.start();
    assert!(child(&p.a_events).is_none());
    assert!(
        closed(&p.a_events)
            .unwrap()
            .contains("not issued by the CA"),
        "{:?}",
        p.a_events
    );
    // a wants another subject than b's.
    let mut p = Pair::new(
        Side {
            cert: Some(("gw-a", "ca", Some("C=CH, O=linerate tests, CN=gw-c"))),
            ..Side::default()
        },
        Side {
            cert: Some(("gw-b", "ca", None)),
            ..Side::default()
        },
    );
    p.start();
    assert!(
        closed(&p.a_events)
            .unwrap()
            .contains("is not the configured"),
        "{:?}",
        p.a_events
    );
    // b trusts another CA than a's issuer: b refuses a.
    let mut p = Pair::new(
        Side {
            cert: Some(("gw-a", "ca", None)),
            ..Side::default()
        },
        Side {
            cert: Some(("gw-b", "other-ca", None)),
            ..Side::default()
        },
    );
    p.start();
    assert!(
        closed(&p.b_events)
            .unwrap()
            .contains("not issued by the CA"),
        "{:?}",
        p.b_events
    );
    assert!(
        closed(&p.a_events)
            .unwrap()
            .contains("AUTHENTICATION_FAILED")
    );
}

#[test]
fn a_key_that_is_not_the_certificates_is_refused() {
    let cert = Certificate::from_pem(&cert_file("gw-a.pem")).unwrap();
    assert!(PrivateKey::from_pem(&cert_file("gw-b.key"), &cert).is_err());
    let other = Certificate::from_pem(&cert_file("other.pem")).unwrap();
    assert!(
        PrivateKey::from_pem(&cert_file("gw-b.key"), &other).is_err(),
        "same kind, other key"
    );
}

#[test]
fn the_end_that_answers_a_rekey_seals_with_it_once_the_old_child_is_deleted() {
    let mut p = Pair::new(
        Side {
            child_rekey: Some(20),
            ..Side::default()
        },
        Side::default(),
    );
    p.start();
    p.live(25);
    assert_rekeyed_children_match(&p, 1);
    let (asked, answered) = (children_up(&p.a_events), children_up(&p.b_events));
    // The asking end has the answer, so the peer has the new child: it seals now.
    assert!(!asked[1].seal_after_replaced_goes);
    // The answering end waits for the delete of the child the rekey replaces,
    // and that delete came.
    assert!(answered[1].seal_after_replaced_goes);
    let old = answered[1].replaces.expect("a rekey");
    assert!(children_down(&p.b_events).contains(&old));
    assert!(!answered[0].seal_after_replaced_goes);
}

#[test]
fn a_restarted_peer_s_initial_contact_ends_the_sa_from_before() {
    let mut p = Pair::new(Side::default(), Side::default());
    p.start();
    assert_children_match(&p);
    let first = child(&p.b_events).expect("b's child").inbound_spi;
    // a restarts: a new endpoint, nothing of the old SA left, and starts again.
    p.a = Endpoint::new(vec![conn("a-to-b", A, B, &Side::default(), true)], p.now);
    p.a_events.clear();
    p.b_events.clear();
    p.start();
    assert_children_match(&p);
    let gone = children_down(&p.b_events);
    assert_eq!(gone.len(), 1, "b took the old child down");
    assert_eq!(gone[0].0, first);
    assert!(
        closed(&p.b_events).is_some_and(|r| r.contains("INITIAL_CONTACT")),
        "{:?}",
        p.b_events
    );
    assert_eq!(p.b.summaries(p.now).len(), 1, "b holds one IKE SA");
}

/// Delivers datagrams as `Pair::run` does with a NAT in front of a: what a sends
/// reaches b from `outside` (port + 40000), what b sends there reaches a.
fn run_behind_nat(p: &mut Pair, mut from_a: Vec<Datagram>, outside: &str) {
    let outside: std::net::IpAddr = outside.parse().unwrap();
    let a_addr: std::net::IpAddr = A.parse().unwrap();
    for _ in 0..50 {
        if from_a.is_empty() {
            return;
        }
        let mut from_b = Vec::new();
        for d in std::mem::take(&mut from_a) {
            let src = std::net::SocketAddr::new(outside, d.local.port() + 40000);
            let out = p.b.receive(&d.payload(), d.remote, src, p.now);
            from_b.extend(out.datagrams);
            p.b_events.extend(out.events);
        }
        for d in from_b {
            assert_eq!(d.remote.ip(), outside, "b answers the NAT's address");
            let dst = std::net::SocketAddr::new(a_addr, d.remote.port() - 40000);
            let out = p.a.receive(&d.payload(), dst, d.local, p.now);
            from_a.extend(out.datagrams);
            p.a_events.extend(out.events);
        }
    }
    panic!("the exchange did not settle");
}

/// A pair brought up with a NAT in front of a (198.18.9.9 outside), b knowing a
/// by the NAT's address and by its identity.
fn up_behind_nat() -> Pair {
    let mut p = Pair::new(Side::default(), Side::default());
    let d = Side::default();
    let b_side = Side {
        local_net: d.remote_net,
        remote_net: d.local_net,
        ..Side::default()
    };
    let mut c = Arc::try_unwrap(conn("b-to-a", B, "198.18.9.9", &b_side, false))
        .ok()
        .unwrap();
    c.remote_id = Some(parse_identity(A).unwrap());
    p.b = Endpoint::new(vec![Arc::new(c)], p.now);
    let out = p.a.tick(p.now);
    run_behind_nat(&mut p, out.datagrams, "198.18.9.9");
    p
}

#[test]
fn behind_a_nat_the_end_in_front_of_it_sends_keepalives() {
    let mut p = up_behind_nat();
    assert_children_match(&p);
    assert_eq!(child(&p.a_events).unwrap().udp_encap, Some((4500, 4500)));
    let keepalives = |o: &Output| o.datagrams.iter().filter(|d| d.payload() == [0xff]).count();
    // Nothing for 19 s; at 20 s a's first keepalive, from and to port 4500.
    let (a_out, b_out) = p.advance(Duration::from_secs(19));
    assert_eq!(keepalives(&a_out), 0);
    assert_eq!(keepalives(&b_out), 0);
    let (a_out, b_out) = p.advance(Duration::from_secs(1));
    assert_eq!(keepalives(&a_out), 1);
    let k = a_out
        .datagrams
        .iter()
        .find(|d| d.payload() == [0xff])
        .unwrap();
    assert_eq!((k.local.port(), k.remote.port()), (4500, 4500));
    // b has no NAT in front of it: it keeps no mapping alive.
    assert_eq!(keepalives(&b_out), 0);
    let (a_out, _) = p.advance(Duration::from_secs(20));
    assert_eq!(keepalives(&a_out), 1, "every 20 s");
}

/// A pair that ran its first exchanges, `lose` saying which datagrams (by their
/// order) are lost.
fn auth_datagrams(side_a: Side, side_b: Side, lose: &mut dyn FnMut(usize) -> bool) -> Pair {
    let mut p = Pair::new(side_a, side_b);
    let out = p.a.tick(p.now);
    p.a_events.extend(out.events);
    p.run(out.datagrams, lose);
    p
}

#[test]
fn rsa_4096_certificates_go_in_fragments_both_ways_and_a_lost_one_is_sent_again() {
    for (a, b, a_dn) in [
        ("big", "gw-b", "C=CH, O=linerate tests, CN=gw-b"),
        ("gw-a", "big", "C=CH, O=linerate tests, CN=big"),
    ] {
        let sides = || {
            (
                Side {
                    cert: Some((a, "ca", Some(a_dn))),
                    ..Side::default()
                },
                Side {
                    cert: Some((b, "ca", None)),
                    ..Side::default()
                },
            )
        };
        // Every datagram fits 1280 bytes of IP; IKE_AUTH with an RSA-4096
        // certificate needs more than one.
        let (sa, sb) = sides();
        let mut sizes = Vec::new();
        let mut n = 0;
        let mut p = Pair::new(sa, sb);
        let out = p.a.tick(p.now);
        let mut from_a = out.datagrams;
        let mut from_b: Vec<Datagram> = Vec::new();
        for _ in 0..10 {
            for d in std::mem::take(&mut from_a) {
                sizes.push(d.payload().len());
                let o = p.b.receive(&d.payload(), d.remote, d.local, p.now);
                p.b_events.extend(o.events);
                from_b.extend(o.datagrams);
            }
            for d in std::mem::take(&mut from_b) {
                sizes.push(d.payload().len());
                n += 1;
                let o = p.a.receive(&d.payload(), d.remote, d.local, p.now);
                p.a_events.extend(o.events);
                from_a.extend(o.datagrams);
            }
        }
        assert_children_match(&p);
        assert!(sizes.iter().all(|&s| s + 48 <= 1280), "{a}/{b}: {sizes:?}");
        assert!(sizes.len() > 4, "{a}/{b}: fragments expected, {sizes:?}");
        assert!(n >= 2);
        // The third datagram (a fragment of IKE_AUTH from a, or of its answer)
        // is lost: the whole message is sent again and the SA comes up.
        let (sa, sb) = sides();
        let mut p = auth_datagrams(sa, sb, &mut |i| i == 3);
        assert!(child(&p.a_events).is_none());
        for _ in 0..3 {
            p.live(1);
        }
        assert_children_match(&p);
    }
}

#[test]
fn a_certificate_from_an_intermediate_ca_is_taken_both_ways_with_its_chain() {
    for (a, b) in [("leaf", "gw-b"), ("gw-a", "leaf")] {
        let mut p = Pair::new(
            Side {
                cert: Some((a, "ca", None)),
                ..Side::default()
            },
            Side {
                cert: Some((b, "ca", None)),
                ..Side::default()
            },
        );
        p.start();
        assert_children_match(&p);
    }
}

#[test]
fn a_certificate_issued_by_one_that_is_no_ca_is_refused() {
    // gw-b's certificate (no CA) issued "forged"; its chain names gw-b.
    let mut forged = pubkey("forged", "ca", None);
    forged.intermediates = vec![Certificate::from_pem(&cert_file("gw-b.pem")).unwrap()];
    let mut p = Pair::new(Side::default(), Side::default());
    let mut c = Arc::try_unwrap(conn("a-to-b", A, B, &Side::default(), true))
        .ok()
        .unwrap();
    c.pubkey = Some(forged);
    c.local_id = ikev2::wire::Identification {
        kind: ikev2::wire::id_type::DER_ASN1_DN,
        data: c.pubkey.as_ref().unwrap().cert.subject().to_vec(),
    };
    p.a = Endpoint::new(vec![Arc::new(c)], p.now);
    p.b = Endpoint::new(
        vec![conn(
            "b-to-a",
            B,
            A,
            &Side {
                cert: Some(("gw-b", "ca", None)),
                local_net: Side::default().remote_net,
                remote_net: Side::default().local_net,
                ..Side::default()
            },
            false,
        )],
        p.now,
    );
    p.start();
    assert!(child(&p.b_events).is_none());
    let why = closed(&p.b_events).expect("b refused");
    assert!(why.contains("is not a CA"), "{why}");
}

#[test]
fn a_keepalive_from_a_new_nat_mapping_is_probed_and_the_answer_moves_the_sa() {
    let mut p = up_behind_nat();
    assert_children_match(&p);
    let local: std::net::SocketAddr = "198.18.1.2:4500".parse().unwrap();
    let old: std::net::SocketAddr = "198.18.9.9:44500".parse().unwrap();
    let new: std::net::SocketAddr = "198.18.9.9:45500".parse().unwrap();
    // From where the peer is: nothing to ask.
    assert!(p.b.keepalive(local, old, p.now).datagrams.is_empty());
    // From elsewhere while the peer is alive where it is (it just sent one):
    // nothing either, or anyone relaying from elsewhere could lure the SA away.
    assert!(p.b.keepalive(local, new, p.now).datagrams.is_empty());
    // The NAT maps a anew: a's keepalives (every 10 s, say) come from another
    // port, and none from the old one for longer than 2.5 gaps. b asks there.
    p.now += Duration::from_secs(10);
    assert!(p.b.keepalive(local, old, p.now).datagrams.is_empty());
    p.now += Duration::from_secs(26);
    let probe = p.b.keepalive(local, new, p.now);
    assert_eq!(probe.datagrams.len(), 1);
    assert_eq!(probe.datagrams[0].remote, new);
    // Another keepalive at once asks nothing more.
    assert!(p.b.keepalive(local, new, p.now).datagrams.is_empty());
    // a answers; through the NAT's new mapping, the answer comes from `new`.
    let a_addr: std::net::SocketAddr = "198.18.1.1:4500".parse().unwrap();
    let d = &probe.datagrams[0];
    let answer = p.a.receive(&d.payload(), a_addr, d.local, p.now);
    assert_eq!(answer.datagrams.len(), 1);
    let back =
        p.b.receive(&answer.datagrams[0].payload(), local, new, p.now);
    assert!(
        back.events.iter().any(|e| matches!(
            e,
            Event::PeerMoved { remote, .. } if *remote == new
        )),
        "{:?}",
        back.events
    );
    assert_eq!(p.b.summaries(p.now)[0].remote, new);
}
