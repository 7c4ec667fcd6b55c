//! Bad input against a running `linerate`: every malformed, forged, replayed or
//! misdirected message must be dropped with the right reason in the daemon's
//! per-node counters, must get no answer (except a cookie reply under load), and
//! must leave the legitimate peer working and the daemon alive.
//!
//! The daemon runs in a network namespace the test makes, linked by a veth pair to
//! a second one for the test's peer (outer addresses 198.18.0.1 and 198.18.0.2; the
//! daemon's TUN carries 198.19.0.1/24), and is configured with `wg set`. The peer is an
//! in-process `wireguard::Device` driven over a real UDP socket; data is sealed and
//! opened with the crypto crate's one-shot AEAD, so the test chooses every counter.
//!
//! Needs root (namespaces, TUN) and `wg`; without them it prints a note and passes.

use crypto::x25519::{PrivateKey, PublicKey};
use crypto::{KeyHandle, KeyRegistry};
use io::netns::{NetNs, NsChild, VethEnd, is_root, skip_test, veth_pair};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime};
use wire::wireguard as msg;
use wireguard::constants::{REJECT_AFTER_MESSAGES, REKEY_TIMEOUT, REKEY_TIMEOUT_JITTER_MAX};
use wireguard::cookie::CookieJar;
use wireguard::{Action, Device, DropReason, PeerId, Prefix, SessionPath, Staged};

const DAEMON_OUTER: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const PEER_OUTER: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const LISTEN_PORT: u16 = 51820;
const DAEMON_INNER: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 1);
const PEER_INNER: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 2);
/// Inside the tunnel but outside the peer's allowed IPs (198.19.0.2/32).
const STRANGER_INNER: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 3);
/// A UDP socket on the daemon's side of the tunnel, and the port the peer "uses".
const INNER_PORT: u16 = 7777;
const PEER_INNER_PORT: u16 = 5555;
/// The largest UDP payload one IPv4 datagram carries (65535 - 20 - 8): a 65535-byte
/// message cannot be sent at all, so this stands in for it.
const MAX_UDP_PAYLOAD: usize = 65507;
/// How long to listen for an answer that must not come.
const QUIET: Duration = Duration::from_millis(150);
/// An index the daemon never hands out in practice (its indices are random u32s).
const UNKNOWN_INDEX: u32 = 0x0bad_1dea;

fn socket_path(ifname: &str) -> PathBuf {
    PathBuf::from(format!("/var/run/wireguard/{ifname}.sock"))
}

fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = u32::from_be_bytes([0, b[0], b[1], b[2]]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// An IPv4/UDP packet (UDP checksum 0, allowed over IPv4) with a valid header checksum,
/// as the kernel must accept it from the TUN.
fn inner_udp(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    src_port: u16,
    dst_port: u16,
    payload: &[u8],
) -> Vec<u8> {
    let total = 28 + payload.len();
    let mut p = vec![0u8; total];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&src.octets());
    p[16..20].copy_from_slice(&dst.octets());
    let sum = wire::checksum::checksum(&p[..20]);
    p[10..12].copy_from_slice(&sum.to_be_bytes());
    p[20..22].copy_from_slice(&src_port.to_be_bytes());
    p[22..24].copy_from_slice(&dst_port.to_be_bytes());
    p[24..26].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    p[28..].copy_from_slice(payload);
    p
}

/// The peer's usual inner packet to the socket behind the daemon.
fn to_daemon_side(payload: &[u8]) -> Vec<u8> {
    inner_udp(
        PEER_INNER,
        DAEMON_INNER,
        PEER_INNER_PORT,
        INNER_PORT,
        payload,
    )
}

/// A transport data message sealed under `key` (plaintext padded to 16 as senders do).
fn seal_data(key: &[u8; 32], receiver: u32, counter: u64, inner: &[u8]) -> Vec<u8> {
    let mut plain = inner.to_vec();
    plain.resize(inner.len().next_multiple_of(16), 0);
    let mut out = vec![0u8; 16 + plain.len() + 16];
    msg::TransportData::emit(&mut out[..], receiver, counter).expect("room for the header");
    crypto::seal::seal(key, counter, &[], &plain, &mut out[16..]);
    out
}

fn key_bytes(keys: &KeyRegistry, h: KeyHandle) -> [u8; 32] {
    keys.get(h)
        .expect("a live key")
        .bytes()
        .try_into()
        .expect("a 32-byte key")
}

fn random_bytes<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    rand::RngCore::fill_bytes(&mut rand::thread_rng(), &mut b);
    b
}

/// A message of `len` bytes whose type word is `word` (type byte and reserved bytes).
fn typed(word: [u8; 4], len: usize) -> Vec<u8> {
    let mut m = vec![0u8; len];
    let n = len.min(4);
    m[..n].copy_from_slice(&word[..n]);
    m
}

fn describe(d: &[u8]) -> String {
    format!("{} bytes, type word {:02x?}", d.len(), &d[..d.len().min(4)])
}

/// The test's WireGuard peer: a protocol device, no data path; it seals and opens
/// transport data itself so that counters are the test's to choose.
struct Peer {
    dev: Device,
    id: PeerId,
    daemon: SocketAddr,
    /// Added to the clock: lets the test run this peer's timers early.
    skew: Duration,
    /// Packets staged with the device, which holds their numbers here.
    held: Vec<Vec<u8>>,
}

impl Peer {
    fn now(&self) -> Instant {
        Instant::now() + self.skew
    }

    /// Queues `inner` until a session exists and returns the initiation that asks
    /// for one.
    fn initiate(&mut self, inner: Vec<u8>) -> Vec<u8> {
        let now = self.now();
        self.held.push(inner);
        let evicted = self.dev.stage(self.id, self.held.len() as u32 - 1, now);
        assert_eq!(evicted, None, "the test stages few packets");
        self.sent().expect("a peer with an endpoint initiates")
    }

