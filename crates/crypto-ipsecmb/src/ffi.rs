//! Hand-written bindings to the part of intel-ipsec-mb 1.3 (`intel-ipsec-mb.h`) this
//! engine uses: the manager's allocation and set-up, its job-API function pointers,
//! the AES-GCM and AES-CBC key expansion and one-block SHA pointers (for HMAC's
//! precomputed pads), and the job structure.
//!
//! Written by hand rather than generated because the engine needs a dozen names out
//! of a 4000-line header, and because the manager is only ever allocated by the
//! library: [`ImbMgr`] declares the leading fields of `IMB_MGR` up to the last one
//! used, and the rest of the structure stays opaque behind the pointer. The layouts
//! are checked against the installed header by the `layout_matches_header` test,
//! which compiles a small C program that prints `offsetof` and `sizeof` values.
//!
//! Everything here follows the 1.3 ABI; [`crate::IpsecMbEngine::new`] refuses any
//! other library version, since the job structure changed after 1.3.

use core::ffi::{c_char, c_int, c_uint, c_void};

/// `IMB_VERSION(1, 3, 0)`: the release these bindings describe.
pub const IMB_VERSION_1_3: c_uint = (1 << 16) | (3 << 8);

// IMB_ARCH
pub const IMB_ARCH_NONE: c_int = 0;
pub const IMB_ARCH_SSE: c_int = 2;
pub const IMB_ARCH_AVX: c_int = 3;
pub const IMB_ARCH_AVX2: c_int = 4;
pub const IMB_ARCH_AVX512: c_int = 5;

// IMB_STATUS
pub const IMB_STATUS_COMPLETED: c_int = 3;

// IMB_CIPHER_MODE
pub const IMB_CIPHER_CBC: c_int = 1;
pub const IMB_CIPHER_NULL: c_int = 3;
pub const IMB_CIPHER_GCM: c_int = 5;
pub const IMB_CIPHER_CHACHA20_POLY1305: c_int = 19;

// IMB_CIPHER_DIRECTION
pub const IMB_DIR_ENCRYPT: c_int = 1;
pub const IMB_DIR_DECRYPT: c_int = 2;

// IMB_HASH_ALG
pub const IMB_AUTH_HMAC_SHA_1: c_int = 1;
pub const IMB_AUTH_HMAC_SHA_256: c_int = 3;
pub const IMB_AUTH_NULL: c_int = 8;
pub const IMB_AUTH_AES_GMAC: c_int = 9;
pub const IMB_AUTH_CHACHA20_POLY1305: c_int = 29;

// IMB_CHAIN_ORDER
pub const IMB_ORDER_CIPHER_HASH: c_int = 1;
pub const IMB_ORDER_HASH_CIPHER: c_int = 2;

// Feature bits of `IMB_MGR::features` / `imb_get_feature_flags()`.
pub const IMB_FEATURE_AESNI: u64 = 1 << 1;
pub const IMB_FEATURE_PCLMULQDQ: u64 = 1 << 2;
pub const IMB_FEATURE_VAES: u64 = 1 << 12;
pub const IMB_FEATURE_VPCLMULQDQ: u64 = 1 << 13;
pub const IMB_FEATURE_AVX512_IFMA: u64 = 1 << 17;

/// `IMB_SHA1_BLOCK_SIZE` and `IMB_SHA_256_BLOCK_SIZE`: HMAC's pads are one block.
pub const IMB_SHA_BLOCK_SIZE: usize = 64;
/// `IMB_SHA256_DIGEST_SIZE_IN_BYTES`: what `sha256_one_block` writes, and room for
/// what `sha1_one_block` writes (`IMB_SHA1_DIGEST_SIZE_IN_BYTES`, 20).
pub const IMB_SHA256_DIGEST_SIZE_IN_BYTES: usize = 32;

/// The job's hash-specific union `u`, with the members the engine uses.
#[repr(C)]
#[derive(Clone, Copy)]
pub union HashFields {
    pub aead: AeadFields,
    pub hmac: HmacFields,
}

