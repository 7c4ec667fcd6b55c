//! Chained ops (AES-CBC with HMAC) one at a time: the order of work and the checks
//! every engine that runs them op by op shares, around the cipher and MAC of its
//! library. What the op's fields mean is in [`AeadOp`]'s documentation.

use crate::aead::{AeadOp, CBC_IV_LEN, Direction, OpStatus, TAG_LEN};
use subtle::ConstantTimeEq;

/// An expanded chained key as an engine's library holds it.
pub trait ChainedKey {
    /// CBC-encrypts `text` (whole blocks) in place, starting from `iv`; false when
    /// the library refused.
    fn cbc_encrypt(&self, iv: &[u8; CBC_IV_LEN], text: &mut [u8]) -> bool;
    /// CBC-decrypts `text` (whole blocks) in place, starting from `iv`; false when
    /// the library refused.
    fn cbc_decrypt(&self, iv: &[u8; CBC_IV_LEN], text: &mut [u8]) -> bool;
    /// The HMAC of `data`, its first `out.len()` bytes into `out` (at most the
    /// hash's output length).
    fn mac(&self, data: &[u8], out: &mut [u8]);
}

/// Runs one validated chained op (see [`AeadOp::validate`]): encrypt, then MAC the
/// span over the ciphertext; or MAC, compare with the tag in constant time, and only
/// on a match decrypt. A failed tag leaves the output as it was.
pub fn run<K: ChainedKey>(key: &K, mem: &mut [u8], op: &AeadOp) -> OpStatus {
    debug_assert!(op.alg.is_chained() && op.validate(mem.len()).is_ok());
    let Some(iv_span) = op.iv_span() else {
        return OpStatus::BadRange;
    };
    let mut iv = [0u8; CBC_IV_LEN];
    iv.copy_from_slice(&mem[iv_span.range()]);
    let tag_len = op.alg.tag_len();
    let mut computed = [0u8; TAG_LEN];
    let computed = &mut computed[..tag_len];
    match op.direction {
        Direction::Encrypt => {
            copy_input(mem, op);
            if !key.cbc_encrypt(&iv, &mut mem[op.dst_span().range()]) {
                return OpStatus::BadRange;
            }
            key.mac(&mem[op.aad.range()], computed);
            mem[op.tag_span().range()].copy_from_slice(computed);
            OpStatus::Ok
        }
        Direction::Decrypt => {
            key.mac(&mem[op.aad.range()], computed);
            if !bool::from(computed.ct_eq(&mem[op.tag_span().range()])) {
                return OpStatus::BadTag;
            }
            copy_input(mem, op);
            // Whole blocks (validated): the library has no reason to refuse.
            match key.cbc_decrypt(&iv, &mut mem[op.dst_span().range()]) {
                true => OpStatus::Ok,
                false => OpStatus::BadRange,
            }
        }
    }
}

/// Out of place, the input is copied to the output range, where the cipher then runs
/// in place.
fn copy_input(mem: &mut [u8], op: &AeadOp) {
    if op.src != op.dst {
        mem.copy_within(op.src_span().range(), op.dst as usize);
    }
}
