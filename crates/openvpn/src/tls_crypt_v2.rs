//! `tls-crypt-v2`: every client has its own tls-crypt key (`Kc`), and brings it
//! to the server wrapped under the server's key, appended to its first packet
//! (a `P_CONTROL_HARD_RESET_CLIENT_V3`). The server unwraps it, checks the
//! packet under it, and from then on protects that client's control channel with
//! it as with `tls-crypt`. A lost client key is one client's, not the whole
//! deployment's.
//!
//! The wrapped key (`WKc`) is `T || AES-256-CTR(Ke, T[..16], Kc || metadata) ||
//! len`, where `len` is WKc's own length (16 bits, network order) and `T` the
//! HMAC-SHA256 under `Ka` of `len || Kc || metadata`: the synthetic-IV
//! construction of tls-crypt itself. The server key file holds two 64-byte keys;
//! `Ke` is the first 32 bytes of the first, `Ka` the first 32 of the second.
//! Metadata starts with its type: 0x00 free-form, 0x01 a 64-bit timestamp of the
//! key's making (what `openvpn --genkey tls-crypt-v2-client` writes by default).

use base64::Engine as _;
use zeroize::Zeroizing;

use crate::Refusal;
use crate::static_key::{KEY2_LEN, Key2};
use crate::tls_crypt::{Siv, TAG_LEN};

const SERVER_BEGIN: &str = "-----BEGIN OpenVPN tls-crypt-v2 server key-----";
const SERVER_END: &str = "-----END OpenVPN tls-crypt-v2 server key-----";
const CLIENT_BEGIN: &str = "-----BEGIN OpenVPN tls-crypt-v2 client key-----";
const CLIENT_END: &str = "-----END OpenVPN tls-crypt-v2 client key-----";

/// Bytes of a server key: two keys of 64.
const SERVER_KEY_LEN: usize = 128;
/// The longest wrapped key OpenVPN makes or takes (its `TLS_CRYPT_V2_MAX_WKC_LEN`).
pub const MAX_WKC_LEN: usize = 1024;
/// The length field at a wrapped key's end.
const LEN_LEN: usize = 2;

/// Metadata types.
pub const METADATA_USER: u8 = 0x00;
pub const METADATA_TIMESTAMP: u8 = 0x01;

/// A tls-crypt-v2 server key: what unwraps every client's key.
pub struct ServerKey {
    siv: Siv,
}

/// A client's key, unwrapped, and the metadata wrapped with it.
pub struct ClientKey {
    pub key: Key2,
    pub metadata: Vec<u8>,
}

impl ClientKey {
    /// When the key was made, for a timestamp's metadata (seconds since 1970).
    pub fn made_at(&self) -> Option<u64> {
        match self.metadata.split_first() {
            Some((&METADATA_TIMESTAMP, t)) => Some(u64::from_be_bytes(t.try_into().ok()?)),
            _ => None,
        }
    }
}

impl ServerKey {
    pub fn from_bytes(bytes: &[u8; SERVER_KEY_LEN]) -> ServerKey {
        ServerKey {
            siv: Siv::new(&bytes[..64], &bytes[64..]),
        }
    }

    /// Parses a server key file (`openvpn --genkey tls-crypt-v2-server`).
    pub fn parse_file(text: &str) -> Result<ServerKey, Refusal> {
        let bytes = pem_body(text, SERVER_BEGIN, SERVER_END)?;
        let bytes: &[u8; SERVER_KEY_LEN] = bytes
            .as_slice()
            .try_into()
            .map_err(|_| Refusal::BadKeyFile)?;
        Ok(ServerKey::from_bytes(bytes))
    }

    /// Wraps a client's key with `metadata` (what the key generator does).
    pub fn wrap_client_key(&self, key: &Key2, metadata: &[u8]) -> Vec<u8> {
        let wkc_len = TAG_LEN + KEY2_LEN + metadata.len() + LEN_LEN;
        let len = (wkc_len as u16).to_be_bytes();
        let mut text = Zeroizing::new([key.as_bytes().as_slice(), metadata].concat());
        let tag = self.siv.seal(&[&len], &mut text);
        [&tag[..], &text, &len].concat()
    }

    /// The client's key in `wkc`, once its tag verifies; refused otherwise.
    pub fn unwrap_client_key(&self, wkc: &[u8]) -> Result<ClientKey, Refusal> {
        if wkc.len() < TAG_LEN + KEY2_LEN + LEN_LEN || wkc.len() > MAX_WKC_LEN {
            return Err(Refusal::Truncated);
        }
        let (rest, len) = wkc.split_at(wkc.len() - LEN_LEN);
        if usize::from(u16::from_be_bytes([len[0], len[1]])) != wkc.len() {
            return Err(Refusal::Truncated);
        }
        let (tag, ciphertext) = rest.split_at(TAG_LEN);
        let plain = Zeroizing::new(self.siv.open(&[len], tag, ciphertext)?);
        let (key, metadata) = plain.split_at(KEY2_LEN);
        Ok(ClientKey {
            key: Key2::from_bytes(key.try_into().expect("KEY2_LEN bytes")),
            metadata: metadata.to_vec(),
        })
    }
}

