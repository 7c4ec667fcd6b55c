//! For tests of the engine set and the calibration: an engine that says it runs
//! frames on other threads (so the set treats it as asynchronous) but processes ops
//! in place, through the engine it wraps, and never has a frame in flight.

use crate::{AeadOp, Algorithm, AsyncOps, Engine, KeyRegistry};

pub(crate) struct LooksAsync<E>(pub E);

impl<E: Engine> Engine for LooksAsync<E> {
    fn name(&self) -> &'static str {
        "looks-async"
    }
    fn supports(&self, alg: Algorithm) -> bool {
        self.0.supports(alg)
    }
    fn process(&mut self, keys: &KeyRegistry, mem: &mut [u8], ops: &mut [AeadOp]) {
        self.0.process(keys, mem, ops)
    }
    fn as_async(&mut self) -> Option<&mut dyn AsyncOps> {
        Some(self)
    }
}

#[allow(unsafe_code)]
impl<E: Engine> AsyncOps for LooksAsync<E> {
    unsafe fn submit(&mut self, _: *mut u8, _: usize, _: Vec<AeadOp>) -> u64 {
        unreachable!("the tests never submit a frame")
    }
    fn poll(&mut self) -> Option<(u64, Vec<AeadOp>)> {
        None
    }
    fn wait(&mut self) -> Option<(u64, Vec<AeadOp>)> {
        None
    }
    fn in_flight(&self) -> usize {
        0
    }
}