    /// The last datagram the device asked to send, if any. Flushes need no
    /// bookkeeping: [`Peer::flushed`] takes whatever is staged.
    fn sent(&mut self) -> Option<Vec<u8>> {
        let mut out = None;
        while let Some(a) = self.dev.poll_action() {
            if let Action::Send { packet, .. } = a {
                out = Some(packet);
            }
        }
        out
    }

    fn handle(&mut self, bytes: &[u8]) -> Result<(), DropReason> {
        let now = self.now();
        let message = msg::Message::parse(bytes).map_err(DropReason::from)?;
        self.dev.handle_handshake(message, self.daemon, now)
    }

    /// Key, receiver index and counter for the next packet to the daemon.
    fn ticket(&mut self) -> ([u8; 32], u32, u64) {
        let now = self.now();
        let t = self
            .dev
            .send_ticket(self.id, now)
            .expect("a session with the daemon");
        (
            key_bytes(self.dev.keys(), t.key),
            t.receiver_index,
            t.counter,
        )
    }

    fn seal(&mut self, inner: &[u8]) -> Vec<u8> {
        let (key, receiver, counter) = self.ticket();
        seal_data(&key, receiver, counter, inner)
    }

    /// Every packet waiting for the session, sealed.
    fn flushed(&mut self) -> Vec<Vec<u8>> {
        let mut staged = Vec::new();
        self.dev.take_staged(self.id, &mut staged);
        staged
            .into_iter()
            .map(|s| match s {
                Staged::Packet(i) => self.seal(&self.held[i as usize].clone()),
                Staged::Keepalive => self.seal(&[]),
            })
            .collect()
    }

    /// Opens transport data from the daemon; `Some(inner)` (empty for a keepalive).
    fn open(&mut self, datagram: &[u8]) -> Option<Vec<u8>> {
        let m = msg::TransportData::new_checked(datagram).ok()?;
        let (index, counter) = (m.receiver_index(), m.counter());
        let now = self.now();
        let t = self.dev.recv_ticket(index, counter, now).ok()?;
        let key = key_bytes(self.dev.keys(), t.key);
        let sealed = &datagram[16..];
        let mut plain = vec![0u8; sealed.len() - 16];
        crypto::seal::open(&key, counter, &[], sealed, &mut plain).ok()?;
        let inner = if plain.is_empty() {
            None
        } else {
            let ip = wire::IpPacket::parse(&plain[..]).ok()?;
            let (len, src) = (ip.total_len(), ip.src_addr());
            plain.truncate(len);
            Some(src)
        };
        self.dev
            .recv_commit(&t, counter, inner, datagram.len(), self.daemon, now)
            .ok()?;
        Some(plain)
    }
}

/// The daemon process and what it and the test leave in the shared file system;
/// dropping it kills the daemon and removes them.
struct Daemon {
    child: NsChild,
    ifname: String,
    key_file: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // The daemon first, so it cannot recreate anything; the namespace (and the
        // TUN with it) goes after this, being dropped later.
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.key_file);
        let _ = std::fs::remove_file(socket_path(&self.ifname));
    }
}

/// One daemon in its own namespace, and the sockets the test talks to it with.
/// Fields drop in order: the daemon before the namespace it runs in.
struct Rig {
    daemon: Daemon,
    /// The peer's outer socket (198.18.0.2).
    outer: UdpSocket,
    /// A socket on the daemon's side of the tunnel (198.19.0.1:7777).
    inner: UdpSocket,
    daemon_addr: SocketAddr,
    daemon_public: PublicKey,
    peer_key: PrivateKey,
    /// Wall time for the next peer device: each is later than the last, so each
    /// new initiation carries a newer timestamp than any before it.
    next_wall: SystemTime,
    failures: Vec<String>,
    /// The daemon's namespace and the peer's: they live as long as the daemon and
    /// are deleted on drop.
    ns: NetNs,
    _peer_ns: NetNs,
}

impl Rig {
    /// Starts a configured daemon, or `None` (with a note) where the test cannot run.
    fn start(under_load_threshold: Option<u32>) -> Option<Rig> {
        if !is_root() {
            skip_test("bad-input", "needs root for namespaces and TUN");
            return None;
        }
        if Command::new("wg").arg("--version").output().is_err() {
            skip_test("bad-input", "needs wg(8)");
            return None;
        }
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let ifname = format!(
            "lrb{}x{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        assert!(ifname.len() <= 15, "interface name {ifname} too long");
        // Two hosts on a veth link: the daemon's and the test peer's. (On one host,
        // the daemon's replies to a local address would leave from that address,
        // not from the one the peer sent to.)
        let ns = NetNs::new("lr-bad-d").expect("a namespace");
        let peer_ns = NetNs::new("lr-bad-p").expect("a namespace");
        veth_pair(
            &VethEnd {
                ns: &ns,
                ifname: "outer",
                addrs: &[&format!("{DAEMON_OUTER}/24")],
            },
            &VethEnd {
                ns: &peer_ns,
                ifname: "outer",
                addrs: &[&format!("{PEER_OUTER}/24")],
            },
        )
        .expect("a veth pair");

        let bin = env!("CARGO_BIN_EXE_linerate");
        let name = ifname.clone();
        let child = ns
            .run(move || {
                let mut cmd = Command::new(bin);
                cmd.args(["-f", &name])
                    .env_remove("LINERATE_UNDER_LOAD_HANDSHAKES")
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::inherit());
                if let Some(t) = under_load_threshold {
                    cmd.env("LINERATE_UNDER_LOAD_HANDSHAKES", t.to_string());
                }
                cmd.spawn()
            })
            .expect("entering the namespace")
            .expect("starting linerate");
        let mut daemon = Daemon {
            child: NsChild::new(child),
            key_file: std::env::temp_dir().join(format!("{ifname}.key")),
            ifname: ifname.clone(),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while UnixStream::connect(socket_path(&ifname)).is_err() {
            if let Ok(Some(status)) = daemon.child.try_wait() {
                panic!("linerate exited before serving its socket: {status}");
            }
            assert!(Instant::now() < deadline, "linerate did not come up");
            std::thread::sleep(Duration::from_millis(20));
        }

        let outer = peer_ns
            .run(|| UdpSocket::bind(SocketAddrV4::new(PEER_OUTER, 0)))
            .unwrap()
            .expect("binding the peer's socket");
        let daemon_key = PrivateKey::generate();
        let peer_key = PrivateKey::generate();
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&daemon.key_file)
            .and_then(|mut f| writeln!(f, "{}", base64(&daemon_key.to_bytes())))
            .expect("writing the key file");
        let endpoint = format!("{PEER_OUTER}:{}", outer.local_addr().unwrap().port());
        ns.exec_checked(&[
            "wg",
            "set",
            &ifname,
            "private-key",
            daemon.key_file.to_str().unwrap(),
            "listen-port",
            &LISTEN_PORT.to_string(),
            "peer",
            &base64(&peer_key.public_key().0),
            "allowed-ips",
            &format!("{PEER_INNER}/32"),
            "endpoint",
            &endpoint,
        ])
        .expect("wg set");
        // The key is in the daemon now; nothing else needs the file.
        let _ = std::fs::remove_file(&daemon.key_file);
        daemon.key_file = PathBuf::new();
        ns.add_addr(&ifname, &format!("{DAEMON_INNER}/24")).unwrap();
        // No IPv6 on the TUN: the kernel's own neighbour and multicast traffic would
        // otherwise reach the daemon at random times and move its no-peer counter.
        ns.exec_checked(&[
            "sysctl",
            "-qw",
            &format!("net.ipv6.conf.{ifname}.disable_ipv6=1"),
        ])
        .unwrap();
        ns.link_up(&ifname).unwrap();
        let inner = ns
            .run(|| UdpSocket::bind(SocketAddrV4::new(DAEMON_INNER, INNER_PORT)))
            .unwrap()
            .expect("binding the inner socket");
        Some(Rig {
            daemon,
            outer,
            inner,
            daemon_addr: SocketAddr::V4(SocketAddrV4::new(DAEMON_OUTER, LISTEN_PORT)),
            daemon_public: daemon_key.public_key(),
            peer_key,
            next_wall: SystemTime::now(),
            failures: Vec::new(),
            ns,
            _peer_ns: peer_ns,
        })
    }

