//! The intel-ipsec-mb engine: ChaCha20-Poly1305, AES-GCM, and AES-CBC with HMAC-SHA1
//! or HMAC-SHA-256 (ESP's chained ops) from Intel's multi-buffer library
//! (libIPSec_MB 1.3), driven through its job API.
//!
//! One `process` call turns the whole op vector into jobs: for each op, take the next
//! job slot of the manager, fill it, submit it and collect whatever jobs the library
//! hands back as finished; at the end, flush until the manager is empty. The library
//! picks its code path (SSE, AVX, AVX2, AVX-512 with VAES) when the engine is made;
//! [`IpsecMbEngine::arch`] says which. Many jobs are in flight at once: that is where
//! the library is strongest (AES-CBC encryption and HMAC run one packet per SIMD lane).
//!
//! How the engine meets the op contract of [`crypto::Engine`]:
//! - Ops are validated before anything is submitted, so the library only ever sees
//!   ranges inside `mem`; out-of-place ops go to the library as they are (it reads
//!   `src` and writes `dst`), with no copy.
//! - AEAD decryption: the library decrypts and computes the tag in one pass and
//!   cannot be told to hold the plaintext back, so it writes the computed tag to
//!   per-op scratch and the engine compares it with the op's tag in constant time; on
//!   a mismatch the output range is zeroed before the status says `BadTag`.
//! - Chained encryption is one job, `IMB_CIPHER_CBC` then `IMB_AUTH_HMAC_SHA_1` or
//!   `_256` (`IMB_ORDER_CIPHER_HASH`), the tag written straight to the op's tag.
//!   A chained job's `src` is the start of `mem`: the cipher starts at the op's `src`
//!   and the HMAC at its MAC span, each by its own offset into the same buffer.
//! - Chained decryption must leave the output untouched on a bad tag, which one
//!   `IMB_ORDER_HASH_CIPHER` job cannot do (it deciphers whether or not the HMAC
//!   matches; the library has no HMAC verification of its own). So it is two jobs:
//!   the HMAC alone (`IMB_CIPHER_NULL`), its tag into scratch and compared in
//!   constant time once every job of the vector is back; then, for the ops whose tag
//!   matched, the CBC decryption alone (`IMB_AUTH_NULL`), a second round of jobs.
//! - The library refuses CBC encryptions and HMACs of more than 65534 bytes
//!   (`MB_MAX_LEN16` in its job checks): such chained ops come back `BadRange`.
//! - Jobs in flight point at expanded keys in the engine's key cache. Looking up a
//!   key that is not cached may replace a cache entry, so before such a lookup the
//!   engine flushes the manager: no job in flight ever holds a key that is dropped.
//! - Expanded keys (AES-GCM round keys and GHASH powers, the raw ChaCha20 key, AES
//!   round keys and HMAC states) are zeroed when the cache drops them.
//!
//! Ops of one vector must not write memory another op of the same vector reads: the
//! library interleaves jobs, so there is no op order to rely on (the data path never
//! builds such vectors; each op works on its own packet).

mod ffi;
mod job;
mod key;
mod manager;

pub use manager::library_version;

use core::ptr;
use crypto::key::KeyCache;
use crypto::{AeadOp, Algorithm, Direction, Engine, KeyRegistry, OpStatus, TAG_LEN};
use ffi::ImbJob;
use key::{ExpandedKey, RawKey};
use manager::Manager;
use subtle::ConstantTimeEq;

/// The engine of one worker: a multi-buffer manager of its own, a cache of expanded
/// keys, and scratch space for nonces and computed tags.
pub struct IpsecMbEngine {
    mgr: Manager,
    keys: KeyCache<ExpandedKey>,
    /// One slot per op of the largest vector seen so far; reused across calls.
    scratch: Vec<Scratch>,
}

/// What a job needs to outlive the op it came from: the library may read the IV and
/// write the computed tag after `submit_job` returns, so they live here rather than
/// in the caller's op (which the engine updates while jobs are in flight).
#[derive(Clone, Copy, Default)]
struct Scratch {
    iv: [u8; 12],
    computed_tag: [u8; TAG_LEN],
    /// A chained decryption whose tag matched: its deciphering job is still to run.
    verified: bool,
}

/// Which job of its op a job is (kept in the job's `user_data2`): most ops are one
/// job, a chained decryption is two.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// An AEAD op either way, or a chained encryption (cipher then HMAC).
    Whole,
    /// A chained decryption's HMAC alone, into scratch, to be compared.
    Verify,
    /// A chained decryption's CBC alone, after its tag matched.
    Decipher,
}

impl Stage {
    const ALL: [Stage; 3] = [Stage::Whole, Stage::Verify, Stage::Decipher];
}

impl IpsecMbEngine {
    pub const NAME: &'static str = "ipsecmb";

