//! The engines this build has, and the set a worker runs with.

use crypto::{Algorithm, Engine, EngineSet};

/// Every engine compiled in, fastest-expected first (the default choice order).
pub fn all() -> Vec<Box<dyn Engine>> {
    vec![
        Box::new(crypto_awslc::AwsLcEngine::new()),
        Box::new(crypto::reference::ReferenceEngine::new()),
    ]
}

pub fn names() -> Vec<&'static str> {
    all().iter().map(|e| e.name()).collect()
}

/// All engines, with every algorithm it serves routed to `force` when given.
pub fn engine_set(force: Option<&str>) -> Result<EngineSet, String> {
    let mut set = EngineSet::new(all());
    if let Some(name) = force {
        let mut any = false;
        for alg in Algorithm::ALL {
            if set.choose(alg, name).is_ok() {
                any = true;
            }
        }
        if !any {
            return Err(format!(
                "no engine named {name:?} (have: {})",
                names().join(", ")
            ));
        }
    }
    Ok(set)
}
