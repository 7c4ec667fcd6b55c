//! `[[esp]]` tables: an ESP tunnel interface (addresses, encapsulation, traffic
//! selectors, MTU) and its manual SAs, `[esp.outbound]` and `[[esp.inbound]]` (SPI,
//! algorithm, key file, ESN, replay window, lifetimes).
//!
//! A key file holds the SA's key material in hex, key then salt, as `ip xfrm` and
//! strongSwan's manual keys write it (an optional `0x`, whitespace ignored).

use super::checks::Ctx;
use super::ike::ike;
use super::l2::{Underlay, endpoints, local_endpoint};
use super::raw::{RawEsp, RawSa};
use super::values::prefix;
use super::{EspConfig, Prefix, SaConfig};
use crate::keyfile::read_hex_key_file;
use ipsec::{EspAlgorithm, Lifetime, MAX_WINDOW};
use std::net::IpAddr;
use std::ops::RangeInclusive;
use toml::Spanned;

const UDP_PORT: RangeInclusive<i64> = 1..=65535;
const SPI: RangeInclusive<i64> = 256..=0xffff_ffff;
const LIFETIME: RangeInclusive<i64> = 1..=i64::MAX;
/// The least inner MTU worth carrying: IPv6's minimum link MTU (RFC 8200), which
/// also covers IPv4's 68.
const MIN_INNER_MTU: u16 = 1280;
/// What ESP adds to an inner packet at most under `alg`: header, IV, the longest
/// padding, the trailer and the ICV.
fn esp_overhead(alg: EspAlgorithm) -> u16 {
    (wire::esp::HEADER_LEN + alg.iv_len() + alg.pad_align() - 1
        + wire::esp::TRAILER_LEN
        + alg.icv_len()) as u16
}

/// Outer headers and ESP's own, for a tunnel to `remote` sealing with `alg`, or
/// with whichever transform adds the most when the file names none (its SAs come
/// at run time).
fn overhead(remote: IpAddr, udp: bool, alg: Option<EspAlgorithm>) -> u16 {
    let ip = if remote.is_ipv4() { 20 } else { 40 };
    let esp = match alg {
        Some(a) => esp_overhead(a),
        None => EspAlgorithm::ALL
            .into_iter()
            .map(esp_overhead)
            .max()
            .unwrap_or(0),
    };
    ip + if udp { 8 } else { 0 } + esp
}

/// Traffic selectors as written, or everything of both families.
fn selectors(
    cx: &mut Ctx<'_, '_>,
    list: Option<&Spanned<Vec<Spanned<String>>>>,
    key: &str,
) -> Option<Vec<Prefix>> {
    let Some(list) = list else {
        return Some(vec![
            "0.0.0.0/0".parse().expect("a prefix"),
            "::/0".parse().expect("a prefix"),
        ]);
    };
    if list.get_ref().is_empty() {
        cx.err(
            list.span(),
            key,
            "empty: leave it out for every address of both families",
        );
        return None;
    }
    let mut ok = true;
    let mut out = Vec::new();
    for (k, p) in list.get_ref().iter().enumerate() {
        match prefix(p.get_ref()) {
            Ok(p) => out.push(p),
            Err(e) => {
                cx.err(p.span(), &format!("{key}[{k}]"), e);
                ok = false;
            }
        }
    }
    ok.then_some(out)
}

