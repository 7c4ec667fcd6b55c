//! linerate's own multi-buffer ChaCha20-Poly1305 engine: many packets per SIMD
//! instruction.
//!
//! Library engines run one packet at a time, wide inside the packet; a 64-byte
//! packet is one ChaCha20 block and five Poly1305 blocks, which leaves most of a
//! 512-bit register idle. This engine instead puts a different packet in each lane:
//! 16 ChaCha20 states side by side (one zmm register per state word), 16 Poly1305
//! accumulators side by side. Long packets, for which the lanes would wait on each
//! other, go the other way: one packet across all lanes.
//!
//! - `dispatch`: the paths (`scalar`, `avx2`, `avx512`, `avx512ifma`), runtime CPU
//!   detection and the kernel table;
//! - `kernels/`: the SIMD kernels, ChaCha20 and Poly1305 per instruction set;
//! - `lane_path`, `block_path`: the two ways of feeding lanes;
//! - `scheduler`: a whole op vector, pass by pass;
//! - `scalar`, `field`: the portable path and Poly1305's field arithmetic;
//! - [`raw`]: the primitives alone on a chosen path, for known-answer tests.
//!
//! Ops of one vector must not overlap each other's memory (each op's own ranges are
//! checked by [`AeadOp::validate`]); the engine processes them in passes, not one
//! after another.

/// ChaCha20's 20 rounds (RFC 8439 section 2.3): ten double rounds, each four
/// quarter rounds down the columns of the 4x4 state and four along its diagonals,
/// with `$qr(state, a, b, c, d)` for whatever holds the state (one block's words or
/// vectors of many lanes' words). A macro, so that a kernel's quarter round stays
/// inlined inside its target features.
macro_rules! chacha_rounds {
    ($qr:ident, $x:expr) => {
        for _ in 0..10 {
            $qr($x, 0, 4, 8, 12);
            $qr($x, 1, 5, 9, 13);
            $qr($x, 2, 6, 10, 14);
            $qr($x, 3, 7, 11, 15);
            $qr($x, 0, 5, 10, 15);
            $qr($x, 1, 6, 11, 12);
            $qr($x, 2, 7, 8, 13);
            $qr($x, 3, 4, 9, 14);
        }
    };
}

mod block_path;
mod dispatch;
mod field;
mod job;
#[cfg(target_arch = "x86_64")]
mod kernels;
mod lane_path;
mod lanes;
mod longest_first;
pub mod raw;
mod scalar;
mod scheduler;

pub use dispatch::Path;

use crypto::key::KeyCache;
use crypto::{AeadOp, Algorithm, Direction, Engine, KeyMaterial, KeyRegistry, OpStatus};
use dispatch::Kernels;
use job::{Census, Job, Scratch};
use zeroize::Zeroize;

/// The shortest op the scheduler sends through the block path on the AVX-512
/// paths: below it the lanes are faster even when a vector has only four such ops.
/// Measured on an AMD EPYC (Zen 5) with
/// `cargo run --release -p crypto-mb --example crossover`: with four ops per call,
/// the block path is 0.83x the lanes' speed at 256 bytes and 1.25x at 512. (Longer
/// ops take the block path only when they would keep a lane busy after the others
/// drained; see `scheduler::Split`.)
pub const BLOCK_MIN_LEN_16: usize = 512;
/// The same for the 8-lane AVX2 path (`crossover avx2`: 0.86x at 512, 1.15x at 1024).
pub const BLOCK_MIN_LEN_8: usize = 1024;

/// A ChaCha20 key as an initial state row on the heap, which every op on the key
/// points at (the lanes bring the ops' nonces and counters): it stays in place while
/// the cache grows or retires the entry (see `KeyCache::get_or_expand`). Held by a
/// raw pointer, not a `Box`: the cache moves its entries, and a moved `Box` would
/// claim its row uniquely again, against the jobs' pointers into it. Zeroed and
/// freed when the cache drops it.
struct ChachaKey(core::ptr::NonNull<lanes::Row>);

// SAFETY: a `ChachaKey` owns its row alone (made in `expand`, freed in `drop`); the
// jobs' pointers into it are used only during the engine call that made them.
unsafe impl Send for ChachaKey {}

