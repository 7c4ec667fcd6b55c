//! The encrypted payload (RFC 7296 section 3.14) with an AEAD (RFC 5282 for AES-GCM,
//! RFC 7634 for ChaCha20-Poly1305): an 8-byte IV, the inner payloads with padding
//! and a pad length byte encrypted, and a 16-byte ICV. The nonce is the 4-byte salt
//! from the key material and the IV; the associated data is the message from the
//! IKE header through the encrypted payload's generic header. A message too large
//! for the path goes as RFC 7383 encrypted fragments, each sealed on its own.

use crate::proposal::Cipher;
use crate::wire::{Error, HEADER_LEN, Header, payload_type};
use aws_lc_rs::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey};

const IV_LEN: usize = 8;
const ICV_LEN: usize = 16;
const GENERIC_LEN: usize = 4;
/// Fragment Number and Total Fragments (RFC 7383 section 2.5).
const FRAGMENT_FIELDS: usize = 4;

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
    fn seal_text(&mut self, header: Header, first_inner: u8, text: Vec<u8>) -> Vec<u8> {
        self.seal_payload(header, payload_type::SK, first_inner, &[], text)
    }

    /// A message of `header` and one payload of type `kind` (SK, or SKF with the
    /// fragment's number and total in `fields`) sealing `text`. The associated
    /// data is everything before the IV: the IKE header, the payload's generic
    /// header and `fields` (RFC 7383 section 2.5.3).
    fn seal_payload(
        &mut self,
        mut header: Header,
        kind: u8,
        first_inner: u8,
        fields: &[u8],
        mut text: Vec<u8>,
    ) -> Vec<u8> {
        let total = HEADER_LEN + GENERIC_LEN + fields.len() + IV_LEN + text.len() + ICV_LEN;
        header.next_payload = kind;
        header.length = total as u32;
        let mut msg = Vec::with_capacity(total);
        header.emit(&mut msg);
        let payload_len = (total - HEADER_LEN) as u16;
        msg.extend_from_slice(&[first_inner, 0]);
        msg.extend_from_slice(&payload_len.to_be_bytes());
        msg.extend_from_slice(fields);
        let iv = self.next_iv.to_be_bytes();
        self.next_iv += 1;
        let aad_end = msg.len();
        msg.extend_from_slice(&iv);
        let tag = self
            .key
            .seal_in_place_separate_tag(self.nonce(&iv), Aad::from(&msg[..aad_end]), &mut text)
            .expect("message within AEAD limits");
        msg.extend_from_slice(&text);
        msg.extend_from_slice(tag.as_ref());
        msg
    }

    /// The message as RFC 7383 fragments, each carrying at most `room` bytes of
    /// the inner chain `inner` (type `first_inner`): the same header (message
    /// ID) on each, the first inner type in the first fragment only, each
    /// sealed on its own.
    pub fn seal_fragments(
        &mut self,
        header: Header,
        first_inner: u8,
        inner: &[u8],
        room: usize,
    ) -> Vec<Vec<u8>> {
        let pieces: Vec<&[u8]> = inner.chunks(room.max(1)).collect();
        let total = pieces.len() as u16;
        pieces
            .iter()
            .enumerate()
            .map(|(i, piece)| {
                let number = i as u16 + 1;
                let mut fields = [0u8; FRAGMENT_FIELDS];
                fields[..2].copy_from_slice(&number.to_be_bytes());
                fields[2..].copy_from_slice(&total.to_be_bytes());
                let mut text = piece.to_vec();
                text.push(0);
                let first = if number == 1 { first_inner } else { 0 };
                self.seal_payload(header, payload_type::SKF, first, &fields, text)
            })
            .collect()
    }

    /// Decrypts the encrypted payload whose generic header starts at `sk_start` in
    /// `message` (a whole message whose header has been checked); returns the inner
    /// payload chain without its padding.
    pub fn open(&self, message: &[u8], sk_start: usize) -> Result<Vec<u8>, Error> {
        self.open_body(message, sk_start + GENERIC_LEN)
    }

    /// Decrypts an encrypted fragment (RFC 7383) whose generic header starts at
    /// `skf_start`: its number, the total, and its piece of the inner chain.
    pub fn open_fragment(&self, message: &[u8], skf_start: usize) -> Result<Fragment, Error> {
        let (number, total) = fragment_numbers(message, skf_start).ok_or(Error::Truncated)?;
        if number == 0 || total == 0 || number > total {
            return Err(Error::Malformed("fragment number"));
        }
        let piece = self.open_body(message, skf_start + GENERIC_LEN + FRAGMENT_FIELDS)?;
        Ok(Fragment {
            number,
            total,
            piece,
        })
    }

    /// Decrypts what follows the associated data that ends at `body_start`: the
    /// IV, the ciphertext and the ICV.
    fn open_body(&self, message: &[u8], body_start: usize) -> Result<Vec<u8>, Error> {
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

/// The Fragment Number and Total Fragments of the encrypted fragment whose
/// generic header starts at `skf_start` (in clear: read before any decryption,
/// to tell a retransmission's first fragment).
pub fn fragment_numbers(message: &[u8], skf_start: usize) -> Option<(u16, u16)> {
    let f = message.get(skf_start + GENERIC_LEN..skf_start + GENERIC_LEN + FRAGMENT_FIELDS)?;
    Some((
        u16::from_be_bytes([f[0], f[1]]),
        u16::from_be_bytes([f[2], f[3]]),
    ))
}

/// One opened encrypted fragment.
pub struct Fragment {
    pub number: u16,
    pub total: u16,
    pub piece: Vec<u8>,
}

/// What sealing adds to the inner chain in a message: the IKE header, the
/// encrypted payload's generic header, IV, pad length byte and ICV.
pub const SEAL_OVERHEAD: usize = HEADER_LEN + GENERIC_LEN + IV_LEN + 1 + ICV_LEN;
/// An encrypted fragment adds its number and the total besides.
pub const FRAGMENT_OVERHEAD: usize = SEAL_OVERHEAD + FRAGMENT_FIELDS;

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

    #[test]
    fn fragments_seal_and_open_each_and_join_to_the_chain() {
        let keymat = vec![3u8; 36];
        let mut tx = SkCipher::new(Cipher::AesGcm256, &keymat);
        let rx = SkCipher::new(Cipher::AesGcm256, &keymat);
        let (first, inner) = emit_chain(&[Payload::Nonce(vec![5; 300])]);
        let parts = tx.seal_fragments(header(), first, &inner, 100);
        assert_eq!(parts.len(), inner.len().div_ceil(100));
        let mut joined = Vec::new();
        for (i, m) in parts.iter().enumerate() {
            let h = Header::parse(m).unwrap();
            assert_eq!(h.next_payload, payload_type::SKF);
            assert_eq!(h.length as usize, m.len());
            let chain = parse_chain(h.next_payload, &m[HEADER_LEN..]).unwrap();
            let Payload::EncryptedFragment { first_inner, start } = chain[0] else {
                panic!("not a fragment")
            };
            assert_eq!(first_inner, if i == 0 { first } else { 0 });
            let f = rx.open_fragment(m, HEADER_LEN + start).unwrap();
            assert_eq!((f.number as usize, f.total as usize), (i + 1, parts.len()));
            joined.extend(f.piece);
            // The numbers are associated data: changed, the fragment fails.
            let mut bad = m.clone();
            bad[HEADER_LEN + 5] ^= 1;
            assert!(rx.open_fragment(&bad, HEADER_LEN + start).is_err());
        }
        assert_eq!(joined, inner);
    }
}
