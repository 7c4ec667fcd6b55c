//! The file as written: serde structs whose values keep their place in the file
//! (`Spanned`), so that validation can name the line of what it refuses. Integers are
//! `i64` and enumerations strings, so that a range or spelling error is validation's,
//! with its own message, instead of serde's.
//!
//! Each `[gateway]`, `[[port]]`, `[[wireguard]]`, `[[wireguard.peer]]`, `[[route]]`,
//! `[[vxlan]]`, `[[xconnect]]`, `[[esp]]` and `[[openvpn]]` table is deserialized on its own (see `split`), so that a structural error in one
//! (an unknown key, a missing one, a wrong type) does not hide the errors of the others.

use super::error::{MISSING, Sink, join, unknown_key};
use serde::Deserialize;
use serde::de::IntoDeserializer;
use std::ops::Range;
use toml::Spanned;
use toml::de::{DeString, DeTable, DeValue};

type S<T> = Spanned<T>;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawGateway {
    pub cores: Option<S<Vec<S<i64>>>>,
    pub control: Option<S<String>>,
    pub metrics: Option<S<String>>,
    pub buffers: Option<S<i64>>,
    pub spread: Option<S<bool>>,
}
const GATEWAY: Keys = Keys {
    allowed: &["cores", "control", "metrics", "buffers", "spread"],
    required: &[],
};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPort {
    pub name: S<String>,
    pub interface: S<String>,
    pub driver: Option<S<String>>,
    pub addresses: Option<S<Vec<S<String>>>>,
    pub mtu: Option<S<i64>>,
    pub zero_copy: Option<S<bool>>,
}
const PORT: Keys = Keys {
    allowed: &[
        "name",
        "interface",
        "driver",
        "addresses",
        "mtu",
        "zero_copy",
    ],
    required: &["name", "interface"],
};

/// A `[[wireguard]]` table less its peers, which are deserialized one by one.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawWireguard {
    pub name: S<String>,
    pub private_key_file: S<String>,
    pub listen_port: S<i64>,
    pub mtu: Option<S<i64>>,
    pub addresses: Option<S<Vec<S<String>>>>,
}
const WIREGUARD: Keys = Keys {
    allowed: &[
        "name",
        "private_key_file",
        "listen_port",
        "mtu",
        "addresses",
        "peer",
    ],
    required: &["name", "private_key_file", "listen_port"],
};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPeer {
    pub public_key: S<String>,
    pub preshared_key_file: Option<S<String>>,
    pub endpoint: Option<S<String>>,
    pub allowed_ips: Option<S<Vec<S<String>>>>,
    pub persistent_keepalive: Option<S<i64>>,
}
const PEER: Keys = Keys {
    allowed: &[
        "public_key",
        "preshared_key_file",
        "endpoint",
        "allowed_ips",
        "persistent_keepalive",
    ],
    required: &["public_key"],
};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRoute {
    pub prefix: S<String>,
    pub via: Option<S<String>>,
    pub port: Option<S<String>>,
    pub tunnel: Option<S<String>>,
    pub blackhole: Option<S<bool>>,
}
const ROUTE: Keys = Keys {
    allowed: &["prefix", "via", "port", "tunnel", "blackhole"],
    required: &["prefix"],
};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawVxlan {
    pub name: S<String>,
    pub vni: S<i64>,
    pub local: S<String>,
    pub remote: S<String>,
    pub udp_port: Option<S<i64>>,
    pub mtu: Option<S<i64>>,
}
const VXLAN: Keys = Keys {
    allowed: &["name", "vni", "local", "remote", "udp_port", "mtu"],
    required: &["name", "vni", "local", "remote"],
};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawXconnect {
    pub from: S<String>,
    pub to: S<String>,
}
const XCONNECT: Keys = Keys {
    allowed: &["from", "to"],
    required: &["from", "to"],
};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawEsp {
    pub name: S<String>,
    pub local: S<String>,
    pub remote: S<String>,
    pub encapsulation: Option<S<String>>,
    pub udp_port: Option<S<i64>>,
    pub local_ts: Option<S<Vec<S<String>>>>,
    pub remote_ts: Option<S<Vec<S<String>>>>,
    pub mtu: Option<S<i64>>,
    pub outbound: Option<RawSa>,
    pub inbound: Option<Vec<RawSa>>,
    pub ike: Option<RawIke>,
}
const ESP: Keys = Keys {
    allowed: &[
        "name",
        "local",
        "remote",
        "encapsulation",
        "udp_port",
        "local_ts",
        "remote_ts",
        "mtu",
        "outbound",
        "inbound",
        "ike",
    ],
    required: &["name", "local", "remote"],
};

