//! Control-channel protection: what surrounds a control packet's body on the
//! wire. Without protection a packet is its first byte, the sender's session id,
//! and the body. `tls-auth` ([`TlsAuth`]) adds an HMAC and a packet id; `tls-crypt`
//! ([`TlsCrypt`]) adds a packet id and a tag, and encrypts the body. Either way
//! a packet that does not verify is refused before anything reads its body, which
//! is what makes a protected port cheap to flood.

use crate::control::{OP_SID_LEN, SessionId};
use crate::packet_id::{PACKET_ID_LEN, PacketId};
use crate::{KeyId, Opcode, Refusal, TlsAuth, TlsCrypt};

/// A control packet with its protection removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unwrapped {
    pub opcode: Opcode,
    pub key_id: KeyId,
    /// The sender's session id.
    pub session_id: SessionId,
    /// The protection's packet id, which the caller checks for replays once it
    /// knows whose packet this is; none without protection.
    pub packet_id: Option<PacketId>,
    /// The acknowledgements, message id and payload ([`crate::control::Body`]).
    pub body: Vec<u8>,
}

/// How an end protects its control channel. Both ends must agree; a packet
/// protected otherwise fails to verify.
pub enum ControlWrap {
    None,
    Auth(TlsAuth),
    Crypt(TlsCrypt),
}

impl ControlWrap {
    /// The packet for `body`, sent with `packet_id` (the protection's own count,
    /// ignored without protection).
    pub fn wrap(
        &self,
        opcode: Opcode,
        key_id: KeyId,
        session_id: SessionId,
        packet_id: PacketId,
        body: &[u8],
    ) -> Vec<u8> {
        let mut head = [0; OP_SID_LEN];
        head[0] = opcode.byte(key_id);
        head[1..].copy_from_slice(&session_id.0);
        match self {
            ControlWrap::None => [&head[..], body].concat(),
            ControlWrap::Auth(auth) => auth.wrap(&head, packet_id, body),
            ControlWrap::Crypt(crypt) => crypt.wrap(&head, packet_id, body),
        }
    }

    /// The packet's fields and body once it verifies. Data packets are not
    /// control packets and are refused as unknown here.
    pub fn unwrap(&self, packet: &[u8]) -> Result<Unwrapped, Refusal> {
        let head: &[u8; OP_SID_LEN] = packet
            .get(..OP_SID_LEN)
            .and_then(|h| h.try_into().ok())
            .ok_or(Refusal::Truncated)?;
        let opcode = Opcode::of(head[0])?;
        if opcode.is_data() {
            return Err(Refusal::UnknownOpcode);
        }
        let rest = &packet[OP_SID_LEN..];
        let (packet_id, body) = match self {
            ControlWrap::None => (None, rest.to_vec()),
            ControlWrap::Auth(auth) => {
                let (pid, body) = auth.unwrap(head, rest)?;
                (Some(pid), body.to_vec())
            }
            ControlWrap::Crypt(crypt) => {
                let (pid, body) = crypt.unwrap(head, rest)?;
                (Some(pid), body)
            }
        };
        Ok(Unwrapped {
            opcode,
            key_id: KeyId::of(head[0]),
            session_id: SessionId(head[1..].try_into().expect("eight bytes")),
            packet_id,
            body,
        })
    }

    /// Bytes the protection adds to a body on the wire, besides the first byte
    /// and session id.
    pub fn overhead(&self) -> usize {
        match self {
            ControlWrap::None => 0,
            ControlWrap::Auth(auth) => auth.tag_len() + PACKET_ID_LEN,
            ControlWrap::Crypt(_) => PACKET_ID_LEN + crate::tls_crypt::TAG_LEN,
        }
    }
}
