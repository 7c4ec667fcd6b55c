//! IKE's certificate paths: any bytes as a certificate (DER or PEM) or as an RFC
//! 7427 AUTH payload for a known certificate are refused or accepted, never a
//! panic; no random AUTH verifies.
#![no_main]

use ikev2::cert::Certificate;
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

const CA: &[u8] = include_bytes!("../../crates/ikev2/tests/data/certs/ca.pem");

fuzz_target!(|data: &[u8]| {
    static CERT: OnceLock<Certificate> = OnceLock::new();
    let ca = CERT.get_or_init(|| Certificate::from_pem(CA).expect("the test CA"));
    if let Ok(c) = Certificate::from_der(data) {
        let _ = c.verify_issued_by(ca, std::time::SystemTime::now());
        let _ = c.subject_text();
    }
    let _ = Certificate::from_pem(data);
    assert!(ca.verify_auth(data, b"signed octets").is_err());
    let _ = ca.subject_is_der(data);
});
