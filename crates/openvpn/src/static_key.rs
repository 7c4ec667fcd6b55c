//! OpenVPN static key files (`openvpn --genkey secret`), as `tls-auth` and
//! `tls-crypt` use them, and the 256 bytes of key material that a data channel's
//! keys are cut from: both are two keys, each 64 bytes of cipher key and 64 of
//! HMAC key, and a direction says which of the two an end sends with.

use zeroize::{Zeroize, ZeroizeOnDrop};

use crate::Refusal;

/// Bytes in one half: 64 of cipher key, then 64 of HMAC key.
pub const HALF_LEN: usize = 128;
/// Bytes in a static key: two halves.
pub const KEY2_LEN: usize = 2 * HALF_LEN;

const BEGIN: &str = "-----BEGIN OpenVPN Static key V1-----";
const END: &str = "-----END OpenVPN Static key V1-----";

/// Two keys of 64 bytes of cipher key and 64 of HMAC key each, zeroed when
/// dropped.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct Key2([u8; KEY2_LEN]);

/// One of a [`Key2`]'s halves.
#[derive(Clone, Copy)]
pub struct KeyHalf<'a>(&'a [u8]);

impl KeyHalf<'_> {
    /// The cipher key's 64 bytes; a cipher takes as many as its key length.
    pub fn cipher(&self) -> &[u8] {
        &self.0[..64]
    }

    /// The HMAC key's 64 bytes; an HMAC takes its digest's length, and an
    /// AEAD data channel takes its implicit IV from here.
    pub fn hmac(&self) -> &[u8] {
        &self.0[64..]
    }
}

/// Which half an end sends with. OpenVPN's `key-direction` (or the number after
/// a `tls-auth` file): without one both ends use the first half both ways;
/// with one, the end with 0 sends with the first half and receives with the
/// second, and the end with 1 the other way round. tls-crypt and the data
/// channel fix the direction by role: the server is [`Direction::Normal`] for
/// tls-crypt and [`Direction::Inverse`] for the data channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Bidirectional,
    /// `key-direction 0`.
    Normal,
    /// `key-direction 1`.
    Inverse,
}

impl Key2 {
    /// Key material as it comes from the key exporter or the PRF.
    pub fn from_bytes(bytes: [u8; KEY2_LEN]) -> Key2 {
        Key2(bytes)
    }

    /// The 256 bytes.
    pub fn as_bytes(&self) -> &[u8; KEY2_LEN] {
        &self.0
    }

    /// Parses a static key file's text: comment lines, then the hex of 256
    /// bytes between the V1 markers.
    pub fn parse_file(text: &str) -> Result<Key2, Refusal> {
        let mut lines = text.lines().map(str::trim);
        lines
            .by_ref()
            .find(|l| *l == BEGIN)
            .ok_or(Refusal::BadKeyFile)?;
        let mut key = Key2([0; KEY2_LEN]);
        let mut at = 0;
        let mut ended = false;
        for line in lines.by_ref() {
            if line == END {
                ended = true;
                break;
            }
            for pair in line.as_bytes().chunks(2) {
                let [hi, lo] = pair else {
                    return Err(Refusal::BadKeyFile);
                };
                if at == KEY2_LEN {
                    return Err(Refusal::BadKeyFile);
                }
                key.0[at] = hex_digit(*hi)? << 4 | hex_digit(*lo)?;
                at += 1;
            }
        }
        if !ended || at != KEY2_LEN {
            return Err(Refusal::BadKeyFile);
        }
        Ok(key)
    }

    /// The file text of this key, as `openvpn --genkey secret` writes it.
    pub fn to_file(&self) -> String {
        let mut text = String::from("#\n# 2048 bit OpenVPN static key\n#\n");
        text.push_str(BEGIN);
        text.push('\n');
        for line in self.0.chunks(16) {
            for b in line {
                text.push_str(&format!("{b:02x}"));
            }
            text.push('\n');
        }
        text.push_str(END);
        text.push('\n');
        text
    }

    /// The half this end sends with and the half it receives with.
    pub fn halves(&self, direction: Direction) -> (KeyHalf<'_>, KeyHalf<'_>) {
        let first = KeyHalf(&self.0[..HALF_LEN]);
        let second = KeyHalf(&self.0[HALF_LEN..]);
        match direction {
            Direction::Bidirectional => (first, first),
            Direction::Normal => (first, second),
            Direction::Inverse => (second, first),
        }
    }
}

fn hex_digit(c: u8) -> Result<u8, Refusal> {
    match c {
        b'0'..=b'9' => Ok(c - b'0'),
        b'a'..=b'f' => Ok(c - b'a' + 10),
        b'A'..=b'F' => Ok(c - b'A' + 10),
        _ => Err(Refusal::BadKeyFile),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counting() -> Key2 {
        Key2::from_bytes(std::array::from_fn(|i| i as u8))
    }

    #[test]
    fn file_text_round_trips() {
        let key = counting();
        let parsed = Key2::parse_file(&key.to_file()).unwrap();
        assert_eq!(parsed.0, key.0);
    }

    #[test]
    fn malformed_files_are_refused() {
        let good = counting().to_file();
        let short: String = good
            .lines()
            .filter(|l| !l.starts_with("f0"))
            .collect::<Vec<_>>()
            .join("\n");
        let odd = good.replacen("00010203", "0001020", 1);
        let junk = good.replacen("00010203", "0001020x", 1);
        let unended = good.replace(END, "");
        for bad in [short.as_str(), &odd, &junk, &unended, "", "no key here"] {
            assert_eq!(
                Key2::parse_file(bad).err(),
                Some(Refusal::BadKeyFile),
                "{bad}"
            );
        }
    }

    #[test]
    fn directions_pick_opposite_halves() {
        let key = counting();
        let (out0, in0) = key.halves(Direction::Normal);
        let (out1, in1) = key.halves(Direction::Inverse);
        assert_eq!(out0.cipher(), in1.cipher());
        assert_eq!(in0.hmac(), out1.hmac());
        assert_eq!(out0.cipher()[0], 0);
        assert_eq!(out0.hmac()[0], 64);
        assert_eq!(in0.cipher()[0], 128);
        let (a, b) = key.halves(Direction::Bidirectional);
        assert_eq!(a.hmac(), b.hmac());
    }
}
