//! SA proposals: what one side offers (configured with strongSwan's proposal
//! keywords, e.g. `aes256gcm16-prfsha256-ecp256` for IKE or `aes128-sha256-esn` for
//! ESP), and what the other chooses from it (RFC 7296 section 2.7: exactly one
//! transform of each type from one proposal).

use crate::dh::DhGroup;
use crate::prf::Prf;
use crate::wire::{Proposal, Transform, protocol};
use ipsec::EspAlgorithm;

/// Transform types (RFC 7296 section 3.3.2).
pub mod transform_type {
    pub const ENCR: u8 = 1;
    pub const PRF: u8 = 2;
    pub const INTEG: u8 = 3;
    pub const DH: u8 = 4;
    pub const ESN: u8 = 5;
}
use transform_type as tt;

const ENCR_AES_CBC: u16 = 12;
const ENCR_AES_GCM_16: u16 = 20;
const ENCR_CHACHA20_POLY1305: u16 = 28;
const AUTH_HMAC_SHA1_96: u16 = 2;
const AUTH_HMAC_SHA2_256_128: u16 = 12;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cipher {
    AesCbc128,
    AesCbc256,
    AesGcm128,
    AesGcm256,
    ChaCha20Poly1305,
}

impl Cipher {
    const ALL: [Cipher; 5] = [
        Cipher::AesCbc128,
        Cipher::AesCbc256,
        Cipher::AesGcm128,
        Cipher::AesGcm256,
        Cipher::ChaCha20Poly1305,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            Cipher::AesCbc128 => "aes128",
            Cipher::AesCbc256 => "aes256",
            Cipher::AesGcm128 => "aes128gcm16",
            Cipher::AesGcm256 => "aes256gcm16",
            Cipher::ChaCha20Poly1305 => "chacha20poly1305",
        }
    }

    pub const fn is_aead(self) -> bool {
        !matches!(self, Cipher::AesCbc128 | Cipher::AesCbc256)
    }

    /// Key length without the salt.
    pub const fn key_len(self) -> usize {
        match self {
            Cipher::AesCbc128 | Cipher::AesGcm128 => 16,
            Cipher::AesCbc256 | Cipher::AesGcm256 | Cipher::ChaCha20Poly1305 => 32,
        }
    }

    /// The AEADs take a 4-byte salt from the key material after the key (RFC 5282
    /// section 7.1, RFC 7634 section 2).
    pub const fn salt_len(self) -> usize {
        if self.is_aead() { 4 } else { 0 }
    }

    fn transform(self) -> Transform {
        let (id, bits) = match self {
            Cipher::AesCbc128 => (ENCR_AES_CBC, Some(128)),
            Cipher::AesCbc256 => (ENCR_AES_CBC, Some(256)),
            Cipher::AesGcm128 => (ENCR_AES_GCM_16, Some(128)),
            Cipher::AesGcm256 => (ENCR_AES_GCM_16, Some(256)),
            Cipher::ChaCha20Poly1305 => (ENCR_CHACHA20_POLY1305, None),
        };
        Transform::new(tt::ENCR, id, bits)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Integrity {
    HmacSha1_96,
    HmacSha256_128,
}

impl Integrity {
    const ALL: [Integrity; 2] = [Integrity::HmacSha1_96, Integrity::HmacSha256_128];

    pub const fn name(self) -> &'static str {
        match self {
            Integrity::HmacSha1_96 => "sha1",
            Integrity::HmacSha256_128 => "sha256",
        }
    }

    pub const fn key_len(self) -> usize {
        match self {
            Integrity::HmacSha1_96 => 20,
            Integrity::HmacSha256_128 => 32,
        }
    }

    fn id(self) -> u16 {
        match self {
            Integrity::HmacSha1_96 => AUTH_HMAC_SHA1_96,
            Integrity::HmacSha256_128 => AUTH_HMAC_SHA2_256_128,
        }
    }
}

/// Which SA a proposal is for: the rules on transform types differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An IKE SA: an AEAD, a PRF and a key exchange group.
    Ike,
    /// An ESP child SA: a cipher (with an integrity algorithm unless it is an
    /// AEAD), extended sequence numbers or not, and optionally a group for PFS.
    Esp,
}

/// What one side offers: a set of algorithms of each transform type, any
/// combination of which it accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Offer {
    pub kind: Kind,
    pub ciphers: Vec<Cipher>,
    pub integrity: Vec<Integrity>,
    pub prfs: Vec<Prf>,
    pub groups: Vec<DhGroup>,
    /// ESP only: true for ESN, false for 32-bit sequence numbers.
    pub esn: Vec<bool>,
}

