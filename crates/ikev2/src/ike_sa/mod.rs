//! One IKE SA from either end: IKE_SA_INIT and IKE_AUTH with pre-shared keys and the
//! child SA made with them, INFORMATIONAL (deletes and dead peer detection), and
//! retransmission of requests with backoff. Message IDs follow RFC 7296 section
//! 2.2 with a window of one: a request is answered once, its retransmission gets
//! the same answer again, anything else is dropped.

use crate::auth;
use crate::config::{Connection, describe_identity};
use crate::dh::KeyPair;
use crate::keys::{self, IkeKeys};
use crate::nat;
use crate::output::{ChildSa, Datagram, Event, NAT_T_PORT, Output};
use crate::proposal::{Chosen, Kind};
use crate::sk::SkCipher;
use crate::wire::{
    Auth, Delete, Find, HEADER_LEN, Header, Identification, KeyExchange, Notify, Payload,
    TrafficSelector, auth_method, emit_chain, exchange, flags, notify, parse_chain, protocol,
};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod authenticate;
mod fragments;
mod informational;
mod init;
mod rekey;
mod responder;

const NONCE_LEN: usize = 32;
/// A liveness check goes where a keepalive came from at most this often.
const PROBE_EVERY: Duration = Duration::from_secs(5);
/// How long a peer that sends no keepalives must be quiet before one from
/// elsewhere is looked into (strongSwan's default keepalive is 20 s).
const PEER_QUIET_WITHOUT_KEEPALIVES: Duration = Duration::from_secs(30);
/// INVALID_KE_PAYLOAD and COOKIE answers followed before giving up on a peer.
const INIT_RETRIES: u8 = 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Initiator,
    Responder,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Initiator: IKE_SA_INIT request sent.
    InitSent,
    /// Initiator: IKE_AUTH request sent.
    AuthSent,
    /// Responder: IKE_SA_INIT answered, waiting for IKE_AUTH.
    InitReplied,
    Established,
    /// Our delete of the IKE SA is out.
    Deleting,
    /// Replaced by a rekeyed IKE SA (its successor holds the children): waits for
    /// the delete that ends it, then closes without a word.
    Rekeyed,
    Closed,
}

/// The largest IP datagram an IKE message is sent in whole, with RFC 7383
/// fragmentation agreed: larger ones go as fragments of at most this size,
/// the IPv6 minimum MTU (what strongSwan's `fragment_size` defaults to).
const FRAGMENT_DATAGRAM: usize = 1280;
/// What surrounds an IKE message in its datagram: the IP header (IPv6's, the
/// larger), UDP's and the non-ESP marker.
const DATAGRAM_HEADERS: usize = 40 + 8 + 4;
/// Fragments of one message held at most, and their bytes: a message larger
/// than any certificate chain sent here is refused, not buffered.
const MAX_FRAGMENTS: u16 = 64;
const MAX_FRAGMENT_BYTES: usize = 32 * 1024;

/// An encrypted message as sent: one IKE message, or its RFC 7383 fragments.
type Wire = Vec<Vec<u8>>;

/// The fragments of one incoming message so far (RFC 7383 section 2.6).
struct Incoming {
    message_id: u32,
    response: bool,
    total: u16,
    /// The first inner payload's type, from fragment 1.
    first_inner: Option<u8>,
    pieces: std::collections::BTreeMap<u16, Vec<u8>>,
    bytes: usize,
}

/// The request waiting for its response.
struct Outstanding {
    id: u32,
    message: Wire,
    sent_at: Instant,
    tries: u32,
    purpose: Purpose,
}

/// What an outstanding request asks, so its answer is handled as such.
enum Purpose {
    /// IKE_SA_INIT, IKE_AUTH, or a liveness check.
    Plain,
    DeleteIke,
    /// The delete of a child SA that a rekey replaced.
    DeleteChild(ChildSpis),
    RekeyChild(Box<rekey::ChildRekey>),
    RekeyIke(Box<rekey::IkeRekey>),
}

/// The child SA's identity on both ends, kept to answer and send deletes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChildSpis {
    pub inbound: u32,
    pub outbound: u32,
}

