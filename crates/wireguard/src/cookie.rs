//! MAC1, MAC2 and cookie replies (whitepaper section 5.4.4 and 5.4.7).
//!
//! [`CookieChecker`] is the responder's side: it checks MAC1 on every handshake
//! message, and under load demands MAC2 made with a cookie bound to the sender's
//! address, sending cookie replies to those without. [`CookieJar`] is the initiator's
//! side, per peer: it computes MAC1 for the peer, remembers the last cookie the peer
//! sent, and adds MAC2 while that cookie is fresh.

use crate::constants::{COOKIE_SECRET_LATENCY, COOKIE_SECRET_MAX_AGE, LABEL_COOKIE, LABEL_MAC1};
use crypto::blake2s::{hash, mac};
use crypto::seal::{xopen, xseal};
use crypto::x25519::PublicKey;
use rand::RngCore;
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;
use subtle::ConstantTimeEq;
use wire::wireguard::{ENCRYPTED_COOKIE_LEN, XCHACHA_NONCE_LEN};
use zeroize::{Zeroize, ZeroizeOnDrop};

/// The sizes of a MAC and a cookie are the message format's.
pub use wire::wireguard::{COOKIE_LEN, MAC_LEN};

/// The byte offsets of MAC1 and MAC2 in a handshake message of `len` bytes: they are
/// its last 32 bytes.
fn mac_offsets(msg_len: usize) -> (usize, usize) {
    (msg_len - 2 * MAC_LEN, msg_len - MAC_LEN)
}

/// The responder's answer to a message's MACs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MacCheck {
    /// MAC1 is wrong: drop, say nothing.
    BadMac1,
    /// MAC1 is right and the device is not under load, or MAC2 is right too.
    Ok,
    /// Under load and MAC2 is missing or stale: answer with a cookie reply.
    NeedCookie,
}

#[derive(Zeroize, ZeroizeOnDrop)]
pub struct CookieChecker {
    mac1_key: [u8; 32],
    cookie_key: [u8; 32],
    secret: [u8; 32],
    #[zeroize(skip)]
    secret_born: Option<Instant>,
}

impl CookieChecker {
    pub fn new(our_public: &PublicKey) -> CookieChecker {
        CookieChecker {
            mac1_key: hash(&[LABEL_MAC1, our_public.as_bytes()]),
            cookie_key: hash(&[LABEL_COOKIE, our_public.as_bytes()]),
            secret: [0; 32],
            secret_born: None,
        }
    }

    /// Checks MAC1 always and, when `under_load` says so, MAC2 against the cookie `src`
    /// should hold. `under_load` is asked only once MAC1 has verified: it is where the
    /// caller counts handshake work, and a message anyone can forge without our public
    /// key must never count towards load. `msg` is the whole handshake message (its
    /// length was checked by the parser).
    pub fn check(
        &mut self,
        msg: &[u8],
        src: SocketAddr,
        under_load: impl FnOnce() -> bool,
        now: Instant,
    ) -> MacCheck {
        let (m1, m2) = mac_offsets(msg.len());
        let want1 = mac(&self.mac1_key, &[&msg[..m1]]);
        if !bool::from(want1.ct_eq(&msg[m1..m2])) {
            return MacCheck::BadMac1;
        }
        if !under_load() {
            return MacCheck::Ok;
        }
        let cookie = self.cookie_for(src, now);
        let want2 = mac(&cookie, &[&msg[..m2]]);
        if bool::from(want2.ct_eq(&msg[m2..])) {
            MacCheck::Ok
        } else {
            MacCheck::NeedCookie
        }
    }

    /// Builds the 64-byte cookie reply to `msg` (whose MAC1 was valid).
    pub fn reply(
        &mut self,
        msg: &[u8],
        sender_index: u32,
        src: SocketAddr,
        now: Instant,
    ) -> [u8; wire::wireguard::COOKIE_REPLY_LEN] {
        let (m1, m2) = mac_offsets(msg.len());
        let cookie = self.cookie_for(src, now);
        let mut out = [0u8; wire::wireguard::COOKIE_REPLY_LEN];
        let mut nonce = [0u8; XCHACHA_NONCE_LEN];
        rand::rngs::OsRng.fill_bytes(&mut nonce);
        let mut sealed = [0u8; ENCRYPTED_COOKIE_LEN];
        xseal(&self.cookie_key, &nonce, &msg[m1..m2], &cookie, &mut sealed);
        let mut v = wire::wireguard::CookieReply::emit(&mut out[..], sender_index)
            .expect("the buffer is exactly a cookie reply");
        v.set_nonce(&nonce);
        v.set_encrypted_cookie(&sealed);
        out
    }