    /// A new device for the peer's key, its wall clock later than any before.
    fn peer(&mut self) -> Peer {
        let now = Instant::now();
        let wall = self.next_wall;
        self.next_wall += Duration::from_secs(10);
        let mut dev = Device::new(Arc::new(KeyRegistry::new(64)), now, wall);
        dev.set_private_key(Some(self.peer_key.clone()));
        let id = dev.add_peer(self.daemon_public).expect("not our own key");
        dev.set_endpoint(id, self.daemon_addr);
        dev.add_allowed_ip(id, format!("{DAEMON_INNER}/32").parse::<Prefix>().unwrap());
        Peer {
            dev,
            id,
            daemon: self.daemon_addr,
            skew: Duration::ZERO,
            held: Vec::new(),
        }
    }

    fn fail(&mut self, what: String) {
        eprintln!("FAIL: {what}");
        self.failures.push(what);
    }

    fn send(&self, datagram: &[u8]) {
        self.outer
            .send_to(datagram, self.daemon_addr)
            .unwrap_or_else(|e| panic!("sending {}: {e}", describe(datagram)));
    }

    /// The next datagram from the daemon within `wait`.
    fn recv(&self, wait: Duration) -> Option<Vec<u8>> {
        let deadline = Instant::now() + wait;
        let mut buf = vec![0u8; 65536];
        loop {
            let left = deadline.checked_duration_since(Instant::now())?;
            self.outer
                .set_read_timeout(Some(left.max(Duration::from_millis(1))))
                .unwrap();
            match self.outer.recv_from(&mut buf) {
                Ok((n, from)) if from == self.daemon_addr => return Some(buf[..n].to_vec()),
                Ok(_) => continue,
                Err(_) => return None,
            }
        }
    }

