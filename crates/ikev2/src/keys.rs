//! Key derivation (RFC 7296 sections 2.14, 2.17 and 2.18): SKEYSEED from the nonces
//! and the shared secret, the IKE SA's keys from prf+ over it, and each child SA's
//! key material from SK_d. Every secret is zeroed when dropped.

use crate::prf::Prf;
use crate::proposal::Cipher;
use zeroize::Zeroizing;

/// SKEYSEED = prf(Ni | Nr, g^ir).
pub fn skeyseed(prf: Prf, ni: &[u8], nr: &[u8], shared: &[u8]) -> Zeroizing<Vec<u8>> {
    let key = Zeroizing::new([ni, nr].concat());
    prf.prf(&key, &[shared])
}

/// SKEYSEED of an IKE SA that rekeys one made with `old_prf` and `old_sk_d`:
/// prf(SK_d (old), g^ir (new) | Ni | Nr) (RFC 7296 section 2.18).
pub fn rekey_skeyseed(
    old_prf: Prf,
    old_sk_d: &[u8],
    shared: &[u8],
    ni: &[u8],
    nr: &[u8],
) -> Zeroizing<Vec<u8>> {
    old_prf.prf(old_sk_d, &[shared, ni, nr])
}

/// An IKE SA's keys. The IKE SAs here are protected by an AEAD, so SK_ai and SK_ar
/// are empty; SK_ei and SK_er are each the cipher key followed by its salt.
pub struct IkeKeys {
    pub prf: Prf,
    pub cipher: Cipher,
    pub sk_d: Zeroizing<Vec<u8>>,
    pub sk_ei: Zeroizing<Vec<u8>>,
    pub sk_er: Zeroizing<Vec<u8>>,
    pub sk_pi: Zeroizing<Vec<u8>>,
    pub sk_pr: Zeroizing<Vec<u8>>,
}

impl IkeKeys {
    /// {SK_d | SK_ai | SK_ar | SK_ei | SK_er | SK_pi | SK_pr} = prf+(SKEYSEED,
    /// Ni | Nr | SPIi | SPIr).
    pub fn derive(
        prf: Prf,
        cipher: Cipher,
        skeyseed: &[u8],
        ni: &[u8],
        nr: &[u8],
        spi_i: u64,
        spi_r: u64,
    ) -> IkeKeys {
        let (d, e, p) = (
            prf.output_len(),
            cipher.key_len() + cipher.salt_len(),
            prf.output_len(),
        );
        let all = prf.prf_plus(
            skeyseed,
            &[ni, nr, &spi_i.to_be_bytes(), &spi_r.to_be_bytes()],
            d + 2 * e + 2 * p,
        );
        let mut at = 0;
        let mut take = |n: usize| {
            let part = Zeroizing::new(all[at..at + n].to_vec());
            at += n;
            part
        };
        IkeKeys {
            prf,
            cipher,
            sk_d: take(d),
            sk_ei: take(e),
            sk_er: take(e),
            sk_pi: take(p),
            sk_pr: take(p),
        }
    }
}

/// A child SA's key material, one block per direction, each the encryption key
/// (with salt for an AEAD) followed by the integrity key: the layout
/// `ipsec::EspAlgorithm::keymat_len` describes.
pub struct ChildKeys {
    pub initiator_to_responder: Zeroizing<Vec<u8>>,
    pub responder_to_initiator: Zeroizing<Vec<u8>>,
}

/// KEYMAT = prf+(SK_d, [g^ir (new) |] Ni | Nr), the initiator's direction first
/// (RFC 7296 section 2.17).
pub fn child_keys(
    prf: Prf,
    sk_d: &[u8],
    shared: Option<&[u8]>,
    ni: &[u8],
    nr: &[u8],
    keymat_len: usize,
) -> ChildKeys {
    let all = match shared {
        Some(g) => prf.prf_plus(sk_d, &[g, ni, nr], 2 * keymat_len),
        None => prf.prf_plus(sk_d, &[ni, nr], 2 * keymat_len),
    };
    ChildKeys {
        initiator_to_responder: Zeroizing::new(all[..keymat_len].to_vec()),
        responder_to_initiator: Zeroizing::new(all[keymat_len..].to_vec()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_consecutive_slices_of_prf_plus() {
        let (ni, nr) = ([1u8; 32], [2u8; 32]);
        let seed = skeyseed(Prf::HmacSha256, &ni, &nr, &[3; 32]);
        let k = IkeKeys::derive(Prf::HmacSha256, Cipher::AesGcm256, &seed, &ni, &nr, 7, 9);
        let all = Prf::HmacSha256.prf_plus(
            &seed,
            &[&ni, &nr, &7u64.to_be_bytes(), &9u64.to_be_bytes()],
            32 + 36 * 2 + 32 * 2,
        );
        let joined = [&k.sk_d[..], &k.sk_ei, &k.sk_er, &k.sk_pi, &k.sk_pr].concat();
        assert_eq!(&joined[..], &all[..]);
        assert_eq!(k.sk_ei.len(), 36);
        let c = child_keys(Prf::HmacSha256, &k.sk_d, None, &ni, &nr, 20);
        assert_ne!(c.initiator_to_responder, c.responder_to_initiator);
        assert_eq!(c.initiator_to_responder.len(), 20);
    }
}
