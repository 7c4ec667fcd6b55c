//! The state the vector kernels work on: one slot per lane, stored as arrays of
//! words ("structure of arrays") so that a kernel loads one vector per state word
//! and lane `l` of that vector is packet `l`'s word.
//!
//! The drivers (lane path, block path) fill and refill the slots in scalar code; a
//! kernel call runs every lane, and lanes with nothing to do cost work but touch no
//! memory: a ChaCha lane with `rem == 0` reads and writes nothing, an idle Poly1305
//! lane reads a zero block with multiplier 0 and no 2^128 bit, so it stays 0.

use crate::field::Limbs;

/// The widest Poly1305 kernels (AVX-512) run 16 lanes; AVX2 kernels use the first 8.
pub(crate) const MAX_LANES: usize = 16;
/// The widest ChaCha20 kernel (AVX-512) runs 32 lanes, two groups of 16.
pub(crate) const MAX_CHACHA_LANES: usize = 32;

/// A block of zeros for idle Poly1305 lanes to read.
pub(crate) static ZERO_BLOCK: [u8; 16] = [0; 16];

/// An all-zero ChaCha20 state row.
pub(crate) const ZERO_ROW: Row = Row([0; 16]);
/// The row idle lanes load.
pub(crate) static IDLE_ROW: Row = ZERO_ROW;

/// A ChaCha20 initial state (section 2.3): constants, key, counter, nonce. The
/// kernels read only the constants and the key from it: counters and nonces come
/// from the lanes, so one row serves every op on its key.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub(crate) struct Row(pub [u32; 16]);

impl Row {
    /// The row of `key`, its counter and nonce words zero.
    pub fn new(key: &[u32; 8]) -> Row {
        let mut w = [0u32; 16];
        w[..4].copy_from_slice(&crate::scalar::SIGMA);
        w[4..12].copy_from_slice(key);
        Row(w)
    }

    pub fn key(&self) -> [u32; 8] {
        self.0[4..12].try_into().expect("8 words")
    }
}

/// ChaCha20 lanes: each lane's key row (by pointer: a kernel loads the 16 rows and
/// transposes them in registers, cheaper than scattering 8 key words per lane
/// refill), its nonce and block counter (one array per state word, which a kernel
/// loads as they are), and where its keystream goes.
///
/// One kernel step makes one keystream block per lane, XORs its first
/// `min(rem, 64)` bytes into `ptr`, then moves `ptr` on by `stride`, `rem` down by
/// `stride` (to 0 at most) and the counter up by `ctr_step`. A call with `keyed` set
/// makes its first step store each lane's block whole at `key[lane]` instead (a
/// one-time key: the text's lanes need not be loaded and transposed a second time
/// for it), moving only the counter on; a kernel clears `keyed` (a call with `keyed`
/// has at least that one step). The lane path keeps
/// stride 64 and step 1 (one packet per lane); the block path puts consecutive blocks
/// of one packet in the lanes, with stride 64 * lanes and step = lanes.
#[repr(C, align(64))]
pub(crate) struct ChachaLanes {
    pub ctr: [u32; MAX_CHACHA_LANES],
    /// State words 13, 14 and 15 (the nonce) of every lane.
    pub nonce: [[u32; MAX_CHACHA_LANES]; 3],
    pub row: [*const Row; MAX_CHACHA_LANES],
    pub ptr: [*mut u8; MAX_CHACHA_LANES],
    pub rem: [usize; MAX_CHACHA_LANES],
    /// Where the first step's blocks go when `keyed`: 64 writable bytes each, for
    /// every lane.
    pub key: [*mut u8; MAX_CHACHA_LANES],
    pub keyed: bool,
    pub stride: usize,
    pub ctr_step: u32,
}

impl ChachaLanes {
    /// All lanes idle: the idle row, `ptr` at `idle` (never touched while `rem` is 0).
    pub fn idle(idle: *mut u8, stride: usize, ctr_step: u32) -> ChachaLanes {
        ChachaLanes {
            ctr: [0; MAX_CHACHA_LANES],
            nonce: [[0; MAX_CHACHA_LANES]; 3],
            row: [&IDLE_ROW; MAX_CHACHA_LANES],
            ptr: [idle; MAX_CHACHA_LANES],
            rem: [0; MAX_CHACHA_LANES],
            key: [core::ptr::null_mut(); MAX_CHACHA_LANES],
            keyed: false,
            stride,
            ctr_step,
        }
    }

