//! linerate's crypto layer.
//!
//! Two halves live here:
//! - the **engine API** used by the data path: [`AeadOp`] vectors over one block of
//!   packet memory (AEADs, and AES-CBC with HMAC chained as ESP uses it), keys registered once in a [`KeyRegistry`] and named by
//!   [`KeyHandle`], engines behind the [`Engine`] trait, and an [`EngineSet`] that
//!   picks one engine per [`Algorithm`] and [`size_class`];
//! - the **handshake primitives** WireGuard needs: [`blake2s`] (hash, MAC, HMAC and
//!   the HKDF chain), [`x25519`], and the one-shot AEADs in [`seal`] (ChaCha20-Poly1305
//!   for handshake fields, XChaCha20-Poly1305 for cookies).
//!
//! Engine crates (`crypto-awslc`, later `crypto-ipsecmb`, `crypto-mb`) implement
//! [`Engine`] and run the shared `conformance` suite (the feature of that name) in
//! their tests.
// One reviewed exception: the `AsyncOps::submit` contract (engine.rs).
#![deny(unsafe_code)]

pub mod aead;
pub mod blake2s;
pub mod calibrate;
pub mod chained;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod engine;
pub mod key;
#[cfg(test)]
mod looks_async;
pub mod op_layout;
pub mod reference;
pub mod round_trip;
pub mod seal;
pub mod size_class;
pub mod x25519;

pub use aead::{AeadOp, Algorithm, Direction, OpStatus, Span, TAG_LEN};

/// Packets in one frame of the data path, and so the most ops a node hands an engine
/// at once: defined here, at the engine API, because engines and their calibration
/// size their batches by it as the graph sizes its frames.
pub const FRAME_LEN: usize = 256;
pub use engine::{AsyncOps, Engine, EngineSet};
pub use key::{KeyError, KeyHandle, KeyMaterial, KeyRegistry};
