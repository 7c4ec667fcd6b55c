//! The library's manager: allocated, initialised with the best code path for this
//! CPU, its function pointers read once, and freed on drop.

use crate::ffi::{self, GcmPreFn, ImbMgr, JobFn, KeyExpFn, OneBlockFn};
use core::ffi::{CStr, c_int};
use core::ptr::NonNull;

/// An initialised `IMB_MGR` and the function pointers the engine calls through,
/// read once after initialisation.
pub(crate) struct Manager {
    owned: OwnedMgr,
    pub get_next_job: JobFn,
    pub submit_job: JobFn,
    pub get_completed_job: JobFn,
    pub flush_job: JobFn,
    pub gcm128_pre: GcmPreFn,
    pub gcm256_pre: GcmPreFn,
    pub keyexp_128: KeyExpFn,
    pub keyexp_256: KeyExpFn,
    pub sha1_one_block: OneBlockFn,
    pub sha256_one_block: OneBlockFn,
    pub arch: &'static str,
    pub features: u64,
}

impl Manager {
    pub fn new() -> Result<Manager, String> {
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
            keyexp_128: m.keyexp_128.ok_or_else(|| missing("keyexp_128"))?,
            keyexp_256: m.keyexp_256.ok_or_else(|| missing("keyexp_256"))?,
            sha1_one_block: m.sha1_one_block.ok_or_else(|| missing("sha1_one_block"))?,
            sha256_one_block: m
                .sha256_one_block
                .ok_or_else(|| missing("sha256_one_block"))?,
            features: m.features,
            arch,
            owned,
        })
    }

    pub fn raw(&self) -> *mut ImbMgr {
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
