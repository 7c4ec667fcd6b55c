//! Cookies (RFC 7296 section 2.6): under load, a responder answers an IKE_SA_INIT
//! request with a cookie instead of state and a key exchange, and only a request
//! that returns it proves its sender receives at its address. The cookie is
//! <version of the secret> | HMAC-SHA-256(secret, Ni | IPi | SPIi) cut to 16 bytes,
//! so checking one needs no state; the secret changes every few minutes and the
//! previous one is still accepted.

use aws_lc_rs::hmac;
use std::net::IpAddr;
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;

const MAC_LEN: usize = 16;
pub const COOKIE_LEN: usize = 1 + MAC_LEN;
/// How long one secret makes cookies.
const ROTATE_AFTER: Duration = Duration::from_secs(120);

pub struct CookieJar {
    version: u8,
    current: hmac::Key,
    previous: Option<hmac::Key>,
    made_at: Instant,
}

fn fresh_key() -> hmac::Key {
    let mut secret = zeroize::Zeroizing::new([0u8; 32]);
    aws_lc_rs::rand::fill(&mut secret[..]).expect("system randomness");
    hmac::Key::new(hmac::HMAC_SHA256, &secret[..])
}

fn mac(key: &hmac::Key, ni: &[u8], ip: IpAddr, spi_i: u64) -> [u8; MAC_LEN] {
    let mut ctx = hmac::Context::with_key(key);
    ctx.update(ni);
    match ip {
        IpAddr::V4(a) => ctx.update(&a.octets()),
        IpAddr::V6(a) => ctx.update(&a.octets()),
    }
    ctx.update(&spi_i.to_be_bytes());
    ctx.sign().as_ref()[..MAC_LEN]
        .try_into()
        .expect("16 of 32 bytes")
}

impl CookieJar {
    pub fn new(now: Instant) -> CookieJar {
        CookieJar {
            version: 0,
            current: fresh_key(),
            previous: None,
            made_at: now,
        }
    }

    fn rotate(&mut self, now: Instant) {
        if now.saturating_duration_since(self.made_at) >= ROTATE_AFTER {
            self.previous = Some(std::mem::replace(&mut self.current, fresh_key()));
            self.version = self.version.wrapping_add(1);
            self.made_at = now;
        }
    }

    /// The cookie for a request with nonce `ni` and SPI `spi_i` from `ip`.
    pub fn make(&mut self, ni: &[u8], ip: IpAddr, spi_i: u64, now: Instant) -> Vec<u8> {
        self.rotate(now);
        let mut c = vec![self.version];
        c.extend_from_slice(&mac(&self.current, ni, ip, spi_i));
        c
    }

    /// Whether `cookie` is one this jar made (with the current or the previous
    /// secret) for the same nonce, address and SPI; compared in constant time.
    pub fn check(
        &mut self,
        cookie: &[u8],
        ni: &[u8],
        ip: IpAddr,
        spi_i: u64,
        now: Instant,
    ) -> bool {
        self.rotate(now);
        let Some((&version, got)) = cookie.split_first() else {
            return false;
        };
        if got.len() != MAC_LEN {
            return false;
        }
        let key = if version == self.version {
            &self.current
        } else if version == self.version.wrapping_sub(1) {
            match &self.previous {
                Some(k) => k,
                None => return false,
            }
        } else {
            return false;
        };
        bool::from(mac(key, ni, ip, spi_i).ct_eq(got))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cookie_checks_only_for_its_request_and_for_two_secrets() {
        let t0 = Instant::now();
        let mut jar = CookieJar::new(t0);
        let ip: IpAddr = "198.18.2.2".parse().unwrap();
        let c = jar.make(&[1; 32], ip, 7, t0);
        assert_eq!(c.len(), COOKIE_LEN);
        assert!(jar.check(&c, &[1; 32], ip, 7, t0));
        assert!(!jar.check(&c, &[2; 32], ip, 7, t0));
        assert!(!jar.check(&c, &[1; 32], "198.18.2.3".parse().unwrap(), 7, t0));
        assert!(!jar.check(&c, &[1; 32], ip, 8, t0));
        assert!(!jar.check(&c[..16], &[1; 32], ip, 7, t0));
        let mut forged = c.clone();
        forged[5] ^= 1;
        assert!(!jar.check(&forged, &[1; 32], ip, 7, t0));
        // Still good after one rotation, not after two.
        let t1 = t0 + ROTATE_AFTER;
        assert!(jar.check(&c, &[1; 32], ip, 7, t1));
        let t2 = t1 + ROTATE_AFTER;
        assert!(!jar.check(&c, &[1; 32], ip, 7, t2));
    }
}
