//! Known-answer tests from the data files in tests/data (see each file's header for
//! where its vectors come from), plus Wycheproof's X25519, ChaCha20-Poly1305 and
//! XChaCha20-Poly1305 sets.

use crypto::blake2s::{self, hash, hmac, kdf, mac};
use crypto::seal;
use crypto::x25519::{PrivateKey, PublicKey};

fn lines(file: &str) -> Vec<Vec<Vec<u8>>> {
    let path = format!("{}/tests/data/{file}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            l.split_whitespace()
                .map(|f| match f {
                    "-" => Vec::new(),
                    f if f.bytes().all(|b| b.is_ascii_hexdigit()) && f.len() % 2 == 0 => {
                        hex::decode(f).unwrap()
                    }
                    f => f.as_bytes().to_vec(),
                })
                .collect()
        })
        .collect()
}

fn a32(v: &[u8]) -> [u8; 32] {
    v.try_into().unwrap()
}

fn kind(v: &[Vec<u8>]) -> &str {
    std::str::from_utf8(&v[0]).unwrap()
}

#[test]
fn blake2s_hash_and_mac() {
    let vectors = lines("blake2s.txt");
    assert!(vectors.len() >= 20);
    for v in &vectors {
        match kind(v) {
            "hash" => assert_eq!(
                hash(&[&v[1]]).to_vec(),
                v[3],
                "hash of {} bytes",
                v[1].len()
            ),
            "mac" => assert_eq!(
                mac(&v[2], &[&v[1]]).to_vec(),
                v[3],
                "mac of {} bytes",
                v[1].len()
            ),
            k => panic!("unknown line kind {k}"),
        }
    }
}

/// RFC 7693 appendix E: digests of every output length and several input lengths,
/// keyed and unkeyed, hashed together.
#[test]
fn blake2s_rfc7693_selftest() {
    use blake2::digest::consts::{U16, U20, U28, U32};
    use blake2::digest::{Mac, Update, VariableOutput};
    fn seq(n: usize, seed: u32) -> Vec<u8> {
        let (mut a, mut b) = (0xDEAD4BADu32.wrapping_mul(seed), 1u32);
        (0..n)
            .map(|_| {
                let t = a.wrapping_add(b);
                a = b;
                b = t;
                (t >> 24) as u8
            })
            .collect()
    }
    fn keyed<
        N: blake2::digest::typenum::Unsigned
            + blake2::digest::generic_array::ArrayLength<u8>
            + blake2::digest::typenum::IsLessOrEqual<U32>,
    >(
        key: &[u8],
        m: &[u8],
    ) -> Vec<u8>
    where
        blake2::digest::typenum::LeEq<N, U32>: blake2::digest::typenum::NonZero,
    {
        let mut h =
            <blake2::Blake2sMac<N> as blake2::digest::KeyInit>::new_from_slice(key).unwrap();
        Mac::update(&mut h, m);
        h.finalize().into_bytes().to_vec()
    }
    let mut all = Vec::new();
    for outlen in [16usize, 20, 28, 32] {
        for inlen in [0usize, 3, 64, 65, 255, 1024] {
            let m = seq(inlen, inlen as u32);
            let mut h = blake2::Blake2sVar::new(outlen).unwrap();
            h.update(&m);
            let mut out = vec![0; outlen];
            h.finalize_variable(&mut out).unwrap();
            all.extend_from_slice(&out);
            let k = seq(outlen, outlen as u32);
            all.extend(match outlen {
                16 => keyed::<U16>(&k, &m),
                20 => keyed::<U20>(&k, &m),
                28 => keyed::<U28>(&k, &m),
                _ => keyed::<U32>(&k, &m),
            });
        }
    }
    let want = lines("rfc.txt")
        .into_iter()
        .find(|v| kind(v) == "blake2s-selftest")
        .unwrap();
    assert_eq!(hash(&[&all]).to_vec(), want[1]);
}

