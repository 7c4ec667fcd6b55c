//! Engines and the per-algorithm choice between them.

use crate::{AeadOp, Algorithm, KeyRegistry, OpStatus, size_class};

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

    /// An empty frame to fill and [`submit`](AsyncOps::submit): one that
    /// [`recycle`](AsyncOps::recycle) handed back, when there is one, so that a steady
    /// stream of frames allocates nothing.
    fn frame(&mut self) -> Vec<AeadOp> {
        Vec::new()
    }

    /// Takes back a frame's ops once the caller is done with what came back from
    /// [`poll`](AsyncOps::poll) or [`wait`](AsyncOps::wait), to hand out again.
    fn recycle(&mut self, _ops: Vec<AeadOp>) {}
}

/// The engines of one worker and which of them serves each algorithm at each size
/// class (see [`crate::size_class`]).
///
/// An asynchronous engine serves every size of an algorithm or none: it wraps a
/// whole set itself, and the graph parks frames for it by algorithm alone.
pub struct EngineSet {
    engines: Vec<Box<dyn Engine>>,
    /// Per algorithm, per size class: the engine's index.
    choice: [[Option<usize>; size_class::COUNT]; Algorithm::ALL.len()],
    /// Where [`EngineSet::process`] sorts the ops of a vector that goes to more than
    /// one engine: one group per (algorithm, engine), kept across calls so that a
    /// warm set allocates nothing.
    groups: Vec<Group>,
}

/// Ops of one vector bound for one engine and one algorithm, in caller order, and
/// where each came from.
#[derive(Default)]
struct Group {
    from: Vec<u32>,
    ops: Vec<AeadOp>,
}

/// Where an op goes: its algorithm and the engine (if any) chosen for its size.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Route {
    alg: Algorithm,
    engine: Option<usize>,
}

impl EngineSet {
    /// Each algorithm goes to the first engine in `engines` that supports it, at every
    /// size, until [`EngineSet::choose`] or [`EngineSet::choose_by_class`] say otherwise.
    pub fn new(engines: Vec<Box<dyn Engine>>) -> EngineSet {
        let mut choice = [[None; size_class::COUNT]; Algorithm::ALL.len()];
        for alg in Algorithm::ALL {
            choice[alg.index()] = [engines.iter().position(|e| e.supports(alg)); size_class::COUNT];
        }
        let groups = (0..Algorithm::ALL.len() * engines.len())
            .map(|_| Group::default())
            .collect();
        EngineSet {
            engines,
            choice,
            groups,
        }
    }

    fn find(&self, alg: Algorithm, name: &str) -> Result<usize, String> {
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
        Ok(i)
    }

    /// Routes `alg` at every size to the engine called `name` (a pin).
    pub fn choose(&mut self, alg: Algorithm, name: &str) -> Result<(), String> {
        let i = self.find(alg, name)?;
        self.choice[alg.index()] = [Some(i); size_class::COUNT];
        Ok(())
    }

    /// Routes the ops of `alg` of each size class to the engine named for that class
    /// (`None`: as before). An asynchronous engine can only be named for every class
    /// or none: it serves every size of an algorithm (use [`EngineSet::choose`]).
    /// Nothing changes when a name is refused.
    pub fn choose_by_class(
        &mut self,
        alg: Algorithm,
        names: [Option<&str>; size_class::COUNT],
    ) -> Result<(), String> {
        let mut next = self.choice[alg.index()];
        for (slot, name) in next.iter_mut().zip(names) {
            if let Some(name) = name {
                *slot = Some(self.find(alg, name)?);
            }
        }
        if next.iter().any(|&e| e != next[0]) {
            for e in next.into_iter().flatten() {
                if self.engines[e].as_async().is_some() {
                    return Err(format!(
                        "engine {} is asynchronous: it serves every size of {alg} or none",
                        self.engines[e].name()
                    ));
                }
            }
        }
        self.choice[alg.index()] = next;
        Ok(())
    }

    /// The engine serving every size of `alg`, if one does.
    fn sole(&self, alg: Algorithm) -> Option<usize> {
        let c = &self.choice[alg.index()];
        c[0].filter(|_| c.iter().all(|&e| e == c[0]))
    }

