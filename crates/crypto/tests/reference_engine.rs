//! The reference engine passes the suite every engine runs.
use crypto::conformance;
use crypto::reference::ReferenceEngine;

#[test]
fn reference_engine_conforms() {
    conformance::run_all(&|| Box::new(ReferenceEngine::new())).unwrap();
}

/// The chained known answers are all there: ten packets per algorithm, from one
/// block to 1504 bytes, some with ESN bytes under the MAC.
#[test]
fn chained_known_answers_cover_every_chained_algorithm() {
    let vectors = conformance::chained::vectors().unwrap();
    for alg in crypto::Algorithm::ALL
        .into_iter()
        .filter(|a| a.is_chained())
    {
        let mine: Vec<_> = vectors.iter().filter(|v| v.alg == alg).collect();
        assert_eq!(mine.len(), 10, "{alg}");
        assert!(mine.iter().any(|v| v.esn.len() == 4) && mine.iter().any(|v| v.esn.is_empty()));
        assert_eq!(mine.iter().map(|v| v.plain.len()).min(), Some(16));
        assert_eq!(mine.iter().map(|v| v.plain.len()).max(), Some(1504));
        for v in mine {
            assert_eq!(v.key.len(), alg.key_len(), "{alg}");
            assert_eq!(v.icv.len(), alg.tag_len(), "{alg}");
            assert_eq!((v.iv.len(), v.header.len()), (16, 8), "{alg}");
            assert_eq!(v.cipher.len(), v.plain.len(), "{alg}");
        }
    }
}
