//! The gateway's OpenVPN servers' control: one thread runs every client's control
//! channel (`openvpn::server::ServerSession`). Control packets reach it from every
//! worker's `ip-local` through a bounded inbox; what the sessions answer, and the
//! clients and keys they agree, go to the owner worker as one request per step
//! (`OvpnWork`): the changes are made on every worker's table, and the datagrams
//! leave through the owner's graph from the server's port. It hands out peer-ids
//! and pool addresses, answers push requests, sends keepalive pings, lets go of
//! clients that fell silent, and publishes its state for `show openvpn`.

use super::config::{GatewayConfig, OvpnConfig, OvpnProtection, Prefix};
use crypto::KeyRegistry;
use dataplane::ovpn::{OvpnChange, OvpnInput, OvpnKey, OvpnServerId};
use openvpn::data::{DataHeader, PING};
use openvpn::data_keys::DataKeys;
use openvpn::peer_info::proto;
use openvpn::push::PushReply;
use openvpn::server::{Event, Output, ServerConfig, ServerSession};
use openvpn::wrap::ControlWrap;
use openvpn::{KeyId, Opcode, Refusal, Role, TlsAuth, TlsCrypt};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// The longest the thread sleeps with nothing due: pings and silent clients are
/// looked at on this grain.
const MAX_SLEEP: Duration = Duration::from_millis(500);
/// Control packets taken in one step before its output is carried out.
const BATCH: usize = 64;
/// Clients whose handshake is under way, per server: more new ones are refused
/// (a flood of hard resets costs each one a TLS session at most this often).
const MAX_HANDSHAKES: usize = 256;
/// Of those, from one IP address.
const MAX_HANDSHAKES_PER_ADDRESS: usize = 16;
/// How long a client's hard reset is remembered, to refuse it replayed: as long
/// as a handshake may take.
const RESET_MEMORY: Duration = Duration::from_secs(60);
/// The most hard resets remembered at once; past it new clients wait.
const MAX_RESETS_REMEMBERED: usize = 4096;
/// How often the state `show openvpn` prints is made again.
const PUBLISH_EVERY: Duration = Duration::from_millis(200);
/// The options string the server sends in key-method 2; clients only compare it
/// with their own to warn.
const OPTIONS: &str = "V4,dev-type tun,link-mtu 1549,tun-mtu 1500,proto UDPv4,cipher AES-256-GCM,auth [null-digest],keysize 256,key-method 2,tls-server";

/// One step's output for the owner worker, carried out in order: the changes to
/// every worker's table, then the datagrams (from the server's port, to a client).
pub struct OvpnWork {
    pub changes: Vec<OvpnChange>,
    pub datagrams: Vec<(u16, SocketAddr, Vec<u8>)>,
}

pub type ToWorker = super::owner_step::ToWorker<OvpnWork>;