pub struct IkeSa {
    conn: Arc<Connection>,
    role: Role,
    state: State,
    spi_i: u64,
    spi_r: u64,
    local: SocketAddr,
    remote: SocketAddr,
    ni: Vec<u8>,
    nr: Vec<u8>,
    dh: Option<KeyPair>,
    chosen: Option<Chosen>,
    keys: Option<IkeKeys>,
    tx: Option<SkCipher>,
    rx: Option<SkCipher>,
    /// The two IKE_SA_INIT messages as sent: what AUTH covers.
    init_request: Vec<u8>,
    init_response: Vec<u8>,
    /// A NAT between us (or encapsulation forced): IKE on port 4500, ESP in UDP.
    behind_nat: bool,
    /// The NAT is in front of us (the peer's NAT_DETECTION_DESTINATION_IP does
    /// not hash to our address): our side keeps its mapping alive.
    nat_ours: bool,
    /// When the next NAT keepalive goes, once established with `nat_ours`.
    keepalive_at: Option<Instant>,
    /// When a liveness check last went to where a keepalive came from.
    probed_at: Option<Instant>,
    /// When a keepalive last came from where the peer is, and the gap before
    /// it: how quiet the peer may be before a keepalive from elsewhere is
    /// looked into.
    peer_keepalive_at: Option<Instant>,
    peer_keepalive_gap: Option<Duration>,
    /// The identity the peer authenticated with (its ID payload).
    peer_id: Option<Identification>,
    /// The peer authenticated with INITIAL_CONTACT: it holds no other IKE SA
    /// with us (it restarted), so ours from before are dead. For the endpoint,
    /// once.
    peer_started_afresh: bool,
    /// Our IKE_AUTH request says INITIAL_CONTACT: we hold no other IKE SA with
    /// the peer.
    initial_contact: bool,
    next_request_id: u32,
    expected_request_id: u32,
    outstanding: Option<Outstanding>,
    last_response: Option<(u32, Wire)>,
    /// Both ends offered IKEV2_FRAGMENTATION_SUPPORTED in IKE_SA_INIT.
    fragmentation: bool,
    incoming: Option<Incoming>,
    cookie: Option<Vec<u8>>,
    init_retries: u8,
    /// The child SAs: the last is the one in use; earlier ones wait for their
    /// delete after a rekey.
    children: Vec<ChildSpis>,
    child_spi_in: u32,
    last_heard: Instant,
    established_at: Option<Instant>,
    /// When our side rekeys the child SA and the IKE SA next.
    child_rekey_at: Option<Instant>,
    ike_rekey_at: Option<Instant>,
    /// The IKE SA a rekey made of this one, for the endpoint to take over.
    successor: Option<Box<IkeSa>>,
}

