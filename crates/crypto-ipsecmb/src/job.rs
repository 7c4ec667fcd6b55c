//! Filling one job of the library's job API for one op (or one stage of a chained
//! decryption). Every field is written, not just the ones the op needs: job slots
//! are reused, and a leftover SGL context or offset from an earlier job in the same
//! slot would change what the library does.
//!
//! The caller has validated the op against its memory (so every offset below stays
//! inside the allocation `base` points into), owns scratch slot `slot` for it, and
//! keeps memory, scratch and key alive and untouched until the job comes back.

use crate::ffi::{self, ImbJob};
use crate::key::RawKey;
use crate::{Scratch, Stage};
use core::ffi::c_void;
use core::ptr;
use crypto::aead::CBC_IV_LEN;
use crypto::{AeadOp, Algorithm, Direction, TAG_LEN};

/// The job of AEAD op `op` (the `i`th of its vector, with scratch slot `slot`): one
/// pass that ciphers and authenticates. `base` is the start of the op's memory.
pub(crate) fn aead(
    base: *mut u8,
    op: &AeadOp,
    i: usize,
    slot: *mut Scratch,
    key: RawKey,
) -> ImbJob {
    let decrypt = op.direction == Direction::Decrypt;
    // SAFETY: `validate` checked that src, dst, tag and aad lie inside `mem`, so
    // every offset below stays inside the allocation `base` points into.
    let (src, dst, aad, tag) = unsafe {
        (
            base.add(op.src as usize),
            base.add(op.dst as usize),
            base.add(op.aad.offset as usize),
            base.add(op.tag as usize),
        )
    };
    // Decryption computes the tag into scratch: the op's tag is the one to check.
    let tag_out = if decrypt {
        // SAFETY: `slot` is valid (see `Run::submit`); this only takes a field's address.
        unsafe { ptr::addr_of_mut!((*slot).computed_tag).cast::<u8>() }
    } else {
        tag
    };
    let (cipher_mode, hash_alg) = match op.alg {
        Algorithm::ChaCha20Poly1305 => (
            ffi::IMB_CIPHER_CHACHA20_POLY1305,
            ffi::IMB_AUTH_CHACHA20_POLY1305,
        ),
        _ => (ffi::IMB_CIPHER_GCM, ffi::IMB_AUTH_AES_GMAC),
    };
    let (cipher_direction, chain_order) = if decrypt {
        (ffi::IMB_DIR_DECRYPT, ffi::IMB_ORDER_HASH_CIPHER)
    } else {
        (ffi::IMB_DIR_ENCRYPT, ffi::IMB_ORDER_CIPHER_HASH)
    };
    let len = u64::from(op.len);
    ImbJob {
        enc_keys: key.enc,
        dec_keys: key.dec,
        key_len_in_bytes: key.len,
        src: src.cast_const(),
        dst,
        cipher_start_src_offset_in_bytes: 0,
        msg_len_to_cipher_in_bytes: len,
        hash_start_src_offset_in_bytes: 0,
        msg_len_to_hash_in_bytes: len,
        // SAFETY: `slot` is valid (see `Run::submit`); this only takes a field's address.
        iv: unsafe { ptr::addr_of!((*slot).iv).cast::<u8>() },
        iv_len_in_bytes: 12,
        auth_tag_output: tag_out,
        auth_tag_output_len_in_bytes: TAG_LEN as u64,
        u: ffi::HashFields {
            aead: ffi::AeadFields {
                aad: aad.cast_const().cast::<c_void>(),
                aad_len_in_bytes: u64::from(op.aad.len),
                ctx: ptr::null_mut(),
            },
        },
        status: 0,
        cipher_mode,
        cipher_direction,
        hash_alg,
        chain_order,
        user_data: ptr::without_provenance_mut(i),
        user_data2: ptr::without_provenance_mut(Stage::Whole as usize),
        cipher_func: None,
        hash_func: None,
        sgl_state: 0,
        next_iv: ptr::null_mut(),
    }
}

