//! One validated op as the drivers see it: offsets into packet memory (the op made
//! in place: the scheduler has copied an out-of-place input to its output range),
//! the expanded key and nonce, and the per-op scratch the passes share.

use crate::lanes::Row;

#[derive(Clone, Copy)]
#[repr(C)]
pub(crate) struct Job {
    /// ChaCha20's initial state for this op: key and nonce (the lanes read it).
    pub row: Row,
    /// The op's index in the caller's vector.
    pub op: usize,
    /// Text (plaintext or ciphertext) at `text..text + len`, in place.
    pub text: usize,
    pub len: usize,
    pub aad: usize,
    pub aad_len: usize,
    pub tag: usize,
    pub decrypt: bool,
}

impl Job {
    pub const EMPTY: Job = Job {
        row: crate::lanes::ZERO_ROW,
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
