//! The neighbor table: the link-layer addresses of next hops on each port, learnt by
//! ARP (IPv4) and neighbor discovery (IPv6), with the packets waiting for a next hop
//! to answer. One state machine for both families, after RFC 4861 section 7.3
//! (ARP has none of its own):
//!
//! - **incomplete**: asked for, not answered. Up to [`QUEUE_LEN`] packets wait (the
//!   table holds their buffers); a solicitation goes out every [`RETRANS_TIMER`],
//!   [`MAX_PROBES`] times, then the waiting packets are handed back to be dropped and
//!   counted and the entry goes.
//! - **reachable**: answered within [`REACHABLE_TIME`]; used as it is.
//! - **stale**: older than that; still used, and the first use sends a unicast probe
//!   (the entry is then **probing**: answered in time it is reachable again, else it
//!   goes). A stale entry unused for [`GC_TIME`] goes.
//!
//! The table is bounded: a new entry when full takes the place of the oldest stale
//! one, or is refused (its packet dropped and counted), so a storm of requests cannot
//! grow it. Nothing here sends or frees anything: what must be done comes out as
//! [`NeighborEvent`]s for the nodes to carry out.

use crate::arena::Handle;
use crate::fib::PortId;
use crate::keyed_hash::KeyedState;
use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// An Ethernet address.
pub type Mac = [u8; 6];

/// RFC 4861 section 10: REACHABLE_TIME (its base value).
pub const REACHABLE_TIME: Duration = Duration::from_secs(30);
/// RFC 4861 section 10: RETRANS_TIMER.
pub const RETRANS_TIMER: Duration = Duration::from_secs(1);
/// RFC 4861 section 10: MAX_MULTICAST_SOLICIT and MAX_UNICAST_SOLICIT.
pub const MAX_PROBES: u32 = 3;
/// How long an unused stale entry stays (Linux's gc_stale_time).
pub const GC_TIME: Duration = Duration::from_secs(60);
/// Packets that may wait for one next hop (RFC 1122 2.3.2.2 asks for at least one).
pub const QUEUE_LEN: usize = 4;

#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    Incomplete {
        probes: u32,
        next_probe: Instant,
        queue: Vec<Handle>,
    },
    Reachable {
        mac: Mac,
        until: Instant,
    },
    Stale {
        mac: Mac,
        last_used: Instant,
    },
    Probing {
        mac: Mac,
        probes: u32,
        next_probe: Instant,
    },
}

/// Why the table hands a packet back to be dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NeighborDrop {
    /// Already [`QUEUE_LEN`] packets wait for this next hop.
    QueueFull,
    /// The next hop never answered.
    Unresolved,
    /// The table is full of entries in use.
    TableFull,
}

/// What the table wants done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NeighborEvent {
    /// Ask for `target` on `port`: broadcast (ARP) or to its solicited-node
    /// multicast group (ND) when `to` is `None`, else unicast to `to`.
    Solicit {
        port: PortId,
        target: IpAddr,
        to: Option<Mac>,
    },
    /// A waiting packet can go now, to `mac`.
    Send {
        handle: Handle,
        port: PortId,
        mac: Mac,
    },
    /// Drop this packet and count `why`.
    Drop { handle: Handle, why: NeighborDrop },
}

/// What [`NeighborTable::resolve`] did with a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolved {
    /// Send it to this address now.
    Mac(Mac),
    /// The table holds it until the next hop answers (or hands it back to drop).
    Waiting,
}

/// How the table heard of a neighbor's address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Heard {
    /// An answer (an ARP reply, a solicited advertisement) to a solicitation of
    /// ours: it is reachable now.
    Answer,
    /// A message from it for one of our addresses (a request): kept, as stale, even
    /// when new, since we are about to answer it.
    ToUs,
    /// Anything else: only updates an entry that exists.
    InPassing,
}

/// One row of `show neighbors`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NeighborInfo {
    pub port: PortId,
    pub ip: IpAddr,
    pub mac: Option<Mac>,
    pub state: &'static str,
}

pub struct NeighborTable {
    /// Keyed for speed: ip-rewrite looks a next hop up for every packet.
    entries: HashMap<(PortId, IpAddr), State, KeyedState>,
    capacity: usize,
}

