//! The reference engine passes the suite every engine runs.
use crypto::conformance;
use crypto::reference::ReferenceEngine;

#[test]
fn reference_engine_conforms() {
    conformance::run_all(&|| Box::new(ReferenceEngine::new())).unwrap();
}
