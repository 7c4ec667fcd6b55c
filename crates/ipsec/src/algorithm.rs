//! The ESP transforms linerate speaks, and the lengths each one sets on the wire and in
//! the key material.
//!
//! Only combined-mode (AEAD) transforms so far: AES-GCM with a 16-byte ICV (RFC 4106)
//! and ChaCha20-Poly1305 (RFC 7634). Each is a stream mode with an explicit 8-byte IV,
//! a 4-byte salt taken from the end of the key material, and a 16-byte ICV. Every
//! length is a method matching on the variant, so a transform with other lengths
//! (AES-CBC with HMAC: a 16-byte IV, block-sized padding, a truncated HMAC as ICV)
//! is one more variant and one more arm in each; `aead` is the one method such a
//! transform cannot answer as is, and will then tell the combined modes apart.

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
}

impl EspAlgorithm {
    pub const ALL: [EspAlgorithm; 3] = [
        EspAlgorithm::Aes128Gcm,
        EspAlgorithm::Aes256Gcm,
        EspAlgorithm::ChaCha20Poly1305,
    ];

    /// The strongSwan proposal keyword, which is also how configuration names it.
    pub const fn name(self) -> &'static str {
        match self {
            EspAlgorithm::Aes128Gcm => "aes128gcm16",
            EspAlgorithm::Aes256Gcm => "aes256gcm16",
            EspAlgorithm::ChaCha20Poly1305 => "chacha20poly1305",
        }
    }

    pub fn from_name(name: &str) -> Option<EspAlgorithm> {
        EspAlgorithm::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The AEAD the crypto engines run for this transform.
    pub const fn aead(self) -> crypto::Algorithm {
        match self {
            EspAlgorithm::Aes128Gcm => crypto::Algorithm::Aes128Gcm,
            EspAlgorithm::Aes256Gcm => crypto::Algorithm::Aes256Gcm,
            EspAlgorithm::ChaCha20Poly1305 => crypto::Algorithm::ChaCha20Poly1305,
        }
    }

    /// Length of the cipher key.
    pub const fn key_len(self) -> usize {
        match self {
            EspAlgorithm::Aes128Gcm => 16,
            EspAlgorithm::Aes256Gcm | EspAlgorithm::ChaCha20Poly1305 => 32,
        }
    }

    /// Length of the salt: the nonce's first four bytes, fixed for the SA's life
    /// (RFC 4106 section 8.1, RFC 7634 section 4).
    pub const fn salt_len(self) -> usize {
        match self {
            EspAlgorithm::Aes128Gcm | EspAlgorithm::Aes256Gcm | EspAlgorithm::ChaCha20Poly1305 => 4,
        }
    }

    /// Length of the key material an operator gives for the SA: the key followed by
    /// the salt, as the same RFC sections take it from IKE's KEYMAT and as Linux
    /// `ip xfrm` (rfc4106 keys) and strongSwan write it.
    pub const fn keymat_len(self) -> usize {
        self.key_len() + self.salt_len()
    }

    /// Length of the IV carried in each packet, before the ciphertext; the nonce is
    /// the salt followed by it (RFC 4106 section 3.1, RFC 7634 section 2).
    pub const fn iv_len(self) -> usize {
        match self {
            EspAlgorithm::Aes128Gcm | EspAlgorithm::Aes256Gcm | EspAlgorithm::ChaCha20Poly1305 => 8,
        }
    }

    /// Length of the ICV after the ciphertext: the full AEAD tag (RFC 4106 section 6,
    /// RFC 7634 section 2).
    pub const fn icv_len(self) -> usize {
        match self {
            EspAlgorithm::Aes128Gcm | EspAlgorithm::Aes256Gcm | EspAlgorithm::ChaCha20Poly1305 => {
                16
            }
        }
    }

    /// What the payload, padding, pad length and next header together must be a
    /// multiple of. These are stream modes, so only ESP's own rule applies: the trailer
    /// ends on a 4-byte boundary (RFC 4303 section 2.4).
    pub const fn pad_align(self) -> usize {
        match self {
            EspAlgorithm::Aes128Gcm | EspAlgorithm::Aes256Gcm | EspAlgorithm::ChaCha20Poly1305 => 4,
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
    fn aead_agrees_with_the_engines() {
        for a in EspAlgorithm::ALL {
            assert_eq!(a.aead().key_len(), a.key_len(), "{a}");
            assert_eq!(a.icv_len(), crypto::TAG_LEN, "{a}");
            assert_eq!(a.salt_len() + a.iv_len(), crypto::aead::NONCE_LEN, "{a}");
        }
    }
}
