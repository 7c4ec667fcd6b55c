//! A gateway's VXLAN tunnels (RFC 7348): each is an L2 interface whose frames travel
//! in UDP between one of the gateway's addresses (`local`) and a remote endpoint,
//! under one VNI. The outer packets are routed through the FIB like the gateway's
//! own, so a tunnel runs straight out of a port (cleartext) or into the WireGuard
//! tunnel; `vxlan-encap` and `vxlan-decap` move frames in and out.

use crate::fib::{Fib, RouteTarget};
use crate::outer_header::OuterHeader;
use std::fmt;
use std::net::IpAddr;

/// A VXLAN tunnel's number in its worker, in the order tunnels were added.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VxlanId(pub u16);

/// Outer IP, UDP and VXLAN header bytes over IPv4 and IPv6.
pub const OVERHEAD_V4: usize =
    wire::ipv4::HEADER_LEN + wire::udp::HEADER_LEN + wire::vxlan::HEADER_LEN;
pub const OVERHEAD_V6: usize =
    wire::ipv6::HEADER_LEN + wire::udp::HEADER_LEN + wire::vxlan::HEADER_LEN;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VxlanTunnel {
    pub name: String,
    pub vni: u32,
    /// The outer source: one of the gateway's own addresses.
    pub local: IpAddr,
    /// The outer destination; only datagrams from it are taken in.
    pub remote: IpAddr,
    /// The UDP destination port both ways (4789 unless configured).
    pub udp_port: u16,
    /// The largest inner Ethernet frame (header and any VLAN tag included) that
    /// fits the path to `remote` without fragmenting; larger ones are dropped and
    /// counted (`vxlan-encap` `too-big`).
    pub max_frame: usize,
}

impl VxlanTunnel {
    /// The outer headers' length for this tunnel's family.
    pub fn overhead(&self) -> usize {
        if self.remote.is_ipv4() {
            OVERHEAD_V4
        } else {
            OVERHEAD_V6
        }
    }
}

/// Why a tunnel was refused; nothing changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VxlanError {
    /// Local and remote of different families.
    MixedFamilies {
        name: String,
    },
    /// Another tunnel already has that VNI, remote and port: received frames could
    /// not be told apart.
    Duplicate {
        name: String,
        other: String,
    },
    /// The VNI does not fit 24 bits.
    BadVni {
        name: String,
        vni: u32,
    },
    /// No room for even an Ethernet header.
    BadMaxFrame {
        name: String,
    },
    TooMany,
}

impl fmt::Display for VxlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VxlanError::MixedFamilies { name } => {
                write!(f, "vxlan {name}: local and remote of different families")
            }
            VxlanError::Duplicate { name, other } => write!(
                f,
                "vxlan {name}: the same VNI, remote and port as vxlan {other}"
            ),
            VxlanError::BadVni { name, vni } => {
                write!(f, "vxlan {name}: VNI {vni} does not fit 24 bits")
            }
            VxlanError::BadMaxFrame { name } => {
                write!(
                    f,
                    "vxlan {name}: its path has no room for an Ethernet frame"
                )
            }
            VxlanError::TooMany => f.write_str("too many VXLAN tunnels"),
        }
    }
}

#[derive(Default)]
pub struct VxlanTunnels {
    list: Vec<VxlanTunnel>,
    /// Per tunnel, its outer IP and UDP headers built once; each frame adds its
    /// lengths and its flow's source port.
    outer: Vec<OuterHeader>,
}

impl VxlanTunnels {
    pub fn add(&mut self, t: VxlanTunnel) -> Result<VxlanId, VxlanError> {
        if t.local.is_ipv4() != t.remote.is_ipv4() {
            return Err(VxlanError::MixedFamilies { name: t.name });
        }
        if t.vni > wire::vxlan::MAX_VNI {
            return Err(VxlanError::BadVni {
                name: t.name,
                vni: t.vni,
            });
        }
        if t.max_frame < wire::ethernet::HEADER_LEN {
            return Err(VxlanError::BadMaxFrame { name: t.name });
        }
        if let Some(o) = self
            .list
            .iter()
            .find(|o| (o.vni, o.remote, o.udp_port) == (t.vni, t.remote, t.udp_port))
        {
            return Err(VxlanError::Duplicate {
                name: t.name,
                other: o.name.clone(),
            });
        }
        let id = u16::try_from(self.list.len())
            .ok()
            .filter(|&n| n < u16::MAX)
            .ok_or(VxlanError::TooMany)?;
        self.outer.push(OuterHeader::new(
            t.local,
            t.remote,
            wire::ip::protocol::UDP,
            Some((0, t.udp_port)),
        ));
        self.list.push(t);
        Ok(VxlanId(id))
    }

    pub fn get(&self, id: VxlanId) -> Option<&VxlanTunnel> {
        self.list.get(usize::from(id.0))
    }

    /// The tunnel and its outer headers, as vxlan-encap writes them.
    pub(crate) fn with_outer(&self, id: VxlanId) -> Option<(&VxlanTunnel, &OuterHeader)> {
        let i = usize::from(id.0);
        Some((self.list.get(i)?, self.outer.get(i)?))
    }