fn sa(cx: &mut Ctx<'_, '_>, s: &RawSa, path: &str, inbound: bool) -> Option<SaConfig> {
    let mut ok = true;
    let spi = cx.int::<u32>(&s.spi, SPI, &format!("{path}.spi"));
    let alg_key = format!("{path}.algorithm");
    let alg = EspAlgorithm::from_name(s.algorithm.get_ref());
    if alg.is_none() {
        let names: Vec<&str> = EspAlgorithm::ALL.iter().map(|a| a.name()).collect();
        cx.err(
            s.algorithm.span(),
            &alg_key,
            format!(
                "{:?} is not an algorithm served (one of {})",
                s.algorithm.get_ref(),
                names.join(", ")
            ),
        );
    }
    let esn = s.esn.as_ref().is_some_and(|e| *e.get_ref());
    let mut replay_window = ipsec::replay::DEFAULT_WINDOW;
    if let Some(w) = &s.replay_window {
        let key = format!("{path}.replay_window");
        if !inbound {
            cx.err(w.span(), &key, "the replay window is an inbound SA's");
            ok = false;
        } else {
            match cx.int::<u32>(w, 0..=i64::from(MAX_WINDOW), &key) {
                Some(0) if esn => {
                    cx.err(
                        w.span(),
                        &key,
                        "0 turns the check off, which ESN cannot do without (the high half of each sequence number is inferred from the window)",
                    );
                    ok = false;
                }
                Some(n) if n != 0 && n < 32 => {
                    cx.err(
                        w.span(),
                        &key,
                        format!("{n} is below 32 (0 turns the check off)"),
                    );
                    ok = false;
                }
                Some(n) => replay_window = n,
                None => ok = false,
            }
        }
    }
    let mut lifetime = Lifetime::default();
    if let Some(b) = &s.lifetime_bytes {
        lifetime.bytes = cx.int::<u64>(b, LIFETIME, &format!("{path}.lifetime_bytes"));
        ok &= lifetime.bytes.is_some();
    }
    if let Some(p) = &s.lifetime_packets {
        lifetime.packets = cx.int::<u64>(p, LIFETIME, &format!("{path}.lifetime_packets"));
        ok &= lifetime.packets.is_some();
    }
    let key_key = format!("{path}.key_file");
    let mut keymat = None;
    if let Some(alg) = alg {
        if s.key_file.get_ref().is_empty() {
            cx.err(s.key_file.span(), &key_key, "empty path");
        } else {
            let file = cx.base.join(s.key_file.get_ref());
            match read_hex_key_file(&file, alg.keymat_len()) {
                Ok(k) => keymat = Some((file, k)),
                Err(e) => {
                    let what = if alg.is_chained() {
                        format!(
                            "{} bytes of cipher key and {} of HMAC key",
                            alg.aead().cipher_key_len(),
                            alg.aead().auth_key_len()
                        )
                    } else {
                        format!("{} bytes of key and 4 of salt", alg.key_len())
                    };
                    cx.err(s.key_file.span(), &key_key, format!("{e} ({alg}: {what})"))
                }
            }
        }
    }
    let (spi, alg, (key_file, keymat)) = (spi?, alg?, keymat?);
    ok.then_some(SaConfig {
        spi,
        algorithm: alg,
        key_file,
        keymat,
        esn,
        replay_window,
        lifetime,
    })
}

/// `remote = "any"`: a responder's peer from wherever it comes.
pub const ANY_PEER: &str = "any";

/// The unspecified address of `a`'s family: a tunnel's remote before its peer is
/// known.
fn unspecified_like(a: IpAddr) -> IpAddr {
    match a {
        IpAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
    }
}

