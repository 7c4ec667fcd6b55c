//! The server session against the stock OpenVPN 2.6 client (`openvpn`, userspace
//! data channel), live: the client connects from one network namespace to a UDP
//! socket in another, where this test drives a [`ServerSession`] and answers the
//! echo requests the client's `ping` sends through the tunnel with the data keys
//! the session derived. Each case is one client configuration: the TLS version,
//! control-channel protection, data cipher, and who renegotiates.
//!
//! Needs root and the `openvpn` binary; under `make test` it must run.

mod client;

use std::collections::HashSet;
use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use client::Pki;
use io::netns::{NetNs, VethEnd, root_or_skip, skip_test, veth_pair};
use openvpn::data::{self, DataHeader, Inner};
use openvpn::data_keys::DataKeys;
use openvpn::push::PushReply;
use openvpn::server::{Event, ServerConfig, ServerSession};
use openvpn::static_key::{Direction, Key2};
use openvpn::tls::{TlsFiles, TlsVersions};
use openvpn::tls_auth::AuthDigest;
use openvpn::wrap::ControlWrap;
use openvpn::{DataCipher, KeyId, Opcode, Role, TlsAuth, TlsCrypt};

const SERVER: &str = "198.18.51.1";
const CLIENT: &str = "198.18.51.2";
const TUNNEL_SERVER: std::net::Ipv4Addr = std::net::Ipv4Addr::new(198, 19, 51, 1);

#[derive(Clone, Copy)]
enum Protection {
    Auth,
    Crypt,
}

struct Case {
    name: &'static str,
    protection: Protection,
    cipher: DataCipher,
    tls12: bool,
    /// Seconds between renegotiations started by the client, and by the server.
    client_reneg: Option<u32>,
    server_reneg: Option<u64>,
    pings: u32,
}

/// What the server side saw.
#[derive(Default)]
struct Seen {
    authenticated: Option<String>,
    echo_replies: u32,
    keepalives: u32,
    /// Key ids that opened a client's packet.
    key_ids: HashSet<u8>,
    retired: Vec<u8>,
    closed: Option<String>,
    refused: Vec<String>,
}

fn key() -> Key2 {
    let mut bytes = [0u8; 256];
    fill(&mut bytes);
    Key2::from_bytes(bytes)
}

/// Bytes that differ from run to run, for keys and session ids that need not be
/// secret in a test.
fn fill(b: &mut [u8]) {
    for (i, x) in b.iter_mut().enumerate() {
        *x = (i as u8)
            .wrapping_mul(151)
            .wrapping_add(std::process::id() as u8);
    }
}

