//! SIGHUP: the configuration file read again, validated whole, and what changed
//! applied to the running worker without touching what did not. A peer whose public
//! key stays keeps its sessions (only the settings that changed are set again); a
//! removed peer and its sessions go; routes are added, replaced and removed one by
//! one. An OpenVPN server whose settings changed gets them on its control thread
//! (see `ovpn::ServerSettings`). Ports, VXLAN tunnels, cross-connects, ESP tunnels,
//! the WireGuard interface's addresses and an OpenVPN server's place (name, port,
//! pools, MTU) change only with a restart: a file that changes them is refused as a
//! whole, and so is a file with any error, and the gateway runs on as it was.

use super::config::{GatewayConfig, PeerConfig, Prefix, WgConfig};
use super::settings::{fib_target, key_of, peer_settings};
use dataplane::gateway::GatewayGraph;
use std::fmt::Write as _;
use std::time::Instant;
use wireguard::PeerId;
use zeroize::Zeroizing;

/// One change to a running gateway.
enum Change {
    /// The WireGuard interface's listen port and inner MTU.
    Tunnel {
        listen_port: u16,
        mtu: u16,
    },
    /// A new private key: every session goes (they were made with the old one).
    PrivateKey(Zeroizing<[u8; 32]>),
    RemovePeer([u8; 32]),
    /// Added, or its settings set again (same public key: sessions kept).
    Peer(PeerConfig),
    RemoveRoute(Prefix),
    /// Added or replaced.
    Route(Prefix, dataplane::fib::RouteTarget),
}

/// What a reload changes, made off the packet path, applied on the worker.
pub struct Changes {
    changes: Vec<Change>,
    /// OpenVPN servers (by their place in the file) whose settings changed.
    ovpn: Vec<usize>,
}

impl Changes {
    /// The changes from `old` to `new`, or why the reload is refused.
    pub fn between(old: &GatewayConfig, new: &GatewayConfig) -> Result<Changes, String> {
        if old.ports != new.ports {
            return Err("the ports changed: ports change only with a restart".into());
        }
        if old.workers != new.workers || old.buffers != new.buffers || old.spread != new.spread {
            return Err("cores, buffers or spread changed: they change only with a restart".into());
        }
        if old.buffer_size() != new.buffer_size() {
            let why = super::config::jumbo_reason(&new.ports, &new.wireguard, &new.openvpns)
                .or_else(|| super::config::jumbo_reason(&old.ports, &old.wireguard, &old.openvpns))
                .unwrap_or_default();
            return Err(format!(
                "{why} moves the gateway between standard and jumbo buffers: the buffers change only with a restart"
            ));
        }
        if old.control != new.control || old.metrics != new.metrics {
            return Err(
                "the control socket or metrics address changed: restart to move them".into(),
            );
        }
        if !super::config::same_esps(&old.esps, &new.esps) {
            return Err("ESP tunnels or their SAs changed: they change only with a restart".into());
        }
        // A server's place (its name, port, pools and MTU) holds its clients'
        // addresses and routes on every worker; the rest is its settings.
        let places = |c: &GatewayConfig| {
            c.openvpns
                .iter()
                .map(|o| (o.name.clone(), o.listen_port, o.pool, o.pool6, o.mtu))
                .collect::<Vec<_>>()
        };
        if places(old) != places(new) {
            return Err(
                "OpenVPN servers were added, removed or renamed, or a server's listen_port, pools or mtu changed: they change only with a restart (its clients' addresses hang on them)".into(),
            );
        }
        let ovpn = old
            .openvpns
            .iter()
            .zip(&new.openvpns)
            .enumerate()
            .filter(|(_, (o, n))| o.fingerprint != n.fingerprint)
            .map(|(i, _)| i)
            .collect();
        if old.vxlans != new.vxlans || old.xconnects != new.xconnects {
            return Err(
                "VXLAN tunnels or cross-connects changed: they change only with a restart".into(),
            );
        }
        let addresses = |c: &GatewayConfig| {
            c.wireguard
                .iter()
                .map(|w| w.addresses.clone())
                .collect::<Vec<_>>()
        };
        if addresses(old) != addresses(new) {
            return Err(
                "a WireGuard interface's addresses changed: they change only with a restart".into(),
            );
        }
        let names = |c: &GatewayConfig| {
            c.wireguard
                .iter()
                .map(|w| w.name.clone())
                .collect::<Vec<_>>()
        };
        if names(old) != names(new) {
            return Err(
                "WireGuard interfaces were added, removed or renamed: restart for that".into(),
            );
        }
        let mut changes = Vec::new();
        if let (Some(o), Some(n)) = (old.wireguard.first(), new.wireguard.first()) {
            tunnel_changes(o, n, &mut changes);
        }
        for r in &old.routes {
            if !new.routes.iter().any(|n| n.prefix == r.prefix) {
                changes.push(Change::RemoveRoute(r.prefix));
            }
        }
        for r in &new.routes {
            if !old.routes.contains(r) {
                changes.push(Change::Route(r.prefix, fib_target(r.target)));
            }
        }
        Ok(Changes { changes, ovpn })
    }

