//! The engines this build has, and the set a worker runs with.

use crypto::{Algorithm, Engine, EngineSet, KeyRegistry};
use std::sync::Arc;

/// Every engine compiled in that works on this machine, in the order they are
/// preferred when a measurement cannot tell them apart. An engine whose probe fails
/// (no library, a CPU without the instructions it needs) is left out.
///
/// The async engine comes last: it runs the others on crypto threads, and frames
/// submitted to it use `keys` (the registry the data path's sessions live in).
pub fn all(keys: &Arc<KeyRegistry>) -> Vec<Box<dyn Engine>> {
    let mut engines = cpu_engines();
    let threads =
        std::thread::available_parallelism().map_or(1, |n| n.get().saturating_sub(1).max(1));
    let factory: crypto_async::EngineFactory =
        Arc::new(|| Box::new(EngineSet::new(cpu_engines())) as Box<dyn Engine>);
    engines.push(Box::new(crypto_async::AsyncEngine::new(
        keys.clone(),
        factory,
        threads,
    )));
    engines
}

/// The engines that run on the calling thread.
fn cpu_engines() -> Vec<Box<dyn Engine>> {
    let mut engines: Vec<Box<dyn Engine>> = Vec::new();
    // Multi-buffer first: it picks the widest path this CPU has (scalar at worst).
    engines.push(Box::new(crypto_mb::MbEngine::new()));
    if let Ok(e) = crypto_ipsecmb::IpsecMbEngine::new() {
        engines.push(Box::new(e));
    }
    engines.push(Box::new(crypto_awslc::AwsLcEngine::new()));
    engines.push(Box::new(crypto::reference::ReferenceEngine::new()));
    engines
}

/// Engines that could not start here, and why.
pub fn unavailable() -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    if let Err(e) = crypto_ipsecmb::IpsecMbEngine::new() {
        out.push(("ipsecmb", e));
    }
    out
}

pub fn names() -> Vec<&'static str> {
    let mut n: Vec<&'static str> = cpu_engines().iter().map(|e| e.name()).collect();
    n.push(crypto_async::AsyncEngine::NAME);
    n
}

/// Parses an engine choice: `NAME` (every algorithm it serves) or a list of
/// `ALG=NAME` separated by commas, e.g. `chacha20-poly1305=mb,aes-128-gcm=ipsecmb`.
pub fn parse_choice(spec: &str) -> Result<Vec<(Option<Algorithm>, String)>, String> {
    spec.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|item| match item.split_once('=') {
            Some((alg, name)) => {
                let alg = Algorithm::from_name(alg.trim()).ok_or_else(|| {
                    let all: Vec<_> = Algorithm::ALL.iter().map(|a| a.name()).collect();
                    format!("{alg:?}: unknown algorithm (have: {})", all.join(", "))
                })?;
                Ok((Some(alg), name.trim().to_string()))
            }
            None => Ok((None, item.to_string())),
        })
        .collect()
}

/// Checks an engine choice without building anything: the syntax, the algorithm
/// names and that every engine named exists here. Used before a daemon creates its
/// interface, so a typo is refused with nothing left behind.
pub fn validate(spec: &str) -> Result<(), String> {
    let have = names();
    for (_, name) in parse_choice(spec)? {
        if !have.contains(&name.as_str()) {
            let why = unavailable()
                .into_iter()
                .find(|(n, _)| *n == name)
                .map(|(_, why)| format!(": not available here ({why})"))
                .unwrap_or_default();
            return Err(format!(
                "no engine named {name:?}{why} (have: {})",
                have.join(", ")
            ));
        }
    }
    Ok(())
}

