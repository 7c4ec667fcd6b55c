//! Bad files and the exact errors they give; the example file; defaults; keys kept out
//! of messages and Debug output.

use super::*;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A directory of its own under the system's temporary directory, removed on drop.
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    pub(crate) fn new() -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "linerate-gateway-config-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub(crate) fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Test keys: fixed bytes, not keys anyone uses.
const PRIVATE: [u8; 32] = [0x41; 32];
const OTHER_PRIVATE: [u8; 32] = [0x42; 32];
const PSK: [u8; 32] = [0x43; 32];
const PEER_A: &str = "X++HHLxQ/IfLpkcthgOLGH0QhngZiW0CPQyNcixePt0=";
const PEER_B: &str = "oJp8bszVf/IuI0/WMJJ+HirztfBhLeMCts5v8I0C2i4=";

fn own_public() -> String {
    base64_key(
        &crypto::x25519::PrivateKey::from_bytes(PRIVATE)
            .public_key()
            .0,
    )
}

/// A directory holding the key files the table's files name.
fn key_dir() -> TempDir {
    let dir = TempDir::new();
    dir.write("wg0.key", &format!("{}\n", STANDARD.encode(PRIVATE)));
    dir.write("wg1.key", &format!("{}\n", STANDARD.encode(OTHER_PRIVATE)));
    dir.write("psk", &format!("{}\n", STANDARD.encode(PSK)));
    dir.write("garbage.key", "this is not a key\n");
    dir.write(
        "two.key",
        &format!("{}\n{}\n", STANDARD.encode(PRIVATE), STANDARD.encode(PSK)),
    );
    dir.write("short.key", &format!("{}\n", STANDARD.encode([1u8; 31])));
    dir
}

/// Writes `text` as `gw.toml` beside the key files and validates it: every error,
/// with the directory taken out of the file names and paths.
pub(super) fn errors_of(dir: &TempDir, text: &str) -> Vec<String> {
    let text = text.replace("{own_public}", &own_public());
    let path = dir.write("gw.toml", &text);
    let shown = format!("{}/", dir.0.display());
    match load(&path) {
        Ok(_) => Vec::new(),
        Err(e) => {
            e.0.iter()
                .map(|e| e.to_string().replace(&shown, ""))
                .collect()
        }
    }
}

const PORT: &str = r#"[[port]]
name = "lan"
interface = "eth0"
addresses = ["198.18.1.1/24"]
"#;