    /// Waits for a datagram that `want` accepts, passing over the daemon's timer
    /// traffic (initiations, keepalives); gives up after `wait`.
    fn recv_where(&self, wait: Duration, want: impl Fn(&[u8]) -> bool) -> Option<Vec<u8>> {
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.checked_duration_since(Instant::now())?;
            let d = self.recv(left)?;
            if want(&d) {
                return Some(d);
            }
        }
    }

    /// Everything the daemon sends within `QUIET` that is not its own timers' doing:
    /// an initiation (a retried or rekeying handshake) or a keepalive can come at any
    /// time and answer nothing the test sent.
    fn answers(&self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while let Some(d) = self.recv(QUIET) {
            let timer = (d.len() == msg::HANDSHAKE_INITIATION_LEN && d[0] == 1)
                || (d.len() == msg::TRANSPORT_MIN_LEN && d[0] == 4);
            if !timer {
                out.push(d);
            }
        }
        out
    }

    /// The inner socket's next datagram: (payload, source).
    fn inner_recv(&self, wait: Duration) -> Option<(Vec<u8>, SocketAddr)> {
        let mut buf = vec![0u8; 65536];
        self.inner.set_read_timeout(Some(wait)).unwrap();
        let (n, from) = self.inner.recv_from(&mut buf).ok()?;
        Some((buf[..n].to_vec(), from))
    }

    /// The daemon namespace's kernel count of UDP datagrams delivered to sockets
    /// (`Udp: InDatagrams` in /proc/net/snmp).
    fn kernel_udp_in(&self) -> u64 {
        let snmp = self.ns.exec_checked(&["cat", "/proc/net/snmp"]).unwrap();
        let mut udp = snmp.lines().filter(|l| l.starts_with("Udp:"));
        let (names, values) = (udp.next().unwrap(), udp.next().unwrap());
        let i = names
            .split_whitespace()
            .position(|n| n == "InDatagrams")
            .expect("an InDatagrams column");
        values.split_whitespace().nth(i).unwrap().parse().unwrap()
    }

    fn counters(&self) -> BTreeMap<String, u64> {
        let mut s = UnixStream::connect(socket_path(&self.daemon.ifname)).expect("the UAPI socket");
        s.write_all(b"linerate-counters=1\n\n").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut out = BTreeMap::new();
        for line in BufReader::new(s).lines() {
            let line = line.expect("reading counters");
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once('=')
                && let Ok(n) = v.parse()
            {
                out.insert(k.to_string(), n);
            }
        }
        assert_eq!(
            out.get("errno"),
            Some(&0),
            "counters request failed: {out:?}"
        );
        out
    }

    /// How the `node.drop.reason` counters moved from `before` to now.
    fn drops_since(&self, before: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
        self.counters()
            .into_iter()
            .filter(|(k, _)| k.contains(".drop."))
            .filter_map(|(k, v)| {
                let d = v - before.get(&k).copied().unwrap_or(0);
                (d > 0).then_some((k, d))
            })
            .collect()
    }

    /// Waits until at least `total` new drops are counted (or 2 s pass), then
    /// returns the movement.
    fn wait_drops(&self, before: &BTreeMap<String, u64>, total: u64) -> BTreeMap<String, u64> {
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let d = self.drops_since(before);
            if d.values().sum::<u64>() >= total || Instant::now() > deadline {
                return d;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends `datagrams` and checks that exactly the `want` drop counters moved, by
    /// exactly those amounts, and that nothing was answered.
    fn case(&mut self, name: &str, datagrams: &[Vec<u8>], want: &[(&str, DropReason, u64)]) {
        let before = self.counters();
        for d in datagrams {
            self.send(d);
        }
        let want: BTreeMap<String, u64> = want
            .iter()
            .map(|(node, r, n)| (format!("{node}.drop.{}", r.name()), *n))
            .collect();
        let got = self.wait_drops(&before, want.values().sum());
        let answers = self.answers();
        // Late counts (after the answers' wait) would still be wrong.
        let got_late = self.drops_since(&before);
        if got != want || got_late != want {
            self.fail(format!(
                "{name}: drop counters moved {got_late:?}, want {want:?}"
            ));
        }
        if !answers.is_empty() {
            let seen: Vec<String> = answers.iter().map(|a| describe(a)).collect();
            self.fail(format!("{name}: the daemon answered: {seen:?}"));
        }
    }

    /// Completes a handshake the peer starts (carrying `inner` as its first packet)
    /// and checks that packet comes out of the TUN.
    fn handshake(&mut self, p: &mut Peer, inner_payload: &[u8]) -> Vec<u8> {
        let init = p.initiate(to_daemon_side(inner_payload));
        self.send(&init);
        let response = self
            .recv_where(Duration::from_secs(3), |d| {
                d.len() == msg::HANDSHAKE_RESPONSE_LEN && d[0] == 2
            })
            .expect("the daemon answered the initiation");
        p.handle(&response).expect("the peer accepts the response");
        let _ = p.sent();
        for d in p.flushed() {
            self.send(&d);
        }
        self.expect_inner(inner_payload, "the first packet of the session");
        init
    }

    fn expect_inner(&mut self, payload: &[u8], what: &str) {
        match self.inner_recv(Duration::from_secs(3)) {
            Some((got, from))
                if got == payload
                    && from == SocketAddr::V4(SocketAddrV4::new(PEER_INNER, PEER_INNER_PORT)) => {}
            other => self.fail(format!(
                "{what}: want {:?} from the peer at the TUN, got {other:?}",
                String::from_utf8_lossy(payload)
            )),
        }
    }

    /// Sends `payload` from the daemon's side of the tunnel to the peer and checks
    /// the peer receives it encrypted and opens it.
    fn expect_from_daemon_side(&mut self, p: &mut Peer, payload: &[u8], what: &str) {
        self.inner
            .send_to(payload, SocketAddrV4::new(PEER_INNER, PEER_INNER_PORT))
            .unwrap();
        self.expect_encrypted(p, payload, what);
    }

    /// Waits for transport data whose inner UDP payload is `payload`.
    fn expect_encrypted(&mut self, p: &mut Peer, payload: &[u8], what: &str) {
        let deadline = Instant::now() + Duration::from_secs(3);
        while let Some(d) = self.recv(deadline.saturating_duration_since(Instant::now())) {
            if d.first() != Some(&4) {
                continue;
            }
            if let Some(inner) = p.open(&d)
                && inner.len() >= 28
                && &inner[28..] == payload
            {
                return;
            }
        }
        self.fail(format!(
            "{what}: {:?} did not arrive encrypted at the peer",
            String::from_utf8_lossy(payload)
        ));
    }

    /// Stops the daemon with SIGTERM and checks it was alive and exits 0.
    fn stop(&mut self) {
        match self.daemon.child.try_wait() {
            Ok(None) => {}
            other => {
                self.fail(format!("the daemon died during the test: {other:?}"));
                return;
            }
        }
        let pid = self.daemon.child.id() as libc::pid_t;
        // SAFETY: kill(2) on our own child's pid, which has not been reaped yet
        // (try_wait just saw it running), so the pid cannot have been reused.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match self.daemon.child.try_wait() {
                Ok(Some(status)) => {
                    if !status.success() {
                        self.fail(format!("the daemon exited with {status} on SIGTERM"));
                    }
                    return;
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                other => {
                    self.fail(format!("the daemon did not exit on SIGTERM: {other:?}"));
                    return;
                }
            }
        }
    }

    fn finish(mut self) {
        let failures = std::mem::take(&mut self.failures);
        drop(self);
        assert!(
            failures.is_empty(),
            "{} failure(s):\n{}",
            failures.len(),
            failures.join("\n")
        );
    }
}

/// A response of the right length whose MAC1 is right for the daemon, so the
/// daemon looks past it: at the receiver index, then (for a live one) the body.
fn response_with_good_mac1(daemon_public: &PublicKey, receiver: u32) -> Vec<u8> {
    let mut m = vec![0u8; msg::HANDSHAKE_RESPONSE_LEN];
    let mut v = msg::HandshakeResponse::emit(&mut m[..], 0x1234_5678, receiver).unwrap();
    v.set_unencrypted_ephemeral(&random_bytes::<32>());
    v.set_encrypted_nothing(&random_bytes::<16>());
    CookieJar::new(daemon_public).stamp(&mut m, Instant::now());
    m
}