#[test]
fn hmac_and_kdf_chains() {
    let vectors = lines("kdf.txt");
    assert_eq!(vectors.len(), 8);
    for v in &vectors {
        match kind(v) {
            "hmac" => assert_eq!(hmac(&v[1], &[&v[2]]).to_vec(), v[3]),
            "kdf" => {
                let ck = a32(&v[1]);
                let [t1] = kdf::<1>(&ck, &v[2]);
                let [u1, u2] = kdf::<2>(&ck, &v[2]);
                let [w1, w2, w3] = kdf::<3>(&ck, &v[2]);
                assert_eq!(
                    (t1.to_vec(), u1.to_vec(), w1.to_vec()),
                    (v[3].clone(), v[3].clone(), v[3].clone())
                );
                assert_eq!((u2.to_vec(), w2.to_vec()), (v[4].clone(), v[4].clone()));
                assert_eq!(w3.to_vec(), v[5]);
            }
            k => panic!("unknown line kind {k}"),
        }
    }
}

#[test]
fn noise_construction_constants() {
    let v = lines("rfc.txt")
        .into_iter()
        .find(|v| kind(v) == "noise-constants")
        .unwrap();
    let ck = hash(&[b"Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s"]);
    assert_eq!(ck.to_vec(), v[1]);
    assert_eq!(
        hash(&[&ck, b"WireGuard v1 zx2c4 Jason@zx2c4.com"]).to_vec(),
        v[2]
    );
    assert_eq!(blake2s::HASH_LEN, 32);
}

#[test]
fn x25519_rfc7748() {
    for v in lines("rfc.txt") {
        match kind(&v) {
            "x25519" => {
                let s = PrivateKey::from_bytes(a32(&v[1]));
                assert_eq!(
                    s.dh(&PublicKey(a32(&v[2]))).unwrap().as_bytes().to_vec(),
                    v[3]
                );
            }
            "x25519-public" => {
                assert_eq!(
                    PrivateKey::from_bytes(a32(&v[1])).public_key().0.to_vec(),
                    v[2]
                );
            }
            "x25519-iterated" => {
                let n: usize = std::str::from_utf8(&v[1])
                    .unwrap()
                    .trim_start_matches("n=")
                    .parse()
                    .unwrap();
                let mut k = [0u8; 32];
                k[0] = 9;
                let mut u = k;
                for _ in 0..n {
                    let out = *PrivateKey::from_bytes(k)
                        .dh(&PublicKey(u))
                        .unwrap()
                        .as_bytes();
                    u = k;
                    k = out;
                }
                assert_eq!(k.to_vec(), v[2], "{n} iterations");
            }
            _ => {}
        }
    }
}

#[test]
fn x25519_wycheproof() {
    use wycheproof::xdh::{TestName, TestSet};
    let set = TestSet::load(TestName::X25519).unwrap();
    let mut ran = 0;
    for group in &set.test_groups {
        for t in &group.tests {
            let (Ok(private), Ok(public)) =
                (t.private_key[..].try_into(), t.public_key[..].try_into())
            else {
                continue; // wrong-length keys cannot be expressed in the typed API
            };
            let got = PrivateKey::from_bytes(private).dh(&PublicKey(public));
            let zero_shared = t.shared_secret.iter().all(|&b| b == 0);
            match got {
                Ok(s) => {
                    assert!(
                        !zero_shared,
                        "tc {} gave a shared secret where all-zero was due",
                        t.tc_id
                    );
                    assert_eq!(s.as_bytes()[..], t.shared_secret[..], "tc {}", t.tc_id)
                }
                Err(_) => assert!(zero_shared, "tc {} refused a non-zero result", t.tc_id),
            }
            ran += 1;
        }
    }
    assert!(ran > 400, "only {ran} x25519 vectors ran");
}