    /// The engine chosen for `alg`, if it runs frames asynchronously (it then serves
    /// every size of `alg`).
    pub fn async_for(&mut self, alg: Algorithm) -> Option<&mut dyn AsyncOps> {
        let i = self.sole(alg)?;
        self.engines[i].as_async()
    }

    /// Frames in flight in every asynchronous engine of the set.
    pub fn in_flight(&mut self) -> usize {
        self.engines
            .iter_mut()
            .filter_map(|e| e.as_async().map(|a| a.in_flight()))
            .sum()
    }

    /// The one engine that best stands for the choice for `alg`: the one serving the
    /// most bytes of a simple IMIX mix ([`size_class::IMIX`]; ties go to the engine of
    /// the smaller size). Where sizes go to different engines, see
    /// [`EngineSet::chosen_for`] and [`EngineSet::choices`].
    pub fn chosen(&self, alg: Algorithm) -> Option<&str> {
        let engine_of = |size: usize| self.choice[alg.index()][size_class::of(size as u32)];
        let bytes = |e: usize| -> usize {
            size_class::IMIX
                .iter()
                .filter(|&&(size, _)| engine_of(size) == Some(e))
                .map(|&(size, weight)| size * weight as usize)
                .sum()
        };
        let mut best: Option<usize> = None;
        for e in size_class::IMIX
            .iter()
            .filter_map(|&(size, _)| engine_of(size))
        {
            if best.is_none_or(|b| bytes(e) > bytes(b)) {
                best = Some(e);
            }
        }
        best.map(|i| self.engines[i].name())
    }

    /// The engine that runs ops of `alg` with `len` bytes of text.
    pub fn chosen_for(&self, alg: Algorithm, len: u32) -> Option<&str> {
        self.choice[alg.index()][size_class::of(len)].map(|i| self.engines[i].name())
    }

    /// The choice for `alg` as runs of neighbouring size classes that go to one
    /// engine: `(first class, last class, engine)`, ascending.
    pub fn choices(&self, alg: Algorithm) -> Vec<(usize, usize, Option<&str>)> {
        let c = &self.choice[alg.index()];
        let mut runs: Vec<(usize, usize, Option<usize>)> = Vec::new();
        for (class, &e) in c.iter().enumerate() {
            match runs.last_mut() {
                Some(run) if run.2 == e => run.1 = class,
                _ => runs.push((class, class, e)),
            }
        }
        runs.into_iter()
            .map(|(a, b, e)| (a, b, e.map(|i| self.engines[i].name())))
            .collect()
    }

    /// The choice for `alg` in words: "mb for every size", or
    /// "mb for 0-1270 B, ipsecmb for 1271 B and up".
    pub fn describe(&self, alg: Algorithm) -> String {
        let parts: Vec<String> = self
            .choices(alg)
            .into_iter()
            .map(|(a, b, e)| format!("{} for {}", e.unwrap_or("none"), size_class::describe(a, b)))
            .collect();
        parts.join(", ")
    }

    pub fn engines(&self) -> impl Iterator<Item = &dyn Engine> {
        self.engines.iter().map(|e| e.as_ref())
    }

    pub fn engines_mut(&mut self) -> impl Iterator<Item = &mut dyn Engine> {
        self.engines
            .iter_mut()
            .map(|e| e.as_mut() as &mut dyn Engine)
    }

    #[inline]
    fn route(&self, op: &AeadOp) -> Route {
        Route {
            alg: op.alg,
            engine: self.choice[op.alg.index()][size_class::of(op.len)],
        }
    }

    /// Whether every op of `ops` takes `first`, the first op's route: one pass that
    /// reads each op's algorithm and length, and the size classes looked up once
    /// for the shortest and the longest (the classes between them must all go to
    /// the same engine too); only the algorithms when one engine serves every size.
    #[inline]
    fn one_route(&self, first: Route, ops: &[AeadOp]) -> bool {
        if first.engine.is_some() && self.sole(first.alg) == first.engine {
            // One engine for every size of the algorithm: only the algorithms count.
            return ops.iter().all(|o| o.alg == first.alg);
        }
        let choice = &self.choice[first.alg.index()];
        let (mut shortest, mut longest, mut other_alg) = (u32::MAX, 0u32, false);
        for o in ops {
            shortest = shortest.min(o.len);
            longest = longest.max(o.len);
            other_alg |= o.alg != first.alg;
        }
        let classes = size_class::of(shortest)..=size_class::of(longest);
        !other_alg && choice[classes].iter().all(|&e| e == first.engine)
    }

