//! All IKE SAs of one gateway: incoming datagrams go to the SA their SPIs name, or
//! start a new one (an IKE_SA_INIT request for a configured peer); timers run over
//! every SA; connections that start themselves are started again when their SA
//! closes.

use crate::config::Connection;
use crate::cookie::CookieJar;
use crate::ike_sa::{IkeSa, SaSummary, State};
use crate::output::{Datagram, IKE_PORT, NAT_T_PORT, NON_ESP_MARKER, Output};
use crate::wire::{
    HEADER_LEN, Header, Notify, Payload, exchange, flags, message, notify, parse_chain,
};
use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a connection that starts itself waits before starting again after its
/// SA closed: a peer that refuses us is not hammered.
const RESTART_AFTER: Duration = Duration::from_secs(2);
/// Half-open IKE SAs (answered IKE_SA_INIT, no IKE_AUTH yet) from which a new
/// request must return a cookie (strongSwan's `cookie_threshold` is 30).
pub const COOKIE_THRESHOLD: usize = 30;
/// Half-open IKE SAs at most: past this even requests with cookies wait.
pub const MAX_HALF_OPEN: usize = 1024;

pub struct Endpoint {
    conns: Vec<Arc<Connection>>,
    /// By our SPI.
    sas: HashMap<u64, IkeSa>,
    /// Responder SAs by (peer address, SPIi): a retransmitted IKE_SA_INIT request
    /// finds the SA its first copy made.
    by_initiator: HashMap<(IpAddr, u64), u64>,
    /// When each self-starting connection may start next.
    restart_at: HashMap<String, Instant>,
    /// Messages ignored, by reason.
    pub dropped: BTreeMap<&'static str, u64>,
    cookies: CookieJar,
}

impl Endpoint {
    pub fn new(conns: Vec<Arc<Connection>>, now: Instant) -> Endpoint {
        let restart_at = conns
            .iter()
            .filter(|c| c.start)
            .map(|c| (c.name.clone(), now))
            .collect();
        Endpoint {
            conns,
            sas: HashMap::new(),
            by_initiator: HashMap::new(),
            restart_at,
            dropped: BTreeMap::new(),
            cookies: CookieJar::new(now),
        }
    }

    pub fn connections(&self) -> &[Arc<Connection>] {
        &self.conns
    }

    /// Starts an IKE SA for the named connection.
    pub fn initiate(&mut self, name: &str, now: Instant) -> Result<Output, String> {
        let conn = self
            .conns
            .iter()
            .find(|c| c.name == name)
            .cloned()
            .ok_or_else(|| format!("no connection named '{name}'"))?;
        let local = SocketAddr::new(conn.local_addr, IKE_PORT);
        let remote = SocketAddr::new(conn.remote_addr, IKE_PORT);
        let alone = !self.sas.values().any(|s| s.connection().name == name);
        let (mut sa, out) = IkeSa::initiate(conn, local, remote, now);
        // INITIAL_CONTACT says the new SA is our only one with the peer: not so
        // when the operator starts a second.
        sa.set_initial_contact(alone);
        self.sas.insert(sa.our_spi(), sa);
        Ok(out)
    }

    /// Deletes every IKE SA of the named connection.
    pub fn delete(&mut self, name: &str, now: Instant) -> Output {
        let mut out = Output::default();
        for sa in self
            .sas
            .values_mut()
            .filter(|s| s.connection().name == name)
        {
            out.append(sa.delete(now));
        }
        self.restart_at.remove(name);
        self.reap(&mut out, now);
        out
    }

    /// A UDP payload that arrived on an IKE port (500, or 4500 behind its marker).
    pub fn receive(
        &mut self,
        payload: &[u8],
        local: SocketAddr,
        remote: SocketAddr,
        now: Instant,
    ) -> Output {
        let msg = if local.port() == NAT_T_PORT {
            match payload.strip_prefix(&NON_ESP_MARKER[..]) {
                Some(m) => m,
                None => return self.count(Output::dropped("not-ike")),
            }
        } else {
            payload
        };
        let h = match Header::parse(msg) {
            Ok(h) => h,
            Err(crate::wire::Error::BadVersion) => {
                return self.count(bad_version(msg, local, remote));
            }
            Err(_) => return self.count(Output::dropped("malformed")),
        };
        let new_sa = h.exchange == exchange::IKE_SA_INIT && !h.is_response() && h.spi_r == 0;
        let out = if new_sa {
            match self.by_initiator.get(&(remote.ip(), h.spi_i)).copied() {
                Some(ours) => self.deliver(ours, msg, local, remote, now),
                None => self.start_responder(&h, msg, local, remote, now),
            }
        } else {
            let ours = if h.from_initiator() { h.spi_r } else { h.spi_i };
            self.deliver(ours, msg, local, remote, now)
        };
        let mut out = self.count(out);
        self.reap(&mut out, now);
        out
    }