/// Why an encrypted message gave no payloads.
enum Undecrypted {
    /// Dropped, for this reason (nothing answered).
    Dropped(&'static str),
    /// A fragment kept until the rest of its message comes.
    Waiting,
    /// It opened, and holds an unknown payload marked critical, of this type.
    Critical(u8),
}

/// What `show ike` prints about one IKE SA.
#[derive(Clone, Debug)]
pub struct SaSummary {
    pub connection: String,
    pub role: Role,
    pub state: State,
    pub spi_i: u64,
    pub spi_r: u64,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub algorithms: Option<String>,
    pub established_for: Option<Duration>,
    pub child: Option<ChildSpis>,
}

fn random_bytes(n: usize) -> Vec<u8> {
    let mut b = vec![0u8; n];
    aws_lc_rs::rand::fill(&mut b).expect("system randomness");
    b
}

fn random_spi64() -> u64 {
    loop {
        let v = u64::from_be_bytes(random_bytes(8).try_into().expect("8 bytes"));
        if v != 0 {
            return v;
        }
    }
}

/// A random ESP SPI outside the reserved range (RFC 4303 section 2.1).
pub fn random_esp_spi() -> u32 {
    loop {
        let v = u32::from_be_bytes(random_bytes(4).try_into().expect("4 bytes"));
        // SPIs 1-255 are reserved by IANA (RFC 4303 section 2.1).
        if v >= 256 {
            return v;
        }
    }
}

fn notify_of(payloads: &[Payload], kind: u16) -> Option<&Notify> {
    payloads.iter().find_map(|p| match p {
        Payload::Notify(n) if n.kind == kind => Some(n),
        _ => None,
    })
}

/// The first error notify, by name for the log.
fn error_notify(payloads: &[Payload]) -> Option<u16> {
    payloads.iter().find_map(|p| match p {
        Payload::Notify(n) if notify::is_error(n.kind) => Some(n.kind),
        _ => None,
    })
}

pub fn notify_name(kind: u16) -> String {
    let name = match kind {
        notify::UNSUPPORTED_CRITICAL_PAYLOAD => "UNSUPPORTED_CRITICAL_PAYLOAD",
        notify::INVALID_SYNTAX => "INVALID_SYNTAX",
        notify::NO_PROPOSAL_CHOSEN => "NO_PROPOSAL_CHOSEN",
        notify::INVALID_KE_PAYLOAD => "INVALID_KE_PAYLOAD",
        notify::AUTHENTICATION_FAILED => "AUTHENTICATION_FAILED",
        notify::TS_UNACCEPTABLE => "TS_UNACCEPTABLE",
        notify::SINGLE_PAIR_REQUIRED => "SINGLE_PAIR_REQUIRED",
        notify::NO_ADDITIONAL_SAS => "NO_ADDITIONAL_SAS",
        notify::INTERNAL_ADDRESS_FAILURE => "INTERNAL_ADDRESS_FAILURE",
        notify::FAILED_CP_REQUIRED => "FAILED_CP_REQUIRED",
        notify::TEMPORARY_FAILURE => "TEMPORARY_FAILURE",
        notify::CHILD_SA_NOT_FOUND => "CHILD_SA_NOT_FOUND",
        _ => return format!("error notify {kind}"),
    };
    name.to_string()
}

impl IkeSa {
    fn new(
        conn: Arc<Connection>,
        role: Role,
        local: SocketAddr,
        remote: SocketAddr,
        now: Instant,
    ) -> IkeSa {
        IkeSa {
            conn,
            role,
            state: State::InitSent,
            spi_i: 0,
            spi_r: 0,
            local,
            remote,
            ni: Vec::new(),
            nr: Vec::new(),
            dh: None,
            chosen: None,
            keys: None,
            tx: None,
            rx: None,
            init_request: Vec::new(),
            init_response: Vec::new(),
            behind_nat: false,
            nat_ours: false,
            keepalive_at: None,
            peer_started_afresh: false,
            probed_at: None,
            peer_keepalive_at: None,
            peer_keepalive_gap: None,
            peer_id: None,
            initial_contact: true,
            next_request_id: 0,
            expected_request_id: 0,
            outstanding: None,
            last_response: None,
            fragmentation: false,
            incoming: None,
            cookie: None,
            init_retries: 0,
            children: Vec::new(),
            child_spi_in: 0,
            last_heard: now,
            established_at: None,
            child_rekey_at: None,
            ike_rekey_at: None,
            successor: None,
        }
    }

    /// Starts an IKE SA to the connection's peer: the IKE_SA_INIT request.
    pub fn initiate(
        conn: Arc<Connection>,
        local: SocketAddr,
        remote: SocketAddr,
        now: Instant,
    ) -> (IkeSa, Output) {
        let mut sa = IkeSa::new(conn, Role::Initiator, local, remote, now);
        sa.spi_i = random_spi64();
        sa.ni = random_bytes(NONCE_LEN);
        let group = sa.conn.ike[0].groups[0];
        sa.dh = Some(KeyPair::generate(group));
        let out = sa.send_init_request(now);
        (sa, out)
    }

    /// Our SPI: what the peer's messages to this SA carry in our half.
    pub fn our_spi(&self) -> u64 {
        match self.role {
            Role::Initiator => self.spi_i,
            Role::Responder => self.spi_r,
        }
    }

    pub fn spi_i(&self) -> u64 {
        self.spi_i
    }

    pub fn state(&self) -> State {
        self.state
    }

    pub fn connection(&self) -> &Arc<Connection> {
        &self.conn
    }

    pub fn summary(&self, now: Instant) -> SaSummary {
        SaSummary {
            connection: self.conn.name.clone(),
            role: self.role,
            state: self.state,
            spi_i: self.spi_i,
            spi_r: self.spi_r,
            local: self.local,
            remote: self.remote,
            algorithms: self.chosen.map(|c| c.describe()),
            established_for: self
                .established_at
                .map(|t| now.saturating_duration_since(t)),
            child: self.children.last().copied(),
        }
    }