/// The engine set of a worker: algorithms named in `spec` go where it says, one engine
/// for every size; the rest go, size class by size class, to the engine a short
/// calibration finds fastest at that class's size. Only the algorithms in `used`
/// are calibrated and described (host mode runs ChaCha20-Poly1305 alone; a
/// gateway any of them); the others keep the first engine serving them. Classes
/// past `largest` bytes, which a worker's buffers cannot hold, are not measured and
/// go where the largest measured class goes. Returns
/// the set and a line per used algorithm saying what was chosen for which sizes
/// and why.
pub fn configured_set(
    keys: &Arc<KeyRegistry>,
    spec: Option<&str>,
    calibration: std::time::Duration,
    used: &[Algorithm],
    largest: usize,
) -> Result<(EngineSet, Vec<String>), String> {
    let mut set = EngineSet::new(all(keys));
    let mut pinned = Vec::new();
    for (alg, name) in parse_choice(spec.unwrap_or(""))? {
        match alg {
            Some(a) => {
                set.choose(a, &name)?;
                pinned.push(a);
            }
            None => {
                let mut any = false;
                for a in Algorithm::ALL {
                    if set.choose(a, &name).is_ok() {
                        pinned.push(a);
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
        }
    }
    let measured = crypto::calibrate::calibrate_only(&mut set, calibration, &pinned, used, largest);
    let lines = used
        .iter()
        .map(|&a| {
            let how = if pinned.contains(&a) {
                "configured"
            } else {
                "measured"
            };
            // What the engine serving each measured size did there.
            let figures: Vec<String> = crypto::size_class::SIZES
                .iter()
                .filter_map(|&size| {
                    let engine = set.chosen_for(a, size as u32)?;
                    measured
                        .iter()
                        .find(|m| m.alg == a && m.engine == engine && m.size == size)
                        .map(|m| format!("{size} B {engine} {:.2} Gbit/s", m.gbps))
                })
                .collect();
            format!("{a}: {} ({how}; {})", set.describe(a), figures.join(", "))
        })
        .collect();
    Ok((set, lines))
}

/// Another worker's engine set with the same choices as `like` (made by
/// [`configured_set`]), without calibrating again; the async engine and its threads
/// only where `like` chose it.
pub fn replica(keys: &Arc<KeyRegistry>, like: &EngineSet) -> Result<EngineSet, String> {
    let wants_async = Algorithm::ALL.iter().any(|&a| {
        crypto::size_class::SIZES
            .iter()
            .any(|&n| like.chosen_for(a, n as u32) == Some(crypto_async::AsyncEngine::NAME))
    });
    let mut set = if wants_async {
        EngineSet::new(all(keys))
    } else {
        EngineSet::new(cpu_engines())
    };
    for a in Algorithm::ALL {
        let mut names = [None; crypto::size_class::COUNT];
        for (slot, &n) in names.iter_mut().zip(crypto::size_class::SIZES.iter()) {
            *slot = like.chosen_for(a, n as u32);
        }
        set.choose_by_class(a, names)?;
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pin_serves_every_size_and_the_lines_say_so() {
        let keys = Arc::new(KeyRegistry::new(4));
        let (set, lines) = configured_set(
            &keys,
            Some("chacha20-poly1305=reference"),
            std::time::Duration::from_millis(1),
            &Algorithm::ALL,
            usize::MAX,
        )
        .unwrap();
        let chacha = Algorithm::ChaCha20Poly1305;
        for len in [0, 64, 570, 1424, 1518] {
            assert_eq!(set.chosen_for(chacha, len), Some("reference"));
        }
        assert!(
            lines[0].starts_with(
                "chacha20-poly1305: reference for every size (configured; 64 B reference "
            ),
            "{}",
            lines[0]
        );
        assert!(lines[0].contains("1518 B reference"), "{}", lines[0]);
        assert!(lines[1].starts_with("aes-128-gcm: ") && lines[1].contains("(measured; "));
    }

    #[test]
    fn a_replica_makes_the_same_choices() {
        let keys = Arc::new(KeyRegistry::new(4));
        let (set, _) = configured_set(
            &keys,
            Some("chacha20-poly1305=reference,aes-128-gcm=aws-lc"),
            std::time::Duration::from_millis(1),
            &Algorithm::ALL,
            usize::MAX,
        )
        .unwrap();
        let copy = replica(&keys, &set).unwrap();
        for a in Algorithm::ALL {
            for &n in crypto::size_class::SIZES.iter() {
                assert_eq!(copy.chosen_for(a, n as u32), set.chosen_for(a, n as u32));
            }
        }
    }

    /// Real engines on a vector that goes to two of them: what one encrypts, the
    /// reference opens, and every op comes back in its place.
    #[test]
    fn a_vector_split_across_real_engines_round_trips() {
        use crypto::{AeadOp, Direction, OpStatus, Span, TAG_LEN};
        let mut set = EngineSet::new(cpu_engines());
        let alg = Algorithm::ChaCha20Poly1305;
        let names: Vec<&str> = set.engines().map(|e| e.name()).collect();
        let other = if names.contains(&"ipsecmb") {
            "ipsecmb"
        } else {
            "aws-lc"
        };
        let (s, l) = (Some("mb"), Some(other));
        set.choose_by_class(alg, [s, s, l, l, l, l]).unwrap();
        let keys = KeyRegistry::new(4);
        let key = keys.insert(alg, &[7; 32]).unwrap();
        let lens = [64usize, 1424, 576, 1520, 32, 800, 64, 1424];
        let stride = 1600 + TAG_LEN;
        let mut mem: Vec<u8> = (0..lens.len() * stride).map(|i| (i % 251) as u8).collect();
        let plain = mem.clone();
        let ops = |direction| -> Vec<AeadOp> {
            lens.iter()
                .enumerate()
                .map(|(i, &len)| {
                    let mut nonce = [0; 12];
                    nonce[0] = i as u8;
                    let text = Span::new((i * stride) as u32, len as u32);
                    AeadOp::in_place(alg, key, direction, nonce, Span::EMPTY, text)
                })
                .collect()
        };
        let mut enc = ops(Direction::Encrypt);
        set.process(&keys, &mut mem, &mut enc);
        assert!(enc.iter().all(|o| o.status == OpStatus::Ok), "{enc:?}");
        assert_ne!(mem, plain);
        let mut dec = ops(Direction::Decrypt);
        crypto::reference::ReferenceEngine::new().process(&keys, &mut mem, &mut dec);
        assert!(dec.iter().all(|o| o.status == OpStatus::Ok), "{dec:?}");
        for (i, &len) in lens.iter().enumerate() {
            let r = i * stride..i * stride + len;
            assert_eq!(mem[r.clone()], plain[r], "op {i}");
        }
    }
}
