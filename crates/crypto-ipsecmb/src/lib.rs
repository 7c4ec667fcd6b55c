//! The intel-ipsec-mb engine: ChaCha20-Poly1305 and AES-GCM from Intel's multi-buffer
//! library (libIPSec_MB 1.3), driven through its job API.
//!
//! One `process` call turns the whole op vector into jobs: for each op, take the next
//! job slot of the manager, fill it, submit it and collect whatever jobs the library
//! hands back as finished; at the end, flush until the manager is empty. The library
//! picks its code path (SSE, AVX, AVX2, AVX-512 with VAES) when the engine is made;
//! [`IpsecMbEngine::arch`] says which.
//!
//! How the engine meets the op contract of [`crypto::Engine`]:
//! - Ops are validated before anything is submitted, so the library only ever sees
//!   ranges inside `mem`; out-of-place ops go to the library as they are (it reads
//!   `src` and writes `dst`), with no copy.
//! - Decryption: the library decrypts and computes the tag in one pass and cannot be
//!   told to hold the plaintext back, so it writes the computed tag to per-op scratch
//!   and the engine compares it with the op's tag in constant time; on a mismatch the
//!   output range is zeroed before the status says `BadTag`.
//! - Jobs in flight point at expanded keys in the engine's key cache. Looking up a
//!   key that is not cached may replace a cache entry, so before such a lookup the
//!   engine flushes the manager: no job in flight ever holds a key that is dropped.
//! - Expanded keys (AES-GCM round keys and GHASH powers, the raw ChaCha20 key) are
//!   zeroed when the cache drops them.
//!
//! Ops of one vector must not write memory another op of the same vector reads: the
//! library interleaves jobs, so there is no op order to rely on (the data path never
//! builds such vectors; each op works on its own packet).

mod ffi;

use core::ffi::{CStr, c_int, c_void};
use core::ptr::{self, NonNull};
use crypto::key::KeyCache;
use crypto::{AeadOp, Algorithm, Direction, Engine, KeyMaterial, KeyRegistry, OpStatus, TAG_LEN};
use ffi::{GcmKeyData, GcmPreFn, ImbJob, ImbMgr, JobFn};
use subtle::ConstantTimeEq;
use zeroize::{Zeroize, Zeroizing};

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

    fn supports(&self, alg: Algorithm) -> bool {
        !alg.is_chained()
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
        };
        for i in 0..run.ops.len() {
            let op = run.ops[i];
            if op.status != OpStatus::Pending {
                continue;
            }
            if op.alg.is_chained() {
                run.ops[i].status = OpStatus::Unsupported;
                continue;
            }
            if let Err(status) = op.validate(mem_len) {
                run.ops[i].status = status;
                continue;
            }
            // A cache hit changes nothing in the cache. A miss may replace the entry
            // of the same slot (a newer key generation), so finish every job in flight
            // before letting the cache expand; misses happen once per key and engine.
            let key = match self.keys.get_or_expand(keys, op.key, op.alg, |_| None) {
                Some(k) => k.raw(),
                None => {
                    run.drain();
                    let mgr = run.mgr;
                    match self
                        .keys
                        .get_or_expand(keys, op.key, op.alg, |m| ExpandedKey::new(mgr, m))
                    {
                        Some(k) => k.raw(),
                        None => {
                            run.ops[i].status = OpStatus::BadKey;
                            continue;
                        }
                    }
                }
            };
            run.submit(i, key);
        }
        run.drain();
    }
}

/// The state of one `process` call.
struct Run<'a> {
    mgr: &'a Manager,
    base: *mut u8,
    scratch: *mut Scratch,
    ops: &'a mut [AeadOp],
    in_flight: usize,
}