    /// A NAT keepalive from `remote`. Unauthenticated, it moves nothing; but
    /// from where no IKE SA's peer is, it may be a NATed peer's new mapping
    /// (RFC 7296 section 2.23): each IKE SA whose peer is behind a NAT asks
    /// there whether its peer is alive, at most every `PROBE_EVERY`, and one
    /// whose peer answers from there follows it (`Event::PeerMoved`).
    pub fn keepalive(&mut self, local: SocketAddr, remote: SocketAddr, now: Instant) -> Output {
        let mut out = Output::default();
        let mut known = false;
        for sa in self.sas.values_mut().filter(|s| s.peer() == remote) {
            sa.heard_keepalive(now);
            known = true;
        }
        if known {
            return out;
        }
        for sa in self.sas.values_mut() {
            out.append(sa.probe(local, remote, now));
        }
        out
    }

    fn deliver(
        &mut self,
        ours: u64,
        msg: &[u8],
        local: SocketAddr,
        remote: SocketAddr,
        now: Instant,
    ) -> Output {
        let mut out = match self.sas.get_mut(&ours) {
            Some(sa) => sa.receive(msg, local, remote, now),
            None => return Output::dropped("unknown-spi"),
        };
        self.adopt_successors();
        if self
            .sas
            .get_mut(&ours)
            .is_some_and(IkeSa::take_peer_started_afresh)
        {
            out.append(self.forget_all_but(ours));
        }
        out
    }

    /// Forgets every other IKE SA of `ours`'s connection with the same peer
    /// identity: that peer restarted
    /// (INITIAL_CONTACT, RFC 7296 section 2.4) and holds none of them, so their
    /// children would only swallow what is routed into them.
    fn forget_all_but(&mut self, ours: u64) -> Output {
        let mut out = Output::default();
        let Some((name, id)) = self
            .sas
            .get(&ours)
            .map(|s| (s.connection().name.clone(), s.peer_identity().cloned()))
        else {
            return out;
        };
        for (_, sa) in self
            .sas
            .iter_mut()
            // Only authenticated SAs: INITIAL_CONTACT speaks for the identity, and
            // half-open ones have none yet.
            .filter(|(spi, s)| {
                **spi != ours
                    && s.connection().name == name
                    && s.peer_identity() == id.as_ref()
                    && matches!(
                        s.state(),
                        State::Established | State::Rekeyed | State::Deleting
                    )
            })
        {
            out.append(sa.forget(format!(
                "{name}: the peer started afresh (INITIAL_CONTACT); an IKE SA from before is forgotten"
            )));
        }
        out
    }

    /// Takes in the IKE SAs rekeys made, under their new SPIs.
    fn adopt_successors(&mut self) {
        let new: Vec<IkeSa> = self
            .sas
            .values_mut()
            .filter_map(IkeSa::take_successor)
            .collect();
        for sa in new {
            self.sas.insert(sa.our_spi(), sa);
        }
    }

    fn start_responder(
        &mut self,
        h: &Header,
        msg: &[u8],
        local: SocketAddr,
        remote: SocketAddr,
        now: Instant,
    ) -> Output {
        // The connection to this peer's address, else one that takes its peer
        // from anywhere (its remote address unspecified).
        let to = |addr: IpAddr| {
            self.conns
                .iter()
                .find(|c| c.remote_addr == addr && c.local_addr == local.ip())
        };
        let anywhere = match remote.ip() {
            IpAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
        };
        let Some(conn) = to(remote.ip()).or_else(|| to(anywhere)).cloned() else {
            return Output::dropped("no-connection");
        };
        let half_open = self
            .sas
            .values()
            .filter(|s| s.state() == State::InitReplied)
            .count();
        if half_open >= MAX_HALF_OPEN {
            return Output::dropped("half-open-full");
        }
        if half_open >= COOKIE_THRESHOLD {
            let Ok(payloads) = parse_chain(h.next_payload, &msg[HEADER_LEN..]) else {
                return Output::dropped("malformed");
            };
            let Some(ni) = payloads.iter().find_map(|p| match p {
                Payload::Nonce(n) => Some(n.clone()),
                _ => None,
            }) else {
                return Output::dropped("missing-payload");
            };
            // The cookie must come first (RFC 7296 section 2.6).
            let returned = match payloads.first() {
                Some(Payload::Notify(n)) if n.kind == notify::COOKIE => Some(n.data.as_slice()),
                _ => None,
            };
            let good =
                returned.is_some_and(|c| self.cookies.check(c, &ni, remote.ip(), h.spi_i, now));
            if !good {
                let cookie = self.cookies.make(&ni, remote.ip(), h.spi_i, now);
                let answer = Header {
                    spi_i: h.spi_i,
                    spi_r: 0,
                    next_payload: 0,
                    exchange: exchange::IKE_SA_INIT,
                    flags: flags::RESPONSE,
                    message_id: 0,
                    length: 0,
                };
                let message = message(
                    answer,
                    &[Payload::Notify(Notify::new(notify::COOKIE, cookie))],
                );
                return Output {
                    datagrams: vec![Datagram {
                        local,
                        remote,
                        message,
                    }],
                    dropped: Some(if returned.is_some() {
                        "bad-cookie"
                    } else {
                        "cookie-sent"
                    }),
                    ..Output::default()
                };
            }
        }
        match IkeSa::respond(conn, h, msg, local, remote, now) {
            Ok((sa, out)) => {
                let ours = sa.our_spi();
                self.by_initiator.insert((remote.ip(), h.spi_i), ours);
                self.sas.insert(ours, sa);
                out
            }
            Err(out) => out,
        }
    }

