//! What the data path holds for one packet: the ticket to seal it (key, counter,
//! receiver index, endpoint) or to open it (the session found by receiver index),
//! or why it has none.

use crate::peer_id::PeerId;
use crypto::KeyHandle;
use std::net::SocketAddr;

/// Everything the data path needs to encrypt one packet to a peer.
#[derive(Debug, Clone, Copy)]
pub struct SendTicket {
    pub key: KeyHandle,
    pub counter: u64,
    pub receiver_index: u32,
    pub endpoint: SocketAddr,
    /// The session's [`Keypair::serial`](crate::Keypair::serial): what a later
    /// ticket of the same frame is taken on (`SessionPath::advance_ticket`).
    pub serial: u64,
}

impl SendTicket {
    /// The ticket for sending on session `k` to `endpoint` with `counter`, taken
    /// from the sending worker's block for it.
    #[inline]
    pub(crate) fn on(k: &crate::Keypair, counter: u64, endpoint: SocketAddr) -> SendTicket {
        SendTicket {
            key: k.send_key,
            counter,
            receiver_index: k.remote_index,
            endpoint,
            serial: k.serial,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// No usable session: stage the packet; a handshake has been asked for.
    NoSession,
    NoEndpoint,
}

/// What the data path needs to decrypt one packet, found by receiver index.
#[derive(Debug, Clone, Copy)]
pub struct RecvTicket {
    pub peer: PeerId,
    pub key: KeyHandle,
    pub local_index: u32,
}
