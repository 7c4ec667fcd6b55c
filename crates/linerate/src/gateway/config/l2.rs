//! `[[vxlan]]` and `[[xconnect]]` tables: a tunnel's VNI, addresses and port, the
//! largest inner frame its path carries (the route to its remote, as the FIB will
//! have it, less the outer headers), and cross-connects between ports without
//! addresses and VXLAN tunnels.

use super::checks::Ctx;
use super::raw::{Item, RawVxlan, RawXconnect};
use super::{
    L2Endpoint, PortConfig, RouteConfig, RouteTarget, VxlanConfig, WgConfig, XconnectConfig,
};
use lpm::Prefix;
use std::net::IpAddr;
use std::ops::RangeInclusive;

const VNI: RangeInclusive<i64> = 0..=0x00ff_ffff;
const UDP_PORT: RangeInclusive<i64> = 1..=65535;
/// The least inner MTU worth carrying: IPv4's minimum datagram (RFC 791).
const MIN_INNER_MTU: u16 = 68;
const ETHERNET_HEADER: u16 = 14;
/// Room for the VLAN tags of a segment's frames: two (802.1ad and 802.1Q, QinQ), so
/// that a VLAN trunk of the inner MTU passes whole.
const VLAN_TAGS: u16 = 8;

/// What the VXLAN checks need of the rest of the file (already validated).
pub(super) struct Underlay<'a> {
    pub ports: &'a [PortConfig],
    pub wireguard: &'a [WgConfig],
    pub routes: &'a [RouteConfig],
    /// The ESP tunnels validated so far (routes into the others lead nowhere yet).
    pub esps: &'a [super::EspConfig],
}

impl Underlay<'_> {
    /// Whether `addr` is one of the gateway's own addresses.
    pub(super) fn is_ours(&self, addr: IpAddr) -> bool {
        let ports = self.ports.iter().flat_map(|p| &p.addresses);
        let tunnels = self.wireguard.iter().flat_map(|w| &w.addresses);
        ports.chain(tunnels).any(|&(a, _)| a == addr)
    }

    /// The MTU of the link the FIB will send a packet to `dst` by, and its name
    /// (the longest prefix among the routes, the ports' networks and the WireGuard
    /// interfaces' networks); `None` when nothing leads there.
    pub(super) fn path_mtu(&self, dst: IpAddr) -> Option<(u16, String)> {
        let mut best: Option<(u8, u16, String)> = None;
        let mut consider = |p: Prefix, mtu: Option<(u16, String)>| {
            let covers = p.addr.is_ipv4() == dst.is_ipv4()
                && (Prefix {
                    addr: dst,
                    len: p.len,
                })
                .network()
                    == p.network();
            if covers && best.as_ref().is_none_or(|b| p.len >= b.0) {
                best = mtu.map(|(m, n)| (p.len, m, n));
            }
        };
        for port in self.ports {
            for &(addr, len) in &port.addresses {
                consider(
                    Prefix { addr, len },
                    Some((port.mtu, format!("port {}", port.name))),
                );
            }
        }
        for w in self.wireguard {
            for &(addr, len) in &w.addresses {
                consider(
                    Prefix { addr, len },
                    Some((w.mtu, format!("tunnel {}", w.name))),
                );
            }
        }
        for r in self.routes {
            let mtu = match r.target {
                RouteTarget::Port { port, .. } => self
                    .ports
                    .get(port)
                    .map(|p| (p.mtu, format!("port {}", p.name))),
                RouteTarget::Tunnel { tunnel } => self
                    .wireguard
                    .get(tunnel)
                    .map(|w| (w.mtu, format!("tunnel {}", w.name))),
                RouteTarget::Esp { tunnel } => self
                    .esps
                    .get(tunnel)
                    .map(|e| (e.mtu, format!("esp {}", e.name))),
                RouteTarget::Blackhole => None,
            };
            consider(r.prefix, mtu);
        }
        best.map(|(_, m, n)| (m, n))
    }
}

/// Outer IP, UDP and VXLAN headers.
fn overhead(remote: IpAddr) -> u16 {
    if remote.is_ipv4() {
        dataplane::vxlan::OVERHEAD_V4 as u16
    } else {
        dataplane::vxlan::OVERHEAD_V6 as u16
    }
}

/// A tunnel's `local` (one of the gateway's addresses) and `remote` (not one, of
/// local's family) under `path`, each `None` where it is refused (reported).
fn address(cx: &mut Ctx<'_, '_>, s: &toml::Spanned<String>, key: &str) -> Option<IpAddr> {
    match s.get_ref().parse::<IpAddr>() {
        Ok(a) => Some(a),
        Err(_) => {
            cx.err(
                s.span(),
                key,
                format!("{:?} is not an IP address", s.get_ref()),
            );
            None
        }
    }
}

