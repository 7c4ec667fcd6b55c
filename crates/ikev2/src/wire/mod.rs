//! IKEv2 messages on the wire (RFC 7296 section 3): the header, the chain of generic
//! payloads, and each payload's body. Parsing refuses anything whose lengths do not
//! add up and any unknown payload marked critical; it never panics on any input.
//! Payloads are owned values: IKE is the control plane, a few allocations per
//! message cost nothing next to its public-key operations.

mod header;
mod payload;
mod sa;
mod ts;

pub use header::{HEADER_LEN, Header};
pub use payload::{
    Auth, Delete, Find, Identification, KeyExchange, Notify, Payload, emit_chain, parse_chain,
};
pub use sa::{Attribute, Proposal, Transform};
pub use ts::TrafficSelector;

/// A whole unencrypted message: `header` (its next payload and length filled in)
/// and `payloads`.
pub fn message(mut header: Header, payloads: &[Payload]) -> Vec<u8> {
    let (first, body) = emit_chain(payloads);
    header.next_payload = first;
    header.length = (HEADER_LEN + body.len()) as u32;
    let mut msg = Vec::with_capacity(header.length as usize);
    header.emit(&mut msg);
    msg.extend_from_slice(&body);
    msg
}

/// Why a message or payload was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// Fewer bytes than a header or a length field says.
    Truncated,
    /// A length field that is too small for its structure or runs past its parent.
    BadLength,
    /// A major version other than 2 (answered with INVALID_MAJOR_VERSION).
    BadVersion,
    /// An unknown payload with the critical bit set (answered with
    /// UNSUPPORTED_CRITICAL_PAYLOAD carrying its type).
    UnsupportedCritical(u8),
    /// A field holding a value the structure does not allow.
    Malformed(&'static str),
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::Truncated => f.write_str("truncated"),
            Error::BadLength => f.write_str("inconsistent length field"),
            Error::BadVersion => f.write_str("not IKE version 2"),
            Error::UnsupportedCritical(t) => write!(f, "unsupported critical payload {t}"),
            Error::Malformed(what) => write!(f, "malformed {what}"),
        }
    }
}

/// Exchange types (RFC 7296 section 3.1).
pub mod exchange {
    pub const IKE_SA_INIT: u8 = 34;
    pub const IKE_AUTH: u8 = 35;
    pub const CREATE_CHILD_SA: u8 = 36;
    pub const INFORMATIONAL: u8 = 37;
}

/// Header flags (RFC 7296 section 3.1).
pub mod flags {
    /// Sent by the original initiator of the IKE SA.
    pub const INITIATOR: u8 = 0x08;
    /// The sender could speak a higher version.
    pub const VERSION: u8 = 0x10;
    /// A response.
    pub const RESPONSE: u8 = 0x20;
}

/// Payload types (RFC 7296 section 3.2; 53 is RFC 7383's encrypted fragment).
pub mod payload_type {
    pub const NONE: u8 = 0;
    pub const SA: u8 = 33;
    pub const KE: u8 = 34;
    pub const IDI: u8 = 35;
    pub const IDR: u8 = 36;
    pub const CERT: u8 = 37;
    pub const CERTREQ: u8 = 38;
    pub const AUTH: u8 = 39;
    pub const NONCE: u8 = 40;
    pub const NOTIFY: u8 = 41;
    pub const DELETE: u8 = 42;
    pub const VENDOR: u8 = 43;
    pub const TSI: u8 = 44;
    pub const TSR: u8 = 45;
    pub const SK: u8 = 46;
    pub const CP: u8 = 47;
    pub const EAP: u8 = 48;
    pub const SKF: u8 = 53;
}

/// Security protocol identifiers (RFC 7296 section 3.3.1).
pub mod protocol {
    pub const IKE: u8 = 1;
    pub const AH: u8 = 2;
    pub const ESP: u8 = 3;
}

/// Notify message types (RFC 7296 section 3.10.1, and the extensions peers send).
pub mod notify {
    // Errors (below 16384).
    pub const UNSUPPORTED_CRITICAL_PAYLOAD: u16 = 1;
    pub const INVALID_IKE_SPI: u16 = 4;
    pub const INVALID_MAJOR_VERSION: u16 = 5;
    pub const INVALID_SYNTAX: u16 = 7;
    pub const INVALID_MESSAGE_ID: u16 = 9;
    pub const INVALID_SPI: u16 = 11;
    pub const NO_PROPOSAL_CHOSEN: u16 = 14;
    pub const INVALID_KE_PAYLOAD: u16 = 17;
    pub const AUTHENTICATION_FAILED: u16 = 24;
    pub const SINGLE_PAIR_REQUIRED: u16 = 34;
    pub const NO_ADDITIONAL_SAS: u16 = 35;
    pub const INTERNAL_ADDRESS_FAILURE: u16 = 36;
    pub const FAILED_CP_REQUIRED: u16 = 37;
    pub const TS_UNACCEPTABLE: u16 = 38;
    pub const INVALID_SELECTORS: u16 = 39;
    pub const TEMPORARY_FAILURE: u16 = 43;
    pub const CHILD_SA_NOT_FOUND: u16 = 44;
    // Status.
    pub const INITIAL_CONTACT: u16 = 16384;
    pub const SET_WINDOW_SIZE: u16 = 16385;
    pub const NAT_DETECTION_SOURCE_IP: u16 = 16388;
    pub const NAT_DETECTION_DESTINATION_IP: u16 = 16389;
    pub const COOKIE: u16 = 16390;
    pub const USE_TRANSPORT_MODE: u16 = 16391;
    pub const REKEY_SA: u16 = 16393;
    pub const ESP_TFC_PADDING_NOT_SUPPORTED: u16 = 16394;
    pub const NON_FIRST_FRAGMENTS_ALSO: u16 = 16395;
    pub const MOBIKE_SUPPORTED: u16 = 16396;
    pub const IKEV2_FRAGMENTATION_SUPPORTED: u16 = 16430;
    pub const SIGNATURE_HASH_ALGORITHMS: u16 = 16431;

    /// Whether a notify type reports an error (RFC 7296 section 3.10.1).
    pub const fn is_error(kind: u16) -> bool {
        kind < 16384
    }
}

/// Identification types (RFC 7296 section 3.5).
pub mod id_type {
    pub const IPV4_ADDR: u8 = 1;
    pub const FQDN: u8 = 2;
    pub const RFC822_ADDR: u8 = 3;
    pub const IPV6_ADDR: u8 = 5;
    pub const DER_ASN1_DN: u8 = 9;
    pub const KEY_ID: u8 = 11;
}

/// Authentication methods (RFC 7296 section 3.8, RFC 7427).
pub mod auth_method {
    pub const RSA_SIG: u8 = 1;
    pub const SHARED_KEY_MIC: u8 = 2;
    pub const ECDSA_256: u8 = 9;
    pub const ECDSA_384: u8 = 10;
    pub const DIGITAL_SIGNATURE: u8 = 14;
}

/// Reads a big-endian u16 at `at`; callers have checked the length.
pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Reads a big-endian u32 at `at`; callers have checked the length.
pub(crate) fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
