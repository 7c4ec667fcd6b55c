//! The cross-platform userspace API (wireguard.com/xplatform): `get=1` and `set=1`
//! requests of `key=value` lines ended by a blank line, answered with `errno=N`, where
//! N is 0 or a negated errno value (`errno=-22` for EINVAL), as the protocol and
//! wireguard-go write it and wg(8) reads it.
//! Pure text in, text out, applied to the protocol [`Device`] and to the outer
//! socket's settings through [`SocketSettings`].

use crypto::x25519::{PrivateKey, PublicKey};
use std::fmt::Write;
use std::net::SocketAddr;
use std::time::{Instant, UNIX_EPOCH};
use wireguard::{Device, PeerId, Prefix};

/// errno values the protocol answers with.
pub const EINVAL: i32 = libc::EINVAL;
pub const EPROTO: i32 = libc::EPROTO;
pub const EADDRINUSE: i32 = libc::EADDRINUSE;
pub const EIO: i32 = libc::EIO;

/// What the UAPI can change on the outer socket.
pub trait SocketSettings {
    fn listen_port(&self) -> u16;
    fn set_listen_port(&mut self, port: u16) -> Result<(), i32>;
    fn fwmark(&self) -> u32;
    fn set_fwmark(&mut self, mark: u32) -> Result<(), i32>;
}

/// Answers one request (its text without the final blank line).
pub fn handle(
    request: &str,
    device: &mut Device,
    socket: &mut dyn SocketSettings,
    now: Instant,
) -> String {
    let mut lines = request.lines();
    match lines.next() {
        Some("get=1") => {
            if lines.any(|l| !l.is_empty()) {
                return errno(EINVAL);
            }
            get(device, socket)
        }
        Some("set=1") => match set(lines, device, socket, now) {
            Ok(()) => errno(0),
            Err(e) => errno(e),
        },
        _ => errno(EINVAL),
    }
}

/// The reply that ends every answer: `errno=0`, or the negated error number.
pub fn errno(e: i32) -> String {
    format!("errno={}\n\n", -e.abs())
}

fn get(device: &Device, socket: &dyn SocketSettings) -> String {
    let mut out = String::new();
    if let Some(k) = device.private_key() {
        let _ = writeln!(out, "private_key={}", hex::encode(k.to_bytes()));
    }
    if socket.listen_port() != 0 {
        let _ = writeln!(out, "listen_port={}", socket.listen_port());
    }
    if socket.fwmark() != 0 {
        let _ = writeln!(out, "fwmark={}", socket.fwmark());
    }
    for id in device.peer_ids() {
        let Some(p) = device.peer_info(id) else {
            continue;
        };
        let _ = writeln!(out, "public_key={}", hex::encode(p.public_key.0));
        if p.preshared_key != [0; 32] {
            let _ = writeln!(out, "preshared_key={}", hex::encode(p.preshared_key));
        }
        let _ = writeln!(out, "protocol_version=1");
        if let Some(e) = p.endpoint {
            let _ = writeln!(out, "endpoint={e}");
        }
        let (sec, nsec) = p
            .last_handshake
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| (d.as_secs(), d.subsec_nanos()))
            .unwrap_or((0, 0));
        let _ = writeln!(out, "last_handshake_time_sec={sec}");
        let _ = writeln!(out, "last_handshake_time_nsec={nsec}");
        let _ = writeln!(out, "tx_bytes={}", p.tx_bytes);
        let _ = writeln!(out, "rx_bytes={}", p.rx_bytes);
        let _ = writeln!(
            out,
            "persistent_keepalive_interval={}",
            p.persistent_keepalive
        );
        for a in p.allowed_ips {
            let _ = writeln!(out, "allowed_ip={a}");
        }
    }
    out.push_str("errno=0\n\n");
    out
}

fn key32(v: &str) -> Result<[u8; 32], i32> {
    let mut k = [0u8; 32];
    hex::decode_to_slice(v, &mut k).map_err(|_| EINVAL)?;
    Ok(k)
}

fn boolean(v: &str) -> Result<bool, i32> {
    match v {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(EINVAL),
    }
}

/// The peer a `set` is working on. A new peer is created at its first key other than
/// `update_only` (or at the section's end), so `update_only=true` can still say
/// "only if it exists"; `remove=true` ends the peer and ignores its other keys.
enum Section {
    Interface,
    Peer {
        id: Option<PeerId>,
        key: PublicKey,
        create: bool,
    },
}

