//! How an `[esp.ike]` connection authenticates: `auth = "psk"` (the default) with
//! `psk_file` and identities (`local_id`, `remote_id`), or `auth = "pubkey"` with
//! this end's certificate and key (`cert_file`, `key_file`, PEM) and the CA that
//! issued the peer's (`ca_file`); then the identities are the certificates'
//! subjects, and `remote_id` (a DN as strongSwan writes one, or %any) picks the
//! peer's. Certificates and keys are read and checked here, so `--check` reports
//! a wrong one.

use super::checks::Ctx;
use super::raw::RawIke;
use crate::keyfile::read_psk_file;
use ikev2::cert::{Certificate, PrivateKey};
use ikev2::config::parse_identity;
use std::net::IpAddr;
use std::path::PathBuf;
use toml::Spanned;
use zeroize::Zeroizing;

/// An `[esp.ike]` connection's credentials, checked.
pub enum IkeAuth {
    Psk {
        file: PathBuf,
        secret: Zeroizing<Vec<u8>>,
        /// As written (strongSwan's syntax).
        local_id: String,
        /// None: any identity the key authenticates (%any).
        remote_id: Option<String>,
    },
    Pubkey {
        cert_file: PathBuf,
        key_file: PathBuf,
        ca_file: PathBuf,
        cert: Box<Certificate>,
        /// The intermediate CAs after the certificate in `cert_file`.
        intermediates: Vec<Certificate>,
        ca: Box<Certificate>,
        /// The key in PEM, read again (and checked against the certificate) where
        /// it is used.
        key_pem: Zeroizing<Vec<u8>>,
        /// The peer's subject DN; None: any the CA issued.
        remote_dn: Option<String>,
    },
}

impl IkeAuth {
    /// For `--check` and logs; never the secret.
    pub fn describe(&self) -> String {
        match self {
            IkeAuth::Psk {
                file,
                local_id,
                remote_id,
                ..
            } => format!(
                "psk {} as {local_id}, peer {}",
                file.display(),
                remote_id.as_deref().unwrap_or("%any")
            ),
            IkeAuth::Pubkey {
                cert_file,
                key_file,
                ca_file,
                cert,
                ca,
                remote_dn,
                ..
            } => format!(
                "pubkey {} (key {}) as \"{}\", peer {} issued by \"{}\" ({})",
                cert_file.display(),
                key_file.display(),
                cert.subject_text(),
                remote_dn
                    .as_deref()
                    .map_or("%any".to_string(), |d| format!("\"{d}\"")),
                ca.subject_text(),
                ca_file.display()
            ),
        }
    }

    /// Whether two are the same, the secrets compared in constant time.
    pub fn same(&self, other: &IkeAuth) -> bool {
        use subtle::ConstantTimeEq;
        match (self, other) {
            (
                IkeAuth::Psk {
                    secret: a,
                    local_id: la,
                    remote_id: ra,
                    ..
                },
                IkeAuth::Psk {
                    secret: b,
                    local_id: lb,
                    remote_id: rb,
                    ..
                },
            ) => {
                a.len() == b.len()
                    && bool::from(a.as_slice().ct_eq(b.as_slice()))
                    && la == lb
                    && ra == rb
            }
            (
                IkeAuth::Pubkey {
                    cert: ca_,
                    ca: a_ca,
                    key_pem: ka,
                    remote_dn: ra,
                    ..
                },
                IkeAuth::Pubkey {
                    cert: cb,
                    ca: b_ca,
                    key_pem: kb,
                    remote_dn: rb,
                    ..
                },
            ) => {
                ca_.der() == cb.der()
                    && a_ca.der() == b_ca.der()
                    && ka.len() == kb.len()
                    && bool::from(ka.as_slice().ct_eq(kb.as_slice()))
                    && ra == rb
            }
            _ => false,
        }
    }
}

fn identity(
    cx: &mut Ctx<'_, '_>,
    id: Option<&Spanned<String>>,
    default: Option<IpAddr>,
    key: &str,
) -> Option<Option<String>> {
    match id {
        None => Some(default.map(|a| a.to_string())),
        Some(t) if t.get_ref() == "%any" => Some(None),
        Some(t) => match parse_identity(t.get_ref()) {
            Ok(_) => Some(Some(t.get_ref().clone())),
            Err(e) => {
                cx.err(
                    t.span(),
                    key,
                    format!("{e} (an IP address, a host name, user@domain, or %any)"),
                );
                None
            }
        },
    }
}

/// Reads a file named by `key` (relative to the configuration's directory).
fn read(
    cx: &mut Ctx<'_, '_>,
    value: Option<&Spanned<String>>,
    key: &str,
    why: &str,
) -> Option<(PathBuf, Vec<u8>, std::ops::Range<usize>)> {
    let Some(v) = value else {
        cx.err(0..0, key, format!("missing: {why}"));
        return None;
    };
    let (file, bytes) = cx.read_file(v, key)?;
    Some((file, bytes, v.span()))
}

