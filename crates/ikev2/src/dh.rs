//! Key exchange groups: NIST P-256 and P-384 (RFC 5903, groups 19 and 20) and
//! Curve25519 (RFC 8031, group 31). The KE payload carries an ECP point as x | y,
//! without the SEC1 0x04 prefix, and the shared secret is the x coordinate alone.

use aws_lc_rs::agreement::{self, PrivateKey, UnparsedPublicKey};
use zeroize::Zeroizing;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DhGroup {
    Ecp256,
    Ecp384,
    Curve25519,
}

/// A peer's public value that is the wrong length, not on the curve, or gives a
/// degenerate secret.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadPublicValue;

/// The SEC1 marker of an uncompressed point.
const UNCOMPRESSED: u8 = 0x04;

impl DhGroup {
    pub const ALL: [DhGroup; 3] = [DhGroup::Ecp256, DhGroup::Ecp384, DhGroup::Curve25519];

    /// Transform ID (transform type 4), also the KE payload's group number.
    pub const fn id(self) -> u16 {
        match self {
            DhGroup::Ecp256 => 19,
            DhGroup::Ecp384 => 20,
            DhGroup::Curve25519 => 31,
        }
    }

    pub fn from_id(id: u16) -> Option<DhGroup> {
        DhGroup::ALL.into_iter().find(|g| g.id() == id)
    }

    /// The strongSwan proposal keyword.
    pub const fn name(self) -> &'static str {
        match self {
            DhGroup::Ecp256 => "ecp256",
            DhGroup::Ecp384 => "ecp384",
            DhGroup::Curve25519 => "x25519",
        }
    }

    /// Length of the public value in the KE payload.
    pub const fn public_len(self) -> usize {
        match self {
            DhGroup::Ecp256 => 64,
            DhGroup::Ecp384 => 96,
            DhGroup::Curve25519 => 32,
        }
    }

    fn algorithm(self) -> &'static agreement::Algorithm {
        match self {
            DhGroup::Ecp256 => &agreement::ECDH_P256,
            DhGroup::Ecp384 => &agreement::ECDH_P384,
            DhGroup::Curve25519 => &agreement::X25519,
        }
    }

    fn is_ecp(self) -> bool {
        self != DhGroup::Curve25519
    }
}

/// One side's ephemeral key for one exchange.
pub struct KeyPair {
    group: DhGroup,
    private: PrivateKey,
    public: Vec<u8>,
}

impl KeyPair {
    pub fn generate(group: DhGroup) -> KeyPair {
        let private = PrivateKey::generate(group.algorithm()).expect("key generation");
        KeyPair::from_private(group, private)
    }

    /// A key pair from known private bytes (big-endian scalar for ECP, the raw
    /// 32 bytes for X25519): for known-answer tests.
    pub fn from_private_bytes(group: DhGroup, bytes: &[u8]) -> Option<KeyPair> {
        let private = PrivateKey::from_private_key(group.algorithm(), bytes).ok()?;
        Some(KeyPair::from_private(group, private))
    }

    fn from_private(group: DhGroup, private: PrivateKey) -> KeyPair {
        let sec1 = private.compute_public_key().expect("public key");
        let bytes = sec1.as_ref();
        let public = if group.is_ecp() { &bytes[1..] } else { bytes }.to_vec();
        KeyPair {
            group,
            private,
            public,
        }
    }

    pub fn group(&self) -> DhGroup {
        self.group
    }

    /// What goes in the KE payload.
    pub fn public(&self) -> &[u8] {
        &self.public
    }

    /// The shared secret g^ir with the peer's KE data.
    pub fn agree(&self, peer: &[u8]) -> Result<Zeroizing<Vec<u8>>, BadPublicValue> {
        if peer.len() != self.group.public_len() {
            return Err(BadPublicValue);
        }
        let mut sec1 = Vec::with_capacity(peer.len() + 1);
        if self.group.is_ecp() {
            sec1.push(UNCOMPRESSED);
        }
        sec1.extend_from_slice(peer);
        let peer = UnparsedPublicKey::new(self.group.algorithm(), sec1);
        agreement::agree(&self.private, &peer, BadPublicValue, |s| {
            Ok(Zeroizing::new(s.to_vec()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_sides_agree_in_every_group() {
        for g in DhGroup::ALL {
            let (a, b) = (KeyPair::generate(g), KeyPair::generate(g));
            assert_eq!(a.public().len(), g.public_len());
            let s1 = a.agree(b.public()).unwrap();
            let s2 = b.agree(a.public()).unwrap();
            assert_eq!(s1, s2, "{g:?}");
            assert_eq!(s1.len(), if g == DhGroup::Ecp384 { 48 } else { 32 });
        }
    }

    #[test]
    fn refuses_bad_public_values() {
        let a = KeyPair::generate(DhGroup::Ecp256);
        assert_eq!(a.agree(&[0; 63]), Err(BadPublicValue));
        // Not a point on the curve.
        assert_eq!(a.agree(&[1; 64]), Err(BadPublicValue));
        let x = KeyPair::generate(DhGroup::Curve25519);
        // A small-order point gives the all-zero secret, which is refused.
        assert_eq!(x.agree(&[0; 32]), Err(BadPublicValue));
    }

    #[test]
    fn x25519_matches_rfc7748() {
        let alice = hex::decode("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
            .unwrap();
        let bob_public =
            hex::decode("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
                .unwrap();
        let a = KeyPair::from_private_bytes(DhGroup::Curve25519, &alice).unwrap();
        assert_eq!(
            hex::encode(a.public()),
            "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"
        );
        assert_eq!(
            hex::encode(&*a.agree(&bob_public).unwrap()),
            "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742"
        );
    }
}
