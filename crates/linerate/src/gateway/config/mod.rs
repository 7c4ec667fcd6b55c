//! The gateway mode's configuration file: one declarative TOML file (its format is
//! `docs/gateway.example.toml`, annotated) turned into a validated [`GatewayConfig`] or
//! every error in it, each `FILE:LINE: KEY: message`.
//!
//! Validation reads the key files it names (a relative path is taken from the
//! configuration file's directory) and nothing else of the machine: interfaces and CPUs
//! are checked at start-up, not here.
//!
//! - `raw`: the file as written, each table deserialized on its own with its spans;
//! - `validate`: the whole file, `[gateway]` and the ports, names across tables;
//! - `checks`: what every table's checks share (where errors go, ranges, key files);
//! - `wireguard`, `routes`: those tables and the checks between them and the rest;
//! - `l2`: `[[vxlan]]` and `[[xconnect]]`, and the path MTU of each tunnel;
//! - `esp`: `[[esp]]` tunnels and their manual SAs;
//! - `values`: names, addresses, prefixes and socket addresses as written;
//! - `error`: the error and its `FILE:LINE: KEY:` form;
//! - `summary`: what `linerate gateway --check` prints.

mod checks;
mod error;
mod esp;
mod ike;
mod ike_auth;
pub use ike_auth::IkeAuth;
mod l2;
pub mod ovpn;
mod raw;
mod routes;
mod summary;
mod validate;
mod values;
mod wireguard;

pub use error::{ConfigError, ConfigErrors};
pub use lpm::Prefix;

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use zeroize::Zeroizing;

pub use crate::control::socket::DEFAULT_CONTROL;

/// Packet buffers per worker when the file says nothing.
pub const DEFAULT_BUFFERS: usize = 8192;
pub const DEFAULT_PORT_MTU: u16 = 1500;
pub const DEFAULT_WG_MTU: u16 = 1420;

/// A validated gateway configuration.
#[derive(Debug)]
pub struct GatewayConfig {
    /// One entry per worker: the core it is pinned to, or `None` (no `cores`: one
    /// worker, not pinned).
    pub workers: Vec<Option<usize>>,
    pub control: PathBuf,
    pub metrics: Option<SocketAddr>,
    /// Packet buffers per worker.
    pub buffers: usize,
    /// A worker with a full frame to seal or open cuts it into pieces for the
    /// workers that are idle (`crypto_async::spread`): one tunnel whose datagrams
    /// all reach one queue still uses every core. Idle workers then poll a little
    /// longer instead of sleeping at once.
    pub spread: bool,
    /// At least one.
    pub ports: Vec<PortConfig>,
    pub wireguard: Vec<WgConfig>,
    pub routes: Vec<RouteConfig>,
    pub vxlans: Vec<VxlanConfig>,
    /// Each RX interface once.
    pub xconnects: Vec<XconnectConfig>,
    pub esps: Vec<EspConfig>,
    pub openvpns: Vec<OvpnConfig>,
}

/// An OpenVPN server of the gateway.
pub struct OvpnConfig {
    pub name: String,
    pub listen_port: u16,
    /// Its certificate and key, and the CA (and CRL) clients are checked
    /// against.
    pub tls: std::sync::Arc<::openvpn::tls::ServerTls>,
    pub protection: OvpnProtection,
    /// The IPv4 pool: the server takes its first address, clients the rest.
    pub pool: Option<Prefix>,
    pub pool6: Option<Prefix>,
    /// Routes pushed to clients, besides the pools.
    pub push_routes: Vec<Prefix>,
    /// In the order offered.
    pub ciphers: Vec<::openvpn::DataCipher>,
    /// Seconds after which the server renegotiates a key (0: never; clients may).
    pub reneg_sec: u32,
    /// Seconds between keepalive pings, and without a packet from a client
    /// before it is let go.
    pub ping: u32,
    pub ping_restart: u32,
    /// The inner MTU (OpenVPN's tun-mtu).
    pub mtu: u16,
    /// A digest of the table and the files it names: equal for an unchanged
    /// server.
    pub fingerprint: [u8; 32],
}

/// How an OpenVPN server protects its control channel.
pub enum OvpnProtection {
    None,
    Auth {
        key: ::openvpn::static_key::Key2,
        direction: ::openvpn::static_key::Direction,
        digest: ::openvpn::tls_auth::AuthDigest,
    },
    Crypt {
        key: ::openvpn::static_key::Key2,
    },
    /// Each client's own tls-crypt key, wrapped under this server key.
    CryptV2 {
        server_key: std::sync::Arc<::openvpn::tls_crypt_v2::ServerKey>,
    },
}