    /// Points `lane` at a new stream: the key of `row` (which must stay valid while
    /// the lanes are used), `nonce`, from block `ctr` on.
    pub fn load(
        &mut self,
        lane: usize,
        row: *const Row,
        nonce: &[u32; 3],
        ctr: u32,
        ptr: *mut u8,
        rem: usize,
    ) {
        self.row[lane] = row;
        for (words, &n) in self.nonce.iter_mut().zip(nonce) {
            words[lane] = n;
        }
        self.ctr[lane] = ctr;
        self.ptr[lane] = ptr;
        self.rem[lane] = rem;
    }
}

/// How a Poly1305 kernel splits 130-bit numbers into 64-bit lanes' limbs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Radix {
    /// Three limbs of 44/44/42 bits, for 52-bit multipliers (AVX-512 IFMA).
    R44,
    /// Five limbs of 26 bits, for 32x32-bit multipliers (AVX-512F, AVX2).
    R26,
}

/// Poly1305 lanes: accumulator `h` and multiplier `r` per lane, in the kernel's radix.
///
/// One kernel step reads a 16-byte block at each lane's `ptr`, adds it (with
/// `hibit`, 2^128 in limb form, or 0) to `h`, multiplies by `r` modulo 2^130 - 5 and
/// moves `ptr` on by the lane's `stride`. With `r` = r^lanes and stride 16 * lanes
/// this is the block path's multi-block Horner scheme.
#[repr(C, align(64))]
pub(crate) struct PolyLanes {
    pub h: [[u64; MAX_LANES]; 5],
    pub r: [[u64; MAX_LANES]; 5],
    pub hibit: [u64; MAX_LANES],
    pub ptr: [*const u8; MAX_LANES],
    pub stride: [usize; MAX_LANES],
    pub radix: Radix,
}

impl PolyLanes {
    /// All lanes idle: zero blocks, no 2^128 bit, h = r = 0.
    pub fn idle(radix: Radix) -> PolyLanes {
        PolyLanes {
            h: [[0; MAX_LANES]; 5],
            r: [[0; MAX_LANES]; 5],
            hibit: [0; MAX_LANES],
            ptr: [ZERO_BLOCK.as_ptr(); MAX_LANES],
            stride: [0; MAX_LANES],
            radix,
        }
    }

    fn put(limbs: &mut [[u64; MAX_LANES]; 5], radix: Radix, lane: usize, v: Limbs) {
        match radix {
            Radix::R44 => (0..3).for_each(|i| limbs[i][lane] = v.0[i]),
            Radix::R26 => {
                let l = v.to_radix26();
                (0..5).for_each(|i| limbs[i][lane] = l[i]);
            }
        }
    }

    pub fn set_h(&mut self, lane: usize, v: Limbs) {
        Self::put(&mut self.h, self.radix, lane, v);
    }

    /// `r` must be partially reduced (clamped keys and `Limbs::mul` results are).
    pub fn set_r(&mut self, lane: usize, v: Limbs) {
        Self::put(&mut self.r, self.radix, lane, v);
    }

    pub fn get_h(&self, lane: usize) -> Limbs {
        match self.radix {
            Radix::R44 => Limbs([self.h[0][lane], self.h[1][lane], self.h[2][lane]]),
            Radix::R26 => Limbs::from_radix26(core::array::from_fn(|i| self.h[i][lane])),
        }
    }

    pub fn set_hibit(&mut self, lane: usize, on: bool) {
        let bit = match self.radix {
            Radix::R44 => 1 << 40, // 2^128 = 2^88 * 2^40
            Radix::R26 => 1 << 24, // 2^128 = 2^104 * 2^24
        };
        self.hibit[lane] = if on { bit } else { 0 };
    }

    /// Makes `lane` idle (see the type's docs).
    pub fn park(&mut self, lane: usize) {
        self.set_h(lane, Limbs::ZERO);
        self.set_r(lane, Limbs::ZERO);
        self.set_hibit(lane, false);
        self.ptr[lane] = ZERO_BLOCK.as_ptr();
        self.stride[lane] = 0;
    }
}
