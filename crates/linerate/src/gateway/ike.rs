//! The gateway's key exchange: one thread runs the IKEv2 endpoint (`ikev2`) for every
//! `[esp.ike]` tunnel. IKE datagrams reach it from every worker's `ip-local` through
//! a bounded inbox; what it answers, and the SAs its exchanges agree, go to the owner
//! worker as one request per step (`IkeWork`), the way an operator's `linerate esp`
//! requests do: the SAs are installed on every worker through the same ESP changes,
//! and the datagrams leave through the owner's graph. Its state is published for
//! `show ike` after each step.

use super::config::{EspConfig, GatewayConfig, IkeAuth};
use dataplane::esp::{Encapsulation, SaSpec};
use dataplane::ike::IkeInput;
use ikev2::cert::PrivateKey;
use ikev2::config::{PubkeyAuth, parse_identity};
use ikev2::proposal::{Kind, Offer};
use ikev2::wire::Identification;
use ikev2::wire::TrafficSelector;
use ikev2::{Connection, Endpoint, Event, Output, SaSummary, Timers};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use zeroize::Zeroizing;

/// The longest the thread sleeps with nothing due: IP fragments waiting for the
/// rest of their datagram expire at this grain, and `show ike`'s figures are at
/// most this old.
const MAX_SLEEP: Duration = Duration::from_secs(1);
/// The shortest time between two runs of the endpoint's timers, so that a timer
/// that stays due (it should not) costs a wake-up a hundredth of a second, never a
/// spinning thread.
const MIN_TICK_GAP: Duration = Duration::from_millis(10);
/// Datagrams taken in one step before its output is carried out.
const BATCH: usize = 64;

/// One step's output for the owner worker, carried out in order: the ESP changes,
/// then the datagrams (from the IKE port, to the peer).
pub struct IkeWork {
    pub esp: Vec<IkeEspChange>,
    pub datagrams: Vec<(u16, SocketAddr, Vec<u8>)>,
}

/// One change to a tunnel's ESP, by the tunnel's name.
pub enum IkeEspChange {
    /// Where the tunnel's ESP goes from now on, and how (NAT detection's
    /// answer, or the NAT's new mapping).
    Peer(String, IpAddr, Encapsulation),
    AddInbound(String, SaSpec),
    RemoveInbound(String, u32),
    /// A child's outbound SA, installed standing by: it seals once `Seal` names it.
    AddOutbound(String, SaSpec),
    Seal(String, u32),
    RemoveOutbound(String, u32),
}

/// A child SA installed in a tunnel.
struct Installed {
    inbound: u32,
    outbound: u32,
    /// The child (inbound SPI, outbound SPI) whose going makes this one seal: we
    /// answered the rekey that made this one, and the peer shows it has this one
    /// by deleting that one (`ChildSa::seal_after_replaced_goes`).
    seals_after: Option<(u32, u32)>,
}

/// A tunnel's child SAs: more than one while a rekey hands over, or while the
/// peer keeps a second IKE SA (after a restart) whose child it may still use.
#[derive(Default)]
struct TunnelChildren {
    children: Vec<Installed>,
    /// The outbound SPI sealing.
    sealing: Option<u32>,
}

/// What `show ike` prints, as of the key exchange's last step.
#[derive(Default)]
pub struct IkeStatus {
    pub sas: Vec<SaSummary>,
    pub dropped: BTreeMap<&'static str, u64>,
    pub recent: VecDeque<String>,
    pub at: Option<Instant>,
}

/// The IKE connection of each tunnel with an `[esp.ike]` table.
pub fn connections(config: &GatewayConfig) -> Result<Vec<Arc<Connection>>, String> {
    config
        .esps
        .iter()
        .filter(|e| e.ike.is_some())
        .map(connection)
        .collect()
}