    pub fn iter(&self) -> impl Iterator<Item = (VxlanId, &VxlanTunnel)> {
        self.list
            .iter()
            .enumerate()
            .map(|(i, t)| (VxlanId(i as u16), t))
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The tunnel a datagram from `src` to UDP port `udp_port` with `vni` belongs to.
    pub(crate) fn find(&self, vni: u32, src: IpAddr, udp_port: u16) -> Option<VxlanId> {
        self.list
            .iter()
            .position(|t| t.vni == vni && t.remote == src && t.udp_port == udp_port)
            .map(|i| VxlanId(i as u16))
    }

    /// Whether some tunnel takes datagrams to `udp_port`.
    pub(crate) fn listens_on(&self, udp_port: u16) -> bool {
        self.list.iter().any(|t| t.udp_port == udp_port)
    }
}

/// The largest inner frame a tunnel to `remote` carries, by the route the FIB has
/// for it: the inner MTU of the tunnel it leads into (`tunnel_mtu`, see
/// `Context::tunnel_mtu`) or the port's MTU, less the outer headers. `None` when no
/// route leads anywhere (none, a blackhole, a tunnel that is not there, or the
/// gateway itself).
pub fn max_frame_to(
    fib: &Fib,
    port_mtu: impl Fn(crate::fib::PortId) -> Option<u16>,
    tunnel_mtu: impl Fn(crate::fib::TunnelId) -> Option<usize>,
    remote: IpAddr,
) -> Option<usize> {
    let path = match fib.lookup(remote)? {
        RouteTarget::Tunnel(t) => tunnel_mtu(t)?,
        RouteTarget::Via { port, .. } | RouteTarget::Attached { port } => {
            usize::from(port_mtu(port)?)
        }
        RouteTarget::Local | RouteTarget::Blackhole => return None,
    };
    let overhead = if remote.is_ipv4() {
        OVERHEAD_V4
    } else {
        OVERHEAD_V6
    };
    path.checked_sub(overhead)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tunnel(name: &str, vni: u32, remote: &str) -> VxlanTunnel {
        VxlanTunnel {
            name: name.into(),
            vni,
            local: "198.18.0.1".parse().unwrap(),
            remote: remote.parse().unwrap(),
            udp_port: wire::vxlan::PORT,
            max_frame: 1384,
        }
    }

    #[test]
    fn tunnels_are_found_by_vni_source_and_port() {
        let mut t = VxlanTunnels::default();
        let a = t.add(tunnel("a", 10, "198.18.0.2")).unwrap();
        let b = t.add(tunnel("b", 10, "198.18.0.3")).unwrap();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(t.find(10, ip("198.18.0.2"), 4789), Some(a));
        assert_eq!(t.find(10, ip("198.18.0.3"), 4789), Some(b));
        assert_eq!(t.find(11, ip("198.18.0.2"), 4789), None);
        assert_eq!(t.find(10, ip("198.18.0.9"), 4789), None);
        assert_eq!(t.find(10, ip("198.18.0.2"), 8472), None);
        assert!(t.listens_on(4789) && !t.listens_on(8472));
    }

    #[test]
    fn refusals_name_the_tunnel() {
        let mut t = VxlanTunnels::default();
        t.add(tunnel("a", 10, "198.18.0.2")).unwrap();
        assert_eq!(
            t.add(tunnel("b", 10, "198.18.0.2"))
                .unwrap_err()
                .to_string(),
            "vxlan b: the same VNI, remote and port as vxlan a"
        );
        assert!(matches!(
            t.add(tunnel("c", 1 << 24, "198.18.0.4")),
            Err(VxlanError::BadVni { .. })
        ));
        assert!(matches!(
            t.add(tunnel("d", 1, "2001:2::1")),
            Err(VxlanError::MixedFamilies { .. })
        ));
        let mut tiny = tunnel("e", 2, "198.18.0.5");
        tiny.max_frame = 13;
        assert!(matches!(t.add(tiny), Err(VxlanError::BadMaxFrame { .. })));
    }

    #[test]
    fn the_path_mtu_less_the_outer_headers() {
        use crate::fib::PortId;
        let mut fib = Fib::new();
        fib.add(
            "198.18.0.0/24".parse().unwrap(),
            RouteTarget::Attached { port: PortId(0) },
        )
        .unwrap();
        fib.add(
            "10.0.0.0/8".parse().unwrap(),
            RouteTarget::Tunnel(crate::fib::TunnelId(0)),
        )
        .unwrap();
        let mtu = |_| Some(1500);
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(
            max_frame_to(&fib, mtu, |_| Some(1420), ip("198.18.0.2")),
            Some(1500 - 36)
        );
        assert_eq!(
            max_frame_to(&fib, mtu, |_| Some(1420), ip("10.1.1.1")),
            Some(1420 - 36)
        );
        assert_eq!(
            max_frame_to(&fib, mtu, |_| Some(1420), ip("198.19.0.1")),
            None
        );
    }
}
