//! What the device asks of whoever drives it: messages to send, staged packets
//! that may go, staged packets it let go of.

use crate::drop::DropReason;
use crate::peer_id::PeerId;
use std::net::SocketAddr;

/// Something the device wants done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send these bytes (a handshake message or a cookie reply) to `to`.
    Send { to: SocketAddr, packet: Vec<u8> },
    /// The peer's staged packets can go now: a session was made, or a keepalive is
    /// due (then a keepalive is staged).
    Flush(PeerId),
    /// The device let go of a staged packet (the data path's buffer `packet`): free it
    /// and count `reason`.
    Discard {
        peer: PeerId,
        packet: u32,
        reason: DropReason,
    },
}