/// A `P_CONTROL_HARD_RESET_CLIENT_V3` split into the tls-crypt packet and the
/// wrapped key appended to it (whose last two bytes say its length).
pub fn split_reset(packet: &[u8]) -> Result<(&[u8], &[u8]), Refusal> {
    let at = packet
        .len()
        .checked_sub(LEN_LEN)
        .ok_or(Refusal::Truncated)?;
    let len = usize::from(u16::from_be_bytes([packet[at], packet[at + 1]]));
    let start = packet.len().checked_sub(len).ok_or(Refusal::Truncated)?;
    Ok(packet.split_at(start))
}

/// A client key file's two parts: the client's key and its wrapped form, as
/// `openvpn --genkey tls-crypt-v2-client` writes them.
pub fn parse_client_file(text: &str) -> Result<(Key2, Vec<u8>), Refusal> {
    let bytes = pem_body(text, CLIENT_BEGIN, CLIENT_END)?;
    if bytes.len() < KEY2_LEN + TAG_LEN + LEN_LEN {
        return Err(Refusal::BadKeyFile);
    }
    let (key, wkc) = bytes.split_at(KEY2_LEN);
    Ok((
        Key2::from_bytes(key.try_into().expect("KEY2_LEN bytes")),
        wkc.to_vec(),
    ))
}

/// The base64 body between a PEM file's markers, decoded.
fn pem_body(text: &str, begin: &str, end: &str) -> Result<Zeroizing<Vec<u8>>, Refusal> {
    let mut lines = text.lines().map(str::trim);
    lines
        .by_ref()
        .find(|l| *l == begin)
        .ok_or(Refusal::BadKeyFile)?;
    // Room for all of it at once: a reallocation would leave a copy unzeroed.
    let mut body = Zeroizing::new(String::with_capacity(text.len()));
    for line in lines {
        if line == end {
            return base64::engine::general_purpose::STANDARD
                .decode(body.as_bytes())
                .map(Zeroizing::new)
                .map_err(|_| Refusal::BadKeyFile);
        }
        body.push_str(line);
    }
    Err(Refusal::BadKeyFile)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Made by `openvpn --genkey tls-crypt-v2-server` and `openvpn --tls-crypt-v2
    /// server.key --genkey tls-crypt-v2-client` (OpenVPN 2.6.14).
    const SERVER: &str = include_str!("../tests/stock/tls-crypt-v2-server.key");
    const CLIENT: &str = include_str!("../tests/stock/tls-crypt-v2-client.key");

    #[test]
    fn a_stock_client_key_unwraps_to_the_key_beside_it() {
        let server = ServerKey::parse_file(SERVER).unwrap();
        let (key, wkc) = parse_client_file(CLIENT).unwrap();
        let client = server.unwrap_client_key(&wkc).unwrap();
        assert_eq!(client.key.as_bytes(), key.as_bytes());
        assert_eq!(client.metadata.len(), 9, "a timestamp");
        let made = client.made_at().expect("a timestamp");
        assert!((1_700_000_000..4_000_000_000).contains(&made), "{made}");
        // Wrapping it again gives the same bytes (the construction is
        // deterministic).
        assert_eq!(server.wrap_client_key(&key, &client.metadata), wkc);
    }

    #[test]
    fn a_wrong_server_key_a_flipped_bit_or_a_bad_length_is_refused() {
        let server = ServerKey::parse_file(SERVER).unwrap();
        let (_, wkc) = parse_client_file(CLIENT).unwrap();
        let other = ServerKey::from_bytes(&[7; SERVER_KEY_LEN]);
        assert!(matches!(
            other.unwrap_client_key(&wkc),
            Err(Refusal::BadAuth)
        ));
        for i in [0, 40, wkc.len() - 3] {
            let mut bad = wkc.clone();
            bad[i] ^= 1;
            assert!(matches!(
                server.unwrap_client_key(&bad),
                Err(Refusal::BadAuth)
            ));
        }
        let mut bad = wkc.clone();
        bad[wkc.len() - 1] ^= 1;
        assert!(matches!(
            server.unwrap_client_key(&bad),
            Err(Refusal::Truncated)
        ));
        assert!(matches!(
            server.unwrap_client_key(&wkc[1..]),
            Err(Refusal::Truncated)
        ));
        assert!(server.unwrap_client_key(&[]).is_err());
        assert!(matches!(split_reset(&[1]), Err(Refusal::Truncated)));
        assert!(matches!(split_reset(&[0, 9]), Err(Refusal::Truncated)));
        let (packet, key) = split_reset(&[5, 5, 5, 0, 3]).unwrap();
        assert_eq!((packet, key), (&[5u8, 5][..], &[5u8, 0, 3][..]));
        assert!(matches!(
            ServerKey::parse_file(
                "-----BEGIN OpenVPN tls-crypt-v2 server key-----\nAAAA\n-----END OpenVPN tls-crypt-v2 server key-----\n"
            ),
            Err(Refusal::BadKeyFile)
        ));
    }
}
