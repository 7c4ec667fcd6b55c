//! X.509 certificates and private keys for IKE authentication with signatures
//! (RFC 7296 section 2.15, RFC 7427 "Digital Signature" AUTH). Parsing is
//! `x509-cert`'s; every signature (the CA's over a certificate, a peer's over its
//! AUTH octets) is checked by aws-lc-rs. A certificate is accepted when the one
//! configured CA signed it, directly or through up to `MAX_INTERMEDIATES`
//! intermediate CAs (each marked a CA in its basic constraints), every one within
//! its validity, and its key is RSA (2048 to 8192 bits) or ECDSA on P-256 or
//! P-384.

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{self, EcdsaKeyPair, KeyPair, RsaKeyPair, UnparsedPublicKey};
use der::{Decode, Encode};
use std::time::SystemTime;
use x509_cert::Certificate as X509;

const RSA: &str = "1.2.840.113549.1.1.1";
const EC: &str = "1.2.840.10045.2.1";
const P256: &str = "1.2.840.10045.3.1.7";
const P384: &str = "1.3.132.0.34";
const RSA_SHA256: &str = "1.2.840.113549.1.1.11";
const RSA_SHA384: &str = "1.2.840.113549.1.1.12";
const RSA_SHA512: &str = "1.2.840.113549.1.1.13";
const ECDSA_SHA256: &str = "1.2.840.10045.4.3.2";
const ECDSA_SHA384: &str = "1.2.840.10045.4.3.3";
const ECDSA_SHA512: &str = "1.2.840.10045.4.3.4";
/// The basic constraints extension (RFC 5280 section 4.2.1.9).
const BASIC_CONSTRAINTS: &str = "2.5.29.19";
/// Intermediate CAs between a certificate and the trusted CA, at most.
pub const MAX_INTERMEDIATES: usize = 4;

/// The AlgorithmIdentifier DER of the signatures this end makes (RFC 7427
/// appendix A): sha256WithRSAEncryption (NULL parameters), ecdsa-with-SHA256 and
/// ecdsa-with-SHA384 (none).
const ALG_RSA_SHA256: [u8; 15] = [
    0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0b, 0x05, 0x00,
];
const ALG_ECDSA_SHA256: [u8; 12] = [
    0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02,
];
const ALG_ECDSA_SHA384: [u8; 12] = [
    0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x03,
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    Rsa,
    P256,
    P384,
}

/// A parsed certificate, with what authentication needs of it.
#[derive(Clone)]
pub struct Certificate {
    der: Vec<u8>,
    subject: Vec<u8>,
    issuer: Vec<u8>,
    /// Each RDN of the subject as text ("CN=gw-a"), in encoded order.
    subject_rdns: Vec<String>,
    kind: KeyKind,
    /// The subjectPublicKey bits: PKCS#1 RSAPublicKey, or the EC point.
    key: Vec<u8>,
    tbs: Vec<u8>,
    signature_alg: String,
    signature: Vec<u8>,
    not_before: SystemTime,
    not_after: SystemTime,
    /// Its basic constraints say it is a CA: it may issue certificates.
    is_ca: bool,
}

impl core::fmt::Debug for Certificate {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Certificate({})", self.subject_text())
    }
}

fn der_err(e: der::Error) -> String {
    format!("not a DER X.509 certificate: {e}")
}