impl NeighborTable {
    /// A table of at most `capacity` entries.
    pub fn new(capacity: usize) -> NeighborTable {
        NeighborTable {
            entries: HashMap::with_capacity_and_hasher(capacity.min(4096), KeyedState::new()),
            capacity,
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Where packet `h` for next hop `ip` on `port` goes: its MAC, or it waits (a
    /// solicitation goes out for a new entry). A packet that cannot wait comes back
    /// as a `Drop` event.
    pub fn resolve(
        &mut self,
        port: PortId,
        ip: IpAddr,
        h: Handle,
        now: Instant,
        events: &mut Vec<NeighborEvent>,
    ) -> Resolved {
        let key = (port, ip);
        let Some(state) = self.entries.get_mut(&key) else {
            if !self.make_room(now) {
                events.push(NeighborEvent::Drop {
                    handle: h,
                    why: NeighborDrop::TableFull,
                });
                return Resolved::Waiting;
            }
            self.entries.insert(
                key,
                State::Incomplete {
                    probes: 1,
                    next_probe: now + RETRANS_TIMER,
                    queue: vec![h],
                },
            );
            events.push(NeighborEvent::Solicit {
                port,
                target: ip,
                to: None,
            });
            return Resolved::Waiting;
        };
        match state {
            State::Incomplete { queue, .. } => {
                if queue.len() < QUEUE_LEN {
                    queue.push(h);
                } else {
                    events.push(NeighborEvent::Drop {
                        handle: h,
                        why: NeighborDrop::QueueFull,
                    });
                }
                Resolved::Waiting
            }
            State::Reachable { mac, until } if now < *until => Resolved::Mac(*mac),
            State::Reachable { mac, .. } | State::Stale { mac, .. } => {
                let mac = *mac;
                *state = State::Probing {
                    mac,
                    probes: 1,
                    next_probe: now + RETRANS_TIMER,
                };
                events.push(NeighborEvent::Solicit {
                    port,
                    target: ip,
                    to: Some(mac),
                });
                Resolved::Mac(mac)
            }
            State::Probing { mac, .. } => Resolved::Mac(*mac),
        }
    }

    /// `ip` on `port` is at `mac`, as an answer or a message from it says (see
    /// [`Heard`]). An answer makes the entry reachable; other news updates the
    /// address (stale if it changed). Packets that waited for it come out as `Send`
    /// events.
    pub fn learn(
        &mut self,
        (port, ip, mac): (PortId, IpAddr, Mac),
        heard: Heard,
        now: Instant,
        events: &mut Vec<NeighborEvent>,
    ) {
        let (confirmed, create) = match heard {
            // An answer for no entry was not asked for: it creates none.
            Heard::Answer => (true, false),
            Heard::ToUs => (false, true),
            Heard::InPassing => (false, false),
        };
        let key = (port, ip);
        let fresh = State::Reachable {
            mac,
            until: now + REACHABLE_TIME,
        };
        let stale = State::Stale {
            mac,
            last_used: now,
        };
        match self.entries.get_mut(&key) {
            None => {
                if create && self.make_room(now) {
                    self.entries
                        .insert(key, if confirmed { fresh } else { stale });
                }
            }
            Some(state) => {
                let old = std::mem::replace(state, if confirmed { fresh } else { stale });
                match old {
                    State::Incomplete { queue, .. } => {
                        events.extend(queue.into_iter().map(|handle| NeighborEvent::Send {
                            handle,
                            port,
                            mac,
                        }));
                    }
                    // News that repeats what is known keeps a better state.
                    State::Reachable { mac: m, until } if m == mac && !confirmed => {
                        *state = State::Reachable { mac, until };
                    }
                    _ => {}
                }
            }
        }
    }

    /// Solicitations that are due, entries that failed or aged out (their waiting
    /// packets handed back to drop).
    pub fn tick(&mut self, now: Instant, events: &mut Vec<NeighborEvent>) {
        self.entries.retain(|&(port, ip), state| match state {
            State::Incomplete {
                probes,
                next_probe,
                queue,
            } => {
                if now < *next_probe {
                    return true;
                }
                if *probes >= MAX_PROBES {
                    events.extend(queue.drain(..).map(|handle| NeighborEvent::Drop {
                        handle,
                        why: NeighborDrop::Unresolved,
                    }));
                    return false;
                }
                *probes += 1;
                *next_probe = now + RETRANS_TIMER;
                events.push(NeighborEvent::Solicit {
                    port,
                    target: ip,
                    to: None,
                });
                true
            }
            State::Probing {
                mac,
                probes,
                next_probe,
            } => {
                if now < *next_probe {
                    return true;
                }
                if *probes >= MAX_PROBES {
                    return false;
                }
                *probes += 1;
                *next_probe = now + RETRANS_TIMER;
                events.push(NeighborEvent::Solicit {
                    port,
                    target: ip,
                    to: Some(*mac),
                });
                true
            }
            State::Reachable { mac, until } => {
                if now >= *until {
                    *state = State::Stale {
                        mac: *mac,
                        last_used: *until,
                    };
                }
                true
            }
            State::Stale { last_used, .. } => now < *last_used + GC_TIME,
        });
    }

    /// Room for one more entry: true when there is, after dropping the stale entry
    /// least recently used if the table was full.
    fn make_room(&mut self, now: Instant) -> bool {
        if self.entries.len() < self.capacity {
            return true;
        }
        let oldest = self
            .entries
            .iter()
            .filter_map(|(k, s)| match s {
                State::Stale { last_used, .. } => Some((*last_used, *k)),
                State::Reachable { until, .. } if *until <= now => Some((*until, *k)),
                _ => None,
            })
            .min();
        match oldest {
            Some((_, k)) => {
                self.entries.remove(&k);
                true
            }
            None => false,
        }
    }

    /// Every entry, for `show neighbors`, ordered by port and address.
    pub fn entries(&self) -> Vec<NeighborInfo> {
        let mut out: Vec<NeighborInfo> = self
            .entries
            .iter()
            .map(|(&(port, ip), s)| {
                let (mac, state) = match s {
                    State::Incomplete { .. } => (None, "incomplete"),
                    State::Reachable { mac, .. } => (Some(*mac), "reachable"),
                    State::Stale { mac, .. } => (Some(*mac), "stale"),
                    State::Probing { mac, .. } => (Some(*mac), "probing"),
                };
                NeighborInfo {
                    port,
                    ip,
                    mac,
                    state,
                }
            })
            .collect();
        out.sort_by_key(|n| (n.port, n.ip));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: PortId = PortId(1);
    const MAC: Mac = [0x02, 0, 0, 0, 0, 0x0b];

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn solicits(e: &[NeighborEvent]) -> usize {
        e.iter()
            .filter(|e| matches!(e, NeighborEvent::Solicit { .. }))
            .count()
    }

    #[test]
    fn packets_wait_for_an_answer_then_go_in_order() {
        let (mut t, t0, mut ev) = (NeighborTable::new(8), Instant::now(), Vec::new());
        let nh = ip("198.18.0.1");
        for h in 0..6 {
            assert_eq!(t.resolve(P, nh, h, t0, &mut ev), Resolved::Waiting);
        }
        assert_eq!(solicits(&ev), 1, "one request, however many packets");
        let drops: Vec<_> = ev
            .iter()
            .filter_map(|e| match e {
                NeighborEvent::Drop { handle, why } => Some((*handle, *why)),
                _ => None,
            })
            .collect();
        assert_eq!(
            drops,
            [(4, NeighborDrop::QueueFull), (5, NeighborDrop::QueueFull)]
        );
        ev.clear();
        t.learn((P, nh, MAC), Heard::Answer, t0, &mut ev);
        let sent: Vec<_> = ev
            .iter()
            .map(|e| match e {
                NeighborEvent::Send { handle, mac, .. } => (*handle, *mac),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(sent, [(0, MAC), (1, MAC), (2, MAC), (3, MAC)]);
        assert_eq!(t.resolve(P, nh, 9, t0, &mut ev), Resolved::Mac(MAC));
    }

    #[test]
    fn a_next_hop_that_never_answers_gives_its_packets_back() {
        let (mut t, t0, mut ev) = (NeighborTable::new(8), Instant::now(), Vec::new());
        let nh = ip("2001:2::1");
        t.resolve(P, nh, 7, t0, &mut ev);
        for s in 1..=MAX_PROBES {
            t.tick(t0 + RETRANS_TIMER * s, &mut ev);
        }
        assert_eq!(solicits(&ev), MAX_PROBES as usize);
        assert_eq!(
            ev.last(),
            Some(&NeighborEvent::Drop {
                handle: 7,
                why: NeighborDrop::Unresolved
            })
        );
        assert!(t.is_empty(), "the failed entry is gone");
    }

    #[test]
    fn entries_age_from_reachable_to_stale_to_gone() {
        let (mut t, t0, mut ev) = (NeighborTable::new(8), Instant::now(), Vec::new());
        let nh = ip("198.18.0.1");
        t.resolve(P, nh, 0, t0, &mut ev);
        t.learn((P, nh, MAC), Heard::Answer, t0, &mut ev);
        assert_eq!(t.entries()[0].state, "reachable");
        t.tick(t0 + REACHABLE_TIME, &mut ev);
        assert_eq!(t.entries()[0].state, "stale");
        // Used while stale: still sent, and probed once by unicast.
        let later = t0 + REACHABLE_TIME + Duration::from_secs(1);
        assert_eq!(t.resolve(P, nh, 1, later, &mut ev), Resolved::Mac(MAC));
        assert_eq!(
            ev.last(),
            Some(&NeighborEvent::Solicit {
                port: P,
                target: nh,
                to: Some(MAC)
            })
        );
        // The probe is answered: reachable again.
        t.learn((P, nh, MAC), Heard::Answer, later, &mut ev);
        assert_eq!(t.entries()[0].state, "reachable");
        // Unused: stale, then gone after GC_TIME.
        t.tick(later + REACHABLE_TIME, &mut ev);
        t.tick(later + REACHABLE_TIME + GC_TIME, &mut ev);
        assert!(t.is_empty());
    }

    #[test]
    fn an_unanswered_probe_removes_the_entry() {
        let (mut t, t0, mut ev) = (NeighborTable::new(8), Instant::now(), Vec::new());
        let nh = ip("198.18.0.1");
        t.learn((P, nh, MAC), Heard::ToUs, t0, &mut ev);
        t.tick(t0, &mut ev);
        let t1 = t0 + REACHABLE_TIME + Duration::from_secs(1);
        t.resolve(P, nh, 1, t1, &mut ev);
        for s in 1..=MAX_PROBES {
            t.tick(t1 + RETRANS_TIMER * s, &mut ev);
        }
        assert!(t.is_empty());
    }

    #[test]
    fn only_messages_to_us_create_entries() {
        let (mut t, t0, mut ev) = (NeighborTable::new(8), Instant::now(), Vec::new());
        let nh = ip("198.18.0.1");
        t.learn((P, nh, MAC), Heard::InPassing, t0, &mut ev);
        t.learn((P, nh, MAC), Heard::Answer, t0, &mut ev);
        assert!(
            t.is_empty(),
            "neither news in passing nor an unasked answer creates"
        );
        t.learn((P, nh, MAC), Heard::ToUs, t0, &mut ev);
        assert_eq!(t.entries()[0].state, "stale");
        t.learn((P, nh, MAC), Heard::Answer, t0, &mut ev);
        let moved = [0x02, 0, 0, 0, 0, 0x0c];
        t.learn((P, nh, moved), Heard::InPassing, t0, &mut ev);
        let e = t.entries()[0];
        assert_eq!((e.mac, e.state), (Some(moved), "stale"));
    }

    #[test]
    fn a_full_table_evicts_stale_entries_and_refuses_when_none_is() {
        let (mut t, t0, mut ev) = (NeighborTable::new(2), Instant::now(), Vec::new());
        t.resolve(P, ip("198.18.0.1"), 1, t0, &mut ev);
        t.resolve(P, ip("198.18.0.2"), 2, t0, &mut ev);
        ev.clear();
        // Both incomplete: a third is refused and its packet handed back.
        t.resolve(P, ip("198.18.0.3"), 3, t0, &mut ev);
        assert_eq!(
            ev,
            [NeighborEvent::Drop {
                handle: 3,
                why: NeighborDrop::TableFull
            }]
        );
        assert_eq!(t.len(), 2);
        // One answers and goes stale: it makes room.
        t.learn((P, ip("198.18.0.1"), MAC), Heard::Answer, t0, &mut ev);
        t.tick(t0 + REACHABLE_TIME, &mut ev);
        ev.clear();
        let t1 = t0 + REACHABLE_TIME;
        t.resolve(P, ip("198.18.0.3"), 4, t1, &mut ev);
        assert_eq!(solicits(&ev), 1);
        assert_eq!(t.len(), 2);
        assert!(t.entries().iter().all(|e| e.ip != ip("198.18.0.1")));
    }
}
