//! `tls-crypt` (version 1): every control packet encrypted and authenticated with
//! a key both ends hold, so that the TLS handshake, certificates included, is
//! hidden, and a packet from anyone without the key is refused at the first
//! check. On the wire: the first byte, the session id, the packet id, a 32-byte
//! HMAC-SHA256 tag, and the body under AES-256-CTR. The tag covers the first
//! byte, session id, packet id and the plain body; its first 16 bytes are the
//! counter's initial value (a synthetic IV, so a repeated packet id cannot
//! repeat a keystream for different bodies).

use aws_lc_rs::cipher::{
    AES_256, DecryptingKey, DecryptionContext, EncryptingKey, EncryptionContext, UnboundCipherKey,
};
use aws_lc_rs::hmac;
use aws_lc_rs::iv::FixedLength;

use crate::control::OP_SID_LEN;
use crate::packet_id::{PACKET_ID_LEN, PacketId};
use crate::static_key::{Direction, Key2};
use crate::{Refusal, Role};

/// Bytes of the tag.
pub const TAG_LEN: usize = 32;

struct Keys {
    hmac: hmac::Key,
    cipher: [u8; 32],
}

impl Drop for Keys {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.cipher);
    }
}

/// One end's tls-crypt keys.
pub struct TlsCrypt {
    send: Keys,
    recv: Keys,
}

impl TlsCrypt {
    pub fn new(key: &Key2, role: Role) -> TlsCrypt {
        let direction = match role {
            Role::Server => Direction::Normal,
            Role::Client => Direction::Inverse,
        };
        let (send, recv) = key.halves(direction);
        let keys = |half: crate::static_key::KeyHalf<'_>| Keys {
            hmac: hmac::Key::new(hmac::HMAC_SHA256, &half.hmac()[..32]),
            cipher: half.cipher()[..32].try_into().expect("32 bytes"),
        };
        TlsCrypt {
            send: keys(send),
            recv: keys(recv),
        }
    }

    pub(crate) fn wrap(&self, head: &[u8; OP_SID_LEN], pid: PacketId, body: &[u8]) -> Vec<u8> {
        let pid = pid.to_bytes();
        let mut cx = hmac::Context::with_key(&self.send.hmac);
        cx.update(head);
        cx.update(&pid);
        cx.update(body);
        let tag = cx.sign();
        let mut out = [&head[..], &pid, tag.as_ref(), body].concat();
        let iv: [u8; 16] = tag.as_ref()[..16].try_into().expect("16 bytes");
        let key = UnboundCipherKey::new(&AES_256, &self.send.cipher).expect("a 32-byte key");
        let ctr = EncryptingKey::ctr(key).expect("CTR takes any AES key");
        let at = OP_SID_LEN + PACKET_ID_LEN + TAG_LEN;
        ctr.less_safe_encrypt(
            &mut out[at..],
            EncryptionContext::Iv128(FixedLength::from(iv)),
        )
        .expect("CTR encrypts any length");
        out
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
        let mut body = ciphertext.to_vec();
        let iv: [u8; 16] = tag[..16].try_into().expect("16 bytes");
        let key = UnboundCipherKey::new(&AES_256, &self.recv.cipher).expect("a 32-byte key");
        let ctr = DecryptingKey::ctr(key).expect("CTR takes any AES key");
        ctr.decrypt(&mut body, DecryptionContext::Iv128(FixedLength::from(iv)))
            .expect("CTR decrypts any length");
        let mut cx = hmac::Context::with_key(&self.recv.hmac);
        cx.update(head);
        cx.update(pid);
        cx.update(&body);
        let expected = cx.sign();
        if !bool::from(subtle::ConstantTimeEq::ct_eq(expected.as_ref(), tag)) {
            zeroize::Zeroize::zeroize(&mut body);
            return Err(Refusal::BadAuth);
        }
        Ok((
            PacketId::from_bytes(pid.try_into().expect("eight bytes")),
            body,
        ))
    }
}
