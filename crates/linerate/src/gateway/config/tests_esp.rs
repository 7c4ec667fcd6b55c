//! `[[esp]]` tables: a good file and what it gives, and bad ones with their exact
//! errors.

use super::tests::{TempDir, errors_of};
use super::*;

const PORTS: &str = r#"[[port]]
name = "lan"
interface = "lan"
addresses = ["198.19.1.1/24"]

[[port]]
name = "wan"
interface = "wan"
addresses = ["198.18.2.1/24", "2001:2:0:2::1/64"]
"#;

const GOOD: &str = r#"
[[esp]]
name = "site"
local = "198.18.2.1"
remote = "198.18.2.2"
encapsulation = "udp"
remote_ts = ["198.19.3.0/24"]

[esp.outbound]
spi = 0xa0b1
algorithm = "aes128gcm16"
key_file = "a.key"
lifetime_packets = 1000000

[[esp.inbound]]
spi = 0xb0a1
algorithm = "chacha20poly1305"
key_file = "b.key"
esn = true
replay_window = 4096

[[esp]]
name = "six"
local = "2001:2:0:2::1"
remote = "2001:2:0:2::9"
mtu = 1300

[[route]]
prefix = "198.19.3.0/24"
tunnel = "site"
"#;

fn keys() -> TempDir {
    let dir = TempDir::new();
    dir.write("a.key", &format!("0x{}\n", "11".repeat(20)));
    dir.write("b.key", &"22".repeat(36));
    dir.write("short.key", &"33".repeat(19));
    dir.write("odd.key", "abc");
    dir
}

#[test]
fn a_good_file_gives_its_tunnels_and_sas() {
    let dir = keys();
    let path = dir.write("gw.toml", &format!("{PORTS}{GOOD}"));
    let c = load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.esps.len(), 2);
    let site = &c.esps[0];
    assert_eq!(site.udp_port, Some(4500));
    // The WAN port's 1500 less IPv4 (20), UDP (8) and ESP's most under AES-GCM (37).
    assert_eq!(site.mtu, 1500 - 20 - 8 - 37);
    assert_eq!(
        site.local_ts.len(),
        2,
        "everything of both families by default"
    );
    assert_eq!(site.remote_ts, vec!["198.19.3.0/24".parse().unwrap()]);
    let out = site.outbound.as_ref().unwrap();
    assert_eq!(out.spi, 0xa0b1);
    assert_eq!(out.algorithm, ipsec::EspAlgorithm::Aes128Gcm);
    assert_eq!(&out.keymat[..], &[0x11; 20][..]);
    assert_eq!(out.lifetime.packets, Some(1_000_000));
    assert!(!out.esn);
    let inb = &site.inbound[0];
    assert_eq!(inb.algorithm, ipsec::EspAlgorithm::ChaCha20Poly1305);
    assert!(inb.esn);
    assert_eq!(inb.replay_window, 4096);
    let six = &c.esps[1];
    assert_eq!((six.udp_port, six.mtu), (None, 1300));
    assert!(six.outbound.is_none() && six.inbound.is_empty());
    assert_eq!(c.routes[0].target, RouteTarget::Esp { tunnel: 0 });
    let summary = c.summary();
    assert!(
        summary.contains("esp site: 198.18.2.1 -> 198.18.2.2 in UDP port 4500, inner mtu 1435")
    );
    assert!(summary.contains("route 198.19.3.0/24: esp site"));
    assert!(
        !format!("{c:?}").contains("1111"),
        "key material in Debug output"
    );
}

#[test]
fn a_reload_sees_a_changed_key() {
    let dir = keys();
    let path = dir.write("gw.toml", &format!("{PORTS}{GOOD}"));
    let a = load(&path).unwrap();
    let b = load(&path).unwrap();
    assert!(same_esps(&a.esps, &b.esps));
    dir.write("a.key", &"12".repeat(20));
    let c = load(&path).unwrap();
    assert!(!same_esps(&a.esps, &c.esps));
}