impl Run<'_> {
    /// Fills the next job for validated op `i` and submits it, then collects every
    /// job the library has finished.
    fn submit(&mut self, i: usize, key: RawKey) {
        let op = self.ops[i];
        let decrypt = op.direction == Direction::Decrypt;
        // SAFETY: `scratch` holds at least `ops.len()` slots (resized in `process`)
        // and `i < ops.len()`; nothing else refers to slot `i` now.
        let slot = unsafe { self.scratch.add(i) };
        // SAFETY: as above; a plain write of 12 bytes into the slot.
        unsafe { (*slot).iv = op.nonce };
        // SAFETY: `validate` checked that src, dst, tag and aad lie inside `mem`, so
        // every offset below stays inside the allocation `base` points into.
        let (src, dst, aad, tag) = unsafe {
            (
                self.base.add(op.src as usize),
                self.base.add(op.dst as usize),
                self.base.add(op.aad.offset as usize),
                self.base.add(op.tag as usize),
            )
        };
        // Decryption computes the tag into scratch: the op's tag is the one to check.
        let tag_out = if decrypt {
            // SAFETY: `slot` is valid (see above); this only takes a field's address.
            unsafe { ptr::addr_of_mut!((*slot).computed_tag).cast::<u8>() }
        } else {
            tag
        };
        let (cipher_mode, hash_alg) = match op.alg {
            Algorithm::ChaCha20Poly1305 => (
                ffi::IMB_CIPHER_CHACHA20_POLY1305,
                ffi::IMB_AUTH_CHACHA20_POLY1305,
            ),
            _ => (ffi::IMB_CIPHER_GCM, ffi::IMB_AUTH_AES_GMAC),
        };
        let (cipher_direction, chain_order) = if decrypt {
            (ffi::IMB_DIR_DECRYPT, ffi::IMB_ORDER_HASH_CIPHER)
        } else {
            (ffi::IMB_DIR_ENCRYPT, ffi::IMB_ORDER_CIPHER_HASH)
        };
        let len = u64::from(op.len);
        // Every field is written, not just the ones this op needs: job slots are
        // reused, and a leftover SGL context or offset from an earlier job in the
        // same slot would change what the library does.
        let fields = ImbJob {
            enc_keys: key.ptr,
            dec_keys: key.ptr,
            key_len_in_bytes: key.len,
            src: src.cast_const(),
            dst,
            cipher_start_src_offset_in_bytes: 0,
            msg_len_to_cipher_in_bytes: len,
            hash_start_src_offset_in_bytes: 0,
            msg_len_to_hash_in_bytes: len,
            // SAFETY: `slot` is valid (see above); this only takes a field's address.
            iv: unsafe { ptr::addr_of!((*slot).iv).cast::<u8>() },
            iv_len_in_bytes: 12,
            auth_tag_output: tag_out,
            auth_tag_output_len_in_bytes: TAG_LEN as u64,
            u: ffi::AeadFields {
                aad: aad.cast_const().cast::<c_void>(),
                aad_len_in_bytes: u64::from(op.aad.len),
                ctx: ptr::null_mut(),
            },
            status: 0,
            cipher_mode,
            cipher_direction,
            hash_alg,
            chain_order,
            user_data: ptr::without_provenance_mut(i),
            user_data2: ptr::null_mut(),
            cipher_func: None,
            hash_func: None,
            sgl_state: 0,
            next_iv: ptr::null_mut(),
        };
        // SAFETY: the manager was initialised in `Manager::new`; `get_next_job`
        // returns a pointer to a free slot of its job ring, valid and writable until
        // the job is submitted. Every pointer in `fields` stays valid until the job
        // comes back: `mem` and `scratch` are not touched except through `base` and
        // `scratch` during this call, and the key lives in the cache, which is not
        // changed while jobs are in flight (see `process`).
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

    /// Sets the status of the op a finished job came from.
    fn complete(&mut self, job: *mut ImbJob) {
        // SAFETY: `job` was just returned by the library as finished: it points into
        // the manager's job ring and stays readable until the next `get_next_job`.
        let (i, status) = unsafe { ((*job).user_data.addr(), (*job).status) };
        self.in_flight = self.in_flight.saturating_sub(1);
        let Some(op) = self.ops.get(i).copied() else {
            return;
        };
        let decrypt = op.direction == Direction::Decrypt;
        let result = if status != ffi::IMB_STATUS_COMPLETED {
            // The op passed `validate`, so the library refused something it has a
            // limit for and the API has no status for: report the op's ranges as
            // unusable rather than pretend it ran.
            OpStatus::BadRange
        } else if !decrypt {
            OpStatus::Ok
        } else {
            // SAFETY: slot `i` holds the tag the library computed for this job (it is
            // finished); the op's tag is 16 bytes inside `mem` (validated), and no
            // job in flight writes to either.
            let matches: bool = unsafe {
                let computed = &(*self.scratch.add(i)).computed_tag;
                let given = core::slice::from_raw_parts(self.base.add(op.tag as usize), TAG_LEN);
                computed.ct_eq(given).into()
            };
            if matches {
                OpStatus::Ok
            } else {
                OpStatus::BadTag
            }
        };
        if decrypt && result != OpStatus::Ok {
            // SAFETY: dst..dst+len lies inside `mem` (validated) and the job writing
            // it is finished; no Rust reference to `mem` exists during the call.
            unsafe { ptr::write_bytes(self.base.add(op.dst as usize), 0, op.len as usize) };
        }
        self.ops[i].status = result;
    }
}