fn cookie_reply(receiver: u32) -> Vec<u8> {
    let mut m = vec![0u8; msg::COOKIE_REPLY_LEN];
    let mut v = msg::CookieReply::emit(&mut m[..], receiver).unwrap();
    v.set_nonce(&random_bytes::<24>());
    v.set_encrypted_cookie(&random_bytes::<32>());
    m
}

const IN: &str = "wg-input";
const DE: &str = "wg-decrypt";

/// A daemon with a legitimate peer in session (its initiation and a data packet
/// kept for replays): where each family of bad input starts.
struct Session {
    rig: Rig,
    main: Peer,
    init: Vec<u8>,
    data: Vec<u8>,
}

impl Session {
    /// None when the test cannot run here (it says so).
    fn start() -> Option<Session> {
        let mut rig = Rig::start(None)?;
        let mut main = rig.peer();
        Some(Session::established(&mut rig, &mut main)).map(|(init, data)| Session {
            rig,
            main,
            init,
            data,
        })
    }

    /// Our initiation, the daemon's response, data both ways; returns the
    /// initiation and a data packet the daemon accepted.
    fn established(rig: &mut Rig, main: &mut Peer) -> (Vec<u8>, Vec<u8>) {
        let init = rig.handshake(main, b"legit-1");
        rig.expect_from_daemon_side(main, b"reply-1", "a reply through the session");
        let data = main.seal(&to_daemon_side(b"legit-data"));
        rig.send(&data);
        rig.expect_inner(b"legit-data", "data on the confirmed session");
        (init, data)
    }

    /// The legitimate peer still works both ways after the bad input; then the
    /// daemon stops and the failures are reported.
    fn finish(mut self) {
        let again = self.main.seal(&to_daemon_side(b"legit-2"));
        self.rig.send(&again);
        self.rig
            .expect_inner(b"legit-2", "the legitimate peer after the bad input");
        self.rig
            .expect_from_daemon_side(&mut self.main, b"reply-2", "a reply after the bad input");
        self.rig.stop();
        self.rig.finish();
    }
}

/// A cookie reply and a response must name a live receiver index of the daemon's to
/// get past the index lookup; for a live one, what is wrong with the body is counted.
#[test]
fn bodies_for_a_live_index_are_counted_and_unanswered() {
    let Some(mut rig) = Rig::start(None) else {
        return;
    };
    let mut main = rig.peer();
    // The daemon starts a handshake of its own when it has data for the peer: that
    // gives a live receiver index of the daemon's, which a response or cookie reply
    // must name to get past the index lookup.
    rig.inner
        .send_to(
            b"from-the-daemon-side",
            SocketAddrV4::new(PEER_INNER, PEER_INNER_PORT),
        )
        .unwrap();
    match rig.recv_where(Duration::from_secs(3), |d| {
        d.len() == msg::HANDSHAKE_INITIATION_LEN && d[0] == 1
    }) {
        Some(init) => {
            let live = u32::from_le_bytes(init[4..8].try_into().unwrap());
            rig.case(
                "cookie reply that does not open, for a live index",
                &[cookie_reply(live)],
                &[(IN, DropReason::BadCookieReply, 1)],
            );
            let public = rig.daemon_public;
            rig.case(
                "response with a good MAC1 and a corrupt body, for a live index",
                &[response_with_good_mac1(&public, live)],
                &[(IN, DropReason::HandshakeDecrypt, 1)],
            );
        }
        None => rig.fail("the daemon did not initiate with data staged for its peer".into()),
    }

    // The legitimate session: our initiation, the daemon's response, our data out of
    // the TUN, and the daemon's staged packet and a reply back to us, encrypted.
    let init = rig.handshake(&mut main, b"legit-1");
    rig.expect_encrypted(
        &mut main,
        b"from-the-daemon-side",
        "the daemon's staged packet",
    );
    let data = main.seal(&to_daemon_side(b"legit-data"));
    rig.send(&data);
    rig.expect_inner(b"legit-data", "data on the confirmed session");
    Session {
        rig,
        main,
        init,
        data,
    }
    .finish();
}

#[test]
fn wrong_lengths_are_counted_and_unanswered() {
    let Some(mut s) = Session::start() else {
        return;
    };
    // Wrong lengths. Fewer than 4 bytes, or transport data shorter than a header
    // and a tag, are truncated; a handshake message not of its one size is of the
    // wrong length.
    s.rig.case(
        "empty datagram",
        &[vec![]],
        &[(IN, DropReason::Truncated, 1)],
    );
    for t in 1..=4u8 {
        s.rig.case(
            &format!("type {t}, 1 byte"),
            &[vec![t]],
            &[(IN, DropReason::Truncated, 1)],
        );
    }
    for (t, size) in [
        (1u8, msg::HANDSHAKE_INITIATION_LEN),
        (2, msg::HANDSHAKE_RESPONSE_LEN),
        (3, msg::COOKIE_REPLY_LEN),
    ] {
        for len in [size - 1, size + 1] {
            s.rig.case(
                &format!("type {t}, {len} bytes"),
                &[typed([t, 0, 0, 0], len)],
                &[(IN, DropReason::WrongLength, 1)],
            );
        }
    }
    s.rig.case(
        "type 4, 31 bytes",
        &[typed([4, 0, 0, 0], msg::TRANSPORT_MIN_LEN - 1)],
        &[(IN, DropReason::Truncated, 1)],
    );
    // A full packet buffer (1888 bytes) still gets to the protocol: it is read whole.
    s.rig.case(
        "type 1, 1888 bytes (a full buffer)",
        &[typed([1, 0, 0, 0], 1888)],
        &[(IN, DropReason::WrongLength, 1)],
    );
    s.rig.case(
        "type 4, 1888 bytes (a full buffer), unknown index",
        &[typed([4, 0, 0, 0], 1888)],
        &[(DE, DropReason::UnknownIndex, 1)],
    );

    s.finish();
}