impl ChachaKey {
    fn expand(m: &KeyMaterial) -> Option<ChachaKey> {
        (m.alg == Algorithm::ChaCha20Poly1305).then(|| {
            let row = Box::new(lanes::Row::new(&scalar::key_words(m.bytes())));
            ChachaKey(core::ptr::NonNull::from(Box::leak(row)))
        })
    }

    fn row(&self) -> *const lanes::Row {
        self.0.as_ptr()
    }
}

impl Drop for ChachaKey {
    fn drop(&mut self) {
        // SAFETY: the pointer came from `Box::leak` in `expand` and is dropped once,
        // here; no job uses it after its call.
        let mut row = unsafe { Box::from_raw(self.0.as_ptr()) };
        row.0.zeroize();
    }
}

pub struct MbEngine {
    path: Path,
    kernels: Option<Kernels>,
    split: scheduler::Split,
    keys: KeyCache<ChachaKey>,
    jobs: Vec<Job>,
    scratch: Scratch,
    lists: scheduler::Lists,
}

impl Default for MbEngine {
    fn default() -> Self {
        MbEngine::new()
    }
}

impl MbEngine {
    pub const NAME: &'static str = "mb";

    /// The path `LINERATE_MB_PATH` asks for, else the fastest this CPU runs
    /// (see [`Path::from_env`]).
    pub fn new() -> MbEngine {
        MbEngine::with_path(Path::from_env())
    }

    /// An engine on `path`. Panics if this CPU cannot run it (see
    /// [`Path::available`]); running it anyway would be undefined behaviour.
    pub fn with_path(path: Path) -> MbEngine {
        assert!(path.available(), "this CPU cannot run the {path} path");
        let kernels = Kernels::for_path(path);
        let min_len = match kernels.map(|k| k.lanes) {
            Some(8) => BLOCK_MIN_LEN_8,
            _ => BLOCK_MIN_LEN_16,
        };
        MbEngine {
            path,
            kernels,
            split: scheduler::Split::Adaptive { min_len },
            keys: KeyCache::default(),
            jobs: Vec::new(),
            scratch: Scratch::default(),
            lists: scheduler::Lists::default(),
        }
    }

    /// Replaces the scheduler's choice with a plain size threshold: ops of `bytes`
    /// or more through the block path, the rest through the lanes (`usize::MAX`:
    /// lanes only; 0: block path only). For tests and measurements.
    pub fn with_block_threshold(mut self, bytes: usize) -> MbEngine {
        self.split = scheduler::Split::Threshold(bytes);
        self
    }

    pub fn path(&self) -> Path {
        self.path
    }

    /// The fixed threshold set by [`MbEngine::with_block_threshold`], if any.
    pub fn block_threshold(&self) -> Option<usize> {
        match self.split {
            scheduler::Split::Threshold(t) => Some(t),
            scheduler::Split::Adaptive { .. } => None,
        }
    }
}

impl Engine for MbEngine {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn supports(&self, alg: Algorithm) -> bool {
        alg == Algorithm::ChaCha20Poly1305
    }