/// A tunnel's `local`: an address of the gateway's own.
pub(super) fn local_endpoint(
    cx: &mut Ctx<'_, '_>,
    local_text: &toml::Spanned<String>,
    path: &str,
    under: &Underlay<'_>,
) -> Option<IpAddr> {
    let key = format!("{path}.local");
    let a = address(cx, local_text, &key)?;
    if !under.is_ours(a) {
        cx.err(
            local_text.span(),
            &key,
            format!(
                "{a} is not one of the gateway's addresses (a port's or a WireGuard interface's)"
            ),
        );
        return None;
    }
    Some(a)
}

pub(super) fn endpoints(
    cx: &mut Ctx<'_, '_>,
    local_text: &toml::Spanned<String>,
    remote_text: &toml::Spanned<String>,
    path: &str,
    under: &Underlay<'_>,
) -> (Option<IpAddr>, Option<IpAddr>) {
    let local = local_endpoint(cx, local_text, path, under);
    let remote_key = format!("{path}.remote");
    let mut remote = address(cx, remote_text, &remote_key);
    if let Some(r) = remote {
        if under.is_ours(r) {
            cx.err(
                remote_text.span(),
                &remote_key,
                format!("{r} is the gateway's own address"),
            );
            remote = None;
        } else if let Some(l) = local
            && l.is_ipv4() != r.is_ipv4()
        {
            cx.err(
                remote_text.span(),
                &remote_key,
                format!("{r} and the local address {l} are of different families"),
            );
            remote = None;
        }
    }
    (local, remote)
}

pub(super) fn vxlan(
    cx: &mut Ctx<'_, '_>,
    v: &RawVxlan,
    i: usize,
    under: &Underlay<'_>,
    earlier: &[VxlanConfig],
) -> Option<VxlanConfig> {
    let path = format!("vxlan[{i}]");
    let mut ok = true;
    let vni = cx.int::<u32>(&v.vni, VNI, &format!("{path}.vni"));
    let (local, remote) = endpoints(cx, &v.local, &v.remote, &path, under);
    let remote_key = format!("{path}.remote");
    let mut udp_port = Some(wire::vxlan::PORT);
    if let Some(p) = &v.udp_port {
        let key = format!("{path}.udp_port");
        udp_port = cx.int::<u16>(p, UDP_PORT, &key);
        if let Some(n) = udp_port
            && let Some(w) = under.wireguard.iter().find(|w| w.listen_port == n)
        {
            cx.err(
                p.span(),
                &key,
                format!("port {n} is the listen port of {}", w.name),
            );
            udp_port = None;
        }
    }
    if let (Some(n), Some(r), Some(p)) = (vni, remote, udp_port)
        && let Some(o) = earlier
            .iter()
            .find(|o| (o.vni, o.remote, o.udp_port) == (n, r, p))
    {
        cx.err(
            v.vni.span(),
            &format!("{path}.vni"),
            format!("VNI {n} to {r} port {p} is already vxlan {}", o.name),
        );
        ok = false;
    }

    // The largest inner frame the path to the remote carries unfragmented.
    let mut mtu = None;
    let mut max_mtu = None;
    if let Some(r) = remote {
        match under.path_mtu(r) {
            None => cx.err(
                v.remote.span(),
                &remote_key,
                format!(
                    "no route to {r} (a port's network, a WireGuard interface's, or a [[route]])"
                ),
            ),
            Some((link, name)) => {
                let max = link.checked_sub(overhead(r) + ETHERNET_HEADER + VLAN_TAGS);
                match max.filter(|&m| m >= MIN_INNER_MTU) {
                    None => cx.err(
                        v.remote.span(),
                        &remote_key,
                        format!(
                            "the path to {r} ({name}, MTU {link}) has no room for VXLAN ({} bytes of outer headers and an Ethernet header with two VLAN tags)",
                            overhead(r) + ETHERNET_HEADER + VLAN_TAGS
                        ),
                    ),
                    Some(max) => {
                        max_mtu = Some(max);
                        mtu = Some(max);
                        if let Some(m) = &v.mtu {
                            let key = format!("{path}.mtu");
                            let n = *m.get_ref();
                            if (i64::from(MIN_INNER_MTU)..=i64::from(max)).contains(&n) {
                                mtu = Some(n as u16);
                            } else if n > i64::from(max) && n <= 65535 {
                                cx.err(
                                    m.span(),
                                    &key,
                                    format!(
                                        "{n} does not fit the path to {r}: {name} has MTU {link}, less {} for the outer IP, UDP and VXLAN headers and {} for the inner Ethernet header with two VLAN tags leaves {max} (raise {name}'s MTU to {} to carry {n})",
                                        overhead(r),
                                        ETHERNET_HEADER + VLAN_TAGS,
                                        n + i64::from(overhead(r) + ETHERNET_HEADER + VLAN_TAGS)
                                    ),
                                );
                                mtu = None;
                            } else {
                                mtu = cx.int::<u16>(m, i64::from(MIN_INNER_MTU)..=i64::from(max), &key);
                            }
                        }
                    }
                }
            }
        }
    }
    let (vni, local, remote, udp_port, mtu, max_mtu) =
        (vni?, local?, remote?, udp_port?, mtu?, max_mtu?);
    ok.then(|| VxlanConfig {
        name: v.name.get_ref().clone(),
        vni,
        local,
        remote,
        udp_port,
        mtu,
        max_mtu,
    })
}