pub(super) fn esp(
    cx: &mut Ctx<'_, '_>,
    e: &RawEsp,
    i: usize,
    under: &Underlay<'_>,
    earlier: &[EspConfig],
) -> Option<EspConfig> {
    let path = format!("esp[{i}]");
    let mut ok = true;
    let remote_key = format!("{path}.remote");
    // A responder may take its peer from wherever it comes (behind a NAT whose
    // address is not known, or changes): the tunnel's remote is then the
    // unspecified address until the key exchange brings a child SA.
    let any_peer = e.remote.get_ref() == ANY_PEER;
    let (local, remote) = if any_peer {
        let local = local_endpoint(cx, &e.local, &path, under);
        let starts = e.ike.as_ref().and_then(|k| k.start_action.as_ref());
        if e.ike.is_none() || starts.is_some_and(|s| s.get_ref() == "start") {
            cx.err(
                e.remote.span(),
                &remote_key,
                "\"any\" is for a tunnel that waits for its peer: [esp.ike] with start_action = \"none\"",
            );
            ok = false;
        } else if e.ike.as_ref().is_some_and(|k| k.remote_id.is_none()) {
            // Any address and any identity: whoever holds the key (or a
            // certificate from the CA) would be this tunnel's peer.
            cx.err(
                e.remote.span(),
                &remote_key,
                "\"any\" takes the peer from any address: say who it is with remote_id in [esp.ike] (\"%any\" for whoever authenticates)",
            );
            ok = false;
        }
        if let Some(l) = local
            && let Some(t) = earlier
                .iter()
                .find(|t| t.local == l && t.remote.is_unspecified())
        {
            cx.err(
                e.remote.span(),
                &remote_key,
                format!(
                    "esp {} takes any peer on {l} already: a second would never be chosen",
                    t.name
                ),
            );
            ok = false;
        }
        (local, local.map(unspecified_like))
    } else {
        endpoints(cx, &e.local, &e.remote, &path, under)
    };
    if let Some(raw_ike) = &e.ike {
        let manual = e.outbound.as_ref().map(|o| o.spi.span()).or_else(|| {
            e.inbound
                .as_ref()
                .and_then(|v| v.first())
                .map(|s| s.spi.span())
        });
        if let Some(span) = manual {
            cx.err(
                span,
                &format!("{path}.ike"),
                "[esp.ike] negotiates the SAs: no [esp.outbound] or [[esp.inbound]] beside it",
            );
            ok = false;
        }
        for (v, key) in [
            (e.encapsulation.as_ref().map(|v| v.span()), "encapsulation"),
            (e.udp_port.as_ref().map(|v| v.span()), "udp_port"),
        ] {
            if let Some(span) = v {
                cx.err(
                    span,
                    &format!("{path}.{key}"),
                    "with [esp.ike], NAT detection chooses ESP on IP or in UDP (port 4500); encap = true in [esp.ike] forces UDP",
                );
                ok = false;
            }
        }
        let _ = raw_ike;
    }
    let mut udp_port = None;
    if let Some(enc) = &e.encapsulation {
        match enc.get_ref().as_str() {
            "none" => {}
            "udp" => udp_port = Some(wire::esp::UDP_PORT),
            other => {
                cx.err(
                    enc.span(),
                    &format!("{path}.encapsulation"),
                    format!("{other:?} is not an encapsulation (\"none\": ESP on IP; \"udp\": ESP in UDP, RFC 3948)"),
                );
                ok = false;
            }
        }
    }
    if let Some(p) = &e.udp_port {
        let key = format!("{path}.udp_port");
        if udp_port.is_none() {
            cx.err(p.span(), &key, "a UDP port is for encapsulation = \"udp\"");
            ok = false;
        } else {
            udp_port = cx.int::<u16>(p, UDP_PORT, &key);
            ok &= udp_port.is_some();
            if let Some(n) = udp_port
                && let Some(w) = under.wireguard.iter().find(|w| w.listen_port == n)
            {
                cx.err(
                    p.span(),
                    &key,
                    format!("port {n} is the listen port of {}", w.name),
                );
                ok = false;
            }
        }
    }
    let local_ts = selectors(cx, e.local_ts.as_ref(), &format!("{path}.local_ts"));
    let remote_ts = selectors(cx, e.remote_ts.as_ref(), &format!("{path}.remote_ts"));

    // The largest inner packet the path to the remote carries unfragmented.
    let mut mtu = None;
    if let Some(r) = remote {
        let sealing = e
            .outbound
            .as_ref()
            .and_then(|o| EspAlgorithm::from_name(o.algorithm.get_ref()));
        // With a key exchange, UDP may come (NAT detection) and any transform.
        let over = overhead(r, udp_port.is_some() || e.ike.is_some(), sealing);
        // Any peer: the path is the one from the local address's own port.
        let toward = if any_peer { local.unwrap_or(r) } else { r };
        match under.path_mtu(toward) {
            None => cx.err(
                e.remote.span(),
                &remote_key,
                format!("no route to {r} (a port's network, a WireGuard interface's, or a [[route]])"),
            ),
            Some((link, name)) => match link.checked_sub(over).filter(|&m| m >= MIN_INNER_MTU) {
                None => cx.err(
                    e.remote.span(),
                    &remote_key,
                    format!(
                        "the path to {r} ({name}, MTU {link}) has no room for an inner packet of {MIN_INNER_MTU} bytes and {over} of ESP and outer headers"
                    ),
                ),
                Some(max) => {
                    mtu = Some(max);
                    if let Some(m) = &e.mtu {
                        let key = format!("{path}.mtu");
                        let range = i64::from(MIN_INNER_MTU)..=i64::from(max);
                        if *m.get_ref() > i64::from(max) && *m.get_ref() <= 65535 {
                            cx.err(
                                m.span(),
                                &key,
                                format!(
                                    "{} does not fit the path to {r}: {name} has MTU {link}, less {over} for ESP{} and the outer headers leaves {max}",
                                    m.get_ref(),
                                    if sealing.is_none() { " (the most any transform adds: the file names no outbound SA)" } else { "" }
                                ),
                            );
                            mtu = None;
                        } else {
                            mtu = cx.int::<u16>(m, range, &key);
                        }
                    }
                }
            },
        }
    }

    let mut outbound = None;
    if let Some(o) = &e.outbound {
        outbound = sa(cx, o, &format!("{path}.outbound"), false);
        ok &= outbound.is_some();
    }
    let mut inbound = Vec::new();
    for (k, s) in e.inbound.iter().flatten().enumerate() {
        let p = format!("{path}.inbound[{k}]");
        match sa(cx, s, &p, true) {
            Some(s) => {
                let taken = inbound
                    .iter()
                    .position(|o: &SaConfig| o.spi == s.spi)
                    .map(|m| format!("{path}.inbound[{m}]"))
                    .or_else(|| {
                        let l = local?;
                        earlier
                            .iter()
                            .find(|t| t.local == l && t.inbound.iter().any(|o| o.spi == s.spi))
                            .map(|t| format!("an inbound SA of esp {}", t.name))
                    });
                if let Some(t) = taken {
                    cx.err(
                        s_spi_span(e, k),
                        &format!("{p}.spi"),
                        format!("SPI {:#x} to this local address is already {t}", s.spi),
                    );
                    ok = false;
                } else {
                    inbound.push(s);
                }
            }
            None => ok = false,
        }
    }
    let mut ike_config = None;
    if let Some(raw_ike) = &e.ike {
        // Any peer: no address to be its identity by default (remote_id says).
        let known = remote.filter(|_| !any_peer);
        ike_config = ike(cx, raw_ike, &path, local, known);
        ok &= ike_config.is_some();
        // IKE takes UDP 500 and 4500 on every address of the gateway.
        if let Some(w) = under
            .wireguard
            .iter()
            .find(|w| [ikev2::output::IKE_PORT, ikev2::output::NAT_T_PORT].contains(&w.listen_port))
        {
            cx.err(
                e.name.span(),
                &format!("{path}.ike"),
                format!(
                    "IKE needs UDP ports 500 and 4500, and {} listens on {}",
                    w.name, w.listen_port
                ),
            );
            ok = false;
        }
    }
    let (local, remote, local_ts, remote_ts, mtu) = (local?, remote?, local_ts?, remote_ts?, mtu?);
    ok.then(|| EspConfig {
        name: e.name.get_ref().clone(),
        local,
        remote,
        udp_port,
        local_ts,
        remote_ts,
        mtu,
        outbound,
        inbound,
        ike: ike_config,
    })
}

fn s_spi_span(e: &RawEsp, k: usize) -> std::ops::Range<usize> {
    e.inbound
        .as_ref()
        .and_then(|v| v.get(k))
        .map_or(0..0, |s| s.spi.span())
}
