//! A configuration's values in the data plane's terms, for start-up and for a
//! reload alike: a peer's key and settings on the device, a route's target in the
//! FIB.

use super::config::{PeerConfig, RouteTarget};
use crypto::x25519::PublicKey;
use dataplane::fib::PortId;
use std::time::Instant;
use wireguard::{Device, PeerId};

/// The WireGuard interface's tunnel (one per gateway).
const WG_TUNNEL: dataplane::fib::TunnelId = dataplane::context::WG_TUNNEL;

/// A peer's public key as the device holds it.
pub fn key_of(bytes: &[u8; 32]) -> PublicKey {
    PublicKey(*bytes)
}

/// A configured route as the FIB holds it (port numbers are the config's order,
/// which is the order the ports are added in).
pub fn fib_target(t: RouteTarget) -> dataplane::fib::RouteTarget {
    use dataplane::fib::RouteTarget as Fib;
    match t {
        RouteTarget::Port {
            port,
            via: Some(next_hop),
        } => Fib::Via {
            port: PortId(port as u16),
            next_hop,
        },
        RouteTarget::Port { port, via: None } => Fib::Attached {
            port: PortId(port as u16),
        },
        RouteTarget::Tunnel { .. } => Fib::Tunnel(WG_TUNNEL),
        RouteTarget::Esp { tunnel } => Fib::Tunnel(dataplane::context::esp_tunnel(
            dataplane::esp::EspTunnelId(tunnel as u16),
        )),
        RouteTarget::Blackhole => Fib::Blackhole,
    }
}

/// Sets a peer's preshared key, endpoint, keepalive and allowed IPs from the file.
pub fn peer_settings(dev: &mut Device, id: PeerId, p: &PeerConfig, now: Instant) {
    dev.set_preshared_key(id, p.preshared_key.as_deref().copied().unwrap_or([0; 32]));
    if let Some(e) = p.endpoint {
        dev.set_endpoint(id, e);
    }
    dev.set_persistent_keepalive(id, p.persistent_keepalive.unwrap_or(0), now);
    dev.clear_allowed_ips(id);
    for &prefix in &p.allowed_ips {
        dev.add_allowed_ip(id, prefix);
    }
}