/// Each entry: what it tests, the file (after `PORT` when the first field says so), the
/// exact errors.
const BAD: &[(&str, bool, &str, &[&str])] = &[
    (
        "syntax error",
        true,
        "[gateway]\ncores = [0,\nbuffers = 1024\n",
        &["gw.toml:7: TOML syntax: unexpected `=` in array, expected value, `]`"],
    ),
    (
        "unknown top-level key",
        true,
        "[routes]\nprefix = \"0.0.0.0/0\"\n",
        &[
            "gw.toml:5: routes: unknown key (allowed: gateway, port, wireguard, route, vxlan, xconnect, esp, openvpn)",
        ],
    ),
    (
        "unknown key in [gateway]",
        false,
        "[gateway]\nworkers = 2\n",
        &[
            "gw.toml:1: port: no [[port]]: a gateway needs at least one port",
            "gw.toml:2: gateway.workers: unknown key (allowed: cores, control, metrics, buffers, spread)",
        ],
    ),
    (
        "unknown key in a port",
        false,
        "[[port]]\nname = \"lan\"\ninterface = \"eth0\"\naddresses = [\"198.18.1.1/24\"]\nspeed = 10000\n",
        &[
            "gw.toml:5: port[0].speed: unknown key (allowed: name, interface, driver, addresses, mtu, zero_copy)",
        ],
    ),
    (
        "unknown key in a peer",
        true,
        "[[wireguard]]\nname = \"wg0\"\nprivate_key_file = \"wg0.key\"\nlisten_port = 51820\n\
         [[wireguard.peer]]\npublic_key = \"X++HHLxQ/IfLpkcthgOLGH0QhngZiW0CPQyNcixePt0=\"\nfwmark = 7\n",
        &[
            "gw.toml:11: wireguard[0].peer[0].fwmark: unknown key (allowed: public_key, preshared_key_file, endpoint, allowed_ips, persistent_keepalive)",
        ],
    ),
    (
        "missing required keys, each named",
        false,
        "[[port]]\nname = \"lan\"\n",
        &["gw.toml:1: port[0].interface: missing (this key is required)"],
    ),
    (
        "wrong type",
        false,
        "[[port]]\nname = \"lan\"\ninterface = \"eth0\"\naddresses = [\"198.18.1.1/24\"]\nmtu = \"1500\"\n",
        &["gw.toml:5: port[0].mtu: expected an integer, found string \"1500\""],
    ),
    (
        "wrong type inside an array",
        false,
        "[gateway]\ncores = [0, true]\n[[port]]\nname = \"lan\"\ninterface = \"eth0\"\naddresses = [\"198.18.1.1/24\"]\n",
        &["gw.toml:2: gateway.cores[1]: expected an integer, found boolean `true`"],
    ),
    (
        "an integer too large for 64 bits",
        true,
        "[[wireguard]]\nname = \"wg0\"\nprivate_key_file = \"wg0.key\"\nlisten_port = 99999999999999999999\n",
        &["gw.toml:8: wireguard[0].listen_port: 99999999999999999999 is too large"],
    ),
    (
        "a table where an array of tables goes",
        false,
        "[port]\nname = \"lan\"\n",
        &["gw.toml:1: port: expected an array of tables ([[port]])"],
    ),
    (
        "no port at all",
        false,
        "[gateway]\nbuffers = 4096\n",
        &["gw.toml:1: port: no [[port]]: a gateway needs at least one port"],
    ),
    (
        "bad address",
        false,
        "[[port]]\nname = \"lan\"\ninterface = \"eth0\"\naddresses = [\"198.18.1.300/24\"]\n",
        &[
            "gw.toml:4: port[0].addresses[0]: \"198.18.1.300/24\" is not an address with a prefix length (\"198.18.1.300\" is not an IP address)",
        ],
    ),
    (
        "address without a prefix length",
        false,
        "[[port]]\nname = \"lan\"\ninterface = \"eth0\"\naddresses = [\"198.18.1.1\"]\n",
        &[
            "gw.toml:4: port[0].addresses[0]: \"198.18.1.1\" is not an address with a prefix length (no /LENGTH)",
        ],
    ),
    (
        "prefix length out of range",
        true,
        "[[port]]\nname = \"wan\"\ninterface = \"eth1\"\naddresses = [\"2001:2:0:2::1/64\",\n  \"198.18.2.1/33\"]\n",
        &[
            "gw.toml:9: port[1].addresses[1]: \"198.18.2.1/33\" is not an address with a prefix length (IPv4 prefix lengths go up to 32)",
        ],
    ),
    (
        "IPv6 prefix length out of range",
        false,
        "[[port]]\nname = \"lan\"\ninterface = \"eth0\"\naddresses = [\"2001:2::1/129\"]\n",
        &[
            "gw.toml:4: port[0].addresses[0]: \"2001:2::1/129\" is not an address with a prefix length (IPv6 prefix lengths go up to 128)",
        ],
    ),
    (
        "empty addresses",
        false,
        "[[port]]\nname = \"lan\"\ninterface = \"eth0\"\naddresses = []\n",
        &[
            "gw.toml:2: port[0].addresses: none, and no [[xconnect]] from this port: a port needs addresses, or a cross-connect to carry its frames",
        ],
    ),
    (
        "host bits set in a route",
        true,
        "[[route]]\nprefix = \"198.18.3.1/24\"\nblackhole = true\n",
        &[
            "gw.toml:6: route[0].prefix: \"198.18.3.1/24\" has host bits set (the prefix is 198.18.3.0/24)",
        ],
    ),
    (
        "host bits set in allowed IPs",
        true,
        "[[wireguard]]\nname = \"wg0\"\nprivate_key_file = \"wg0.key\"\nlisten_port = 51820\n\
         [[wireguard.peer]]\npublic_key = \"X++HHLxQ/IfLpkcthgOLGH0QhngZiW0CPQyNcixePt0=\"\nallowed_ips = [\"2001:2:0:3::1/64\"]\n",
        &[
            "gw.toml:11: wireguard[0].peer[0].allowed_ips[0]: \"2001:2:0:3::1/64\" has host bits set (the prefix is 2001:2:0:3::/64)",
        ],
    ),
    (
        "an allowed IP on two peers",
        true,
        "[[wireguard]]\nname = \"wg0\"\nprivate_key_file = \"wg0.key\"\nlisten_port = 51820\n\
         [[wireguard.peer]]\npublic_key = \"X++HHLxQ/IfLpkcthgOLGH0QhngZiW0CPQyNcixePt0=\"\nallowed_ips = [\"198.18.3.0/24\"]\n\
         [[wireguard.peer]]\npublic_key = \"oJp8bszVf/IuI0/WMJJ+HirztfBhLeMCts5v8I0C2i4=\"\nallowed_ips = [\"198.18.3.0/24\"]\n",
        &[
            "gw.toml:14: wireguard[0].peer[1].allowed_ips[0]: 198.18.3.0/24 is already an allowed IP of peer[0] of this interface",
        ],
    ),
    (
        "duplicate names across ports and wireguard",
        true,
        "[[wireguard]]\nname = \"lan\"\nprivate_key_file = \"wg0.key\"\nlisten_port = 51820\n",
        &["gw.toml:6: wireguard[0].name: \"lan\" is already the name of port[0]"],
    ),
    (
        "bad name characters",
        false,
        "[[port]]\nname = \"Lan.1\"\ninterface = \"eth0\"\naddresses = [\"198.18.1.1/24\"]\n",
        &["gw.toml:2: port[0].name: \"Lan.1\" is not a name (1 to 15 of a-z, 0-9, _ and -)"],
    ),
    (
        "interface taken twice",
        true,
        "[[port]]\nname = \"wan\"\ninterface = \"eth0\"\naddresses = [\"198.18.2.1/24\"]\n",
        &["gw.toml:7: port[1].interface: interface \"eth0\" is already taken by port[0]"],
    ),
    (
        "bad driver",
        false,
        "[[port]]\nname = \"lan\"\ninterface = \"eth0\"\ndriver = \"dpdk\"\naddresses = [\"198.18.1.1/24\"]\n",
        &["gw.toml:4: port[0].driver: \"dpdk\" is not a driver (af_xdp or af_packet)"],
    ),
    (
        "zero copy with af_packet",
        false,
        "[[port]]\nname = \"lan\"\ninterface = \"eth0\"\ndriver = \"af_packet\"\naddresses = [\"198.18.1.1/24\"]\nzero_copy = true\n",
        &[
            "gw.toml:6: port[0].zero_copy: zero copy is an af_xdp option (this port's driver is af_packet)",
        ],
    ),
    (
        "port mtu out of range",
        false,
        "[[port]]\nname = \"lan\"\ninterface = \"eth0\"\naddresses = [\"198.18.1.1/24\"]\nmtu = 575\n",
        &["gw.toml:5: port[0].mtu: 575 is out of range (576..=9216)"],
    ),
    (
        "IPv6 on a port with mtu 1279",
        false,
        "[[port]]\nname = \"lan\"\ninterface = \"eth0\"\naddresses = [\"198.18.1.1/24\", \"2001:2:0:1::1/64\"]\nmtu = 1279\n",
        &[
            "gw.toml:5: port[0].mtu: 1279 is below 1280, the least MTU of a port with an IPv6 address (2001:2:0:1::1/64)",
        ],
    ),
    (
        "missing key file",
        true,
        "[[wireguard]]\nname = \"wg0\"\nprivate_key_file = \"nowhere.key\"\nlisten_port = 51820\n",
        &[
            "gw.toml:7: wireguard[0].private_key_file: nowhere.key: cannot read: No such file or directory (os error 2)",
        ],
    ),
    (
        "key file with garbage",
        true,
        "[[wireguard]]\nname = \"wg0\"\nprivate_key_file = \"garbage.key\"\nlisten_port = 51820\n",
        &[
            "gw.toml:7: wireguard[0].private_key_file: garbage.key: not a base64 32-byte key (as `wg genkey` writes it)",
        ],
    ),
    (
        "key file with 31 bytes",
        true,
        "[[wireguard]]\nname = \"wg0\"\nprivate_key_file = \"short.key\"\nlisten_port = 51820\n",
        &[
            "gw.toml:7: wireguard[0].private_key_file: short.key: not a base64 32-byte key (as `wg genkey` writes it)",
        ],
    ),
    (
        "key file with two keys",
        true,
        "[[wireguard]]\nname = \"wg0\"\nprivate_key_file = \"wg0.key\"\nlisten_port = 51820\n\
         [[wireguard.peer]]\npublic_key = \"X++HHLxQ/IfLpkcthgOLGH0QhngZiW0CPQyNcixePt0=\"\npreshared_key_file = \"two.key\"\n",
        &[
            "gw.toml:11: wireguard[0].peer[0].preshared_key_file: two.key: holds 2 keys; a key file holds exactly one",
        ],
    ),
    (
        "peer key not base64 of 32 bytes",
        true,
        "[[wireguard]]\nname = \"wg0\"\nprivate_key_file = \"wg0.key\"\nlisten_port = 51820\n\
         [[wireguard.peer]]\npublic_key = \"X++HHLxQ/IfLpkcthgOLGH0QhngZiW0CPQyNcixePt0\"\n",
        &["gw.toml:10: wireguard[0].peer[0].public_key: not 32 bytes of base64"],
    ),
    (
        "duplicate peer key",
        true,
        "[[wireguard]]\nname = \"wg0\"\nprivate_key_file = \"wg0.key\"\nlisten_port = 51820\n\
         [[wireguard.peer]]\npublic_key = \"X++HHLxQ/IfLpkcthgOLGH0QhngZiW0CPQyNcixePt0=\"\n\
         [[wireguard.peer]]\npublic_key = \"oJp8bszVf/IuI0/WMJJ+HirztfBhLeMCts5v8I0C2i4=\"\n\
         [[wireguard.peer]]\npublic_key = \"X++HHLxQ/IfLpkcthgOLGH0QhngZiW0CPQyNcixePt0=\"\n",
        &[
            "gw.toml:14: wireguard[0].peer[2].public_key: the same public key as peer[0] of this interface",
        ],
    ),
    (
        "peer with the interface's own key",
        true,
        "[[wireguard]]\nname = \"wg0\"\nprivate_key_file = \"wg0.key\"\nlisten_port = 51820\n\
         [[wireguard.peer]]\npublic_key = \"{own_public}\"\n",
        &[
            "gw.toml:10: wireguard[0].peer[0].public_key: the interface's own public key (a peer is another machine)",
        ],
    ),
    (
        "endpoint with a host name",
        true,
        "[[wireguard]]\nname = \"wg0\"\nprivate_key_file = \"wg0.key\"\nlisten_port = 51820\n\
         [[wireguard.peer]]\npublic_key = \"X++HHLxQ/IfLpkcthgOLGH0QhngZiW0CPQyNcixePt0=\"\nendpoint = \"vpn.example.com:51820\"\n",
        &[
            "gw.toml:11: wireguard[0].peer[0].endpoint: \"vpn.example.com:51820\" is not ip:port or [ipv6]:port (host names are not resolved)",
        ],
    ),
    (
        "IPv6 endpoint without brackets",
        true,
        "[[wireguard]]\nname = \"wg0\"\nprivate_key_file = \"wg0.key\"\nlisten_port = 51820\n\
         [[wireguard.peer]]\npublic_key = \"X++HHLxQ/IfLpkcthgOLGH0QhngZiW0CPQyNcixePt0=\"\nendpoint = \"2001:2::2:51820\"\n",
        &[
            "gw.toml:11: wireguard[0].peer[0].endpoint: \"2001:2::2:51820\" is not ip:port or [ipv6]:port (host names are not resolved)",
        ],
    ),
    (
        "keepalive 0",
        true,
        "[[wireguard]]\nname = \"wg0\"\nprivate_key_file = \"wg0.key\"\nlisten_port = 51820\n\
         [[wireguard.peer]]\npublic_key = \"X++HHLxQ/IfLpkcthgOLGH0QhngZiW0CPQyNcixePt0=\"\npersistent_keepalive = 0\n",
        &["gw.toml:11: wireguard[0].peer[0].persistent_keepalive: 0 is out of range (1..=65535)"],
    ),
    (
        "listen port 0",
        true,
        "[[wireguard]]\nname = \"wg0\"\nprivate_key_file = \"wg0.key\"\nlisten_port = 0\n",
        &["gw.toml:8: wireguard[0].listen_port: 0 is out of range (1..=65535)"],
    ),
    (
        "duplicate listen port",
        true,
        "[[wireguard]]\nname = \"wg0\"\nprivate_key_file = \"wg0.key\"\nlisten_port = 51820\n\
         [[wireguard]]\nname = \"wg1\"\nprivate_key_file = \"wg1.key\"\nlisten_port = 51820\n",
        &["gw.toml:12: wireguard[1].listen_port: port 51820 is already wireguard[0].listen_port"],
    ),
    (
        "wireguard mtu out of range",
        true,
        "[[wireguard]]\nname = \"wg0\"\nprivate_key_file = \"wg0.key\"\nlisten_port = 51820\nmtu = 9217\n",
        &["gw.toml:9: wireguard[0].mtu: 9217 is out of range (1280..=9216)"],
    ),
    (
        "route with two targets",
        true,
        "[[route]]\nprefix = \"0.0.0.0/0\"\nport = \"lan\"\nblackhole = true\n",
        &[
            "gw.toml:8: route[0]: more than one target (port, blackhole): give one of port (with an optional via), tunnel, or blackhole = true",
        ],
    ),
    (
        "route with no target",
        true,
        "[[route]]\nprefix = \"0.0.0.0/0\"\nblackhole = false\n",
        &[
            "gw.toml:5: route[0]: no target: give one of port (with an optional via), tunnel, or blackhole = true",
        ],
    ),
    (
        "via with a tunnel",
        true,
        "[[wireguard]]\nname = \"wg0\"\nprivate_key_file = \"wg0.key\"\nlisten_port = 51820\n\
         [[route]]\nprefix = \"0.0.0.0/0\"\ntunnel = \"wg0\"\nvia = \"198.18.1.2\"\n",
        &["gw.toml:12: route[0].via: a next hop is for a route out of a port"],
    ),
    (
        "route to an unknown port",
        true,
        "[[route]]\nprefix = \"0.0.0.0/0\"\nport = \"wan\"\n",
        &["gw.toml:7: route[0].port: no port named \"wan\" (ports: lan)"],
    ),
    (
        "route to an unknown tunnel",
        true,
        "[[route]]\nprefix = \"0.0.0.0/0\"\ntunnel = \"wg9\"\n",
        &[
            "gw.toml:7: route[0].tunnel: no tunnel named \"wg9\" (wireguard interfaces: none; esp tunnels: none)",
        ],
    ),
    (
        "route to a tunnel given as a port",
        true,
        "[[wireguard]]\nname = \"wg0\"\nprivate_key_file = \"wg0.key\"\nlisten_port = 51820\n\
         [[route]]\nprefix = \"0.0.0.0/0\"\nport = \"wg0\"\n",
        &["gw.toml:11: route[0].port: \"wg0\" is a wireguard interface: write tunnel = \"wg0\""],
    ),
    (
        "via outside the port's networks",
        true,
        "[[route]]\nprefix = \"0.0.0.0/0\"\nvia = \"198.18.2.254\"\nport = \"lan\"\n",
        &[
            "gw.toml:7: route[0].via: 198.18.2.254 is not inside a network of port \"lan\" (198.18.1.0/24)",
        ],
    ),
    (
        "via of the other family",
        true,
        "[[route]]\nprefix = \"::/0\"\nvia = \"198.18.1.254\"\nport = \"lan\"\n",
        &["gw.toml:7: route[0].via: 198.18.1.254 is IPv4 but the prefix ::/0 is IPv6"],
    ),
    (
        "via is the gateway's own address",
        true,
        "[[route]]\nprefix = \"0.0.0.0/0\"\nvia = \"198.18.1.1\"\nport = \"lan\"\n",
        &["gw.toml:7: route[0].via: 198.18.1.1 is the gateway's own address on port \"lan\""],
    ),
    (
        "route to the port's own network",
        true,
        "[[route]]\nprefix = \"198.18.1.0/24\"\nport = \"lan\"\n",
        &[
            "gw.toml:6: route[0].prefix: 198.18.1.0/24 is a network of port \"lan\", routed without a [[route]]",
        ],
    ),
    (
        "route out of another port to a port's own network",
        true,
        "[[port]]\nname = \"wan\"\ninterface = \"eth1\"\naddresses = [\"198.18.2.1/24\"]\n\
         [[route]]\nprefix = \"198.18.1.0/24\"\nport = \"wan\"\nvia = \"198.18.2.254\"\n",
        &[
            "gw.toml:10: route[0].prefix: 198.18.1.0/24 is a network of port \"lan\", routed without a [[route]]",
        ],
    ),
    (
        "route into a tunnel for a port's own network",
        true,
        "[[wireguard]]\nname = \"wg0\"\nprivate_key_file = \"wg0.key\"\nlisten_port = 51820\n\
         [[route]]\nprefix = \"198.18.1.0/24\"\ntunnel = \"wg0\"\n",
        &[
            "gw.toml:10: route[0].prefix: 198.18.1.0/24 is a network of port \"lan\", routed without a [[route]]",
        ],
    ),
    (
        "two ports on overlapping networks",
        true,
        "[[port]]\nname = \"wan\"\ninterface = \"eth1\"\naddresses = [\"198.18.0.1/16\"]\n",
        &[
            "gw.toml:8: port[1].addresses[0]: network 198.18.0.0/16 overlaps 198.18.1.0/24, a network of port[0] (\"lan\"): ports need networks apart",
        ],
    ),
    (
        "metrics on a port's address",
        false,
        "[gateway]\nmetrics = \"198.18.1.1:9586\"\n[[port]]\nname = \"lan\"\ninterface = \"eth0\"\naddresses = [\"198.18.1.1/24\"]\n",
        &[
            "gw.toml:2: gateway.metrics: 198.18.1.1 is an address of port lan, which the gateway answers itself: the metrics listen on an address of the host's own (of lo, or a management interface)",
        ],
    ),
    (
        "duplicate route prefix",
        true,
        "[[route]]\nprefix = \"198.18.3.0/24\"\nblackhole = true\n[[route]]\nprefix = \"198.18.3.0/24\"\nport = \"lan\"\n",
        &["gw.toml:9: route[1].prefix: route[0] is a route to 198.18.3.0/24 already"],
    ),
    (
        "duplicate core",
        true,
        "[gateway]\ncores = [0, 1, 0]\n",
        &["gw.toml:6: gateway.cores[2]: core 0 is already gateway.cores[0]"],
    ),
    (
        "core number too large",
        true,
        "[gateway]\ncores = [1024]\n",
        &["gw.toml:6: gateway.cores[0]: 1024 is not a core number (0..=1023)"],
    ),
    (
        "spread with one worker",
        true,
        "[gateway]\ncores = [1]\nspread = true\n",
        &[
            "gw.toml:7: gateway.spread: there is one worker, so nothing to spread over (give `cores` two cores or more, or leave spread out)",
        ],
    ),
    (
        "gateway values",
        true,
        "[gateway]\ncores = []\ncontrol = \"gw.sock\"\nmetrics = \"localhost:9586\"\nbuffers = 1023\n",
        &[
            "gw.toml:6: gateway.cores: empty (leave cores out for one worker that is not pinned)",
            "gw.toml:7: gateway.control: \"gw.sock\" is not an absolute path",
            "gw.toml:8: gateway.metrics: \"localhost:9586\" is not ip:port or [ipv6]:port (host names are not resolved)",
            "gw.toml:9: gateway.buffers: 1023 is out of range (1024..=262144)",
        ],
    ),
    (
        "vxlan values",
        true,
        "[[vxlan]]\nname = \"vx0\"\nvni = 16777216\nlocal = \"198.18.9.9\"\nremote = \"198.18.1.1\"\n",
        &[
            "gw.toml:7: vxlan[0].vni: 16777216 is out of range (0..=16777215)",
            "gw.toml:8: vxlan[0].local: 198.18.9.9 is not one of the gateway's addresses (a port's or a WireGuard interface's)",
            "gw.toml:9: vxlan[0].remote: 198.18.1.1 is the gateway's own address",
        ],
    ),
    (
        "vxlan inner MTU over what the path carries",
        true,
        "[[wireguard]]\nname = \"wg0\"\nprivate_key_file = \"wg0.key\"\nlisten_port = 51820\n\
         addresses = [\"198.18.10.1/30\"]\n[[vxlan]]\nname = \"vx0\"\nvni = 10\nlocal = \"198.18.10.1\"\n\
         remote = \"198.18.10.2\"\nmtu = 1500\n",
        &[
            "gw.toml:15: vxlan[0].mtu: 1500 does not fit the path to 198.18.10.2: tunnel wg0 has MTU 1420, less 36 for the outer IP, UDP and VXLAN headers and 22 for the inner Ethernet header with two VLAN tags leaves 1362 (raise tunnel wg0's MTU to 1558 to carry 1500)",
        ],
    ),
    (
        "a cross-connected port larger than its tunnel carries",
        true,
        "[[port]]\nname = \"lan2\"\ninterface = \"eth2\"\n\
         [[wireguard]]\nname = \"wg0\"\nprivate_key_file = \"wg0.key\"\nlisten_port = 51820\n\
         addresses = [\"198.18.10.1/30\"]\n[[vxlan]]\nname = \"vx0\"\nvni = 10\nlocal = \"198.18.10.1\"\n\
         remote = \"198.18.10.2\"\n[[xconnect]]\nfrom = \"lan2\"\nto = \"vx0\"\n[[xconnect]]\nfrom = \"vx0\"\nto = \"lan2\"\n",
        &[
            "gw.toml:18: xconnect[0]: vxlan vx0 carries frames of an inner MTU of 1362, less than port lan2's MTU 1500: the segment's full-size frames would be dropped (give the path to 198.18.10.2 138 bytes more MTU, or lower port lan2's mtu)",
            "gw.toml:21: xconnect[1]: vxlan vx0 carries frames of an inner MTU of 1362, less than port lan2's MTU 1500: the segment's full-size frames would be dropped (give the path to 198.18.10.2 138 bytes more MTU, or lower port lan2's mtu)",
        ],
    ),
    (
        "vxlan remote without a route",
        true,
        "[[vxlan]]\nname = \"vx0\"\nvni = 10\nlocal = \"198.18.1.1\"\nremote = \"198.18.77.7\"\nudp_port = 0\n",
        &[
            "gw.toml:9: vxlan[0].remote: no route to 198.18.77.7 (a port's network, a WireGuard interface's, or a [[route]])",
            "gw.toml:10: vxlan[0].udp_port: 0 is out of range (1..=65535)",
        ],
    ),
    (
        "cross-connect errors",
        true,
        "[[port]]\nname = \"lan2\"\ninterface = \"eth1\"\n[[xconnect]]\nfrom = \"lan\"\nto = \"nowhere\"\n\
         [[xconnect]]\nfrom = \"lan2\"\nto = \"lan2\"\n",
        &[
            "gw.toml:6: port[1].addresses: none, and no [[xconnect]] from this port: a port needs addresses, or a cross-connect to carry its frames",
            "gw.toml:9: xconnect[0].from: port lan has addresses: a cross-connected port is taken whole (give it none)",
            "gw.toml:10: xconnect[0].to: \"nowhere\" is neither a port nor a VXLAN tunnel",
            "gw.toml:13: xconnect[1].to: the same interface as from",
        ],
    ),
    (
        "a tunnel address that is a port's",
        true,
        "[[wireguard]]\nname = \"wg0\"\nprivate_key_file = \"wg0.key\"\nlisten_port = 51820\n\
         addresses = [\"198.18.1.1/30\"]\n",
        &["gw.toml:9: wireguard[0].addresses[0]: 198.18.1.1 is already an address of port lan"],
    ),
    (
        "a tunnel address listed twice",
        true,
        "[[wireguard]]\nname = \"wg0\"\nprivate_key_file = \"wg0.key\"\nlisten_port = 51820\n\
         addresses = [\"198.18.10.1/30\",\n\"198.18.10.1/30\"]\n",
        &[
            "gw.toml:10: wireguard[0].addresses[1]: 198.18.10.1 is already wireguard[0].addresses[0]",
        ],
    ),
    (
        "several errors in one file, all reported in file order",
        false,
        r#"[[route]]
prefix = "198.18.9.0/24"
port = "lan"
via = "198.18.1.300"

[[port]]
name = "lan"
interface = "eth0"
addresses = ["198.18.1.1/24"]
mtu = 9217

[gateway]
cores = [3, 3]
colour = "blue"

[[wireguard]]
name = "wg0"
private_key_file = "garbage.key"
listen_port = 70000

[[wireguard.peer]]
public_key = "nope"
allowed_ips = ["198.18.3.0/33"]
"#,
        &[
            "gw.toml:4: route[0].via: \"198.18.1.300\" is not an IP address",
            "gw.toml:10: port[0].mtu: 9217 is out of range (576..=9216)",
            "gw.toml:13: gateway.cores[1]: core 3 is already gateway.cores[0]",
            "gw.toml:14: gateway.colour: unknown key (allowed: cores, control, metrics, buffers, spread)",
            "gw.toml:18: wireguard[0].private_key_file: garbage.key: not a base64 32-byte key (as `wg genkey` writes it)",
            "gw.toml:19: wireguard[0].listen_port: 70000 is out of range (1..=65535)",
            "gw.toml:22: wireguard[0].peer[0].public_key: not 32 bytes of base64",
            "gw.toml:23: wireguard[0].peer[0].allowed_ips[0]: \"198.18.3.0/33\" is not a prefix (IPv4 prefix lengths go up to 32)",
        ],
    ),
];