    fn nat_hashes(&self, spi_r: u64) -> (Notify, Notify) {
        let source = if self.conn.encap {
            // A hash that matches nothing: the peer sees a NAT and both sides
            // encapsulate (what strongSwan's `encap = yes` does).
            random_bytes(nat::HASH_LEN)
        } else {
            nat::hash(self.spi_i, spi_r, self.local).to_vec()
        };
        (
            Notify::new(notify::NAT_DETECTION_SOURCE_IP, source),
            Notify::new(
                notify::NAT_DETECTION_DESTINATION_IP,
                nat::hash(self.spi_i, spi_r, self.remote).to_vec(),
            ),
        )
    }

    /// Whether the peer's NAT detection notifies show a NAT (or forced
    /// encapsulation), and whether it is in front of us; false when it sent none
    /// (then it cannot do NAT traversal).
    fn detect_nat(&self, payloads: &[Payload], spi_r: u64) -> (bool, bool) {
        let sources: Vec<&[u8]> = payloads
            .iter()
            .filter_map(|p| match p {
                Payload::Notify(n) if n.kind == notify::NAT_DETECTION_SOURCE_IP => {
                    Some(n.data.as_slice())
                }
                _ => None,
            })
            .collect();
        let Some(dest) = notify_of(payloads, notify::NAT_DETECTION_DESTINATION_IP) else {
            return (false, false);
        };
        let peer_moved = !sources
            .iter()
            .any(|s| *s == nat::hash(self.spi_i, spi_r, self.remote).as_slice());
        let we_moved = dest.data != nat::hash(self.spi_i, spi_r, self.local);
        (peer_moved || we_moved || self.conn.encap, we_moved)
    }

    fn header(&self, exchange: u8, response: bool, message_id: u32) -> Header {
        let mut f = if response { flags::RESPONSE } else { 0 };
        if self.role == Role::Initiator {
            f |= flags::INITIATOR;
        }
        Header {
            spi_i: self.spi_i,
            spi_r: self.spi_r,
            next_payload: 0,
            exchange,
            flags: f,
            message_id,
            length: 0,
        }
    }

    fn plain_message(&self, h: Header, payloads: &[Payload]) -> Vec<u8> {
        crate::wire::message(h, payloads)
    }

    /// The message encrypted: whole, or as RFC 7383 fragments when both ends
    /// agreed to them and it would not fit a datagram of `FRAGMENT_DATAGRAM`.
    fn sealed_message(&mut self, h: Header, payloads: &[Payload]) -> Wire {
        let (first, body) = emit_chain(payloads);
        let room = FRAGMENT_DATAGRAM - DATAGRAM_HEADERS;
        let tx = self.tx.as_mut().expect("keys before encrypted messages");
        if self.fragmentation && crate::sk::SEAL_OVERHEAD + body.len() > room {
            tx.seal_fragments(h, first, &body, room - crate::sk::FRAGMENT_OVERHEAD)
        } else {
            vec![tx.seal(h, first, &body)]
        }
    }

    fn datagram(&self, message: Vec<u8>) -> Datagram {
        Datagram {
            local: self.local,
            remote: self.remote,
            message,
        }
    }

    fn datagrams(&self, wire: &[Vec<u8>]) -> Vec<Datagram> {
        wire.iter().map(|m| self.datagram(m.clone())).collect()
    }

    fn send_request(&mut self, message: Wire, purpose: Purpose, now: Instant) -> Vec<Datagram> {
        let out = self.datagrams(&message);
        self.outstanding = Some(Outstanding {
            id: self.next_request_id,
            message,
            sent_at: now,
            tries: 1,
            purpose,
        });
        self.next_request_id += 1;
        out
    }

    fn answer(&mut self, id: u32, message: Wire) -> Vec<Datagram> {
        let out = self.datagrams(&message);
        self.last_response = Some((id, message));
        self.expected_request_id = id + 1;
        out
    }

