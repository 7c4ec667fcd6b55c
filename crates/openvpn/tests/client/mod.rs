//! A client for the server session's tests, made of the crate's own pieces and a
//! rustls client, behaving as an OpenVPN 2.6 client does: a hard reset, TLS once
//! the server's reset arrived, its key-method message with peer-info, a push
//! request, and soft resets of its own or in answer to the server's. Each test
//! binary uses part of it.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use openvpn::control::{Acks, Body, SessionId};
use openvpn::data_keys::DataKeys;
use openvpn::key_method::{KeyMethod2, KeySource};
use openvpn::packet_id::PacketIdSender;
use openvpn::prf::{EKM_LABEL, openvpn_prf_key2};
use openvpn::push::PushReply;
use openvpn::reliable::{ReceiveWindow, SendWindow};
use openvpn::server::{Event, ServerConfig, ServerSession};
use openvpn::static_key::{KEY2_LEN, Key2};
use openvpn::wrap::ControlWrap;
use openvpn::{DataCipher, KeyId, Opcode, Role};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

pub struct Pki {
    pub ca_pem: String,
    pub server_cert_pem: String,
    pub server_key_pem: String,
    pub client_cert: CertificateDer<'static>,
    pub client_key_der: Vec<u8>,
    client_cert_pem: String,
    client_key_pem: String,
    pub ca_der: CertificateDer<'static>,
    ca_params: rcgen::CertificateParams,
    ca_key: rcgen::KeyPair,
}

fn ca(name: &str) -> (rcgen::CertificateParams, rcgen::KeyPair, rcgen::Certificate) {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.clone().self_signed(&key).unwrap();
    (params, key, cert)
}

fn leaf(
    name: &str,
    serial: u64,
    usage: rcgen::ExtendedKeyUsagePurpose,
    issuer: &rcgen::CertificateParams,
    issuer_key: &rcgen::KeyPair,
) -> (rcgen::Certificate, rcgen::KeyPair) {
    let mut params = rcgen::CertificateParams::new(vec![name.to_owned()]).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    params.serial_number = Some(rcgen::SerialNumber::from(serial));
    params.extended_key_usages = vec![usage];
    let key = rcgen::KeyPair::generate().unwrap();
    let issuer_cert = issuer.clone().self_signed(issuer_key).unwrap();
    let cert = params.signed_by(&key, &issuer_cert, issuer_key).unwrap();
    (cert, key)
}

impl Pki {
    /// A CA, a server certificate, and a client certificate with serial 7.
    pub fn new(ca_name: &str) -> Pki {
        let (ca_params, ca_key, ca_cert) = ca(ca_name);
        let (server, server_key) = leaf(
            "server",
            2,
            rcgen::ExtendedKeyUsagePurpose::ServerAuth,
            &ca_params,
            &ca_key,
        );
        let (client, client_key) = leaf(
            "client-7",
            7,
            rcgen::ExtendedKeyUsagePurpose::ClientAuth,
            &ca_params,
            &ca_key,
        );
        Pki {
            ca_pem: ca_cert.pem(),
            server_cert_pem: server.pem(),
            server_key_pem: server_key.serialize_pem(),
            client_cert: client.der().clone(),
            client_key_der: client_key.serialize_der(),
            client_cert_pem: client.pem(),
            client_key_pem: client_key.serialize_pem(),
            ca_der: ca_cert.der().clone(),
            ca_params,
            ca_key,
        }
    }

    /// The client's certificate and key as PEM files hold them.
    pub fn client_files(&self) -> (String, String) {
        (self.client_cert_pem.clone(), self.client_key_pem.clone())
    }

    /// A CRL from the CA revoking the given serials.
    pub fn crl(&self, serials: &[u64]) -> String {
        let params = rcgen::CertificateRevocationListParams {
            this_update: rcgen::date_time_ymd(2024, 1, 1),
            next_update: rcgen::date_time_ymd(2090, 1, 1),
            crl_number: rcgen::SerialNumber::from(1u64),
            issuing_distribution_point: None,
            revoked_certs: serials
                .iter()
                .map(|s| rcgen::RevokedCertParams {
                    serial_number: rcgen::SerialNumber::from(*s),
                    revocation_time: rcgen::date_time_ymd(2024, 1, 1),
                    reason_code: None,
                    invalidity_date: None,
                })
                .collect(),
            key_identifier_method: rcgen::KeyIdMethod::Sha256,
        };
        let issuer = self.ca_params.clone().self_signed(&self.ca_key).unwrap();
        params
            .signed_by(&issuer, &self.ca_key)
            .unwrap()
            .pem()
            .unwrap()
    }
}

