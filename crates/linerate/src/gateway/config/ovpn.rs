//! `[[openvpn]]` servers: the port, the TLS identity and the CA clients must
//! chain to, the control channel's protection, the address pools, what is
//! pushed, and the timers. The certificate, key, CA and static key files are
//! read and checked here, so that a wrong file is named with its line.

use super::checks::Ctx;
use super::raw::RawOpenvpn;
use super::values::prefix;
use super::{OvpnConfig, OvpnProtection, Prefix};
use openvpn::static_key::{Direction, Key2};
use openvpn::tls::{TlsFiles, TlsVersions};
use openvpn::tls_auth::AuthDigest;
use openvpn::tls_crypt_v2::ServerKey;
use std::collections::HashMap;
use std::net::IpAddr;
use toml::Spanned;
use zeroize::Zeroizing;

pub const DEFAULT_PORT: u16 = 1194;
pub const DEFAULT_CIPHERS: &str = "AES-256-GCM:AES-128-GCM:CHACHA20-POLY1305";
pub const DEFAULT_RENEG_SEC: u32 = 3600;
pub const DEFAULT_KEEPALIVE: (u32, u32) = (10, 60);
pub const DEFAULT_MTU: u16 = 1500;

pub(super) fn server(
    cx: &mut Ctx<'_, '_>,
    raw: &RawOpenvpn,
    i: usize,
    udp_ports: &mut HashMap<u16, String>,
) -> Option<OvpnConfig> {
    let path = format!("openvpn[{i}]");
    let key = |k: &str| format!("{path}.{k}");
    let mut ok = true;
    let listen_port = match &raw.listen_port {
        Some(p) => cx.int::<u16>(p, 1..=65535, &key("listen_port")),
        None => Some(DEFAULT_PORT),
    };
    // The default port is refused where the name is, a given one where it is.
    let port_span = raw
        .listen_port
        .as_ref()
        .map_or(raw.name.span(), Spanned::span);
    if let Some(port) = listen_port
        && let Some(first) = udp_ports.get(&port)
    {
        cx.err(
            port_span,
            &key("listen_port"),
            format!("UDP port {port} is already {first}'s"),
        );
        ok = false;
    }
    if let Some(port) = listen_port {
        udp_ports.entry(port).or_insert_with(|| path.clone());
    }
    let mut files = Vec::new();
    let cert = cx.read_file(&raw.certificate, &key("certificate"));
    let private_key = cx
        .read_file(&raw.private_key, &key("private_key"))
        .map(|(path, bytes)| (path, Zeroizing::new(bytes)));
    let ca = cx.read_file(&raw.ca, &key("ca"));
    let crl = raw.crl.as_ref().map(|c| cx.read_file(c, &key("crl")));
    let versions = match raw
        .tls_version_min
        .as_ref()
        .map(|v| (v, v.get_ref().as_str()))
    {
        None | Some((_, "1.2")) => Some(TlsVersions::Both),
        Some((_, "1.3")) => Some(TlsVersions::Only13),
        Some((v, other)) => {
            cx.err(
                v.span(),
                &key("tls_version_min"),
                format!("{other:?} is not a TLS version this server takes (1.2 or 1.3)"),
            );
            None
        }
    };
    let tls = match (&cert, &private_key, &ca, &crl, versions) {
        (Some((_, c)), Some((_, k)), Some((_, a)), None | Some(Some(_)), Some(v)) => {
            let crl_bytes = crl
                .as_ref()
                .and_then(|c| c.as_ref())
                .map(|(_, b)| b.as_slice());
            let files_in = TlsFiles {
                cert: c,
                key: k,
                ca: a,
                crl: crl_bytes,
            };
            match openvpn::tls::server_config(&files_in, v) {
                Ok(t) => Some(t),
                Err(e) => {
                    cx.err(raw.certificate.span(), &key("certificate"), e);
                    None
                }
            }
        }
        _ => None,
    };
    for f in [&cert, &ca].into_iter().flatten() {
        files.push(Zeroizing::new(f.1.clone()));
    }
    if let Some((_, k)) = &private_key {
        files.push(k.clone());
    }
    if let Some(Some((_, b))) = &crl {
        files.push(Zeroizing::new(b.clone()));
    }
    let protection = protection(cx, raw, &key, &mut files);
    let pool4 = raw.pool.as_ref().map(|p| pool(cx, p, &key("pool"), false));
    let pool6 = raw.pool6.as_ref().map(|p| pool(cx, p, &key("pool6"), true));
    ok &= !matches!(pool4, Some(None)) && !matches!(pool6, Some(None));
    if raw.pool.is_none() && raw.pool6.is_none() {
        cx.err(
            raw.name.span(),
            &key("pool"),
            "missing: a pool of client addresses (pool = \"198.19.50.0/24\", or pool6)",
        );
        ok = false;
    }
    let mut push_routes = Vec::new();
    for (k, r) in raw
        .push_routes
        .iter()
        .flat_map(|l| l.get_ref().iter())
        .enumerate()
    {
        match prefix(r.get_ref()) {
            Ok(p) => push_routes.push(p),
            Err(e) => {
                cx.err(r.span(), &format!("{path}.push_routes[{k}]"), e);
                ok = false;
            }
        }
    }
    // The push reply must fit one control message a client reads.
    if let Some(list) = &raw.push_routes {
        let longest: usize = push_routes
            .iter()
            .map(|p| 12 + 2 * p.addr.to_string().len().max(15))
            .sum();
        if longest + 400 > ::openvpn::push::MAX_LEN {
            cx.err(
                list.span(),
                &key("push_routes"),
                format!(
                    "{} routes make a push reply longer than a client reads ({} bytes): push fewer, wider routes",
                    push_routes.len(),
                    ::openvpn::push::MAX_LEN
                ),
            );
            ok = false;
        }
    }
    let ciphers = match &raw.data_ciphers {
        Some(c) => match openvpn::cipher::parse_list(c.get_ref()) {
            Ok(list) => Some(list),
            Err(e) => {
                cx.err(c.span(), &key("data_ciphers"), e);
                None
            }
        },
        None => {
            Some(openvpn::cipher::parse_list(DEFAULT_CIPHERS).expect("the default list parses"))
        }
    };
    let reneg_sec = match &raw.reneg_sec {
        Some(r) => cx.int::<u32>(r, 0..=86400 * 7, &key("reneg_sec")),
        None => Some(DEFAULT_RENEG_SEC),
    };
    let keepalive = match &raw.keepalive {
        None => Some(DEFAULT_KEEPALIVE),
        Some(k) => match k.get_ref().as_slice() {
            [ping, restart] => {
                let p = cx.int::<u32>(ping, 1..=3600, &key("keepalive[0]"));
                let r = cx.int::<u32>(restart, 2..=86400, &key("keepalive[1]"));
                match (p, r) {
                    (Some(p), Some(r)) if r > p => Some((p, r)),
                    (Some(p), Some(r)) => {
                        cx.err(k.span(), &key("keepalive"), format!("the restart time ({r} s) must be longer than the ping interval ({p} s)"));
                        None
                    }
                    _ => None,
                }
            }
            _ => {
                cx.err(k.span(), &key("keepalive"), "two numbers: [ping seconds, ping-restart seconds], as OpenVPN's keepalive takes");
                None
            }
        },
    };
    let mtu = match &raw.mtu {
        Some(m) => cx.int::<u16>(
            m,
            576..=dataplane::gateway::LARGEST_PORT_MTU as i64,
            &key("mtu"),
        ),
        None => Some(DEFAULT_MTU),
    };
    let fingerprint = fingerprint(raw, &files);
    if !ok {
        return None;
    }
    let (ping, ping_restart) = keepalive?;
    Some(OvpnConfig {
        name: raw.name.get_ref().clone(),
        listen_port: listen_port?,
        tls: tls?,
        protection: protection?,
        pool: pool4.flatten(),
        pool6: pool6.flatten(),
        push_routes,
        ciphers: ciphers?,
        reneg_sec: reneg_sec?,
        ping,
        ping_restart,
        mtu: mtu?,
        fingerprint,
    })
}