    /// Allocates and initialises a manager with the best code path the library finds
    /// for this CPU. Fails with the reason when the loaded library is not the 1.3
    /// release these bindings describe, when the CPU lacks AES-NI and carry-less
    /// multiply (the library would emulate AES in software), or when the library
    /// cannot set a manager up.
    pub fn new() -> Result<IpsecMbEngine, String> {
        Ok(IpsecMbEngine {
            mgr: Manager::new()?,
            keys: KeyCache::default(),
            scratch: Vec::new(),
        })
    }

    /// The code path the library chose: "avx512", "avx2", "avx" or "sse".
    pub fn arch(&self) -> &'static str {
        self.mgr.arch
    }

    /// One line for `show crypto` and benchmark output, e.g.
    /// "intel-ipsec-mb 1.3.0, avx512 (vaes, vpclmulqdq, ifma)".
    pub fn describe(&self) -> String {
        let extras: Vec<&str> = [
            (ffi::IMB_FEATURE_VAES, "vaes"),
            (ffi::IMB_FEATURE_VPCLMULQDQ, "vpclmulqdq"),
            (ffi::IMB_FEATURE_AVX512_IFMA, "ifma"),
        ]
        .into_iter()
        .filter(|(bit, _)| self.mgr.features & bit != 0)
        .map(|(_, name)| name)
        .collect();
        let mut line = format!("intel-ipsec-mb {}, {}", library_version(), self.arch());
        if !extras.is_empty() {
            line += &format!(" ({})", extras.join(", "));
        }
        line
    }
}

impl Engine for IpsecMbEngine {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn supports(&self, _alg: Algorithm) -> bool {
        true
    }

    fn process(&mut self, keys: &KeyRegistry, mem: &mut [u8], ops: &mut [AeadOp]) {
        self.keys.sync(keys);
        if self.scratch.len() < ops.len() {
            self.scratch.resize(ops.len(), Scratch::default());
        }
        let mem_len = mem.len();
        // From here on `mem` and `scratch` are only touched through these pointers:
        // the library holds pointers into both between calls, so no Rust reference to
        // either may be made (and invalidate them) while jobs are in flight.
        let mut run = Run {
            mgr: &self.mgr,
            base: mem.as_mut_ptr(),
            scratch: self.scratch.as_mut_ptr(),
            ops,
            in_flight: 0,
            verified: 0,
        };
        for i in 0..run.ops.len() {
            let op = run.ops[i];
            if op.status != OpStatus::Pending {
                continue;
            }
            if let Err(status) = op.validate(mem_len) {
                run.ops[i].status = status;
                continue;
            }
            let Some(key) = lookup(&mut self.keys, keys, &mut run, &op) else {
                run.ops[i].status = OpStatus::BadKey;
                continue;
            };
            let stage = if op.alg.is_chained() && op.direction == Direction::Decrypt {
                Stage::Verify
            } else {
                Stage::Whole
            };
            run.submit(i, key, stage);
        }
        run.drain();
        if run.verified == 0 {
            return;
        }
        // Every tag is checked: decipher the chained ops whose tag matched.
        for i in 0..run.ops.len() {
            if !run.take_verified(i) {
                continue;
            }
            let op = run.ops[i];
            match lookup(&mut self.keys, keys, &mut run, &op) {
                Some(key) => run.submit(i, key, Stage::Decipher),
                None => run.ops[i].status = OpStatus::BadKey,
            }
        }
        run.drain();
    }
}

/// The expanded key for `op`, expanding it on first use. A cache hit changes nothing
/// in the cache. A miss may replace the entry of the same slot (a newer key
/// generation), so every job in flight is finished before the cache may expand;
/// misses happen once per key and engine.
fn lookup(
    cache: &mut KeyCache<ExpandedKey>,
    keys: &KeyRegistry,
    run: &mut Run,
    op: &AeadOp,
) -> Option<RawKey> {
    if let Some(k) = cache.get_or_expand(keys, op.key, op.alg, |_| None) {
        return Some(k.raw());
    }
    run.drain();
    let mgr = run.mgr;
    cache
        .get_or_expand(keys, op.key, op.alg, |m| ExpandedKey::new(mgr, m))
        .map(ExpandedKey::raw)
}

/// The state of one `process` call.
struct Run<'a> {
    mgr: &'a Manager,
    base: *mut u8,
    scratch: *mut Scratch,
    ops: &'a mut [AeadOp],
    in_flight: usize,
    /// Chained decryptions whose tag matched and that wait for their second job.
    verified: usize,
}