#[test]
fn aead_rfc_vectors() {
    for v in lines("rfc.txt") {
        let k = kind(&v).to_string();
        if k != "chacha20poly1305" && k != "xchacha20poly1305" {
            continue;
        }
        let (key, nonce, aad, pt, ct, tag) = (a32(&v[1]), &v[2], &v[3], &v[4], &v[5], &v[6]);
        let mut sealed = vec![0; pt.len() + 16];
        let mut opened = vec![0; pt.len()];
        if k == "chacha20poly1305" {
            // The handshake API builds nonces from a counter; RFC 8439's nonce is raw,
            // so it goes through the engine API below instead.
            check_engine_vector(&key, nonce, aad, pt, ct, tag);
            continue;
        }
        let n: [u8; 24] = nonce[..].try_into().unwrap();
        seal::xseal(&key, &n, aad, pt, &mut sealed);
        assert_eq!(&sealed[..pt.len()], &ct[..]);
        assert_eq!(&sealed[pt.len()..], &tag[..]);
        seal::xopen(&key, &n, aad, &sealed, &mut opened).unwrap();
        assert_eq!(&opened, pt);
        sealed[3] ^= 1;
        assert!(seal::xopen(&key, &n, aad, &sealed, &mut opened).is_err());
        assert!(
            opened.iter().all(|&b| b == 0),
            "failed open leaves no plaintext"
        );
    }
}

fn check_engine_vector(key: &[u8; 32], nonce: &[u8], aad: &[u8], pt: &[u8], ct: &[u8], tag: &[u8]) {
    use crypto::{AeadOp, Algorithm, Direction, Engine, KeyRegistry, OpStatus, Span};
    let reg = KeyRegistry::new(4);
    let h = reg.insert(Algorithm::ChaCha20Poly1305, key).unwrap();
    let mut mem = [aad, pt, &[0u8; 16]].concat();
    let (a, n) = (aad.len() as u32, pt.len() as u32);
    let mut op = AeadOp::in_place(
        Algorithm::ChaCha20Poly1305,
        h,
        Direction::Encrypt,
        nonce.try_into().unwrap(),
        Span::new(0, a),
        Span::new(a, n),
    );
    crypto::reference::ReferenceEngine::new().process(
        &reg,
        &mut mem,
        std::slice::from_mut(&mut op),
    );
    assert_eq!(op.status, OpStatus::Ok);
    assert_eq!(&mem[aad.len()..aad.len() + pt.len()], ct);
    assert_eq!(&mem[aad.len() + pt.len()..], tag);
}

/// The handshake's counter-nonce AEAD agrees with the engine API's raw nonce.
#[test]
fn handshake_seal_matches_engine_layout() {
    let key = [3u8; 32];
    let mut sealed = [0u8; 16 + 5];
    seal::seal(&key, 7, b"aad", b"hello", &mut sealed);
    let mut nonce = [0u8; 12];
    nonce[4..].copy_from_slice(&7u64.to_le_bytes());
    assert_eq!(seal::counter_nonce(7), nonce);
    let mut out = [0u8; 5];
    seal::open(&key, 7, b"aad", &sealed, &mut out).unwrap();
    assert_eq!(&out, b"hello");
    assert!(seal::open(&key, 8, b"aad", &sealed, &mut out).is_err());
}

#[test]
fn xchacha_wycheproof() {
    use wycheproof::aead::{TestName, TestSet};
    let set = TestSet::load(TestName::XChaCha20Poly1305).unwrap();
    let mut ran = 0;
    for group in &set.test_groups {
        if group.nonce_size != 192 || group.tag_size != 128 || group.key_size != 256 {
            continue;
        }
        for t in &group.tests {
            let key = a32(&t.key);
            let nonce: [u8; 24] = t.nonce[..].try_into().unwrap();
            let sealed = [&t.ct[..], &t.tag[..]].concat();
            let mut out = vec![0; t.ct.len()];
            let ok =
                seal::xopen(&key, &nonce, &t.aad, &sealed, &mut out).is_ok() && out == t.pt[..];
            assert_eq!(
                ok,
                t.result != wycheproof::TestResult::Invalid,
                "tc {}",
                t.tc_id
            );
            ran += 1;
        }
    }
    assert!(ran > 100, "only {ran} xchacha vectors ran");
}
