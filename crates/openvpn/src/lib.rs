//! OpenVPN's protocol without I/O, in the style of the `wireguard` and `ikev2`
//! crates: time is an argument, packets go in as bytes and come out as bytes,
//! and every parser refuses with a [`Refusal`] and changes nothing. Layout
//! follows the protocol's concerns, one per file:
//! - [`opcode`]: the first byte of a packet (opcode and key id);
//! - [`static_key`]: static key files and the 256-byte key material both
//!   protections and the data channel cut their keys from;
//! - [`wrap`]: control-channel protection, none, [`tls_auth`] or [`tls_crypt`];
//!   [`packet_id`]: its packet ids and replay check;
//! - [`control`]: a control packet's body (acknowledgements, message id,
//!   payload); [`reliable`]: the reliability layer that carries TLS over UDP;
//! - [`key_method`]: the key-method 2 message; [`peer_info`]: a client's `IV_*`
//!   lines; [`cipher`]: data ciphers and choosing one;
//! - [`prf`]: OpenVPN's PRF key derivation and the exporter's label;
//!   [`data_keys`]: a key id's data-channel keys; [`data`]: the P_DATA_V2
//!   packet layout, its reference seal and open, and the keepalive ping.
#![forbid(unsafe_code)]

pub mod cipher;
pub mod control;
pub mod data;
pub mod data_keys;
pub mod key_method;
pub mod opcode;
pub mod packet_id;
pub mod peer_info;
pub mod prf;
pub mod push;
pub mod refusal;
pub mod reliable;
pub mod server;
pub mod static_key;
pub mod tls;
pub mod tls_auth;
pub mod tls_crypt;
pub mod tls_crypt_v2;
pub mod wrap;

pub use cipher::DataCipher;
pub use opcode::{KeyId, Opcode};
pub use refusal::Refusal;
pub use tls_auth::TlsAuth;
pub use tls_crypt::TlsCrypt;

/// Which end of a session this is. Key directions follow from it: tls-crypt's
/// server sends with the key file's first half, the data channel's server with
/// the key material's second.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Server,
    Client,
}