impl OvpnProtection {
    pub fn describe(&self) -> &'static str {
        match self {
            OvpnProtection::None => "none",
            OvpnProtection::Auth { .. } => "tls-auth",
            OvpnProtection::Crypt { .. } => "tls-crypt",
            OvpnProtection::CryptV2 { .. } => "tls-crypt-v2",
        }
    }
}

impl fmt::Debug for OvpnConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OvpnConfig")
            .field("name", &self.name)
            .field("listen_port", &self.listen_port)
            .field("protection", &self.protection.describe())
            .field("pool", &self.pool)
            .field("pool6", &self.pool6)
            .field("push_routes", &self.push_routes)
            .field("ciphers", &self.ciphers)
            .field("reneg_sec", &self.reneg_sec)
            .finish_non_exhaustive()
    }
}

/// An ESP tunnel of the gateway, with its manual SAs.
#[derive(Debug)]
pub struct EspConfig {
    pub name: String,
    /// One of the gateway's addresses.
    pub local: IpAddr,
    /// Of local's family, not the gateway's.
    pub remote: IpAddr,
    /// ESP in UDP (RFC 3948) from and to this port; `None`: ESP on IP.
    pub udp_port: Option<u16>,
    pub local_ts: Vec<Prefix>,
    pub remote_ts: Vec<Prefix>,
    /// The largest inner packet; it fits the path to `remote`.
    pub mtu: u16,
    pub outbound: Option<SaConfig>,
    /// SPIs unique per local address.
    pub inbound: Vec<SaConfig>,
    /// The key exchange that negotiates the SAs instead (then none are manual).
    pub ike: Option<IkeConfig>,
}

/// An `[esp.ike]` table: how the tunnel's SAs are negotiated.
pub struct IkeConfig {
    pub auth: IkeAuth,
    /// IKE and ESP proposals in strongSwan's keywords, checked.
    pub proposals: Vec<String>,
    pub esp_proposals: Vec<String>,
    /// `start_action = "start"`: initiate, and again whenever the SA closes.
    pub start: bool,
    /// Force ESP in UDP (strongSwan's `encap`).
    pub encap: bool,
    /// Seconds without a message before a liveness check (0: none).
    pub dpd_delay: u32,
    /// Seconds between NAT keepalives while a NAT is in front of us (0: none).
    pub nat_keepalive: u32,
    pub retransmit_timeout: u32,
    pub retransmit_tries: u32,
    /// Seconds after which this end rekeys the child (ESP) SA and the IKE SA (0:
    /// never; the peer may).
    pub rekey_time: u32,
    pub ike_rekey_time: u32,
}

/// A manual SA.
pub struct SaConfig {
    pub spi: u32,
    pub algorithm: ipsec::EspAlgorithm,
    /// Where the key material was read from (resolved).
    pub key_file: PathBuf,
    /// Key then salt.
    pub keymat: Zeroizing<Vec<u8>>,
    pub esn: bool,
    /// Inbound only (0: off).
    pub replay_window: u32,
    pub lifetime: ipsec::Lifetime,
}

impl fmt::Debug for SaConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SaConfig")
            .field("spi", &format_args!("{:#x}", self.spi))
            .field("algorithm", &self.algorithm)
            .field("key_file", &self.key_file)
            .field("keymat", &format_args!("(hidden)"))
            .field("esn", &self.esn)
            .field("replay_window", &self.replay_window)
            .field("lifetime", &self.lifetime)
            .finish()
    }
}

impl fmt::Debug for IkeConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IkeConfig")
            .field("auth", &self.auth.describe())
            .field("proposals", &self.proposals)
            .field("esp_proposals", &self.esp_proposals)
            .field("start", &self.start)
            .field("encap", &self.encap)
            .field("dpd_delay", &self.dpd_delay)
            .finish_non_exhaustive()
    }
}

/// How a port reaches its interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Driver {
    AfXdp,
    AfPacket,
}

