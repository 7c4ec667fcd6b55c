//! BLAKE2s (RFC 7693) in the three shapes the Noise IK handshake uses, and the HKDF
//! chain built on HMAC-BLAKE2s (WireGuard whitepaper section 5.4, `Kdf_n`).

use blake2::digest::{FixedOutput, Mac, Update};
use blake2::{Blake2s256, Blake2sMac, Digest, digest::consts::U16};
use zeroize::Zeroize;

pub const HASH_LEN: usize = 32;
const BLOCK_LEN: usize = 64;

/// `Hash(a || b || ...)`: unkeyed BLAKE2s-256.
pub fn hash(parts: &[&[u8]]) -> [u8; HASH_LEN] {
    let mut h = Blake2s256::new();
    for p in parts {
        Digest::update(&mut h, p);
    }
    h.finalize().into()
}

/// `Mac(key, input)`: keyed BLAKE2s with a 16-byte output (MAC1, MAC2, cookies).
/// Keys longer than 32 bytes are refused by BLAKE2s itself; every WireGuard key is 32
/// bytes or, for the cookie MAC, 16.
pub fn mac(key: &[u8], parts: &[&[u8]]) -> [u8; 16] {
    let mut m = <Blake2sMac<U16> as blake2::digest::KeyInit>::new_from_slice(key)
        .expect("WireGuard MAC keys are at most 32 bytes");
    for p in parts {
        Mac::update(&mut m, p);
    }
    m.finalize_fixed().into()
}

/// `Hmac(key, input)`: RFC 2104 HMAC over BLAKE2s-256 (keys here are at most 32 bytes,
/// shorter than the 64-byte block, so they are only padded).
pub fn hmac(key: &[u8], parts: &[&[u8]]) -> [u8; HASH_LEN] {
    let mut k = [0u8; BLOCK_LEN];
    if key.len() > BLOCK_LEN {
        k[..HASH_LEN].copy_from_slice(&hash(&[key]));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let mut ipad = [0x36u8; BLOCK_LEN];
    let mut opad = [0x5cu8; BLOCK_LEN];
    for i in 0..BLOCK_LEN {
        ipad[i] ^= k[i];
        opad[i] ^= k[i];
    }
    let mut inner = Blake2s256::new();
    Update::update(&mut inner, &ipad);
    for p in parts {
        Update::update(&mut inner, p);
    }
    let mut inner_out: [u8; HASH_LEN] = inner.finalize_fixed().into();
    let mut outer = Blake2s256::new();
    Update::update(&mut outer, &opad);
    Update::update(&mut outer, &inner_out);
    let out = outer.finalize_fixed().into();
    k.zeroize();
    ipad.zeroize();
    opad.zeroize();
    inner_out.zeroize();
    out
}

/// `Kdf_n(key, input)` for n = 1..=3: HKDF (RFC 5869) with HMAC-BLAKE2s, empty info,
/// the chaining key as salt. Returns the first `N` 32-byte outputs.
pub fn kdf<const N: usize>(key: &[u8; 32], input: &[u8]) -> [[u8; 32]; N] {
    assert!((1..=3).contains(&N), "WireGuard uses Kdf1..Kdf3");
    let mut prk = hmac(key, &[input]);
    let mut out = [[0u8; 32]; N];
    let mut prev: &[u8] = &[];
    let mut t;
    for (i, o) in out.iter_mut().enumerate() {
        t = hmac(&prk, &[prev, &[i as u8 + 1]]);
        *o = t;
        prev = o;
    }
    prk.zeroize();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc7693_appendix_b_abc() {
        // RFC 7693 appendix B gives BLAKE2b; the BLAKE2s-256 digest of "abc" is in
        // appendix D's companion self-test and in every BLAKE2 reference.
        assert_eq!(
            hex::encode(hash(&[b"abc"])),
            "508c5e8c327c14e2e1a72ba34eeb452f37458b209ed63a294d999b4c86675982"
        );
    }

    #[test]
    fn parts_are_concatenated() {
        assert_eq!(hash(&[b"a", b"bc"]), hash(&[b"abc"]));
        assert_eq!(mac(&[1; 32], &[b"x", b"y"]), mac(&[1; 32], &[b"xy"]));
    }
}