/// The server's side: a socket, one session, and an echo responder on the
/// data channel. Runs until `stop`.
fn serve(config: Arc<ServerConfig>, cipher: DataCipher, stop: &AtomicBool) -> Seen {
    let sock = UdpSocket::bind((SERVER, 1194)).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let mut seen = Seen::default();
    let mut session: Option<ServerSession> = None;
    let mut keys: Vec<(KeyId, DataKeys)> = Vec::new();
    // The key the client has (the server's session says when).
    let mut sending = KeyId::default();
    let mut next_packet_id = 1u32;
    let mut client_addr: Option<SocketAddr> = None;
    let mut buf = [0u8; 2048];
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        let mut outputs = Vec::new();
        match sock.recv_from(&mut buf) {
            Ok((n, from)) => {
                let packet = &buf[..n];
                let opcode = Opcode::of(packet[0]);
                if opcode == Ok(Opcode::DataV2) {
                    let Ok(header) = DataHeader::parse(packet) else {
                        continue;
                    };
                    let Some((_, k)) = keys.iter().find(|(id, _)| *id == header.key_id) else {
                        seen.refused
                            .push(format!("data under unknown key {}", header.key_id.get()));
                        continue;
                    };
                    let Ok((_, plain)) = data::open(k.cipher, &k.recv, packet) else {
                        seen.refused.push("data that does not open".into());
                        continue;
                    };
                    seen.key_ids.insert(header.key_id.get());
                    match data::classify(&plain) {
                        Inner::Ping => seen.keepalives += 1,
                        Inner::Exit => {}
                        Inner::Packet => {
                            if let Some(reply) = echo_reply(&plain) {
                                let (id, send) = keys
                                    .iter()
                                    .find(|(id, _)| *id == sending)
                                    .or(keys.first())
                                    .unwrap();
                                let h = DataHeader {
                                    key_id: *id,
                                    peer_id: 0,
                                    packet_id: next_packet_id,
                                };
                                next_packet_id += 1;
                                let out = data::seal(send.cipher, &send.send, h, &reply);
                                sock.send_to(&out, from).unwrap();
                                seen.echo_replies += 1;
                            }
                        }
                    }
                    continue;
                }
                match session.as_mut() {
                    None => {
                        match ServerSession::accept(config.clone(), packet, now, 1_000, &mut |b| {
                            fill(b)
                        }) {
                            Ok((s, out)) => {
                                session = Some(s);
                                client_addr = Some(from);
                                outputs.push(out);
                            }
                            Err(e) => seen.refused.push(format!("first packet: {e}")),
                        }
                    }
                    Some(s) => match s.receive(packet, now) {
                        Ok(out) => outputs.push(out),
                        Err(e) => seen.refused.push(format!("control: {e}")),
                    },
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => panic!("recv: {e}"),
        }
        if let Some(s) = session.as_mut()
            && s.next_wakeup().is_some_and(|t| t <= now)
        {
            outputs.push(s.tick(now));
        }
        while let Some(out) = outputs.pop() {
            let to = client_addr.unwrap();
            for d in &out.datagrams {
                sock.send_to(d, to).unwrap();
            }
            for e in out.events {
                match e {
                    Event::Authenticated { common_name, .. } => {
                        seen.authenticated = Some(common_name)
                    }
                    Event::PushRequested => {
                        let s = session.as_mut().unwrap();
                        let reply = PushReply {
                            ifconfig: Some(("198.19.51.2".parse().unwrap(), 24)),
                            route_gateway: Some(TUNNEL_SERVER),
                            ifconfig_ipv6: None,
                            routes: vec![],
                            routes_ipv6: vec![],
                            peer_id: 0,
                            ping: 10,
                            ping_restart: 60,
                            cipher,
                            ekm: s.uses_ekm(),
                            cc_exit: true,
                            tun_mtu: None,
                        };
                        outputs.push(s.push(&reply, now));
                    }
                    Event::Keys { key_id, keys: k } => keys.push((key_id, k)),
                    Event::SendWith { key_id } => sending = key_id,
                    Event::KeyRetired { key_id } => {
                        keys.retain(|(id, _)| *id != key_id);
                        seen.retired.push(key_id.get());
                    }
                    Event::Exit => {}
                    Event::Closed { reason } => seen.closed = Some(reason),
                }
            }
        }
    }
    seen
}

/// An ICMP echo reply to an echo request for the tunnel's server address.
fn echo_reply(packet: &[u8]) -> Option<Vec<u8>> {
    let mut out = packet.to_vec();
    let mut ip = wire::ipv4::Packet::new_checked(&mut out[..]).ok()?;
    if ip.protocol() != wire::ip::protocol::ICMP || ip.dst_addr() != TUNNEL_SERVER {
        return None;
    }
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    ip.set_src_addr(dst);
    ip.set_dst_addr(src);
    ip.fill_checksum();
    let mut icmp = wire::icmp::Packet::new_checked(ip.payload_mut()).ok()?;
    if icmp.msg_type() != wire::icmp::msg_type::ECHO_REQUEST {
        return None;
    }
    icmp.set_msg_type(wire::icmp::msg_type::ECHO_REPLY);
    icmp.fill_checksum();
    Some(out)
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

fn run(case: &Case) {
    let pki = Pki::new("stock-client-ca");
    let dir = std::env::temp_dir().join(format!("lr-ovpn-{}-{}", std::process::id(), case.name));
    std::fs::create_dir_all(&dir).unwrap();
    let key = key();
    let key_file = write(&dir, "static.key", &key.to_file());
    let ca = write(&dir, "ca.crt", &pki.ca_pem);
    let (cert, client_key) = pki.client_files();
    let cert = write(&dir, "client.crt", &cert);
    let client_key = write(&dir, "client.key", &client_key);
    let log = dir.join("client.log");

    let wrap = match case.protection {
        Protection::Auth => {
            ControlWrap::Auth(TlsAuth::new(&key, Direction::Normal, AuthDigest::Sha256))
        }
        Protection::Crypt => ControlWrap::Crypt(TlsCrypt::new(&key, Role::Server)),
    };
    let files = TlsFiles {
        cert: pki.server_cert_pem.as_bytes(),
        key: pki.server_key_pem.as_bytes(),
        ca: pki.ca_pem.as_bytes(),
        crl: None,
    };
    let config = Arc::new(ServerConfig {
        tls: openvpn::tls::server_config(&files, TlsVersions::Both).unwrap(),
        wrap: Arc::new(wrap),
        ciphers: vec![case.cipher],
        reneg: case.server_reneg.map(Duration::from_secs),
        hand_window: Duration::from_secs(60),
        transition_window: Duration::from_secs(4),
        control_payload: 1100,
        options: "V4,dev-type tun,link-mtu 1549,tun-mtu 1500,proto UDPv4,cipher AES-256-GCM,auth [null-digest],keysize 256,key-method 2,tls-server".into(),
        tls_crypt_v2: None,
    });

    let server_ns = NetNs::new("lr-ovpn-s").unwrap();
    let client_ns = NetNs::new("lr-ovpn-c").unwrap();
    veth_pair(
        &VethEnd {
            ns: &server_ns,
            ifname: "ovs",
            addrs: &[&format!("{SERVER}/24")],
        },
        &VethEnd {
            ns: &client_ns,
            ifname: "ovc",
            addrs: &[&format!("{CLIENT}/24")],
        },
    )
    .unwrap();

    let mut args: Vec<String> = [
        "openvpn",
        "--client",
        "--dev",
        "tun",
        "--proto",
        "udp",
        "--remote",
        SERVER,
        "1194",
        "--nobind",
        "--disable-dco",
        "--verb",
        "3",
        "--ca",
        &ca,
        "--cert",
        &cert,
        "--key",
        &client_key,
        "--data-ciphers",
        "AES-256-GCM:AES-128-GCM:CHACHA20-POLY1305",
        "--log",
        log.to_str().unwrap(),
        "--connect-retry-max",
        "1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    match case.protection {
        Protection::Auth => {
            args.extend(["--tls-auth", &key_file, "1", "--auth", "SHA256"].map(String::from))
        }
        Protection::Crypt => args.extend(["--tls-crypt", &key_file].map(String::from)),
    }
    if case.tls12 {
        args.extend(["--tls-version-max", "1.2"].map(String::from));
    }
    args.extend(["--reneg-sec", &case.client_reneg.unwrap_or(0).to_string()].map(String::from));

    let stop = AtomicBool::new(false);
    let (seen, pinged) = std::thread::scope(|s| {
        let server = s.spawn(|| {
            server_ns
                .run(|| serve(config.clone(), case.cipher, &stop))
                .unwrap()
        });
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut client = client_ns.spawn(&argv).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut up = false;
        while Instant::now() < deadline && !up {
            std::thread::sleep(Duration::from_millis(50));
            up = std::fs::read_to_string(&log)
                .is_ok_and(|l| l.contains("Initialization Sequence Completed"));
        }
        let mut pinged = 0;
        if up {
            for _ in 0..case.pings {
                let ok = Command::new("ip")
                    .args([
                        "netns",
                        "exec",
                        client_ns.name(),
                        "ping",
                        "-c",
                        "1",
                        "-W",
                        "2",
                        "198.19.51.1",
                    ])
                    .output()
                    .unwrap()
                    .status
                    .success();
                pinged += u32::from(ok);
                if case.client_reneg.is_some() || case.server_reneg.is_some() {
                    std::thread::sleep(Duration::from_millis(1000));
                }
            }
        }
        let _ = client.kill();
        let _ = client.wait();
        stop.store(true, Ordering::Relaxed);
        (server.join().unwrap(), pinged)
    });
    let log_text = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    let context = format!(
        "{}: refused {:?}, closed {:?}\nclient log:\n{log_text}",
        case.name, seen.refused, seen.closed
    );
    assert_eq!(seen.authenticated.as_deref(), Some("client-7"), "{context}");
    assert_eq!(pinged, case.pings, "{context}");
    assert_eq!(seen.echo_replies, case.pings, "{context}");
    assert!(seen.refused.is_empty(), "{context}");
    assert_eq!(seen.closed, None, "{context}");
    assert!(
        log_text.contains(&format!("Data Channel: cipher '{}'", case.cipher.name())),
        "{context}"
    );
    if case.client_reneg.is_some() || case.server_reneg.is_some() {
        assert!(
            seen.key_ids.len() >= 3,
            "keys used: {:?}\n{context}",
            seen.key_ids
        );
        assert!(!seen.retired.is_empty(), "{context}");
    }
}

fn ready(test: &str) -> bool {
    if !root_or_skip(test) {
        return false;
    }
    if Command::new("openvpn").arg("--version").output().is_err() {
        skip_test(test, "no openvpn binary (scripts/setup.sh installs it)");
        return false;
    }
    true
}

#[test]
fn a_stock_client_connects_and_pings_through_each_cipher_protection_and_tls_version() {
    if !ready("a_stock_client_connects_and_pings_through_each_cipher_protection_and_tls_version") {
        return;
    }
    for case in [
        Case {
            name: "crypt-aes256-tls13",
            protection: Protection::Crypt,
            cipher: DataCipher::Aes256Gcm,
            tls12: false,
            client_reneg: None,
            server_reneg: None,
            pings: 2,
        },
        Case {
            name: "auth-aes128-tls12",
            protection: Protection::Auth,
            cipher: DataCipher::Aes128Gcm,
            tls12: true,
            client_reneg: None,
            server_reneg: None,
            pings: 2,
        },
        Case {
            name: "crypt-chacha-tls12",
            protection: Protection::Crypt,
            cipher: DataCipher::Chacha20Poly1305,
            tls12: true,
            client_reneg: None,
            server_reneg: None,
            pings: 2,
        },
    ] {
        run(&case);
    }
}

#[test]
fn a_stock_client_renegotiates() {
    if !ready("a_stock_client_renegotiates") {
        return;
    }
    // (The server's own renegotiations are tested through the gateway,
    // tests/net/openvpn.sh rekey.)
    run(&Case {
        name: "client-reneg",
        protection: Protection::Crypt,
        cipher: DataCipher::Aes256Gcm,
        tls12: false,
        client_reneg: Some(3),
        server_reneg: None,
        pings: 8,
    });
}