impl Driver {
    /// The name the file uses.
    pub fn name(self) -> &'static str {
        match self {
            Driver::AfXdp => "af_xdp",
            Driver::AfPacket => "af_packet",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortConfig {
    pub name: String,
    /// The Linux interface the gateway takes over (not checked to exist here).
    pub interface: String,
    pub driver: Driver,
    /// The gateway's own addresses on this port, each with its network's prefix
    /// length; none exactly when the port is cross-connected (an L2 port, taken
    /// whole).
    pub addresses: Vec<(IpAddr, u8)>,
    pub mtu: u16,
    /// AF_XDP only: ask for zero copy (the driver falls back to copy).
    pub zero_copy: bool,
}

/// A WireGuard interface of the gateway.
pub struct WgConfig {
    pub name: String,
    /// Where the private key was read from (resolved).
    pub private_key_file: PathBuf,
    // Read by the gateway's start-up, which does not exist yet.
    #[allow(dead_code)]
    pub private_key: Zeroizing<[u8; 32]>,
    /// Derived from the private key.
    pub public_key: [u8; 32],
    pub listen_port: u16,
    /// The inner MTU.
    pub mtu: u16,
    /// The gateway's own addresses inside the tunnel (each a local address, its
    /// network routed into the tunnel), for what the gateway itself sends through
    /// it, VXLAN above all.
    pub addresses: Vec<(IpAddr, u8)>,
    pub peers: Vec<PeerConfig>,
}

/// A VXLAN tunnel of the gateway.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VxlanConfig {
    pub name: String,
    pub vni: u32,
    /// One of the gateway's addresses (a port's or a WireGuard interface's).
    pub local: IpAddr,
    /// Of local's family, not the gateway's.
    pub remote: IpAddr,
    pub udp_port: u16,
    /// The largest inner frame's Ethernet payload (untagged); it fits the path.
    pub mtu: u16,
    /// The most `mtu` could be on this path.
    pub max_mtu: u16,
}

/// An interface a cross-connect joins, by its index in the file's tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum L2Endpoint {
    Port(usize),
    Vxlan(usize),
}

/// Frames received on `from` leave by `to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XconnectConfig {
    pub from: L2Endpoint,
    pub to: L2Endpoint,
}

#[derive(Clone)]
pub struct PeerConfig {
    pub public_key: [u8; 32],
    pub preshared_key: Option<Zeroizing<[u8; 32]>>,
    pub endpoint: Option<SocketAddr>,
    /// Host bits zero.
    pub allowed_ips: Vec<Prefix>,
    /// Seconds.
    pub persistent_keepalive: Option<u16>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RouteConfig {
    /// Host bits zero; no two routes have the same prefix.
    pub prefix: Prefix,
    pub target: RouteTarget,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouteTarget {
    /// Out of `ports[port]`, to `via` (inside one of the port's networks, the prefix's
    /// family) or, without one, to the destination itself (a connected network).
    Port { port: usize, via: Option<IpAddr> },
    /// Into `wireguard[tunnel]`, whose peers' allowed IPs choose the peer.
    Tunnel { tunnel: usize },
    /// Into `esp[tunnel]`.
    Esp { tunnel: usize },
    /// Dropped.
    Blackhole,
}

/// A public key in the base64 `wg` shows.
pub fn base64_key(key: &[u8; 32]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(key)
}

impl fmt::Debug for WgConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WgConfig")
            .field("name", &self.name)
            .field("private_key_file", &self.private_key_file)
            .field("private_key", &format_args!("(hidden)"))
            .field(
                "public_key",
                &format_args!("{}", base64_key(&self.public_key)),
            )
            .field("listen_port", &self.listen_port)
            .field("mtu", &self.mtu)
            .field("peers", &self.peers)
            .finish()
    }
}

impl fmt::Debug for PeerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PeerConfig")
            .field(
                "public_key",
                &format_args!("{}", base64_key(&self.public_key)),
            )
            .field(
                "preshared_key",
                &format_args!(
                    "{}",
                    if self.preshared_key.is_some() {
                        "(hidden)"
                    } else {
                        "None"
                    }
                ),
            )
            .field("endpoint", &self.endpoint)
            .field("allowed_ips", &self.allowed_ips)
            .field("persistent_keepalive", &self.persistent_keepalive)
            .finish()
    }
}

/// Whether two files' ESP tunnels are the same, keys included (compared in constant
/// time: they are secrets).
pub fn same_esps(a: &[EspConfig], b: &[EspConfig]) -> bool {
    let same_key = |x: &[u8], y: &[u8]| {
        x.len() == y.len() && x.iter().zip(y).fold(0u8, |acc, (p, q)| acc | (p ^ q)) == 0
    };
    let same_sa = |x: &SaConfig, y: &SaConfig| {
        (x.spi, x.algorithm, x.esn, x.replay_window, x.lifetime)
            == (y.spi, y.algorithm, y.esn, y.replay_window, y.lifetime)
            && same_key(&x.keymat, &y.keymat)
    };
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            (
                &x.name,
                x.local,
                x.remote,
                x.udp_port,
                &x.local_ts,
                &x.remote_ts,
                x.mtu,
            ) == (
                &y.name,
                y.local,
                y.remote,
                y.udp_port,
                &y.local_ts,
                &y.remote_ts,
                y.mtu,
            ) && match (&x.outbound, &y.outbound) {
                (Some(p), Some(q)) => same_sa(p, q),
                (None, None) => true,
                _ => false,
            } && x.inbound.len() == y.inbound.len()
                && x.inbound.iter().zip(&y.inbound).all(|(p, q)| same_sa(p, q))
                && match (&x.ike, &y.ike) {
                    (Some(p), Some(q)) => same_ike(p, q) && p.auth.same(&q.auth),
                    (None, None) => true,
                    _ => false,
                }
        })
}

