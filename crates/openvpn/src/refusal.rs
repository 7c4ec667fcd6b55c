//! Why a packet, a key file or a control message was refused. Every parser and
//! every check in this crate answers with one of these, and a data plane counts
//! drops under [`Refusal::reason`], so each variant names one cause an operator
//! can act on.

use std::fmt;

/// One reason for refusing input. Refusing never changes any state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Shorter than its fixed fields.
    Truncated,
    /// The opcode is not one OpenVPN defines, or not one this end serves.
    UnknownOpcode,
    /// The control channel's HMAC (tls-auth) or tag (tls-crypt) does not verify.
    BadAuth,
    /// A control packet's packet id was seen before, or is too old.
    Replay,
    /// A control packet acknowledges more ids than the protocol allows.
    TooManyAcks,
    /// A key-method 2 message, or its options or peer-info strings, is malformed.
    BadKeyMethod,
    /// A string field is not NUL-terminated text of the length it declares.
    BadString,
    /// A static key file is not an OpenVPN static key (V1) of 2048 bits.
    BadKeyFile,
    /// The packet's session id is not the one this session agreed.
    WrongSession,
    /// A data packet arrived for a key id that has no keys.
    UnknownKeyId,
    /// A control message is larger than the reliability layer buffers.
    Oversized,
    /// The receive window is full: the message is too far ahead of the next
    /// one expected.
    OutOfWindow,
}

impl Refusal {
    /// The name a counter shows for this reason.
    pub fn reason(self) -> &'static str {
        match self {
            Refusal::Truncated => "truncated",
            Refusal::UnknownOpcode => "unknown-opcode",
            Refusal::BadAuth => "bad-auth",
            Refusal::Replay => "replay",
            Refusal::TooManyAcks => "too-many-acks",
            Refusal::BadKeyMethod => "bad-key-method",
            Refusal::BadString => "bad-string",
            Refusal::BadKeyFile => "bad-key-file",
            Refusal::WrongSession => "wrong-session",
            Refusal::UnknownKeyId => "unknown-key-id",
            Refusal::Oversized => "oversized",
            Refusal::OutOfWindow => "out-of-window",
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason())
    }
}

impl std::error::Error for Refusal {}
