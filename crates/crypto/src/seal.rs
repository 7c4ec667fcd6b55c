//! One-shot AEADs for handshake fields (ChaCha20-Poly1305 with a counter nonce,
//! whitepaper section 5.4) and cookie replies (XChaCha20-Poly1305, section 5.4.7).
//! These are a few dozen bytes each and off the data path, so no engine is involved.

use chacha20poly1305::aead::{AeadInPlace, KeyInit, Nonce, Tag};
use chacha20poly1305::{ChaCha20Poly1305, XChaCha20Poly1305, XNonce};

pub const TAG_LEN: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenError;

/// The 96-bit nonce WireGuard builds from a 64-bit counter: 4 zero bytes, then the
/// counter little-endian.
pub fn counter_nonce(counter: u64) -> [u8; 12] {
    let mut n = [0u8; 12];
    n[4..].copy_from_slice(&counter.to_le_bytes());
    n
}

/// Encrypts `plaintext` into `out` (`plaintext.len() + 16` bytes: ciphertext, tag).
pub fn seal(key: &[u8; 32], counter: u64, aad: &[u8], plaintext: &[u8], out: &mut [u8]) {
    let nonce = counter_nonce(counter);
    seal_with(
        ChaCha20Poly1305::new(key.into()),
        &nonce.into(),
        aad,
        plaintext,
        out,
    );
}

/// Decrypts `sealed` (ciphertext, tag) into `out` (`sealed.len() - 16` bytes).
/// On failure `out` is zeroed.
pub fn open(
    key: &[u8; 32],
    counter: u64,
    aad: &[u8],
    sealed: &[u8],
    out: &mut [u8],
) -> Result<(), OpenError> {
    let nonce = counter_nonce(counter);
    open_with(
        ChaCha20Poly1305::new(key.into()),
        &nonce.into(),
        aad,
        sealed,
        out,
    )
}

/// XChaCha20-Poly1305 encryption for cookie replies.
pub fn xseal(key: &[u8; 32], nonce: &[u8; 24], aad: &[u8], plaintext: &[u8], out: &mut [u8]) {
    let cipher = XChaCha20Poly1305::new(key.into());
    seal_with(cipher, XNonce::from_slice(nonce), aad, plaintext, out);
}

/// XChaCha20-Poly1305 decryption for cookie replies. On failure `out` is zeroed.
pub fn xopen(
    key: &[u8; 32],
    nonce: &[u8; 24],
    aad: &[u8],
    sealed: &[u8],
    out: &mut [u8],
) -> Result<(), OpenError> {
    let cipher = XChaCha20Poly1305::new(key.into());
    open_with(cipher, XNonce::from_slice(nonce), aad, sealed, out)
}

/// Seals with either AEAD: the ciphertext, then the tag, in `out`. The fields
/// sealed here are a few dozen bytes, far below either AEAD's length limit.
fn seal_with<C: AeadInPlace>(
    cipher: C,
    nonce: &Nonce<C>,
    aad: &[u8],
    plaintext: &[u8],
    out: &mut [u8],
) {
    assert_eq!(out.len(), plaintext.len() + TAG_LEN, "sealed output size");
    let (ct, tag_out) = out.split_at_mut(plaintext.len());
    ct.copy_from_slice(plaintext);
    let tag = cipher
        .encrypt_in_place_detached(nonce, aad, ct)
        .expect("handshake fields and cookies are far below the AEAD's length limit");
    tag_out.copy_from_slice(&tag);
}

/// Opens with either AEAD into `out`, zeroed when the tag does not verify.
fn open_with<C: AeadInPlace>(
    cipher: C,
    nonce: &Nonce<C>,
    aad: &[u8],
    sealed: &[u8],
    out: &mut [u8],
) -> Result<(), OpenError> {
    if sealed.len() < TAG_LEN || out.len() != sealed.len() - TAG_LEN {
        return Err(OpenError);
    }
    let (ct, tag) = sealed.split_at(out.len());
    out.copy_from_slice(ct);
    cipher
        .decrypt_in_place_detached(nonce, aad, out, Tag::<C>::from_slice(tag))
        .map_err(|_| {
            out.fill(0);
            OpenError
        })
}