pub fn server_config(
    pki: &Pki,
    wrap: ControlWrap,
    crl: Option<&str>,
    versions: openvpn::tls::TlsVersions,
) -> Arc<ServerConfig> {
    let files = openvpn::tls::TlsFiles {
        cert: pki.server_cert_pem.as_bytes(),
        key: pki.server_key_pem.as_bytes(),
        ca: pki.ca_pem.as_bytes(),
        crl: crl.map(str::as_bytes),
    };
    Arc::new(ServerConfig {
        tls: openvpn::tls::server_config(&files, versions).unwrap(),
        wrap: Arc::new(wrap),
        ciphers: vec![DataCipher::Aes256Gcm, DataCipher::Chacha20Poly1305],
        reneg: None,
        hand_window: Duration::from_secs(60),
        transition_window: Duration::from_secs(60),
        control_payload: 1100,
        options: "V4,dev-type tun,link-mtu 1549,tun-mtu 1500,proto UDPv4,cipher AES-256-GCM,auth [null-digest],keysize 256,key-method 2,tls-server".into(),
        tls_crypt_v2: None,
    })
}

/// The client's TLS configuration: trusts `ca` and shows `pki`'s client
/// certificate.
pub fn client_tls(
    pki: &Pki,
    trust: &CertificateDer<'static>,
    version: Option<&'static rustls::SupportedProtocolVersion>,
) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(trust.clone()).unwrap();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let versions: Vec<&'static rustls::SupportedProtocolVersion> = match version {
        Some(v) => vec![v],
        None => vec![&rustls::version::TLS13, &rustls::version::TLS12],
    };
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .unwrap()
        .with_root_certificates(roots)
        .with_client_auth_cert(
            vec![pki.client_cert.clone()],
            PrivateKeyDer::try_from(pki.client_key_der.clone()).unwrap(),
        )
        .unwrap();
    Arc::new(config)
}

struct ClientKey {
    id: KeyId,
    tls: rustls::ClientConnection,
    send: SendWindow,
    backlog: VecDeque<Vec<u8>>,
    recv: ReceiveWindow,
    acks: VecDeque<u32>,
    plain: Vec<u8>,
    ours: KeySource,
    sent_key_method: bool,
    peer_reset_seen: bool,
    done: bool,
}

pub struct TestClient {
    pub wrap: ControlWrap,
    tls: Arc<rustls::ClientConfig>,
    pub sid: SessionId,
    server_sid: Option<SessionId>,
    pids: PacketIdSender,
    keys: Vec<ClientKey>,
    next_key_id: KeyId,
    pub peer_info: String,
    pub ekm: bool,
    pub push_reply: Option<String>,
    /// Data keys by key id, as the client derived them.
    pub data_keys: Vec<(KeyId, DataKeys)>,
    pub cipher: DataCipher,
    pub closed_by_server: bool,
    /// With tls-crypt-v2: the wrapped key its V3 reset carries (`wrap` is then
    /// tls-crypt under the client's own key).
    pub wkc: Option<Vec<u8>>,
}

impl TestClient {
    pub fn new(wrap: ControlWrap, tls: Arc<rustls::ClientConfig>, peer_info: &str) -> TestClient {
        TestClient {
            wrap,
            tls,
            sid: SessionId([0xc1; 8]),
            server_sid: None,
            pids: PacketIdSender::new(1_000),
            keys: Vec::new(),
            next_key_id: KeyId::default(),
            peer_info: peer_info.into(),
            ekm: peer_info.contains("IV_PROTO=990") || peer_info.contains("IV_PROTO=14"),
            push_reply: None,
            data_keys: Vec::new(),
            cipher: DataCipher::Aes256Gcm,
            closed_by_server: false,
            wkc: None,
        }
    }

    fn new_key(&mut self, now: Instant) {
        let id = self.next_key_id;
        self.next_key_id = id.next();
        let tls = rustls::ClientConnection::new(
            self.tls.clone(),
            ServerName::try_from("server").unwrap(),
        )
        .unwrap();
        let mut send = SendWindow::new();
        let first = if id != KeyId::default() {
            Opcode::SoftResetV1
        } else if self.wkc.is_some() {
            Opcode::HardResetClientV3
        } else {
            Opcode::HardResetClientV2
        };
        send.push(first, vec![], now);
        let mut n = 0u8;
        self.keys.push(ClientKey {
            id,
            tls,
            send,
            backlog: VecDeque::new(),
            recv: ReceiveWindow::new(),
            acks: VecDeque::new(),
            plain: Vec::new(),
            ours: KeySource::random(true, &mut |b| {
                for x in b {
                    n = n.wrapping_add(13);
                    *x = n ^ id.get();
                }
            }),
            sent_key_method: false,
            peer_reset_seen: false,
            done: false,
        });
    }