/// `u.HMAC`: the hash states after one block of the key XORed with ipad and with
/// opad (RFC 2104), which the engine computes once per key.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct HmacFields {
    pub hashed_auth_key_xor_ipad: *const u8,
    pub hashed_auth_key_xor_opad: *const u8,
    /// Not part of `u.HMAC`: the rest of the union, written as null so that every
    /// byte of a reused job slot is written.
    pub rest: *const c_void,
}

/// The fields the AES-GCM (`u.GCM`) and ChaCha20-Poly1305 (`u.CHACHA20_POLY1305`)
/// members of the job's hash-specific union share: both are `aad`, `aad_len_in_bytes`
/// and a context pointer that only the SGL (scatter-gather) modes read. At 24 bytes
/// this is also the size of the whole union.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct AeadFields {
    pub aad: *const c_void,
    pub aad_len_in_bytes: u64,
    /// `struct gcm_context_data *` or `struct chacha20_poly1305_context_data *`;
    /// null outside the SGL modes.
    pub ctx: *mut c_void,
}

/// `IMB_JOB`. Unions the engine does not use are given as their only (or widest)
/// member of the right size; the layout test checks every offset.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ImbJob {
    pub enc_keys: *const c_void,
    pub dec_keys: *const c_void,
    pub key_len_in_bytes: u64,
    pub src: *const u8,
    pub dst: *mut u8,
    pub cipher_start_src_offset_in_bytes: u64,
    pub msg_len_to_cipher_in_bytes: u64,
    pub hash_start_src_offset_in_bytes: u64,
    pub msg_len_to_hash_in_bytes: u64,
    pub iv: *const u8,
    pub iv_len_in_bytes: u64,
    pub auth_tag_output: *mut u8,
    pub auth_tag_output_len_in_bytes: u64,
    pub u: HashFields,
    pub status: c_int,
    pub cipher_mode: c_int,
    pub cipher_direction: c_int,
    pub hash_alg: c_int,
    pub chain_order: c_int,
    pub user_data: *mut c_void,
    pub user_data2: *mut c_void,
    pub cipher_func: Option<unsafe extern "C" fn(*mut ImbJob) -> c_int>,
    pub hash_func: Option<unsafe extern "C" fn(*mut ImbJob) -> c_int>,
    pub sgl_state: c_int,
    /// `cipher_fields.CBCS.next_iv`, the union's only member.
    pub next_iv: *mut c_void,
}

pub type JobFn = unsafe extern "C" fn(*mut ImbMgr) -> *mut ImbJob;
pub type GcmPreFn = unsafe extern "C" fn(key: *const c_void, key_data: *mut GcmKeyData);
/// `keyexp_t`: an AES key into its encryption and decryption round keys.
pub type KeyExpFn =
    unsafe extern "C" fn(key: *const c_void, enc_exp_keys: *mut c_void, dec_exp_keys: *mut c_void);
/// `hash_one_block_t`: one block through the hash's compression function from its
/// initial state, the state written out as the digest.
pub type OneBlockFn = unsafe extern "C" fn(data: *const c_void, digest: *mut c_void);

/// The leading fields of `IMB_MGR`, through the last function pointer the engine
/// calls. Only ever used behind a pointer from `alloc_mb_mgr`: the real structure is
/// much larger (the job ring and the out-of-order schedulers follow), and the
/// header promises that new pointers are only ever added after these.
#[repr(C)]
pub struct ImbMgr {
    pub flags: u64,
    pub features: u64,
    pub reserved: [u64; 5],
    pub used_arch: u32,
    pub imb_errno: c_int,
    pub get_next_job: Option<JobFn>,
    pub submit_job: Option<JobFn>,
    pub submit_job_nocheck: Option<JobFn>,
    pub get_completed_job: Option<JobFn>,
    pub flush_job: Option<JobFn>,
    pub queue_size: *const c_void,
    pub keyexp_128: Option<KeyExpFn>,
    pub keyexp_192: *const c_void,
    pub keyexp_256: Option<KeyExpFn>,
    /// `cmac_subkey_gen_128`, `xcbc_keyexp`, `des_key_sched`.
    pub unused_1: [*const c_void; 3],
    pub sha1_one_block: Option<OneBlockFn>,
    pub sha224_one_block: *const c_void,
    pub sha256_one_block: Option<OneBlockFn>,
    /// `sha384_one_block` through `gcm256_precomp`: 33 function pointers not used here.
    pub unused_2: [*const c_void; 33],
    pub gcm128_pre: Option<GcmPreFn>,
    pub gcm192_pre: Option<GcmPreFn>,
    pub gcm256_pre: Option<GcmPreFn>,
}