/// The port or VXLAN tunnel called `name`, or why not.
fn endpoint(
    name: &str,
    ports: &[PortConfig],
    vxlans: &[Item<RawVxlan>],
) -> Result<L2Endpoint, String> {
    if let Some(i) = ports.iter().position(|p| p.name == name) {
        return Ok(L2Endpoint::Port(i));
    }
    let v = vxlans.iter().position(|v| match v {
        Item::Ok { value, .. } => value.name.get_ref() == name,
        Item::Broken(b) => b.name.as_deref() == Some(name),
    });
    match v {
        Some(i) => Ok(L2Endpoint::Vxlan(i)),
        None => Err(format!("{name:?} is neither a port nor a VXLAN tunnel")),
    }
}

pub(super) fn xconnect(
    cx: &mut Ctx<'_, '_>,
    x: &RawXconnect,
    i: usize,
    ports: &[PortConfig],
    vxlans: &[Item<RawVxlan>],
    earlier: &[XconnectConfig],
) -> Option<XconnectConfig> {
    let path = format!("xconnect[{i}]");
    let side = |cx: &mut Ctx<'_, '_>, s: &toml::Spanned<String>, key: &str| match endpoint(
        s.get_ref(),
        ports,
        vxlans,
    ) {
        Ok(L2Endpoint::Port(p)) if !ports[p].addresses.is_empty() => {
            cx.err(
                s.span(),
                key,
                format!(
                    "port {} has addresses: a cross-connected port is taken whole (give it none)",
                    ports[p].name
                ),
            );
            None
        }
        Ok(e) => Some(e),
        Err(e) => {
            cx.err(s.span(), key, e);
            None
        }
    };
    let from_key = format!("{path}.from");
    let mut from = side(cx, &x.from, &from_key);
    let to = side(cx, &x.to, &format!("{path}.to"));
    if let (Some(f), Some(t)) = (from, to)
        && f == t
    {
        cx.err(
            x.to.span(),
            &format!("{path}.to"),
            "the same interface as from",
        );
        return None;
    }
    if let Some(f) = from
        && let Some(j) = earlier.iter().position(|e| e.from == f)
    {
        cx.err(
            x.from.span(),
            &from_key,
            format!(
                "{:?} is already the from of xconnect[{j}]",
                x.from.get_ref()
            ),
        );
        from = None;
    }
    Some(XconnectConfig {
        from: from?,
        to: to?,
    })
}

/// Every port without addresses is the `from` of a cross-connect (else its frames
/// would go nowhere); reported at the port.
pub(super) fn l2_ports_connected(
    cx: &mut Ctx<'_, '_>,
    raw_ports: &[Item<super::raw::RawPort>],
    ports: &[PortConfig],
    xconnects: &[XconnectConfig],
) -> bool {
    let mut ok = true;
    for (i, p) in ports.iter().enumerate() {
        if p.addresses.is_empty() && !xconnects.iter().any(|x| x.from == L2Endpoint::Port(i)) {
            let (raw_i, span) = raw_ports
                .iter()
                .enumerate()
                .find_map(|(j, r)| match r {
                    Item::Ok { value, .. } if *value.name.get_ref() == p.name => {
                        Some((j, value.name.span()))
                    }
                    _ => None,
                })
                .unwrap_or((i, 0..0));
            cx.err(
                span,
                &format!("port[{raw_i}].addresses"),
                "none, and no [[xconnect]] from this port: a port needs addresses, or a cross-connect to carry its frames",
            );
            ok = false;
        }
    }
    ok
}
