//! `tls-auth`: an HMAC over every control packet with a key both ends hold. On
//! the wire a packet is its first byte, the session id, the HMAC, the packet id
//! and the body; the HMAC covers the packet id, the first byte, the session id
//! and the body, in that order.

use aws_lc_rs::hmac;
use zeroize::Zeroizing;

use crate::Refusal;
use crate::control::OP_SID_LEN;
use crate::packet_id::{PACKET_ID_LEN, PacketId};
use crate::static_key::{Direction, Key2};

/// The digest of `tls-auth`'s HMAC (OpenVPN's `auth` option; SHA1 when unset).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthDigest {
    Sha1,
    Sha256,
    Sha384,
    Sha512,
}

impl AuthDigest {
    /// The digest `auth NAME` names, in any case, with or without the dash
    /// OpenSSL's names have.
    pub fn from_name(name: &str) -> Option<AuthDigest> {
        match name.to_ascii_uppercase().replace('-', "").as_str() {
            "SHA1" => Some(AuthDigest::Sha1),
            "SHA256" => Some(AuthDigest::Sha256),
            "SHA384" => Some(AuthDigest::Sha384),
            "SHA512" => Some(AuthDigest::Sha512),
            _ => None,
        }
    }

    fn algorithm(self) -> hmac::Algorithm {
        match self {
            AuthDigest::Sha1 => hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY,
            AuthDigest::Sha256 => hmac::HMAC_SHA256,
            AuthDigest::Sha384 => hmac::HMAC_SHA384,
            AuthDigest::Sha512 => hmac::HMAC_SHA512,
        }
    }

    pub fn tag_len(self) -> usize {
        match self {
            AuthDigest::Sha1 => 20,
            AuthDigest::Sha256 => 32,
            AuthDigest::Sha384 => 48,
            AuthDigest::Sha512 => 64,
        }
    }
}

/// One end's tls-auth keys.
pub struct TlsAuth {
    send: hmac::Key,
    recv: hmac::Key,
    len: usize,
}

impl TlsAuth {
    /// Keys from a static key file's contents and this end's `key-direction`.
    pub fn new(key: &Key2, direction: Direction, digest: AuthDigest) -> TlsAuth {
        let (send, recv) = key.halves(direction);
        let len = digest.tag_len();
        let make = |k: &[u8]| {
            let bytes = Zeroizing::new(k[..len].to_vec());
            hmac::Key::new(digest.algorithm(), &bytes)
        };
        TlsAuth {
            send: make(send.hmac()),
            recv: make(recv.hmac()),
            len,
        }
    }

    pub fn tag_len(&self) -> usize {
        self.len
    }

    pub(crate) fn wrap(&self, head: &[u8; OP_SID_LEN], pid: PacketId, body: &[u8]) -> Vec<u8> {
        let pid = pid.to_bytes();
        let mut cx = hmac::Context::with_key(&self.send);
        cx.update(&pid);
        cx.update(head);
        cx.update(body);
        let tag = cx.sign();
        [&head[..], tag.as_ref(), &pid, body].concat()
    }

    /// `rest` is the packet after the first byte and session id.
    pub(crate) fn unwrap<'p>(
        &self,
        head: &[u8; OP_SID_LEN],
        rest: &'p [u8],
    ) -> Result<(PacketId, &'p [u8]), Refusal> {
        if rest.len() < self.len + PACKET_ID_LEN {
            return Err(Refusal::Truncated);
        }
        let (tag, rest) = rest.split_at(self.len);
        let (pid, body) = rest.split_at(PACKET_ID_LEN);
        let mut cx = hmac::Context::with_key(&self.recv);
        cx.update(pid);
        cx.update(head);
        cx.update(body);
        let expected = cx.sign();
        // Constant time: the tag is a secret-dependent value under test.
        if !bool::from(subtle::ConstantTimeEq::ct_eq(expected.as_ref(), tag)) {
            return Err(Refusal::BadAuth);
        }
        Ok((
            PacketId::from_bytes(pid.try_into().expect("eight bytes")),
            body,
        ))
    }
}
