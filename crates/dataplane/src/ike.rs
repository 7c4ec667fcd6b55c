//! The gateway's IKE ports. Key exchange runs on its own thread, away from the
//! packets: a datagram to UDP port 500, or to 4500 behind the non-ESP marker (RFC
//! 3948), is copied into the key exchange's inbox, a bounded channel, and its
//! buffer freed; when the inbox is full (a flood) the datagram is dropped and
//! counted, and the packet path never waits. The key exchange's answers come back
//! as datagrams the graph sends like its own (`GatewayGraph::send_udp`).

use std::net::SocketAddr;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

pub const IKE_PORT: u16 = 500;
pub const NAT_T_PORT: u16 = 4500;

/// IKE messages waiting for the key exchange, from every worker together.
pub const INBOX_LEN: usize = 1024;

/// One UDP datagram to an IKE port: the payload as received (with the marker on
/// port 4500), the gateway's address and port it came to, and where from.
pub struct IkeDatagram {
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub payload: Vec<u8>,
}

/// A worker's way into the key exchange's inbox.
#[derive(Clone)]
pub struct IkeInbox {
    tx: SyncSender<IkeDatagram>,
}

impl IkeInbox {
    /// The inbox, and the key exchange's end of it.
    pub fn new() -> (IkeInbox, Receiver<IkeDatagram>) {
        let (tx, rx) = sync_channel(INBOX_LEN);
        (IkeInbox { tx }, rx)
    }

    /// Hands a datagram over; false when the inbox is full or its reader gone.
    pub(crate) fn hand_over(&self, d: IkeDatagram) -> bool {
        self.tx.try_send(d).is_ok()
    }
}