    /// The first datagram: the hard reset.
    pub fn start(&mut self, now: Instant) -> Vec<Vec<u8>> {
        self.new_key(now);
        self.flush(now)
    }

    /// A client-initiated renegotiation.
    pub fn rekey(&mut self, now: Instant) -> Vec<Vec<u8>> {
        self.new_key(now);
        self.flush(now)
    }

    pub fn receive(&mut self, dgram: &[u8], now: Instant) -> Vec<Vec<u8>> {
        if Opcode::of(dgram[0]).unwrap().is_data() {
            return vec![];
        }
        let u = self
            .wrap
            .unwrap(dgram)
            .expect("the server's packets verify");
        let server_sid = *self.server_sid.get_or_insert(u.session_id);
        assert_eq!(
            u.session_id, server_sid,
            "the server changed its session id"
        );
        let body = Body::parse(u.opcode, &u.body).unwrap();
        if let Some(sid) = body.remote_session_id {
            assert_eq!(sid, self.sid);
        }
        if !self.keys.iter().any(|k| k.id == u.key_id) {
            assert_eq!(
                u.opcode,
                Opcode::SoftResetV1,
                "a new key id begins with a soft reset"
            );
            self.new_key(now);
        }
        let at = self.keys.iter().position(|k| k.id == u.key_id).unwrap();
        let ks = &mut self.keys[at];
        for id in body.acks.ids() {
            ks.send.ack(*id);
        }
        if let Some(id) = body.message_id
            && ks.recv.receive(id, u.opcode, body.payload).is_ok()
        {
            ks.acks.push_back(id);
        }
        while let Some((opcode, payload)) = self.keys[at].recv.deliver() {
            let ks = &mut self.keys[at];
            match opcode {
                Opcode::HardResetServerV2 | Opcode::SoftResetV1 => ks.peer_reset_seen = true,
                Opcode::ControlV1 => {
                    let mut rd = &payload[..];
                    while !rd.is_empty() {
                        ks.tls.read_tls(&mut rd).unwrap();
                        if ks.tls.process_new_packets().is_err() {
                            self.closed_by_server = true;
                            return vec![];
                        }
                    }
                    let mut buf = [0; 4096];
                    loop {
                        match ks.tls.reader().read(&mut buf) {
                            Ok(0) => {
                                self.closed_by_server = true;
                                break;
                            }
                            Ok(n) => ks.plain.extend_from_slice(&buf[..n]),
                            Err(_) => break,
                        }
                    }
                }
                other => panic!("unexpected reliable {other:?}"),
            }
        }
        self.take_plaintext(at);
        self.flush(now)
    }

    fn take_plaintext(&mut self, at: usize) {
        let ks = &mut self.keys[at];
        if !ks.done && !ks.plain.is_empty() {
            let Ok((theirs, used)) = KeyMethod2::parse(&ks.plain, false) else {
                return;
            };
            ks.plain.drain(..used);
            ks.done = true;
            let material = if self.ekm {
                let mut b = [0u8; KEY2_LEN];
                ks.tls
                    .export_keying_material(&mut b, EKM_LABEL, None)
                    .unwrap();
                Key2::from_bytes(b)
            } else {
                openvpn_prf_key2(&ks.ours, &theirs.source, self.sid, self.server_sid.unwrap())
            };
            let id = ks.id;
            self.data_keys
                .push((id, DataKeys::new(&material, self.cipher, Role::Client)));
        }
        let ks = &mut self.keys[at];
        while let Some(end) = ks.plain.iter().position(|&b| b == 0) {
            let m: Vec<u8> = ks.plain.drain(..=end).collect();
            let text = String::from_utf8(m[..end].to_vec()).unwrap();
            if let Some(cipher) = text.split(',').find_map(|o| o.strip_prefix("cipher ")) {
                self.cipher = DataCipher::from_name(cipher).unwrap();
                // Keys of the first key id are cut once the cipher is known.
                for (_, keys) in &mut self.data_keys {
                    keys.cipher = self.cipher;
                }
            }
            self.push_reply = Some(text);
        }
    }

