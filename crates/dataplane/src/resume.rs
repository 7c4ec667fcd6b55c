//! How a crypto node finishes a packet that an asynchronous engine gives back: one
//! record per packet, kept by the in-flight table until the packet's post node
//! takes it. Each stage has a record of its own (its `AeadStage::Resume`); the
//! table keeps them as one enum, a variant per stage.

use crate::esp::{EspTunnelId, InboundSlot};
use crate::ovpn::OvpnServerId;
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

/// What wg-encrypt needs to finish a packet it sealed.
#[derive(Clone, Copy, Debug)]
pub struct WgEncryptResume {
    pub peer: PeerId,
    pub inner_len: usize,
    /// The framed packet's length on the wire, as the node set it.
    pub wire_len: usize,
    /// The session it is sealed on (`Keypair::serial`) and its counter: what the
    /// late check marks it with once sealed (see `seal_ledger`).
    pub serial: u64,
    pub counter: u64,
}

/// What wg-decrypt needs to finish a packet it opened.
#[derive(Clone, Copy, Debug)]
pub struct WgDecryptResume {
    pub ticket: RecvTicket,
    pub counter: u64,
}

/// What esp-encrypt needs to finish a packet it sealed.
#[derive(Clone, Copy, Debug)]
pub struct EspEncryptResume {
    pub tunnel: EspTunnelId,
    pub icv: Option<MovedIcv>,
}

/// What esp-decrypt needs to finish a packet it opened.
#[derive(Clone, Copy, Debug)]
pub struct EspDecryptResume {
    pub slot: InboundSlot,
    pub seq: u64,
}

/// What ovpn-encrypt needs to finish a packet it sealed.
#[derive(Clone, Copy, Debug)]
pub struct OvpnEncryptResume {
    pub server: OvpnServerId,
    pub peer_id: u32,
    pub key_id: u8,
}

/// What ovpn-decrypt needs to finish a packet it opened.
#[derive(Clone, Copy, Debug)]
pub struct OvpnDecryptResume {
    pub server: OvpnServerId,
    pub peer_id: u32,
    pub key_id: u8,
    pub packet_id: u32,
}

/// Declares the record the in-flight table keeps, one variant per stage's own
/// record, and the conversions a stage's generic node makes: into the record when
/// it parks a packet, and back when the post node takes it (refused for another
/// stage's record).
macro_rules! resume_records {
    ($($variant:ident($record:ident)),* $(,)?) => {
        /// What a post node needs to finish one packet after an asynchronous engine:
        /// the record of the stage that prepared it.
        #[derive(Clone, Copy, Debug)]
        pub enum Resume {
            $($variant($record)),*
        }

        $(
            impl From<$record> for Resume {
                fn from(r: $record) -> Resume {
                    Resume::$variant(r)
                }
            }

            impl TryFrom<Resume> for $record {
                type Error = Resume;

                fn try_from(r: Resume) -> Result<$record, Resume> {
                    match r {
                        Resume::$variant(r) => Ok(r),
                        #[allow(unreachable_patterns)]
                        other => Err(other),
                    }
                }
            }
        )*
    };
}

resume_records! {
    WgEncrypt(WgEncryptResume),
    WgDecrypt(WgDecryptResume),
    EspEncrypt(EspEncryptResume),
    EspDecrypt(EspDecryptResume),
    OvpnEncrypt(OvpnEncryptResume),
    OvpnDecrypt(OvpnDecryptResume),
}