/// The key exchange that negotiates an `[[esp]]` tunnel's SAs (`[esp.ike]`): the
/// keys of a strongSwan connection, with its children's `esp_proposals` and
/// `start_action`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawIke {
    pub local_id: Option<S<String>>,
    pub remote_id: Option<S<String>>,
    pub auth: Option<S<String>>,
    pub psk_file: Option<S<String>>,
    pub cert_file: Option<S<String>>,
    pub key_file: Option<S<String>>,
    pub ca_file: Option<S<String>>,
    pub proposals: Option<S<Vec<S<String>>>>,
    pub esp_proposals: Option<S<Vec<S<String>>>>,
    pub start_action: Option<S<String>>,
    pub encap: Option<S<bool>>,
    pub dpd_delay: Option<S<i64>>,
    pub nat_keepalive: Option<S<i64>>,
    pub retransmit_timeout: Option<S<i64>>,
    pub retransmit_tries: Option<S<i64>>,
    pub rekey_time: Option<S<i64>>,
    pub ike_rekey_time: Option<S<i64>>,
}

/// A manual SA of an `[[esp]]` table (`[esp.outbound]`, `[[esp.inbound]]`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSa {
    pub spi: S<i64>,
    pub algorithm: S<String>,
    pub key_file: S<String>,
    pub esn: Option<S<bool>>,
    pub replay_window: Option<S<i64>>,
    pub lifetime_bytes: Option<S<i64>>,
    pub lifetime_packets: Option<S<i64>>,
}

/// An `[[openvpn]]` server.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawOpenvpn {
    pub name: S<String>,
    pub listen_port: Option<S<i64>>,
    pub certificate: S<String>,
    pub private_key: S<String>,
    pub ca: S<String>,
    pub crl: Option<S<String>>,
    pub tls_auth: Option<S<String>>,
    pub key_direction: Option<S<i64>>,
    pub auth: Option<S<String>>,
    pub tls_crypt: Option<S<String>>,
    pub tls_crypt_v2: Option<S<String>>,
    pub pool: Option<S<String>>,
    pub pool6: Option<S<String>>,
    pub push_routes: Option<S<Vec<S<String>>>>,
    pub data_ciphers: Option<S<String>>,
    pub reneg_sec: Option<S<i64>>,
    pub keepalive: Option<S<Vec<S<i64>>>>,
    pub tls_version_min: Option<S<String>>,
    pub mtu: Option<S<i64>>,
}
const OPENVPN: Keys = Keys {
    allowed: &[
        "name",
        "listen_port",
        "certificate",
        "private_key",
        "ca",
        "crl",
        "tls_auth",
        "key_direction",
        "auth",
        "tls_crypt",
        "tls_crypt_v2",
        "pool",
        "pool6",
        "push_routes",
        "data_ciphers",
        "reneg_sec",
        "keepalive",
        "tls_version_min",
        "mtu",
    ],
    required: &["name", "certificate", "private_key", "ca"],
};

const TOP_KEYS: &[&str] = &[
    "gateway",
    "port",
    "wireguard",
    "route",
    "vxlan",
    "xconnect",
    "esp",
    "openvpn",
];

/// The keys a table may hold and those it must: checked before serde sees the table,
/// so that every unknown or missing key is reported (serde stops at the first), and
/// the table's values are still checked. They match the structs' fields (a test says
/// so), which refuse unknown ones too.
pub(crate) struct Keys {
    pub allowed: &'static [&'static str],
    pub required: &'static [&'static str],
}

/// One table of an array of tables that could not be deserialized: validation still
/// knows its name (if it has a string `name`), so that references to it are not
/// reported as unknown as well.
pub(crate) struct Broken {
    pub name: Option<String>,
}

/// An item that deserialized, or one that did not (its errors are in the sink).
pub(crate) enum Item<T> {
    Ok { value: T, span: Range<usize> },
    Broken(Broken),
}

