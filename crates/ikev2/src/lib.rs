//! IKEv2 (RFC 7296) without I/O, in the style of the `wireguard` crate: time is an
//! argument, datagrams go in as bytes and come out as bytes with where to send them,
//! and what the exchanges agree (child SAs with their keys) comes out as values the
//! gateway installs in its ESP data path. Layout follows the protocol's concerns, one
//! per file:
//! - [`wire`]: the message header and payloads, parsed and written;
//! - [`proposal`]: SA proposals and transforms, and choosing among them;
//! - [`prf`], [`dh`], [`sk`]: the PRF with prf+, the key exchange groups, and the
//!   encrypted payload;
//! - [`keys`]: SKEYSEED and the IKE SA's keys, and child SA key material;
//! - [`auth`]: the AUTH payload with pre-shared keys; [`cert`]: certificates and
//!   signatures;
//! - [`nat`]: NAT detection hashes; [`cookie`]: stateless cookies under load;
//! - [`config`]: a connection's configuration;
//! - [`ike_sa`]: one IKE SA's exchanges, either end; [`endpoint`]: all of them;
//! - [`output`]: what comes out: datagrams and events.
#![forbid(unsafe_code)]

pub mod auth;
pub mod cert;
pub mod config;
pub mod cookie;
pub mod dh;
pub mod endpoint;
pub mod ike_sa;
pub mod keys;
pub mod nat;
pub mod output;
pub mod prf;
pub mod proposal;
pub mod sk;
pub mod wire;

pub use config::{Connection, Timers};
pub use endpoint::Endpoint;
pub use ike_sa::{IkeSa, SaSummary};
pub use output::{ChildSa, Datagram, Event, Output};