#[test]
fn every_bad_file_gives_its_errors() {
    let dir = key_dir();
    let mut wrong = Vec::new();
    for &(what, with_port, text, expected) in BAD {
        let text = if with_port {
            format!("{PORT}{text}")
        } else {
            text.to_string()
        };
        let got = errors_of(&dir, &text);
        if got != expected {
            wrong.push(format!(
                "{what}:\n  expected: {expected:#?}\n  got: {got:#?}"
            ));
        }
    }
    assert!(BAD.len() >= 25);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The example in docs/, beside the key files it names (made here: the repository
/// holds no keys).
fn example() -> (TempDir, Result<GatewayConfig, ConfigErrors>) {
    let dir = TempDir::new();
    dir.write("gw-a.key", &format!("{}\n", STANDARD.encode(PRIVATE)));
    dir.write("gw-a-b.psk", &format!("{}\n", STANDARD.encode(PSK)));
    let path = dir.write(
        "gateway.toml",
        include_str!("../../../../../docs/gateway.example.toml"),
    );
    let config = load(&path);
    (dir, config)
}

#[test]
fn the_example_validates() {
    let (dir, config) = example();
    let c = config.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.workers, [Some(1), Some(2)]);
    assert_eq!(c.control, Path::new("/run/linerate/gw-a.sock"));
    assert_eq!(c.metrics, Some("198.18.0.1:9586".parse().unwrap()));
    assert_eq!(c.buffers, 8192);
    let names: Vec<&str> = c.ports.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["lan", "wan"]);
    assert_eq!(c.ports[0].driver, Driver::AfXdp);
    assert_eq!(c.ports[1].driver, Driver::AfPacket);
    assert_eq!(
        c.ports[0].addresses,
        [
            ("198.18.1.1".parse().unwrap(), 24),
            ("2001:2:0:1::1".parse().unwrap(), 64)
        ]
    );
    let wg = &c.wireguard[0];
    assert_eq!(wg.private_key_file, dir.0.join("gw-a.key"));
    assert_eq!(*wg.private_key, PRIVATE);
    assert_eq!(base64_key(&wg.public_key), own_public());
    assert_eq!((wg.listen_port, wg.mtu), (51820, 1420));
    assert_eq!(wg.peers.len(), 2);
    assert_eq!(base64_key(&wg.peers[0].public_key), PEER_A);
    assert_eq!(wg.peers[0].preshared_key.as_deref(), Some(&PSK));
    assert_eq!(wg.peers[0].persistent_keepalive, Some(25));
    assert_eq!(base64_key(&wg.peers[1].public_key), PEER_B);
    assert_eq!(wg.peers[1].endpoint, None);
    let p = |s: &str| s.parse::<Prefix>().unwrap();
    assert_eq!(
        wg.peers[0].allowed_ips,
        [p("198.18.3.0/24"), p("2001:2:0:3::/64")]
    );
    let routes: Vec<(Prefix, RouteTarget)> =
        c.routes.iter().map(|r| (r.prefix, r.target)).collect();
    assert_eq!(
        routes,
        [
            (
                p("0.0.0.0/0"),
                RouteTarget::Port {
                    port: 1,
                    via: Some("198.18.2.254".parse().unwrap())
                }
            ),
            (p("198.18.3.0/24"), RouteTarget::Tunnel { tunnel: 0 }),
            (p("2001:2:0:3::/64"), RouteTarget::Tunnel { tunnel: 0 }),
            (p("198.18.4.0/24"), RouteTarget::Tunnel { tunnel: 0 }),
            (p("198.18.5.0/24"), RouteTarget::Port { port: 0, via: None }),
            (p("198.18.9.0/24"), RouteTarget::Blackhole),
        ]
    );
}