impl Section {
    fn peer(&mut self, device: &mut Device) -> Option<PeerId> {
        if let Section::Peer { id, key, create } = self
            && id.is_none()
            && *create
        {
            *create = false;
            // Our own key cannot be a peer: its keys are ignored, as the reference does.
            *id = device.add_peer(*key);
        }
        match self {
            Section::Peer { id, .. } => *id,
            Section::Interface => None,
        }
    }
}

fn set<'a>(
    lines: impl Iterator<Item = &'a str>,
    device: &mut Device,
    socket: &mut dyn SocketSettings,
    now: Instant,
) -> Result<(), i32> {
    let mut section = Section::Interface;
    for line in lines {
        if line.is_empty() {
            continue;
        }
        let (key, value) = line.split_once('=').ok_or(EINVAL)?;
        let in_peer = matches!(section, Section::Peer { .. });
        match key {
            "private_key" if !in_peer => {
                let k = key32(value)?;
                device.set_private_key((k != [0; 32]).then(|| PrivateKey::from_bytes(k)));
            }
            "listen_port" if !in_peer => {
                socket.set_listen_port(value.parse().map_err(|_| EINVAL)?)?;
            }
            "fwmark" if !in_peer => {
                let mark = if value.is_empty() {
                    0
                } else {
                    value.parse().map_err(|_| EINVAL)?
                };
                socket.set_fwmark(mark)?;
            }
            "replace_peers" if !in_peer => {
                if boolean(value)? {
                    device.remove_all_peers();
                }
            }
            "public_key" => {
                section.peer(device); // a bare public_key= line creates its peer
                let key = PublicKey(key32(value)?);
                section = Section::Peer {
                    id: device.peer_id(&key),
                    key,
                    create: true,
                };
            }
            "update_only" if in_peer => {
                if boolean(value)?
                    && let Section::Peer { create, .. } = &mut section
                {
                    *create = false;
                }
            }
            "remove" if in_peer => {
                if boolean(value)?
                    && let Section::Peer { id, create, .. } = &mut section
                {
                    *create = false;
                    if let Some(peer) = id.take() {
                        device.remove_peer(peer);
                    }
                }
            }
            "preshared_key" if in_peer => {
                let k = key32(value)?;
                if let Some(peer) = section.peer(device) {
                    device.set_preshared_key(peer, k);
                }
            }
            "endpoint" if in_peer => {
                let addr = parse_endpoint(value)?;
                if let Some(peer) = section.peer(device) {
                    device.set_endpoint(peer, addr);
                }
            }
            "persistent_keepalive_interval" if in_peer => {
                let secs: u16 = value.parse().map_err(|_| EINVAL)?;
                if let Some(peer) = section.peer(device) {
                    device.set_persistent_keepalive(peer, secs, now);
                }
            }
            "replace_allowed_ips" if in_peer => {
                if boolean(value)?
                    && let Some(peer) = section.peer(device)
                {
                    device.clear_allowed_ips(peer);
                }
            }
            "allowed_ip" if in_peer => {
                let (remove, cidr) = match value.strip_prefix('-') {
                    Some(rest) => (true, rest),
                    None => (false, value),
                };
                let prefix: Prefix = cidr.parse().map_err(|_| EINVAL)?;
                if let Some(peer) = section.peer(device) {
                    if remove {
                        device.remove_allowed_ip(peer, prefix);
                    } else {
                        device.add_allowed_ip(peer, prefix);
                    }
                }
            }
            "protocol_version" if in_peer => {
                if value != "1" {
                    return Err(EPROTO);
                }
                section.peer(device);
            }
            _ => return Err(EINVAL),
        }
    }
    section.peer(device);
    Ok(())
}