    /// Runs a vector of ops. The common case (every op of one algorithm and of sizes
    /// that one engine serves, as in most WireGuard frames) is one engine call on the
    /// caller's vector. Otherwise the ops are copied out into one group per
    /// (algorithm, engine), in caller order, each group is one engine call, and the
    /// statuses are copied back.
    pub fn process(&mut self, keys: &KeyRegistry, mem: &mut [u8], ops: &mut [AeadOp]) {
        let Some(first) = ops.first().map(|o| self.route(o)) else {
            return;
        };
        if self.one_route(first, ops) {
            match first.engine {
                Some(i) => self.engines[i].process(keys, mem, ops),
                None => unsupported(ops),
            }
            return;
        }
        let n = self.engines.len();
        for (from, op) in ops.iter_mut().enumerate() {
            match self.route(op).engine {
                Some(e) => {
                    let g = &mut self.groups[op.alg.index() * n + e];
                    g.from.push(from as u32);
                    g.ops.push(*op);
                }
                None => unsupported(core::slice::from_mut(op)),
            }
        }
        for (k, g) in self.groups.iter_mut().enumerate() {
            if g.ops.is_empty() {
                continue;
            }
            self.engines[k % n].process(keys, mem, &mut g.ops);
            for (&from, done) in g.from.iter().zip(&g.ops) {
                ops[from as usize].status = done.status;
            }
            g.from.clear();
            g.ops.clear();
        }
    }
}

fn unsupported(ops: &mut [AeadOp]) {
    ops.iter_mut()
        .filter(|o| o.status == OpStatus::Pending)
        .for_each(|o| o.status = OpStatus::Unsupported);
}