/// A key as a job takes it.
#[derive(Clone, Copy)]
struct RawKey {
    ptr: *const c_void,
    len: u64,
}

/// A key in the form the library reads: AES-GCM keys expanded once (round keys and
/// GHASH key powers), ChaCha20-Poly1305 keys as they are. Boxed so that the cache can
/// grow without moving keys that jobs in flight point at.
enum ExpandedKey {
    ChaCha(Box<Zeroizing<[u8; 32]>>),
    Gcm { data: Box<GcmKeyData>, len: u64 },
}

impl ExpandedKey {
    fn new(mgr: &Manager, m: &KeyMaterial) -> Option<ExpandedKey> {
        let pre = match m.alg {
            Algorithm::ChaCha20Poly1305 => {
                let key: [u8; 32] = m.bytes().try_into().ok()?;
                return Some(ExpandedKey::ChaCha(Box::new(Zeroizing::new(key))));
            }
            Algorithm::Aes128Gcm => mgr.gcm128_pre,
            Algorithm::Aes256Gcm => mgr.gcm256_pre,
            _ => return None,
        };
        let mut data = Box::new(GcmKeyData { bytes: [0; 1024] });
        // SAFETY: `pre` is the manager's `gcmNNN_pre` for this key size; it reads
        // `key_len` bytes of key (the registry checked the length) and writes the
        // 64-byte-aligned `gcm_key_data` it is given.
        unsafe { pre(m.bytes().as_ptr().cast(), &mut *data) };
        Some(ExpandedKey::Gcm {
            data,
            len: m.bytes().len() as u64,
        })
    }

    fn raw(&self) -> RawKey {
        match self {
            ExpandedKey::ChaCha(key) => RawKey {
                ptr: key.as_ptr().cast(),
                len: 32,
            },
            ExpandedKey::Gcm { data, len } => RawKey {
                ptr: ptr::from_ref::<GcmKeyData>(data).cast(),
                len: *len,
            },
        }
    }
}

impl Drop for GcmKeyData {
    fn drop(&mut self) {
        self.bytes.zeroize();
    }
}

/// An initialised `IMB_MGR` and the function pointers the engine calls through,
/// read once after initialisation.
struct Manager {
    owned: OwnedMgr,
    get_next_job: JobFn,
    submit_job: JobFn,
    get_completed_job: JobFn,
    flush_job: JobFn,
    gcm128_pre: GcmPreFn,
    gcm256_pre: GcmPreFn,
    arch: &'static str,
    features: u64,
}