    fn close(&mut self, reason: String, out: &mut Output) {
        if self.state == State::Closed {
            return;
        }
        // One replaced by a rekey ends quietly: its successor carries on.
        let quiet = self.state == State::Rekeyed;
        self.state = State::Closed;
        self.outstanding = None;
        for c in self.children.drain(..) {
            out.events.push(Event::ChildDown {
                inbound_spi: c.inbound,
                outbound_spi: c.outbound,
            });
        }
        if !quiet {
            out.events.push(Event::Closed { reason });
        }
    }

    /// An empty INFORMATIONAL request: is the peer alive (RFC 7296 section 1.4)?
    fn send_liveness_check(&mut self, now: Instant) -> Vec<Datagram> {
        let id = self.next_request_id;
        let m = self.sealed_message(self.header(exchange::INFORMATIONAL, false, id), &[]);
        self.send_request(m, Purpose::Plain, now)
    }

    /// Where the peer's messages come from.
    pub fn peer(&self) -> SocketAddr {
        self.remote
    }

    /// A keepalive came from where the peer is: it is there, and this is how
    /// often it says so.
    pub fn heard_keepalive(&mut self, now: Instant) {
        if let Some(t) = self.peer_keepalive_at {
            self.peer_keepalive_gap = Some(now.saturating_duration_since(t));
        }
        self.peer_keepalive_at = Some(now);
    }

    /// Whether the peer has been quiet where it is for long enough that a
    /// keepalive from elsewhere may be its new mapping: longer than 2.5 of its
    /// keepalive gaps (5 s at least; 30 s when it sends none), and nothing
    /// authenticated from it meanwhile. A peer alive where it is cannot be
    /// lured away by someone relaying our liveness check from another address.
    fn peer_quiet(&self, now: Instant) -> bool {
        let quiet_for = self
            .peer_keepalive_gap
            .map_or(PEER_QUIET_WITHOUT_KEEPALIVES, |g| {
                (g * 5 / 2).clamp(PROBE_EVERY, PEER_QUIET_WITHOUT_KEEPALIVES * 2)
            });
        let heard = self
            .peer_keepalive_at
            .map_or(self.last_heard, |k| k.max(self.last_heard));
        now.saturating_duration_since(heard) >= quiet_for
    }

    /// The identity the peer authenticated with, once it has.
    pub fn peer_identity(&self) -> Option<&Identification> {
        self.peer_id.as_ref()
    }

    /// Asks at `remote`, with an empty INFORMATIONAL request, whether the peer
    /// is there: a NATed peer's keepalive came from there (`Endpoint::keepalive`).
    /// Only with a NAT detected, nothing else outstanding, and not within
    /// `PROBE_EVERY` of the last: whoever sends keepalives decides nothing but
    /// where one small request goes, now and then. Its answer, authenticated,
    /// moves the SA there (`follow_peer`); retransmissions go where the peer was.
    pub fn probe(&mut self, local: SocketAddr, remote: SocketAddr, now: Instant) -> Output {
        let recent = self
            .probed_at
            .is_some_and(|t| now.saturating_duration_since(t) < PROBE_EVERY);
        if self.state != State::Established
            || !self.behind_nat
            || self.outstanding.is_some()
            || recent
            || local.ip() != self.local.ip()
            || !self.peer_quiet(now)
        {
            return Output::default();
        }
        self.probed_at = Some(now);
        let sent = self.send_liveness_check(now);
        Output {
            datagrams: sent.into_iter().map(|d| Datagram { remote, ..d }).collect(),
            ..Output::default()
        }
    }

    /// Whether our IKE_AUTH request says INITIAL_CONTACT (by default it does).
    pub fn set_initial_contact(&mut self, on: bool) {
        self.initial_contact = on;
    }

    /// Whether the peer said, once authenticated, that this is its only IKE SA
    /// with us (INITIAL_CONTACT); once.
    pub fn take_peer_started_afresh(&mut self) -> bool {
        std::mem::take(&mut self.peer_started_afresh)
    }

    /// Ends the SA without a word to the peer, which no longer holds it (it
    /// restarted): its children go.
    pub fn forget(&mut self, reason: String) -> Output {
        let mut out = Output::default();
        self.close(reason, &mut out);
        out
    }