/// Each entry: what it tests, the `[[esp]]` tables (after `PORTS`), the exact errors.
const BAD: &[(&str, &str, &[&str])] = &[
    (
        "addresses",
        r#"
[[esp]]
name = "a"
local = "198.18.2.7"
remote = "198.18.2.1"

[[esp]]
name = "b"
local = "198.18.2.1"
remote = "2001:2:0:2::9"

[[esp]]
name = "c"
local = "198.18.2.1"
remote = "203.0.113.1"
"#,
        &[
            "gw.toml:13: esp[0].local: 198.18.2.7 is not one of the gateway's addresses (a port's or a WireGuard interface's)",
            "gw.toml:14: esp[0].remote: 198.18.2.1 is the gateway's own address",
            "gw.toml:19: esp[1].remote: 2001:2:0:2::9 and the local address 198.18.2.1 are of different families",
            "gw.toml:24: esp[2].remote: no route to 203.0.113.1 (a port's network, a WireGuard interface's, or a [[route]])",
        ],
    ),
    (
        "encapsulation, port, selectors, mtu",
        r#"
[[esp]]
name = "a"
local = "198.18.2.1"
remote = "198.18.2.2"
encapsulation = "gre"
udp_port = 4501
local_ts = []
remote_ts = ["198.19.3.1/24"]
mtu = 1480
"#,
        &[
            "gw.toml:15: esp[0].encapsulation: \"gre\" is not an encapsulation (\"none\": ESP on IP; \"udp\": ESP in UDP, RFC 3948)",
            "gw.toml:16: esp[0].udp_port: a UDP port is for encapsulation = \"udp\"",
            "gw.toml:17: esp[0].local_ts: empty: leave it out for every address of both families",
            "gw.toml:18: esp[0].remote_ts[0]: \"198.19.3.1/24\" has host bits set (the prefix is 198.19.3.0/24)",
            "gw.toml:19: esp[0].mtu: 1480 does not fit the path to 198.18.2.2: port wan has MTU 1500, less 77 for ESP (the most any transform adds: the file names no outbound SA) and the outer headers leaves 1423",
        ],
    ),
    (
        "SAs",
        r#"
[[esp]]
name = "a"
local = "198.18.2.1"
remote = "198.18.2.2"

[esp.outbound]
spi = 255
algorithm = "aes128-cbc"
key_file = "a.key"
replay_window = 64

[[esp.inbound]]
spi = 0x100
algorithm = "aes128gcm16"
key_file = "short.key"
esn = true
replay_window = 0

[[esp.inbound]]
spi = 0x100
algorithm = "aes256gcm16"
key_file = "odd.key"
replay_window = 16
"#,
        &[
            "gw.toml:17: esp[0].outbound.spi: 255 is out of range (256..=4294967295)",
            "gw.toml:18: esp[0].outbound.algorithm: \"aes128-cbc\" is not an algorithm served (one of aes128gcm16, aes256gcm16, chacha20poly1305, aes128-sha1, aes256-sha1, aes128-sha256, aes256-sha256)",
            "gw.toml:20: esp[0].outbound.replay_window: the replay window is an inbound SA's",
            "gw.toml:25: esp[0].inbound[0].key_file: short.key: holds 19 bytes, expected 20 (aes128gcm16: 16 bytes of key and 4 of salt)",
            "gw.toml:27: esp[0].inbound[0].replay_window: 0 turns the check off, which ESN cannot do without (the high half of each sequence number is inferred from the window)",
            "gw.toml:32: esp[0].inbound[1].key_file: odd.key: not hex digits (aes256gcm16: 32 bytes of key and 4 of salt)",
            "gw.toml:33: esp[0].inbound[1].replay_window: 16 is below 32 (0 turns the check off)",
        ],
    ),
    (
        "an inbound SPI twice to one address",
        r#"
[[esp]]
name = "a"
local = "198.18.2.1"
remote = "198.18.2.2"

[[esp.inbound]]
spi = 0x100
algorithm = "aes128gcm16"
key_file = "a.key"

[[esp]]
name = "b"
local = "198.18.2.1"
remote = "198.18.2.3"

[[esp.inbound]]
spi = 0x100
algorithm = "aes128gcm16"
key_file = "a.key"

[[route]]
prefix = "198.19.3.0/24"
tunnel = "c"
"#,
        &[
            "gw.toml:27: esp[1].inbound[0].spi: SPI 0x100 to this local address is already an inbound SA of esp a",
            "gw.toml:33: route[0].tunnel: no tunnel named \"c\" (wireguard interfaces: none; esp tunnels: a, b)",
        ],
    ),
];

#[test]
fn bad_esp_tables_give_their_errors() {
    let dir = keys();
    let mut wrong = Vec::new();
    for &(what, text, expected) in BAD {
        let got = errors_of(&dir, &format!("{PORTS}{text}"));
        if got != expected {
            wrong.push(format!(
                "{what}:\n  expected: {expected:#?}\n  got: {got:#?}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
