//! The portable path: ChaCha20 (RFC 8439 section 2.3-2.4) and the AEAD construction
//! (section 2.8) one op at a time in plain Rust. It is the path for CPUs without
//! AVX2, the yardstick the vector paths are tested against, and where the block
//! path's few odd blocks are finished.

use crate::field::{self, Limbs};

/// "expand 32-byte k" as four little-endian words (section 2.3).
pub(crate) const SIGMA: [u32; 4] = [0x6170_7865, 0x3320_646e, 0x7962_2d32, 0x6b20_6574];

/// The 256-bit key as the eight little-endian words of state words 4..12.
pub(crate) fn key_words(key: &[u8]) -> [u32; 8] {
    let mut w = [0u32; 8];
    for (w, b) in w.iter_mut().zip(key.chunks_exact(4)) {
        *w = u32::from_le_bytes(b.try_into().expect("4 bytes"));
    }
    w
}

/// The 96-bit nonce as state words 13..16.
pub(crate) fn nonce_words(nonce: &[u8; 12]) -> [u32; 3] {
    let mut w = [0u32; 3];
    for (w, b) in w.iter_mut().zip(nonce.chunks_exact(4)) {
        *w = u32::from_le_bytes(b.try_into().expect("4 bytes"));
    }
    w
}

fn quarter_round(x: &mut [u32; 16], a: usize, b: usize, c: usize, d: usize) {
    x[a] = x[a].wrapping_add(x[b]);
    x[d] = (x[d] ^ x[a]).rotate_left(16);
    x[c] = x[c].wrapping_add(x[d]);
    x[b] = (x[b] ^ x[c]).rotate_left(12);
    x[a] = x[a].wrapping_add(x[b]);
    x[d] = (x[d] ^ x[a]).rotate_left(8);
    x[c] = x[c].wrapping_add(x[d]);
    x[b] = (x[b] ^ x[c]).rotate_left(7);
}

/// One 64-byte keystream block (section 2.3).
pub(crate) fn block(key: &[u32; 8], counter: u32, nonce: &[u32; 3]) -> [u8; 64] {
    let mut init = [0u32; 16];
    init[..4].copy_from_slice(&SIGMA);
    init[4..12].copy_from_slice(key);
    init[12] = counter;
    init[13..].copy_from_slice(nonce);
    let mut x = init;
    chacha_rounds!(quarter_round, &mut x);
    let mut out = [0u8; 64];
    for (i, o) in out.chunks_exact_mut(4).enumerate() {
        o.copy_from_slice(&x[i].wrapping_add(init[i]).to_le_bytes());
    }
    out
}

/// XORs the keystream from block `counter` on into `data` (section 2.4).
pub(crate) fn xor_keystream(key: &[u32; 8], nonce: &[u32; 3], counter: u32, data: &mut [u8]) {
    for (i, chunk) in data.chunks_mut(64).enumerate() {
        let ks = block(key, counter.wrapping_add(i as u32), nonce);
        chunk.iter_mut().zip(ks).for_each(|(d, k)| *d ^= k);
    }
}

/// The tail of the AEAD's MAC input that is not in packet memory: the zero-padded
/// last partial blocks of aad and ciphertext and the two lengths (section 2.8).
/// Layout: `[aad tail | text tail | le64(aad len) le64(text len)]`, 16 bytes each.
pub(crate) fn mac_tail(aad: &[u8], text: &[u8]) -> [u8; 48] {
    let mut t = [0u8; 48];
    let a = &aad[aad.len() / 16 * 16..];
    t[..a.len()].copy_from_slice(a);
    let c = &text[text.len() / 16 * 16..];
    t[16..16 + c.len()].copy_from_slice(c);
    t[32..40].copy_from_slice(&(aad.len() as u64).to_le_bytes());
    t[40..].copy_from_slice(&(text.len() as u64).to_le_bytes());
    t
}

/// The blocks of the MAC input that come from `mac_tail`, as a slice of it.
pub(crate) fn tail_blocks(tail: &[u8; 48], aad_len: usize, text_len: usize) -> [&[u8]; 2] {
    let a = if !aad_len.is_multiple_of(16) {
        &tail[..16]
    } else {
        &[]
    };
    let c = if !text_len.is_multiple_of(16) {
        &tail[16..]
    } else {
        &tail[32..]
    };
    [a, c]
}

/// The AEAD tag over `aad` and ciphertext `text` with one-time key `otk`.
pub(crate) fn aead_tag(otk: &[u8; 64], aad: &[u8], text: &[u8]) -> [u8; 16] {
    let r = Limbs::clamped_r(otk[..16].try_into().expect("16 bytes"));
    let tail = mac_tail(aad, text);
    let [aad_tail, text_tail] = tail_blocks(&tail, aad.len(), text.len());
    let mut h = field::absorb_blocks(Limbs::ZERO, r, &aad[..aad.len() / 16 * 16]);
    h = field::absorb_blocks(h, r, aad_tail);
    h = field::absorb_blocks(h, r, &text[..text.len() / 16 * 16]);
    h = field::absorb_blocks(h, r, text_tail);
    h.tag(otk[16..32].try_into().expect("16 bytes"))
}

/// Raw ChaCha20 encryption from block `counter` on (section 2.4), for the known-answer
/// tests.
pub fn chacha20(key: &[u8; 32], nonce: &[u8; 12], counter: u32, data: &mut [u8]) {
    xor_keystream(&key_words(key), &nonce_words(nonce), counter, data);
}
