//! The data channel's ciphers and choosing one: a server offers its
//! `data-ciphers` in its order of preference, a client its `IV_CIPHERS`, and the
//! first of the server's list that the client has is used. Only AEAD ciphers are
//! served: the CBC ciphers with an HMAC that OpenVPN still accepts for old peers
//! need a second data-channel layout and are weaker.

use crate::peer_info::PeerInfo;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DataCipher {
    Aes128Gcm,
    Aes256Gcm,
    Chacha20Poly1305,
}

impl DataCipher {
    pub const ALL: [DataCipher; 3] = [
        DataCipher::Aes256Gcm,
        DataCipher::Aes128Gcm,
        DataCipher::Chacha20Poly1305,
    ];

    /// OpenVPN's name for the cipher, as pushed and as in `data-ciphers`.
    pub fn name(self) -> &'static str {
        match self {
            DataCipher::Aes128Gcm => "AES-128-GCM",
            DataCipher::Aes256Gcm => "AES-256-GCM",
            DataCipher::Chacha20Poly1305 => "CHACHA20-POLY1305",
        }
    }

    /// The cipher a name means, in any case (OpenVPN accepts OpenSSL's
    /// lower-case names too).
    pub fn from_name(name: &str) -> Option<DataCipher> {
        DataCipher::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(name.trim()))
    }

    pub fn key_len(self) -> usize {
        match self {
            DataCipher::Aes128Gcm => 16,
            DataCipher::Aes256Gcm | DataCipher::Chacha20Poly1305 => 32,
        }
    }
}

/// Parses a `data-ciphers` list (`AES-256-GCM:CHACHA20-POLY1305`); the error
/// names the first entry that is not a served cipher.
pub fn parse_list(list: &str) -> Result<Vec<DataCipher>, String> {
    let mut out = Vec::new();
    for name in list.split(':').filter(|n| !n.trim().is_empty()) {
        let c = DataCipher::from_name(name).ok_or_else(|| {
            format!(
                "{name:?} is not a data cipher this server serves (it serves {})",
                DataCipher::ALL.map(DataCipher::name).join(", ")
            )
        })?;
        if !out.contains(&c) {
            out.push(c);
        }
    }
    if out.is_empty() {
        return Err("the data-ciphers list is empty".into());
    }
    Ok(out)
}

/// The cipher for a client: the first of the server's that the client offers in
/// `IV_CIPHERS`; for a client without that list, one of the server's that the
/// client can take (AES-GCM from clients that announce `IV_NCP=2`, else the
/// `cipher` of its options string).
pub fn choose(
    server: &[DataCipher],
    peer: &PeerInfo,
    client_options_cipher: Option<&str>,
) -> Option<DataCipher> {
    if let Some(offered) = peer.ciphers() {
        let offered: Vec<DataCipher> = offered.filter_map(DataCipher::from_name).collect();
        return server.iter().copied().find(|c| offered.contains(c));
    }
    if peer.number("IV_NCP").is_some_and(|n| n >= 2) {
        let gcm = [DataCipher::Aes256Gcm, DataCipher::Aes128Gcm];
        if let Some(c) = server.iter().copied().find(|c| gcm.contains(c)) {
            return Some(c);
        }
    }
    let theirs = DataCipher::from_name(client_options_cipher?)?;
    server.contains(&theirs).then_some(theirs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_and_name_the_bad_entry() {
        assert_eq!(
            parse_list("aes-128-gcm:CHACHA20-POLY1305:AES-128-GCM").unwrap(),
            [DataCipher::Aes128Gcm, DataCipher::Chacha20Poly1305]
        );
        let err = parse_list("AES-256-GCM:BF-CBC").unwrap_err();
        assert!(err.contains("\"BF-CBC\""), "{err}");
        assert!(parse_list("").is_err());
    }

    #[test]
    fn the_servers_order_wins_among_the_clients_ciphers() {
        let server = [DataCipher::Chacha20Poly1305, DataCipher::Aes256Gcm];
        let peer = PeerInfo::new("IV_CIPHERS=AES-256-GCM:CHACHA20-POLY1305\n");
        assert_eq!(
            choose(&server, &peer, None),
            Some(DataCipher::Chacha20Poly1305)
        );
        let peer = PeerInfo::new("IV_CIPHERS=AES-128-GCM\n");
        assert_eq!(choose(&server, &peer, Some("AES-256-GCM")), None);
        let peer = PeerInfo::new("IV_NCP=2\n");
        assert_eq!(choose(&server, &peer, None), Some(DataCipher::Aes256Gcm));
        let peer = PeerInfo::new("IV_VER=2.3.18\n");
        assert_eq!(
            choose(&server, &peer, Some("CHACHA20-POLY1305")),
            Some(DataCipher::Chacha20Poly1305)
        );
        assert_eq!(choose(&server, &peer, Some("BF-CBC")), None);
    }
}
