//! Key-method 2: the first message each end sends inside TLS. It carries the
//! random values for OpenVPN's own key derivation ([`KeySource`]), the sender's
//! options string, a user name and password (a client's, when it has them), and
//! a client's peer-info (`IV_*` lines: version, platform, ciphers, protocol
//! flags). Strings are a 16-bit length counting a final NUL, then the text and
//! the NUL.

use zeroize::{Zeroize, ZeroizeOnDrop, Zeroizing};

use crate::Refusal;

/// The low four bits of the method byte.
const KEY_METHOD_2: u8 = 2;
/// The longest options string OpenVPN reads.
pub const OPTIONS_MAX: usize = 1024;
/// The longest user name or password OpenVPN reads.
pub const USER_PASS_MAX: usize = 128;

/// The random values one end contributes to OpenVPN's key derivation. Only a
/// client sends a pre-master secret.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct KeySource {
    pub pre_master: [u8; 48],
    pub random1: [u8; 32],
    pub random2: [u8; 32],
}

impl Default for KeySource {
    fn default() -> Self {
        KeySource {
            pre_master: [0; 48],
            random1: [0; 32],
            random2: [0; 32],
        }
    }
}

impl KeySource {
    /// A server's or a client's values from `fill`, a source of random bytes.
    pub fn random(client: bool, fill: &mut dyn FnMut(&mut [u8])) -> KeySource {
        let mut k = KeySource::default();
        if client {
            fill(&mut k.pre_master);
        }
        fill(&mut k.random1);
        fill(&mut k.random2);
        k
    }
}

/// A key-method 2 message.
#[derive(Clone, Default)]
pub struct KeyMethod2 {
    pub source: KeySource,
    /// The sender's options string (`V4,dev-type tun,...`), which OpenVPN
    /// compares only to warn of differences.
    pub options: String,
    pub username: Zeroizing<String>,
    pub password: Zeroizing<String>,
    /// A client's `IV_*` lines; none from a server.
    pub peer_info: Option<String>,
}

impl KeyMethod2 {
    /// Parses the message a client sent (`from_client`) or a server sent at
    /// the start of `bytes`; returns it and how many bytes it took (control
    /// messages may follow it in the same TLS data).
    pub fn parse(bytes: &[u8], from_client: bool) -> Result<(KeyMethod2, usize), Refusal> {
        let mut r = Reader(bytes);
        r.take(4)?; // Always zero: a leftover of key-method 1's framing.
        if r.take(1)?[0] & 0x0f != KEY_METHOD_2 {
            return Err(Refusal::BadKeyMethod);
        }
        let mut source = KeySource::default();
        if from_client {
            source.pre_master.copy_from_slice(r.take(48)?);
        }
        source.random1.copy_from_slice(r.take(32)?);
        source.random2.copy_from_slice(r.take(32)?);
        let options = r.string(OPTIONS_MAX)?.ok_or(Refusal::BadKeyMethod)?;
        // A client always sends a user name, a password and its peer-info,
        // each possibly empty. A 2.6 server sends empty user name and password
        // fields and may end there; older servers end after the options.
        let (username, password, peer_info) = if from_client {
            let user = r.string(USER_PASS_MAX)?.unwrap_or_default();
            let pass = r.string(USER_PASS_MAX)?.unwrap_or_default();
            (
                user,
                pass,
                Some(r.string(u16::MAX as usize)?.unwrap_or_default()),
            )
        } else {
            let user = r.optional_string(USER_PASS_MAX)?.unwrap_or_default();
            let pass = r.optional_string(USER_PASS_MAX)?.unwrap_or_default();
            (user, pass, r.optional_string(u16::MAX as usize)?)
        };
        let message = KeyMethod2 {
            source,
            options,
            username: Zeroizing::new(username),
            password: Zeroizing::new(password),
            peer_info,
        };
        Ok((message, bytes.len() - r.0.len()))
    }

    /// The message as a server (`!from_client`) or client sends it.
    pub fn emit(&self, from_client: bool) -> Vec<u8> {
        let mut out = vec![0, 0, 0, 0, KEY_METHOD_2];
        if from_client {
            out.extend_from_slice(&self.source.pre_master);
        }
        out.extend_from_slice(&self.source.random1);
        out.extend_from_slice(&self.source.random2);
        write_string(&mut out, &self.options);
        write_string(&mut out, &self.username);
        write_string(&mut out, &self.password);
        if let Some(info) = &self.peer_info {
            write_string(&mut out, info);
        }
        out
    }
}