    /// What the client sends now: TLS once the server's reset arrived, its
    /// key-method message once TLS is up, the push request after it.
    pub fn flush(&mut self, now: Instant) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for ks in &mut self.keys {
            if ks.peer_reset_seen && !ks.tls.is_handshaking() && !ks.sent_key_method {
                ks.sent_key_method = true;
                let m = KeyMethod2 {
                    source: ks.ours.clone(),
                    options: "V4,dev-type tun,link-mtu 1549,tun-mtu 1500,proto UDPv4,cipher AES-256-GCM,auth [null-digest],keysize 256,key-method 2,tls-client".into(),
                    peer_info: Some(self.peer_info.clone()),
                    ..KeyMethod2::default()
                };
                ks.tls.writer().write_all(&m.emit(true)).unwrap();
                if ks.id == KeyId::default() {
                    ks.tls.writer().write_all(b"PUSH_REQUEST\0").unwrap();
                }
            }
            if ks.peer_reset_seen {
                let mut records = Vec::new();
                while ks.tls.wants_write() {
                    ks.tls.write_tls(&mut records).unwrap();
                }
                for piece in records.chunks(1100) {
                    ks.backlog.push_back(piece.to_vec());
                }
            }
            while ks.send.has_room() {
                let Some(p) = ks.backlog.pop_front() else {
                    break;
                };
                ks.send.push(Opcode::ControlV1, p, now);
            }
            for t in ks.send.due(now) {
                let mut acks = Acks::default();
                while acks.ids().len() < 4 {
                    let Some(id) = ks.acks.pop_front() else { break };
                    acks.push(id);
                }
                let body = Body {
                    acks,
                    remote_session_id: self.server_sid.filter(|_| !acks.is_empty()),
                    message_id: Some(t.message_id),
                    payload: &t.payload,
                };
                let pid = self.pids.next(1_000);
                let mut packet =
                    self.wrap
                        .wrap(t.opcode, ks.id, self.sid, pid, &body.emit(t.opcode));
                if t.opcode == Opcode::HardResetClientV3 {
                    packet.extend_from_slice(self.wkc.as_deref().unwrap_or_default());
                }
                out.push(packet);
            }
            if !ks.acks.is_empty() {
                let acks = Acks::from_ids(&ks.acks.drain(..).take(8).collect::<Vec<_>>()).unwrap();
                let body = Body {
                    acks,
                    remote_session_id: self.server_sid,
                    message_id: None,
                    payload: &[],
                };
                let pid = self.pids.next(1_000);
                out.push(self.wrap.wrap(
                    Opcode::AckV1,
                    ks.id,
                    self.sid,
                    pid,
                    &body.emit(Opcode::AckV1),
                ));
            }
        }
        out
    }

    pub fn exit(&mut self, now: Instant) -> Vec<Vec<u8>> {
        let ks = self.keys.iter_mut().rev().find(|k| k.done).unwrap();
        ks.tls.writer().write_all(b"EXIT\0").unwrap();
        self.flush(now)
    }
}

/// A push reply for tests.
pub fn reply(cipher: DataCipher, ekm: bool) -> PushReply {
    PushReply {
        ifconfig: Some((Ipv4Addr::new(198, 19, 50, 2), 24)),
        route_gateway: Some(Ipv4Addr::new(198, 19, 50, 1)),
        ifconfig_ipv6: None,
        routes: vec![],
        routes_ipv6: vec![],
        peer_id: 0,
        ping: 10,
        ping_restart: 60,
        cipher,
        ekm,
        cc_exit: true,
        tun_mtu: None,
    }
}

/// Runs both ends until neither has had anything to say for 20 s of test
/// time, a second at a time. `lose` decides, for each datagram in turn
/// (numbered from 1), whether it is lost. Returns the server's events in
/// order; answers push requests as a gateway would.
pub fn converse(
    server: &mut ServerSession,
    client: &mut TestClient,
    mut to_server: Vec<Vec<u8>>,
    now: &mut Instant,
    lose: &mut dyn FnMut(usize) -> bool,
) -> Vec<Event> {
    let mut events = Vec::new();
    let mut n = 0;
    let mut quiet = 0;
    while quiet < 20 {
        let mut to_client = Vec::new();
        for d in std::mem::take(&mut to_server) {
            n += 1;
            if !lose(n) {
                let out = server
                    .receive(&d, *now)
                    .expect("the client's packets are accepted");
                take(out, server, &mut to_client, &mut events, *now);
            }
        }
        if to_client.is_empty() {
            *now += Duration::from_secs(1);
            quiet += 1;
            let out = server.tick(*now);
            take(out, server, &mut to_client, &mut events, *now);
            to_server.extend(client.flush(*now));
        }
        for d in to_client {
            n += 1;
            if !lose(n) {
                quiet = 0;
                to_server.extend(client.receive(&d, *now));
            }
        }
        if !to_server.is_empty() {
            quiet = 0;
        }
    }
    events
}

fn take(
    out: openvpn::server::Output,
    server: &mut ServerSession,
    to_client: &mut Vec<Vec<u8>>,
    events: &mut Vec<Event>,
    now: Instant,
) {
    to_client.extend(out.datagrams);
    for e in out.events {
        if let Event::PushRequested = e {
            let cipher = server.cipher().unwrap();
            to_client.extend(
                server
                    .push(&reply(cipher, server.uses_ekm()), now)
                    .datagrams,
            );
        }
        events.push(e);
    }
}