/// The one transform of each type the responder chose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chosen {
    pub cipher: Cipher,
    pub integrity: Option<Integrity>,
    pub prf: Option<Prf>,
    pub group: Option<DhGroup>,
    pub esn: bool,
}

impl Offer {
    /// Parses a strongSwan-style proposal: keywords joined by `-`, e.g.
    /// `aes256gcm16-prfsha256-ecp256` or `aes128-sha256-x25519-esn`.
    pub fn parse(kind: Kind, text: &str) -> Result<Offer, String> {
        let mut o = Offer {
            kind,
            ciphers: Vec::new(),
            integrity: Vec::new(),
            prfs: Vec::new(),
            groups: Vec::new(),
            esn: Vec::new(),
        };
        for word in text.split('-') {
            if let Some(c) = Cipher::ALL.into_iter().find(|c| c.name() == word) {
                o.ciphers.push(c);
            } else if let Some(i) = Integrity::ALL.into_iter().find(|i| i.name() == word) {
                o.integrity.push(i);
            } else if let Some(p) = Prf::ALL.into_iter().find(|p| p.name() == word) {
                o.prfs.push(p);
            } else if let Some(g) = DhGroup::ALL.into_iter().find(|g| g.name() == word) {
                o.groups.push(g);
            } else if word == "esn" || word == "noesn" {
                o.esn.push(word == "esn");
            } else {
                return Err(format!("unknown algorithm '{word}' in proposal '{text}'"));
            }
        }
        o.check().map_err(|e| format!("proposal '{text}': {e}"))?;
        if o.kind == Kind::Esp && o.esn.is_empty() {
            o.esn.push(false);
        }
        Ok(o)
    }

