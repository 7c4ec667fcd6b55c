//! `[[wireguard]]` tables and their peers: key files, keys, ports, endpoints, allowed
//! IPs.

use super::checks::Ctx;
use super::raw::{Item, RawPeer, RawWireguardItem};
use super::values::{name_ok, prefix, socket_addr};
use super::{DEFAULT_WG_MTU, PeerConfig, Prefix, WgConfig};
use crate::keyfile::decode_key;
use std::collections::HashMap;
use std::ops::RangeInclusive;

const WG_MTU: RangeInclusive<i64> = 1280..=dataplane::gateway::LARGEST_PORT_MTU as i64;
const LISTEN_PORT: RangeInclusive<i64> = 1..=65535;
const KEEPALIVE: RangeInclusive<i64> = 1..=65535;

pub(super) fn wg(
    cx: &mut Ctx<'_, '_>,
    item: &RawWireguardItem,
    i: usize,
    listen_ports: &mut HashMap<u16, usize>,
) -> Option<WgConfig> {
    let w = &item.wg;
    let path = format!("wireguard[{i}]");
    let mut ok = name_ok(w.name.get_ref());

    let key = cx.key_file(&w.private_key_file, &format!("{path}.private_key_file"));
    let public = key
        .as_ref()
        .map(|(_, k)| crypto::x25519::PrivateKey::from_bytes(**k).public_key().0);

    let port_key = format!("{path}.listen_port");
    let listen_port = cx.int::<u16>(&w.listen_port, LISTEN_PORT, &port_key);
    if let Some(p) = listen_port {
        if let Some(first) = listen_ports.get(&p) {
            cx.err(
                w.listen_port.span(),
                &port_key,
                format!("port {p} is already wireguard[{first}].listen_port"),
            );
            ok = false;
        } else {
            listen_ports.insert(p, i);
        }
    }

    let mut mtu = Some(DEFAULT_WG_MTU);
    if let Some(m) = &w.mtu {
        mtu = cx.int::<u16>(m, WG_MTU, &format!("{path}.mtu"));
    }

    let (addresses, addresses_ok) = cx.addresses(w.addresses.as_ref(), &path, |_| None);
    ok &= addresses_ok;

    let mut peers = Vec::new();
    let mut keys: Vec<(usize, [u8; 32])> = Vec::new();
    let mut allowed: HashMap<Prefix, usize> = HashMap::new();
    for (j, p) in item.peers.iter().enumerate() {
        match p {
            Item::Ok { value, .. } => {
                let path = format!("{path}.peer[{j}]");
                match peer(
                    cx,
                    value,
                    &path,
                    public.as_ref(),
                    &mut keys,
                    &mut allowed,
                    j,
                ) {
                    Some(p) => peers.push(p),
                    None => ok = false,
                }
            }
            Item::Broken(_) => ok = false,
        }
    }

    let (private_key_file, private_key) = key?;
    let (public_key, listen_port, mtu) = (public?, listen_port?, mtu?);
    ok.then(|| WgConfig {
        name: w.name.get_ref().clone(),
        private_key_file,
        private_key,
        public_key,
        listen_port,
        mtu,
        addresses,
        peers,
    })
}

fn peer(
    cx: &mut Ctx<'_, '_>,
    p: &RawPeer,
    path: &str,
    own: Option<&[u8; 32]>,
    keys: &mut Vec<(usize, [u8; 32])>,
    allowed: &mut HashMap<Prefix, usize>,
    j: usize,
) -> Option<PeerConfig> {
    let mut ok = true;
    let key = format!("{path}.public_key");
    let public_key = match decode_key(p.public_key.get_ref().trim()) {
        None => {
            cx.err(p.public_key.span(), &key, "not 32 bytes of base64");
            None
        }
        Some(k) if Some(&*k) == own => {
            cx.err(
                p.public_key.span(),
                &key,
                "the interface's own public key (a peer is another machine)",
            );
            None
        }
        Some(k) => match keys.iter().find(|(_, other)| *other == *k) {
            Some((first, _)) => {
                cx.err(
                    p.public_key.span(),
                    &key,
                    format!("the same public key as peer[{first}] of this interface"),
                );
                None
            }
            None => {
                keys.push((j, *k));
                Some(*k)
            }
        },
    };

    let mut preshared_key = None;
    if let Some(f) = &p.preshared_key_file {
        match cx.key_file(f, &format!("{path}.preshared_key_file")) {
            Some((_, k)) => preshared_key = Some(k),
            None => ok = false,
        }
    }

    let mut endpoint = None;
    if let Some(e) = &p.endpoint {
        match socket_addr(e.get_ref()) {
            Ok(a) => endpoint = Some(a),
            Err(m) => {
                cx.err(e.span(), &format!("{path}.endpoint"), m);
                ok = false;
            }
        }
    }

    let mut allowed_ips = Vec::new();
    if let Some(list) = &p.allowed_ips {
        for (k, a) in list.get_ref().iter().enumerate() {
            let key = format!("{path}.allowed_ips[{k}]");
            match prefix(a.get_ref()) {
                Ok(pfx) => {
                    if let Some(first) = allowed.get(&pfx) {
                        cx.err(
                            a.span(),
                            &key,
                            format!(
                                "{pfx} is already an allowed IP of peer[{first}] of this interface"
                            ),
                        );
                        ok = false;
                    } else {
                        allowed.insert(pfx, j);
                        allowed_ips.push(pfx);
                    }
                }
                Err(m) => {
                    cx.err(a.span(), &key, m);
                    ok = false;
                }
            }
        }
    }

    let mut persistent_keepalive = None;
    if let Some(k) = &p.persistent_keepalive {
        match cx.int::<u16>(k, KEEPALIVE, &format!("{path}.persistent_keepalive")) {
            Some(s) => persistent_keepalive = Some(s),
            None => ok = false,
        }
    }

    let public_key = public_key?;
    ok.then_some(PeerConfig {
        public_key,
        preshared_key,
        endpoint,
        allowed_ips,
        persistent_keepalive,
    })
}
