//! How a crypto node finishes a packet that an asynchronous engine gives back: one
//! record per packet, kept by the in-flight table until the packet's post node
//! takes it. Each stage's record is one variant.

use crate::esp::{EspTunnelId, InboundSlot};
use wireguard::{PeerId, RecvTicket};

/// An ICV an op wrote away from its place in the packet (ESP with ESN and a chained
/// op: the MAC covered bytes where the ICV goes), to move there: offsets in the
/// packet's buffer.
#[derive(Clone, Copy, Debug)]
pub struct MovedIcv {
    pub from: u16,
    pub to: u16,
    pub len: u8,
}

/// What a post node needs to finish one packet after an asynchronous engine.
#[derive(Clone, Copy, Debug)]
pub enum Resume {
    Encrypt {
        peer: PeerId,
        inner_len: usize,
        /// The framed packet's length on the wire, as the node set it.
        wire_len: usize,
        /// The session it is sealed on (`Keypair::serial`) and its counter: what
        /// the late check marks it with once sealed (see `seal_ledger`).
        serial: u64,
        counter: u64,
    },
    Decrypt {
        ticket: RecvTicket,
        counter: u64,
    },
    EspEncrypt {
        tunnel: EspTunnelId,
        icv: Option<MovedIcv>,
    },
    EspDecrypt {
        slot: InboundSlot,
        seq: u64,
    },
}