/// One client as `show openvpn` prints it.
#[derive(Clone, Debug)]
pub struct ClientStatus {
    pub common_name: String,
    pub remote: SocketAddr,
    pub addrs: Vec<IpAddr>,
    pub peer_id: u32,
    pub cipher: String,
    pub ekm: bool,
    pub version: String,
    /// (key id, state, age).
    pub keys: Vec<(u8, &'static str, Duration)>,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub connected: Duration,
}

/// One server as `show openvpn` prints it.
#[derive(Clone, Debug, Default)]
pub struct ServerStatus {
    pub name: String,
    pub port: u16,
    pub protection: &'static str,
    pub clients: Vec<ClientStatus>,
    pub handshakes: usize,
    /// Control packets refused, by reason.
    pub refused: BTreeMap<&'static str, u64>,
}

/// What `show openvpn` prints, as of the thread's last step.
#[derive(Default)]
pub struct OvpnStatus {
    pub servers: Vec<ServerStatus>,
    pub recent: VecDeque<String>,
    pub at: Option<Instant>,
}

struct Key {
    id: KeyId,
    shared: Arc<OvpnKey>,
    /// The server's side of the keys, for the thread's own pings.
    keys: DataKeys,
}

struct Client {
    session: ServerSession,
    peer_id: u32,
    remote: SocketAddr,
    addrs: Vec<IpAddr>,
    /// Added to the workers' tables (once authenticated).
    added: bool,
    keys: Vec<Key>,
    /// Bytes of keys already retired.
    retired_in: u64,
    retired_out: u64,
    connected: Instant,
    /// The key the workers seal with (the first until the client has another).
    sending: KeyId,
    /// Packets in when last looked at, and when that count last changed.
    seen_in: (u64, Instant),
    last_ping: Instant,
    /// The keepalive it was told (ping, ping-restart): a reload that changes
    /// the server's applies to clients that connect after it.
    keepalive: (Duration, Duration),
    /// The server's settings generation its newest key was begun under.
    generation: u64,
}

impl Client {
    fn packets_in(&self) -> u64 {
        self.keys
            .iter()
            .map(|k| k.shared.usage.packets_in.load(Ordering::Relaxed))
            .sum()
    }
}

/// What a reload may change in a running server: what clients that connect
/// from then on are given, and what connected ones renegotiate under.
pub struct ServerSettings {
    protection: &'static str,
    config: Arc<ServerConfig>,
    push_routes: Vec<Prefix>,
    ping: Duration,
    ping_restart: Duration,
}

impl ServerSettings {
    pub fn of(c: &OvpnConfig) -> ServerSettings {
        ServerSettings {
            protection: c.protection.describe(),
            config: Arc::new(session_config(c)),
            push_routes: c.push_routes.clone(),
            ping: Duration::from_secs(u64::from(c.ping)),
            ping_restart: Duration::from_secs(u64::from(c.ping_restart)),
        }
    }
}

/// A reload's new settings for server `index` (its place in the file).
pub type ServerUpdate = (usize, ServerSettings);

struct Server {
    id: OvpnServerId,
    name: String,
    port: u16,
    settings: ServerSettings,
    /// How many times a reload changed the settings: a client whose keys are
    /// older renegotiates once it is not negotiating already.
    generation: u64,
    pool: Option<Prefix>,
    pool6: Option<Prefix>,
    mtu: u16,
    clients: HashMap<SocketAddr, Client>,
    peer_ids: HashSet<u32>,
    /// The peer-id handed out last: ids go round rather than being reused at
    /// once, so that a late message about a client that left names no one.
    last_peer_id: u32,
    /// Clients' session ids of recent hard resets, and when they came.
    resets: HashMap<openvpn::control::SessionId, Instant>,
    taken: HashSet<IpAddr>,
    refused: BTreeMap<&'static str, u64>,
}

impl Server {
    /// The next free peer-id after the last one handed out.
    fn take_peer_id(&mut self) -> Option<u32> {
        let max = dataplane::ovpn::MAX_PEER_ID;
        let start = self.last_peer_id;
        let mut id = start;
        loop {
            id = if id >= max { 0 } else { id + 1 };
            if !self.peer_ids.contains(&id) {
                self.peer_ids.insert(id);
                self.last_peer_id = id;
                return Some(id);
            }
            if id == start {
                return None;
            }
        }
    }
}

/// The session configuration of an `[[openvpn]]` server.
fn session_config(c: &OvpnConfig) -> ServerConfig {
    let wrap = match &c.protection {
        OvpnProtection::None => ControlWrap::None,
        OvpnProtection::Auth {
            key,
            direction,
            digest,
        } => ControlWrap::Auth(TlsAuth::new(key, *direction, *digest)),
        OvpnProtection::Crypt { key } => ControlWrap::Crypt(TlsCrypt::new(key, Role::Server)),
        // Each session protects its channel with its client's own key.
        OvpnProtection::CryptV2 { .. } => ControlWrap::None,
    };
    ServerConfig {
        tls: c.tls.clone(),
        wrap: Arc::new(wrap),
        ciphers: c.ciphers.clone(),
        reneg: (c.reneg_sec > 0).then(|| Duration::from_secs(u64::from(c.reneg_sec))),
        hand_window: Duration::from_secs(60),
        transition_window: Duration::from_secs(60),
        control_payload: 1100,
        options: OPTIONS.into(),
        tls_crypt_v2: match &c.protection {
            OvpnProtection::CryptV2 { server_key } => Some(server_key.clone()),
            _ => None,
        },
    }
}

/// Starts the control thread of `config`'s servers. A reload's new settings
/// for them come on `updates`, taken within `MAX_SLEEP`.
pub fn spawn(
    config: &GatewayConfig,
    keys: Arc<KeyRegistry>,
    inbox: Receiver<OvpnInput>,
    updates: Receiver<ServerUpdate>,
    to_worker: ToWorker,
    stop: Arc<AtomicBool>,
) -> Result<Arc<Mutex<OvpnStatus>>, String> {
    let status = Arc::new(Mutex::new(OvpnStatus::default()));
    let servers = config
        .openvpns
        .iter()
        .enumerate()
        .map(|(i, c)| Server {
            id: OvpnServerId(i as u16),
            name: c.name.clone(),
            port: c.listen_port,
            settings: ServerSettings::of(c),
            generation: 0,
            pool: c.pool,
            pool6: c.pool6,
            mtu: c.mtu,
            clients: HashMap::new(),
            peer_ids: HashSet::new(),
            last_peer_id: dataplane::ovpn::MAX_PEER_ID,
            resets: HashMap::new(),
            taken: HashSet::new(),
            refused: BTreeMap::new(),
        })
        .collect();
    let mut control = Control {
        servers,
        keys,
        to_worker,
        status: status.clone(),
        started: SystemTime::now(),
        published: None,
    };
    std::thread::Builder::new()
        .name("openvpn".into())
        .spawn(move || control.run(&inbox, &updates, &stop))
        .map_err(|e| format!("starting the OpenVPN thread: {e}"))?;
    Ok(status)
}

struct Control {
    servers: Vec<Server>,
    keys: Arc<KeyRegistry>,
    to_worker: ToWorker,
    status: Arc<Mutex<OvpnStatus>>,
    started: SystemTime,
    /// When the state was last published.
    published: Option<Instant>,
}

/// What a step has for the owner worker.
#[derive(Default)]
struct Step {
    work: Vec<OvpnChange>,
    datagrams: Vec<(u16, SocketAddr, Vec<u8>)>,
    log: Vec<String>,
}

impl Control {
    fn run(
        &mut self,
        inbox: &Receiver<OvpnInput>,
        updates: &Receiver<ServerUpdate>,
        stop: &AtomicBool,
    ) {
        while !stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            let wait = self.next_due().map_or(MAX_SLEEP, |t| {
                t.saturating_duration_since(now).min(MAX_SLEEP)
            });
            let mut step = Step::default();
            for (index, settings) in updates.try_iter() {
                self.update(index, settings, &mut step);
            }
            match inbox.recv_timeout(wait) {
                Ok(input) => {
                    let now = Instant::now();
                    self.take(input, now, &mut step);
                    for input in inbox.try_iter().take(BATCH) {
                        self.take(input, now, &mut step);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
            self.tick(Instant::now(), &mut step);
            if !self.carry_out(step) {
                return;
            }
            self.publish(Instant::now());
        }
    }

    /// A reload's new settings for a server: clients that connect from now on
    /// take them; connected clients keep their control channel's protection, the
    /// keepalive and routes they were pushed, and renegotiate under the new TLS
    /// settings (at the next tick, or once the negotiation under way ends, the
    /// first one included), so that a client the new CA or CRL refuses is let
    /// go.
    fn update(&mut self, index: usize, settings: ServerSettings, step: &mut Step) {
        let Some(s) = self.servers.get_mut(index) else {
            return;
        };
        s.settings = settings;
        s.generation += 1;
        for c in s.clients.values_mut() {
            c.session.reconfigure(&s.settings.config);
        }
        let n = s.clients.len();
        step.log.push(format!(
            "{}: settings reloaded; {n} client{} to renegotiate under them",
            s.name,
            if n == 1 { "" } else { "s" }
        ));
    }

    fn next_due(&self) -> Option<Instant> {
        self.servers
            .iter()
            .flat_map(|s| s.clients.values())
            .filter_map(|c| c.session.next_wakeup())
            .min()
    }

    /// The wall clock in seconds, for the control channel's packet ids.
    fn wall(&self) -> u32 {
        self.started
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(1, |d| d.as_secs() as u32)
    }

    fn take(&mut self, input: OvpnInput, now: Instant, step: &mut Step) {
        match input {
            OvpnInput::Control {
                server,
                remote,
                payload,
                ..
            } => self.control(server, remote, &payload, now, step),
            OvpnInput::Float {
                server,
                peer_id,
                remote,
            } => {
                let Some(s) = self.servers.get_mut(usize::from(server.0)) else {
                    return;
                };
                let Some(old) = s
                    .clients
                    .iter()
                    .find(|(_, c)| c.peer_id == peer_id)
                    .map(|(a, _)| *a)
                else {
                    return;
                };
                if old == remote {
                    return;
                }
                // Another connected client holds the new address: the move is
                // refused and the workers sent back to the old one (OpenVPN
                // refuses such a float too). A half-open session there goes.
                if s.clients.get(&remote).is_some_and(|other| other.added) {
                    step.log.push(format!(
                        "{}: peer-id {peer_id} sent from {remote}, another client's address: not followed",
                        s.name
                    ));
                    step.work.push(OvpnChange::SetRemote {
                        server,
                        peer_id,
                        remote: old,
                    });
                    return;
                }
                let mut c = s.clients.remove(&old).expect("found above");
                c.remote = remote;
                if let Some(stale) = s.clients.remove(&remote) {
                    drop_client(s, stale, "a connected client moved to its address", step);
                }
                step.log.push(format!(
                    "{}: client {} (peer-id {peer_id}) moved from {old} to {remote}",
                    s.name,
                    c.session.common_name().unwrap_or("?")
                ));
                step.work.push(OvpnChange::SetRemote {
                    server,
                    peer_id,
                    remote,
                });
                s.clients.insert(remote, c);
            }
            OvpnInput::KeyExhausted {
                server, peer_id, ..
            } => {
                let registry = self.keys.clone();
                let Some(s) = self.servers.get_mut(usize::from(server.0)) else {
                    return;
                };
                if let Some(addr) = s
                    .clients
                    .iter()
                    .find(|(_, c)| c.peer_id == peer_id)
                    .map(|(a, _)| *a)
                {
                    let out = s
                        .clients
                        .get_mut(&addr)
                        .expect("found")
                        .session
                        .renegotiate(now);
                    handle(s, addr, out, now, &registry, step);
                }
            }
        }
    }

    fn control(
        &mut self,
        server: OvpnServerId,
        remote: SocketAddr,
        payload: &[u8],
        now: Instant,
        step: &mut Step,
    ) {
        let wall = self.wall();
        let registry = self.keys.clone();
        let Some(s) = self.servers.get_mut(usize::from(server.0)) else {
            return;
        };
        let mut restarted = None;
        if let Some(c) = s.clients.get_mut(&remote) {
            match c.session.receive(payload, now) {
                Ok(out) => {
                    handle(s, remote, out, now, &registry, step);
                    return;
                }
                // A new hard reset from a client's address: it restarted, if the
                // reset verifies and is later than the one that opened the
                // session (an older or equal one is a replay). Checked below.
                // Under tls-crypt-v2 a client that restarts with another key (a
                // reissued one, or another client behind the same NAT mapping)
                // fails the old session's check: the server key decides.
                Err(why) if may_be_restart(why, payload, c.session.has_own_key()) => {
                    restarted = Some(c.session.reset_time());
                }
                Err(why) => {
                    *s.refused.entry(why.reason()).or_default() += 1;
                    return;
                }
            }
        }
        let mut random = |b: &mut [u8]| {
            aws_lc_rs::rand::fill(b).expect("the system's random source works");
        };
        // The packet is verified (HMAC or tag) before anything is counted or
        // kept for it.
        let (session, out) =
            match ServerSession::accept(s.settings.config.clone(), payload, now, wall, &mut random)
            {
                Ok(accepted) => accepted,
                Err(why) => {
                    *s.refused.entry(why.reason()).or_default() += 1;
                    return;
                }
            };
        // A hard reset seen before (the same client session id) is a replay: a
        // genuine client picks a new session id for every attempt.
        s.resets
            .retain(|_, at| now.duration_since(*at) < RESET_MEMORY);
        if s.resets.contains_key(&session.remote_session_id()) {
            *s.refused.entry("replayed-reset").or_default() += 1;
            return;
        }
        if let Some(old_time) = restarted {
            if let (Some(old), Some(new)) = (old_time, session.reset_time())
                && new <= old
            {
                *s.refused.entry("replayed-reset").or_default() += 1;
                return;
            }
            let old = s.clients.remove(&remote).expect("found above");
            drop_client(s, old, "the client started over", step);
        }
        let pending = s.clients.values().filter(|c| !c.added).count();
        let from_here = s
            .clients
            .values()
            .filter(|c| !c.added && c.remote.ip() == remote.ip())
            .count();
        if pending >= MAX_HANDSHAKES
            || from_here >= MAX_HANDSHAKES_PER_ADDRESS
            || s.resets.len() >= MAX_RESETS_REMEMBERED
        {
            *s.refused.entry("too-many-handshakes").or_default() += 1;
            return;
        }
        let Some(peer_id) = s.take_peer_id() else {
            *s.refused.entry("no-peer-id").or_default() += 1;
            return;
        };
        s.resets.insert(session.remote_session_id(), now);
        s.clients.insert(
            remote,
            Client {
                session,
                peer_id,
                remote,
                addrs: Vec::new(),
                added: false,
                keys: Vec::new(),
                retired_in: 0,
                retired_out: 0,
                connected: now,
                sending: KeyId::default(),
                seen_in: (0, now),
                last_ping: now,
                keepalive: (s.settings.ping, s.settings.ping_restart),
                generation: s.generation,
            },
        );
        handle(s, remote, out, now, &registry, step);
    }

    /// Timers: the sessions' own, keepalive pings, and clients that fell silent.
    fn tick(&mut self, now: Instant, step: &mut Step) {
        let registry = self.keys.clone();
        for s in &mut self.servers {
            let addrs: Vec<SocketAddr> = s.clients.keys().copied().collect();
            for addr in addrs {
                let c = s.clients.get_mut(&addr).expect("listed");
                if c.session.next_wakeup().is_some_and(|t| t <= now) {
                    let out = c.session.tick(now);
                    handle(s, addr, out, now, &registry, step);
                }
                let Some(mut c) = s.clients.get_mut(&addr) else {
                    continue;
                };
                if !c.added {
                    continue;
                }
                if c.generation < s.generation && !c.session.renegotiating() {
                    // Begun under settings a reload has changed since.
                    c.generation = s.generation;
                    let out = c.session.renegotiate(now);
                    handle(s, addr, out, now, &registry, step);
                    let Some(again) = s.clients.get_mut(&addr) else {
                        continue;
                    };
                    c = again;
                }
                let packets = c.packets_in();
                if packets != c.seen_in.0 {
                    c.seen_in = (packets, now);
                } else if now.duration_since(c.seen_in.1) >= c.keepalive.1 {
                    let c = s.clients.remove(&addr).expect("listed");
                    let why = format!("no packet for {} s (keepalive)", c.keepalive.1.as_secs());
                    drop_client(s, c, &why, step);
                    continue;
                }
                if now.duration_since(c.last_ping) >= c.keepalive.0
                    && let Some(k) = c.keys.iter().find(|k| k.id == c.sending).or(c.keys.first())
                    && let Some((packet_id, _)) = k.shared.take_packet_id()
                {
                    c.last_ping = now;
                    let h = DataHeader {
                        key_id: k.id,
                        peer_id: c.peer_id,
                        packet_id,
                    };
                    let packet = openvpn::data::seal(k.keys.cipher, &k.keys.send, h, &PING);
                    step.datagrams.push((s.port, c.remote, packet));
                }
            }
        }
    }

    fn carry_out(&mut self, step: Step) -> bool {
        for line in step.log {
            self.log(line);
        }
        if step.work.is_empty() && step.datagrams.is_empty() {
            return true;
        }
        let work = OvpnWork {
            changes: step.work,
            datagrams: step.datagrams,
        };
        super::owner_step::hand_over(&self.to_worker, work, &mut |line| self.log(line))
    }

    fn log(&self, line: String) {
        let mut s = self.status.lock().expect("status lock");
        super::owner_step::remember(&mut s.recent, "openvpn", line);
    }

    fn publish(&mut self, now: Instant) {
        // At most every PUBLISH_EVERY: `show` reads a state this old at most.
        if self
            .published
            .is_some_and(|at| now.duration_since(at) < PUBLISH_EVERY)
        {
            return;
        }
        self.published = Some(now);
        let servers = self
            .servers
            .iter()
            .map(|s| ServerStatus {
                name: s.name.clone(),
                port: s.port,
                protection: s.settings.protection,
                handshakes: s.clients.values().filter(|c| !c.added).count(),
                refused: s.refused.clone(),
                clients: s
                    .clients
                    .values()
                    .filter(|c| c.added)
                    .map(|c| ClientStatus {
                        common_name: c.session.common_name().unwrap_or("?").to_owned(),
                        remote: c.remote,
                        addrs: c.addrs.clone(),
                        peer_id: c.peer_id,
                        cipher: c.session.cipher().map_or("-", |x| x.name()).to_owned(),
                        ekm: c.session.uses_ekm(),
                        version: c
                            .session
                            .peer_info()
                            .map(|p| p.describe())
                            .unwrap_or_default(),
                        keys: c
                            .session
                            .key_summaries(now)
                            .iter()
                            .map(|k| (k.key_id.get(), k.state, k.age))
                            .collect(),
                        bytes_in: c.retired_in
                            + c.keys
                                .iter()
                                .map(|k| k.shared.usage.bytes_in.load(Ordering::Relaxed))
                                .sum::<u64>(),
                        bytes_out: c.retired_out
                            + c.keys
                                .iter()
                                .map(|k| k.shared.usage.bytes_out.load(Ordering::Relaxed))
                                .sum::<u64>(),
                        connected: now.duration_since(c.connected),
                    })
                    .collect(),
            })
            .collect();
        let mut st = self.status.lock().expect("status lock");
        st.servers = servers;
        st.at = Some(now);
    }
}

/// Carries out what a client's session said.
/// `registry` is the key registry every worker's engines read.
fn handle(
    s: &mut Server,
    addr: SocketAddr,
    mut out: Output,
    now: Instant,
    registry: &Arc<KeyRegistry>,
    step: &mut Step,
) {
    loop {
        let Some(c) = s.clients.get_mut(&addr) else {
            return;
        };
        for d in out.datagrams.drain(..) {
            step.datagrams.push((s.port, c.remote, d));
        }
        let events = std::mem::take(&mut out.events);
        if events.is_empty() {
            return;
        }
        for e in events {
            let Some(c) = s.clients.get_mut(&addr) else {
                return;
            };
            match e {
                Event::Authenticated {
                    common_name,
                    peer_info,
                    cipher,
                } => {
                    let mut addrs = Vec::new();
                    for pool in [s.pool, s.pool6].into_iter().flatten() {
                        if let Some(a) = free_addr(pool, &s.taken) {
                            addrs.push(a);
                        }
                    }
                    if addrs.len() < [s.pool, s.pool6].iter().flatten().count() {
                        // No address left: the client is refused as OpenVPN
                        // refuses one, so that it does not try again at once.
                        let o = c.session.refuse("the address pool is exhausted", now);
                        out.datagrams.extend(o.datagrams);
                        out.events.extend(o.events);
                        continue;
                    }
                    for a in &addrs {
                        s.taken.insert(*a);
                    }
                    c.addrs = addrs.clone();
                    c.added = true;
                    c.seen_in = (0, now);
                    step.work.push(OvpnChange::AddClient {
                        server: s.id,
                        peer_id: c.peer_id,
                        remote: c.remote,
                        addrs: addrs.clone(),
                    });
                    step.log.push(format!(
                        "{}: {common_name} ({}) at {} is in: {} with {}, peer-id {}",
                        s.name,
                        peer_info.describe(),
                        c.remote,
                        addrs
                            .iter()
                            .map(|a| a.to_string())
                            .collect::<Vec<_>>()
                            .join(" "),
                        cipher.name(),
                        c.peer_id
                    ));
                }
                Event::PushRequested => {
                    let Some(cipher) = c.session.cipher() else {
                        continue;
                    };
                    let info = c.session.peer_info().cloned().unwrap_or_default();
                    // A client says the largest tun-mtu it takes pushed; one
                    // below the server's keeps its own, and what the server
                    // sends it past that is lost in the client. Said, as a
                    // stock server says it.
                    if let Some(max) = info.number("IV_MTU").filter(|&m| m < u32::from(s.mtu)) {
                        step.log.push(format!(
                            "{}: the client at {} takes a pushed tun-mtu of at most {max}, less than the server's mtu {}: packets to it past its own tun-mtu are lost at the client (give it tun-mtu {}, or tun-mtu-max {} from OpenVPN 2.7)",
                            s.name, c.remote, s.mtu, s.mtu, s.mtu
                        ));
                    }
                    let addr4 = c.addrs.iter().find(|a| a.is_ipv4()).copied();
                    let addr6 = c.addrs.iter().find(|a| a.is_ipv6()).copied();
                    let reply = PushReply {
                        ifconfig: s.pool.zip(addr4).and_then(|(p, a)| match a {
                            IpAddr::V4(a) => Some((a, p.len)),
                            IpAddr::V6(_) => None,
                        }),
                        route_gateway: s.pool.and_then(|p| match OvpnConfig::server_addr(p) {
                            IpAddr::V4(a) => Some(a),
                            IpAddr::V6(_) => None,
                        }),
                        ifconfig_ipv6: s.pool6.zip(addr6).and_then(|(p, a)| {
                            match (a, OvpnConfig::server_addr(p)) {
                                (IpAddr::V6(a), IpAddr::V6(g)) => Some((a, p.len, g)),
                                _ => None,
                            }
                        }),
                        routes: s
                            .settings
                            .push_routes
                            .iter()
                            .filter_map(|r| match r.addr {
                                IpAddr::V4(a) => Some((a, r.len)),
                                IpAddr::V6(_) => None,
                            })
                            .collect(),
                        routes_ipv6: s
                            .settings
                            .push_routes
                            .iter()
                            .filter_map(|r| match r.addr {
                                IpAddr::V6(a) => Some((a, r.len)),
                                IpAddr::V4(_) => None,
                            })
                            .collect(),
                        peer_id: c.peer_id,
                        ping: c.keepalive.0.as_secs() as u32,
                        ping_restart: c.keepalive.1.as_secs() as u32,
                        cipher,
                        ekm: c.session.uses_ekm(),
                        cc_exit: info.has_proto(proto::CC_EXIT_NOTIFY),
                        tun_mtu: info.number("IV_MTU").map(|_| s.mtu),
                    };
                    let o = c.session.push(&reply, now);
                    out.datagrams.extend(o.datagrams);
                    out.events.extend(o.events);
                }
                Event::Keys { .. } if !c.added => {}
                Event::Keys { key_id, keys } => match OvpnKey::new(registry, key_id.get(), &keys) {
                    Ok(shared) => {
                        let shared = Arc::new(shared);
                        step.work.push(OvpnChange::InstallKey {
                            server: s.id,
                            peer_id: c.peer_id,
                            key: shared.clone(),
                        });
                        c.keys.push(Key {
                            id: key_id,
                            shared,
                            keys,
                        });
                    }
                    Err(e) => step.log.push(format!(
                        "{}: key {} not installed: {e}",
                        s.name,
                        key_id.get()
                    )),
                },
                Event::SendWith { key_id } => {
                    if c.added && c.keys.iter().any(|k| k.id == key_id) {
                        c.sending = key_id;
                        step.work.push(OvpnChange::SendWith {
                            server: s.id,
                            peer_id: c.peer_id,
                            key_id: key_id.get(),
                        });
                    }
                }
                Event::KeyRetired { key_id } => {
                    if let Some(at) = c.keys.iter().position(|k| k.id == key_id) {
                        let k = c.keys.remove(at);
                        c.retired_in += k.shared.usage.bytes_in.load(Ordering::Relaxed);
                        c.retired_out += k.shared.usage.bytes_out.load(Ordering::Relaxed);
                        step.work.push(OvpnChange::RetireKey {
                            server: s.id,
                            peer_id: c.peer_id,
                            key_id: key_id.get(),
                        });
                    }
                }
                Event::Exit => {
                    let c = s.clients.remove(&addr).expect("found above");
                    drop_client(s, c, "the client left", step);
                    return;
                }
                Event::Closed { reason } => {
                    let c = s.clients.remove(&addr).expect("found above");
                    drop_client(s, c, &reason, step);
                    return;
                }
            }
        }
    }
}

/// Takes a client out: from every worker's table, its addresses and peer-id
/// back to the pools.
fn drop_client(s: &mut Server, c: Client, why: &str, step: &mut Step) {
    for a in &c.addrs {
        s.taken.remove(a);
    }
    s.peer_ids.remove(&c.peer_id);
    if c.added {
        step.work.push(OvpnChange::RemoveClient {
            server: s.id,
            peer_id: c.peer_id,
        });
        step.log.push(format!(
            "{}: {} at {} is out: {why}",
            s.name,
            c.session.common_name().unwrap_or("?"),
            c.remote
        ));
    } else {
        *s.refused.entry("handshake-failed").or_default() += 1;
        step.log.push(format!(
            "{}: the handshake with {} failed: {why}",
            s.name, c.remote
        ));
    }
}

/// The first free address of a pool, after the server's own.
/// Whether `packet`, which the session at its address refused for `why`, may be
/// a new hard reset from a client that restarted: one that names another
/// session, or, when the session's client brought its own key (`own_key`,
/// tls-crypt-v2), a V3 reset under another client key.
fn may_be_restart(why: Refusal, packet: &[u8], own_key: bool) -> bool {
    let opcode = packet.first().and_then(|b| Opcode::of(*b).ok());
    match why {
        Refusal::WrongSession => matches!(
            opcode,
            Some(Opcode::HardResetClientV2 | Opcode::HardResetClientV3)
        ),
        Refusal::BadAuth => own_key && opcode == Some(Opcode::HardResetClientV3),
        _ => false,
    }
}

fn free_addr(pool: Prefix, taken: &HashSet<IpAddr>) -> Option<IpAddr> {
    let bits = if pool.addr.is_ipv4() { 32 } else { 128 };
    let size = 1u128
        .checked_shl(u32::from(bits - pool.len))
        .unwrap_or(u128::MAX);
    // The network's first (and for IPv4 last) addresses are not hosts'; the
    // server has the one after the first.
    let last = if pool.addr.is_ipv4() { size - 1 } else { size };
    (2..last.min(65536))
        .map(|n| super::config::ovpn::offset(pool.network().addr, n))
        .find(|a| !taken.contains(a))
}

/// `show openvpn`.
pub fn show(status: &OvpnStatus, now: Instant) -> String {
    let mut out = String::new();
    for s in &status.servers {
        out.push_str(&format!(
            "server {}: udp port {}, {}, {} client{}, {} handshake{} under way\n",
            s.name,
            s.port,
            s.protection,
            s.clients.len(),
            if s.clients.len() == 1 { "" } else { "s" },
            s.handshakes,
            if s.handshakes == 1 { "" } else { "s" }
        ));
        for c in &s.clients {
            let keys: Vec<String> = c
                .keys
                .iter()
                .map(|(id, state, age)| format!("{id} {state} {}s", age.as_secs()))
                .collect();
            out.push_str(&format!(
                "  {} at {}: {} peer-id {} {}{} ({}) in {} B out {} B, up {}s, keys [{}]\n",
                c.common_name,
                c.remote,
                c.addrs
                    .iter()
                    .map(|a| a.to_string())
                    .collect::<Vec<_>>()
                    .join(" "),
                c.peer_id,
                c.cipher,
                if c.ekm { " ekm" } else { " prf" },
                c.version,
                c.bytes_in,
                c.bytes_out,
                c.connected.as_secs(),
                keys.join(", ")
            ));
        }
        if !s.refused.is_empty() {
            let list: Vec<String> = s.refused.iter().map(|(k, v)| format!("{k} {v}")).collect();
            out.push_str(&format!("  refused control packets: {}\n", list.join(", ")));
        }
    }
    if let Some(at) = status.at {
        out.push_str(&format!(
            "(as of {} ms ago)\n",
            now.saturating_duration_since(at).as_millis()
        ));
    }
    for line in &status.recent {
        out.push_str(&format!("log: {line}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::may_be_restart;
    use openvpn::Refusal;

    #[test]
    fn a_reset_the_session_refuses_may_be_a_restart_and_nothing_else_is() {
        let (v2, v3, control) = ([7 << 3], [10 << 3], [4 << 3]);
        // Another session id: either reset.
        assert!(may_be_restart(Refusal::WrongSession, &v2, false));
        assert!(may_be_restart(Refusal::WrongSession, &v3, true));
        // Another client key (tls-crypt-v2): the server key decides.
        assert!(may_be_restart(Refusal::BadAuth, &v3, true));
        // A forged packet under a shared key, or anything but a reset: refused.
        assert!(!may_be_restart(Refusal::BadAuth, &v3, false));
        assert!(!may_be_restart(Refusal::BadAuth, &v2, true));
        assert!(!may_be_restart(Refusal::WrongSession, &control, false));
        assert!(!may_be_restart(Refusal::Replay, &v3, true));
        assert!(!may_be_restart(Refusal::WrongSession, &[], false));
    }
}