#[test]
fn what_is_left_out_has_its_default() {
    let dir = TempDir::new();
    // An absolute key file path is taken as it is.
    let key = dir.write("elsewhere.key", &STANDARD.encode(PRIVATE));
    let text = format!(
        "{PORT}[[wireguard]]\nname = \"wg0\"\nprivate_key_file = {:?}\nlisten_port = 1\n",
        key.display().to_string()
    );
    let c = parse(&text, Path::new("/nonexistent/gw.toml")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.workers, [None]);
    assert_eq!(c.control, Path::new(DEFAULT_CONTROL));
    assert_eq!(c.metrics, None);
    assert_eq!(c.buffers, DEFAULT_BUFFERS);
    let port = &c.ports[0];
    assert_eq!(
        (port.driver, port.mtu, port.zero_copy),
        (Driver::AfXdp, DEFAULT_PORT_MTU, false)
    );
    assert_eq!(c.wireguard[0].mtu, DEFAULT_WG_MTU);
    assert!(c.wireguard[0].peers.is_empty());
    assert!(c.routes.is_empty());
}

#[test]
fn keys_stay_out_of_debug_output_and_messages() {
    let (_dir, config) = example();
    let debug = format!("{:?}", config.unwrap());
    for secret in [STANDARD.encode(PRIVATE), STANDARD.encode(PSK)] {
        assert!(!debug.contains(&secret), "{debug}");
    }
    for secret in [PRIVATE, PSK] {
        assert!(!debug.contains(&format!("{:?}", secret)), "{debug}");
        assert!(!debug.contains(&hex::encode(secret)), "{debug}");
    }
    assert!(debug.contains("private_key: (hidden)"), "{debug}");
    assert!(debug.contains("preshared_key: (hidden)"), "{debug}");

    // A key file that is almost right: a key, then something more.
    let dir = TempDir::new();
    let key = STANDARD.encode(PRIVATE);
    for text in [
        format!("{key} x\n"),
        format!("{key}{key}\n"),
        key[1..].to_string(),
    ] {
        dir.write("wg0.key", &text);
        let errors = errors_of(
            &dir,
            &format!(
                "{PORT}[[wireguard]]\nname = \"wg0\"\nprivate_key_file = \"wg0.key\"\nlisten_port = 1\n"
            ),
        );
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(!errors[0].contains(&key[1..20]), "{errors:?}");
    }
}