pub(crate) struct RawWireguardItem {
    pub wg: RawWireguard,
    pub peers: Vec<Item<RawPeer>>,
}

/// The whole file, each table deserialized on its own.
#[derive(Default)]
pub(crate) struct RawFile {
    pub gateway: RawGateway,
    pub ports: Vec<Item<RawPort>>,
    pub wireguard: Vec<Item<RawWireguardItem>>,
    pub routes: Vec<Item<RawRoute>>,
    pub vxlans: Vec<Item<RawVxlan>>,
    pub xconnects: Vec<Item<RawXconnect>>,
    pub esps: Vec<Item<RawEsp>>,
    pub openvpns: Vec<Item<RawOpenvpn>>,
    /// Whether the file has a `port` key at all (even one that is not `[[port]]`).
    pub port_given: bool,
}

/// Parses the TOML and deserializes each table, reporting syntax errors (then nothing
/// else: the rest of the file cannot be trusted) and structural ones.
pub(crate) fn split(text: &str, sink: &mut Sink<'_>) -> Option<RawFile> {
    let doc = match DeTable::parse(text) {
        Ok(doc) => doc.into_inner(),
        Err(e) => {
            sink.syntax(&e);
            return None;
        }
    };
    let mut file = RawFile::default();
    for (key, value) in doc {
        match key.get_ref().as_ref() {
            "gateway" => {
                if !matches!(value.get_ref(), DeValue::Table(_)) {
                    sink.at(value.span(), "gateway", "expected a table ([gateway])");
                } else if let Some(g) = item(value, "gateway", &GATEWAY, sink) {
                    file.gateway = g;
                }
            }
            "port" => {
                file.port_given = true;
                for (i, v) in tables(value, "port", sink) {
                    let path = format!("port[{i}]");
                    file.ports.push(wrap(v, &path, &PORT, sink, |v| v));
                }
            }
            "wireguard" => {
                for (i, mut v) in tables(value, "wireguard", sink) {
                    let path = format!("wireguard[{i}]");
                    // The peers come out first, each deserialized on its own.
                    let peers = match v.get_mut() {
                        DeValue::Table(t) => t.remove("peer"),
                        _ => None,
                    };
                    let peers = peers.map(|p| {
                        tables(p, &join(&path, "peer"), sink)
                            .into_iter()
                            .map(|(j, p)| {
                                let path = format!("{path}.peer[{j}]");
                                wrap(p, &path, &PEER, sink, |v| v)
                            })
                            .collect::<Vec<_>>()
                    });
                    file.wireguard
                        .push(wrap(v, &path, &WIREGUARD, sink, |wg| RawWireguardItem {
                            wg,
                            peers: peers.unwrap_or_default(),
                        }));
                }
            }
            "route" => {
                for (i, v) in tables(value, "route", sink) {
                    let path = format!("route[{i}]");
                    file.routes.push(wrap(v, &path, &ROUTE, sink, |v| v));
                }
            }
            "vxlan" => {
                for (i, v) in tables(value, "vxlan", sink) {
                    let path = format!("vxlan[{i}]");
                    file.vxlans.push(wrap(v, &path, &VXLAN, sink, |v| v));
                }
            }
            "xconnect" => {
                for (i, v) in tables(value, "xconnect", sink) {
                    let path = format!("xconnect[{i}]");
                    file.xconnects.push(wrap(v, &path, &XCONNECT, sink, |v| v));
                }
            }
            "esp" => {
                for (i, v) in tables(value, "esp", sink) {
                    let path = format!("esp[{i}]");
                    file.esps.push(wrap(v, &path, &ESP, sink, |v| v));
                }
            }
            "openvpn" => {
                for (i, v) in tables(value, "openvpn", sink) {
                    let path = format!("openvpn[{i}]");
                    file.openvpns.push(wrap(v, &path, &OPENVPN, sink, |v| v));
                }
            }
            other => sink.at(key.span(), other, unknown_key(TOP_KEYS)),
        }
    }
    Some(file)
}