    fn check(&self) -> Result<(), &'static str> {
        if self.ciphers.is_empty() {
            return Err("no encryption algorithm");
        }
        let aead = self.ciphers.iter().filter(|c| c.is_aead()).count();
        if aead != 0 && aead != self.ciphers.len() {
            return Err("AEAD and non-AEAD ciphers cannot share a proposal");
        }
        match self.kind {
            Kind::Ike => {
                if aead == 0 {
                    return Err("IKE SAs here take AES-GCM or ChaCha20-Poly1305");
                }
                if self.prfs.is_empty() {
                    return Err("no PRF (prfsha256 or prfsha384)");
                }
                if self.groups.is_empty() {
                    return Err("no key exchange group (ecp256, ecp384 or x25519)");
                }
                if !self.integrity.is_empty() || !self.esn.is_empty() {
                    return Err("integrity algorithms and ESN are for ESP proposals");
                }
            }
            Kind::Esp => {
                if aead == 0 && self.integrity.is_empty() {
                    return Err("AES-CBC needs an integrity algorithm (sha1 or sha256)");
                }
                if aead != 0 && !self.integrity.is_empty() {
                    return Err("an AEAD takes no integrity algorithm");
                }
                if !self.prfs.is_empty() {
                    return Err("PRFs are for IKE proposals");
                }
            }
        }
        Ok(())
    }

    fn protocol(&self) -> u8 {
        match self.kind {
            Kind::Ike => protocol::IKE,
            Kind::Esp => protocol::ESP,
        }
    }

    /// The proposal this offer sends, numbered `number`, with `spi`; `with_group`
    /// false leaves the groups out (a child SA made in IKE_AUTH has no KE).
    pub fn to_proposal(&self, number: u8, spi: Vec<u8>, with_group: bool) -> Proposal {
        let mut transforms: Vec<Transform> = self.ciphers.iter().map(|c| c.transform()).collect();
        transforms.extend(
            self.prfs
                .iter()
                .map(|p| Transform::new(tt::PRF, p.id(), None)),
        );
        transforms.extend(
            self.integrity
                .iter()
                .map(|i| Transform::new(tt::INTEG, i.id(), None)),
        );
        if with_group {
            transforms.extend(
                self.groups
                    .iter()
                    .map(|g| Transform::new(tt::DH, g.id(), None)),
            );
        }
        transforms.extend(
            self.esn
                .iter()
                .map(|&e| Transform::new(tt::ESN, u16::from(e), None)),
        );
        Proposal {
            number,
            protocol: self.protocol(),
            spi,
            transforms,
        }
    }

    /// As responder: the first combination of this offer that `p` also contains,
    /// in this offer's order of preference. `with_group` false ignores the key
    /// exchange transforms (IKE_AUTH's child SA).
    pub fn choose(&self, p: &Proposal, with_group: bool) -> Option<Chosen> {
        if p.protocol != self.protocol() {
            return None;
        }
        let has = |t: Transform| p.transforms.contains(&t);
        let cipher = *self.ciphers.iter().find(|c| has(c.transform()))?;
        let integrity = match self.kind {
            Kind::Esp if !cipher.is_aead() => Some(
                *self
                    .integrity
                    .iter()
                    .find(|i| has(Transform::new(tt::INTEG, i.id(), None)))?,
            ),
            _ => None,
        };
        // An AEAD offered with an integrity transform is not a valid combination.
        if cipher.is_aead()
            && p.transforms
                .iter()
                .any(|t| t.kind == tt::INTEG && t.id != 0)
        {
            return None;
        }
        let prf = match self.kind {
            Kind::Ike => Some(
                *self
                    .prfs
                    .iter()
                    .find(|f| has(Transform::new(tt::PRF, f.id(), None)))?,
            ),
            Kind::Esp => None,
        };
        let peer_groups = p.transforms.iter().any(|t| t.kind == tt::DH && t.id != 0);
        let group = match (self.kind, with_group) {
            (Kind::Ike, _) => Some(
                *self
                    .groups
                    .iter()
                    .find(|g| has(Transform::new(tt::DH, g.id(), None)))?,
            ),
            (Kind::Esp, true) if !self.groups.is_empty() || peer_groups => Some(
                *self
                    .groups
                    .iter()
                    .find(|g| has(Transform::new(tt::DH, g.id(), None)))?,
            ),
            _ => None,
        };
        let esn = match self.kind {
            Kind::Ike => false,
            Kind::Esp => {
                let peer_esn: Vec<bool> = p
                    .transforms
                    .iter()
                    .filter(|t| t.kind == tt::ESN)
                    .map(|t| t.id == 1)
                    .collect();
                // No ESN transform at all means 32-bit sequence numbers.
                let peer_esn = if peer_esn.is_empty() {
                    vec![false]
                } else {
                    peer_esn
                };
                *self.esn.iter().find(|e| peer_esn.contains(e))?
            }
        };
        Some(Chosen {
            cipher,
            integrity,
            prf,
            group,
            esn,
        })
    }

    /// As initiator: checks the responder's reply names exactly one transform of
    /// each type this offer needs, each one offered, and returns them.
    pub fn accept_reply(&self, p: &Proposal, with_group: bool) -> Option<Chosen> {
        let mut seen = [0u8; 6];
        for t in &p.transforms {
            if !t.attributes_understood() && t.kind != tt::ENCR {
                return None;
            }
            *seen.get_mut(usize::from(t.kind))? += 1;
        }
        if seen.iter().any(|&n| n > 1) {
            return None;
        }
        let chosen = self.choose(p, with_group)?;
        // Nothing in the reply that the choice does not account for.
        let expected = 1
            + usize::from(chosen.integrity.is_some())
            + usize::from(chosen.prf.is_some())
            + usize::from(chosen.group.is_some())
            + usize::from(self.kind == Kind::Esp && p.transforms.iter().any(|t| t.kind == tt::ESN));
        (p.transforms.len() == expected).then_some(chosen)
    }
}

impl Chosen {
    /// The reply's proposal: the peer's number, our SPI, one transform per type.
    pub fn to_proposal(&self, kind: Kind, number: u8, spi: Vec<u8>) -> Proposal {
        let offer = Offer {
            kind,
            ciphers: vec![self.cipher],
            integrity: self.integrity.into_iter().collect(),
            prfs: self.prf.into_iter().collect(),
            groups: self.group.into_iter().collect(),
            esn: match kind {
                Kind::Esp => vec![self.esn],
                Kind::Ike => vec![],
            },
        };
        offer.to_proposal(number, spi, true)
    }

    /// The ESP transform the data path runs for this choice.
    pub fn esp_algorithm(&self) -> Option<EspAlgorithm> {
        Some(match (self.cipher, self.integrity) {
            (Cipher::AesGcm128, None) => EspAlgorithm::Aes128Gcm,
            (Cipher::AesGcm256, None) => EspAlgorithm::Aes256Gcm,
            (Cipher::ChaCha20Poly1305, None) => EspAlgorithm::ChaCha20Poly1305,
            (Cipher::AesCbc128, Some(Integrity::HmacSha1_96)) => EspAlgorithm::Aes128CbcSha1,
            (Cipher::AesCbc256, Some(Integrity::HmacSha1_96)) => EspAlgorithm::Aes256CbcSha1,
            (Cipher::AesCbc128, Some(Integrity::HmacSha256_128)) => EspAlgorithm::Aes128CbcSha256,
            (Cipher::AesCbc256, Some(Integrity::HmacSha256_128)) => EspAlgorithm::Aes256CbcSha256,
            _ => return None,
        })
    }

