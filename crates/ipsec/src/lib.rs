//! The per-SA state of IPsec ESP (RFC 4303) without I/O.
//!
//! What the data path's nodes keep for each Security Association and share among the
//! workers that encrypt or decrypt for it: the algorithm and the lengths it sets on
//! the wire, the outbound sequence number, the inbound anti-replay window with
//! extended sequence numbers, and the hard lifetimes with their usage. Nothing here
//! reads a clock, touches a packet buffer or takes a lock: the state is atomics that
//! workers update concurrently, and the wire format lives in the `wire` crate.
//! Layout follows the protocol's concerns, one per file.
#![forbid(unsafe_code)]

pub mod algorithm;
pub mod lifetime;
pub mod replay;
pub mod sequence;

pub use algorithm::EspAlgorithm;
pub use lifetime::{Expired, Lifetime, Usage};
pub use replay::{DEFAULT_WINDOW, MAX_WINDOW, ReplayError, ReplayWindow};
pub use sequence::{SendSequence, SequenceExhausted};