/// `struct gcm_key_data`: the AES round keys and the GHASH key powers, written by
/// `gcmNNN_pre`. The library builds it as 1008 bytes aligned to 64 (1024 in all); the
/// VAES code loads it with aligned vector moves, so the alignment is not optional.
#[repr(C, align(64))]
pub struct GcmKeyData {
    pub bytes: [u8; 1024],
}

#[link(name = "IPSec_MB")]
unsafe extern "C" {
    pub fn imb_get_version() -> c_uint;
    pub fn imb_get_version_str() -> *const c_char;
    pub fn imb_get_feature_flags() -> u64;
    pub fn alloc_mb_mgr(flags: u64) -> *mut ImbMgr;
    pub fn free_mb_mgr(mgr: *mut ImbMgr);
    pub fn init_mb_mgr_auto(mgr: *mut ImbMgr, arch: *mut c_int);
    pub fn imb_get_errno(mgr: *mut ImbMgr) -> c_int;
    pub fn imb_get_strerror(errnum: c_int) -> *const c_char;
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{offset_of, size_of};
    use std::collections::HashMap;
    use std::process::Command;

    /// Every offset and size the bindings rely on, as the C compiler sees them in the
    /// installed header, next to what Rust computes for the declarations above.
    #[test]
    fn layout_matches_header() {
        let u = offset_of!(ImbJob, u);
        let ours: Vec<(&str, usize)> = vec![
            ("sizeof(IMB_JOB)", size_of::<ImbJob>()),
            ("job.enc_keys", offset_of!(ImbJob, enc_keys)),
            ("job.dec_keys", offset_of!(ImbJob, dec_keys)),
            ("job.key_len_in_bytes", offset_of!(ImbJob, key_len_in_bytes)),
            ("job.src", offset_of!(ImbJob, src)),
            ("job.dst", offset_of!(ImbJob, dst)),
            (
                "job.cipher_start_src_offset_in_bytes",
                offset_of!(ImbJob, cipher_start_src_offset_in_bytes),
            ),
            (
                "job.msg_len_to_cipher_in_bytes",
                offset_of!(ImbJob, msg_len_to_cipher_in_bytes),
            ),
            (
                "job.hash_start_src_offset_in_bytes",
                offset_of!(ImbJob, hash_start_src_offset_in_bytes),
            ),
            (
                "job.msg_len_to_hash_in_bytes",
                offset_of!(ImbJob, msg_len_to_hash_in_bytes),
            ),
            ("job.iv", offset_of!(ImbJob, iv)),
            ("job.iv_len_in_bytes", offset_of!(ImbJob, iv_len_in_bytes)),
            ("job.auth_tag_output", offset_of!(ImbJob, auth_tag_output)),
            (
                "job.auth_tag_output_len_in_bytes",
                offset_of!(ImbJob, auth_tag_output_len_in_bytes),
            ),
            ("sizeof(job.u)", size_of::<HashFields>()),
            ("job.u.GCM.aad", u + offset_of!(AeadFields, aad)),
            (
                "job.u.GCM.aad_len_in_bytes",
                u + offset_of!(AeadFields, aad_len_in_bytes),
            ),
            ("job.u.GCM.ctx", u + offset_of!(AeadFields, ctx)),
            (
                "job.u.CHACHA20_POLY1305.aad",
                u + offset_of!(AeadFields, aad),
            ),
            (
                "job.u.CHACHA20_POLY1305.aad_len_in_bytes",
                u + offset_of!(AeadFields, aad_len_in_bytes),
            ),
            (
                "job.u.CHACHA20_POLY1305.ctx",
                u + offset_of!(AeadFields, ctx),
            ),
            (
                "job.u.HMAC._hashed_auth_key_xor_ipad",
                u + offset_of!(HmacFields, hashed_auth_key_xor_ipad),
            ),
            (
                "job.u.HMAC._hashed_auth_key_xor_opad",
                u + offset_of!(HmacFields, hashed_auth_key_xor_opad),
            ),
            ("job.status", offset_of!(ImbJob, status)),
            ("job.cipher_mode", offset_of!(ImbJob, cipher_mode)),
            ("job.cipher_direction", offset_of!(ImbJob, cipher_direction)),
            ("job.hash_alg", offset_of!(ImbJob, hash_alg)),
            ("job.chain_order", offset_of!(ImbJob, chain_order)),
            ("job.user_data", offset_of!(ImbJob, user_data)),
            ("job.user_data2", offset_of!(ImbJob, user_data2)),
            ("job.cipher_func", offset_of!(ImbJob, cipher_func)),
            ("job.hash_func", offset_of!(ImbJob, hash_func)),
            ("job.sgl_state", offset_of!(ImbJob, sgl_state)),
            ("job.cipher_fields", offset_of!(ImbJob, next_iv)),
            ("mgr.features", offset_of!(ImbMgr, features)),
            ("mgr.used_arch", offset_of!(ImbMgr, used_arch)),
            ("mgr.imb_errno", offset_of!(ImbMgr, imb_errno)),
            ("mgr.get_next_job", offset_of!(ImbMgr, get_next_job)),
            ("mgr.submit_job", offset_of!(ImbMgr, submit_job)),
            (
                "mgr.get_completed_job",
                offset_of!(ImbMgr, get_completed_job),
            ),
            ("mgr.flush_job", offset_of!(ImbMgr, flush_job)),
            ("mgr.queue_size", offset_of!(ImbMgr, queue_size)),
            ("mgr.keyexp_128", offset_of!(ImbMgr, keyexp_128)),
            ("mgr.keyexp_192", offset_of!(ImbMgr, keyexp_192)),
            ("mgr.keyexp_256", offset_of!(ImbMgr, keyexp_256)),
            ("mgr.cmac_subkey_gen_128", offset_of!(ImbMgr, unused_1)),
            ("mgr.sha1_one_block", offset_of!(ImbMgr, sha1_one_block)),
            ("mgr.sha224_one_block", offset_of!(ImbMgr, sha224_one_block)),
            ("mgr.sha256_one_block", offset_of!(ImbMgr, sha256_one_block)),
            ("mgr.sha384_one_block", offset_of!(ImbMgr, unused_2)),
            ("mgr.gcm128_pre", offset_of!(ImbMgr, gcm128_pre)),
            ("mgr.gcm256_pre", offset_of!(ImbMgr, gcm256_pre)),
            ("sizeof(struct gcm_key_data)", size_of::<GcmKeyData>()),
            (
                "alignof(struct gcm_key_data)",
                core::mem::align_of::<GcmKeyData>(),
            ),
        ];
        let constants: Vec<(&str, i64)> = vec![
            ("IMB_ARCH_AVX512", IMB_ARCH_AVX512.into()),
            ("IMB_ARCH_NONE", IMB_ARCH_NONE.into()),
            ("IMB_ARCH_SSE", IMB_ARCH_SSE.into()),
            ("IMB_STATUS_COMPLETED", IMB_STATUS_COMPLETED.into()),
            ("IMB_CIPHER_CBC", IMB_CIPHER_CBC.into()),
            ("IMB_CIPHER_NULL", IMB_CIPHER_NULL.into()),
            ("IMB_CIPHER_GCM", IMB_CIPHER_GCM.into()),
            (
                "IMB_CIPHER_CHACHA20_POLY1305",
                IMB_CIPHER_CHACHA20_POLY1305.into(),
            ),
            ("IMB_DIR_ENCRYPT", IMB_DIR_ENCRYPT.into()),
            ("IMB_DIR_DECRYPT", IMB_DIR_DECRYPT.into()),
            ("IMB_AUTH_HMAC_SHA_1", IMB_AUTH_HMAC_SHA_1.into()),
            ("IMB_AUTH_HMAC_SHA_256", IMB_AUTH_HMAC_SHA_256.into()),
            ("IMB_AUTH_NULL", IMB_AUTH_NULL.into()),
            ("IMB_AUTH_AES_GMAC", IMB_AUTH_AES_GMAC.into()),
            (
                "IMB_AUTH_CHACHA20_POLY1305",
                IMB_AUTH_CHACHA20_POLY1305.into(),
            ),
            ("IMB_ORDER_CIPHER_HASH", IMB_ORDER_CIPHER_HASH.into()),
            ("IMB_ORDER_HASH_CIPHER", IMB_ORDER_HASH_CIPHER.into()),
            ("IMB_FEATURE_AESNI", IMB_FEATURE_AESNI as i64),
            ("IMB_FEATURE_PCLMULQDQ", IMB_FEATURE_PCLMULQDQ as i64),
            ("IMB_FEATURE_VAES", IMB_FEATURE_VAES as i64),
            ("IMB_FEATURE_VPCLMULQDQ", IMB_FEATURE_VPCLMULQDQ as i64),
            ("IMB_FEATURE_AVX512_IFMA", IMB_FEATURE_AVX512_IFMA as i64),
            ("IMB_VERSION(1, 3, 0)", IMB_VERSION_1_3.into()),
            ("IMB_SHA1_BLOCK_SIZE", IMB_SHA_BLOCK_SIZE as i64),
            ("IMB_SHA_256_BLOCK_SIZE", IMB_SHA_BLOCK_SIZE as i64),
            (
                "IMB_SHA256_DIGEST_SIZE_IN_BYTES",
                IMB_SHA256_DIGEST_SIZE_IN_BYTES as i64,
            ),
        ];

        let mut c = String::from(
            "#include <stdalign.h>\n#include <stddef.h>\n#include <stdio.h>\n#include <intel-ipsec-mb.h>\n\
             int main(void) {\n  IMB_JOB job; (void)job;\n",
        );
        let expr = |name: &str| -> String {
            if let Some(field) = name.strip_prefix("job.") {
                format!("offsetof(IMB_JOB, {field})")
            } else if let Some(field) = name.strip_prefix("mgr.") {
                format!("offsetof(IMB_MGR, {field})")
            } else if name == "sizeof(job.u)" {
                "sizeof(job.u)".to_string()
            } else {
                name.to_string()
            }
        };
        for (name, _) in &ours {
            c += &format!(
                "  printf(\"%s %lld\\n\", \"{name}\", (long long)({}));\n",
                expr(name)
            );
        }
        for (name, _) in &constants {
            c += &format!("  printf(\"%s %lld\\n\", \"{name}\", (long long)({name}));\n");
        }
        c += "  return 0;\n}\n";

        let dir = std::env::temp_dir().join(format!("ipsecmb-layout-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (src, exe) = (dir.join("layout.c"), dir.join("layout"));
        std::fs::write(&src, c).unwrap();
        // -DLINUX: the library itself is built with it, and it is what gives
        // `struct gcm_key_data` its 64-byte alignment in the header.
        let status = Command::new("cc")
            .args(["-DLINUX", "-o"])
            .arg(&exe)
            .arg(&src)
            .status()
            .expect("running cc (the linker Rust uses) to compile the layout probe");
        assert!(status.success(), "compiling the layout probe failed");
        let out = Command::new(&exe).output().unwrap();
        std::fs::remove_dir_all(&dir).ok();
        let text = String::from_utf8(out.stdout).unwrap();
        let theirs: HashMap<&str, i64> = text
            .lines()
            .filter_map(|l| {
                let (name, value) = l.rsplit_once(' ')?;
                Some((name, value.parse().ok()?))
            })
            .collect();

        let mut wrong = Vec::new();
        for (name, value) in &ours {
            if theirs.get(name) != Some(&(*value as i64)) {
                wrong.push(format!("{name}: rust {value}, C {:?}", theirs.get(name)));
            }
        }
        for (name, value) in &constants {
            if theirs.get(name) != Some(value) {
                wrong.push(format!("{name}: rust {value}, C {:?}", theirs.get(name)));
            }
        }
        assert!(wrong.is_empty(), "layout mismatches:\n{}", wrong.join("\n"));
    }
}
