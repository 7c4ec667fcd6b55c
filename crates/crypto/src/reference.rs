//! The reference engine: RustCrypto's portable ChaCha20-Poly1305 and AES-GCM, one op
//! at a time. Every other engine is checked against it; it is also the engine of last
//! resort on a CPU where nothing faster probes.

use crate::aead::{split_op, wipe_failed_output};
use crate::key::KeyCache;
use crate::{AeadOp, Algorithm, Direction, Engine, KeyRegistry, OpStatus};
use chacha20poly1305::aead::consts::{U12, U16};
use chacha20poly1305::aead::{AeadInPlace, KeyInit};
use chacha20poly1305::{ChaCha20Poly1305, Nonce, Tag};

enum Keyed {
    ChaCha(Box<ChaCha20Poly1305>),
    Aes128(Box<aes_gcm::Aes128Gcm>),
    Aes256(Box<aes_gcm::Aes256Gcm>),
}

impl Keyed {
    fn expand(m: &crate::KeyMaterial) -> Option<Keyed> {
        Some(match m.alg {
            Algorithm::ChaCha20Poly1305 => {
                Keyed::ChaCha(Box::new(ChaCha20Poly1305::new_from_slice(m.bytes()).ok()?))
            }
            Algorithm::Aes128Gcm => Keyed::Aes128(Box::new(
                aes_gcm::Aes128Gcm::new_from_slice(m.bytes()).ok()?,
            )),
            Algorithm::Aes256Gcm => Keyed::Aes256(Box::new(
                aes_gcm::Aes256Gcm::new_from_slice(m.bytes()).ok()?,
            )),
        })
    }
}

#[derive(Default)]
pub struct ReferenceEngine {
    keys: KeyCache<Keyed>,
}

impl ReferenceEngine {
    pub const NAME: &'static str = "reference";

    pub fn new() -> ReferenceEngine {
        ReferenceEngine::default()
    }
}

impl Engine for ReferenceEngine {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn supports(&self, _alg: Algorithm) -> bool {
        true
    }

    fn process(&mut self, keys: &KeyRegistry, mem: &mut [u8], ops: &mut [AeadOp]) {
        self.keys.process_each(
            keys,
            mem,
            ops,
            Keyed::expand,
            |keyed, mem, op| match keyed {
                Keyed::ChaCha(c) => run_with(c.as_ref(), mem, op),
                Keyed::Aes128(c) => run_with(c.as_ref(), mem, op),
                Keyed::Aes256(c) => run_with(c.as_ref(), mem, op),
            },
        );
    }
}

fn run_with<C: AeadInPlace<NonceSize = U12, TagSize = U16>>(
    cipher: &C,
    mem: &mut [u8],
    op: &AeadOp,
) -> OpStatus {
    let nonce = Nonce::from_slice(&op.nonce);
    let (aad, text, tag) = split_op(mem, op);
    match op.direction {
        Direction::Encrypt => match cipher.encrypt_in_place_detached(nonce, aad, text) {
            Ok(t) => {
                tag.copy_from_slice(&t);
                OpStatus::Ok
            }
            Err(_) => OpStatus::BadRange,
        },
        Direction::Decrypt => {
            let t = Tag::clone_from_slice(tag);
            match cipher.decrypt_in_place_detached(nonce, aad, text, &t) {
                Ok(()) => OpStatus::Ok,
                Err(_) => {
                    wipe_failed_output(mem, op);
                    OpStatus::BadTag
                }
            }
        }
    }
}