    fn process(&mut self, keys: &KeyRegistry, mem: &mut [u8], ops: &mut [AeadOp]) {
        // Jobs name their ops by a 32-bit index (a frame is 256 ops).
        assert!(
            u32::try_from(ops.len()).is_ok(),
            "more than 2^32 ops in one call"
        );
        self.keys.sync(keys);
        // Jobs are written in place, field by field: building one on the stack and
        // moving it in made every push wait on failed store-to-load forwarding.
        if self.jobs.len() < ops.len() {
            self.jobs.resize(ops.len(), Job::EMPTY);
        }
        let mut n = 0;
        // The census (see `Census`), taken as the jobs are made: the first job's
        // shape, whether every later one matched it, and the decryptions.
        let mut first = None;
        let mut census = Census {
            uniform: true,
            decrypts: 0,
        };
        // The last key found, for the next op: a vector's ops are mostly on one key,
        // and two ops in a row with one handle find the same entry (nothing changes
        // the cache between them; what a later miss replaces is kept until the call
        // ends: see `KeyCache::get_or_expand`).
        let mut last_key: Option<(crypto::KeyHandle, *const lanes::Row)> = None;
        for (i, op) in ops.iter_mut().enumerate() {
            if op.status != OpStatus::Pending {
                continue;
            }
            if op.alg != Algorithm::ChaCha20Poly1305 {
                op.status = OpStatus::Unsupported;
                continue;
            }
            if let Err(status) = op.validate(mem.len()) {
                op.status = status;
                continue;
            }
            let row = match last_key {
                Some((h, row)) if h == op.key => row,
                _ => {
                    let Some(key) =
                        self.keys
                            .get_or_expand(keys, op.key, op.alg, ChachaKey::expand)
                    else {
                        op.status = OpStatus::BadKey;
                        continue;
                    };
                    let row = key.row();
                    last_key = Some((op.key, row));
                    row
                }
            };
            if op.src != op.dst {
                mem.copy_within(op.src_span().range(), op.dst as usize);
            }
            let j = &mut self.jobs[n];
            j.row = row;
            j.nonce = scalar::nonce_words(&op.nonce);
            j.op = i as u32;
            j.text = op.dst as usize;
            j.len = op.len as usize;
            j.aad = op.aad.offset as usize;
            j.aad_len = op.aad.len;
            j.tag = op.tag as usize;
            j.decrypt = op.direction == Direction::Decrypt;
            // An encryption that got this far cannot fail: the passes write its
            // tag into the packet and nothing more about it.
            if !j.decrypt {
                op.status = OpStatus::Ok;
            }
            census.decrypts += j.decrypt as usize;
            let shape = j.shape();
            census.uniform &= *first.get_or_insert(shape) == shape;
            n += 1;
        }
        let jobs = &mut self.jobs[..n];
        match &self.kernels {
            None => scheduler::run_scalar(jobs, mem, ops),
            Some(k) => scheduler::run_vector(
                k,
                self.split,
                jobs,
                census,
                &mut self.scratch,
                &mut self.lists,
                mem,
                ops,
            ),
        }
        // One-time keys do not outlive the call in scratch (see `Scratch::wipe`);
        // the jobs hold no key, only where the cache keeps it, and keys a newer one
        // replaced during the call are dropped (and zeroed) now that no job needs them.
        self.scratch.wipe(n);
        self.keys.drop_retired();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ESP's AES-CBC with HMAC is not this engine's: it says so, refuses such ops
    /// with `Unsupported` and leaves their memory alone, and runs the ChaCha20 ops of
    /// the same vector.
    #[test]
    fn chained_ops_are_unsupported() {
        use crypto::op_layout::{OpLayout, OpShape};
        let keys = KeyRegistry::new(8);
        let mut layout = OpLayout::new();
        for (i, alg) in Algorithm::ALL.into_iter().enumerate() {
            let key = keys.insert(alg, &[7; 64][..alg.key_len()]).unwrap();
            layout.push(OpShape {
                alg,
                key,
                nonce: [i as u8; 12],
                aad_len: 8,
                len: 64,
                in_place: true,
            });
        }
        let mut engine = MbEngine::new();
        let OpLayout { mut mem, mut ops } = layout;
        let before = mem.clone();
        engine.process(&keys, &mut mem, &mut ops);
        for o in &ops {
            assert_eq!(engine.supports(o.alg), o.alg == Algorithm::ChaCha20Poly1305);
            let want = match o.alg {
                Algorithm::ChaCha20Poly1305 => OpStatus::Ok,
                _ => OpStatus::Unsupported,
            };
            assert_eq!(o.status, want, "{}", o.alg);
            if o.alg.is_chained() {
                let r = o.aad.offset as usize..o.tag as usize + o.alg.tag_len();
                assert_eq!(mem[r.clone()], before[r], "{}", o.alg);
            }
        }
    }

    #[test]
    fn every_available_path_conforms() {
        let paths = Path::available_paths();
        eprintln!("paths: {paths:?}");
        for path in paths {
            // The default split, all lanes, and all block path.
            for threshold in [None, Some(usize::MAX), Some(0)] {
                let make = || {
                    let e = MbEngine::with_path(path);
                    Box::new(match threshold {
                        Some(t) => e.with_block_threshold(t),
                        None => e,
                    }) as Box<dyn Engine>
                };
                crypto::conformance::run_all(&make)
                    .unwrap_or_else(|e| panic!("{path} threshold {threshold:?}: {e}"));
            }
        }
    }
}