    /// The IKE SA a rekey made of this one, once.
    pub fn take_successor(&mut self) -> Option<IkeSa> {
        self.successor.take().map(|b| *b)
    }

    /// When our side rekeys something `period` after `now`: up to a tenth
    /// earlier, at random, so that two ends with the same setting rarely collide.
    fn rekey_time(now: Instant, period: Option<Duration>) -> Option<Instant> {
        let p = period?;
        let jitter = u64::from(random_bytes(2)[0]) * p.as_millis() as u64 / 2550;
        Some(now + p - Duration::from_millis(jitter))
    }

    // ----- Input and timers -----

    /// A message for this SA (the header's SPIs matched it), from `remote` to
    /// `local`.
    pub fn receive(
        &mut self,
        msg: &[u8],
        local: SocketAddr,
        remote: SocketAddr,
        now: Instant,
    ) -> Output {
        let Ok(h) = Header::parse(msg) else {
            return Output::dropped("malformed");
        };
        if self.state == State::Closed {
            return Output::dropped("closed");
        }
        if h.is_response() {
            let mut out = self.on_response(&h, msg, now);
            // Authenticated and whole (its answer took effect, not a fragment
            // kept for later), so its source is the peer's.
            let waiting =
                h.next_payload == crate::wire::payload_type::SKF && self.incoming.is_some();
            if out.dropped.is_none() && h.exchange != exchange::IKE_SA_INIT && !waiting {
                self.follow_peer(local, remote, &mut out);
            }
            out
        } else {
            self.on_request(&h, msg, local, remote, now)
        }
    }

    /// The inner payloads of an encrypted message; of a fragment, once every
    /// fragment of its message is in (`Waiting` until then).
    fn decrypt(&mut self, h: &Header, msg: &[u8]) -> Result<Vec<Payload>, Undecrypted> {
        let outer = parse_chain(h.next_payload, &msg[HEADER_LEN..])
            .map_err(|_| Undecrypted::Dropped("malformed"))?;
        let rx = self.rx.as_ref().ok_or(Undecrypted::Dropped("no-keys"))?;
        let (first_inner, plain) = match outer.last() {
            Some(Payload::Encrypted { first_inner, start }) => {
                let plain = rx
                    .open(msg, HEADER_LEN + start)
                    .map_err(|_| Undecrypted::Dropped("bad-icv"))?;
                (*first_inner, plain)
            }
            Some(Payload::EncryptedFragment { first_inner, start }) if self.fragmentation => {
                let f = rx
                    .open_fragment(msg, HEADER_LEN + start)
                    .map_err(|_| Undecrypted::Dropped("bad-icv"))?;
                self.take_fragment(h, *first_inner, f)?
            }
            _ => return Err(Undecrypted::Dropped("not-encrypted")),
        };
        parse_chain(first_inner, &plain).map_err(|e| match e {
            crate::wire::Error::UnsupportedCritical(t) => Undecrypted::Critical(t),
            _ => Undecrypted::Dropped("malformed-inner"),
        })
    }

    /// Answers an authenticated request that carries an unknown critical payload
    /// (RFC 7296 section 2.5): UNSUPPORTED_CRITICAL_PAYLOAD with its type; the
    /// message ID is used up, nothing else changes.
    fn refuse_critical(&mut self, h: &Header, kind: u8) -> Output {
        let n = [Payload::Notify(Notify::new(
            notify::UNSUPPORTED_CRITICAL_PAYLOAD,
            vec![kind],
        ))];
        let m = self.sealed_message(self.header(h.exchange, true, h.message_id), &n);
        let d = self.answer(h.message_id, m);
        Output {
            datagrams: d,
            dropped: Some("unsupported-critical"),
            ..Output::default()
        }
    }

