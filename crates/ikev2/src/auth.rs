//! The AUTH payload for pre-shared keys (RFC 7296 section 2.15): each side MACs its
//! first message, the other side's nonce and a MAC of its own identity, with a key
//! made from the shared secret.

use crate::prf::Prf;
use crate::wire::Identification;
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

const KEY_PAD: &[u8] = b"Key Pad for IKEv2";

/// The octets a side authenticates: its first message as sent, the peer's nonce
/// data, and prf(SK_p, its ID payload's body).
pub fn signed_octets(
    prf: Prf,
    first_message: &[u8],
    peer_nonce: &[u8],
    sk_p: &[u8],
    id: &Identification,
) -> Vec<u8> {
    let maced_id = prf.prf(sk_p, &[&id.body()]);
    [first_message, peer_nonce, &maced_id].concat()
}

/// AUTH = prf(prf(Shared Secret, "Key Pad for IKEv2"), signed octets).
pub fn psk_auth(prf: Prf, psk: &[u8], octets: &[u8]) -> Zeroizing<Vec<u8>> {
    let key = prf.prf(psk, &[KEY_PAD]);
    prf.prf(&key, &[octets])
}

/// Whether `received` is the AUTH the shared secret gives, compared in constant
/// time.
pub fn verify_psk(prf: Prf, psk: &[u8], octets: &[u8], received: &[u8]) -> bool {
    let expected = psk_auth(prf, psk, octets);
    expected.len() == received.len() && bool::from(expected.ct_eq(received))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_different_key_id_or_message_fails() {
        let id = Identification {
            kind: 2,
            data: b"a".to_vec(),
        };
        let o = signed_octets(Prf::HmacSha256, b"msg", &[1; 16], &[2; 32], &id);
        let auth = psk_auth(Prf::HmacSha256, b"secret", &o);
        assert!(verify_psk(Prf::HmacSha256, b"secret", &o, &auth));
        assert!(!verify_psk(Prf::HmacSha256, b"secreT", &o, &auth));
        assert!(!verify_psk(Prf::HmacSha256, b"secret", &o, &auth[..31]));
        let other = Identification {
            kind: 2,
            data: b"b".to_vec(),
        };
        let o2 = signed_octets(Prf::HmacSha256, b"msg", &[1; 16], &[2; 32], &other);
        assert!(!verify_psk(Prf::HmacSha256, b"secret", &o2, &auth));
    }
}
