//! One validated op as the drivers see it: offsets into packet memory (the op made
//! in place: the scheduler has copied an out-of-place input to its output range),
//! the expanded key and nonce, and the per-op scratch the passes share.

use zeroize::Zeroize;

#[derive(Clone, Copy)]
pub(crate) struct Job {
    /// The op's index in the caller's vector.
    pub op: usize,
    pub key: [u32; 8],
    pub nonce: [u32; 3],
    /// Text (plaintext or ciphertext) at `text..text + len`, in place.
    pub text: usize,
    pub len: usize,
    pub aad: usize,
    pub aad_len: usize,
    pub tag: usize,
    pub decrypt: bool,
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
}

impl Scratch {
    pub fn reset(&mut self, jobs: usize) {
        self.otk.clear();
        self.otk.resize(jobs, [0; 64]);
        self.tail.clear();
        self.tail.resize(jobs, [0; 48]);
        self.mac.clear();
        self.mac.resize(jobs, [0; 16]);
    }

    /// One-time keys are secrets: gone before `process` returns.
    pub fn wipe(&mut self) {
        self.otk.iter_mut().for_each(|k| k.zeroize());
    }
}