impl Certificate {
    pub fn from_der(der: &[u8]) -> Result<Certificate, String> {
        let c = X509::from_der(der).map_err(der_err)?;
        let tbs = &c.tbs_certificate;
        let spki = &tbs.subject_public_key_info;
        let kind = match spki.algorithm.oid.to_string().as_str() {
            RSA => KeyKind::Rsa,
            EC => {
                let curve = spki
                    .algorithm
                    .parameters
                    .as_ref()
                    .and_then(|p| p.decode_as::<der::asn1::ObjectIdentifier>().ok())
                    .map(|o| o.to_string());
                match curve.as_deref() {
                    Some(P256) => KeyKind::P256,
                    Some(P384) => KeyKind::P384,
                    other => {
                        return Err(format!(
                            "an EC key on curve {other:?}: P-256 or P-384 are served"
                        ));
                    }
                }
            }
            other => {
                return Err(format!(
                    "a key of algorithm {other}: RSA or ECDSA are served"
                ));
            }
        };
        let key = spki
            .subject_public_key
            .as_bytes()
            .ok_or("a public key of an odd number of bits")?
            .to_vec();
        let is_ca = tbs
            .extensions
            .iter()
            .flatten()
            .find(|e| e.extn_id.to_string() == BASIC_CONSTRAINTS)
            .map(|e| {
                x509_cert::ext::pkix::BasicConstraints::from_der(e.extn_value.as_bytes())
                    .map(|b| b.ca)
                    .map_err(der_err)
            })
            .transpose()?
            .unwrap_or(false);
        Ok(Certificate {
            der: der.to_vec(),
            subject: tbs.subject.to_der().map_err(der_err)?,
            issuer: tbs.issuer.to_der().map_err(der_err)?,
            subject_rdns: tbs.subject.0.iter().map(|r| r.to_string()).collect(),
            kind,
            key,
            tbs: tbs.to_der().map_err(der_err)?,
            signature_alg: c.signature_algorithm.oid.to_string(),
            signature: c.signature.as_bytes().ok_or("an odd signature")?.to_vec(),
            not_before: tbs.validity.not_before.to_system_time(),
            not_after: tbs.validity.not_after.to_system_time(),
            is_ca,
        })
    }

    /// Every certificate in PEM text, in order: a certificate and the
    /// intermediate CAs that issued it.
    pub fn all_from_pem(text: &[u8]) -> Result<Vec<Certificate>, String> {
        let text = std::str::from_utf8(text).map_err(|_| "not PEM: not text")?;
        const BEGIN: &str = "-----BEGIN ";
        let starts: Vec<usize> = text.match_indices(BEGIN).map(|(i, _)| i).collect();
        if starts.is_empty() {
            return Err("not PEM: no BEGIN line".into());
        }
        starts
            .iter()
            .enumerate()
            .map(|(n, &at)| {
                let end = starts.get(n + 1).copied().unwrap_or(text.len());
                Certificate::from_pem(&text.as_bytes()[at..end])
                    .map_err(|e| format!("certificate {} in the file: {e}", n + 1))
            })
            .collect()
    }

    /// Checks that `ca` issued this certificate, directly or through some of
    /// `intermediates` (each a CA, at most `MAX_INTERMEDIATES` of them), every
    /// signature and validity on the way.
    pub fn verify_chain(
        &self,
        intermediates: &[Certificate],
        ca: &Certificate,
        now: SystemTime,
    ) -> Result<(), String> {
        let mut current = self;
        for _ in 0..=MAX_INTERMEDIATES {
            if current.issuer == ca.subject {
                return current.verify_issued_by(ca, now);
            }
            let Some(up) = intermediates.iter().find(|c| c.subject == current.issuer) else {
                return current.verify_issued_by(ca, now);
            };
            if !up.is_ca {
                return Err(format!(
                    "'{}' issued '{}' but is not a CA (basic constraints)",
                    up.subject_text(),
                    current.subject_text()
                ));
            }
            current.verify_issued_by(up, now)?;
            current = up;
        }
        Err(format!(
            "'{}' is more than {MAX_INTERMEDIATES} intermediate CAs from the CA '{}'",
            self.subject_text(),
            ca.subject_text()
        ))
    }

    /// The first certificate in PEM text.
    pub fn from_pem(text: &[u8]) -> Result<Certificate, String> {
        let (label, der) = der::pem::decode_vec(text).map_err(|e| format!("not PEM: {e}"))?;
        if label != "CERTIFICATE" {
            return Err(format!("a PEM {label}, not a CERTIFICATE"));
        }
        Certificate::from_der(&der)
    }

    pub fn der(&self) -> &[u8] {
        &self.der
    }

    /// The subject's DER Name: the ID_DER_ASN1_DN identity.
    pub fn subject(&self) -> &[u8] {
        &self.subject
    }

    pub fn kind(&self) -> KeyKind {
        self.kind
    }