    fn on_response(&mut self, h: &Header, msg: &[u8], now: Instant) -> Output {
        let Some(o) = &self.outstanding else {
            return Output::dropped("unexpected-response");
        };
        if o.id != h.message_id || h.from_initiator() == (self.role == Role::Initiator) {
            return Output::dropped("unexpected-response");
        }
        if h.exchange == exchange::IKE_SA_INIT {
            if self.state != State::InitSent {
                return Output::dropped("unexpected-response");
            }
            let Ok(payloads) = parse_chain(h.next_payload, &msg[HEADER_LEN..]) else {
                return Output::dropped("malformed");
            };
            self.last_heard = now;
            return self.on_init_response(h, &payloads, msg, now);
        }
        let inner = match self.decrypt(h, msg) {
            Ok(p) => p,
            Err(Undecrypted::Dropped(why)) => return Output::dropped(why),
            Err(Undecrypted::Waiting) => return Output::default(),
            // A response is never answered.
            Err(Undecrypted::Critical(_)) => return Output::dropped("unsupported-critical"),
        };
        self.last_heard = now;
        match (self.state, h.exchange) {
            (State::AuthSent, exchange::IKE_AUTH) => self.on_auth_response(&inner, now),
            (_, exchange::INFORMATIONAL) => {
                let purpose = self.outstanding.take().map(|o| o.purpose);
                let mut out = Output::default();
                match purpose {
                    Some(Purpose::DeleteIke) => {
                        self.close(format!("{}: deleted", self.conn.name), &mut out)
                    }
                    Some(Purpose::DeleteChild(c)) => self.child_gone(c, &mut out),
                    _ => {}
                }
                out
            }
            (State::Established, exchange::CREATE_CHILD_SA) => {
                match self.outstanding.take().map(|o| o.purpose) {
                    Some(Purpose::RekeyChild(r)) => self.on_child_rekey_response(*r, &inner, now),
                    Some(Purpose::RekeyIke(r)) => self.on_ike_rekey_response(*r, &inner, now),
                    _ => Output::dropped("unexpected-response"),
                }
            }
            _ => Output::dropped("unexpected-response"),
        }
    }

    fn on_request(
        &mut self,
        h: &Header,
        msg: &[u8],
        local: SocketAddr,
        remote: SocketAddr,
        now: Instant,
    ) -> Output {
        if h.from_initiator() != (self.role == Role::Responder) {
            return Output::dropped("wrong-role");
        }
        if let Some((id, m)) = &self.last_response
            && *id == h.message_id
        {
            // A retransmission: the same answer again, nothing else changes. Of
            // a fragmented one, its first fragment alone asks (RFC 7383 section
            // 2.6.1): the answer goes once, not once per fragment.
            if !fragments::first_or_whole(h, msg) {
                return Output::dropped("retransmitted-fragment");
            }
            let m = m.clone();
            let d = self.datagrams(&m);
            return Output {
                datagrams: d,
                dropped: Some("retransmitted-request"),
                ..Output::default()
            };
        }
        if h.message_id != self.expected_request_id {
            return Output::dropped("unexpected-message-id");
        }
        let inner = match self.decrypt(h, msg) {
            Ok(p) => p,
            Err(Undecrypted::Dropped(why)) => return Output::dropped(why),
            Err(Undecrypted::Waiting) => return Output::default(),
            Err(Undecrypted::Critical(kind)) => return self.refuse_critical(h, kind),
        };
        self.last_heard = now;
        // The peer may have moved to port 4500 (NAT traversal) or roamed: answer
        // where the authenticated request came from.
        let mut moved = Output::default();
        self.follow_peer(local, remote, &mut moved);
        let mut out = match (self.state, h.exchange) {
            (State::InitReplied, exchange::IKE_AUTH) => {
                self.on_auth_request(h.message_id, &inner, now)
            }
            (State::Established | State::Deleting | State::Rekeyed, exchange::INFORMATIONAL) => {
                self.on_informational_request(h.message_id, &inner)
            }
            (State::Established, exchange::CREATE_CHILD_SA) => {
                self.on_create_child_sa_request(h.message_id, &inner, now)
            }
            _ => Output::dropped("unexpected-exchange"),
        };
        out.append(moved);
        out
    }

    /// Takes the addresses an authenticated message came between as the SA's.
    /// Once established behind a NAT, a change is the NAT's new mapping (RFC 7296
    /// section 2.23, RFC 3948): the connection's ESP is told to follow.
    fn follow_peer(&mut self, local: SocketAddr, remote: SocketAddr, out: &mut Output) {
        let moved = (local, remote) != (self.local, self.remote);
        self.local = local;
        self.remote = remote;
        if moved && self.behind_nat && self.state == State::Established {
            out.events.push(Event::PeerMoved {
                connection: self.conn.name.clone(),
                local,
                remote,
            });
        }
    }

