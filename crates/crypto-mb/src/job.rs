//! One validated op as the drivers see it: offsets into packet memory (the op made
//! in place: the engine has copied an out-of-place input to its output range),
//! where its expanded key is and its nonce, and the per-op scratch the passes
//! share.

use crate::lanes::{IDLE_ROW, Row};

/// One cache line: every pass of the scheduler reads the jobs, most of them all of
/// the jobs, so their size is what a vector of small ops streams through the cache.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub(crate) struct Job {
    /// The key's ChaCha20 row (constants and key), where the engine's key cache
    /// keeps it, unchanged and in place, until the engine's call returns (see
    /// `KeyCache::get_or_expand`): one row for every op on the key, not a copy each.
    pub row: *const Row,
    /// Text (plaintext or ciphertext) at `text..text + len`, in place.
    pub text: usize,
    pub len: usize,
    pub aad: usize,
    pub tag: usize,
    /// The nonce as ChaCha20 state words 13..16.
    pub nonce: [u32; 3],
    /// The op's index in the caller's vector.
    pub op: u32,
    pub aad_len: u32,
    pub decrypt: bool,
}

const _: () = assert!(core::mem::size_of::<Job>() == 64);

// SAFETY: `row` is only read during the engine call that set it, on that call's
// thread; between calls the jobs are scratch, rewritten before they are read.
unsafe impl Send for Job {}

impl Job {
    /// What a uniform vector's jobs share (see [`Census`]): text length, aad
    /// length, direction.
    pub fn shape(&self) -> (usize, u32, bool) {
        (self.len, self.aad_len, self.decrypt)
    }

    pub const EMPTY: Job = Job {
        row: &IDLE_ROW,
        nonce: [0; 3],
        op: 0,
        text: 0,
        len: 0,
        aad: 0,
        aad_len: 0,
        tag: 0,
        decrypt: false,
    };
}

/// Per-op scratch, indexed like the jobs, kept in separate vectors so that kernels
/// can hold raw pointers into one while the driver reads another.
#[derive(Default)]
pub(crate) struct Scratch {
    /// Keystream block 0 of each op: the Poly1305 key r || s (section 2.6), then 32
    /// unused bytes.
    pub otk: Vec<[u8; 64]>,
    /// The MAC input blocks not in packet memory (see `scalar::mac_tail`).
    pub tail: Vec<[u8; 48]>,
    /// The tag each op computed.
    pub mac: Vec<[u8; 16]>,
    /// Each op's Poly1305 accumulator as the lanes left it, in the kernels' radix
    /// and before the final reduction: tags are finished in a separate loop, whose
    /// iterations overlap.
    pub acc: Vec<[u64; 5]>,
}

impl Scratch {
    /// Slots for `jobs` jobs. One-time-key slots are zero at rest (the kernels XOR
    /// keystream into them, and `wipe` zeroes them again); the others are written
    /// before they are read, so growing is all there is to do.
    pub fn reset(&mut self, jobs: usize) {
        if self.otk.len() < jobs {
            self.otk.resize(jobs, [0; 64]);
            self.tail.resize(jobs, [0; 48]);
            self.mac.resize(jobs, [0; 16]);
            self.acc.resize(jobs, [0; 5]);
        }
    }

    /// One-time keys are secrets: gone before `process` returns, and the slots are
    /// zero for the next call. (A plain fill: the vector outlives the call, so the
    /// stores cannot be dropped as dead, and `black_box` makes sure of it; byte-wise
    /// volatile writes cost a tenth of the time of a 64-byte packet.)
    pub fn wipe(&mut self, jobs: usize) {
        let used = jobs.min(self.otk.len());
        self.otk[..used].fill([0; 64]);
        core::hint::black_box(&mut self.otk);
    }
}

/// What the engine learnt of a vector's jobs while making them, so that the passes
/// need not read every job again to find it out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Census {
    /// Every job has one shape: text length, aad length and direction (a data
    /// path's usual frame). Then the lane order needs no sort and the jobs make
    /// whole groups with no run to find.
    pub uniform: bool,
    pub decrypts: usize,
}

impl Census {
    /// The census of `jobs`, counted (for callers that did not keep one).
    pub fn of(jobs: &[Job]) -> Census {
        Census {
            uniform: jobs.windows(2).all(|w| w[0].shape() == w[1].shape()),
            decrypts: jobs.iter().filter(|j| j.decrypt).count(),
        }
    }
}