/// A set is itself an engine (each op goes to its algorithm's choice): what an
/// engine that wraps "the best engines here", like the async one, runs inside.
impl Engine for EngineSet {
    fn name(&self) -> &'static str {
        "set"
    }

    fn supports(&self, alg: Algorithm) -> bool {
        self.choice[alg.index()].iter().any(Option::is_some)
    }

    fn process(&mut self, keys: &KeyRegistry, mem: &mut [u8], ops: &mut [AeadOp]) {
        EngineSet::process(self, keys, mem, ops)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::looks_async::LooksAsync;
    use crate::{Direction, KeyHandle, Span};
    use std::sync::{Arc, Mutex};

    /// What one engine call saw: the engine, where its vector lay, and the ops (by
    /// the id each op carries in its nonce).
    #[derive(Debug)]
    struct Call {
        engine: &'static str,
        at: usize,
        ids: Vec<u32>,
    }

    type Log = Arc<Mutex<Vec<Call>>>;

    /// Serves the algorithms it is told to, touches no memory, and marks each op it
    /// runs with its own status (so the caller can see who ran it).
    struct Fake {
        name: &'static str,
        algs: Vec<Algorithm>,
        mark: OpStatus,
        log: Log,
    }

    impl Engine for Fake {
        fn name(&self) -> &'static str {
            self.name
        }
        fn supports(&self, alg: Algorithm) -> bool {
            self.algs.contains(&alg)
        }
        fn process(&mut self, _: &KeyRegistry, _: &mut [u8], ops: &mut [AeadOp]) {
            self.log.lock().unwrap().push(Call {
                engine: self.name,
                at: ops.as_ptr() as usize,
                ids: ops.iter().map(id).collect(),
            });
            for op in ops.iter_mut().filter(|o| o.status == OpStatus::Pending) {
                op.status = if self.supports(op.alg) {
                    self.mark
                } else {
                    OpStatus::Unsupported
                };
            }
        }
    }

    fn id(op: &AeadOp) -> u32 {
        u32::from_le_bytes(op.nonce[..4].try_into().unwrap())
    }

    fn op(id: u32, alg: Algorithm, len: u32) -> AeadOp {
        let mut nonce = [0; 12];
        nonce[..4].copy_from_slice(&id.to_le_bytes());
        AeadOp::in_place(
            alg,
            KeyHandle::INVALID,
            Direction::Encrypt,
            nonce,
            Span::EMPTY,
            Span::new(0, len),
        )
    }

    const CHACHA: Algorithm = Algorithm::ChaCha20Poly1305;
    const AES: Algorithm = Algorithm::Aes128Gcm;

    /// "small" (marks Ok) and "large" (marks BadTag) serve ChaCha and AES-128;
    /// nobody serves AES-256.
    fn two_engines() -> (EngineSet, Log) {
        let log = Log::default();
        let fake = |name, mark| {
            Box::new(Fake {
                name,
                algs: vec![CHACHA, AES],
                mark,
                log: log.clone(),
            }) as Box<dyn Engine>
        };
        let set = EngineSet::new(vec![
            fake("small", OpStatus::Ok),
            fake("large", OpStatus::BadTag),
        ]);
        (set, log)
    }

    /// ChaCha: small below 413 bytes, large from there. AES: large below 160 bytes,
    /// small from there.
    fn split_set() -> (EngineSet, Log) {
        let (mut set, log) = two_engines();
        let (s, l) = (Some("small"), Some("large"));
        set.choose_by_class(CHACHA, [s, s, l, l, l, l]).unwrap();
        set.choose_by_class(AES, [l, s, s, s, s, s]).unwrap();
        (set, log)
    }

    fn mark_of(name: Option<&str>) -> OpStatus {
        match name {
            Some("small") => OpStatus::Ok,
            Some("large") => OpStatus::BadTag,
            _ => OpStatus::Unsupported,
        }
    }

    #[test]
    fn a_mixed_vector_is_split_by_class_and_comes_back_in_order() {
        let (mut set, log) = split_set();
        let keys = KeyRegistry::new(1);
        let lens = [64, 1424, 576, 64, 159, 160, 412, 413, 1518, 32, 800, 0];
        let algs = [CHACHA, AES, Algorithm::Aes256Gcm];
        let mut ops: Vec<AeadOp> = (0..36)
            .map(|i| op(i as u32, algs[(i / 5) % 3], lens[i % lens.len()]))
            .collect();
        set.process(&keys, &mut [], &mut ops);

        let calls = std::mem::take(&mut *log.lock().unwrap());
        let mut seen = vec![0; ops.len()];
        for call in &calls {
            assert!(
                call.ids.windows(2).all(|w| w[0] < w[1]),
                "caller order kept within a call: {call:?}"
            );
            for &i in &call.ids {
                seen[i as usize] += 1;
                let o = &ops[i as usize];
                assert_eq!(set.chosen_for(o.alg, o.len), Some(call.engine), "{o:?}");
                let other = calls
                    .iter()
                    .filter(|c| c.ids.iter().any(|&j| ops[j as usize].alg == o.alg))
                    .filter(|c| c.engine == call.engine)
                    .count();
                assert_eq!(other, 1, "one call per algorithm and engine");
            }
        }
        for (i, o) in ops.iter().enumerate() {
            let want = mark_of(set.chosen_for(o.alg, o.len));
            assert_eq!(o.status, want, "op {i}: {o:?}");
            let runs = if o.alg == Algorithm::Aes256Gcm { 0 } else { 1 };
            assert_eq!(seen[i], runs, "op {i} ran {} times", seen[i]);
            assert_eq!(id(o), i as u32, "ops stay where they were");
        }
        // Both engines ran both algorithms, so every group was used.
        assert_eq!(calls.len(), 4);
        assert_eq!(set.chosen_for(CHACHA, 412), Some("small"));
        assert_eq!(set.chosen_for(CHACHA, 413), Some("large"));
        assert_eq!(set.chosen_for(AES, 159), Some("large"));
    }

    #[test]
    fn a_vector_for_one_engine_is_one_call_on_the_callers_ops() {
        let (mut set, log) = split_set();
        let keys = KeyRegistry::new(1);
        // ChaCha up to 412 bytes: all "small".
        let mut ops: Vec<AeadOp> = (0..20).map(|i| op(i, CHACHA, 20 * i)).collect();
        set.process(&keys, &mut [], &mut ops);
        let calls = std::mem::take(&mut *log.lock().unwrap());
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].engine, "small");
        assert_eq!(calls[0].at, ops.as_ptr() as usize, "no copy");
        assert_eq!(calls[0].ids, (0..20).collect::<Vec<_>>());
        assert!(ops.iter().all(|o| o.status == OpStatus::Ok));

        // Two algorithms on one engine are still two calls: engines see one
        // algorithm per vector, as before sizes mattered.
        let mut ops = vec![op(0, CHACHA, 64), op(1, AES, 1000)];
        set.process(&keys, &mut [], &mut ops);
        let calls = std::mem::take(&mut *log.lock().unwrap());
        assert_eq!(calls.len(), 2);
        assert!(calls.iter().all(|c| c.engine == "small"));
    }

    /// A vector whose shortest and longest ops are both one engine's, with a class
    /// of the other engine's between them, still sends each op where its class goes.
    #[test]
    fn a_class_between_the_shortest_and_the_longest_is_not_skipped() {
        let (mut set, log) = two_engines();
        let (s, l) = (Some("small"), Some("large"));
        set.choose_by_class(CHACHA, [s, l, s, s, s, s]).unwrap();
        let keys = KeyRegistry::new(1);
        for lens in [vec![64, 600], vec![64, 300, 600]] {
            let mut ops: Vec<AeadOp> = lens
                .iter()
                .enumerate()
                .map(|(i, &len)| op(i as u32, CHACHA, len))
                .collect();
            set.process(&keys, &mut [], &mut ops);
            log.lock().unwrap().clear();
            for o in &ops {
                assert_eq!(
                    o.status,
                    mark_of(set.chosen_for(o.alg, o.len)),
                    "{lens:?}: {o:?}"
                );
            }
        }
    }

    #[test]
    fn a_pinned_algorithm_uses_one_engine_for_every_size() {
        let (mut set, log) = split_set();
        set.choose(CHACHA, "large").unwrap();
        for len in [0, 64, 412, 413, 1518, u32::MAX] {
            assert_eq!(set.chosen_for(CHACHA, len), Some("large"));
        }
        assert_eq!(set.chosen(CHACHA), Some("large"));
        assert_eq!(set.describe(CHACHA), "large for every size");
        let keys = KeyRegistry::new(1);
        let mut ops: Vec<AeadOp> = [64, 1518, 570, 200, 1024]
            .iter()
            .enumerate()
            .map(|(i, &len)| op(i as u32, CHACHA, len))
            .collect();
        set.process(&keys, &mut [], &mut ops);
        let calls = std::mem::take(&mut *log.lock().unwrap());
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].at, ops.as_ptr() as usize);
        assert!(ops.iter().all(|o| o.status == OpStatus::BadTag));
    }

    #[test]
    fn choices_in_words_and_the_representative_engine() {
        let (set, _) = split_set();
        assert_eq!(
            set.describe(CHACHA),
            "small for 0-412 B, large for 413 B and up"
        );
        // IMIX bytes: 448 at 64 B (small), 2280 at 570 B and 1518 at 1518 B (large).
        assert_eq!(set.chosen(CHACHA), Some("large"));
        assert_eq!(set.chosen(AES), Some("small"));
        assert_eq!(set.chosen(Algorithm::Aes256Gcm), None);
        assert_eq!(set.describe(Algorithm::Aes256Gcm), "none for every size");
    }

    /// A chained op is routed as any other: by its algorithm and the class of its
    /// length, beside AEAD ops of the same vector.
    #[test]
    fn a_chained_op_goes_to_the_engine_chosen_for_it() {
        const CBC: Algorithm = Algorithm::Aes256CbcHmacSha256;
        let log = Log::default();
        let fake = |name, mark| {
            Box::new(Fake {
                name,
                algs: vec![CHACHA, CBC],
                mark,
                log: log.clone(),
            }) as Box<dyn Engine>
        };
        let mut set = EngineSet::new(vec![
            fake("small", OpStatus::Ok),
            fake("large", OpStatus::BadTag),
        ]);
        assert_eq!(set.describe(CBC), "small for every size");
        let (s, l) = (Some("small"), Some("large"));
        set.choose_by_class(CBC, [l, l, s, s, s, s]).unwrap();
        let keys = KeyRegistry::new(1);
        let chained = |id: u32, len| {
            let mut o = AeadOp::chained_in_place(
                CBC,
                KeyHandle::INVALID,
                Direction::Decrypt,
                Span::new(0, 24 + len),
                Span::new(24, len),
                24 + len,
            );
            o.nonce[..4].copy_from_slice(&id.to_le_bytes());
            o
        };
        let mut ops = vec![
            chained(0, 64),
            op(1, CHACHA, 64),
            chained(2, 1424),
            chained(3, 256),
            op(4, Algorithm::Aes128CbcHmacSha1, 64),
        ];
        set.process(&keys, &mut [], &mut ops);
        let statuses: Vec<_> = ops.iter().map(|o| o.status).collect();
        assert_eq!(
            statuses,
            [
                OpStatus::BadTag,
                OpStatus::Ok,
                OpStatus::Ok,
                OpStatus::BadTag,
                OpStatus::Unsupported
            ]
        );
        let calls = std::mem::take(&mut *log.lock().unwrap());
        let went = |id| calls.iter().find(|c| c.ids.contains(&id)).map(|c| c.engine);
        assert_eq!(
            [went(0), went(1), went(2), went(3), went(4)],
            [
                Some("large"),
                Some("small"),
                Some("small"),
                Some("large"),
                None
            ]
        );
        assert_eq!(set.chosen_for(CBC, 1424), Some("small"));
        assert!(!set.supports(Algorithm::Aes128CbcHmacSha1));
    }

    #[test]
    fn the_split_reuses_its_groups() {
        let (mut set, log) = split_set();
        let keys = KeyRegistry::new(1);
        let mut ops: Vec<AeadOp> = (0..256).map(|i| op(i, CHACHA, (i * 7) % 1600)).collect();
        set.process(&keys, &mut [], &mut ops);
        let before: Vec<(usize, usize)> = set
            .groups
            .iter()
            .map(|g| (g.ops.as_ptr() as usize, g.ops.capacity()))
            .collect();
        for o in ops.iter_mut() {
            o.status = OpStatus::Pending;
        }
        set.process(&keys, &mut [], &mut ops);
        let after: Vec<(usize, usize)> = set
            .groups
            .iter()
            .map(|g| (g.ops.as_ptr() as usize, g.ops.capacity()))
            .collect();
        assert_eq!(before, after, "no group grew or moved");
        assert!(
            set.groups
                .iter()
                .all(|g| g.ops.is_empty() && g.from.is_empty())
        );
        assert_eq!(log.lock().unwrap().len(), 4);
    }

    #[test]
    fn an_asynchronous_engine_serves_every_size_or_none() {
        let log = Log::default();
        let mut set = EngineSet::new(vec![
            Box::new(Fake {
                name: "small",
                algs: vec![CHACHA],
                mark: OpStatus::Ok,
                log: log.clone(),
            }),
            Box::new(LooksAsync(Fake {
                name: "looks-async",
                algs: vec![CHACHA],
                mark: OpStatus::Ok,
                log,
            })),
        ]);
        assert!(set.async_for(CHACHA).is_none());
        let (s, a) = (Some("small"), Some("looks-async"));
        assert!(set.choose_by_class(CHACHA, [s, s, a, a, a, a]).is_err());
        assert_eq!(set.describe(CHACHA), "small for every size", "unchanged");
        set.choose(CHACHA, "looks-async").unwrap();
        assert!(set.async_for(CHACHA).is_some());
        assert!(
            set.choose_by_class(CHACHA, [s, None, None, None, None, None])
                .is_err()
        );
        assert!(set.async_for(CHACHA).is_some(), "unchanged");
        set.choose_by_class(CHACHA, [s; 6]).unwrap();
        assert!(set.async_for(CHACHA).is_none());
        assert!(set.async_for(AES).is_none());
    }
}
