//! A control packet's body once its protection is removed: the acknowledgements
//! it carries (with the session id of the end they acknowledge), the message id
//! of a reliable packet, and its payload (TLS records, or early-negotiation
//! fields in a hard reset).

use crate::{Opcode, Refusal};

/// An end's session id: eight random bytes it chooses and puts in every
/// control packet it sends; the other end echoes it with acknowledgements.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SessionId(pub [u8; 8]);

/// Bytes before the body that every control packet has: the first byte and the
/// sender's session id.
pub const OP_SID_LEN: usize = 1 + 8;

/// The most acknowledgements one packet carries.
pub const MAX_ACKS: usize = 8;

/// Message ids acknowledged by one packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Acks {
    ids: [u32; MAX_ACKS],
    len: u8,
}

impl Acks {
    pub fn from_ids(ids: &[u32]) -> Option<Acks> {
        let mut acks = Acks::default();
        for &id in ids {
            acks.push(id).then_some(())?;
        }
        Some(acks)
    }

    /// Adds `id`; false, and nothing added, when full.
    pub fn push(&mut self, id: u32) -> bool {
        if usize::from(self.len) == MAX_ACKS {
            return false;
        }
        self.ids[usize::from(self.len)] = id;
        self.len += 1;
        true
    }

    pub fn ids(&self) -> &[u32] {
        &self.ids[..usize::from(self.len)]
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// A control packet's body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Body<'a> {
    pub acks: Acks,
    /// The acknowledged end's session id; present exactly when there are
    /// acknowledgements.
    pub remote_session_id: Option<SessionId>,
    /// Present in every control packet but a bare acknowledgement.
    pub message_id: Option<u32>,
    pub payload: &'a [u8],
}

impl<'a> Body<'a> {
    /// Parses the body of a packet with `opcode`.
    pub fn parse(opcode: Opcode, bytes: &'a [u8]) -> Result<Body<'a>, Refusal> {
        let (&n, mut rest) = bytes.split_first().ok_or(Refusal::Truncated)?;
        let n = usize::from(n);
        if n > MAX_ACKS {
            return Err(Refusal::TooManyAcks);
        }
        let mut acks = Acks::default();
        for _ in 0..n {
            let id;
            (id, rest) = take_u32(rest)?;
            acks.push(id);
        }
        let remote_session_id = if n > 0 {
            let (sid, after) = rest.split_first_chunk::<8>().ok_or(Refusal::Truncated)?;
            rest = after;
            Some(SessionId(*sid))
        } else {
            None
        };
        let message_id = if opcode.is_reliable() {
            let id;
            (id, rest) = take_u32(rest)?;
            Some(id)
        } else {
            None
        };
        if !opcode.is_reliable() && !rest.is_empty() {
            // A bare acknowledgement has nothing after its acks.
            return Err(Refusal::Oversized);
        }
        Ok(Body {
            acks,
            remote_session_id,
            message_id,
            payload: rest,
        })
    }

    /// The body's bytes. Acknowledgements without a remote session id, or a
    /// message id on a bare acknowledgement, are the caller's mistake and are
    /// written as the protocol requires regardless: a remote session id of
    /// zeros, and no message id.
    pub fn emit(&self, opcode: Opcode) -> Vec<u8> {
        let mut out = Vec::with_capacity(1 + 4 * MAX_ACKS + 8 + 4 + self.payload.len());
        out.push(self.acks.len);
        for id in self.acks.ids() {
            out.extend_from_slice(&id.to_be_bytes());
        }
        if !self.acks.is_empty() {
            out.extend_from_slice(&self.remote_session_id.unwrap_or_default().0);
        }
        if opcode.is_reliable() {
            out.extend_from_slice(&self.message_id.unwrap_or_default().to_be_bytes());
            out.extend_from_slice(self.payload);
        }
        out
    }
}

fn take_u32(b: &[u8]) -> Result<(u32, &[u8]), Refusal> {
    let (v, rest) = b.split_first_chunk::<4>().ok_or(Refusal::Truncated)?;
    Ok((u32::from_be_bytes(*v), rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_round_trip() {
        let sid = SessionId([9; 8]);
        let cases = [
            (
                Opcode::ControlV1,
                Body {
                    acks: Acks::from_ids(&[3, 1]).unwrap(),
                    remote_session_id: Some(sid),
                    message_id: Some(7),
                    payload: b"tls",
                },
            ),
            (
                Opcode::HardResetClientV2,
                Body {
                    acks: Acks::default(),
                    remote_session_id: None,
                    message_id: Some(0),
                    payload: b"",
                },
            ),
            (
                Opcode::AckV1,
                Body {
                    acks: Acks::from_ids(&[0]).unwrap(),
                    remote_session_id: Some(sid),
                    message_id: None,
                    payload: b"",
                },
            ),
        ];
        for (op, body) in cases {
            let bytes = body.emit(op);
            assert_eq!(Body::parse(op, &bytes), Ok(body));
        }
    }

    #[test]
    fn malformed_bodies_are_refused() {
        assert_eq!(Body::parse(Opcode::ControlV1, &[]), Err(Refusal::Truncated));
        assert_eq!(
            Body::parse(Opcode::ControlV1, &[9]),
            Err(Refusal::TooManyAcks)
        );
        // One ack, but no remote session id after it.
        assert_eq!(
            Body::parse(Opcode::ControlV1, &[1, 0, 0, 0, 1]),
            Err(Refusal::Truncated)
        );
        // No message id.
        assert_eq!(
            Body::parse(Opcode::ControlV1, &[0, 0, 0]),
            Err(Refusal::Truncated)
        );
        // A bare ack with a payload after it.
        let mut ack = Body {
            acks: Acks::from_ids(&[1]).unwrap(),
            remote_session_id: Some(SessionId::default()),
            message_id: None,
            payload: b"",
        }
        .emit(Opcode::AckV1);
        ack.push(0);
        assert_eq!(Body::parse(Opcode::AckV1, &ack), Err(Refusal::Oversized));
    }

    #[test]
    fn acks_hold_at_most_eight() {
        assert!(Acks::from_ids(&[0; MAX_ACKS]).is_some());
        assert!(Acks::from_ids(&[0; MAX_ACKS + 1]).is_none());
    }
}