fn connection(e: &EspConfig) -> Result<Arc<Connection>, String> {
    let k = e.ike.as_ref().expect("filtered");
    let offers = |list: &[String], kind| -> Result<Vec<Offer>, String> {
        list.iter().map(|p| Offer::parse(kind, p)).collect()
    };
    let ts = |v: &[lpm::Prefix]| -> Vec<TrafficSelector> {
        v.iter()
            .map(|p| TrafficSelector::prefix(p.addr, p.len))
            .collect()
    };
    let (local_id, remote_id, psk, pubkey) = match &k.auth {
        IkeAuth::Psk {
            secret,
            local_id,
            remote_id,
            ..
        } => (
            parse_identity(local_id)?,
            remote_id.as_deref().map(parse_identity).transpose()?,
            secret.clone(),
            None,
        ),
        IkeAuth::Pubkey {
            cert,
            intermediates,
            ca,
            key_pem,
            remote_dn,
            ..
        } => (
            Identification {
                kind: ikev2::wire::id_type::DER_ASN1_DN,
                data: cert.subject().to_vec(),
            },
            None,
            Zeroizing::new(Vec::new()),
            Some(PubkeyAuth {
                cert: (**cert).clone(),
                intermediates: intermediates.clone(),
                key: PrivateKey::from_pem(key_pem, cert)?,
                ca: (**ca).clone(),
                remote_dn: remote_dn.clone(),
            }),
        ),
    };
    Ok(Arc::new(Connection {
        name: e.name.clone(),
        local_addr: e.local,
        remote_addr: e.remote,
        local_id,
        remote_id,
        psk,
        pubkey,
        ike: offers(&k.proposals, Kind::Ike)?,
        esp: offers(&k.esp_proposals, Kind::Esp)?,
        local_ts: ts(&e.local_ts),
        remote_ts: ts(&e.remote_ts),
        start: k.start,
        encap: k.encap,
        timers: Timers {
            retransmit_base: Duration::from_secs(u64::from(k.retransmit_timeout)),
            retransmit_tries: k.retransmit_tries,
            dpd: (k.dpd_delay > 0).then(|| Duration::from_secs(u64::from(k.dpd_delay))),
            child_rekey: seconds(k.rekey_time),
            ike_rekey: seconds(k.ike_rekey_time),
            nat_keepalive: seconds(k.nat_keepalive),
        },
    }))
}

/// A period in seconds; 0 is none.
fn seconds(n: u32) -> Option<Duration> {
    (n > 0).then(|| Duration::from_secs(u64::from(n)))
}

/// How the key exchange hands a step of work to the owner worker: queued with the
/// channel its answer comes back on, the worker woken; false when the worker is gone.
pub type ToWorker = super::owner_step::ToWorker<IkeWork>;

/// Starts the key exchange thread; its status for `show ike`.
pub fn spawn(
    conns: Vec<Arc<Connection>>,
    inbox: Receiver<IkeInput>,
    to_worker: ToWorker,
    stop: Arc<AtomicBool>,
) -> Result<Arc<Mutex<IkeStatus>>, String> {
    let status = Arc::new(Mutex::new(IkeStatus::default()));
    let mut k = KeyExchange {
        endpoint: Endpoint::new(conns, Instant::now()),
        installed: HashMap::new(),
        to_worker,
        status: status.clone(),
    };
    std::thread::Builder::new()
        .name("ike".into())
        .spawn(move || k.run(&inbox, &stop))
        .map_err(|e| format!("starting the key exchange thread: {e}"))?;
    Ok(status)
}

struct KeyExchange {
    endpoint: Endpoint,
    /// Per tunnel: its child SAs installed.
    installed: HashMap<String, TunnelChildren>,
    to_worker: ToWorker,
    status: Arc<Mutex<IkeStatus>>,
}

