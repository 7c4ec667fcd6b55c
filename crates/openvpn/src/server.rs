//! One client's control channel, at the server: the hard reset that opens it,
//! TLS carried by the reliability layer, the key-method 2 exchange that yields
//! data-channel keys, the push request, and renegotiations (soft resets) started
//! by either end, each a new TLS session under the next key id while the old key
//! serves as a lame duck until its transition window ends.
//!
//! Packets go in as bytes with the time and come out as datagrams and
//! [`Event`]s for the caller: data keys to install, a push request to answer, a
//! key to retire, the client's exit, or the session's end with its reason.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::control::{Acks, Body, SessionId};
use crate::data_keys::DataKeys;
use crate::key_method::{KeyMethod2, KeySource};
use crate::packet_id::{PacketIdSender, ReplayGuard};
use crate::peer_info::{PeerInfo, proto};
use crate::prf::{EKM_LABEL, openvpn_prf_key2};
use crate::push::{EXIT, PUSH_REQUEST, PushReply};
use crate::reliable::{ReceiveWindow, SendWindow};
use crate::static_key::{KEY2_LEN, Key2};
use crate::wrap::ControlWrap;
use crate::{DataCipher, KeyId, Opcode, Refusal, Role, TlsCrypt, cipher, tls, tls_crypt_v2};
use zeroize::Zeroizing;

/// Acknowledgements one control packet carries besides its message; the rest
/// go in bare acknowledgements (some servers refuse more than four).
const ACKS_PER_CONTROL: usize = 4;
/// The largest TLS plaintext a key state buffers before its key-method message
/// or a control message is complete; more is a misbehaving client.
const PLAINTEXT_MAX: usize = 64 * 1024;
/// The most bytes of control packets a key state keeps waiting for room in its
/// send window: a client that asks for more than it acknowledges is let go.
const BACKLOG_MAX: usize = 256 * 1024;

/// What every session of one server shares.
#[derive(Clone)]
pub struct ServerConfig {
    pub tls: Arc<rustls::ServerConfig>,
    pub wrap: Arc<ControlWrap>,
    /// The data ciphers offered, in order of preference.
    pub ciphers: Vec<DataCipher>,
    /// Renegotiate a key this long after it began (`reneg-sec`); `None`
    /// leaves renegotiation to the client.
    pub reneg: Option<Duration>,
    /// How long a key's TLS handshake and key exchange may take
    /// (`hand-window`).
    pub hand_window: Duration,
    /// How long an old key still opens packets after its successor began
    /// (`transition-window`).
    pub transition_window: Duration,
    /// Bytes of TLS records in one control packet, so that with its headers
    /// it stays within OpenVPN's default control packet size (`tls-mtu`).
    pub control_payload: usize,
    /// The options string sent in key-method 2, which clients compare with
    /// their own only to warn of differences.
    pub options: String,
    /// With tls-crypt-v2: the server key that unwraps each client's own
    /// tls-crypt key from its `P_CONTROL_HARD_RESET_CLIENT_V3`; the session then
    /// protects its control channel with that key instead of `wrap` (which is
    /// not used), and a V2 reset is refused.
    pub tls_crypt_v2: Option<Arc<tls_crypt_v2::ServerKey>>,
}

/// What a session asks of its caller.
#[derive(Clone)]
pub enum Event {
    /// The client's certificate verified and its key-method message arrived:
    /// who it is, what it runs, and the cipher chosen for it.
    Authenticated {
        common_name: String,
        peer_info: PeerInfo,
        cipher: DataCipher,
    },
    /// The client asked for its options; answer with [`ServerSession::push`].
    PushRequested,
    /// Data-channel keys for a key id: open packets with them now. Send with
    /// them once [`Event::SendWith`] says so.
    Keys { key_id: KeyId, keys: DataKeys },
    /// The client has the key: it acknowledged the message that gives it its
    /// half. Send with this key from now on (as OpenVPN does once a key is
    /// active; sooner, the client could not open what is sent).
    SendWith { key_id: KeyId },
    /// A key's transition window ended: packets under it are no longer opened.
    KeyRetired { key_id: KeyId },
    /// The client said it is leaving.
    Exit,
    /// The session ended; nothing more comes from it.
    Closed { reason: String },
}