fn protection(
    cx: &mut Ctx<'_, '_>,
    raw: &RawOpenvpn,
    key: &dyn Fn(&str) -> String,
    files: &mut Vec<Zeroizing<Vec<u8>>>,
) -> Option<OvpnProtection> {
    let static_key = |cx: &mut Ctx<'_, '_>,
                      v: &Spanned<String>,
                      name: &str,
                      files: &mut Vec<Zeroizing<Vec<u8>>>| {
        let (file, bytes) = cx.read_file(v, &key(name))?;
        let bytes = Zeroizing::new(bytes);
        files.push(bytes.clone());
        let text = Zeroizing::new(String::from_utf8_lossy(&bytes).into_owned());
        match Key2::parse_file(&text) {
            Ok(k) => Some(k),
            Err(_) => {
                cx.err(
                    v.span(),
                    &key(name),
                    format!(
                        "{}: not an OpenVPN static key (openvpn --genkey secret FILE makes one)",
                        file.display()
                    ),
                );
                None
            }
        }
    };
    let given: Vec<(&Spanned<String>, &str)> = [
        (&raw.tls_auth, "tls_auth"),
        (&raw.tls_crypt, "tls_crypt"),
        (&raw.tls_crypt_v2, "tls_crypt_v2"),
    ]
    .into_iter()
    .filter_map(|(v, name)| v.as_ref().map(|v| (v, name)))
    .collect();
    if let [(_, first), .., (v, name)] = given[..] {
        cx.err(
            v.span(),
            &key(name),
            format!("{first} is given too: a server protects its control channel one way"),
        );
        return None;
    }
    if let Some(v) = &raw.tls_crypt_v2 {
        if !no_tls_auth_keys(cx, raw, key) {
            return None;
        }
        let (file, bytes) = cx.read_file(v, &key("tls_crypt_v2"))?;
        let bytes = Zeroizing::new(bytes);
        files.push(bytes.clone());
        let text = Zeroizing::new(String::from_utf8_lossy(&bytes).into_owned());
        return match ServerKey::parse_file(&text) {
            Ok(k) => Some(OvpnProtection::CryptV2 {
                server_key: std::sync::Arc::new(k),
            }),
            Err(_) => {
                cx.err(
                    v.span(),
                    &key("tls_crypt_v2"),
                    format!(
                        "{}: not a tls-crypt-v2 server key (openvpn --genkey tls-crypt-v2-server FILE makes one)",
                        file.display()
                    ),
                );
                None
            }
        };
    }
    match (&raw.tls_auth, &raw.tls_crypt) {
        // Refused above: one protection at most.
        (Some(_), Some(_)) => None,
        (None, Some(c)) => {
            if let Some(d) = &raw.key_direction {
                cx.err(
                    d.span(),
                    &key("key_direction"),
                    "tls-crypt has no key direction (the roles fix it)",
                );
                return None;
            }
            Some(OvpnProtection::Crypt {
                key: static_key(cx, c, "tls_crypt", files)?,
            })
        }
        (Some(a), None) => {
            // Without a direction both ends use one key both ways, as
            // OpenVPN does.
            let direction = match raw.key_direction.as_ref() {
                None => Direction::Bidirectional,
                Some(d) => match d.get_ref() {
                    0 => Direction::Normal,
                    1 => Direction::Inverse,
                    n => {
                        cx.err(d.span(), &key("key_direction"), format!("{n} is not a key direction (0 on the server and 1 on clients, as OpenVPN writes them)"));
                        return None;
                    }
                },
            };
            let digest = match raw.auth.as_ref() {
                None => AuthDigest::Sha1,
                Some(d) => match AuthDigest::from_name(d.get_ref()) {
                    Some(x) => x,
                    None => {
                        cx.err(d.span(), &key("auth"), format!("{:?} is not a digest tls-auth takes (SHA1, SHA256, SHA384, SHA512)", d.get_ref()));
                        return None;
                    }
                },
            };
            Some(OvpnProtection::Auth {
                key: static_key(cx, a, "tls_auth", files)?,
                direction,
                digest,
            })
        }
        (None, None) => {
            if !no_tls_auth_keys(cx, raw, key) {
                return None;
            }
            Some(OvpnProtection::None)
        }
    }
}