/// Writes a string field: empty text is written as length 0, as OpenVPN
/// writes an absent user name.
fn write_string(out: &mut Vec<u8>, s: &str) {
    if s.is_empty() {
        out.extend_from_slice(&[0, 0]);
        return;
    }
    let len = (s.len() + 1).min(u16::MAX as usize);
    out.extend_from_slice(&(len as u16).to_be_bytes());
    out.extend_from_slice(&s.as_bytes()[..len - 1]);
    out.push(0);
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Refusal> {
        if self.0.len() < n {
            return Err(Refusal::Truncated);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    /// A string field, `None` for length 0.
    fn string(&mut self, max: usize) -> Result<Option<String>, Refusal> {
        let len = usize::from(u16::from_be_bytes(self.take(2)?.try_into().expect("two")));
        if len == 0 {
            return Ok(None);
        }
        if len > max {
            return Err(Refusal::BadString);
        }
        let bytes = self.take(len)?;
        let (nul, text) = bytes.split_last().expect("len > 0");
        if *nul != 0 || text.contains(&0) {
            return Err(Refusal::BadString);
        }
        String::from_utf8(text.to_vec())
            .map(Some)
            .map_err(|_| Refusal::BadString)
    }

    /// A string field that may be missing at the end of the message.
    fn optional_string(&mut self, max: usize) -> Result<Option<String>, Refusal> {
        if self.0.is_empty() {
            return Ok(None);
        }
        self.string(max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client_message() -> KeyMethod2 {
        let mut n = 0u8;
        KeyMethod2 {
            source: KeySource::random(true, &mut |b| {
                for x in b {
                    n = n.wrapping_add(1);
                    *x = n;
                }
            }),
            options: "V4,dev-type tun,link-mtu 1521,tun-mtu 1500,proto UDPv4,cipher AES-256-GCM,auth [null-digest],keysize 256,key-method 2,tls-client".into(),
            username: Zeroizing::new(String::new()),
            password: Zeroizing::new(String::new()),
            peer_info: Some("IV_VER=2.6.14\nIV_PLAT=linux\nIV_PROTO=990\nIV_CIPHERS=AES-256-GCM:AES-128-GCM:CHACHA20-POLY1305\n".into()),
        }
    }

    #[test]
    fn messages_round_trip() {
        let m = client_message();
        let bytes = [m.emit(true), b"PUSH_REQUEST\0".to_vec()].concat();
        let (parsed, used) = KeyMethod2::parse(&bytes, true).unwrap();
        assert_eq!(&bytes[used..], b"PUSH_REQUEST\0");
        assert_eq!(parsed.source.pre_master, m.source.pre_master);
        assert_eq!(parsed.source.random2, m.source.random2);
        assert_eq!(parsed.options, m.options);
        assert_eq!(parsed.peer_info, m.peer_info);
        assert!(parsed.username.is_empty());

        let server = KeyMethod2 {
            peer_info: None,
            ..client_message()
        };
        let (parsed, _) = KeyMethod2::parse(&server.emit(false), false).unwrap();
        assert_eq!(parsed.source.random1, server.source.random1);
        assert_eq!(parsed.source.pre_master, [0; 48]);
        assert_eq!(parsed.peer_info, None);
    }

    #[test]
    fn every_cut_of_a_clients_message_is_refused() {
        let bytes = client_message().emit(true);
        for cut in 0..bytes.len() {
            assert!(
                KeyMethod2::parse(&bytes[..cut], true).is_err(),
                "cut at {cut}"
            );
        }
        // A server's may end after its options.
        let server = client_message().emit(false);
        let options_end = 5 + 64 + 2 + client_message().options.len() + 1;
        assert!(KeyMethod2::parse(&server[..options_end], false).is_ok());
        assert!(KeyMethod2::parse(&server[..options_end - 1], false).is_err());
    }

    #[test]
    fn malformed_fields_are_refused() {
        let good = client_message().emit(true);
        let mut method1 = good.clone();
        method1[4] = 1;
        assert_eq!(
            KeyMethod2::parse(&method1, true).err(),
            Some(Refusal::BadKeyMethod)
        );
        let opts = 5 + 48 + 64;
        let mut no_nul = good.clone();
        let len = usize::from(u16::from_be_bytes([good[opts], good[opts + 1]]));
        no_nul[opts + 2 + len - 1] = b'x';
        assert_eq!(
            KeyMethod2::parse(&no_nul, true).err(),
            Some(Refusal::BadString)
        );
        let mut huge = good.clone();
        huge[opts..opts + 2].copy_from_slice(&u16::MAX.to_be_bytes());
        assert_eq!(
            KeyMethod2::parse(&huge, true).err(),
            Some(Refusal::BadString)
        );
    }
}