#[test]
fn unknown_types_and_reserved_bytes_are_counted_and_unanswered() {
    let Some(mut s) = Session::start() else {
        return;
    };
    // Unknown types and reserved bytes that are not zero.
    for t in [5u8, 0, 255] {
        s.rig.case(
            &format!("unknown type {t}"),
            &[typed([t, 0, 0, 0], msg::HANDSHAKE_INITIATION_LEN)],
            &[(IN, DropReason::UnknownType, 1)],
        );
    }
    for (t, size, reserved) in [
        (1u8, msg::HANDSHAKE_INITIATION_LEN, 1usize),
        (2, msg::HANDSHAKE_RESPONSE_LEN, 2),
        (3, msg::COOKIE_REPLY_LEN, 3),
        (4, msg::TRANSPORT_MIN_LEN, 1),
    ] {
        let mut word = [t, 0, 0, 0];
        word[reserved] = 0x80;
        s.rig.case(
            &format!("type {t} with reserved byte {reserved} set"),
            &[typed(word, size)],
            &[(IN, DropReason::UnknownType, 1)],
        );
    }
    // A valid initiation with a reserved byte set: it must not get past the type word.
    let mut reserved_init = s.init.clone();
    reserved_init[3] = 1;
    s.rig.case(
        "valid initiation with reserved byte 3 set",
        &[reserved_init],
        &[(IN, DropReason::UnknownType, 1)],
    );

    s.finish();
}

#[test]
fn bad_handshake_macs_and_bodies_are_counted_and_unanswered() {
    let Some(mut s) = Session::start() else {
        return;
    };
    // MAC1.
    let mut bad_mac1 = s.init.clone();
    bad_mac1[msg::HANDSHAKE_INITIATION_LEN - 32] ^= 1;
    s.rig.case(
        "initiation with a bad MAC1",
        &[bad_mac1],
        &[(IN, DropReason::BadMac1, 1)],
    );
    s.rig.case(
        "response with a zero MAC1",
        &[typed([2, 0, 0, 0], msg::HANDSHAKE_RESPONSE_LEN)],
        &[(IN, DropReason::BadMac1, 1)],
    );
    let public = s.rig.daemon_public;
    let mut corrupt = s.rig.peer().initiate(Vec::new());
    corrupt[50] ^= 0x20; // inside encrypted_static
    CookieJar::new(&public).stamp(&mut corrupt, Instant::now());
    s.rig.case(
        "initiation with a good MAC1 and a corrupt body",
        &[corrupt],
        &[(IN, DropReason::HandshakeDecrypt, 1)],
    );
    let mut zero_ephemeral = typed([1, 0, 0, 0], msg::HANDSHAKE_INITIATION_LEN);
    CookieJar::new(&public).stamp(&mut zero_ephemeral, Instant::now());
    s.rig.case(
        "initiation with an all-zero ephemeral and a good MAC1",
        &[zero_ephemeral],
        &[(IN, DropReason::ZeroSharedSecret, 1)],
    );
    let stranger = {
        let mut d = Device::new(
            Arc::new(KeyRegistry::new(8)),
            Instant::now(),
            SystemTime::now(),
        );
        d.set_private_key(Some(PrivateKey::generate()));
        let id = d.add_peer(public).unwrap();
        d.set_endpoint(id, s.rig.daemon_addr);
        d.stage(id, 0, Instant::now());
        match d.poll_action() {
            Some(Action::Send { packet, .. }) => packet,
            other => panic!("no initiation from the stranger: {other:?}"),
        }
    };
    s.rig.case(
        "initiation from a key that is no peer",
        &[stranger],
        &[(IN, DropReason::UnknownPeer, 1)],
    );

    s.finish();
}

#[test]
fn replays_floods_and_unknown_indices_are_counted() {
    let Some(mut s) = Session::start() else {
        return;
    };
    let public = s.rig.daemon_public;
    // Replayed and flooding initiations.
    s.rig.case(
        "replayed initiation",
        std::slice::from_ref(&s.init),
        &[(IN, DropReason::StaleTimestamp, 1)],
    );
    {
        // Two valid initiations, each newer than any before, back to back: the first
        // is answered, the second comes within 20 ms of it.
        let mut first = s.rig.peer();
        let mut second = s.rig.peer();
        let a = first.initiate(Vec::new());
        let b = second.initiate(Vec::new());
        let before = s.rig.counters();
        s.rig.send(&a);
        s.rig.send(&b);
        let got = s.rig.wait_drops(&before, 1);
        let response = s.rig.recv_where(Duration::from_secs(2), |d| d[0] == 2);
        let answers = s.rig.answers();
        let want: BTreeMap<String, u64> = [(
            format!("{IN}.drop.{}", DropReason::InitiationFlood.name()),
            1,
        )]
        .into();
        if got != want {
            s.rig.fail(format!(
                "initiation flood: drops moved {got:?}, want {want:?}"
            ));
        }
        match response {
            Some(r) if r[8..12] == a[4..8] => {}
            other => s.rig.fail(format!(
                "initiation flood: the first initiation was not answered: {other:?}"
            )),
        }
        if !answers.is_empty() {
            s.rig.fail(format!(
                "initiation flood: more answers: {:?}",
                answers.iter().map(|d| describe(d)).collect::<Vec<_>>()
            ));
        }
    }

    // Unknown receiver indices.
    s.rig.case(
        "response for an unknown index (good MAC1)",
        &[response_with_good_mac1(&public, UNKNOWN_INDEX)],
        &[(IN, DropReason::UnknownIndex, 1)],
    );
    s.rig.case(
        "cookie reply for an unknown index",
        &[cookie_reply(UNKNOWN_INDEX)],
        &[(IN, DropReason::UnknownIndex, 1)],
    );
    let (key, _, _) = s.main.ticket();
    s.rig.case(
        "data for an unknown index",
        &[seal_data(&key, UNKNOWN_INDEX, 0, &to_daemon_side(b"x"))],
        &[(DE, DropReason::UnknownIndex, 1)],
    );

    s.finish();
}

