//! The async engine: vectors of ops go to crypto threads on other cores and come
//! back in the order they were submitted, as an offload card's queue would do. It
//! wraps any engine (each crypto thread runs its own instance).
//!
//! Two ways in:
//! - [`Engine::process`]: the vector is cut into one piece per thread, the pieces run
//!   at once and the call returns when all are done (a synchronous engine that uses
//!   more cores);
//! - [`AsyncEngine::submit`] and [`AsyncEngine::poll`]: a frame is handed over and
//!   the caller goes on; completed frames come back in submission order. The graph
//!   parks the packets of a submitted frame and a post node resumes them.
//!
//! Memory is shared with the crypto threads by pointer, so `submit` is `unsafe`: the
//! caller keeps the memory alive and leaves the ops' ranges alone until the frame
//! comes back. Within one vector, no op may write bytes another op reads or writes
//! (the data path's ops each cover their own packet buffer).
//!
//! [`spread`] is the same idea with the data-path workers as the crypto threads: a
//! worker with a full frame hands pieces of it to workers with time to spare.

pub mod spread;

use crypto::{AeadOp, Algorithm, AsyncOps, Engine, KeyRegistry};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;

/// Makes the inner engine of each crypto thread.
pub type EngineFactory = Arc<dyn Fn() -> Box<dyn Engine> + Send + Sync>;

/// A pointer to the caller's memory, sent to a crypto thread.
struct Mem {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the pointer is only dereferenced by the crypto thread while the submitter
// guarantees (the `submit` contract) that the memory is alive and the op ranges are
// not touched by anyone else; distinct ops of one vector cover disjoint bytes.
unsafe impl Send for Mem {}

/// Which registry a job's keys come from: the engine's own, or (for a synchronous
/// `process` call, which outlives its jobs) the caller's.
struct KeysRef(Option<*const KeyRegistry>);

// SAFETY: a borrowed registry pointer is only sent for the duration of a `process`
// call that waits for every job it sent; KeyRegistry is Sync.
unsafe impl Send for KeysRef {}

struct Job {
    seq: u64,
    mem: Mem,
    ops: Vec<AeadOp>,
    keys: KeysRef,
}

struct Done {
    seq: u64,
    ops: Vec<AeadOp>,
}

struct Worker {
    jobs: Sender<Job>,
    thread: Option<JoinHandle<()>>,
}

pub struct AsyncEngine {
    keys: Arc<KeyRegistry>,
    workers: Vec<Worker>,
    done: Receiver<Done>,
    supports: [bool; Algorithm::ALL.len()],
    next_seq: u64,
    next_out: u64,
    /// Frames back early, waiting for an older one.
    reorder: BTreeMap<u64, Vec<AeadOp>>,
    /// Round robin over the threads for whole frames.
    next_worker: usize,
    in_flight: usize,
    /// Frames handed back, to fill again (at most [`MAX_SPARE_FRAMES`]).
    spare: Vec<Vec<AeadOp>>,
}

/// Frames kept for reuse: more than a worker ever has in flight at once.
const MAX_SPARE_FRAMES: usize = 64;

impl AsyncEngine {
    pub const NAME: &'static str = "async";

    /// `threads` crypto threads, each with an engine from `factory`, reading keys
    /// from `keys` (the same registry the data path's sessions live in).
    pub fn new(keys: Arc<KeyRegistry>, factory: EngineFactory, threads: usize) -> AsyncEngine {
        let threads = threads.max(1);
        let probe = factory();
        let mut supports = [false; Algorithm::ALL.len()];
        for alg in Algorithm::ALL {
            supports[alg.index()] = probe.supports(alg);
        }
        drop(probe);
        let (done_tx, done) = mpsc::channel::<Done>();
        let workers = (0..threads)
            .map(|i| {
                let (jobs, rx) = mpsc::channel::<Job>();
                let keys = keys.clone();
                let factory = factory.clone();
                let done_tx = done_tx.clone();
                let thread = std::thread::Builder::new()
                    .name(format!("crypto-{i}"))
                    .spawn(move || crypto_thread(rx, done_tx, keys, factory))
                    .expect("spawning a crypto thread");
                Worker {
                    jobs,
                    thread: Some(thread),
                }
            })
            .collect();
        AsyncEngine {
            keys,
            workers,
            done,
            supports,
            next_seq: 0,
            next_out: 0,
            reorder: BTreeMap::new(),
            next_worker: 0,
            in_flight: 0,
            spare: Vec::new(),
        }
    }

    fn send(
        &self,
        worker: usize,
        seq: u64,
        ptr: *mut u8,
        len: usize,
        ops: Vec<AeadOp>,
        keys: KeysRef,
    ) {
        let job = Job {
            seq,
            mem: Mem { ptr, len },
            ops,
            keys,
        };
        // A crypto thread only ends when the engine is dropped.
        self.workers[worker]
            .jobs
            .send(job)
            .expect("crypto thread alive");
    }