/// Datagrams to send to the client and events for the caller.
#[derive(Default)]
pub struct Output {
    pub datagrams: Vec<Vec<u8>>,
    pub events: Vec<Event>,
}

enum Phase {
    /// TLS and the key exchange under way.
    Handshake,
    /// The newest key, since the given time.
    Active { since: Instant },
    /// Superseded; still opens packets until the given time.
    LameDuck { until: Instant },
}

/// One key id's control channel: its own TLS session and reliability windows.
struct KeyState {
    id: KeyId,
    tls: rustls::ServerConnection,
    send: SendWindow,
    /// Packets waiting for room in the send window.
    backlog: VecDeque<(Opcode, Vec<u8>)>,
    recv: ReceiveWindow,
    acks_owed: VecDeque<u32>,
    /// TLS plaintext read and not yet taken as messages.
    plain: Zeroizing<Vec<u8>>,
    ours: KeySource,
    key_method_done: bool,
    /// Whether [`Event::SendWith`] was given for this key.
    send_announced: bool,
    phase: Phase,
    started: Instant,
}

/// A key's age and state, for `show`.
#[derive(Clone, Debug)]
pub struct KeySummary {
    pub key_id: KeyId,
    pub state: &'static str,
    pub age: Duration,
}

/// One client's control channel.
pub struct ServerSession {
    config: Arc<ServerConfig>,
    local: SessionId,
    remote: SessionId,
    packet_ids: PacketIdSender,
    wall: u32,
    replay: ReplayGuard,
    keys: Vec<KeyState>,
    next_key_id: KeyId,
    cipher: Option<DataCipher>,
    ekm: bool,
    peer_info: Option<PeerInfo>,
    common_name: Option<String>,
    /// The SHA-256 of the client's certificate, from its first key: each
    /// renegotiation must show the same one.
    certificate: Option<[u8; 32]>,
    /// The time in the packet id of the hard reset that opened the session.
    reset_time: Option<u32>,
    closed: bool,
}