/// The tables of an array of tables `[[name]]`, numbered; anything else is an error.
fn tables<'i>(
    value: Spanned<DeValue<'i>>,
    path: &str,
    sink: &mut Sink<'_>,
) -> Vec<(usize, Spanned<DeValue<'i>>)> {
    let span = value.span();
    let list = match value.into_inner() {
        DeValue::Array(a) if a.iter().all(|v| matches!(v.get_ref(), DeValue::Table(_))) => {
            a.into_iter().collect()
        }
        _ => {
            let name = path.rsplit('.').next().unwrap_or(path);
            let header = if path.contains('.') {
                format!("wireguard.{name}")
            } else {
                name.to_string()
            };
            sink.at(
                span,
                path,
                format!("expected an array of tables ([[{header}]])"),
            );
            Vec::new()
        }
    };
    list.into_iter().enumerate().collect()
}

/// Deserializes one table as `T`, reporting its error.
fn item<'i, T: Deserialize<'i>>(
    mut value: Spanned<DeValue<'i>>,
    path: &str,
    keys: &Keys,
    sink: &mut Sink<'_>,
) -> Option<T> {
    let span = value.span();
    if let DeValue::Table(t) = value.get_mut() {
        let unknown: Vec<Spanned<DeString<'i>>> = t
            .keys()
            .filter(|k| !keys.allowed.contains(&k.get_ref().as_ref()))
            .cloned()
            .collect();
        for k in unknown {
            sink.at(k.span(), join(path, k.get_ref()), unknown_key(keys.allowed));
            t.remove(k.get_ref().as_ref());
        }
        for &name in keys.required {
            if !t.contains_key(name) {
                sink.at(span.clone(), join(path, name), MISSING);
            }
        }
    }
    let copy = value.clone();
    match T::deserialize(value.into_deserializer()) {
        Ok(v) => Some(v),
        Err(e) => {
            sink.serde(&e, &copy, path, keys.allowed);
            None
        }
    }
}

/// `item`, then `then`; a table that does not deserialize is kept as `Broken` with its
/// name, if it has one.
fn wrap<'i, T: Deserialize<'i>, U>(
    value: Spanned<DeValue<'i>>,
    path: &str,
    keys: &Keys,
    sink: &mut Sink<'_>,
    then: impl FnOnce(T) -> U,
) -> Item<U> {
    let span = value.span();
    let name = match value.get_ref() {
        DeValue::Table(t) => match t.get("name").map(|v| v.get_ref()) {
            Some(DeValue::String(s)) => Some(s.to_string()),
            _ => None,
        },
        _ => None,
    };
    match item::<T>(value, path, keys, sink).map(then) {
        Some(value) => Item::Ok { value, span },
        None => Item::Broken(Broken { name }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// serde's own list of a struct's fields (from its unknown-field error).
    fn fields<T: for<'de> Deserialize<'de>>() -> Vec<String> {
        let Err(e) = toml::from_str::<T>("zzz_not_a_key = 1") else {
            panic!("accepted an unknown key");
        };
        // serde says "expected one of `a`, `b`, `c`", or "expected `a` or `b`".
        let m = e.message();
        let list = m
            .split("expected one of ")
            .nth(1)
            .or_else(|| m.split("expected ").nth(1))
            .unwrap();
        list.split(", ")
            .flat_map(|f| f.split(" or "))
            .map(|f| f.trim_matches('`').to_string())
            .collect()
    }

    #[test]
    fn the_key_lists_are_the_structs_fields() {
        let check = |keys: &Keys, fields: Vec<String>, extra: &[&str]| {
            let mut allowed: Vec<&str> = keys.allowed.to_vec();
            allowed.retain(|k| !extra.contains(k));
            assert_eq!(allowed, fields);
            for r in keys.required {
                assert!(keys.allowed.contains(r), "{r}");
            }
        };
        check(&GATEWAY, fields::<RawGateway>(), &[]);
        check(&PORT, fields::<RawPort>(), &[]);
        // The peers are taken out of a [[wireguard]] table before serde sees it.
        check(&WIREGUARD, fields::<RawWireguard>(), &["peer"]);
        check(&PEER, fields::<RawPeer>(), &[]);
        check(&ROUTE, fields::<RawRoute>(), &[]);
        check(&VXLAN, fields::<RawVxlan>(), &[]);
        check(&XCONNECT, fields::<RawXconnect>(), &[]);
        check(&ESP, fields::<RawEsp>(), &[]);
        check(&OPENVPN, fields::<RawOpenvpn>(), &[]);
    }
}