    fn take_next(&mut self) -> Option<(u64, Vec<AeadOp>)> {
        let ops = self.reorder.remove(&self.next_out)?;
        let seq = self.next_out;
        self.next_out += 1;
        self.in_flight -= 1;
        Some((seq, ops))
    }
}

fn crypto_thread(
    jobs: Receiver<Job>,
    done: Sender<Done>,
    keys: Arc<KeyRegistry>,
    factory: EngineFactory,
) {
    let mut engine = factory();
    while let Ok(mut job) = jobs.recv() {
        // SAFETY: the submitter keeps `ptr..ptr+len` alive and untouched in the ops'
        // ranges until this frame is returned (the `submit` contract); this thread is
        // the only one working on those ranges.
        let mem = unsafe { std::slice::from_raw_parts_mut(job.mem.ptr, job.mem.len) };
        let registry: &KeyRegistry = match job.keys.0 {
            // SAFETY: a borrowed registry outlives the `process` call that sent this
            // job and waits for it (KeysRef).
            Some(ptr) => unsafe { &*ptr },
            None => &keys,
        };
        engine.process(registry, mem, &mut job.ops);
        if done
            .send(Done {
                seq: job.seq,
                ops: job.ops,
            })
            .is_err()
        {
            return;
        }
    }
}

impl AsyncOps for AsyncEngine {
    unsafe fn submit(&mut self, mem: *mut u8, len: usize, ops: Vec<AeadOp>) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        let w = self.next_worker;
        self.next_worker = (w + 1) % self.workers.len();
        self.send(w, seq, mem, len, ops, KeysRef(None));
        self.in_flight += 1;
        seq
    }

    fn poll(&mut self) -> Option<(u64, Vec<AeadOp>)> {
        while let Ok(d) = self.done.try_recv() {
            self.reorder.insert(d.seq, d.ops);
        }
        self.take_next()
    }

    fn wait(&mut self) -> Option<(u64, Vec<AeadOp>)> {
        if self.in_flight == 0 {
            return None;
        }
        while !self.reorder.contains_key(&self.next_out) {
            let d = self.done.recv().expect("crypto threads alive");
            self.reorder.insert(d.seq, d.ops);
        }
        self.take_next()
    }

    fn in_flight(&self) -> usize {
        self.in_flight
    }

    fn frame(&mut self) -> Vec<AeadOp> {
        self.spare.pop().unwrap_or_default()
    }

    fn recycle(&mut self, mut ops: Vec<AeadOp>) {
        if self.spare.len() < MAX_SPARE_FRAMES {
            ops.clear();
            self.spare.push(ops);
        }
    }
}

impl Engine for AsyncEngine {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn as_async(&mut self) -> Option<&mut dyn AsyncOps> {
        Some(self)
    }

    fn supports(&self, alg: Algorithm) -> bool {
        self.supports[alg.index()]
    }

    /// Cuts the vector into one piece per crypto thread, runs them at once and waits.
    fn process(&mut self, keys: &KeyRegistry, mem: &mut [u8], ops: &mut [AeadOp]) {
        if ops.is_empty() {
            return;
        }
        // Earlier async frames first, so that sequence numbers stay in order.
        let mut earlier = Vec::new();
        while let Some(f) = self.wait() {
            earlier.push(f);
        }
        debug_assert!(
            earlier.is_empty(),
            "process() while async frames were in flight"
        );
        let pieces = self.workers.len().min(ops.len());
        let per = ops.len().div_ceil(pieces);
        let first = self.next_seq;
        let (ptr, len) = (mem.as_mut_ptr(), mem.len());
        for (i, chunk) in ops.chunks(per).enumerate() {
            let seq = self.next_seq;
            self.next_seq += 1;
            self.in_flight += 1;
            let k = if std::ptr::eq(keys, Arc::as_ptr(&self.keys)) {
                KeysRef(None)
            } else {
                KeysRef(Some(keys as *const KeyRegistry))
            };
            self.send(i % self.workers.len(), seq, ptr, len, chunk.to_vec(), k);
        }
        let mut at = 0;
        while let Some((seq, done)) = self.wait() {
            debug_assert!(seq >= first);
            ops[at..at + done.len()].copy_from_slice(&done);
            at += done.len();
        }
        // `mem` stayed borrowed mutably for the whole call, so nothing else touched it.
        let _ = mem;
    }
}