    /// The subject as strongSwan writes it: "C=CH, O=linerate, CN=gw-a".
    pub fn subject_text(&self) -> String {
        self.subject_rdns.join(", ")
    }

    /// Whether `dn`, written as strongSwan writes one ("C=CH, O=linerate,
    /// CN=gw-a"; keys in any case, spaces after commas optional), names this
    /// certificate's subject.
    pub fn subject_is(&self, dn: &str) -> bool {
        let norm = |s: &str| {
            let (k, v) = s.trim().split_once('=').unwrap_or((s.trim(), ""));
            format!("{}={}", k.trim().to_ascii_uppercase(), v.trim())
        };
        let want: Vec<String> = dn.split(',').map(norm).collect();
        let have: Vec<String> = self.subject_rdns.iter().map(|r| norm(r)).collect();
        want == have
    }

    /// Whether a DER Name (an ID_DER_ASN1_DN identity) names this certificate's
    /// subject: the same attributes and values in the same order, whatever string
    /// types encode them (peers re-encode a DN from its text).
    pub fn subject_is_der(&self, dn: &[u8]) -> bool {
        match x509_cert::name::Name::from_der(dn) {
            Ok(name) => {
                let rdns: Vec<String> = name.0.iter().map(|r| r.to_string()).collect();
                self.subject_is(&rdns.join(","))
            }
            Err(_) => false,
        }
    }

    /// SHA-1 of the subjectPublicKeyInfo: how a CERTREQ names this CA (RFC 7296
    /// section 3.7).
    pub fn spki_sha1(&self) -> Result<Vec<u8>, String> {
        let c = X509::from_der(&self.der).map_err(der_err)?;
        let spki = c
            .tbs_certificate
            .subject_public_key_info
            .to_der()
            .map_err(der_err)?;
        Ok(
            aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY, &spki)
                .as_ref()
                .to_vec(),
        )
    }

    /// Checks that `ca` issued this certificate and signed it, and that `now` is
    /// within its validity (and the CA's).
    pub fn verify_issued_by(&self, ca: &Certificate, now: SystemTime) -> Result<(), String> {
        if self.issuer != ca.subject {
            return Err(format!(
                "'{}' is not issued by the CA '{}'",
                self.subject_text(),
                ca.subject_text()
            ));
        }
        for c in [self, ca] {
            if now < c.not_before || now > c.not_after {
                return Err(format!("'{}' is not valid now", c.subject_text()));
            }
        }
        if !ca.verify(&self.signature_alg, &self.tbs, &self.signature) {
            return Err(format!(
                "the CA's signature on '{}' does not verify",
                self.subject_text()
            ));
        }
        Ok(())
    }

    /// Whether `signature` over `message` verifies with this certificate's key
    /// under the signature algorithm `alg` (an OID).
    pub fn verify(&self, alg: &str, message: &[u8], sig: &[u8]) -> bool {
        let v: &'static dyn signature::VerificationAlgorithm = match (self.kind, alg) {
            (KeyKind::Rsa, RSA_SHA256) => &signature::RSA_PKCS1_2048_8192_SHA256,
            (KeyKind::Rsa, RSA_SHA384) => &signature::RSA_PKCS1_2048_8192_SHA384,
            (KeyKind::Rsa, RSA_SHA512) => &signature::RSA_PKCS1_2048_8192_SHA512,
            (KeyKind::P256, ECDSA_SHA256) => &signature::ECDSA_P256_SHA256_ASN1,
            (KeyKind::P256, ECDSA_SHA384) => &signature::ECDSA_P256_SHA384_ASN1,
            (KeyKind::P384, ECDSA_SHA256) => &signature::ECDSA_P384_SHA256_ASN1,
            (KeyKind::P384, ECDSA_SHA384) => &signature::ECDSA_P384_SHA384_ASN1,
            (KeyKind::P384, ECDSA_SHA512) | (KeyKind::P256, ECDSA_SHA512) => return false,
            _ => return false,
        };
        UnparsedPublicKey::new(v, &self.key)
            .verify(message, sig)
            .is_ok()
    }

    /// Checks an RFC 7427 AUTH (a length byte, the AlgorithmIdentifier, the
    /// signature) over `octets`.
    pub fn verify_auth(&self, auth: &[u8], octets: &[u8]) -> Result<(), String> {
        let (&len, rest) = auth.split_first().ok_or("an empty AUTH")?;
        let len = usize::from(len);
        if rest.len() <= len {
            return Err("an AUTH shorter than its AlgorithmIdentifier".into());
        }
        let (alg, sig) = rest.split_at(len);
        let alg = spki::AlgorithmIdentifierOwned::from_der(alg)
            .map_err(|e| format!("an AUTH AlgorithmIdentifier that does not parse: {e}"))?;
        if self.verify(&alg.oid.to_string(), octets, sig) {
            Ok(())
        } else {
            Err(format!(
                "the AUTH signature of '{}' does not verify",
                self.subject_text()
            ))
        }
    }
}