    /// When [`tick`](Self::tick) next has something to do, by the same rules:
    /// now, for an SA that is closed or has a successor to hand over (the endpoint
    /// does both at a tick); otherwise the earliest of the keepalive, the
    /// outstanding request's retransmission, and, with none outstanding, the give-up
    /// on a half-made SA, the liveness check and the rekeys. `None`: nothing is due
    /// until a message comes.
    pub fn next_deadline(&self, now: Instant) -> Option<Instant> {
        if self.state == State::Closed || self.successor.is_some() {
            return Some(now);
        }
        let timers = &self.conn.timers;
        let keepalive = match (self.state, self.nat_ours, timers.nat_keepalive) {
            (State::Established, true, Some(every)) => Some(
                self.keepalive_at
                    .unwrap_or(self.established_at.unwrap_or(now) + every),
            ),
            _ => None,
        };
        let rest = if let Some(o) = &self.outstanding {
            Some(o.sent_at + timers.retransmit_base * 2u32.saturating_pow(o.tries - 1))
        } else if matches!(self.state, State::InitReplied | State::Rekeyed) {
            Some(self.last_heard + timers.retransmit_base * 16)
        } else if self.state == State::Established {
            let dpd = timers.dpd.map(|d| self.last_heard + d);
            [dpd, self.ike_rekey_at, self.child_rekey_at]
                .into_iter()
                .flatten()
                .min()
        } else {
            None
        };
        [keepalive, rest].into_iter().flatten().min()
    }

    /// Retransmits the outstanding request when its time has come, gives up on a
    /// peer that never answers, and sends dead peer detection probes.
    pub fn tick(&mut self, now: Instant) -> Output {
        let mut out = Output::default();
        let timers = self.conn.timers.clone();
        // Keepalives go whatever else is under way: the NAT forgets a quiet
        // mapping as surely during a retransmission as outside one.
        if let (State::Established, true, Some(every)) =
            (self.state, self.nat_ours, timers.nat_keepalive)
        {
            let since = self.established_at.unwrap_or(now);
            let due = *self.keepalive_at.get_or_insert(since + every);
            if now >= due {
                out.datagrams
                    .push(Datagram::keepalive(self.local, self.remote));
                self.keepalive_at = Some(now + every);
            }
        }
        if let Some(o) = &mut self.outstanding {
            let wait = timers.retransmit_base * 2u32.saturating_pow(o.tries - 1);
            if now.saturating_duration_since(o.sent_at) >= wait {
                if o.tries >= timers.retransmit_tries {
                    let tries = o.tries;
                    let reason = format!(
                        "{}: no answer from {} after {tries} transmissions",
                        self.conn.name, self.remote
                    );
                    self.close(reason, &mut out);
                } else {
                    o.tries += 1;
                    o.sent_at = now;
                    let m = o.message.clone();
                    out.datagrams.extend(self.datagrams(&m));
                }
            }
            return out;
        }
        if matches!(self.state, State::InitReplied | State::Rekeyed)
            && now.saturating_duration_since(self.last_heard) >= timers.retransmit_base * 16
        {
            self.close(
                format!("{}: the peer never sent IKE_AUTH", self.conn.name),
                &mut out,
            );
            return out;
        }
        if let (State::Established, Some(dpd)) = (self.state, timers.dpd)
            && now.saturating_duration_since(self.last_heard) >= dpd
        {
            out.datagrams.extend(self.send_liveness_check(now));
            return out;
        }
        if self.state == State::Established {
            if self.ike_rekey_at.is_some_and(|t| now >= t) {
                out.datagrams.extend(self.start_ike_rekey(now));
            } else if self.child_rekey_at.is_some_and(|t| now >= t)
                && let Some(d) = self.start_child_rekey(now)
            {
                out.datagrams.extend(d);
            }
        }
        out
    }
}

fn spi32(b: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(b.try_into().ok()?))
}

fn traffic_selectors(inner: &[Payload]) -> Option<(&[TrafficSelector], &[TrafficSelector])> {
    let tsi = inner.ts_i()?;
    let tsr = inner.ts_r()?;
    Some((tsi, tsr))
}
