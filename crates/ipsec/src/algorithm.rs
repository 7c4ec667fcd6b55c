//! The ESP transforms linerate speaks, and the lengths each one sets on the wire and in
//! the key material.
//!
//! Two kinds:
//! - combined mode (AEAD): AES-GCM with a 16-byte ICV (RFC 4106) and
//!   ChaCha20-Poly1305 (RFC 7634): stream modes with an explicit 8-byte IV, a 4-byte
//!   salt taken from the end of the key material, and a 16-byte ICV;
//! - AES-CBC (RFC 3602) with HMAC-SHA1-96 (RFC 2404) or HMAC-SHA-256-128 (RFC 4868),
//!   encrypt then MAC: a 16-byte IV that must not be predictable, padding to the
//!   cipher's block, the HMAC truncated as ICV, and no salt; the key material is the
//!   cipher key followed by the HMAC key.
//!
//! Every length is a method matching on the variant.

use core::fmt;

/// An ESP transform: the cipher and the integrity check together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EspAlgorithm {
    /// AES-GCM with a 128-bit key and a 16-byte ICV (RFC 4106).
    Aes128Gcm,
    /// AES-GCM with a 256-bit key and a 16-byte ICV (RFC 4106).
    Aes256Gcm,
    /// ChaCha20-Poly1305 (RFC 7634).
    ChaCha20Poly1305,
    /// AES-128-CBC with HMAC-SHA1-96.
    Aes128CbcSha1,
    /// AES-256-CBC with HMAC-SHA1-96.
    Aes256CbcSha1,
    /// AES-128-CBC with HMAC-SHA-256-128.
    Aes128CbcSha256,
    /// AES-256-CBC with HMAC-SHA-256-128.
    Aes256CbcSha256,
}

impl EspAlgorithm {
    pub const ALL: [EspAlgorithm; 7] = [
        EspAlgorithm::Aes128Gcm,
        EspAlgorithm::Aes256Gcm,
        EspAlgorithm::ChaCha20Poly1305,
        EspAlgorithm::Aes128CbcSha1,
        EspAlgorithm::Aes256CbcSha1,
        EspAlgorithm::Aes128CbcSha256,
        EspAlgorithm::Aes256CbcSha256,
    ];