#[test]
fn a_key_file_may_end_in_a_newline() {
    let dir = TempDir::new();
    let key = STANDARD.encode(PRIVATE);
    for text in [key.clone(), format!("{key}\n"), format!("{key}\r\n")] {
        let path = dir.write("k", &text);
        assert_eq!(
            *crate::keyfile::read_key_file(&path).unwrap(),
            PRIVATE,
            "{text:?}"
        );
    }
    let path = dir.write("k", "");
    assert!(
        crate::keyfile::read_key_file(&path)
            .unwrap_err()
            .ends_with(": empty (expected one base64 key, as `wg genkey` writes it)")
    );
}

#[test]
fn an_unreadable_file_is_one_error_without_a_line() {
    let e = load(Path::new("/nonexistent/gw.toml")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "/nonexistent/gw.toml: cannot read: No such file or directory (os error 2)"
    );
}

#[test]
fn the_example_with_any_line_lost_or_doubled_gives_errors_with_lines_or_validates() {
    let (dir, _) = example();
    let text = include_str!("../../../../../docs/gateway.example.toml");
    let lines: Vec<&str> = text.lines().collect();
    for i in 0..lines.len() {
        for doubled in [false, true] {
            let mut changed: Vec<&str> = lines.clone();
            if doubled {
                changed.insert(i, lines[i]);
            } else {
                changed.remove(i);
            }
            let path = dir.write("changed.toml", &changed.join("\n"));
            if let Err(errors) = load(&path) {
                assert!(!errors.0.is_empty());
                for e in &errors.0 {
                    let line = e.line.unwrap_or_else(|| panic!("{e}"));
                    assert!((1..=changed.len()).contains(&line), "{e}");
                }
            }
        }
    }
}

