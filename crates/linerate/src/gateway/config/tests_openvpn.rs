//! `[[openvpn]]` tables: a good one and what it gives, and bad ones with their
//! exact errors.

use super::tests::{TempDir, errors_of};
use super::*;

pub(crate) const PORTS: &str = r#"[[port]]
name = "wan"
interface = "wan"
addresses = ["198.18.2.1/24"]
"#;

/// A directory with a CA, a server certificate and key, and static keys.
pub(crate) fn dir() -> TempDir {
    let d = TempDir::new();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let ca_cert = ca.clone().self_signed(&ca_key).unwrap();
    let server = rcgen::CertificateParams::new(vec!["server".to_owned()]).unwrap();
    let server_key = rcgen::KeyPair::generate().unwrap();
    let server_cert = server.signed_by(&server_key, &ca_cert, &ca_key).unwrap();
    d.write("ca.crt", &ca_cert.pem());
    d.write("server.crt", &server_cert.pem());
    d.write("server.key", &server_key.serialize_pem());
    d.write(
        "ta.key",
        &::openvpn::static_key::Key2::from_bytes([7; 256]).to_file(),
    );
    d.write("junk.key", "not a key\n");
    // 128 bytes of 9, as `openvpn --genkey tls-crypt-v2-server` writes a key.
    d.write("v2.key", "-----BEGIN OpenVPN tls-crypt-v2 server key-----\nCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJ\nCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJ\nCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQk=\n-----END OpenVPN tls-crypt-v2 server key-----\n");
    d
}

pub(crate) const SERVER: &str = r#"
[[openvpn]]
name = "ra"
certificate = "server.crt"
private_key = "server.key"
ca = "ca.crt"
"#;

#[test]
fn a_good_table_gives_the_server_with_its_defaults() {
    let d = dir();
    let text = format!(
        "{PORTS}{SERVER}tls_crypt = \"ta.key\"\npool = \"198.19.50.0/24\"\npool6 = \"2001:2:50::/64\"\npush_routes = [\"198.19.1.0/24\"]\n"
    );
    let c = load(&d.write("gw.toml", &text)).unwrap_or_else(|e| panic!("{e}"));
    let o = &c.openvpns[0];
    assert_eq!(
        (o.listen_port, o.reneg_sec, o.ping, o.ping_restart, o.mtu),
        (1194, 3600, 10, 60, 1500)
    );
    assert_eq!(o.protection.describe(), "tls-crypt");
    let v2 = load(&d.write(
        "gw.toml",
        &text.replace("tls_crypt = \"ta.key\"", "tls_crypt_v2 = \"v2.key\""),
    ))
    .unwrap();
    assert_eq!(v2.openvpns[0].protection.describe(), "tls-crypt-v2");
    assert_eq!(o.ciphers.len(), 3);
    let summary = c.summary();
    assert!(
        summary.contains("openvpn ra: udp port 1194, tls-crypt, pools 198.19.50.0/24 2001:2:50::/64, pushes 198.19.1.0/24, ciphers AES-256-GCM:AES-128-GCM:CHACHA20-POLY1305, reneg 3600s, keepalive 10s/60s, mtu 1500"),
        "{summary}"
    );
    // The same file again is the same server; a changed setting is not.
    let again = load(&d.write("gw.toml", &text)).unwrap();
    assert_eq!(again.openvpns[0].fingerprint, o.fingerprint);
    let changed = load(&d.write("gw.toml", &text.replace("/24\"\npool6", "/25\"\npool6"))).unwrap();
    assert_ne!(changed.openvpns[0].fingerprint, o.fingerprint);
}