#[test]
fn data_outside_the_replay_window_is_counted() {
    let Some(mut s) = Session::start() else {
        return;
    };
    let (key, receiver, _) = s.main.ticket();
    // Counters.
    s.rig.case(
        "replayed data",
        std::slice::from_ref(&s.data),
        &[(DE, DropReason::Replay, 1)],
    );
    {
        let (_, _, old) = s.main.ticket();
        let mut far = old;
        while far < old + wireguard::replay::WINDOW_SIZE + 10_000 {
            far = s.main.ticket().2;
        }
        s.rig.case(
            "data far ahead of the window (valid)",
            &[seal_data(
                &key,
                receiver,
                far,
                &to_daemon_side(b"far-ahead"),
            )],
            &[],
        );
        s.rig
            .expect_inner(b"far-ahead", "data far ahead of the window");
        s.rig.case(
            "an older counter, inside the window before the jump, now behind it",
            &[seal_data(&key, receiver, old, &to_daemon_side(b"old"))],
            &[(DE, DropReason::Replay, 1)],
        );
        s.rig.case(
            "an unseen counter inside the window (valid, out of order)",
            &[seal_data(
                &key,
                receiver,
                far - 100,
                &to_daemon_side(b"in-window"),
            )],
            &[],
        );
        s.rig
            .expect_inner(b"in-window", "an unseen counter inside the window");
        s.rig.case(
            "the same counter inside the window again",
            &[seal_data(
                &key,
                receiver,
                far - 100,
                &to_daemon_side(b"in-window"),
            )],
            &[(DE, DropReason::Replay, 1)],
        );
    }
    for counter in [REJECT_AFTER_MESSAGES, u64::MAX] {
        s.rig.case(
            &format!("counter {counter:#x} (>= REJECT_AFTER_MESSAGES)"),
            &[seal_data(
                &key,
                receiver,
                counter,
                &to_daemon_side(b"too-late"),
            )],
            &[(DE, DropReason::KeyExpired, 1)],
        );
    }

    s.finish();
}

#[test]
fn corrupt_data_is_counted_and_shown_by_name() {
    let Some(mut s) = Session::start() else {
        return;
    };
    let mut bad_mac1 = s.init.clone();
    bad_mac1[msg::HANDSHAKE_INITIATION_LEN - 32] ^= 1;
    s.rig.case(
        "initiation with a bad MAC1",
        &[bad_mac1],
        &[(IN, DropReason::BadMac1, 1)],
    );
    // Bodies.
    let mut flipped = s.main.seal(&to_daemon_side(b"flipped"));
    flipped[20] ^= 0x01; // ciphertext
    let mut flipped_tag = s.main.seal(&to_daemon_side(b"flipped-tag"));
    *flipped_tag.last_mut().unwrap() ^= 0x80;
    let mut flipped_header = s.main.seal(&to_daemon_side(b"flipped-header"));
    flipped_header[8] ^= 0x01; // the counter, which is the nonce
    s.rig.case(
        "data with flipped bits",
        &[flipped, flipped_tag, flipped_header],
        &[(DE, DropReason::BadTag, 3)],
    );
    s.rig.case(
        "inner source outside the peer's allowed IPs",
        &[s.main.seal(&inner_udp(
            STRANGER_INNER,
            DAEMON_INNER,
            PEER_INNER_PORT,
            INNER_PORT,
            b"stranger",
        ))],
        &[(DE, DropReason::SourceNotAllowed, 1)],
    );
    s.rig.case(
        "inner bytes that are no IP packet",
        &[s.main.seal(&[0u8; 24])],
        &[(DE, DropReason::BadInnerPacket, 1)],
    );

    // The command line shows the drops by name.
    let shown = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["show", "counters", &s.rig.daemon.ifname])
        .output()
        .expect("running linerate show counters");
    let text = String::from_utf8_lossy(&shown.stdout).into_owned();
    if !shown.status.success() || !text.contains("bad-mac1=") || !text.contains("wg-decrypt") {
        s.rig.fail(format!(
            "linerate show counters: {}, printed:\n{text}",
            shown.status
        ));
    }
    // And `show errors` lists them, each with what it means.
    let shown = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["show", "errors", &s.rig.daemon.ifname])
        .output()
        .expect("running linerate show errors");
    let text = String::from_utf8_lossy(&shown.stdout).into_owned();
    let line = |reason: &str| {
        text.lines()
            .find(|l| l.split_whitespace().nth(2) == Some(reason))
            .map(str::to_owned)
    };
    if !shown.status.success()
        || line("bad-mac1")
            .is_none_or(|l| !(l.contains(IN) && l.ends_with(DropReason::BadMac1.doc())))
        || line("bad-tag")
            .is_none_or(|l| !(l.contains(DE) && l.ends_with(DropReason::BadTag.doc())))
    {
        s.rig.fail(format!(
            "linerate show errors: {}, printed:\n{text}",
            shown.status
        ));
    }

    s.finish();
}