/// Standard ports run on standard buffers; a jumbo port (either driver) or a jumbo
/// tunnel puts every worker on jumbo ones.
#[test]
fn jumbo_ports_or_tunnels_choose_jumbo_buffers() {
    let (_dir, config) = example();
    let c = config.unwrap();
    assert_eq!(c.buffer_size(), dataplane::STANDARD_BUFFER);
    let dir = key_dir();
    let port = |mtu: u16| {
        format!(
            "[[port]]\nname = \"lan\"\ninterface = \"eth0\"\ndriver = \"af_packet\"\naddresses = [\"198.18.1.1/24\"]\nmtu = {mtu}\n"
        )
    };
    let wg = |mtu: u16| {
        format!(
            "[[wireguard]]\nname = \"wg0\"\nprivate_key_file = \"wg0.key\"\nlisten_port = 51820\nmtu = {mtu}\n"
        )
    };
    for (text, buffer) in [
        (port(1500), dataplane::STANDARD_BUFFER),
        (port(1874), dataplane::STANDARD_BUFFER),
        (port(1875), dataplane::JUMBO_BUFFER),
        (port(9216), dataplane::JUMBO_BUFFER),
        (port(9216) + &wg(9000), dataplane::JUMBO_BUFFER),
        (port(1500) + &wg(1856), dataplane::STANDARD_BUFFER),
        (port(1500) + &wg(1857), dataplane::JUMBO_BUFFER),
    ] {
        let path = dir.write("gw.toml", &text);
        let c = load(&path).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(c.buffer_size(), buffer, "{text}");
    }
}