impl Manager {
    fn new() -> Result<Manager, String> {
        // SAFETY: takes no arguments and returns a number.
        let version = unsafe { ffi::imb_get_version() };
        if version >> 8 != ffi::IMB_VERSION_1_3 >> 8 {
            return Err(format!(
                "libIPSec_MB {} is loaded, but this engine's bindings describe the 1.3 ABI",
                library_version()
            ));
        }
        // SAFETY: takes no arguments and returns a bit mask.
        let cpu = unsafe { ffi::imb_get_feature_flags() };
        let needed = ffi::IMB_FEATURE_AESNI | ffi::IMB_FEATURE_PCLMULQDQ;
        if cpu & needed != needed {
            return Err(
                "the CPU lacks AES-NI or PCLMULQDQ: intel-ipsec-mb would emulate AES in software"
                    .to_string(),
            );
        }
        // SAFETY: `alloc_mb_mgr` allocates and returns a manager, or null.
        let ptr = NonNull::new(unsafe { ffi::alloc_mb_mgr(0) })
            .ok_or("intel-ipsec-mb could not allocate a manager")?;
        // From here on the manager is freed on every return, error or not.
        let owned = OwnedMgr(ptr);
        let mut arch: c_int = ffi::IMB_ARCH_NONE;
        // SAFETY: `ptr` is a manager fresh from `alloc_mb_mgr`; `arch` is a valid
        // place for the library to write the chosen architecture.
        let errno = unsafe {
            ffi::init_mb_mgr_auto(ptr.as_ptr(), &mut arch);
            ffi::imb_get_errno(ptr.as_ptr())
        };
        if errno != 0 {
            return Err(format!(
                "intel-ipsec-mb could not initialise a manager: {}",
                error_string(errno)
            ));
        }
        let arch = match arch {
            ffi::IMB_ARCH_AVX512 => "avx512",
            ffi::IMB_ARCH_AVX2 => "avx2",
            ffi::IMB_ARCH_AVX => "avx",
            ffi::IMB_ARCH_SSE => "sse",
            other => {
                return Err(format!(
                    "intel-ipsec-mb chose no usable code path (IMB_ARCH {other})"
                ));
            }
        };
        // SAFETY: the manager is initialised; these are plain reads of the pointers
        // and flags `init_mb_mgr_auto` set, in the leading fields `ImbMgr` declares.
        let m = unsafe { ptr.as_ref() };
        let missing = |what: &str| format!("intel-ipsec-mb set no {what} function");
        Ok(Manager {
            get_next_job: m.get_next_job.ok_or_else(|| missing("get_next_job"))?,
            submit_job: m.submit_job.ok_or_else(|| missing("submit_job"))?,
            get_completed_job: m
                .get_completed_job
                .ok_or_else(|| missing("get_completed_job"))?,
            flush_job: m.flush_job.ok_or_else(|| missing("flush_job"))?,
            gcm128_pre: m.gcm128_pre.ok_or_else(|| missing("gcm128_pre"))?,
            gcm256_pre: m.gcm256_pre.ok_or_else(|| missing("gcm256_pre"))?,
            features: m.features,
            arch,
            owned,
        })
    }

    fn raw(&self) -> *mut ImbMgr {
        self.owned.0.as_ptr()
    }
}

/// A manager from `alloc_mb_mgr`, freed on drop.
struct OwnedMgr(NonNull<ImbMgr>);

// SAFETY: the manager is memory this engine allocated and alone uses, always through
// `&mut IpsecMbEngine` (one thread at a time); the library keeps no per-thread state
// for it, so it may move to another thread between calls.
unsafe impl Send for OwnedMgr {}

impl Drop for OwnedMgr {
    fn drop(&mut self) {
        // SAFETY: the pointer came from `alloc_mb_mgr` and is freed only here, once.
        // `process` always flushes before returning, so no job in the manager
        // refers to caller memory any more.
        unsafe { ffi::free_mb_mgr(self.0.as_ptr()) };
    }
}

/// The loaded library's version string, e.g. "1.3.0".
pub fn library_version() -> String {
    // SAFETY: returns a pointer to a static NUL-terminated string (or null).
    let s = unsafe { ffi::imb_get_version_str() };
    if s.is_null() {
        return "unknown".to_string();
    }
    // SAFETY: non-null, static and NUL-terminated (see above).
    unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
}

fn error_string(errno: c_int) -> String {
    // SAFETY: returns a pointer to a static NUL-terminated description (or null).
    let s = unsafe { ffi::imb_get_strerror(errno) };
    if s.is_null() {
        return format!("error {errno}");
    }
    // SAFETY: non-null, static and NUL-terminated (see above).
    unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
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
