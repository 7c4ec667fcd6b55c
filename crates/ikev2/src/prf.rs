//! The pseudorandom functions IKE SAs negotiate (RFC 4868: HMAC-SHA-256 and
//! HMAC-SHA-384) and prf+ (RFC 7296 section 2.13), which stretches one into as many
//! bytes of key material as the SA needs.

use aws_lc_rs::hmac;
use zeroize::Zeroizing;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Prf {
    HmacSha256,
    HmacSha384,
}

impl Prf {
    pub const ALL: [Prf; 2] = [Prf::HmacSha256, Prf::HmacSha384];

    /// Transform ID (transform type 2).
    pub const fn id(self) -> u16 {
        match self {
            Prf::HmacSha256 => 5,
            Prf::HmacSha384 => 6,
        }
    }

    pub fn from_id(id: u16) -> Option<Prf> {
        Prf::ALL.into_iter().find(|p| p.id() == id)
    }

    /// The strongSwan proposal keyword.
    pub const fn name(self) -> &'static str {
        match self {
            Prf::HmacSha256 => "prfsha256",
            Prf::HmacSha384 => "prfsha384",
        }
    }

    /// Output length, which is also the length of SK_d, SK_pi and SK_pr (RFC 7296
    /// section 2.14: the PRF's preferred key size).
    pub const fn output_len(self) -> usize {
        match self {
            Prf::HmacSha256 => 32,
            Prf::HmacSha384 => 48,
        }
    }

    fn algorithm(self) -> hmac::Algorithm {
        match self {
            Prf::HmacSha256 => hmac::HMAC_SHA256,
            Prf::HmacSha384 => hmac::HMAC_SHA384,
        }
    }

    /// prf(key, data over the concatenation of `parts`).
    pub fn prf(self, key: &[u8], parts: &[&[u8]]) -> Zeroizing<Vec<u8>> {
        let mut ctx = hmac::Context::with_key(&hmac::Key::new(self.algorithm(), key));
        for p in parts {
            ctx.update(p);
        }
        Zeroizing::new(ctx.sign().as_ref().to_vec())
    }

    /// prf+(key, seed) cut to `len` bytes: T1 = prf(K, S | 0x01), Tn = prf(K, Tn-1 |
    /// S | n). At most 255 blocks (RFC 7296 section 2.13); more is a caller's bug.
    pub fn prf_plus(self, key: &[u8], seed: &[&[u8]], len: usize) -> Zeroizing<Vec<u8>> {
        assert!(len <= 255 * self.output_len(), "prf+ asked for {len} bytes");
        let hkey = hmac::Key::new(self.algorithm(), key);
        let mut out = Zeroizing::new(Vec::with_capacity(len + self.output_len()));
        let mut counter = 1u8;
        let mut previous = 0..0;
        while out.len() < len {
            let mut ctx = hmac::Context::with_key(&hkey);
            ctx.update(&out[previous.clone()]);
            for s in seed {
                ctx.update(s);
            }
            ctx.update(&[counter]);
            let start = out.len();
            out.extend_from_slice(ctx.sign().as_ref());
            previous = start..out.len();
            counter = counter.wrapping_add(1);
        }
        out.truncate(len);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc4231_case_2() {
        let out = Prf::HmacSha256.prf(b"Jefe", &[b"what do ya want ", b"for nothing?"]);
        assert_eq!(
            hex::encode(&*out),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        let out = Prf::HmacSha384.prf(b"Jefe", &[b"what do ya want for nothing?"]);
        assert_eq!(
            hex::encode(&*out),
            "af45d2e376484031617f78d2b58a6b1b9c7ef464f5a01b47e42ec3736322445e\
             8e2240ca5e69e2c78b3239ecfab21649"
        );
    }

    #[test]
    fn prf_plus_chains_its_blocks() {
        let (k, s) = (b"key".as_slice(), b"seed".as_slice());
        let p = Prf::HmacSha256;
        let t1 = p.prf(k, &[s, &[1]]);
        let t2 = p.prf(k, &[&t1, s, &[2]]);
        let t3 = p.prf(k, &[&t2, s, &[3]]);
        let expected = [t1.as_slice(), &t2, &t3].concat();
        assert_eq!(&*p.prf_plus(k, &[s], 80), &expected[..80]);
        assert_eq!(&*p.prf_plus(k, &[b"se", b"ed"], 32), &expected[..32]);
    }
}