/// This end's private key, matching its certificate.
pub enum PrivateKey {
    Rsa(RsaKeyPair),
    Ecdsa(EcdsaKeyPair, KeyKind),
}

impl PrivateKey {
    /// From PEM: PKCS#8 ("PRIVATE KEY"), PKCS#1 ("RSA PRIVATE KEY") or SEC1 ("EC
    /// PRIVATE KEY"); it must be the key of `cert`.
    pub fn from_pem(text: &[u8], cert: &Certificate) -> Result<PrivateKey, String> {
        let (label, der) = der::pem::decode_vec(text).map_err(|e| format!("not PEM: {e}"))?;
        let der = zeroize::Zeroizing::new(der);
        let ec = |alg| match label {
            "PRIVATE KEY" => EcdsaKeyPair::from_pkcs8(alg, &der).ok(),
            "EC PRIVATE KEY" => EcdsaKeyPair::from_private_key_der(alg, &der).ok(),
            _ => None,
        };
        let key = match (cert.kind, label) {
            (KeyKind::Rsa, "PRIVATE KEY") => RsaKeyPair::from_pkcs8(&der).ok().map(PrivateKey::Rsa),
            (KeyKind::Rsa, "RSA PRIVATE KEY") => {
                RsaKeyPair::from_der(&der).ok().map(PrivateKey::Rsa)
            }
            (KeyKind::P256, _) => ec(&signature::ECDSA_P256_SHA256_ASN1_SIGNING)
                .map(|k| PrivateKey::Ecdsa(k, KeyKind::P256)),
            (KeyKind::P384, _) => ec(&signature::ECDSA_P384_SHA384_ASN1_SIGNING)
                .map(|k| PrivateKey::Ecdsa(k, KeyKind::P384)),
            _ => None,
        }
        .ok_or_else(|| format!("a {label} that is not a {:?} key", cert.kind))?;
        let public = match &key {
            PrivateKey::Rsa(k) => k.public_key().as_ref().to_vec(),
            PrivateKey::Ecdsa(k, _) => k.public_key().as_ref().to_vec(),
        };
        if public != cert.key {
            return Err(format!(
                "the key is not the one of the certificate '{}'",
                cert.subject_text()
            ));
        }
        Ok(key)
    }

    /// An RFC 7427 AUTH over `octets`: length, AlgorithmIdentifier, signature.
    pub fn sign_auth(&self, octets: &[u8]) -> Vec<u8> {
        let rng = SystemRandom::new();
        let (alg, sig): (&[u8], Vec<u8>) = match self {
            PrivateKey::Rsa(k) => {
                let mut sig = vec![0u8; k.public_modulus_len()];
                k.sign(&signature::RSA_PKCS1_SHA256, &rng, octets, &mut sig)
                    .expect("RSA signing");
                (&ALG_RSA_SHA256, sig)
            }
            PrivateKey::Ecdsa(k, kind) => {
                let sig = k
                    .sign(&rng, octets)
                    .expect("ECDSA signing")
                    .as_ref()
                    .to_vec();
                let alg: &[u8] = if *kind == KeyKind::P384 {
                    &ALG_ECDSA_SHA384
                } else {
                    &ALG_ECDSA_SHA256
                };
                (alg, sig)
            }
        };
        let mut out = vec![alg.len() as u8];
        out.extend_from_slice(alg);
        out.extend_from_slice(&sig);
        out
    }
}
