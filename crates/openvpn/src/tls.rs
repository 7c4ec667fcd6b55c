//! The server's TLS configuration: its certificate chain and key, the CA that
//! clients' certificates must chain to, an optional revocation list, and the TLS
//! versions it takes. Clients without a certificate, or with one that does not
//! chain to the CA or is revoked, fail the handshake with rustls's reason.

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, CertificateRevocationListDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, SupportedProtocolVersion};
use x509_cert::der::Decode;

/// A server's TLS configuration, as [`server_config`] makes it.
pub type ServerTls = ServerConfig;

/// The TLS versions a server takes (OpenVPN's `tls-version-min` and
/// `tls-version-max`); OpenVPN 2.6 clients speak both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsVersions {
    Both,
    Only12,
    Only13,
}

impl TlsVersions {
    fn list(self) -> &'static [&'static SupportedProtocolVersion] {
        static BOTH: [&SupportedProtocolVersion; 2] =
            [&rustls::version::TLS13, &rustls::version::TLS12];
        static ONLY12: [&SupportedProtocolVersion; 1] = [&rustls::version::TLS12];
        static ONLY13: [&SupportedProtocolVersion; 1] = [&rustls::version::TLS13];
        match self {
            TlsVersions::Both => &BOTH,
            TlsVersions::Only12 => &ONLY12,
            TlsVersions::Only13 => &ONLY13,
        }
    }
}

/// The PEM texts a server's TLS is made from; each error names the file's role.
pub struct TlsFiles<'a> {
    pub cert: &'a [u8],
    pub key: &'a [u8],
    pub ca: &'a [u8],
    pub crl: Option<&'a [u8]>,
}

/// A server configuration that requires a client certificate from the CA.
pub fn server_config(
    files: &TlsFiles<'_>,
    versions: TlsVersions,
) -> Result<Arc<ServerConfig>, String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(files.cert)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("the certificate file is not PEM: {e}"))?;
    if chain.is_empty() {
        return Err("the certificate file holds no certificate".into());
    }
    let key = PrivateKeyDer::from_pem_slice(files.key)
        .map_err(|e| format!("the key file holds no private key that can be read: {e}"))?;
    let mut roots = RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(files.ca) {
        let ca = ca.map_err(|e| format!("the CA file is not PEM: {e}"))?;
        roots
            .add(ca)
            .map_err(|e| format!("the CA file holds a certificate that is not a CA: {e}"))?;
    }
    if roots.is_empty() {
        return Err("the CA file holds no certificate".into());
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut verifier =
        WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone());
    if let Some(crl) = files.crl {
        let crls: Vec<CertificateRevocationListDer<'static>> =
            CertificateRevocationListDer::pem_slice_iter(crl)
                .collect::<Result<_, _>>()
                .map_err(|e| format!("the CRL file is not PEM: {e}"))?;
        verifier = verifier.with_crls(crls);
    }
    let verifier = verifier
        .build()
        .map_err(|e| format!("the CA or CRL cannot verify clients: {e}"))?;
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(versions.list())
        .map_err(|e| format!("TLS versions: {e}"))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| format!("the certificate and key do not make a server identity: {e}"))?;
    // Every key is a new TLS session: OpenVPN never resumes one.
    config.send_tls13_tickets = 0;
    Ok(Arc::new(config))
}

/// The subject's common name of a DER certificate: how OpenVPN names a client
/// in its logs and status (`common_name`).
pub fn common_name(der: &[u8]) -> Option<String> {
    let cert = x509_cert::Certificate::from_der(der).ok()?;
    cert.tbs_certificate
        .subject
        .0
        .iter()
        .flat_map(|rdn| rdn.0.iter())
        .find_map(|atv| {
            (atv.oid == const_oid_cn()).then(|| {
                atv.value
                    .decode_as::<x509_cert::der::asn1::Utf8StringRef<'_>>()
                    .map(|s| s.as_str().to_owned())
                    .or_else(|_| {
                        atv.value
                            .decode_as::<x509_cert::der::asn1::PrintableStringRef<'_>>()
                            .map(|s| s.as_str().to_owned())
                    })
                    .ok()
            })?
        })
}

fn const_oid_cn() -> x509_cert::der::asn1::ObjectIdentifier {
    x509_cert::der::asn1::ObjectIdentifier::new_unwrap("2.5.4.3")
}