#[test]
fn bad_tables_are_refused_naming_the_line_and_key() {
    let d = dir();
    let cases: [(&str, &str); 13] = [
        (
            "pool = \"198.19.50.0/24\"\nmtu = 575\n",
            "gw.toml:12: openvpn[0].mtu: 575 is out of range (576..=9216)",
        ),
        (
            "pool = \"198.19.50.0/24\"\nmtu = 9217\n",
            "gw.toml:12: openvpn[0].mtu: 9217 is out of range (576..=9216)",
        ),
        (
            "pool = \"198.19.50.0/24\"\ndata_ciphers = \"AES-256-GCM:BF-CBC\"\n",
            "gw.toml:12: openvpn[0].data_ciphers: \"BF-CBC\" is not a data cipher this server serves (it serves AES-256-GCM, AES-128-GCM, CHACHA20-POLY1305)",
        ),
        (
            "",
            "gw.toml:7: openvpn[0].pool: missing: a pool of client addresses (pool = \"198.19.50.0/24\", or pool6)",
        ),
        (
            "pool = \"198.19.50.0/31\"\n",
            "gw.toml:11: openvpn[0].pool: /31 leaves no room for clients: at most /30",
        ),
        (
            "pool = \"2001:2:50::/64\"\n",
            "gw.toml:11: openvpn[0].pool: an IPv4 prefix (pool6 is for IPv6)",
        ),
        (
            "pool = \"198.19.50.0/24\"\ntls_crypt = \"junk.key\"\n",
            "gw.toml:12: openvpn[0].tls_crypt: junk.key: not an OpenVPN static key (openvpn --genkey secret FILE makes one)",
        ),
        (
            "pool = \"198.19.50.0/24\"\ntls_crypt = \"ta.key\"\ntls_auth = \"ta.key\"\n",
            "gw.toml:12: openvpn[0].tls_crypt: tls_auth is given too: a server protects its control channel one way",
        ),
        (
            "pool = \"198.19.50.0/24\"\ntls_crypt_v2 = \"junk.key\"\n",
            "gw.toml:12: openvpn[0].tls_crypt_v2: junk.key: not a tls-crypt-v2 server key (openvpn --genkey tls-crypt-v2-server FILE makes one)",
        ),
        (
            "pool = \"198.19.50.0/24\"\ntls_crypt = \"ta.key\"\ntls_crypt_v2 = \"v2.key\"\n",
            "gw.toml:13: openvpn[0].tls_crypt_v2: tls_crypt is given too: a server protects its control channel one way",
        ),
        (
            "pool = \"198.19.50.0/24\"\ntls_auth = \"ta.key\"\nkey_direction = 2\n",
            "gw.toml:13: openvpn[0].key_direction: 2 is not a key direction (0 on the server and 1 on clients, as OpenVPN writes them)",
        ),
        (
            "pool = \"198.19.50.0/24\"\nkeepalive = [60, 10]\n",
            "gw.toml:12: openvpn[0].keepalive: the restart time (10 s) must be longer than the ping interval (60 s)",
        ),
        (
            "pool = \"198.19.50.0/24\"\ntls_version_min = \"1.1\"\n",
            "gw.toml:12: openvpn[0].tls_version_min: \"1.1\" is not a TLS version this server takes (1.2 or 1.3)",
        ),
    ];
    for (extra, want) in cases {
        let got = errors_of(&d, &format!("{PORTS}{SERVER}{extra}"));
        assert_eq!(got, [want], "{extra}");
    }
    // A certificate that is not one, and a port another server has.
    let got = errors_of(
        &d,
        &format!(
            "{PORTS}{}pool = \"198.19.50.0/24\"\n",
            SERVER.replace("server.crt", "ca.key.missing")
        ),
    );
    assert_eq!(got.len(), 1);
    assert!(
        got[0].starts_with("gw.toml:8: openvpn[0].certificate: ca.key.missing: cannot read"),
        "{got:?}"
    );
    let two = format!(
        "{PORTS}{SERVER}pool = \"198.19.50.0/24\"\n{}pool = \"198.19.51.0/24\"\n",
        SERVER.replace("\"ra\"", "\"rb\"")
    );
    assert_eq!(
        errors_of(&d, &two),
        ["gw.toml:14: openvpn[1].listen_port: UDP port 1194 is already openvpn[0]'s"]
    );
}

/// A server past 1600 bytes of MTU puts the gateway on jumbo buffers, with its
/// ports on either driver.
#[test]
fn a_jumbo_server_puts_the_gateway_on_jumbo_buffers() {
    let d = dir();
    let server = format!("{SERVER}tls_crypt = \"ta.key\"\npool = \"198.19.50.0/24\"\n");
    let standard = load(&d.write("gw.toml", &format!("{PORTS}{server}mtu = 1600\n"))).unwrap();
    assert_eq!(standard.buffer_size(), dataplane::STANDARD_BUFFER);
    let jumbo = load(&d.write("gw.toml", &format!("{PORTS}{server}mtu = 9000\n"))).unwrap();
    assert_eq!(jumbo.buffer_size(), dataplane::JUMBO_BUFFER);
}