/// Whether the table leaves out the keys only tls-auth takes (each one given is
/// said).
fn no_tls_auth_keys(cx: &mut Ctx<'_, '_>, raw: &RawOpenvpn, key: &dyn Fn(&str) -> String) -> bool {
    for (given, k) in [
        (
            raw.key_direction.as_ref().map(Spanned::span),
            "key_direction",
        ),
        (raw.auth.as_ref().map(Spanned::span), "auth"),
    ] {
        if let Some(span) = given {
            cx.err(span, &key(k), "only with tls_auth");
            return false;
        }
    }
    true
}

/// A pool of client addresses: a network with room for the server's address
/// and at least one client's.
fn pool(cx: &mut Ctx<'_, '_>, v: &Spanned<String>, key: &str, v6: bool) -> Option<Prefix> {
    let p = match prefix(v.get_ref()) {
        Ok(p) => p,
        Err(e) => {
            cx.err(v.span(), key, e);
            return None;
        }
    };
    let (family_ok, max_len) = if v6 {
        (p.addr.is_ipv6(), 124)
    } else {
        (p.addr.is_ipv4(), 30)
    };
    if !family_ok {
        cx.err(
            v.span(),
            key,
            if v6 {
                "an IPv6 prefix (pool is for IPv4)"
            } else {
                "an IPv4 prefix (pool6 is for IPv6)"
            },
        );
        return None;
    }
    if p.len > max_len {
        cx.err(
            v.span(),
            key,
            format!("/{} leaves no room for clients: at most /{max_len}", p.len),
        );
        return None;
    }
    Some(p)
}

