//! `[esp.ike]` tables: a good one and what it gives, and bad ones with their exact
//! errors.

use super::tests::{TempDir, errors_of};
use super::*;

const PORTS: &str = r#"[[port]]
name = "wan"
interface = "wan"
addresses = ["198.18.2.1/24"]
"#;

fn dir() -> TempDir {
    let d = TempDir::new();
    d.write("site.psk", "a pre-shared key long enough\n");
    d.write("short.psk", "too short\n");
    d
}

#[test]
fn a_good_table_gives_the_connection() {
    let d = dir();
    let text = format!(
        r#"{PORTS}
[[esp]]
name = "site"
local = "198.18.2.1"
remote = "198.18.2.2"
local_ts = ["198.19.1.0/24"]
remote_ts = ["198.19.3.0/24"]

[esp.ike]
remote_id = "@gw-b.example"
psk_file = "site.psk"
proposals = ["aes128gcm16-prfsha256-ecp256"]
esp_proposals = ["aes128-sha256", "aes256gcm16-esn"]
start_action = "start"
encap = true
dpd_delay = 10
"#
    );
    let c = load(&d.write("gw.toml", &text)).unwrap_or_else(|e| panic!("{e}"));
    let e = &c.esps[0];
    // With a key exchange the MTU leaves room for UDP and the largest transform.
    assert_eq!(e.udp_port, None);
    assert!(e.outbound.is_none() && e.inbound.is_empty());
    let k = e.ike.as_ref().unwrap();
    let IkeAuth::Psk {
        local_id,
        remote_id,
        secret,
        ..
    } = &k.auth
    else {
        panic!("psk by default")
    };
    assert_eq!(local_id, "198.18.2.1", "the local address by default");
    assert_eq!(remote_id.as_deref(), Some("@gw-b.example"));
    assert_eq!(&secret[..], b"a pre-shared key long enough");
    assert_eq!(k.esp_proposals, ["aes128-sha256", "aes256gcm16-esn"]);
    assert!(k.start && k.encap);
    assert_eq!(
        (k.dpd_delay, k.retransmit_timeout, k.retransmit_tries),
        (10, 4, 5)
    );
    let summary = c.summary();
    assert!(summary.contains("ike: initiates, psk "), "{summary}");
    assert!(
        summary.contains("site.psk as 198.18.2.1, peer @gw-b.example"),
        "{summary}"
    );
    assert!(
        !summary.contains("long enough"),
        "the secret is never printed"
    );
    let shown = format!("{c:?}");
    assert!(!shown.contains("long enough"), "nor debug-printed");
}

#[test]
fn defaults_respond_with_every_proposal() {
    let d = dir();
    let text = format!(
        r#"{PORTS}
[[esp]]
name = "site"
local = "198.18.2.1"
remote = "198.18.2.2"

[esp.ike]
psk_file = "site.psk"
remote_id = "%any"
"#
    );
    let c = load(&d.write("gw.toml", &text)).unwrap_or_else(|e| panic!("{e}"));
    let k = c.esps[0].ike.as_ref().unwrap();
    assert!(!k.start && !k.encap);
    assert!(matches!(
        &k.auth,
        IkeAuth::Psk {
            remote_id: None,
            ..
        }
    ));
    assert_eq!(k.proposals, [super::ike::DEFAULT_PROPOSAL]);
    assert_eq!(k.dpd_delay, 30);
    assert_eq!((k.rekey_time, k.ike_rekey_time), (3600, 14400));
}