/// Everything of two `[esp.ike]` tables but the secret.
fn same_ike(x: &IkeConfig, y: &IkeConfig) -> bool {
    (
        &x.proposals,
        &x.esp_proposals,
        x.start,
        x.encap,
        x.dpd_delay,
        x.retransmit_timeout,
        x.retransmit_tries,
        x.rekey_time,
        x.ike_rekey_time,
    ) == (
        &y.proposals,
        &y.esp_proposals,
        y.start,
        y.encap,
        y.dpd_delay,
        y.retransmit_timeout,
        y.retransmit_tries,
        y.rekey_time,
        y.ike_rekey_time,
    )
}

/// Reads and validates the file at `path`; errors name it as given.
pub fn load(path: &Path) -> Result<GatewayConfig, ConfigErrors> {
    match std::fs::read_to_string(path) {
        Ok(text) => parse(&text, path),
        Err(e) => Err(ConfigErrors(vec![ConfigError {
            file: path.display().to_string(),
            line: None,
            key: String::new(),
            message: format!("cannot read: {e}"),
        }])),
    }
}

/// Validates `text`, the contents of `file`: errors name `file`, and relative key file
/// paths are taken from its directory.
pub fn parse(text: &str, file: &Path) -> Result<GatewayConfig, ConfigErrors> {
    let mut sink = error::Sink::new(file.display().to_string(), text);
    // Empty for a file in the current directory: its key files are named as written.
    let base = file.parent().unwrap_or(Path::new(""));
    let config =
        raw::split(text, &mut sink).and_then(|raw| validate::validate(raw, base, &mut sink));
    match config {
        Some(config) if sink.is_empty() => Ok(config),
        _ => {
            let errors = sink.finish();
            debug_assert!(!errors.is_empty(), "refused without an error");
            Err(ConfigErrors(errors))
        }
    }
}

/// The largest OpenVPN server MTU standard buffers carry: a client's full-size
/// packet over IPv6 outside, with its Ethernet, IPv6, UDP and data-channel headers
/// (14 + 40 + 8 + 24), fits their 1,888 bytes of room with some to spare.
pub const STANDARD_OVPN_MTU: u16 = 1600;

/// What makes a gateway run on jumbo buffers, in words ("port wan's MTU 9216"), or
/// `None` where standard ones carry every port's frames and the tunnels' packets.
pub(crate) fn jumbo_reason(
    ports: &[PortConfig],
    wireguard: &[WgConfig],
    openvpns: &[OvpnConfig],
) -> Option<String> {
    let standard = dataplane::STANDARD_BUFFER;
    if let Some(p) = ports
        .iter()
        .find(|p| p.mtu > dataplane::gateway::max_port_mtu(standard))
    {
        return Some(format!("port {}'s MTU {}", p.name, p.mtu));
    }
    if let Some(w) = wireguard
        .iter()
        .find(|w| usize::from(w.mtu) > dataplane::wg::max_mtu(standard))
    {
        return Some(format!("wireguard {}'s MTU {}", w.name, w.mtu));
    }
    openvpns
        .iter()
        .find(|o| o.mtu > STANDARD_OVPN_MTU)
        .map(|o| format!("openvpn {}'s MTU {}", o.name, o.mtu))
}

impl GatewayConfig {
    /// The size of every worker's packet buffers: jumbo where a port or the tunnel
    /// needs them ([`jumbo_reason`]), else standard.
    pub fn buffer_size(&self) -> usize {
        match jumbo_reason(&self.ports, &self.wireguard, &self.openvpns) {
            Some(_) => dataplane::JUMBO_BUFFER,
            None => dataplane::STANDARD_BUFFER,
        }
    }

    /// What `linerate gateway --check` prints: every port, tunnel, peer and route.
    pub fn summary(&self) -> String {
        summary::summary(self)
    }
}

#[cfg(test)]
pub(crate) mod tests;
#[cfg(test)]
mod tests_esp;
#[cfg(test)]
mod tests_ike;
#[cfg(test)]
pub(crate) mod tests_openvpn;
