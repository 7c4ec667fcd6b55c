//! Key files, as the gateway's configuration and `linerate esp add` read them: one
//! base64 key as `wg genkey` and `wg genpsk` write it, a trailing newline allowed;
//! or, for ESP, key material in hex. What a file holds never appears in a
//! message.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use std::path::Path;
use zeroize::Zeroizing;

/// A 32-byte key from its base64 text (44 characters), or `None`.
pub fn decode_key(text: &str) -> Option<Zeroizing<[u8; 32]>> {
    let bytes = Zeroizing::new(STANDARD.decode(text.as_bytes()).ok()?);
    if bytes.len() != 32 {
        return None;
    }
    let mut key = Zeroizing::new([0u8; 32]);
    key.copy_from_slice(&bytes);
    Some(key)
}

/// Says on stderr, as `wg` does, when a file of secrets may be read by others than
/// its owner: the key works, but anyone on the host could read it.
fn warn_if_readable_by_others(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(m) = std::fs::metadata(path)
        && m.permissions().mode() & 0o077 != 0
    {
        eprintln!(
            "linerate: warning: {} holds a secret and may be read by others than its owner (mode {:04o}): chmod 600 it",
            path.display(),
            m.permissions().mode() & 0o7777
        );
    }
}

/// Reads the key file at `path` (already resolved); the error says what is wrong with
/// it without quoting it.
pub fn read_key_file(path: &Path) -> Result<Zeroizing<[u8; 32]>, String> {
    warn_if_readable_by_others(path);
    let shown = path.display();
    let text = Zeroizing::new(
        std::fs::read_to_string(path).map_err(|e| format!("{shown}: cannot read: {e}"))?,
    );
    let words: Vec<&str> = text.split_whitespace().collect();
    match words.as_slice() {
        [] => Err(format!(
            "{shown}: empty (expected one base64 key, as `wg genkey` writes it)"
        )),
        [one] => decode_key(one).ok_or_else(|| not_a_key(&shown)),
        many if many.iter().all(|w| decode_key(w).is_some()) => Err(format!(
            "{shown}: holds {} keys; a key file holds exactly one",
            many.len()
        )),
        _ => Err(not_a_key(&shown)),
    }
}

fn not_a_key(shown: &std::path::Display<'_>) -> String {
    format!("{shown}: not a base64 32-byte key (as `wg genkey` writes it)")
}

/// Reads an ESP key file at `path` (already resolved): exactly `len` bytes in hex, an
/// optional `0x` in front, whitespace anywhere ignored.
pub fn read_hex_key_file(
    path: &Path,
    len: impl Into<Option<usize>>,
) -> Result<Zeroizing<Vec<u8>>, String> {
    let len: Option<usize> = len.into();
    warn_if_readable_by_others(path);
    let shown = path.display();
    let text = Zeroizing::new(
        std::fs::read_to_string(path).map_err(|e| format!("{shown}: cannot read: {e}"))?,
    );
    let digits: Zeroizing<String> = Zeroizing::new(
        text.split_whitespace()
            .collect::<String>()
            .trim_start_matches("0x")
            .to_string(),
    );
    if digits.is_empty() {
        return Err(format!("{shown}: empty (expected key material in hex)"));
    }
    let bytes = Zeroizing::new(
        hex::decode(digits.as_bytes()).map_err(|_| format!("{shown}: not hex digits"))?,
    );
    if let Some(len) = len
        && bytes.len() != len
    {
        return Err(format!(
            "{shown}: holds {} bytes, expected {len}",
            bytes.len()
        ));
    }
    Ok(bytes)
}

/// The least length of a pre-shared key: a shorter one is guessed offline from one
/// recorded exchange (RFC 7296 section 2.15 asks for keys as strong as the PRF).
pub(crate) const MIN_PSK_LEN: usize = 16;

/// Reads a pre-shared key file: the secret is the file's text without its trailing
/// newline, as strongSwan's `secret = ...` would hold it. The error never quotes it.
pub fn read_psk_file(path: &Path) -> Result<Zeroizing<Vec<u8>>, String> {
    let shown = path.display();
    let text = Zeroizing::new(
        std::fs::read_to_string(path).map_err(|e| format!("{shown}: cannot read: {e}"))?,
    );
    let secret = text.trim_end_matches(['\n', '\r']);
    if secret.len() < MIN_PSK_LEN {
        return Err(format!(
            "{shown}: a pre-shared key of {} bytes; use at least {MIN_PSK_LEN} (a short one is guessed offline from one recorded exchange)",
            secret.len()
        ));
    }
    Ok(Zeroizing::new(secret.as_bytes().to_vec()))
}
