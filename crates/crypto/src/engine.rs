//! Engines and the per-algorithm choice between them.

use crate::{AeadOp, Algorithm, KeyRegistry, OpStatus};

/// A crypto engine: takes a whole vector of ops and runs them in one call.
///
/// One instance belongs to one worker (hence `&mut self` and no `Sync`): it may keep
/// per-worker scratch space and its own cache of expanded keys.
pub trait Engine: Send {
    /// Short name used in configuration, on the command line and in `show crypto`.
    fn name(&self) -> &'static str;

    fn supports(&self, alg: Algorithm) -> bool;

    /// Runs every op whose status is `Pending` and sets its status. Ops of algorithms
    /// the engine does not serve get `Unsupported`. Must not panic on bad ranges or
    /// stale keys: those are statuses too.
    fn process(&mut self, keys: &KeyRegistry, mem: &mut [u8], ops: &mut [AeadOp]);

    /// Engines that also take frames to run elsewhere (other cores, a card) say so
    /// here; the graph then parks a frame's packets and resumes them when it is back.
    fn as_async(&mut self) -> Option<&mut dyn AsyncOps> {
        None
    }
}

/// Frames of ops handed over and taken back later, in the order they were handed
/// over. Keys come from the registry the engine was made with.
#[allow(unsafe_code)] // the one unsafe contract of this crate: memory lent across threads
pub trait AsyncOps {
    /// Hands a frame over; returns its sequence number.
    ///
    /// # Safety
    /// `mem..mem+len` must stay valid, and the bytes the ops read or write must be
    /// neither read nor written by anyone else, until the frame comes back from
    /// [`AsyncOps::poll`] or [`AsyncOps::wait`]. No op may write bytes another op of
    /// the frame reads or writes.
    unsafe fn submit(&mut self, mem: *mut u8, len: usize, ops: Vec<AeadOp>) -> u64;

    /// The oldest frame, if it is done.
    fn poll(&mut self) -> Option<(u64, Vec<AeadOp>)>;

    /// The oldest frame, waiting for it; `None` when nothing is in flight.
    fn wait(&mut self) -> Option<(u64, Vec<AeadOp>)>;

    fn in_flight(&self) -> usize;
}

/// The engines of one worker and which of them serves each algorithm.
pub struct EngineSet {
    engines: Vec<Box<dyn Engine>>,
    choice: [Option<usize>; Algorithm::ALL.len()],
}

impl EngineSet {
    /// Each algorithm goes to the first engine in `engines` that supports it, until
    /// [`EngineSet::choose`] says otherwise.
    pub fn new(engines: Vec<Box<dyn Engine>>) -> EngineSet {
        let mut choice = [None; Algorithm::ALL.len()];
        for alg in Algorithm::ALL {
            choice[alg.index()] = engines.iter().position(|e| e.supports(alg));
        }
        EngineSet { engines, choice }
    }

    /// Routes `alg` to the engine called `name`.
    pub fn choose(&mut self, alg: Algorithm, name: &str) -> Result<(), String> {
        let Some(i) = self.engines.iter().position(|e| e.name() == name) else {
            let known: Vec<_> = self.engines.iter().map(|e| e.name()).collect();
            return Err(format!(
                "no engine named {name:?} (have: {})",
                known.join(", ")
            ));
        };
        if !self.engines[i].supports(alg) {
            return Err(format!("engine {name} does not serve {alg}"));
        }
        self.choice[alg.index()] = Some(i);
        Ok(())
    }

    /// The engine chosen for `alg`, if it runs frames asynchronously.
    pub fn async_for(&mut self, alg: Algorithm) -> Option<&mut dyn AsyncOps> {
        let i = self.choice[alg.index()]?;
        self.engines[i].as_async()
    }

    /// Frames in flight in every asynchronous engine of the set.
    pub fn in_flight(&mut self) -> usize {
        self.engines
            .iter_mut()
            .filter_map(|e| e.as_async().map(|a| a.in_flight()))
            .sum()
    }

    pub fn chosen(&self, alg: Algorithm) -> Option<&str> {
        self.choice[alg.index()].map(|i| self.engines[i].name())
    }

    pub fn engines(&self) -> impl Iterator<Item = &dyn Engine> {
        self.engines.iter().map(|e| e.as_ref())
    }

    pub fn engines_mut(&mut self) -> impl Iterator<Item = &mut dyn Engine> {
        self.engines
            .iter_mut()
            .map(|e| e.as_mut() as &mut dyn Engine)
    }

    /// Runs a vector of ops. The common case (every op of one algorithm, as in a
    /// WireGuard frame) is one engine call; mixed vectors cost one call per algorithm.
    pub fn process(&mut self, keys: &KeyRegistry, mem: &mut [u8], ops: &mut [AeadOp]) {
        let Some(first) = ops.first().map(|o| o.alg) else {
            return;
        };
        if ops.iter().all(|o| o.alg == first) {
            self.run_one(first, keys, mem, ops);
            return;
        }
        // Mixed: hand each engine its ops, then put results back in caller order.
        for alg in Algorithm::ALL {
            let idx: Vec<usize> = (0..ops.len()).filter(|&i| ops[i].alg == alg).collect();
            if idx.is_empty() {
                continue;
            }
            let mut batch: Vec<AeadOp> = idx.iter().map(|&i| ops[i]).collect();
            self.run_one(alg, keys, mem, &mut batch);
            for (k, &i) in idx.iter().enumerate() {
                ops[i].status = batch[k].status;
            }
        }
    }

    fn run_one(&mut self, alg: Algorithm, keys: &KeyRegistry, mem: &mut [u8], ops: &mut [AeadOp]) {
        match self.choice[alg.index()] {
            Some(i) => self.engines[i].process(keys, mem, ops),
            None => ops
                .iter_mut()
                .filter(|o| o.status == OpStatus::Pending)
                .for_each(|o| o.status = OpStatus::Unsupported),
        }
    }
}

/// A set is itself an engine (each op goes to its algorithm's choice): what an
/// engine that wraps "the best engines here", like the async one, runs inside.
impl Engine for EngineSet {
    fn name(&self) -> &'static str {
        "set"
    }

    fn supports(&self, alg: Algorithm) -> bool {
        self.choice[alg.index()].is_some()
    }

    fn process(&mut self, keys: &KeyRegistry, mem: &mut [u8], ops: &mut [AeadOp]) {
        EngineSet::process(self, keys, mem, ops)
    }
}
