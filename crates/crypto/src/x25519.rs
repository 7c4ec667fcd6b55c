//! X25519 (RFC 7748) for the Noise handshake. Secrets zero themselves on drop, and a
//! DH result of all zeros (a low-order peer point) is an error, as the whitepaper
//! requires, checked in constant time.

use rand::rngs::OsRng;
use subtle::ConstantTimeEq;
use zeroize::{Zeroize, ZeroizeOnDrop};

pub const KEY_LEN: usize = 32;

/// A static or ephemeral private key.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct PrivateKey(x25519_dalek::StaticSecret);

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct PublicKey(pub [u8; KEY_LEN]);

/// The output of one DH; zeroed on drop.
#[derive(Zeroize, ZeroizeOnDrop)]
pub struct SharedSecret([u8; KEY_LEN]);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllZeroSharedSecret;

impl PrivateKey {
    pub fn generate() -> PrivateKey {
        PrivateKey(x25519_dalek::StaticSecret::random_from_rng(OsRng))
    }

    /// Clamping happens inside every scalar multiplication, so any 32 bytes are a key.
    pub fn from_bytes(bytes: [u8; KEY_LEN]) -> PrivateKey {
        PrivateKey(x25519_dalek::StaticSecret::from(bytes))
    }

    pub fn to_bytes(&self) -> [u8; KEY_LEN] {
        self.0.to_bytes()
    }

    pub fn public_key(&self) -> PublicKey {
        PublicKey(*x25519_dalek::PublicKey::from(&self.0).as_bytes())
    }

    pub fn dh(&self, public: &PublicKey) -> Result<SharedSecret, AllZeroSharedSecret> {
        let shared = self
            .0
            .diffie_hellman(&x25519_dalek::PublicKey::from(public.0));
        let bytes = *shared.as_bytes();
        if bool::from(bytes.ct_eq(&[0u8; KEY_LEN])) {
            return Err(AllZeroSharedSecret);
        }
        Ok(SharedSecret(bytes))
    }

    /// Constant-time equality, for "is this the same private key" in configuration.
    pub fn ct_eq(&self, other: &PrivateKey) -> bool {
        bool::from(self.0.as_bytes().ct_eq(other.0.as_bytes()))
    }
}

impl core::fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("PrivateKey(<redacted>)")
    }
}

impl SharedSecret {
    pub fn as_bytes(&self) -> &[u8; KEY_LEN] {
        &self.0
    }
}

impl PublicKey {
    pub fn as_bytes(&self) -> &[u8; KEY_LEN] {
        &self.0
    }
}
