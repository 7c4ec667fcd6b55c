//! Data-channel key material for clients that do not offer the TLS key exporter:
//! OpenVPN's own derivation, the TLS 1.0 PRF (RFC 2246 section 5: P_MD5 over the
//! secret's first half XOR P_SHA1 over its second) applied twice to random
//! values both ends sent in their key-method 2 messages. Clients of OpenVPN 2.6
//! offer the exporter instead ([`EKM_LABEL`]), which a server prefers.

use hmac::{Hmac, Mac};
use md5::Md5;
use sha1::Sha1;
use zeroize::Zeroizing;

use crate::control::SessionId;
use crate::key_method::KeySource;
use crate::static_key::{KEY2_LEN, Key2};

/// The TLS key exporter's label for data-channel keys (RFC 5705): 256 bytes,
/// no context.
pub const EKM_LABEL: &[u8] = b"EXPORTER-OpenVPN-datakeys";

/// The TLS 1.0 PRF: `out.len()` bytes of `PRF(secret, label, seed)`.
pub fn tls1_prf(secret: &[u8], label_and_seed: &[u8], out: &mut [u8]) {
    let half = secret.len().div_ceil(2);
    let (s1, s2) = (&secret[..half], &secret[secret.len() - half..]);
    out.fill(0);
    p_hash::<Hmac<Md5>>(s1, label_and_seed, out);
    p_hash::<Hmac<Sha1>>(s2, label_and_seed, out);
}

/// XORs `P_hash(secret, seed)` into `out`.
fn p_hash<M: Mac + hmac::digest::KeyInit + Clone>(secret: &[u8], seed: &[u8], out: &mut [u8]) {
    let mac = <M as hmac::digest::KeyInit>::new_from_slice(secret).expect("HMAC takes any key");
    // A(1) = HMAC(secret, seed); A(i+1) = HMAC(secret, A(i)).
    let mut a = Zeroizing::new(
        mac.clone()
            .chain_update(seed)
            .finalize()
            .into_bytes()
            .to_vec(),
    );
    for chunk in out.chunks_mut(a.len()) {
        let block = mac
            .clone()
            .chain_update(&a[..])
            .chain_update(seed)
            .finalize()
            .into_bytes();
        for (o, b) in chunk.iter_mut().zip(block.iter()) {
            *o ^= b;
        }
        *a = mac
            .clone()
            .chain_update(&a[..])
            .finalize()
            .into_bytes()
            .to_vec();
    }
}

/// The 256 bytes of data-channel key material from both ends' key sources and
/// session ids, as OpenVPN derives them without the exporter.
pub fn openvpn_prf_key2(
    client: &KeySource,
    server: &KeySource,
    client_sid: SessionId,
    server_sid: SessionId,
) -> Key2 {
    let mut master = Zeroizing::new([0u8; 48]);
    let seed = [
        &b"OpenVPN master secret"[..],
        &client.random1,
        &server.random1,
    ]
    .concat();
    tls1_prf(&client.pre_master, &seed, &mut master[..]);
    let seed = [
        &b"OpenVPN key expansion"[..],
        &client.random2,
        &server.random2,
        &client_sid.0,
        &server_sid.0,
    ]
    .concat();
    let mut out = [0u8; KEY2_LEN];
    tls1_prf(&master[..], &seed, &mut out);
    let key = Key2::from_bytes(out);
    zeroize::Zeroize::zeroize(&mut out);
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    /// OpenVPN's own known answer for its TLS 1.0 PRF
    /// (`tests/unit_tests/openvpn/test_crypto.c`, `crypto_test_tls_prf`).
    #[test]
    fn the_prf_gives_openvpns_known_answer() {
        let secret = b"Lorem ipsum dolor sit amet, consectetur adipisici elit, sed eiusmod \
tempor incidunt ut labore et dolore magna aliqua.";
        let seed = b"Quis aute iure reprehenderit in voluptate velit esse cillum dolore";
        let mut out = [0; 32];
        tls1_prf(secret, seed, &mut out);
        assert_eq!(
            hex::encode(out),
            "d98c8518c85e946927916acfc2d592fbb1567e4b4b1459e6a904ac2ddab72d67"
        );
    }
}