    /// The strongSwan proposal keyword, which is also how configuration names it.
    pub const fn name(self) -> &'static str {
        match self {
            EspAlgorithm::Aes128Gcm => "aes128gcm16",
            EspAlgorithm::Aes256Gcm => "aes256gcm16",
            EspAlgorithm::ChaCha20Poly1305 => "chacha20poly1305",
            EspAlgorithm::Aes128CbcSha1 => "aes128-sha1",
            EspAlgorithm::Aes256CbcSha1 => "aes256-sha1",
            EspAlgorithm::Aes128CbcSha256 => "aes128-sha256",
            EspAlgorithm::Aes256CbcSha256 => "aes256-sha256",
        }
    }

    pub fn from_name(name: &str) -> Option<EspAlgorithm> {
        EspAlgorithm::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The algorithm the crypto engines run for this transform: an AEAD, or a
    /// chained cipher and MAC.
    pub const fn aead(self) -> crypto::Algorithm {
        match self {
            EspAlgorithm::Aes128Gcm => crypto::Algorithm::Aes128Gcm,
            EspAlgorithm::Aes256Gcm => crypto::Algorithm::Aes256Gcm,
            EspAlgorithm::ChaCha20Poly1305 => crypto::Algorithm::ChaCha20Poly1305,
            EspAlgorithm::Aes128CbcSha1 => crypto::Algorithm::Aes128CbcHmacSha1,
            EspAlgorithm::Aes256CbcSha1 => crypto::Algorithm::Aes256CbcHmacSha1,
            EspAlgorithm::Aes128CbcSha256 => crypto::Algorithm::Aes128CbcHmacSha256,
            EspAlgorithm::Aes256CbcSha256 => crypto::Algorithm::Aes256CbcHmacSha256,
        }
    }

    /// Whether the transform is a cipher and a MAC chained (else an AEAD).
    pub const fn is_chained(self) -> bool {
        self.aead().is_chained()
    }

    /// Length of the key the engines take: the cipher key, and for a chained
    /// transform the HMAC key after it.
    pub const fn key_len(self) -> usize {
        self.aead().key_len()
    }

    /// Length of the salt: the nonce's first four bytes, fixed for the SA's life
    /// (RFC 4106 section 8.1, RFC 7634 section 4); CBC has none.
    pub const fn salt_len(self) -> usize {
        if self.is_chained() { 0 } else { 4 }
    }

    /// Length of the key material an operator gives for the SA: the key followed by
    /// the salt, as the same RFC sections take it from IKE's KEYMAT and as Linux
    /// `ip xfrm` (rfc4106 keys) and strongSwan write it; for CBC with HMAC, the
    /// cipher key then the HMAC key.
    pub const fn keymat_len(self) -> usize {
        self.key_len() + self.salt_len()
    }

    /// Length of the IV carried in each packet, before the ciphertext: for the
    /// AEADs the nonce is the salt followed by it (RFC 4106 section 3.1, RFC 7634
    /// section 2); for CBC it is one cipher block (RFC 3602 section 3).
    pub const fn iv_len(self) -> usize {
        if self.is_chained() {
            crypto::aead::CBC_IV_LEN
        } else {
            8
        }
    }

    /// Length of the ICV after the ciphertext: the full AEAD tag (RFC 4106 section 6,
    /// RFC 7634 section 2), or the truncated HMAC (RFC 2404: 12, RFC 4868: 16).
    pub const fn icv_len(self) -> usize {
        self.aead().tag_len()
    }

    /// What the payload, padding, pad length and next header together must be a
    /// multiple of: 4 for the stream modes (RFC 4303 section 2.4), the cipher's
    /// block for CBC (RFC 3602 section 2.4).
    pub const fn pad_align(self) -> usize {
        if self.is_chained() {
            crypto::aead::CBC_BLOCK_LEN
        } else {
            4
        }
    }
}

impl fmt::Display for EspAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for a in EspAlgorithm::ALL {
            assert_eq!(EspAlgorithm::from_name(a.name()), Some(a));
            assert_eq!(a.to_string(), a.name());
        }
        assert_eq!(EspAlgorithm::from_name("aes-128-gcm"), None);
        assert_eq!(EspAlgorithm::from_name(""), None);
    }

    #[test]
    fn lengths() {
        use EspAlgorithm::*;
        let expected = [
            // (algorithm, key, salt, keymat, iv, icv, pad alignment)
            (Aes128Gcm, 16, 4, 20, 8, 16, 4),
            (Aes256Gcm, 32, 4, 36, 8, 16, 4),
            (ChaCha20Poly1305, 32, 4, 36, 8, 16, 4),
            (Aes128CbcSha1, 36, 0, 36, 16, 12, 16),
            (Aes256CbcSha1, 52, 0, 52, 16, 12, 16),
            (Aes128CbcSha256, 48, 0, 48, 16, 16, 16),
            (Aes256CbcSha256, 64, 0, 64, 16, 16, 16),
        ];
        for (a, key, salt, keymat, iv, icv, align) in expected {
            assert_eq!(a.key_len(), key, "{a}");
            assert_eq!(a.salt_len(), salt, "{a}");
            assert_eq!(a.keymat_len(), keymat, "{a}");
            assert_eq!(a.iv_len(), iv, "{a}");
            assert_eq!(a.icv_len(), icv, "{a}");
            assert_eq!(a.pad_align(), align, "{a}");
        }
    }

    #[test]
    fn the_aeads_agree_with_the_engines() {
        for a in EspAlgorithm::ALL.into_iter().filter(|a| !a.is_chained()) {
            assert_eq!(a.aead().key_len(), a.key_len(), "{a}");
            assert_eq!(a.icv_len(), crypto::TAG_LEN, "{a}");
            assert_eq!(a.salt_len() + a.iv_len(), crypto::aead::NONCE_LEN, "{a}");
        }
    }
}
