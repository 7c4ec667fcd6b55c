//! `linerate gateway --check -c FILE`, the built binary end to end: the example in
//! docs/ validates and its summary names every port, tunnel, peer and route; a bad file
//! fails with its errors on stderr as FILE:LINE: KEY: message. Needs nothing of the
//! machine (no root, no interfaces).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A directory of its own, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "linerate-gateway-check-{tag}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The example beside the key files it names (made here from fixed test bytes).
fn example_dir(tag: &str) -> TempDir {
    let dir = TempDir::new(tag);
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/gateway.example.toml");
    std::fs::copy(example, dir.0.join("gateway.toml")).unwrap();
    let key = |b: u8| format!("{}\n", STANDARD.encode([b; 32]));
    for (name, byte) in [("gw-a.key", 0x51), ("gw-a-b.psk", 0x52)] {
        let path = dir.0.join(name);
        std::fs::write(&path, key(byte)).unwrap();
        // As `wg genkey` leaves them under umask 077: no warning on stderr.
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
    }
    dir
}

fn check(dir: &Path, file: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_linerate"))
        .current_dir(dir)
        .args(["gateway", "--check", "-c", file])
        .output()
        .unwrap()
}

#[test]
fn the_example_checks_and_is_summarized() {
    let dir = example_dir("good");
    let out = check(&dir.0, "gateway.toml");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert_eq!(stderr, "");
    for line in [
        "gateway.toml: valid",
        "workers: 2 (core 1, core 2)",
        "control: /run/linerate/gw-a.sock",
        "metrics: 198.18.0.1:9586",
        "buffers: 8192 per worker, 2048 bytes each (16 MiB reserved per worker)",
        "port lan: interface gwa-lan, af_xdp, mtu 1500, 198.18.1.1/24 2001:2:0:1::1/64",
        "port wan: interface gwa-wan, af_packet, mtu 1500, 198.18.2.1/24",
        "  peer X++HHLxQ/IfLpkcthgOLGH0QhngZiW0CPQyNcixePt0=: endpoint 198.18.2.2:51820, \
         allowed IPs 198.18.3.0/24 2001:2:0:3::/64, keepalive 25 s, preshared key",
        "  peer oJp8bszVf/IuI0/WMJJ+HirztfBhLeMCts5v8I0C2i4=: no endpoint, allowed IPs 198.18.4.0/24",
        "route 0.0.0.0/0: via 198.18.2.254 port wan",
        "route 198.18.3.0/24: tunnel wg0",
        "route 2001:2:0:3::/64: tunnel wg0",
        "route 198.18.4.0/24: tunnel wg0",
        "route 198.18.5.0/24: port lan",
        "route 198.18.9.0/24: blackhole",
    ] {
        assert!(
            stdout.lines().any(|l| l == line),
            "no line {line:?} in:\n{stdout}"
        );
    }
    let tunnel = stdout
        .lines()
        .find(|l| l.starts_with("tunnel wg0: "))
        .unwrap_or_else(|| panic!("no tunnel line in:\n{stdout}"));
    assert!(tunnel.starts_with("tunnel wg0: listen port 51820, mtu 1420, public key "));
    assert!(tunnel.ends_with(", 2 peers"), "{tunnel}");
    // The private and preshared keys are not printed.
    for b in [0x51u8, 0x52] {
        assert!(!stdout.contains(&STANDARD.encode([b; 32])), "{stdout}");
    }
    assert_eq!(stdout.lines().count(), 1 + 4 + 2 + 1 + 2 + 6, "{stdout}");
}

#[test]
fn a_bad_file_fails_with_its_errors_on_stderr() {
    let dir = example_dir("bad");
    let text = std::fs::read_to_string(dir.0.join("gateway.toml")).unwrap();
    let bad = text
        .replace("mtu = 1500\n", "mtu = 1279\n")
        .replace("listen_port = 51820", "listen_port = 0");
    assert_ne!(bad, text);
    std::fs::write(dir.0.join("bad.toml"), &bad).unwrap();
    let line_of = |needle: &str| 1 + bad.lines().position(|l| l.starts_with(needle)).unwrap();
    let out = check(&dir.0, "bad.toml");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert_eq!(stdout, "");
    assert_eq!(
        stderr,
        format!(
            "bad.toml:{}: port[0].mtu: 1279 is below 1280, the least MTU of a port with an IPv6 \
             address (2001:2:0:1::1/64)\n\
             bad.toml:{}: wireguard[0].listen_port: 0 is out of range (1..=65535)\n\
             linerate: bad.toml: 2 errors\n",
            line_of("mtu = 1279"),
            line_of("listen_port = 0"),
        )
    );
}

#[test]
fn the_key_files_are_found_beside_the_configuration() {
    // Checked from another directory: the relative key paths still resolve.
    let dir = example_dir("elsewhere");
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .current_dir(std::env::temp_dir())
        .args(["gateway", "--check", "-c"])
        .arg(dir.0.join("gateway.toml"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Without its key file the example is refused, naming the key.
    std::fs::remove_file(dir.0.join("gw-a.key")).unwrap();
    let out = check(&dir.0, "gateway.toml");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr.contains(": wireguard[0].private_key_file: ")
            && stderr.contains("gw-a.key: cannot read"),
        "{stderr}"
    );
}

#[test]
fn a_gateway_whose_interface_is_missing_does_not_start() {
    let dir = example_dir("run");
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .current_dir(&dir.0)
        .args(["gateway", "-c", "gateway.toml"])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The example's LAN port is gwa-lan, which this machine has not.
    assert!(
        stderr.contains("port lan: interface gwa-lan: gwa-lan: reading its Ethernet address"),
        "{stderr}"
    );
}