    pub fn is_empty(&self) -> bool {
        self.changes.is_empty() && self.ovpn.is_empty()
    }

    /// The changes for the workers, and the OpenVPN servers whose settings
    /// changed (for their control thread).
    pub fn take_ovpn(self) -> (Changes, Vec<usize>) {
        let Changes { changes, ovpn } = self;
        (
            Changes {
                changes,
                ovpn: Vec::new(),
            },
            ovpn,
        )
    }

    /// What a follower applies to its own graph: the routes and the tunnel's port
    /// and MTU (the peers and keys are the owner's device's; the followers use its
    /// sessions).
    pub fn for_followers(&self) -> Changes {
        let changes = self
            .changes
            .iter()
            .filter_map(|c| match *c {
                Change::Tunnel { listen_port, mtu } => Some(Change::Tunnel { listen_port, mtu }),
                Change::RemoveRoute(p) => Some(Change::RemoveRoute(p)),
                Change::Route(p, t) => Some(Change::Route(p, t)),
                Change::PrivateKey(_) | Change::RemovePeer(_) | Change::Peer(_) => None,
            })
            .collect();
        Changes {
            changes,
            ovpn: Vec::new(),
        }
    }

    /// Carries the changes out on the worker's graph; what was done, one line each.
    pub fn apply(self, gw: &mut GatewayGraph, now: Instant) -> String {
        let mut out = String::new();
        for change in self.changes {
            let cx = gw.context_mut();
            match change {
                Change::Tunnel { listen_port, mtu } => {
                    gw.set_wireguard(listen_port, mtu.into());
                    let _ = writeln!(out, "tunnel: listen port {listen_port}, mtu {mtu}");
                }
                Change::PrivateKey(key) => {
                    let private = crypto::x25519::PrivateKey::from_bytes(*key);
                    cx.wg_device_mut().set_private_key(Some(private));
                    let _ = writeln!(out, "tunnel: new private key (sessions restart)");
                }
                Change::RemovePeer(public) => {
                    let dev = cx.wg_device_mut();
                    if let Some(id) = dev.peer_id(&key_of(&public)) {
                        dev.remove_peer(id);
                    }
                    let _ = writeln!(out, "peer {} removed", super::config::base64_key(&public));
                }
                Change::Peer(p) => {
                    let dev = cx.wg_device_mut();
                    let key = key_of(&p.public_key);
                    let (id, verb): (Option<PeerId>, &str) = match dev.peer_id(&key) {
                        Some(id) => (Some(id), "updated"),
                        None => (dev.add_peer(key), "added"),
                    };
                    match id {
                        Some(id) => {
                            peer_settings(dev, id, &p, now);
                            let _ = writeln!(
                                out,
                                "peer {} {verb}",
                                super::config::base64_key(&p.public_key)
                            );
                        }
                        None => {
                            let _ = writeln!(
                                out,
                                "peer refused: the device has no room or it is our own key"
                            );
                        }
                    }
                }
                Change::RemoveRoute(prefix) => {
                    cx.ip_mut().fib_mut().remove(prefix);
                    let _ = writeln!(out, "route {prefix} removed");
                }
                Change::Route(prefix, target) => {
                    let fib = cx.ip_mut().fib_mut();
                    fib.remove(prefix);
                    match fib.add(prefix, target) {
                        Ok(_) => {
                            let _ = writeln!(out, "route {prefix} set");
                        }
                        Err(e) => {
                            let _ = writeln!(out, "route {prefix} refused: {e}");
                        }
                    }
                }
            }
        }
        // Added peers with endpoints and keepalives may want to send at once.
        gw.run(now);
        if out.is_empty() {
            out.push_str("nothing changed\n");
        }
        out
    }
}