fn parse_endpoint(v: &str) -> Result<SocketAddr, i32> {
    v.parse::<SocketAddr>().map_err(|_| EINVAL)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crypto::KeyRegistry;
    use std::sync::Arc;
    use std::time::SystemTime;

    struct Sock {
        port: u16,
        mark: u32,
    }
    impl SocketSettings for Sock {
        fn listen_port(&self) -> u16 {
            self.port
        }
        fn set_listen_port(&mut self, port: u16) -> Result<(), i32> {
            if port == 1 {
                return Err(EADDRINUSE);
            }
            self.port = port;
            Ok(())
        }
        fn fwmark(&self) -> u32 {
            self.mark
        }
        fn set_fwmark(&mut self, mark: u32) -> Result<(), i32> {
            self.mark = mark;
            Ok(())
        }
    }

    fn setup() -> (Device, Sock, Instant) {
        let now = Instant::now();
        (
            Device::new(Arc::new(KeyRegistry::new(64)), now, SystemTime::now()),
            Sock { port: 0, mark: 0 },
            now,
        )
    }

    #[test]
    fn set_then_get_round_trips() {
        let (mut d, mut s, now) = setup();
        let sk = PrivateKey::generate();
        let peer = PrivateKey::generate().public_key();
        let req = format!(
            "set=1\nprivate_key={}\nlisten_port=51820\nfwmark=7\nreplace_peers=true\npublic_key={}\npreshared_key={}\nendpoint=[2001:2::2]:51820\npersistent_keepalive_interval=25\nreplace_allowed_ips=true\nallowed_ip=198.19.0.2/32\nallowed_ip=2001:2:1::/64\nallowed_ip=198.19.9.0/24\nallowed_ip=-198.19.9.0/24\nprotocol_version=1\n",
            hex::encode(sk.to_bytes()),
            hex::encode(peer.0),
            hex::encode([5u8; 32])
        );
        assert_eq!(handle(&req, &mut d, &mut s, now), "errno=0\n\n");
        let got = handle("get=1\n", &mut d, &mut s, now);
        for want in [
            format!("private_key={}\n", hex::encode(sk.to_bytes())),
            "listen_port=51820\n".into(),
            "fwmark=7\n".into(),
            format!("public_key={}\n", hex::encode(peer.0)),
            format!("preshared_key={}\n", hex::encode([5u8; 32])),
            "endpoint=[2001:2::2]:51820\n".into(),
            "persistent_keepalive_interval=25\n".into(),
            "allowed_ip=198.19.0.2/32\n".into(),
            "allowed_ip=2001:2:1::/64\n".into(),
            "last_handshake_time_sec=0\n".into(),
            "rx_bytes=0\n".into(),
        ] {
            assert!(got.contains(&want), "missing {want:?} in\n{got}");
        }
        assert!(!got.contains("198.19.9.0"), "removed with the - prefix");
        assert!(got.ends_with("errno=0\n\n"));
    }

    #[test]
    fn bad_input_answers_errno() {
        let (mut d, mut s, now) = setup();
        for (req, e) in [
            ("set=1\nprivate_key=zz\n", EINVAL),
            ("set=1\nlisten_port=99999\n", EINVAL),
            ("set=1\nlisten_port=1\n", EADDRINUSE),
            ("set=1\nendpoint=1.2.3.4:5\n", EINVAL),
            ("set=1\nbogus=1\n", EINVAL),
            ("set=1\nnoequals\n", EINVAL),
            ("frob=1\n", EINVAL),
            ("get=1\nextra=1\n", EINVAL),
            (
                &format!(
                    "set=1\npublic_key={}\nprotocol_version=2\n",
                    hex::encode([9u8; 32])
                ),
                EPROTO,
            ),
            (
                &format!(
                    "set=1\npublic_key={}\nallowed_ip=198.19.0.0/33\n",
                    hex::encode([9u8; 32])
                ),
                EINVAL,
            ),
            (
                &format!(
                    "set=1\npublic_key={}\nendpoint=nohost\n",
                    hex::encode([9u8; 32])
                ),
                EINVAL,
            ),
        ] {
            assert_eq!(
                handle(req, &mut d, &mut s, now),
                format!("errno=-{e}\n\n"),
                "{req:?}"
            );
        }
    }

    #[test]
    fn update_only_and_remove() {
        let (mut d, mut s, now) = setup();
        let pk = hex::encode([3u8; 32]);
        let r = handle(
            &format!("set=1\npublic_key={pk}\nupdate_only=true\nendpoint=198.18.0.9:1\n"),
            &mut d,
            &mut s,
            now,
        );
        assert_eq!(r, "errno=0\n\n");
        assert!(d.peer_ids().is_empty(), "update_only does not create");
        handle(
            &format!("set=1\npublic_key={pk}\nendpoint=198.18.0.9:1\n"),
            &mut d,
            &mut s,
            now,
        );
        assert_eq!(d.peer_ids().len(), 1);
        handle(
            &format!("set=1\npublic_key={pk}\nupdate_only=true\nendpoint=198.18.0.9:2\n"),
            &mut d,
            &mut s,
            now,
        );
        assert_eq!(
            d.peer_info(d.peer_ids()[0]).unwrap().endpoint,
            Some("198.18.0.9:2".parse().unwrap())
        );
        handle(
            &format!("set=1\npublic_key={pk}\nremove=true\n"),
            &mut d,
            &mut s,
            now,
        );
        assert!(d.peer_ids().is_empty());
    }
}