impl Drop for AsyncEngine {
    fn drop(&mut self) {
        // Finish what is in flight: the threads may still be writing caller memory.
        while self.wait().is_some() {}
        for w in &mut self.workers {
            let (dead, _) = mpsc::channel();
            w.jobs = dead;
        }
        for w in &mut self.workers {
            if let Some(t) = w.thread.take() {
                let _ = t.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crypto::{Direction, OpStatus, Span};

    fn factory() -> EngineFactory {
        Arc::new(|| Box::new(crypto_awslc::AwsLcEngine::new()) as Box<dyn Engine>)
    }

    /// The suite every engine runs, each engine bound to the suite's registry.
    #[test]
    fn async_engine_conforms() {
        crypto::conformance::run_all_with_registry(&|keys| {
            Box::new(AsyncEngine::new(keys.clone(), factory(), 3))
        })
        .unwrap();
    }

    /// Pieces on three threads give the same bytes and statuses as one engine alone.
    #[test]
    fn matches_the_inner_engine_on_random_batches() {
        use rand::{Rng, RngCore, SeedableRng};
        let keys = Arc::new(KeyRegistry::new(16));
        let mut engine = AsyncEngine::new(keys.clone(), factory(), 3);
        let mut inner = crypto_awslc::AwsLcEngine::new();
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let k = keys.insert(Algorithm::ChaCha20Poly1305, &[9; 32]).unwrap();
        for round in 0..20 {
            let count = rng.gen_range(1..300);
            let mut mem = Vec::new();
            let mut ops = Vec::new();
            for i in 0..count {
                let len = rng.gen_range(0..2000u32);
                let off = mem.len() as u32;
                mem.resize(mem.len() + len as usize + 16, 0);
                let mut nonce = [0u8; 12];
                nonce[..4].copy_from_slice(&(i as u32).to_le_bytes());
                nonce[4..8].copy_from_slice(&(round as u32).to_le_bytes());
                ops.push(AeadOp::in_place(
                    Algorithm::ChaCha20Poly1305,
                    k,
                    Direction::Encrypt,
                    nonce,
                    Span::EMPTY,
                    Span::new(off, len),
                ));
            }
            rng.fill_bytes(&mut mem);
            let mut ours = mem.clone();
            let mut theirs = mem.clone();
            let mut o1 = ops.clone();
            let mut o2 = ops.clone();
            engine.process(&keys, &mut ours, &mut o1);
            inner.process(&keys, &mut theirs, &mut o2);
            assert_eq!(o1, o2);
            assert!(ours == theirs, "round {round}: output differs");
        }
    }

    /// Frames submitted to several threads come back in submission order.
    #[test]
    fn frames_come_back_in_order() {
        let keys = Arc::new(KeyRegistry::new(16));
        let k = keys.insert(Algorithm::ChaCha20Poly1305, &[1; 32]).unwrap();
        let mut engine = AsyncEngine::new(keys.clone(), factory(), 4);
        let frames = 200usize;
        // Frames of very different sizes finish out of order on the threads.
        let mut mems: Vec<Vec<u8>> = (0..frames)
            .map(|i| vec![i as u8; if i % 3 == 0 { 64 * 1040 } else { 64 * 80 }])
            .collect();
        let mut seqs = Vec::new();
        for (i, m) in mems.iter_mut().enumerate() {
            let len = if i % 3 == 0 { 1024 } else { 64 };
            let ops: Vec<AeadOp> = (0..64)
                .map(|j| {
                    AeadOp::in_place(
                        Algorithm::ChaCha20Poly1305,
                        k,
                        Direction::Encrypt,
                        [j as u8; 12],
                        Span::EMPTY,
                        Span::new((j * (len + 16)) as u32, len as u32),
                    )
                })
                .collect();
            // SAFETY: each frame has its own buffer, kept alive (and untouched) in
            // `mems` until every frame came back below.
            seqs.push(unsafe { engine.submit(m.as_mut_ptr(), m.len(), ops) });
        }
        let mut back = Vec::new();
        while let Some((seq, ops)) = engine.wait() {
            assert!(ops.iter().all(|o| o.status == OpStatus::Ok));
            back.push(seq);
        }
        assert_eq!(back, seqs);
        assert_eq!(engine.in_flight(), 0);
    }

    /// A frame handed back is handed out again, empty, its room kept: a stream
    /// of frames allocates nothing once warm; and no more than
    /// `MAX_SPARE_FRAMES` wait to be reused.
    #[test]
    fn frames_are_reused() {
        let keys = Arc::new(KeyRegistry::new(4));
        let k = keys.insert(Algorithm::ChaCha20Poly1305, &[1; 32]).unwrap();
        let mut engine = AsyncEngine::new(keys, factory(), 1);
        let mut mem = vec![0u8; 64 * 80];
        let mut frame = engine.frame();
        assert_eq!(frame.capacity(), 0, "nothing to reuse yet");
        frame.extend((0..64).map(|j| {
            AeadOp::in_place(
                Algorithm::ChaCha20Poly1305,
                k,
                Direction::Encrypt,
                [j as u8; 12],
                Span::EMPTY,
                Span::new(j * 80, 64),
            )
        }));
        let room = frame.as_ptr();
        // SAFETY: `mem` outlives the frame, which is waited for below.
        unsafe { engine.submit(mem.as_mut_ptr(), mem.len(), frame) };
        let (_, ops) = engine.wait().expect("the frame comes back");
        assert!(ops.iter().all(|o| o.status == OpStatus::Ok));
        engine.recycle(ops);
        let again = engine.frame();
        assert!(again.is_empty());
        assert_eq!(again.as_ptr(), room, "the same allocation");
        assert!(again.capacity() >= 64);
        for _ in 0..MAX_SPARE_FRAMES + 10 {
            engine.recycle(Vec::with_capacity(1));
        }
        assert_eq!(engine.spare.len(), MAX_SPARE_FRAMES);
    }

    /// Serves AEADs through AWS-LC and nothing else.
    struct AeadOnly(crypto_awslc::AwsLcEngine);

    impl Engine for AeadOnly {
        fn name(&self) -> &'static str {
            "aead-only"
        }
        fn supports(&self, alg: Algorithm) -> bool {
            !alg.is_chained()
        }
        fn process(&mut self, keys: &KeyRegistry, mem: &mut [u8], ops: &mut [AeadOp]) {
            for o in ops.iter_mut().filter(|o| o.alg.is_chained()) {
                o.status = OpStatus::Unsupported;
            }
            self.0.process(keys, mem, ops)
        }
    }

    /// What the async engine serves is what its inner engines serve, chained ops
    /// (ESP's AES-CBC with HMAC) included: through AWS-LC a frame of them comes back
    /// as AWS-LC alone seals it; through an engine without them they are refused.
    #[test]
    fn serves_chained_ops_when_its_inner_engines_do() {
        use crypto::op_layout::{OpLayout, OpShape};
        let keys = Arc::new(KeyRegistry::new(16));
        let alg = Algorithm::Aes256CbcHmacSha1;
        let k = keys.insert(alg, &[3; 52]).unwrap();
        let mut layout = OpLayout::new();
        for i in 0..40 {
            let shape = OpShape {
                alg,
                key: k,
                nonce: [0; 12],
                aad_len: 8,
                len: 16 * (1 + i * 3),
                in_place: i % 2 == 0,
            };
            layout.push_chained(shape, 4 * (i % 2));
        }
        layout
            .mem
            .iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = (i * 31) as u8);
        layout.copy_ivs();
        let OpLayout { mut mem, ops } = layout;
        let mut inner_mem = mem.clone();
        let mut inner_ops = ops.clone();
        crypto_awslc::AwsLcEngine::new().process(&keys, &mut inner_mem, &mut inner_ops);

        let mut engine = AsyncEngine::new(keys.clone(), factory(), 3);
        assert!(Algorithm::ALL.iter().all(|&a| engine.supports(a)));
        // SAFETY: `mem` stays alive and untouched until the frame is back below.
        unsafe { engine.submit(mem.as_mut_ptr(), mem.len(), ops.clone()) };
        let (_, back) = engine.wait().unwrap();
        assert!(back.iter().all(|o| o.status == OpStatus::Ok), "{back:?}");
        assert_eq!(back, inner_ops);
        assert!(mem == inner_mem, "the frame differs from AWS-LC's");

        let aead_only: EngineFactory =
            Arc::new(|| Box::new(AeadOnly(crypto_awslc::AwsLcEngine::new())) as Box<dyn Engine>);
        let mut engine = AsyncEngine::new(keys.clone(), aead_only, 2);
        assert!(engine.supports(Algorithm::Aes128Gcm) && !engine.supports(alg));
        let mut refused = ops;
        let before = mem.clone();
        engine.process(&keys, &mut mem, &mut refused);
        assert!(refused.iter().all(|o| o.status == OpStatus::Unsupported));
        assert!(mem == before);
    }

    #[test]
    fn a_registry_lent_to_process_works() {
        let keys = Arc::new(KeyRegistry::new(4));
        let other = KeyRegistry::new(4);
        let k = other.insert(Algorithm::ChaCha20Poly1305, &[1; 32]).unwrap();
        let mut engine = AsyncEngine::new(keys, factory(), 1);
        let mut mem = vec![0u8; 64];
        let mut ops = vec![AeadOp::in_place(
            Algorithm::ChaCha20Poly1305,
            k,
            Direction::Encrypt,
            [0; 12],
            Span::EMPTY,
            Span::new(0, 32),
        )];
        engine.process(&other, &mut mem, &mut ops);
        assert_eq!(ops[0].status, OpStatus::Ok);
    }
}