/// What changed in the one WireGuard interface, peer by peer.
fn tunnel_changes(old: &WgConfig, new: &WgConfig, out: &mut Vec<Change>) {
    if old.listen_port != new.listen_port || old.mtu != new.mtu {
        out.push(Change::Tunnel {
            listen_port: new.listen_port,
            mtu: new.mtu,
        });
    }
    if *old.private_key != *new.private_key {
        out.push(Change::PrivateKey(new.private_key.clone()));
    }
    for p in &old.peers {
        if !new.peers.iter().any(|n| n.public_key == p.public_key) {
            out.push(Change::RemovePeer(p.public_key));
        }
    }
    for p in &new.peers {
        let same = old
            .peers
            .iter()
            .find(|o| o.public_key == p.public_key)
            .is_some_and(|o| same_peer(o, p));
        if !same {
            out.push(Change::Peer(p.clone()));
        }
    }
}

fn same_peer(a: &PeerConfig, b: &PeerConfig) -> bool {
    a.endpoint == b.endpoint
        && a.allowed_ips == b.allowed_ips
        && a.persistent_keepalive == b.persistent_keepalive
        && a.preshared_key.as_deref() == b.preshared_key.as_deref()
}

#[cfg(test)]
mod tests {
    use super::Changes;
    use crate::gateway::config::load;
    use crate::gateway::config::tests_openvpn::{PORTS, SERVER, dir};

    #[test]
    fn a_reload_applies_a_servers_settings_but_not_its_place() {
        let d = dir();
        let text = format!("{PORTS}{SERVER}tls_crypt = \"ta.key\"\npool = \"198.19.50.0/24\"\n");
        let old = load(&d.write("gw.toml", &text)).unwrap();
        let same = load(&d.write("gw.toml", &text)).unwrap();
        assert!(Changes::between(&old, &same).unwrap().is_empty());
        let keepalive = load(&d.write("gw.toml", &format!("{text}keepalive = [5, 30]\n"))).unwrap();
        let (workers, servers) = Changes::between(&old, &keepalive).unwrap().take_ovpn();
        assert!(workers.is_empty());
        assert_eq!(servers, [0]);
        for (what, changed) in [
            ("the pool", text.replace("/24\"\n", "/25\"\n")),
            ("the port", format!("{text}listen_port = 1195\n")),
            ("the mtu", format!("{text}mtu = 1400\n")),
        ] {
            let new = load(&d.write("gw.toml", &changed)).unwrap();
            let why = Changes::between(&old, &new)
                .err()
                .unwrap_or_else(|| panic!("{what}"));
            assert!(why.contains("only with a restart"), "{what}: {why}");
        }
    }

    /// A WireGuard MTU that crosses into jumbo buffers cannot be applied to the
    /// running workers' arenas: refused, naming it; one that stays standard is
    /// applied.
    #[test]
    fn a_reload_across_the_jumbo_line_is_refused() {
        let d = dir();
        d.write("wg0.key", &format!("{}\n", "A".repeat(43) + "="));
        let wg = |mtu: u16| {
            format!(
                "[[port]]\nname = \"wan\"\ninterface = \"wan\"\ndriver = \"af_packet\"\naddresses = [\"198.18.2.1/24\"]\n\
                 [[wireguard]]\nname = \"wg0\"\nprivate_key_file = \"wg0.key\"\nlisten_port = 51820\nmtu = {mtu}\n"
            )
        };
        let old = load(&d.write("gw.toml", &wg(1420))).unwrap();
        let lower = load(&d.write("gw.toml", &wg(1400))).unwrap();
        assert!(Changes::between(&old, &lower).is_ok());
        let jumbo = load(&d.write("gw.toml", &wg(9000))).unwrap();
        let why = Changes::between(&old, &jumbo).err().expect("refused");
        assert!(
            why.contains("wireguard wg0's MTU 9000") && why.contains("only with a restart"),
            "{why}"
        );
    }
}