    /// The choice in strongSwan's keywords, for logs and `show ike`.
    pub fn describe(&self) -> String {
        let mut words = vec![self.cipher.name()];
        words.extend(self.integrity.map(Integrity::name));
        words.extend(self.prf.map(Prf::name));
        words.extend(self.group.map(DhGroup::name));
        if self.esn {
            words.push("esn");
        }
        words.join("-")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_strongswan_keywords() {
        let ike = Offer::parse(
            Kind::Ike,
            "aes256gcm16-chacha20poly1305-prfsha384-x25519-ecp256",
        )
        .unwrap();
        assert_eq!(ike.ciphers, [Cipher::AesGcm256, Cipher::ChaCha20Poly1305]);
        assert_eq!(ike.groups, [DhGroup::Curve25519, DhGroup::Ecp256]);
        let esp = Offer::parse(Kind::Esp, "aes128-sha256").unwrap();
        assert_eq!(esp.esn, [false]);
        for bad in [
            "aes128-sha256-prfsha256-ecp256",
            "aes256gcm16-ecp256",
            "aes256gcm16-prfsha256",
            "blowfish-prfsha256-ecp256",
            "",
        ] {
            assert!(Offer::parse(Kind::Ike, bad).is_err(), "{bad}");
        }
        for bad in [
            "aes128",
            "aes128gcm16-sha1",
            "aes128-aes128gcm16-sha1",
            "aes128gcm16-prfsha256",
        ] {
            assert!(Offer::parse(Kind::Esp, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn responder_chooses_in_its_own_order_and_initiator_checks_the_reply() {
        let initiator = Offer::parse(
            Kind::Ike,
            "aes128gcm16-aes256gcm16-prfsha256-prfsha384-ecp256-x25519",
        )
        .unwrap();
        let responder = Offer::parse(Kind::Ike, "aes256gcm16-prfsha384-x25519").unwrap();
        let sent = initiator.to_proposal(1, vec![], true);
        let chosen = responder.choose(&sent, true).unwrap();
        assert_eq!(chosen.describe(), "aes256gcm16-prfsha384-x25519");
        let reply = chosen.to_proposal(Kind::Ike, 1, vec![]);
        assert_eq!(initiator.accept_reply(&reply, true), Some(chosen));
        // A reply with two ciphers, or one never offered, is refused.
        let mut two = reply.clone();
        two.transforms.push(Cipher::AesGcm128.transform());
        assert_eq!(initiator.accept_reply(&two, true), None);
        let other = Offer::parse(Kind::Ike, "chacha20poly1305-prfsha256-ecp256").unwrap();
        let unoffered = other
            .choose(&other.to_proposal(1, vec![], true), true)
            .unwrap();
        assert_eq!(
            initiator.accept_reply(&unoffered.to_proposal(Kind::Ike, 1, vec![]), true),
            None
        );
        // Nothing in common.
        assert_eq!(other.choose(&sent, true), None);
    }

    #[test]
    fn esp_choices_map_to_data_path_algorithms() {
        for (text, alg) in [
            ("aes128gcm16", EspAlgorithm::Aes128Gcm),
            ("aes256gcm16-esn", EspAlgorithm::Aes256Gcm),
            ("chacha20poly1305", EspAlgorithm::ChaCha20Poly1305),
            ("aes128-sha1", EspAlgorithm::Aes128CbcSha1),
            ("aes256-sha256", EspAlgorithm::Aes256CbcSha256),
        ] {
            let o = Offer::parse(Kind::Esp, text).unwrap();
            let c = o
                .choose(&o.to_proposal(1, vec![1, 2, 3, 4], false), false)
                .unwrap();
            assert_eq!(c.esp_algorithm(), Some(alg), "{text}");
            let reply = c.to_proposal(Kind::Esp, 1, vec![5, 6, 7, 8]);
            assert_eq!(o.accept_reply(&reply, false), Some(c), "{text}");
        }
        // ESN must match: a peer that only does ESN cannot meet one that never does.
        let esn = Offer::parse(Kind::Esp, "aes128gcm16-esn").unwrap();
        let no = Offer::parse(Kind::Esp, "aes128gcm16").unwrap();
        assert_eq!(
            no.choose(&esn.to_proposal(1, vec![0; 4], false), false),
            None
        );
        // The child SA of IKE_AUTH ignores the groups a PFS proposal carries.
        let pfs = Offer::parse(Kind::Esp, "aes128gcm16-ecp256").unwrap();
        assert!(
            no.choose(&pfs.to_proposal(1, vec![0; 4], true), false)
                .is_some()
        );
    }
}