impl KeyExchange {
    /// Takes the workers' inputs as they come and runs the endpoint's timers when
    /// the endpoint says one is due (`Endpoint::next_deadline`), sleeping between.
    fn run(&mut self, inbox: &Receiver<IkeInput>, stop: &AtomicBool) {
        let mut due = Instant::now();
        let mut last_tick = due;
        while !stop.load(Ordering::Relaxed) {
            let wait = due.saturating_duration_since(Instant::now());
            let mut out = Output::default();
            match inbox.recv_timeout(wait) {
                Ok(d) => {
                    let now = Instant::now();
                    out.append(self.take(d, now));
                    for d in inbox.try_iter().take(BATCH) {
                        out.append(self.take(d, now));
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
            let now = Instant::now();
            if now >= due {
                out.append(self.endpoint.tick(now));
                last_tick = now;
            }
            if !self.carry_out(out) {
                return;
            }
            self.publish(now);
            // What came in may have set a timer (a request sent, an SA made), so
            // the next deadline is asked for after every step.
            let now = Instant::now();
            due = self
                .endpoint
                .next_deadline(now)
                .map_or(now + MAX_SLEEP, |d| d.min(now + MAX_SLEEP))
                .max(last_tick + MIN_TICK_GAP);
        }
    }

    /// One input from the workers: a datagram (reassembled by the worker if it
    /// came in IP fragments), or a NAT keepalive.
    fn take(&mut self, input: IkeInput, now: Instant) -> Output {
        match input {
            IkeInput::Datagram(d) => self.endpoint.receive(&d.payload, d.local, d.remote, now),
            IkeInput::Keepalive { local, remote } => self.endpoint.keepalive(local, remote, now),
        }
    }

    fn log(&self, line: String) {
        let mut s = self.status.lock().expect("status lock");
        super::owner_step::remember(&mut s.recent, "ike", line);
    }

    /// Hands one step's output to the owner worker; false when it is gone.
    fn carry_out(&mut self, out: Output) -> bool {
        let mut work = IkeWork {
            esp: Vec::new(),
            datagrams: out
                .datagrams
                .iter()
                .map(|d| (d.local.port(), d.remote, d.payload()))
                .collect(),
        };
        for e in out.events {
            match e {
                Event::Established { detail } => self.log(format!("up: {detail}")),
                Event::Closed { reason } => self.log(format!("down: {reason}")),
                Event::Rekeyed { detail } => self.log(format!("rekeyed: {detail}")),
                Event::PeerMoved {
                    connection,
                    local,
                    remote,
                } => {
                    self.log(format!(
                        "{connection}: the peer is at {remote} now (its NAT's new mapping); ESP follows"
                    ));
                    work.esp.push(IkeEspChange::Peer(
                        connection,
                        remote.ip(),
                        Encapsulation::Udp {
                            local_port: local.port(),
                            remote_port: remote.port(),
                        },
                    ));
                }
                Event::ChildDown {
                    inbound_spi,
                    outbound_spi,
                } => self.child_down(inbound_spi, outbound_spi, &mut work.esp),
                Event::ChildUp(c) => self.child_up(c, &mut work.esp),
            }
        }
        if work.esp.is_empty() && work.datagrams.is_empty() {
            return true;
        }
        super::owner_step::hand_over(&self.to_worker, work, &mut |line| self.log(line))
    }

    /// Installs a child SA: its inbound SA at once, its outbound SA standing by,
    /// sealing now unless it waits for the peer (`ChildSa::seal_after_replaced_goes`).
    /// Other children stay until their own `ChildDown`: the peer may still send on
    /// them.
    fn child_up(&mut self, c: ikev2::ChildSa, esp: &mut Vec<IkeEspChange>) {
        let t = c.connection.clone();
        // The peer chose our outbound SPI: one the tunnel holds already (a
        // duplicate IKE SA's child) would share, then lose, its SA.
        let taken = self.installed.get(&t).is_some_and(|e| {
            e.children
                .iter()
                .any(|x| x.outbound == c.outbound_spi || x.inbound == c.inbound_spi)
        });
        if taken {
            self.log(format!(
                "{t}: child SA {:08x}_i {:08x}_o not installed: the tunnel has an SA with one of its SPIs",
                c.inbound_spi, c.outbound_spi
            ));
            return;
        }
        if c.local_ts.len() != 1 || c.remote_ts.len() != 1 {
            self.log(format!(
                "{t}: the peer narrowed the traffic selectors; the tunnel keeps its own"
            ));
        }
        let encap = match c.udp_encap {
            Some((local_port, remote_port)) => Encapsulation::Udp {
                local_port,
                remote_port,
            },
            None => Encapsulation::None,
        };
        esp.push(IkeEspChange::Peer(t.clone(), c.remote, encap));
        let spec = |spi, keymat| SaSpec {
            spi,
            alg: c.algorithm,
            keymat,
            esn: c.esn,
            replay_window: ipsec::DEFAULT_WINDOW,
            lifetime: ipsec::Lifetime::default(),
        };
        esp.push(IkeEspChange::AddInbound(
            t.clone(),
            spec(c.inbound_spi, c.inbound_keys.clone()),
        ));
        esp.push(IkeEspChange::AddOutbound(
            t.clone(),
            spec(c.outbound_spi, c.outbound_keys.clone()),
        ));
        let entry = self.installed.entry(t.clone()).or_default();
        let seals_after = c.replaces.filter(|r| {
            c.seal_after_replaced_goes
                && entry.children.iter().any(|x| (x.inbound, x.outbound) == *r)
        });
        entry.children.push(Installed {
            inbound: c.inbound_spi,
            outbound: c.outbound_spi,
            seals_after,
        });
        if seals_after.is_none() {
            entry.sealing = Some(c.outbound_spi);
            esp.push(IkeEspChange::Seal(t.clone(), c.outbound_spi));
        }
        let rekeys = c.replaces.map_or(String::new(), |(i, o)| {
            format!(", rekeys {i:08x}_i {o:08x}_o")
        });
        let waits = if seals_after.is_some() {
            ", sealing once the peer deletes the old one"
        } else {
            ""
        };
        self.log(format!(
            "{t}: child SA {:08x}_i {:08x}_o {}{}{}{rekeys}{waits}",
            c.inbound_spi,
            c.outbound_spi,
            c.algorithm,
            if c.esn { " esn" } else { "" },
            if c.udp_encap.is_some() {
                ", ESP in UDP"
            } else {
                ""
            }
        ));
    }

    /// Takes a child SA out. A child waiting for this one to go seals now; when
    /// this one sealed and none waited, the newest child left seals.
    fn child_down(&mut self, inbound: u32, outbound: u32, esp: &mut Vec<IkeEspChange>) {
        let pair = (inbound, outbound);
        let Some((t, entry)) = self
            .installed
            .iter_mut()
            .find(|(_, e)| e.children.iter().any(|x| (x.inbound, x.outbound) == pair))
        else {
            return;
        };
        let t = t.clone();
        entry.children.retain(|x| (x.inbound, x.outbound) != pair);
        let mut seal = None;
        for x in entry
            .children
            .iter_mut()
            .filter(|x| x.seals_after == Some(pair))
        {
            x.seals_after = None;
            seal = Some(x.outbound);
        }
        if seal.is_none() && entry.sealing == Some(outbound) {
            seal = entry
                .children
                .iter()
                .rev()
                .find(|x| x.seals_after.is_none())
                .map(|x| x.outbound);
        }
        match seal {
            Some(spi) => {
                entry.sealing = Some(spi);
                esp.push(IkeEspChange::Seal(t.clone(), spi));
            }
            None if entry.sealing == Some(outbound) => entry.sealing = None,
            None => {}
        }
        esp.push(IkeEspChange::RemoveOutbound(t.clone(), outbound));
        esp.push(IkeEspChange::RemoveInbound(t.clone(), inbound));
        self.log(format!(
            "{t}: child SA {inbound:08x}_i {outbound:08x}_o removed{}",
            seal.map_or(String::new(), |s| format!(", {s:08x}_o seals"))
        ));
    }

    fn publish(&self, now: Instant) {
        let mut s = self.status.lock().expect("status lock");
        s.sas = self.endpoint.summaries(now);
        s.dropped = self.endpoint.dropped.clone();
        s.at = Some(now);
    }
}

/// `show ike`: each IKE SA with its state, peer, algorithms, age and child SA (the
/// half-open ones counted), the messages dropped by reason, and the recent log
/// lines.
pub fn show(status: &IkeStatus, now: Instant) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    if status.sas.is_empty() {
        out.push_str("no IKE SAs\n");
    }
    // Half-open SAs (answered, not authenticated) are counted, not listed: under
    // a flood they are many and say nothing each.
    let half_open = status
        .sas
        .iter()
        .filter(|s| s.state == ikev2::ike_sa::State::InitReplied)
        .count();
    if half_open > 0 {
        let _ = writeln!(out, "half-open: {half_open}");
    }
    for s in status
        .sas
        .iter()
        .filter(|s| s.state != ikev2::ike_sa::State::InitReplied)
    {
        let _ = writeln!(
            out,
            "{}: {:?} {:?}, {} -> {}, IKE SPIs {:016x}_i {:016x}_r{}{}",
            s.connection,
            s.role,
            s.state,
            s.local,
            s.remote,
            s.spi_i,
            s.spi_r,
            s.algorithms
                .as_ref()
                .map_or(String::new(), |a| format!(", {a}")),
            s.established_for.map_or(String::new(), |d| format!(
                ", established {}s ago",
                d.as_secs()
            ))
        );
        if let Some(c) = s.child {
            let _ = writeln!(
                out,
                "  child: in SPI {:08x}, out SPI {:08x}",
                c.inbound, c.outbound
            );
        }
    }
    for (what, counts) in [("dropped", &status.dropped)] {
        if !counts.is_empty() {
            let list: Vec<String> = counts.iter().map(|(k, v)| format!("{k} {v}")).collect();
            let _ = writeln!(out, "{what}: {}", list.join(", "));
        }
    }
    if let Some(at) = status.at {
        let _ = writeln!(
            out,
            "as of {} ms ago",
            now.saturating_duration_since(at).as_millis()
        );
    }
    for line in &status.recent {
        let _ = writeln!(out, "log: {line}");
    }
    out
}
