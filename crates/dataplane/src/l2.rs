//! A gateway's layer 2: cross-connects, as VPP's `l2 xconnect RX TX`. Every frame
//! received on the RX interface leaves by the TX interface as it is (any EtherType,
//! VLAN tags, broadcast and multicast alike); each direction is its own
//! cross-connect. An interface is a port, taken whole (promiscuous, no addresses of
//! its own), or a VXLAN tunnel.

use crate::fib::PortId;
use crate::vxlan::VxlanId;
use std::collections::HashMap;
use std::fmt;

/// An interface a cross-connect joins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum L2Interface {
    Port(PortId),
    Vxlan(VxlanId),
}

/// Why a cross-connect was refused; nothing changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum XconnectError {
    /// Frames received on RX already go somewhere.
    Taken(L2Interface),
    /// RX and TX are one interface.
    Loop(L2Interface),
}

impl fmt::Display for XconnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            XconnectError::Taken(rx) => write!(f, "{rx:?} already has a cross-connect"),
            XconnectError::Loop(rx) => write!(f, "{rx:?} cross-connected to itself"),
        }
    }
}

#[derive(Default)]
pub struct L2Layer {
    xconnects: HashMap<L2Interface, L2Interface>,
    /// Per port and per VXLAN tunnel (by number): the TX of its cross-connect, for
    /// the one look per frame of ethernet-input and l2-xconnect (an index, not a
    /// hash).
    port_targets: Vec<Option<L2Interface>>,
    vxlan_targets: Vec<Option<L2Interface>>,
}

impl L2Layer {
    /// Frames received on `rx` leave by `tx` from now on.
    pub fn connect(&mut self, rx: L2Interface, tx: L2Interface) -> Result<(), XconnectError> {
        if rx == tx {
            return Err(XconnectError::Loop(rx));
        }
        if self.xconnects.contains_key(&rx) {
            return Err(XconnectError::Taken(rx));
        }
        self.xconnects.insert(rx, tx);
        let (targets, i) = match rx {
            L2Interface::Port(p) => (&mut self.port_targets, usize::from(p.0)),
            L2Interface::Vxlan(v) => (&mut self.vxlan_targets, usize::from(v.0)),
        };
        if targets.len() <= i {
            targets.resize(i + 1, None);
        }
        targets[i] = Some(tx);
        Ok(())
    }

    /// Where frames received on `rx` go, if it is cross-connected.
    #[inline]
    pub fn target(&self, rx: L2Interface) -> Option<L2Interface> {
        match rx {
            L2Interface::Port(p) => self.port_target(p),
            L2Interface::Vxlan(v) => self.vxlan_targets.get(usize::from(v.0)).copied().flatten(),
        }
    }

    /// Where frames received on port `p` go, if it is cross-connected.
    #[inline]
    pub fn port_target(&self, p: PortId) -> Option<L2Interface> {
        self.port_targets.get(usize::from(p.0)).copied().flatten()
    }

    /// Every cross-connect, RX to TX, in a stable order.
    pub fn xconnects(&self) -> Vec<(L2Interface, L2Interface)> {
        let mut v: Vec<_> = self.xconnects.iter().map(|(&a, &b)| (a, b)).collect();
        v.sort_by_key(|&(rx, _)| match rx {
            L2Interface::Port(p) => (0, p.0),
            L2Interface::Vxlan(v) => (1, v.0),
        });
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_direction_is_its_own_cross_connect() {
        let (p, v) = (L2Interface::Port(PortId(2)), L2Interface::Vxlan(VxlanId(0)));
        let mut l2 = L2Layer::default();
        assert_eq!(l2.target(p), None);
        l2.connect(p, v).unwrap();
        assert_eq!(l2.target(p), Some(v));
        assert_eq!(l2.target(v), None, "one direction only");
        l2.connect(v, p).unwrap();
        assert_eq!(l2.target(v), Some(p));
        assert_eq!(l2.port_target(PortId(2)), Some(v));
        assert_eq!(l2.port_target(PortId(0)), None);
        assert_eq!(
            l2.connect(p, L2Interface::Port(PortId(3))),
            Err(XconnectError::Taken(p))
        );
        assert_eq!(
            l2.connect(L2Interface::Port(PortId(5)), L2Interface::Port(PortId(5))),
            Err(XconnectError::Loop(L2Interface::Port(PortId(5))))
        );
        assert_eq!(l2.xconnects(), vec![(p, v), (v, p)]);
    }
}