#[test]
fn bad_tables_give_their_errors() {
    let d = dir();
    let got = errors_of(
        &d,
        &format!(
            r#"{PORTS}
[[esp]]
name = "site"
local = "198.18.2.1"
remote = "198.18.2.2"
encapsulation = "udp"

[esp.outbound]
spi = 0x100
algorithm = "aes128gcm16"
key_file = "site.psk"

[esp.ike]
auth = "psk"
local_id = "%any"
psk_file = "short.psk"
proposals = ["aes128-sha256-prfsha256-ecp256", "aes128gcm16-prfsha256-ecp256"]
esp_proposals = ["aes128gcm16-sha1"]
start_action = "trap"
dpd_delay = -1
retransmit_tries = 0
rekey_time = 5
"#
        ),
    );
    let expected = [
        "gw.toml:10: esp[0].encapsulation: with [esp.ike], NAT detection chooses ESP on IP or in UDP (port 4500); encap = true in [esp.ike] forces UDP",
        "gw.toml:13: esp[0].ike: [esp.ike] negotiates the SAs: no [esp.outbound] or [[esp.inbound]] beside it",
        "gw.toml:15: esp[0].outbound.key_file: site.psk: not hex digits (aes128gcm16: 16 bytes of key and 4 of salt)",
        "gw.toml:19: esp[0].ike.local_id: %any names a peer, not this gateway",
        "gw.toml:20: esp[0].ike.psk_file: short.psk: a pre-shared key of 9 bytes; use at least 16 (a short one is guessed offline from one recorded exchange)",
        "gw.toml:21: esp[0].ike.proposals[0]: proposal 'aes128-sha256-prfsha256-ecp256': IKE SAs here take AES-GCM or ChaCha20-Poly1305",
        "gw.toml:22: esp[0].ike.esp_proposals[0]: proposal 'aes128gcm16-sha1': an AEAD takes no integrity algorithm",
        "gw.toml:23: esp[0].ike.start_action: \"trap\": \"start\" (initiate, and again whenever the SA closes) or \"none\" (wait for the peer)",
        "gw.toml:24: esp[0].ike.dpd_delay: -1 is out of range (0..=86400)",
        "gw.toml:25: esp[0].ike.retransmit_tries: 0 is out of range (1..=20)",
        "gw.toml:26: esp[0].ike.rekey_time: 5 s: at least 10 s (0: this end never rekeys)",
    ];
    assert_eq!(got, expected);
}

fn certs() -> TempDir {
    let d = dir();
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/../ikev2/tests/data/certs");
    for f in [
        "ca.pem",
        "gw-a.pem",
        "gw-a.key",
        "gw-b.key",
        "other.pem",
        "other.key",
        "other-ca.pem",
    ] {
        let text = std::fs::read_to_string(format!("{src}/{f}")).unwrap();
        d.write(f, &text);
    }
    d
}

const CERT_HEAD: &str = r#"
[[esp]]
name = "site"
local = "198.18.2.1"
remote = "198.18.2.2"

[esp.ike]
"#;

#[test]
fn certificates_are_read_and_checked() {
    let d = certs();
    let text = format!(
        "{PORTS}{CERT_HEAD}auth = \"pubkey\"\ncert_file = \"gw-a.pem\"\nkey_file = \"gw-a.key\"\nca_file = \"ca.pem\"\nremote_id = \"C=CH, O=linerate tests, CN=gw-b\"\n"
    );
    let c = load(&d.write("gw.toml", &text)).unwrap_or_else(|e| panic!("{e}"));
    let k = c.esps[0].ike.as_ref().unwrap();
    let IkeAuth::Pubkey {
        cert, remote_dn, ..
    } = &k.auth
    else {
        panic!("pubkey")
    };
    assert_eq!(cert.subject_text(), "C=CH, O=linerate tests, CN=gw-a");
    assert_eq!(
        remote_dn.as_deref(),
        Some("C=CH, O=linerate tests, CN=gw-b")
    );
    assert!(
        c.summary()
            .contains("as \"C=CH, O=linerate tests, CN=gw-a\""),
        "{}",
        c.summary()
    );
}

#[test]
fn bad_certificate_tables_give_their_errors() {
    let d = certs();
    let cases: &[(&str, &str)] = &[
        (
            "auth = \"rsa\"\npsk_file = \"site.psk\"\n",
            "esp[0].ike.auth: \"rsa\": \"psk\" (a pre-shared key) or \"pubkey\" (certificates)",
        ),
        (
            "auth = \"pubkey\"\ncert_file = \"gw-a.pem\"\nkey_file = \"gw-a.key\"\n",
            "esp[0].ike.ca_file: missing: the CA's certificate (PEM)",
        ),
        (
            "auth = \"pubkey\"\ncert_file = \"gw-a.pem\"\nkey_file = \"gw-b.key\"\nca_file = \"ca.pem\"\n",
            "gw-b.key: a PRIVATE KEY that is not a Rsa key",
        ),
        (
            "auth = \"pubkey\"\ncert_file = \"other.pem\"\nkey_file = \"other.key\"\nca_file = \"ca.pem\"\n",
            "is not issued by the CA",
        ),
        (
            "auth = \"pubkey\"\ncert_file = \"gw-a.pem\"\nkey_file = \"gw-a.key\"\nca_file = \"ca.pem\"\npsk_file = \"site.psk\"\n",
            "esp[0].ike.psk_file: a pre-shared key is for auth = \"psk\"",
        ),
        (
            "auth = \"pubkey\"\ncert_file = \"gw-a.pem\"\nkey_file = \"gw-a.key\"\nca_file = \"ca.pem\"\nremote_id = \"gw-b.example\"\n",
            "with certificates, the peer's subject as a DN",
        ),
        (
            "psk_file = \"site.psk\"\nca_file = \"ca.pem\"\n",
            "esp[0].ike.ca_file: a certificate is for auth = \"pubkey\"",
        ),
        (
            "auth = \"pubkey\"\ncert_file = \"site.psk\"\nkey_file = \"gw-a.key\"\nca_file = \"ca.pem\"\n",
            "site.psk: not PEM",
        ),
    ];
    for (body, needle) in cases {
        let got = errors_of(&d, &format!("{PORTS}{CERT_HEAD}{body}"));
        assert!(
            got.iter().any(|g| g.contains(needle)),
            "{body}: missing {needle:?} in {got:#?}"
        );
    }
}

