//! Keys in the forms the library's jobs read, expanded once per key and kept in the
//! engine's key cache: AES-GCM round keys and GHASH key powers; ChaCha20-Poly1305
//! keys as they are; for AES-CBC with HMAC, the AES round keys of both directions
//! and HMAC's two precomputed hash states. Each is boxed, so that the cache can grow
//! without moving keys that jobs in flight point at, and zeroed when dropped.

use crate::ffi::{self, GcmKeyData};
use crate::manager::Manager;
use core::ffi::c_void;
use core::ptr;
use crypto::{Algorithm, KeyMaterial};
use zeroize::{Zeroize, Zeroizing};

/// A key as a job takes it: the cipher's key pointers and length and, for HMAC, the
/// two precomputed states (null otherwise).
#[derive(Clone, Copy)]
pub(crate) struct RawKey {
    pub enc: *const c_void,
    pub dec: *const c_void,
    pub len: u64,
    pub ipad: *const u8,
    pub opad: *const u8,
}

impl RawKey {
    /// An AEAD's key: one pointer for both directions, no HMAC states.
    fn aead(ptr: *const c_void, len: u64) -> RawKey {
        RawKey {
            enc: ptr,
            dec: ptr,
            len,
            ipad: ptr::null(),
            opad: ptr::null(),
        }
    }
}

pub(crate) enum ExpandedKey {
    ChaCha(Box<Zeroizing<[u8; 32]>>),
    Gcm { data: Box<GcmKeyData>, len: u64 },
    CbcHmac { data: Box<CbcHmacKeyData>, len: u64 },
}

/// What a chained (AES-CBC with HMAC) job reads of its key: the round keys that
/// `keyexp_128`/`keyexp_256` write (16-byte aligned, 15 round keys at most), and
/// the hash states after one block of the HMAC key XORed with ipad and with opad
/// (RFC 2104 section 2), as `sha1_one_block`/`sha256_one_block` write them.
#[repr(C, align(64))]
pub(crate) struct CbcHmacKeyData {
    enc: [u8; 240],
    dec: [u8; 240],
    ipad: [u8; ffi::IMB_SHA256_DIGEST_SIZE_IN_BYTES],
    opad: [u8; ffi::IMB_SHA256_DIGEST_SIZE_IN_BYTES],
}

/// HMAC's inner and outer pad bytes (RFC 2104 section 2).
const IPAD: u8 = 0x36;
const OPAD: u8 = 0x5c;

impl ExpandedKey {
    pub(crate) fn new(mgr: &Manager, m: &KeyMaterial) -> Option<ExpandedKey> {
        if m.alg.is_chained() {
            return Some(ExpandedKey::CbcHmac {
                data: cbc_hmac(mgr, m)?,
                len: m.cipher_key().len() as u64,
            });
        }
        let pre = match m.alg {
            Algorithm::ChaCha20Poly1305 => {
                let key: [u8; 32] = m.bytes().try_into().ok()?;
                return Some(ExpandedKey::ChaCha(Box::new(Zeroizing::new(key))));
            }
            Algorithm::Aes128Gcm => mgr.gcm128_pre,
            Algorithm::Aes256Gcm => mgr.gcm256_pre,
            _ => return None,
        };
        let mut data = Box::new(GcmKeyData { bytes: [0; 1024] });
        // SAFETY: `pre` is the manager's `gcmNNN_pre` for this key size; it reads
        // `key_len` bytes of key (the registry checked the length) and writes the
        // 64-byte-aligned `gcm_key_data` it is given.
        unsafe { pre(m.bytes().as_ptr().cast(), &mut *data) };
        Some(ExpandedKey::Gcm {
            data,
            len: m.bytes().len() as u64,
        })
    }

    pub(crate) fn raw(&self) -> RawKey {
        match self {
            ExpandedKey::ChaCha(key) => RawKey::aead(key.as_ptr().cast(), 32),
            ExpandedKey::Gcm { data, len } => {
                RawKey::aead(ptr::from_ref::<GcmKeyData>(data).cast(), *len)
            }
            ExpandedKey::CbcHmac { data, len } => RawKey {
                enc: data.enc.as_ptr().cast(),
                dec: data.dec.as_ptr().cast(),
                len: *len,
                ipad: data.ipad.as_ptr(),
                opad: data.opad.as_ptr(),
            },
        }
    }
}

/// Expands a chained key: AES round keys for both directions and the HMAC states.
fn cbc_hmac(mgr: &Manager, m: &KeyMaterial) -> Option<Box<CbcHmacKeyData>> {
    let keyexp = match m.alg.cipher_key_len() {
        16 => mgr.keyexp_128,
        32 => mgr.keyexp_256,
        _ => return None,
    };
    let one_block = match m.alg {
        Algorithm::Aes128CbcHmacSha1 | Algorithm::Aes256CbcHmacSha1 => mgr.sha1_one_block,
        Algorithm::Aes128CbcHmacSha256 | Algorithm::Aes256CbcHmacSha256 => mgr.sha256_one_block,
        _ => return None,
    };
    let auth = m.auth_key();
    // HMAC keys longer than a block are hashed first (RFC 2104 section 2); ESP's
    // are the hash's output length (RFC 2404 section 3, RFC 4868 section 2.1.1).
    if auth.len() > ffi::IMB_SHA_BLOCK_SIZE {
        return None;
    }
    let mut data = Box::new(CbcHmacKeyData {
        enc: [0; 240],
        dec: [0; 240],
        ipad: [0; ffi::IMB_SHA256_DIGEST_SIZE_IN_BYTES],
        opad: [0; ffi::IMB_SHA256_DIGEST_SIZE_IN_BYTES],
    });
    let d = &mut *data;
    // SAFETY: `keyexp` is the manager's `keyexp_128` or `keyexp_256` for this key's
    // length (the registry checked it); it reads that many bytes of key and writes
    // at most 15 round keys (240 bytes) to each of the two 16-byte-aligned arrays.
    unsafe {
        keyexp(
            m.cipher_key().as_ptr().cast(),
            d.enc.as_mut_ptr().cast(),
            d.dec.as_mut_ptr().cast(),
        )
    };
    let mut block = Zeroizing::new([0u8; ffi::IMB_SHA_BLOCK_SIZE]);
    for (pad, state) in [(IPAD, &mut d.ipad), (OPAD, &mut d.opad)] {
        block.fill(pad);
        block.iter_mut().zip(auth).for_each(|(b, k)| *b ^= k);
        // SAFETY: `one_block` is the manager's one-block SHA-1 or SHA-256; it reads
        // one 64-byte block and writes the digest (20 or 32 bytes) into 32 bytes.
        unsafe { one_block(block.as_ptr().cast(), state.as_mut_ptr().cast()) };
    }
    Some(data)
}

impl Drop for GcmKeyData {
    fn drop(&mut self) {
        self.bytes.zeroize();
    }
}

impl Drop for CbcHmacKeyData {
    fn drop(&mut self) {
        self.enc.zeroize();
        self.dec.zeroize();
        self.ipad.zeroize();
        self.opad.zeroize();
    }
}