/// Job `stage` of chained op `op` (the `i`th of its vector, with scratch slot
/// `slot`): AES-CBC and HMAC, one or both (see the crate documentation). The job's
/// `src` is `base`, the start of the op's memory; the cipher and the HMAC start at
/// their own offsets into it.
pub(crate) fn chained(
    base: *mut u8,
    op: &AeadOp,
    i: usize,
    slot: *mut Scratch,
    key: RawKey,
    stage: Stage,
) -> ImbJob {
    let hmac = match op.alg {
        Algorithm::Aes128CbcHmacSha1 | Algorithm::Aes256CbcHmacSha1 => ffi::IMB_AUTH_HMAC_SHA_1,
        _ => ffi::IMB_AUTH_HMAC_SHA_256,
    };
    let tag_len = op.alg.tag_len() as u64;
    // SAFETY: `validate` checked that dst, the tag and the IV (the 16 bytes before
    // src) lie inside `mem`.
    let (dst, tag, iv) = unsafe {
        (
            base.add(op.dst as usize),
            base.add(op.tag as usize),
            base.add(op.src as usize - CBC_IV_LEN),
        )
    };
    let (cipher_len, hash_len) = (u64::from(op.len), u64::from(op.aad.len));
    // (cipher, cipher bytes, hash, hash bytes, tag out, tag bytes, direction, order)
    let (cipher_mode, cipher_len, hash_alg, hash_len, tag_out, tag_len, direction, order) =
        match stage {
            Stage::Whole => (
                ffi::IMB_CIPHER_CBC,
                cipher_len,
                hmac,
                hash_len,
                tag,
                tag_len,
                ffi::IMB_DIR_ENCRYPT,
                ffi::IMB_ORDER_CIPHER_HASH,
            ),
            Stage::Verify => (
                ffi::IMB_CIPHER_NULL,
                0,
                hmac,
                hash_len,
                // SAFETY: `slot` is valid (see `Run::submit`); this only takes a field's
                // address.
                unsafe { ptr::addr_of_mut!((*slot).computed_tag).cast::<u8>() },
                tag_len,
                ffi::IMB_DIR_DECRYPT,
                ffi::IMB_ORDER_HASH_CIPHER,
            ),
            Stage::Decipher => (
                ffi::IMB_CIPHER_CBC,
                cipher_len,
                ffi::IMB_AUTH_NULL,
                0,
                ptr::null_mut(),
                0,
                ffi::IMB_DIR_DECRYPT,
                ffi::IMB_ORDER_HASH_CIPHER,
            ),
        };
    ImbJob {
        enc_keys: key.enc,
        dec_keys: key.dec,
        key_len_in_bytes: key.len,
        src: base.cast_const(),
        // The NULL cipher writes nothing (the library's job checks say so).
        dst,
        cipher_start_src_offset_in_bytes: u64::from(op.src),
        msg_len_to_cipher_in_bytes: cipher_len,
        hash_start_src_offset_in_bytes: u64::from(op.aad.offset),
        msg_len_to_hash_in_bytes: hash_len,
        iv: iv.cast_const(),
        iv_len_in_bytes: CBC_IV_LEN as u64,
        auth_tag_output: tag_out,
        auth_tag_output_len_in_bytes: tag_len,
        u: ffi::HashFields {
            hmac: ffi::HmacFields {
                hashed_auth_key_xor_ipad: key.ipad,
                hashed_auth_key_xor_opad: key.opad,
                rest: ptr::null(),
            },
        },
        status: 0,
        cipher_mode,
        cipher_direction: direction,
        hash_alg,
        chain_order: order,
        user_data: ptr::without_provenance_mut(i),
        user_data2: ptr::without_provenance_mut(stage as usize),
        cipher_func: None,
        hash_func: None,
        sgl_state: 0,
        next_iv: ptr::null_mut(),
    }
}