    fn count(&mut self, out: Output) -> Output {
        if let Some(why) = out.dropped {
            *self.dropped.entry(why).or_default() += 1;
        }
        out
    }

    /// When [`tick`](Self::tick) next has something to do: the earliest of every
    /// SA's next deadline and every self-starting connection's restart that has no
    /// SA. `None`: nothing is due until a message comes or an operator asks. A
    /// caller that ticks at this time (or on every message) misses no timer.
    pub fn next_deadline(&self, now: Instant) -> Option<Instant> {
        let restarts = self
            .restart_at
            .iter()
            .filter(|(name, _)| !self.sas.values().any(|s| s.connection().name == **name))
            .map(|(_, &at)| at);
        self.sas
            .values()
            .filter_map(|sa| sa.next_deadline(now))
            .chain(restarts)
            .min()
    }

    /// Runs every SA's timers, and starts connections that start themselves and
    /// have no SA.
    pub fn tick(&mut self, now: Instant) -> Output {
        let mut out = Output::default();
        for sa in self.sas.values_mut() {
            out.append(sa.tick(now));
        }
        self.adopt_successors();
        self.reap(&mut out, now);
        let due: Vec<String> = self
            .restart_at
            .iter()
            .filter(|(name, at)| {
                **at <= now && !self.sas.values().any(|s| s.connection().name == **name)
            })
            .map(|(name, _)| name.clone())
            .collect();
        for name in due {
            self.restart_at.insert(name.clone(), now + RESTART_AFTER);
            if let Ok(o) = self.initiate(&name, now) {
                out.append(o);
            }
        }
        out
    }

    /// Forgets closed SAs; a self-starting connection whose SA closed starts again
    /// after a pause.
    fn reap(&mut self, _out: &mut Output, now: Instant) {
        let closed: Vec<u64> = self
            .sas
            .iter()
            .filter(|(_, s)| s.state() == State::Closed)
            .map(|(k, _)| *k)
            .collect();
        for k in closed {
            if let Some(sa) = self.sas.remove(&k) {
                let name = &sa.connection().name;
                if let Some(at) = self.restart_at.get_mut(name) {
                    *at = (*at).max(now + RESTART_AFTER);
                }
                self.by_initiator.retain(|_, ours| *ours != k);
            }
        }
    }

    pub fn summaries(&self, now: Instant) -> Vec<SaSummary> {
        let mut v: Vec<SaSummary> = self.sas.values().map(|s| s.summary(now)).collect();
        v.sort_by(|a, b| a.connection.cmp(&b.connection).then(a.spi_i.cmp(&b.spi_i)));
        v
    }
}

/// A request of a major version above 2 is answered, unauthenticated, with
/// INVALID_MAJOR_VERSION in a version 2 header (RFC 7296 section 2.5); anything
/// else with a wrong version is only dropped.
fn bad_version(msg: &[u8], local: SocketAddr, remote: SocketAddr) -> Output {
    let mut out = Output::dropped("bad-version");
    if msg.len() < HEADER_LEN || msg[17] >> 4 <= 2 || msg[19] & flags::RESPONSE != 0 {
        return out;
    }
    let spi = |at: usize| u64::from_be_bytes(msg[at..at + 8].try_into().expect("8 bytes"));
    let answer = Header {
        spi_i: spi(0),
        spi_r: spi(8),
        next_payload: 0,
        exchange: msg[18],
        flags: flags::RESPONSE,
        message_id: u32::from_be_bytes(msg[20..24].try_into().expect("4 bytes")),
        length: 0,
    };
    let n = Notify::new(notify::INVALID_MAJOR_VERSION, vec![0x20]);
    out.datagrams.push(Datagram {
        local,
        remote,
        message: message(answer, &[Payload::Notify(n)]),
    });
    out
}
