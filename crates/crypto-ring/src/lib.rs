//! The library engine: ring's ChaCha20-Poly1305 and AES-GCM, which are BoringSSL's
//! assembly (AVX2 ChaCha20 and Poly1305, AES-NI/VAES with carry-less multiply for
//! GCM). It runs one op at a time, each as wide as the CPU allows inside the packet.
//!
//! Expanded keys (ring's `LessSafeKey`) live in a per-engine cache keyed by handle.
//! ring does not zero its key schedule on drop; the raw keys it was made from are
//! zeroed by the registry.

use crypto::aead::{split_op, wipe_failed_output};
use crypto::key::KeyCache;
use crypto::{AeadOp, Algorithm, Direction, Engine, KeyRegistry, OpStatus};
use ring::aead::{self, Aad, LessSafeKey, Nonce, Tag, UnboundKey};

#[derive(Default)]
pub struct RingEngine {
    keys: KeyCache<LessSafeKey>,
}

impl RingEngine {
    pub const NAME: &'static str = "ring";

    pub fn new() -> RingEngine {
        RingEngine::default()
    }
}

fn ring_algorithm(alg: Algorithm) -> &'static aead::Algorithm {
    match alg {
        Algorithm::ChaCha20Poly1305 => &aead::CHACHA20_POLY1305,
        Algorithm::Aes128Gcm => &aead::AES_128_GCM,
        Algorithm::Aes256Gcm => &aead::AES_256_GCM,
    }
}

impl Engine for RingEngine {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn supports(&self, _alg: Algorithm) -> bool {
        true
    }

    fn process(&mut self, keys: &KeyRegistry, mem: &mut [u8], ops: &mut [AeadOp]) {
        self.keys.sync(keys);
        for op in ops.iter_mut().filter(|o| o.status == OpStatus::Pending) {
            op.status = self.run(keys, mem, op);
        }
    }
}

impl RingEngine {
    fn run(&mut self, keys: &KeyRegistry, mem: &mut [u8], op: &AeadOp) -> OpStatus {
        if let Err(status) = op.validate(mem.len()) {
            return status;
        }
        let Some(key) = self.keys.get_or_expand(keys, op.key, op.alg, |m| {
            UnboundKey::new(ring_algorithm(m.alg), m.bytes())
                .ok()
                .map(LessSafeKey::new)
        }) else {
            return OpStatus::BadKey;
        };
        let nonce = Nonce::assume_unique_for_key(op.nonce);
        let (aad, text, tag) = split_op(mem, op);
        match op.direction {
            Direction::Encrypt => match key.seal_in_place_separate_tag(nonce, Aad::from(aad), text)
            {
                Ok(t) => {
                    tag.copy_from_slice(t.as_ref());
                    OpStatus::Ok
                }
                Err(_) => OpStatus::BadRange,
            },
            Direction::Decrypt => {
                let Ok(t) = Tag::try_from(&tag[..]) else {
                    return OpStatus::BadRange;
                };
                match key.open_in_place_separate_tag(nonce, Aad::from(aad), t, text, 0..) {
                    Ok(_) => OpStatus::Ok,
                    Err(_) => {
                        wipe_failed_output(mem, op);
                        OpStatus::BadTag
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_engine_conforms() {
        crypto::conformance::run_all(&|| Box::new(RingEngine::new())).unwrap();
    }
}
