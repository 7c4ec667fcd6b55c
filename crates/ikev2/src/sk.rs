//! The encrypted payload (RFC 7296 section 3.14) with an AEAD (RFC 5282 for AES-GCM,
//! RFC 7634 for ChaCha20-Poly1305): an 8-byte IV, the inner payloads with padding
//! and a pad length byte encrypted, and a 16-byte ICV. The nonce is the 4-byte salt
//! from the key material and the IV; the associated data is the message from the
//! IKE header through the encrypted payload's generic header.

use crate::proposal::Cipher;
use crate::wire::{Error, HEADER_LEN, Header, payload_type};
use aws_lc_rs::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey};

const IV_LEN: usize = 8;
const ICV_LEN: usize = 16;
const GENERIC_LEN: usize = 4;

/// One direction's cipher with its salt, and the counter its IVs come from (an IV
/// must never repeat under a key; a counter guarantees it).
pub struct SkCipher {
    key: LessSafeKey,
    salt: [u8; 4],
    next_iv: u64,
}

impl SkCipher {
    /// `keymat` is the key followed by the 4-byte salt (SK_ei or SK_er).
    pub fn new(cipher: Cipher, keymat: &[u8]) -> SkCipher {
        let alg = match cipher {
            Cipher::AesGcm128 => &aead::AES_128_GCM,
            Cipher::AesGcm256 => &aead::AES_256_GCM,
            Cipher::ChaCha20Poly1305 => &aead::CHACHA20_POLY1305,
            Cipher::AesCbc128 | Cipher::AesCbc256 => {
                unreachable!("IKE SAs are only offered with an AEAD")
            }
        };
        let (key, salt) = keymat.split_at(cipher.key_len());
        SkCipher {
            key: LessSafeKey::new(UnboundKey::new(alg, key).expect("key length from the cipher")),
            salt: salt.try_into().expect("4-byte salt"),
            next_iv: 0,
        }
    }

    fn nonce(&self, iv: &[u8]) -> Nonce {
        let mut n = [0u8; 12];
        n[..4].copy_from_slice(&self.salt);
        n[4..].copy_from_slice(iv);
        Nonce::assume_unique_for_key(n)
    }

    /// A whole message: `header` (its length and next payload are filled in) and
    /// the encrypted payload holding `inner`, a payload chain starting with type
    /// `first_inner`.
    pub fn seal(&mut self, header: Header, first_inner: u8, inner: &[u8]) -> Vec<u8> {
        let mut text = Vec::with_capacity(inner.len() + 1);
        text.extend_from_slice(inner);
        // No padding: an AEAD needs no alignment, only the pad length byte.
        text.push(0);
        self.seal_text(header, first_inner, text)
    }

    /// Seals `text`: the inner chain with its padding and pad length already on.
    fn seal_text(&mut self, mut header: Header, first_inner: u8, mut text: Vec<u8>) -> Vec<u8> {
        let total = HEADER_LEN + GENERIC_LEN + IV_LEN + text.len() + ICV_LEN;
        header.next_payload = payload_type::SK;
        header.length = total as u32;
        let mut msg = Vec::with_capacity(total);
        header.emit(&mut msg);
        let sk_len = (total - HEADER_LEN) as u16;
        msg.extend_from_slice(&[first_inner, 0]);
        msg.extend_from_slice(&sk_len.to_be_bytes());
        let iv = self.next_iv.to_be_bytes();
        self.next_iv += 1;
        msg.extend_from_slice(&iv);
        let aad_end = HEADER_LEN + GENERIC_LEN;
        let tag = self
            .key
            .seal_in_place_separate_tag(self.nonce(&iv), Aad::from(&msg[..aad_end]), &mut text)
            .expect("message within AEAD limits");
        msg.extend_from_slice(&text);
        msg.extend_from_slice(tag.as_ref());
        msg
    }

    /// Decrypts the encrypted payload whose generic header starts at `sk_start` in
    /// `message` (a whole message whose header has been checked); returns the inner
    /// payload chain without its padding.
    pub fn open(&self, message: &[u8], sk_start: usize) -> Result<Vec<u8>, Error> {
        let body_start = sk_start + GENERIC_LEN;
        if message.len() < body_start + IV_LEN + 1 + ICV_LEN {
            return Err(Error::Truncated);
        }
        let iv = &message[body_start..body_start + IV_LEN];
        let mut text = message[body_start + IV_LEN..].to_vec();
        let plain = self
            .key
            .open_in_place(self.nonce(iv), Aad::from(&message[..body_start]), &mut text)
            .map_err(|_| Error::Malformed("encrypted payload (ICV)"))?;
        let (&pad, rest) = plain.split_last().ok_or(Error::Truncated)?;
        let keep = rest
            .len()
            .checked_sub(usize::from(pad))
            .ok_or(Error::Malformed("pad length"))?;
        Ok(rest[..keep].to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Payload, emit_chain, exchange, flags, parse_chain};

    fn header() -> Header {
        Header {
            spi_i: 1,
            spi_r: 2,
            next_payload: 0,
            exchange: exchange::IKE_AUTH,
            flags: flags::INITIATOR,
            message_id: 1,
            length: 0,
        }
    }

    #[test]
    fn seals_and_opens_with_every_cipher() {
        for c in [
            Cipher::AesGcm128,
            Cipher::AesGcm256,
            Cipher::ChaCha20Poly1305,
        ] {
            let keymat = vec![7u8; c.key_len() + 4];
            let mut tx = SkCipher::new(c, &keymat);
            let rx = SkCipher::new(c, &keymat);
            let (first, inner) = emit_chain(&[Payload::Nonce(vec![5; 16])]);
            let msg = tx.seal(header(), first, &inner);
            let h = Header::parse(&msg).unwrap();
            let chain = parse_chain(h.next_payload, &msg[HEADER_LEN..]).unwrap();
            let Payload::Encrypted { first_inner, start } = chain[0] else {
                panic!("not encrypted")
            };
            let plain = rx.open(&msg, HEADER_LEN + start).unwrap();
            assert_eq!(
                parse_chain(first_inner, &plain).unwrap(),
                vec![Payload::Nonce(vec![5; 16])]
            );
            // Any flipped bit, in the header (associated data) or the body, fails.
            for i in [0, 20, HEADER_LEN + 1, HEADER_LEN + 6, msg.len() - 1] {
                let mut bad = msg.clone();
                bad[i] ^= 1;
                assert!(rx.open(&bad, HEADER_LEN).is_err(), "{c:?} byte {i}");
            }
            // A second message uses a fresh IV.
            let again = tx.seal(header(), first, &inner);
            assert_ne!(
                msg[HEADER_LEN + 4..HEADER_LEN + 12],
                again[HEADER_LEN + 4..HEADER_LEN + 12]
            );
        }
    }

    #[test]
    fn padding_is_removed_and_a_pad_length_beyond_the_text_refused() {
        let keymat = vec![1u8; 20];
        let mut tx = SkCipher::new(Cipher::AesGcm128, &keymat);
        let rx = SkCipher::new(Cipher::AesGcm128, &keymat);
        let padded = tx.seal_text(header(), 0, vec![9, 0xee, 0xee, 2]);
        assert_eq!(rx.open(&padded, HEADER_LEN).unwrap(), vec![9]);
        let over = tx.seal_text(header(), 0, vec![9, 5]);
        assert_eq!(
            rx.open(&over, HEADER_LEN),
            Err(Error::Malformed("pad length"))
        );
    }
}