/// A digest of everything the server is made of, files included, so that a
/// reload can tell an unchanged server from a changed one without keeping the
/// secrets twice.
fn fingerprint(raw: &RawOpenvpn, files: &[Zeroizing<Vec<u8>>]) -> [u8; 32] {
    let mut cx = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA256);
    let text = format!(
        "{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}",
        raw.name.get_ref(),
        raw.listen_port.as_ref().map(|v| *v.get_ref()),
        raw.key_direction.as_ref().map(|v| *v.get_ref()),
        raw.auth.as_ref().map(|v| v.get_ref()),
        raw.pool.as_ref().map(|v| v.get_ref()),
        raw.pool6.as_ref().map(|v| v.get_ref()),
        raw.push_routes.as_ref().map(|l| l
            .get_ref()
            .iter()
            .map(|r| r.get_ref().clone())
            .collect::<Vec<_>>()),
        raw.data_ciphers.as_ref().map(|v| v.get_ref()),
        raw.reneg_sec.as_ref().map(|v| *v.get_ref()),
        raw.keepalive.as_ref().map(|l| l
            .get_ref()
            .iter()
            .map(|r| *r.get_ref())
            .collect::<Vec<_>>()),
        raw.tls_version_min.as_ref().map(|v| v.get_ref()),
        // Which key the files are: the same file as tls_auth or as tls_crypt
        // is another server.
        (
            raw.tls_auth.is_some(),
            raw.tls_crypt.is_some(),
            raw.tls_crypt_v2.is_some()
        ),
        raw.mtu.as_ref().map(|v| *v.get_ref()),
    );
    cx.update(text.as_bytes());
    for f in files {
        cx.update(&(f.len() as u64).to_be_bytes());
        cx.update(f.as_slice());
    }
    cx.finish().as_ref().try_into().expect("32 bytes")
}

impl OvpnConfig {
    /// The server's address in a pool, and the first client address.
    pub fn server_addr(pool: Prefix) -> IpAddr {
        offset(pool.addr, 1)
    }
}

/// `addr` plus `n`.
pub fn offset(addr: IpAddr, n: u128) -> IpAddr {
    match addr {
        IpAddr::V4(a) => IpAddr::V4((u32::from(a).wrapping_add(n as u32)).into()),
        IpAddr::V6(a) => IpAddr::V6((u128::from(a).wrapping_add(n)).into()),
    }
}
