//! `tls-crypt` (version 1): every control packet encrypted and authenticated with
//! a key both ends hold, so that the TLS handshake, certificates included, is
//! hidden, and a packet from anyone without the key is refused at the first
//! check. On the wire: the first byte, the session id, the packet id, a 32-byte
//! HMAC-SHA256 tag, and the body under AES-256-CTR. The tag covers the first
//! byte, session id, packet id and the plain body; its first 16 bytes are the
//! counter's initial value (a synthetic IV, so a repeated packet id cannot
//! repeat a keystream for different bodies).

use aws_lc_rs::cipher::{AES_256, EncryptingKey, EncryptionContext, UnboundCipherKey};
use aws_lc_rs::hmac;
use aws_lc_rs::iv::FixedLength;

use crate::control::OP_SID_LEN;
use crate::packet_id::{PACKET_ID_LEN, PacketId};
use crate::static_key::{Direction, Key2};
use crate::{Refusal, Role};

/// Bytes of the tag.
pub const TAG_LEN: usize = 32;

/// The synthetic-IV construction tls-crypt and tls-crypt-v2's wrapped client
/// keys share: an HMAC-SHA256 tag over what the caller names and the plain text,
/// then the text under AES-256-CTR from the tag's first 16 bytes.
pub(crate) struct Siv {
    hmac: hmac::Key,
    cipher: [u8; 32],
}

impl Drop for Siv {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.cipher);
    }
}

impl Siv {
    /// `cipher` and `hmac` are at least 32 bytes; the first 32 of each are used.
    pub(crate) fn new(cipher: &[u8], hmac: &[u8]) -> Siv {
        Siv {
            hmac: hmac::Key::new(hmac::HMAC_SHA256, &hmac[..32]),
            cipher: cipher[..32].try_into().expect("32 bytes"),
        }
    }

    fn tag(&self, covered: &[&[u8]], plain: &[u8]) -> hmac::Tag {
        let mut cx = hmac::Context::with_key(&self.hmac);
        for part in covered {
            cx.update(part);
        }
        cx.update(plain);
        cx.sign()
    }

    fn ctr(&self, tag: &[u8], text: &mut [u8]) {
        let iv: [u8; 16] = tag[..16].try_into().expect("16 bytes");
        let key = UnboundCipherKey::new(&AES_256, &self.cipher).expect("a 32-byte key");
        // CTR is its own inverse: the same keystream encrypts and decrypts.
        let ctr = EncryptingKey::ctr(key).expect("CTR takes any AES key");
        ctr.less_safe_encrypt(text, EncryptionContext::Iv128(FixedLength::from(iv)))
            .expect("CTR encrypts any length");
    }

    /// The tag over `covered` and `plain`, and `plain` encrypted in place.
    pub(crate) fn seal(&self, covered: &[&[u8]], plain: &mut [u8]) -> [u8; TAG_LEN] {
        let tag = self.tag(covered, plain);
        self.ctr(tag.as_ref(), plain);
        tag.as_ref().try_into().expect("32 bytes")
    }

    /// The plain text of `ciphertext` once `tag` verifies over it and `covered`
    /// (compared in constant time); zeroed and refused otherwise.
    pub(crate) fn open(
        &self,
        covered: &[&[u8]],
        tag: &[u8],
        ciphertext: &[u8],
    ) -> Result<Vec<u8>, Refusal> {
        let mut plain = ciphertext.to_vec();
        self.ctr(tag, &mut plain);
        let expected = self.tag(covered, &plain);
        if !bool::from(subtle::ConstantTimeEq::ct_eq(expected.as_ref(), tag)) {
            zeroize::Zeroize::zeroize(&mut plain);
            return Err(Refusal::BadAuth);
        }
        Ok(plain)
    }
}

/// One end's tls-crypt keys.
pub struct TlsCrypt {
    send: Siv,
    recv: Siv,
}

impl TlsCrypt {
    pub fn new(key: &Key2, role: Role) -> TlsCrypt {
        let direction = match role {
            Role::Server => Direction::Normal,
            Role::Client => Direction::Inverse,
        };
        let (send, recv) = key.halves(direction);
        let keys = |half: crate::static_key::KeyHalf<'_>| Siv::new(half.cipher(), half.hmac());
        TlsCrypt {
            send: keys(send),
            recv: keys(recv),
        }
    }

    pub(crate) fn wrap(&self, head: &[u8; OP_SID_LEN], pid: PacketId, body: &[u8]) -> Vec<u8> {
        let pid = pid.to_bytes();
        let mut text = body.to_vec();
        let tag = self.send.seal(&[head, &pid], &mut text);
        [&head[..], &pid, &tag, &text].concat()
    }

    /// `rest` is the packet after the first byte and session id; the body comes
    /// back decrypted once its tag verifies.
    pub(crate) fn unwrap(
        &self,
        head: &[u8; OP_SID_LEN],
        rest: &[u8],
    ) -> Result<(PacketId, Vec<u8>), Refusal> {
        if rest.len() < PACKET_ID_LEN + TAG_LEN {
            return Err(Refusal::Truncated);
        }
        let (pid, rest) = rest.split_at(PACKET_ID_LEN);
        let (tag, ciphertext) = rest.split_at(TAG_LEN);
        let body = self.recv.open(&[head, pid], tag, ciphertext)?;
        Ok((
            PacketId::from_bytes(pid.try_into().expect("eight bytes")),
            body,
        ))
    }
}
