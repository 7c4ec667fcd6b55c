//! The reference engine: RustCrypto's portable ChaCha20-Poly1305, AES-GCM, AES-CBC and
//! HMAC, one op at a time. Every other engine is checked against it; it is also the
//! engine of last resort on a CPU where nothing faster probes.

use crate::aead::{CBC_IV_LEN, split_op, wipe_failed_output};
use crate::chained::{self, ChainedKey};
use crate::key::KeyCache;
use crate::{AeadOp, Algorithm, Direction, Engine, KeyRegistry, OpStatus};
use aes::cipher::{BlockDecryptMut, BlockEncryptMut, InnerIvInit};
use chacha20poly1305::aead::consts::{U12, U16};
use chacha20poly1305::aead::{AeadInPlace, KeyInit};
use chacha20poly1305::{ChaCha20Poly1305, Nonce, Tag};
use hmac::{Hmac, Mac};

enum Keyed {
    ChaCha(Box<ChaCha20Poly1305>),
    Aes128(Box<aes_gcm::Aes128Gcm>),
    Aes256(Box<aes_gcm::Aes256Gcm>),
    Chained(Box<CbcHmac>),
}

/// A chained key: the AES key schedule and the HMAC state keyed once (boxed whole in
/// [`Keyed`], so the schedules' sizes need no boxes of their own).
struct CbcHmac {
    cipher: Aes,
    mac: HmacKey,
}

#[allow(clippy::large_enum_variant)]
enum Aes {
    Aes128(aes::Aes128),
    Aes256(aes::Aes256),
}

enum HmacKey {
    Sha1(Hmac<sha1::Sha1>),
    Sha256(Hmac<sha2::Sha256>),
}

impl CbcHmac {
    fn expand(m: &crate::KeyMaterial) -> Option<CbcHmac> {
        let (cipher, mac) = (m.cipher_key(), m.auth_key());
        let cipher = match m.alg.cipher_key_len() {
            16 => Aes::Aes128(aes::Aes128::new_from_slice(cipher).ok()?),
            _ => Aes::Aes256(aes::Aes256::new_from_slice(cipher).ok()?),
        };
        let mac = match m.alg {
            Algorithm::Aes128CbcHmacSha1 | Algorithm::Aes256CbcHmacSha1 => {
                HmacKey::Sha1(<Hmac<sha1::Sha1> as Mac>::new_from_slice(mac).ok()?)
            }
            _ => HmacKey::Sha256(<Hmac<sha2::Sha256> as Mac>::new_from_slice(mac).ok()?),
        };
        Some(CbcHmac { cipher, mac })
    }
}

/// CBC over whole blocks with the `cbc` crate's modes, from a key schedule made once.
fn cbc<C>(cipher: &C, iv: &[u8; CBC_IV_LEN], text: &mut [u8], encrypt: bool) -> bool
where
    C: aes::cipher::BlockCipher
        + aes::cipher::BlockEncrypt
        + aes::cipher::BlockDecrypt
        + aes::cipher::BlockSizeUser<BlockSize = U16>
        + Clone,
{
    if !text.len().is_multiple_of(CBC_IV_LEN) {
        return false;
    }
    let blocks = text
        .chunks_exact_mut(CBC_IV_LEN)
        .map(aes::Block::from_mut_slice);
    if encrypt {
        let mut mode = cbc::Encryptor::inner_iv_init(cipher.clone(), iv.into());
        blocks.for_each(|b| mode.encrypt_block_mut(b));
    } else {
        let mut mode = cbc::Decryptor::inner_iv_init(cipher.clone(), iv.into());
        blocks.for_each(|b| mode.decrypt_block_mut(b));
    }
    true
}

impl ChainedKey for CbcHmac {
    fn cbc_encrypt(&self, iv: &[u8; CBC_IV_LEN], text: &mut [u8]) -> bool {
        match &self.cipher {
            Aes::Aes128(c) => cbc(c, iv, text, true),
            Aes::Aes256(c) => cbc(c, iv, text, true),
        }
    }

    fn cbc_decrypt(&self, iv: &[u8; CBC_IV_LEN], text: &mut [u8]) -> bool {
        match &self.cipher {
            Aes::Aes128(c) => cbc(c, iv, text, false),
            Aes::Aes256(c) => cbc(c, iv, text, false),
        }
    }

    fn mac(&self, data: &[u8], out: &mut [u8]) {
        match &self.mac {
            HmacKey::Sha1(k) => {
                let full = k.clone().chain_update(data).finalize().into_bytes();
                out.copy_from_slice(&full[..out.len()]);
            }
            HmacKey::Sha256(k) => {
                let full = k.clone().chain_update(data).finalize().into_bytes();
                out.copy_from_slice(&full[..out.len()]);
            }
        }
    }
}

impl Keyed {
    fn expand(m: &crate::KeyMaterial) -> Option<Keyed> {
        if m.alg.is_chained() {
            return Some(Keyed::Chained(Box::new(CbcHmac::expand(m)?)));
        }
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
            _ => return None,
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
                Keyed::Chained(k) => chained::run(k.as_ref(), mem, op),
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