#[test]
fn a_wireguard_interface_on_an_ike_port_is_refused() {
    let d = dir();
    d.write("wg0.key", "YHpWUm8JKLe6Ax4Fn2fQXYGX1WxnpTwLnQI5lGJBaHc=\n");
    let text = format!(
        "{PORTS}[[wireguard]]\nname = \"wg0\"\nprivate_key_file = \"wg0.key\"\nlisten_port = 4500\n\
         {CERT_HEAD}psk_file = \"site.psk\"\n"
    );
    let got = errors_of(&d, &text);
    assert!(
        got.iter()
            .any(|g| g
                .contains("esp[0].ike: IKE needs UDP ports 500 and 4500, and wg0 listens on 4500")),
        "{got:#?}"
    );
}

const ANY_PEER_TUNNEL: &str = r#"
[[esp]]
name = "roaming"
local = "198.18.2.1"
remote = "any"
local_ts = ["198.19.1.0/24"]
remote_ts = ["198.19.3.0/24"]
"#;

#[test]
fn a_responder_takes_its_peer_from_any_address() {
    let d = dir();
    let text = format!(
        "{PORTS}{ANY_PEER_TUNNEL}\n[esp.ike]\nremote_id = \"@gw-b.example\"\npsk_file = \"site.psk\"\nnat_keepalive = 15\n"
    );
    let c = load(&d.write("gw.toml", &text)).unwrap_or_else(|e| panic!("{e}"));
    let e = &c.esps[0];
    assert!(e.remote.is_unspecified() && e.remote.is_ipv4());
    let k = e.ike.as_ref().unwrap();
    assert!(!k.start);
    assert_eq!(k.nat_keepalive, 15);
    assert!(
        c.summary().contains("198.18.2.1 -> any peer"),
        "{}",
        c.summary()
    );
}

#[test]
fn any_peer_is_refused_where_this_end_must_know_where_to_send() {
    let d = dir();
    let starts = format!(
        "{PORTS}{ANY_PEER_TUNNEL}\n[esp.ike]\npsk_file = \"site.psk\"\nstart_action = \"start\"\nnat_keepalive = 7200\n"
    );
    assert_eq!(
        errors_of(&d, &starts),
        [
            "gw.toml:9: esp[0].remote: \"any\" is for a tunnel that waits for its peer: [esp.ike] with start_action = \"none\"",
            "gw.toml:16: esp[0].ike.nat_keepalive: 7200 is out of range (0..=3600)",
        ]
    );
    let manual = format!(
        "{PORTS}{ANY_PEER_TUNNEL}\n[esp.outbound]\nspi = 0x100\nalgorithm = \"aes128gcm16\"\nkey_file = \"site.psk\"\n"
    );
    assert_eq!(
        errors_of(&d, &manual)[0],
        "gw.toml:9: esp[0].remote: \"any\" is for a tunnel that waits for its peer: [esp.ike] with start_action = \"none\""
    );
}

#[test]
fn any_peer_needs_an_identity_and_one_tunnel_per_address() {
    let d = dir();
    let nobody = format!("{PORTS}{ANY_PEER_TUNNEL}\n[esp.ike]\npsk_file = \"site.psk\"\n");
    assert_eq!(
        errors_of(&d, &nobody),
        [
            "gw.toml:9: esp[0].remote: \"any\" takes the peer from any address: say who it is with remote_id in [esp.ike] (\"%any\" for whoever authenticates)"
        ]
    );
    let table = "\n[esp.ike]\npsk_file = \"site.psk\"\nremote_id = \"%any\"\n";
    let second = ANY_PEER_TUNNEL
        .replace("roaming", "second")
        .replace("198.19.3.0/24", "198.19.4.0/24");
    let two = format!("{PORTS}{ANY_PEER_TUNNEL}{table}{second}{table}");
    assert_eq!(
        errors_of(&d, &two),
        [
            "gw.toml:20: esp[1].remote: esp roaming takes any peer on 198.18.2.1 already: a second would never be chosen"
        ]
    );
}