pub(super) fn auth(
    cx: &mut Ctx<'_, '_>,
    raw: &RawIke,
    path: &str,
    local: Option<IpAddr>,
    remote: Option<IpAddr>,
) -> Option<IkeAuth> {
    let method = raw.auth.as_ref().map_or("psk", |a| a.get_ref().as_str());
    let refuse = |cx: &mut Ctx<'_, '_>, v: Option<&Spanned<String>>, key: &str, why: &str| {
        if let Some(v) = v {
            cx.err(v.span(), &format!("{path}.{key}"), why.to_string());
            true
        } else {
            false
        }
    };
    match method {
        "psk" => {
            let mut bad = false;
            for (v, k) in [
                (&raw.cert_file, "cert_file"),
                (&raw.key_file, "key_file"),
                (&raw.ca_file, "ca_file"),
            ] {
                bad |= refuse(cx, v.as_ref(), k, "a certificate is for auth = \"pubkey\"");
            }
            let local_id = identity(
                cx,
                raw.local_id.as_ref(),
                local,
                &format!("{path}.local_id"),
            );
            let remote_id = identity(
                cx,
                raw.remote_id.as_ref(),
                remote,
                &format!("{path}.remote_id"),
            );
            let local_id = match local_id {
                Some(Some(id)) => Some(id),
                Some(None) => {
                    cx.err(
                        raw.local_id.as_ref().map_or(0..0, |s| s.span()),
                        &format!("{path}.local_id"),
                        "%any names a peer, not this gateway",
                    );
                    None
                }
                None => None,
            };
            let key = format!("{path}.psk_file");
            let (file, _, span) =
                read(cx, raw.psk_file.as_ref(), &key, "the pre-shared key's file")?;
            let secret = match read_psk_file(&file) {
                Ok(s) => s,
                Err(e) => {
                    cx.err(span, &key, e);
                    return None;
                }
            };
            (!bad).then_some(IkeAuth::Psk {
                file,
                secret,
                local_id: local_id?,
                remote_id: remote_id?,
            })
        }
        "pubkey" => {
            let mut bad = refuse(
                cx,
                raw.psk_file.as_ref(),
                "psk_file",
                "a pre-shared key is for auth = \"psk\"",
            );
            bad |= refuse(
                cx,
                raw.local_id.as_ref(),
                "local_id",
                "with certificates this end's identity is its certificate's subject",
            );
            let cert = read(
                cx,
                raw.cert_file.as_ref(),
                &format!("{path}.cert_file"),
                "this end's certificate (PEM)",
            );
            let key = read(
                cx,
                raw.key_file.as_ref(),
                &format!("{path}.key_file"),
                "this end's private key (PEM)",
            );
            let ca = read(
                cx,
                raw.ca_file.as_ref(),
                &format!("{path}.ca_file"),
                "the CA's certificate (PEM)",
            );
            let (cert, key, ca) = (cert?, key?, ca?);
            let parsed = |cx: &mut Ctx<'_, '_>,
                          (file, pem, span): &(PathBuf, Vec<u8>, std::ops::Range<usize>),
                          k: &str| {
                match Certificate::from_pem(pem) {
                    Ok(c) => Some(c),
                    Err(e) => {
                        cx.err(
                            span.clone(),
                            &format!("{path}.{k}"),
                            format!("{}: {e}", file.display()),
                        );
                        None
                    }
                }
            };
            // The certificate, then the intermediate CAs that issued it.
            let chain = match Certificate::all_from_pem(&cert.1) {
                Ok(c) => Some(c),
                Err(e) => {
                    cx.err(
                        cert.2.clone(),
                        &format!("{path}.cert_file"),
                        format!("{}: {e}", cert.0.display()),
                    );
                    None
                }
            };
            let ca_c = parsed(cx, &ca, "ca_file");
            let (mut chain, ca_c) = (chain?, ca_c?);
            let intermediates = chain.split_off(1);
            let cert_c = chain.pop().expect("all_from_pem gives one at least");
            let key_pem = Zeroizing::new(key.1);
            if let Err(e) = PrivateKey::from_pem(&key_pem, &cert_c) {
                cx.err(
                    key.2.clone(),
                    &format!("{path}.key_file"),
                    format!("{}: {e}", key.0.display()),
                );
                return None;
            }
            if let Err(e) = cert_c.verify_chain(&intermediates, &ca_c, std::time::SystemTime::now())
            {
                cx.err(cert.2.clone(), &format!("{path}.cert_file"), e);
                return None;
            }
            let remote_dn = match raw.remote_id.as_ref() {
                None => None,
                Some(t) if t.get_ref() == "%any" => None,
                Some(t) if t.get_ref().contains('=') => Some(t.get_ref().clone()),
                Some(t) => {
                    cx.err(
                        t.span(),
                        &format!("{path}.remote_id"),
                        "with certificates, the peer's subject as a DN (\"C=CH, O=example, CN=gw-b\") or %any",
                    );
                    return None;
                }
            };
            (!bad).then_some(IkeAuth::Pubkey {
                cert_file: cert.0,
                key_file: key.0,
                ca_file: ca.0,
                cert: Box::new(cert_c),
                intermediates,
                ca: Box::new(ca_c),
                key_pem,
                remote_dn,
            })
        }
        other => {
            cx.err(
                raw.auth.as_ref().map_or(0..0, |a| a.span()),
                &format!("{path}.auth"),
                format!("{other:?}: \"psk\" (a pre-shared key) or \"pubkey\" (certificates)"),
            );
            None
        }
    }
}