impl ServerSession {
    /// A session for a client's hard reset: `wall` is the wall clock in
    /// seconds (the protection's packet ids carry it), `random` fills our
    /// session id and key-method randoms. Anything but a well-formed,
    /// authentic client hard reset is refused.
    pub fn accept(
        config: Arc<ServerConfig>,
        packet: &[u8],
        now: Instant,
        wall: u32,
        random: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(ServerSession, Output), Refusal> {
        let (config, packet) = match &config.tls_crypt_v2 {
            Some(server_key) => {
                let (packet, wkc) = tls_crypt_v2::split_reset(packet)?;
                // The cheap check before the unwrapping.
                if Opcode::of(*packet.first().ok_or(Refusal::Truncated)?)?
                    != Opcode::HardResetClientV3
                {
                    return Err(Refusal::UnknownOpcode);
                }
                let client = server_key.unwrap_client_key(wkc)?;
                let own = ServerConfig {
                    wrap: Arc::new(ControlWrap::Crypt(TlsCrypt::new(&client.key, Role::Server))),
                    ..(*config).clone()
                };
                (Arc::new(own), packet)
            }
            None => (config, packet),
        };
        let u = config.wrap.unwrap(packet)?;
        if u.opcode != reset_opcode(&config) || u.key_id != KeyId::default() {
            return Err(Refusal::UnknownOpcode);
        }
        let body = Body::parse(u.opcode, &u.body)?;
        if body.message_id != Some(0) || !body.acks.is_empty() {
            return Err(Refusal::OutOfWindow);
        }
        let mut replay = ReplayGuard::default();
        if let Some(pid) = u.packet_id {
            replay.accept(pid)?;
        }
        let mut local = SessionId::default();
        random(&mut local.0);
        let mut session = ServerSession {
            config,
            local,
            remote: u.session_id,
            packet_ids: PacketIdSender::new(wall),
            wall,
            replay,
            keys: Vec::new(),
            next_key_id: KeyId::default(),
            cipher: None,
            ekm: false,
            peer_info: None,
            common_name: None,
            certificate: None,
            reset_time: u.packet_id.map(|p| p.time),
            closed: false,
        };
        let mut out = Output::default();
        session.new_key_state(now, random)?;
        let ks = &mut session.keys[0];
        // The reset's payload holds only tls-crypt-v2's early negotiation.
        ks.recv
            .receive(0, u.opcode, &[])
            .expect("id 0 is in an empty window");
        ks.recv.deliver();
        ks.acks_owed.push_back(0);
        session.flush(now, &mut out);
        Ok((session, out))
    }

    /// Takes a packet from the client. A refused packet changes nothing.
    pub fn receive(&mut self, packet: &[u8], now: Instant) -> Result<Output, Refusal> {
        let mut out = Output::default();
        if self.closed {
            return Ok(out);
        }
        let packet = match Opcode::of(*packet.first().ok_or(Refusal::Truncated)?)? {
            // A V3 reset again (retransmitted, or the client restarting): its
            // wrapped key is not part of the packet the client's key protects.
            Opcode::HardResetClientV3 if self.config.tls_crypt_v2.is_some() => {
                tls_crypt_v2::split_reset(packet)?.0
            }
            _ => packet,
        };
        let u = self.config.wrap.unwrap(packet)?;
        if u.session_id != self.remote {
            return Err(Refusal::WrongSession);
        }
        if let Some(pid) = u.packet_id {
            self.replay.check(pid)?;
        }
        let body = Body::parse(u.opcode, &u.body)?;
        if body.remote_session_id.is_some_and(|sid| sid != self.local) {
            return Err(Refusal::WrongSession);
        }
        let known = self.keys.iter().position(|k| k.id == u.key_id);
        let at = match (u.opcode, known) {
            (opcode, Some(0))
                if opcode == reset_opcode(&self.config) && u.key_id == KeyId::default() =>
            {
                0
            }
            (Opcode::ControlV1 | Opcode::AckV1 | Opcode::SoftResetV1, Some(at)) => at,
            // A soft reset for the next key id: the client renegotiates.
            (Opcode::SoftResetV1, None)
                if u.key_id == self.next_key_id && !self.renegotiating() =>
            {
                self.keys.len()
            }
            (Opcode::ControlV1 | Opcode::AckV1, None) => return Err(Refusal::UnknownKeyId),
            (Opcode::SoftResetV1, None) => return Err(Refusal::UnknownKeyId),
            _ => return Err(Refusal::UnknownOpcode),
        };
        match (body.message_id, self.keys.get(at)) {
            (Some(id), Some(ks)) => {
                ks.recv.check(id)?;
            }
            // A new key's first packet is its soft reset, message 0.
            (id, None) if id != Some(0) => return Err(Refusal::OutOfWindow),
            _ => {}
        }
        // Authentic and in the window: from here on the packet counts.
        if let Some(pid) = u.packet_id {
            self.replay.accept(pid)?;
        }
        if at == self.keys.len() {
            self.new_key_state(now, &mut |b| rand_fill(b))?;
        }
        let ks = &mut self.keys[at];
        for &id in body.acks.ids() {
            ks.send.ack(id);
        }
        if let Some(id) = body.message_id {
            ks.recv.receive(id, u.opcode, body.payload)?;
            ks.acks_owed.push_back(id);
        }
        while let Some((opcode, payload)) = self.keys[at].recv.deliver() {
            if opcode == Opcode::ControlV1
                && let Err(reason) = self.take_tls(at, &payload, now, &mut out)
            {
                self.close(reason, now, &mut out);
                return Ok(out);
            }
        }
        self.flush(now, &mut out);
        Ok(out)
    }

    /// Time passing: retransmissions, deadlines, retiring lame ducks, and the
    /// server's own renegotiation.
    pub fn tick(&mut self, now: Instant) -> Output {
        let mut out = Output::default();
        if self.closed {
            return out;
        }
        if let Some(ks) = self.keys.iter().find(|k| {
            matches!(k.phase, Phase::Handshake) && now >= k.started + self.config.hand_window
        }) {
            let reason = format!(
                "key {} was not negotiated within {} s (hand-window)",
                ks.id.get(),
                self.config.hand_window.as_secs()
            );
            self.close(reason, now, &mut out);
            return out;
        }
        self.keys.retain(|k| match k.phase {
            Phase::LameDuck { until } if now >= until => {
                out.events.push(Event::KeyRetired { key_id: k.id });
                false
            }
            _ => true,
        });
        if self.rekey_due().is_some_and(|due| now >= due) {
            self.start_rekey(now, &mut out);
        }
        self.flush(now, &mut out);
        out
    }

    /// When [`ServerSession::tick`] has something to do.
    pub fn next_wakeup(&self) -> Option<Instant> {
        if self.closed {
            return None;
        }
        let keys = self.keys.iter().flat_map(|k| {
            let deadline = match k.phase {
                Phase::Handshake => Some(k.started + self.config.hand_window),
                Phase::LameDuck { until } => Some(until),
                Phase::Active { .. } => None,
            };
            k.send.next_due().into_iter().chain(deadline)
        });
        keys.chain(self.rekey_due()).min()
    }

    /// Starts a renegotiation now, as the data plane asks when a key's byte
    /// or packet budget or its packet ids run out. Does nothing while one is
    /// under way.
    pub fn renegotiate(&mut self, now: Instant) -> Output {
        let mut out = Output::default();
        if !self.closed {
            self.start_rekey(now, &mut out);
            self.flush(now, &mut out);
        }
        out
    }

    /// Answers the client's push request.
    pub fn push(&mut self, reply: &PushReply, now: Instant) -> Output {
        let mut out = Output::default();
        if self.closed {
            return out;
        }
        if let Some(at) = self.newest_done() {
            let mut text = reply.text().into_bytes();
            text.push(0);
            let ks = &mut self.keys[at];
            if let Err(e) = ks.tls.writer().write_all(&text) {
                self.close(format!("TLS refused the push reply: {e}"), now, &mut out);
                return out;
            }
            self.flush(now, &mut out);
        }
        out
    }

    /// Refuses the client after its authentication (no address left for it,
    /// say): `AUTH_FAILED` with the reason, which a client takes as final
    /// rather than trying again at once, then the end of the session.
    pub fn refuse(&mut self, reason: &str, now: Instant) -> Output {
        let mut out = Output::default();
        if self.closed {
            return out;
        }
        if let Some(at) = self.newest_done() {
            let message = format!("AUTH_FAILED,{reason}\0");
            let _ = self.keys[at].tls.writer().write_all(message.as_bytes());
        }
        self.close(reason.to_owned(), now, &mut out);
        out
    }

    /// Ends the session, telling the client with a TLS close.
    pub fn shutdown(&mut self, reason: &str, now: Instant) -> Output {
        let mut out = Output::default();
        if !self.closed {
            self.close(reason.to_owned(), now, &mut out);
        }
        out
    }

    pub fn local_session_id(&self) -> SessionId {
        self.local
    }

    pub fn remote_session_id(&self) -> SessionId {
        self.remote
    }

    pub fn common_name(&self) -> Option<&str> {
        self.common_name.as_deref()
    }

    pub fn cipher(&self) -> Option<DataCipher> {
        self.cipher
    }

    pub fn peer_info(&self) -> Option<&PeerInfo> {
        self.peer_info.as_ref()
    }

    /// Whether data keys come from the TLS exporter (else OpenVPN's PRF).
    pub fn uses_ekm(&self) -> bool {
        self.ekm
    }

    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Takes a server's new settings for the rest of the session: the TLS
    /// configuration (certificate, CA, CRL) of its next renegotiation, the
    /// renegotiation period and the windows. The control channel's protection
    /// stays the one the client connected with (it holds that key), and the
    /// cipher chosen stays too.
    pub fn reconfigure(&mut self, config: &ServerConfig) {
        self.config = Arc::new(ServerConfig {
            wrap: self.config.wrap.clone(),
            tls_crypt_v2: self.config.tls_crypt_v2.clone(),
            ..config.clone()
        });
    }

    /// The time in the packet id of the hard reset that opened the session
    /// (none without control-channel protection): a client that restarts sends
    /// a later one, and an older or equal one is a replay.
    pub fn reset_time(&self) -> Option<u32> {
        self.reset_time
    }

    /// Each key's id, state and age.
    pub fn key_summaries(&self, now: Instant) -> Vec<KeySummary> {
        self.keys
            .iter()
            .map(|k| KeySummary {
                key_id: k.id,
                state: match k.phase {
                    Phase::Handshake => "negotiating",
                    Phase::Active { .. } => "active",
                    Phase::LameDuck { .. } => "lame-duck",
                },
                age: now.saturating_duration_since(k.started),
            })
            .collect()
    }

    /// Whether the client brought its own control-channel key (tls-crypt-v2).
    pub fn has_own_key(&self) -> bool {
        self.config.tls_crypt_v2.is_some()
    }

    /// Whether a key is being negotiated (the first, or a renegotiation): a
    /// renegotiation asked for meanwhile is not started.
    pub fn renegotiating(&self) -> bool {
        self.keys
            .iter()
            .any(|k| matches!(k.phase, Phase::Handshake))
    }

    fn rekey_due(&self) -> Option<Instant> {
        let reneg = self.config.reneg?;
        if self.renegotiating() {
            return None;
        }
        self.keys.iter().find_map(|k| match k.phase {
            Phase::Active { since } => Some(since + reneg),
            _ => None,
        })
    }

    fn start_rekey(&mut self, now: Instant, out: &mut Output) {
        if self.renegotiating() || self.keys.is_empty() {
            return;
        }
        if let Err(reason) = self.new_key_state(now, &mut |b| rand_fill(b)) {
            self.close(format!("renegotiation could not start: {reason}"), now, out);
        }
    }

    /// The newest key whose exchange is done: the one push replies and
    /// control messages go out on.
    fn newest_done(&self) -> Option<usize> {
        self.keys.iter().rposition(|k| k.key_method_done)
    }

    /// A key state for the next key id, with its first packet (our hard reset
    /// for key 0, a soft reset after) queued.
    fn new_key_state(
        &mut self,
        now: Instant,
        random: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), Refusal> {
        let tls = rustls::ServerConnection::new(self.config.tls.clone())
            .map_err(|_| Refusal::BadKeyMethod)?;
        let id = self.next_key_id;
        self.next_key_id = id.next();
        let first = if id == KeyId::default() {
            Opcode::HardResetServerV2
        } else {
            Opcode::SoftResetV1
        };
        let mut ks = KeyState {
            id,
            tls,
            send: SendWindow::new(),
            backlog: VecDeque::new(),
            recv: ReceiveWindow::new(),
            acks_owed: VecDeque::new(),
            plain: Zeroizing::new(Vec::new()),
            ours: KeySource::random(false, random),
            key_method_done: false,
            send_announced: false,
            phase: Phase::Handshake,
            started: now,
        };
        ks.send
            .push(first, Vec::new(), now)
            .expect("an empty window has room");
        self.keys.push(ks);
        Ok(())
    }

    /// Feeds TLS records to a key's TLS session and handles the plaintext that
    /// results. An error is the session's end, with its reason.
    fn take_tls(
        &mut self,
        at: usize,
        records: &[u8],
        now: Instant,
        out: &mut Output,
    ) -> Result<(), String> {
        let mut rd = records;
        while !rd.is_empty() {
            let tls = &mut self.keys[at].tls;
            tls.read_tls(&mut rd)
                .map_err(|e| format!("TLS records could not be read: {e}"))?;
            if let Err(e) = tls.process_new_packets() {
                // The alert that says why goes out before the session ends.
                self.flush(now, out);
                return Err(format!("TLS handshake failed: {e}"));
            }
        }
        let ks = &mut self.keys[at];
        let mut buf = [0u8; 4096];
        loop {
            match ks.tls.reader().read(&mut buf) {
                Ok(0) => return Err("the client closed TLS".into()),
                Ok(n) => {
                    if ks.plain.len() + n > PLAINTEXT_MAX {
                        return Err(
                            "the client sent more TLS data than a control message holds".into()
                        );
                    }
                    ks.plain.extend_from_slice(&buf[..n]);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(format!("TLS data could not be read: {e}")),
            }
        }
        buf.fill(0);
        self.take_plaintext(at, now, out)
    }

    fn take_plaintext(&mut self, at: usize, now: Instant, out: &mut Output) -> Result<(), String> {
        if !self.keys[at].key_method_done {
            if self.keys[at].plain.is_empty() {
                return Ok(());
            }
            let (theirs, used) = match KeyMethod2::parse(&self.keys[at].plain, true) {
                Ok(parsed) => parsed,
                // The rest of the message is in a later record.
                Err(Refusal::Truncated) => return Ok(()),
                Err(e) => return Err(format!("the client's key-method message was refused: {e}")),
            };
            self.keys[at].plain.drain(..used);
            self.key_exchange(at, &theirs, now, out)?;
        }
        let ks = &mut self.keys[at];
        while let Some(end) = ks.plain.iter().position(|&b| b == 0) {
            let message = Zeroizing::new(ks.plain.drain(..=end).collect::<Vec<u8>>());
            match std::str::from_utf8(&message[..end]) {
                Ok(PUSH_REQUEST) => out.events.push(Event::PushRequested),
                Ok(m) if m == EXIT || m.starts_with("EXIT,") => out.events.push(Event::Exit),
                // Other messages (INFO, ACC, CR_RESPONSE) ask for features
                // not served; OpenVPN ignores unknown ones too.
                _ => {}
            }
        }
        Ok(())
    }

    /// The client's key-method message arrived: authenticate, choose the
    /// cipher (first key only), answer with ours, and derive the data keys.
    fn key_exchange(
        &mut self,
        at: usize,
        theirs: &KeyMethod2,
        now: Instant,
        out: &mut Output,
    ) -> Result<(), String> {
        let first = self.cipher.is_none();
        if first {
            let peer = PeerInfo::new(theirs.peer_info.as_deref().unwrap_or(""));
            let remote_cipher = option_value(&theirs.options, "cipher");
            let chosen = cipher::choose(&self.config.ciphers, &peer, remote_cipher)
                .ok_or_else(|| {
                    format!(
                        "the client offers no cipher this server serves (it offers {}; this server serves {})",
                        peer.get("IV_CIPHERS").or(remote_cipher).unwrap_or("none"),
                        self.config.ciphers.iter().map(|c| c.name()).collect::<Vec<_>>().join(":")
                    )
                })?;
            if !peer.has_proto(proto::DATA_V2) {
                return Err(
                    "the client does not take P_DATA_V2 with peer-ids (OpenVPN 2.3 or older)"
                        .into(),
                );
            }
            let der = self.keys[at]
                .tls
                .peer_certificates()
                .and_then(|c| c.first())
                .ok_or("the client sent no certificate")?;
            let cn = tls::common_name(der).unwrap_or_else(|| "(no common name)".into());
            self.certificate = Some(certificate_digest(der));
            self.ekm = peer.has_proto(proto::TLS_KEY_EXPORT);
            self.cipher = Some(chosen);
            self.common_name = Some(cn.clone());
            self.peer_info = Some(peer.clone());
            out.events.push(Event::Authenticated {
                common_name: cn,
                peer_info: peer,
                cipher: chosen,
            });
        }
        if !first {
            // A renegotiation is the same client: the same certificate.
            let same = self.keys[at]
                .tls
                .peer_certificates()
                .and_then(|c| c.first())
                .is_some_and(|der| Some(certificate_digest(der)) == self.certificate);
            if !same {
                return Err("the client renegotiated with another certificate".into());
            }
        }
        let Some(cipher) = self.cipher else {
            return Err("no cipher was chosen".into());
        };
        let ks = &mut self.keys[at];
        let ours = KeyMethod2 {
            source: ks.ours.clone(),
            options: self.config.options.clone(),
            ..KeyMethod2::default()
        };
        ks.tls
            .writer()
            .write_all(&ours.emit(false))
            .map_err(|e| format!("TLS refused our key-method message: {e}"))?;
        let material = if self.ekm {
            let mut bytes = [0u8; KEY2_LEN];
            ks.tls
                .export_keying_material(&mut bytes, EKM_LABEL, None)
                .map_err(|e| format!("the TLS key exporter failed: {e}"))?;
            let key = Key2::from_bytes(bytes);
            zeroize::Zeroize::zeroize(&mut bytes);
            key
        } else {
            openvpn_prf_key2(&theirs.source, &ks.ours, self.remote, self.local)
        };
        ks.key_method_done = true;
        ks.phase = Phase::Active { since: now };
        let key_id = ks.id;
        // One lame duck at most, as OpenVPN keeps: the one before it is due
        // to retire now (the next tick retires it).
        for other in &mut self.keys[..at] {
            other.phase = match other.phase {
                Phase::Active { .. } => Phase::LameDuck {
                    until: now + self.config.transition_window,
                },
                Phase::LameDuck { .. } => Phase::LameDuck { until: now },
                Phase::Handshake => Phase::Handshake,
            };
        }
        out.events.push(Event::Keys {
            key_id,
            keys: DataKeys::new(&material, cipher, Role::Server),
        });
        Ok(())
    }

    fn close(&mut self, reason: String, now: Instant, out: &mut Output) {
        for ks in &mut self.keys {
            // A TLS session that never finished its handshake has nothing to
            // close; its alert, if any, was sent when it failed.
            if !ks.tls.is_handshaking() {
                ks.tls.send_close_notify();
            }
        }
        self.flush(now, out);
        self.closed = true;
        out.events.push(Event::Closed { reason });
    }

    /// Turns what each key state has to say into datagrams: TLS records into
    /// control packets, the packets due in the send window, and the
    /// acknowledgements owed (with a message where there is one, else bare).
    fn flush(&mut self, now: Instant, out: &mut Output) {
        let chunk = self.config.control_payload.max(64);
        let mut overflow = false;
        for ks in &mut self.keys {
            let mut records = Vec::new();
            while ks.tls.wants_write() {
                if ks.tls.write_tls(&mut records).is_err() {
                    break;
                }
            }
            for piece in records.chunks(chunk) {
                ks.backlog.push_back((Opcode::ControlV1, piece.to_vec()));
            }
            let waiting: usize = ks.backlog.iter().map(|(_, p)| p.len()).sum();
            if waiting > BACKLOG_MAX {
                overflow = true;
            }
            while ks.send.has_room() {
                let Some((opcode, payload)) = ks.backlog.pop_front() else {
                    break;
                };
                ks.send.push(opcode, payload, now);
            }
            for t in ks.send.due(now) {
                let mut acks = Acks::default();
                while acks.ids().len() < ACKS_PER_CONTROL {
                    let Some(id) = ks.acks_owed.pop_front() else {
                        break;
                    };
                    acks.push(id);
                }
                let body = Body {
                    acks,
                    remote_session_id: Some(self.remote),
                    message_id: Some(t.message_id),
                    payload: &t.payload,
                };
                let pid = self.packet_ids.next(self.wall);
                out.datagrams.push(self.config.wrap.wrap(
                    t.opcode,
                    ks.id,
                    self.local,
                    pid,
                    &body.emit(t.opcode),
                ));
            }
            while !ks.acks_owed.is_empty() {
                let mut acks = Acks::default();
                while let Some(&id) = ks.acks_owed.front() {
                    if !acks.push(id) {
                        break;
                    }
                    ks.acks_owed.pop_front();
                }
                let body = Body {
                    acks,
                    remote_session_id: Some(self.remote),
                    message_id: None,
                    payload: &[],
                };
                let pid = self.packet_ids.next(self.wall);
                out.datagrams.push(self.config.wrap.wrap(
                    Opcode::AckV1,
                    ks.id,
                    self.local,
                    pid,
                    &body.emit(Opcode::AckV1),
                ));
            }
            // Everything of ours acknowledged, our key-method message included:
            // the client has the key.
            if ks.key_method_done
                && !ks.send_announced
                && ks.send.is_empty()
                && ks.backlog.is_empty()
                && !ks.tls.wants_write()
            {
                ks.send_announced = true;
                out.events.push(Event::SendWith { key_id: ks.id });
            }
        }
        if overflow && !self.closed {
            self.closed = true;
            out.events.push(Event::Closed {
                reason: format!(
                    "the client left more than {} KiB of control messages unacknowledged",
                    BACKLOG_MAX / 1024
                ),
            });
        }
    }
}

/// The value of `name` in an options string (`V4,dev-type tun,cipher X,...`).
fn option_value<'a>(options: &'a str, name: &str) -> Option<&'a str> {
    options.split(',').find_map(|o| {
        let (k, v) = o.split_once(' ')?;
        (k == name).then_some(v)
    })
}

/// The hard reset a client of `config` opens with: V3 (carrying its wrapped
/// key) under tls-crypt-v2, V2 otherwise.
fn reset_opcode(config: &ServerConfig) -> Opcode {
    if config.tls_crypt_v2.is_some() {
        Opcode::HardResetClientV3
    } else {
        Opcode::HardResetClientV2
    }
}

/// The SHA-256 of a DER certificate.
fn certificate_digest(der: &[u8]) -> [u8; 32] {
    let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, der);
    d.as_ref().try_into().expect("32 bytes")
}

/// Random bytes for key states made after the first (renegotiations).
fn rand_fill(buf: &mut [u8]) {
    aws_lc_rs::rand::fill(buf).expect("the system's random source works");
}