    /// Mac(secret, source address and port); the secret is replaced every two minutes.
    fn cookie_for(&mut self, src: SocketAddr, now: Instant) -> [u8; COOKIE_LEN] {
        let stale = self
            .secret_born
            .is_none_or(|born| now.saturating_duration_since(born) >= COOKIE_SECRET_MAX_AGE);
        if stale {
            rand::rngs::OsRng.fill_bytes(&mut self.secret);
            self.secret_born = Some(now);
        }
        let port = src.port().to_be_bytes();
        match src.ip() {
            IpAddr::V4(a) => mac(&self.secret, &[&a.octets(), &port]),
            IpAddr::V6(a) => mac(&self.secret, &[&a.octets(), &port]),
        }
    }
}

/// The initiator's MAC state for one peer.
#[derive(Zeroize, ZeroizeOnDrop)]
pub struct CookieJar {
    mac1_key: [u8; 32],
    cookie_key: [u8; 32],
    cookie: [u8; COOKIE_LEN],
    #[zeroize(skip)]
    cookie_born: Option<Instant>,
    /// MAC1 of the last message sent: a cookie reply is bound to it.
    last_mac1: Option<[u8; MAC_LEN]>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadCookieReply;

impl CookieJar {
    pub fn new(peer_public: &PublicKey) -> CookieJar {
        CookieJar {
            mac1_key: hash(&[LABEL_MAC1, peer_public.as_bytes()]),
            cookie_key: hash(&[LABEL_COOKIE, peer_public.as_bytes()]),
            cookie: [0; COOKIE_LEN],
            cookie_born: None,
            last_mac1: None,
        }
    }

    /// Fills the last 32 bytes of `msg` with MAC1 and, while a cookie is fresh, MAC2.
    pub fn stamp(&mut self, msg: &mut [u8], now: Instant) {
        let (m1, m2) = mac_offsets(msg.len());
        let mac1 = mac(&self.mac1_key, &[&msg[..m1]]);
        msg[m1..m2].copy_from_slice(&mac1);
        self.last_mac1 = Some(mac1);
        let fresh = self.cookie_born.is_some_and(|born| {
            now.saturating_duration_since(born) < COOKIE_SECRET_MAX_AGE - COOKIE_SECRET_LATENCY
        });
        let mac2 = if fresh {
            mac(&self.cookie, &[&msg[..m2]])
        } else {
            [0; MAC_LEN]
        };
        msg[m2..].copy_from_slice(&mac2);
    }

    /// Takes the cookie out of a reply to our last message. Changes nothing on failure.
    pub fn consume_reply(
        &mut self,
        nonce: &[u8; XCHACHA_NONCE_LEN],
        sealed: &[u8],
        now: Instant,
    ) -> Result<(), BadCookieReply> {
        let Some(mac1) = self.last_mac1 else {
            return Err(BadCookieReply);
        };
        let mut cookie = [0u8; COOKIE_LEN];
        xopen(&self.cookie_key, nonce, &mac1, sealed, &mut cookie).map_err(|_| BadCookieReply)?;
        self.cookie = cookie;
        cookie.zeroize();
        self.cookie_born = Some(now);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crypto::x25519::PrivateKey;

    #[test]
    fn cookie_round_trip_and_binding() {
        let responder = PrivateKey::generate().public_key();
        let mut checker = CookieChecker::new(&responder);
        let mut jar = CookieJar::new(&responder);
        let now = Instant::now();
        let src: SocketAddr = "198.18.0.1:51820".parse().unwrap();
        let mut msg = [7u8; 148];
        jar.stamp(&mut msg, now);
        assert_eq!(checker.check(&msg, src, || false, now), MacCheck::Ok);
        assert_eq!(checker.check(&msg, src, || true, now), MacCheck::NeedCookie);
        let reply = checker.reply(&msg, 1234, src, now);
        let r = wire::wireguard::CookieReply::new_checked(&reply[..]).unwrap();
        assert_eq!(r.receiver_index(), 1234);
        jar.consume_reply(r.nonce(), r.encrypted_cookie(), now)
            .unwrap();
        jar.stamp(&mut msg, now);
        assert_eq!(checker.check(&msg, src, || true, now), MacCheck::Ok);
        let elsewhere: SocketAddr = "198.18.0.1:51821".parse().unwrap();
        assert_eq!(
            checker.check(&msg, elsewhere, || true, now),
            MacCheck::NeedCookie
        );
        msg[3] ^= 1;
        assert_eq!(checker.check(&msg, src, || false, now), MacCheck::BadMac1);
        // A replayed cookie reply no longer matches the MAC1 of the newest message.
        msg[20] ^= 1;
        jar.stamp(&mut msg, now);
        assert!(
            jar.consume_reply(r.nonce(), r.encrypted_cookie(), now)
                .is_err()
        );
    }
}
