//! The graph bench's baseline: the engines the graph ran, alone on one core, doing
//! the graph's crypto. Measured in slices between the graph's own (see
//! `wg_graph::run_workers`), so that a machine busy with something else for a while
//! slows both alike and their ratio holds.

use crate::measure::{IMIX, Size};
use crypto::{Algorithm, Engine};
use runtime::engines;
use std::sync::Arc;
use std::time::Duration;

/// The engine of each size class the graph ran on, given the engine of each class.
pub(crate) fn engine_at(by_class: &[String], len: usize) -> &str {
    by_class
        .get(crypto::size_class::of(len as u32))
        .map_or("none", String::as_str)
}

/// One inner size of the mix and its engine, with what it measured so far.
struct Part {
    inner: usize,
    text: usize,
    weight: u32,
    engine: Box<dyn Engine>,
    /// The sum of the slices' Mpps, and how many slices.
    mpps: f64,
    slices: u32,
}

/// The raw engines for one point of the graph bench.
pub(crate) struct RawMeter {
    alg: Algorithm,
    aad_len: Option<usize>,
    parts: Vec<Part>,
}

impl RawMeter {
    /// The engines the graph ran on `alg` at `size`, each size on its class's
    /// engine (IMIX: a 7:4:1 mix). `aad_len`: the tunnel's AAD, each op sealed and
    /// opened on the text the tunnel seals for its inner size (`text_lens`); or
    /// `None` for sealing the inner size alone without AAD, as `bench crypto` does.
    pub(crate) fn new(
        alg: Algorithm,
        aad_len: Option<usize>,
        by_class: &[String],
        text_lens: &[(usize, usize)],
        size: Size,
    ) -> Result<RawMeter, String> {
        let mix: Vec<(usize, u32)> = match size {
            Size::Fixed(n) => vec![(n, 1)],
            Size::Imix => IMIX.to_vec(),
        };
        let mut parts = Vec::with_capacity(mix.len());
        for (inner, weight) in mix {
            let text = text_lens
                .iter()
                .find(|&&(n, _)| n == inner)
                .map_or(inner, |&(_, text)| text);
            let name = engine_at(by_class, text);
            let engine = engines::all(&Arc::new(crypto::KeyRegistry::new(4)))
                .into_iter()
                .find(|e| e.name() == name)
                .ok_or_else(|| format!("engine {name} vanished"))?;
            parts.push(Part {
                inner,
                text,
                weight,
                engine,
                mpps: 0.0,
                slices: 0,
            });
        }
        Ok(RawMeter {
            alg,
            aad_len,
            parts,
        })
    }

    /// One slice: each size of the mix for a third of `seconds` (at least a frame).
    pub(crate) fn measure(&mut self, seconds: f64) -> Result<(), String> {
        let time = Duration::from_secs_f64(seconds.max(0.01)) / 3;
        for p in &mut self.parts {
            let m = match self.aad_len {
                Some(aad) => {
                    crypto::round_trip::measure(p.engine.as_mut(), self.alg, p.text, aad, time)
                }
                None => crypto::calibrate::measure(p.engine.as_mut(), self.alg, p.inner, time),
            };
            let m = m.ok_or_else(|| {
                format!(
                    "{} failed the raw measurement at {} bytes",
                    p.engine.name(),
                    p.inner
                )
            })?;
            p.mpps += m.mpps;
            p.slices += 1;
        }
        Ok(())
    }

    /// Gbit/s of operations over the slices so far, counted in inner bytes as the
    /// graph is (each slice of each size ran equally long, so a size's rate is the
    /// mean of its slices'); 0 before the first slice.
    pub(crate) fn gbps(&self) -> f64 {
        let (mut secs, mut bits) = (0.0, 0.0);
        for p in &self.parts {
            if p.slices == 0 || p.mpps <= 0.0 {
                return 0.0;
            }
            let mpps = p.mpps / f64::from(p.slices);
            secs += f64::from(p.weight) / (mpps * 1e6);
            bits += (p.weight as usize * p.inner * 8) as f64;
        }
        if secs > 0.0 { bits / secs / 1e9 } else { 0.0 }
    }
}
