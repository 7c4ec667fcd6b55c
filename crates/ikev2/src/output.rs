//! What the IKE state machines hand back to the code doing I/O: datagrams to send,
//! and events (SAs up and down) for the data path and the operator.

use crate::wire::TrafficSelector;
use ipsec::EspAlgorithm;
use std::net::{IpAddr, SocketAddr};
use zeroize::Zeroizing;

/// IKE's port, and the port of NAT traversal where IKE messages carry a 4-byte
/// zero marker to tell them from ESP (RFC 3948).
pub const IKE_PORT: u16 = 500;
pub const NAT_T_PORT: u16 = 4500;
pub const NON_ESP_MARKER: [u8; 4] = [0; 4];

/// One IKE message to send from `local` to `remote`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Datagram {
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub message: Vec<u8>,
}

/// A NAT keepalive's one byte (RFC 3948 section 2.3): never an IKE message,
/// which is 28 bytes at least, so it travels without the marker.
pub const NAT_KEEPALIVE: [u8; 1] = [0xff];

impl Datagram {
    /// A NAT keepalive from `local` to `remote` (port 4500 both).
    pub fn keepalive(local: SocketAddr, remote: SocketAddr) -> Datagram {
        Datagram {
            local,
            remote,
            message: NAT_KEEPALIVE.to_vec(),
        }
    }

    /// The UDP payload: the message, behind the non-ESP marker on port 4500 (a
    /// keepalive as it is).
    pub fn payload(&self) -> Vec<u8> {
        if self.message == NAT_KEEPALIVE {
            self.message.clone()
        } else if self.local.port() == NAT_T_PORT || self.remote.port() == NAT_T_PORT {
            [&NON_ESP_MARKER[..], &self.message].concat()
        } else {
            self.message.clone()
        }
    }
}

/// A child SA both ends agreed, with its keys: what the gateway installs as an
/// ESP tunnel's outbound SA and one of its inbound SAs.
pub struct ChildSa {
    pub connection: String,
    pub algorithm: EspAlgorithm,
    pub esn: bool,
    pub local: IpAddr,
    pub remote: IpAddr,
    /// The UDP ports of ESP in UDP (local, remote), when a NAT was detected or
    /// encapsulation forced.
    pub udp_encap: Option<(u16, u16)>,
    pub inbound_spi: u32,
    pub outbound_spi: u32,
    /// Key material in `EspAlgorithm::keymat_len` layout.
    pub inbound_keys: Zeroizing<Vec<u8>>,
    pub outbound_keys: Zeroizing<Vec<u8>>,
    pub local_ts: Vec<TrafficSelector>,
    pub remote_ts: Vec<TrafficSelector>,
    /// The child SA this one rekeys (inbound SPI, outbound SPI): install this one
    /// beside it; the old one goes with its own `ChildDown`.
    pub replaces: Option<(u32, u32)>,
    /// We answered the peer's rekey: it installs its inbound half of this child
    /// when our answer arrives, and that answer may be lost. Seal with this child
    /// only once the peer shows it has it: its delete of the child this one
    /// replaces (RFC 7296 section 2.8: the initiator deletes the old one once it
    /// has the new). Until then the old child seals.
    pub seal_after_replaced_goes: bool,
}

impl core::fmt::Debug for ChildSa {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // Never the keys.
        f.debug_struct("ChildSa")
            .field("connection", &self.connection)
            .field("algorithm", &self.algorithm)
            .field("inbound_spi", &format_args!("{:08x}", self.inbound_spi))
            .field("outbound_spi", &format_args!("{:08x}", self.outbound_spi))
            .field("udp_encap", &self.udp_encap)
            .field("replaces", &self.replaces)
            .field("seal_after_replaced_goes", &self.seal_after_replaced_goes)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
pub enum Event {
    /// The IKE SA is authenticated; `detail` names the peer and the algorithms.
    Established {
        detail: String,
    },
    /// The IKE SA was rekeyed: new SPIs and keys, the same children.
    Rekeyed {
        detail: String,
    },
    ChildUp(ChildSa),
    /// A child SA is gone: remove both of its SAs from the data path.
    ChildDown {
        inbound_spi: u32,
        outbound_spi: u32,
    },
    /// An authenticated message came from a new address or port of a peer
    /// behind a NAT (its mapping changed, RFC 7296 section 2.23): the IKE SA
    /// answers there from now on, and the connection's ESP must follow, in UDP
    /// between these ports.
    PeerMoved {
        connection: String,
        local: SocketAddr,
        remote: SocketAddr,
    },
    /// The IKE SA is gone (deleted, failed, or the peer stopped answering), with
    /// why, in words for the log.
    Closed {
        reason: String,
    },
}

/// Everything one input produced. `dropped` names why a message was ignored, for
/// the counters; an ignored message changes no state.
#[derive(Debug, Default)]
pub struct Output {
    pub datagrams: Vec<Datagram>,
    pub events: Vec<Event>,
    pub dropped: Option<&'static str>,
}

impl Output {
    pub fn dropped(reason: &'static str) -> Output {
        Output {
            dropped: Some(reason),
            ..Output::default()
        }
    }

    pub fn append(&mut self, mut other: Output) {
        self.datagrams.append(&mut other.datagrams);
        self.events.append(&mut other.events);
        self.dropped = self.dropped.or(other.dropped);
    }
}