impl Run<'_> {
    /// Fills the next job for stage `stage` of validated op `i` and submits it, then
    /// collects every job the library has finished.
    fn submit(&mut self, i: usize, key: RawKey, stage: Stage) {
        let op = self.ops[i];
        // SAFETY: `scratch` holds at least `ops.len()` slots (resized in `process`)
        // and `i < ops.len()`; nothing else refers to slot `i` now (its earlier job,
        // if any, is finished: stages run in separate rounds).
        let slot = unsafe { self.scratch.add(i) };
        // SAFETY: as above; plain writes into the slot.
        unsafe {
            (*slot).iv = op.nonce;
            (*slot).verified = false;
        }
        let fields = if op.alg.is_chained() {
            job::chained(self.base, &op, i, slot, key, stage)
        } else {
            job::aead(self.base, &op, i, slot, key)
        };
        // SAFETY: the manager was initialised in `Manager::new`; `get_next_job`
        // returns a pointer to a free slot of its job ring, valid and writable until
        // the job is submitted. Every pointer in `fields` stays valid until the job
        // comes back: `mem` and `scratch` are not touched except through `base` and
        // `scratch` during this call, and the key lives in the cache, which is not
        // changed while jobs are in flight (see `lookup`).
        let mut done = unsafe {
            let job = (self.mgr.get_next_job)(self.mgr.raw());
            job.write(fields);
            (self.mgr.submit_job)(self.mgr.raw())
        };
        self.in_flight += 1;
        while !done.is_null() {
            self.complete(done);
            // SAFETY: the manager is initialised; the call returns a finished job of
            // this manager or null.
            done = unsafe { (self.mgr.get_completed_job)(self.mgr.raw()) };
        }
    }

    /// Flushes the manager until no job is left in it.
    fn drain(&mut self) {
        while self.in_flight > 0 {
            // SAFETY: the manager is initialised; `flush_job` finishes the oldest job
            // in flight and returns it, or null when there is none.
            let job = unsafe { (self.mgr.flush_job)(self.mgr.raw()) };
            if job.is_null() {
                break;
            }
            self.complete(job);
        }
        self.in_flight = 0;
    }

    /// Whether op `i` is a chained decryption whose tag matched and whose deciphering
    /// job has not been submitted yet; clears the mark. Only once no job is in flight.
    fn take_verified(&mut self, i: usize) -> bool {
        // SAFETY: `i < ops.len()` slots exist (see `submit`), and no job in flight
        // refers to them (the caller drained the manager).
        unsafe { core::mem::take(&mut (*self.scratch.add(i)).verified) }
    }

    /// Sets the status of the op a finished job came from, or, for a chained
    /// decryption's matching tag, marks it for its second job.
    fn complete(&mut self, job: *mut ImbJob) {
        // SAFETY: `job` was just returned by the library as finished: it points into
        // the manager's job ring and stays readable until the next `get_next_job`.
        let (i, stage, status) = unsafe {
            (
                (*job).user_data.addr(),
                (*job).user_data2.addr(),
                (*job).status,
            )
        };
        self.in_flight = self.in_flight.saturating_sub(1);
        let (Some(op), Some(&stage)) = (self.ops.get(i).copied(), Stage::ALL.get(stage)) else {
            return;
        };
        let check_tag = op.direction == Direction::Decrypt && stage != Stage::Decipher;
        let result = if status != ffi::IMB_STATUS_COMPLETED {
            // The op passed `validate`, so the library refused something it has a
            // limit for and the API has no status for: report the op's ranges as
            // unusable rather than pretend it ran.
            OpStatus::BadRange
        } else if !check_tag {
            OpStatus::Ok
        } else {
            let tag_len = op.alg.tag_len();
            // SAFETY: slot `i` holds the tag the library computed for this job (it is
            // finished); the op's tag is `tag_len` bytes inside `mem` (validated), and
            // no job in flight writes to either.
            let matches: bool = unsafe {
                let computed: &[u8; TAG_LEN] = &(*self.scratch.add(i)).computed_tag;
                let computed = &computed[..tag_len];
                let given = core::slice::from_raw_parts(self.base.add(op.tag as usize), tag_len);
                computed.ct_eq(given).into()
            };
            match (matches, stage) {
                (true, Stage::Verify) => {
                    // SAFETY: as above; a plain write into slot `i`.
                    unsafe { (*self.scratch.add(i)).verified = true };
                    self.verified += 1;
                    return;
                }
                (true, _) => OpStatus::Ok,
                (false, _) => OpStatus::BadTag,
            }
        };
        if op.direction == Direction::Decrypt && !op.alg.is_chained() && result != OpStatus::Ok {
            // SAFETY: dst..dst+len lies inside `mem` (validated) and the job writing
            // it is finished; no Rust reference to `mem` exists during the call.
            unsafe { ptr::write_bytes(self.base.add(op.dst as usize), 0, op.len as usize) };
        }
        self.ops[i].status = result;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_conforms() {
        crypto::conformance::run_all(&|| Box::new(IpsecMbEngine::new().unwrap())).unwrap();
    }

    #[test]
    fn reports_its_code_path() {
        let e = IpsecMbEngine::new().unwrap();
        assert!(["avx512", "avx2", "avx", "sse"].contains(&e.arch()));
        assert!(e.describe().starts_with("intel-ipsec-mb 1.3"));
    }
}