#[test]
fn under_load_asks_for_cookies_and_accepts_mac2() {
    let Some(mut rig) = Rig::start(Some(2)) else {
        return;
    };
    // Five valid initiations at once, from devices of the peer's key with ever newer
    // timestamps. More than 2 handshake messages in a second put the daemon under
    // load: from the third on, an initiation without MAC2 gets a cookie reply.
    let mut peers: Vec<Peer> = (0..5).map(|_| rig.peer()).collect();
    let inits: Vec<Vec<u8>> = peers
        .iter_mut()
        .map(|p| p.initiate(to_daemon_side(b"after-cookie")))
        .collect();
    let before = rig.counters();
    for i in &inits {
        rig.send(i);
    }
    let mut cookies: Vec<(usize, Vec<u8>)> = Vec::new();
    let mut others = Vec::new();
    while let Some(d) = rig.recv(Duration::from_millis(300)) {
        if d.len() == msg::COOKIE_REPLY_LEN && d[0] == 3 {
            match inits.iter().position(|i| i[4..8] == d[4..8]) {
                Some(k) => cookies.push((k, d)),
                None => others.push(d),
            }
        } else if d[0] != 2 {
            others.push(d);
        }
    }
    let drops = rig.drops_since(&before);
    let cookie_key = format!("{IN}.drop.{}", DropReason::CookieSent.name());
    let sent = drops.get(&cookie_key).copied().unwrap_or(0);
    if cookies.is_empty() {
        rig.fail(format!("no cookie reply under load; drops moved {drops:?}"));
    }
    if sent != cookies.len() as u64 {
        rig.fail(format!(
            "{} cookie replies arrived but cookie-sent rose by {sent}",
            cookies.len()
        ));
    }
    for k in drops.keys() {
        if !k.ends_with(".drop.cookie-sent") && !k.ends_with(".drop.initiation-flood") {
            rig.fail(format!("unexpected drop under load: {drops:?}"));
        }
    }
    if !others.is_empty() {
        rig.fail(format!(
            "unexpected datagrams under load: {:?}",
            others.iter().map(|d| describe(d)).collect::<Vec<_>>()
        ));
    }
    let Some((k, reply)) = cookies.pop() else {
        rig.finish();
        return;
    };

    // The peer whose initiation drew the cookie takes it and retries: its retry timer
    // is run early (its clock moved past REKEY_TIMEOUT), so the daemon's clock has
    // moved only milliseconds and the daemon is still under load.
    let p = &mut peers[k];
    p.handle(&reply).expect("the peer takes the cookie");
    p.skew = REKEY_TIMEOUT + REKEY_TIMEOUT_JITTER_MAX + Duration::from_millis(1);
    let now = p.now();
    p.dev.tick(now);
    let retry = p.sent().expect("the retry timer sends a new initiation");
    assert_ne!(
        &retry[msg::HANDSHAKE_INITIATION_LEN - 16..],
        &[0u8; 16],
        "the retry carries MAC2"
    );
    // Keep the load up whatever the scheduler did: handshake messages with a bad
    // MAC1 still count towards it, and are dropped without an answer.
    let before = rig.counters();
    let mut bad = inits[0].clone();
    bad[msg::HANDSHAKE_INITIATION_LEN - 32] ^= 1;
    for _ in 0..3 {
        rig.send(&bad);
    }
    rig.send(&retry);
    let response = rig.recv_where(Duration::from_secs(2), |d| d[0] == 2 || d[0] == 3);
    let drops = rig.wait_drops(&before, 3);
    let want: BTreeMap<String, u64> =
        [(format!("{IN}.drop.{}", DropReason::BadMac1.name()), 3)].into();
    if drops != want {
        rig.fail(format!(
            "the retry with MAC2: drops moved {drops:?}, want {want:?}"
        ));
    }
    match response {
        Some(r) if r[0] == 2 && r[8..12] == retry[4..8] => {
            let p = &mut peers[k];
            p.handle(&r).expect("the peer accepts the response");
            let _ = p.sent();
            let data = p.flushed();
            for d in &data {
                rig.send(d);
            }
            rig.expect_inner(b"after-cookie", "data on the session made with MAC2");
        }
        other => rig.fail(format!(
            "the retry with MAC2 was not answered with a response: {:?}",
            other.map(|d| describe(&d))
        )),
    }
    rig.stop();
    rig.finish();
}

/// Datagrams longer than a packet buffer (1888 bytes) reach the daemon's socket and
/// are dropped before the graph, each counted once as `udp.truncated` (the TUN side
/// counts its own as `tun.too_big`). A 65535-byte message cannot be sent over IPv4;
/// 65507 bytes is the largest UDP payload.
#[test]
fn oversized_datagrams_are_counted() {
    let Some(mut rig) = Rig::start(None) else {
        return;
    };
    let mut cases: Vec<(String, Vec<u8>)> = (1..=4u8)
        .map(|t| {
            (
                format!("type {t}, {MAX_UDP_PAYLOAD} bytes (the UDP maximum over IPv4)"),
                typed([t, 0, 0, 0], MAX_UDP_PAYLOAD),
            )
        })
        .collect();
    // One byte more than a buffer holds, for transport data, whose length varies.
    cases.push(("type 4, 1889 bytes".into(), typed([4, 0, 0, 0], 1889)));
    for (name, datagram) in cases {
        let before = rig.counters();
        let udp_in = rig.kernel_udp_in();
        rig.send(&datagram);
        // Wait for the kernel to hand it to the daemon's socket and the worker to
        // read it (a counters request is answered after the socket was read).
        let deadline = Instant::now() + Duration::from_secs(2);
        while rig.kernel_udp_in() == udp_in && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if rig.kernel_udp_in() != udp_in + 1 {
            rig.fail(format!(
                "{name}: the kernel did not deliver it to the daemon"
            ));
            continue;
        }
        // Any fix will do: a drop reason of wg-input (wrong-length for handshake
        // types) or a driver counter of its own, like the TUN's.
        let after = rig.counters();
        let moved: BTreeMap<&String, u64> = after
            .iter()
            .filter(|(k, _)| k.contains(".drop.") || k.ends_with("truncated"))
            .filter_map(|(k, v)| {
                let d = v - before.get(k).copied().unwrap_or(0);
                (d > 0).then_some((k, d))
            })
            .collect();
        if moved.values().sum::<u64>() != 1 {
            rig.fail(format!(
                "{name}: counters moved {moved:?}, want one drop counted"
            ));
        }
        let answers = rig.answers();
        if !answers.is_empty() {
            rig.fail(format!(
                "{name}: the daemon answered {} datagram(s)",
                answers.len()
            ));
        }
    }
    rig.stop();
    rig.finish();
}

#[test]
fn base64_matches_the_standard_alphabet() {
    assert_eq!(base64(b""), "");
    assert_eq!(base64(b"f"), "Zg==");
    assert_eq!(base64(b"fo"), "Zm8=");
    assert_eq!(base64(b"foo"), "Zm9v");
    assert_eq!(base64(&[0xff; 32]).len(), 44);
}
