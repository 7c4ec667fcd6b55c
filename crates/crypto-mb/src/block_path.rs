//! The block-parallel path: all lanes on one packet. ChaCha20 makes `lanes`
//! consecutive blocks per step; Poly1305 runs a multi-block Horner scheme, lane `l`
//! taking blocks l, l + lanes, l + 2 lanes, ... with multiplier r^lanes, and the
//! lanes' sums are brought together with the powers r^lanes..r^1 in the last step.
//!
//! Why it is right: Horner's rule for blocks m_0..m_{k-1} (k = q * lanes) is
//! h = sum_i m_i r^(k-i). Grouping i = s * lanes + l, lane l computes
//! sum_s m_i r^(lanes*(q-1-s)) * r^(lanes-l) when every step multiplies by r^lanes
//! except the last, which multiplies by r^(lanes-l); adding the lanes gives h.
//! A run whose length is not a multiple of the lane count is padded in front with
//! zero blocks (added without the 2^128 bit, so they add nothing), and the
//! accumulator the run starts from enters in the lane of its first real block.

use crate::dispatch::Kernels;
use crate::field::{self, Limbs};
use crate::job::Job;
use crate::lane_path::fill_tail;
use crate::lanes::{ChachaLanes, PolyLanes, Row, ZERO_BLOCK};

/// ChaCha20 over one job's text; for an encryption, keystream block 0 goes to the
/// job's one-time-key slot `otk` in the same pass (lane 0 of the first step), so a
/// lone packet does not pay a whole step of lanes for one block.
///
/// # Safety
/// `k`'s kernels run on this CPU; the job's text lies in the memory at `base` and
/// nothing else touches it during the call; `otk`, when given, is valid for 64 bytes.
pub(crate) unsafe fn chacha(k: &Kernels, j: &Job, base: *mut u8, otk: Option<*mut u8>) {
    // SAFETY: the text is in the memory (caller).
    let text = unsafe { base.add(j.text) };
    let Some(otk) = otk else {
        // SAFETY: as above.
        return unsafe { chacha_run(k, j.row, &j.nonce, 1, text, j.len) };
    };
    let mut idle = [0u8; 64];
    let stride = 64 * k.chacha_lanes;
    let mut st = ChachaLanes::idle(idle.as_mut_ptr(), stride, k.chacha_lanes as u32);
    // Block b of the stream is lane b % lanes in step b / lanes; block 0 is the key,
    // block b > 0 is text bytes 64 (b - 1)...
    st.load(0, j.row, &j.nonce, 0, otk, 64);
    for lane in 1..k.chacha_lanes {
        let at = 64 * (lane - 1);
        st.load(
            lane,
            j.row,
            &j.nonce,
            lane as u32,
            text.wrapping_add(at),
            j.len.saturating_sub(at),
        );
    }
    let blocks = 1 + j.len.div_ceil(64);
    // SAFETY: every lane's `rem` counts bytes of the text (or the key slot) from its
    // pointer on; pointers past the end are formed, never used. The rows stay the
    // job's throughout.
    unsafe { (k.chacha)(&mut st, 1) };
    // ... so after the first step lane 0 goes on at block `lanes`.
    let at = 64 * (k.chacha_lanes - 1);
    st.ptr[0] = text.wrapping_add(at);
    st.rem[0] = j.len.saturating_sub(at);
    // SAFETY: as above.
    unsafe { (k.chacha)(&mut st, blocks.div_ceil(k.chacha_lanes) - 1) };
}

/// The keystream of the key of `row` and `nonce` from block `counter` on, XORed
/// over `len` bytes at `text`.
///
/// # Safety
/// `k`'s kernels run on this CPU; `row` points at a live row; `text` is valid for
/// reading and writing `len` bytes, which nothing else touches during the call.
pub(crate) unsafe fn chacha_run(
    k: &Kernels,
    row: *const Row,
    nonce: &[u32; 3],
    counter: u32,
    text: *mut u8,
    len: usize,
) {
    let mut idle = [0u8; 64];
    let stride = 64 * k.chacha_lanes;
    let mut st = ChachaLanes::idle(idle.as_mut_ptr(), stride, k.chacha_lanes as u32);
    for lane in 0..k.chacha_lanes {
        // Lane offsets past the end are only formed (wrapping), never used: `rem` is 0.
        let at = 64 * lane;
        let ctr = counter.wrapping_add(lane as u32);
        st.load(
            lane,
            row,
            nonce,
            ctr,
            text.wrapping_add(at),
            len.saturating_sub(at),
        );
    }
    // SAFETY: each lane's `rem` counts bytes of the text from its pointer on; the
    // rows stay `row` throughout.
    unsafe { (k.chacha)(&mut st, len.div_ceil(stride)) };
}

/// r^1..=r^lanes (index i holds r^i), partially reduced: each limb within a few
/// bits of its width, which is all the kernels' bounds ask of a multiplier. Built as
/// a tree (r^(a+b) = r^a r^b with a the largest power of two below the exponent), so
/// the chain of dependent multiplications is 5 long rather than 15.
pub(crate) fn powers(r: Limbs, lanes: usize) -> [Limbs; 17] {
    let mut pw = [Limbs::ZERO; 17];
    pw[1] = r;
    let mut half = 1;
    while half < lanes {
        for i in half + 1..=(2 * half).min(lanes) {
            pw[i] = pw[half].mul(pw[i - half]);
        }
        half *= 2;
    }
    pw
}

/// `h` carried on over `blocks` whole blocks at `p` with the Horner scheme above.
///
/// # Safety
/// `k`'s kernels run on this CPU; `p` is valid for reading `16 * blocks` bytes;
/// `blocks >= 1`.
pub(crate) unsafe fn horner(
    k: &Kernels,
    h: Limbs,
    p: *const u8,
    blocks: usize,
    pw: &[Limbs; 17],
) -> Limbs {
    let n = k.lanes;
    let pad = (n - blocks % n) % n;
    let steps = (blocks + pad) / n;
    let mut st = PolyLanes::idle(k.radix);
    let last = |st: &mut PolyLanes| (0..n).for_each(|l| st.set_r(l, pw[n - l]));
    for l in 0..n {
        st.set_r(l, pw[n]);
        st.stride[l] = 16 * n;
        if l < pad {
            st.ptr[l] = ZERO_BLOCK.as_ptr();
        } else {
            st.ptr[l] = p.wrapping_add(16 * (l - pad));
            st.set_hibit(l, true);
        }
    }
    st.set_h(pad, h);
    if steps == 1 {
        last(&mut st);
    }
    // SAFETY: lanes past the padding read blocks 0..n - pad of the run; padding lanes
    // read ZERO_BLOCK once.
    unsafe { (k.poly)(&mut st, 1) };
    if steps > 1 {
        for l in 0..n {
            st.ptr[l] = p.wrapping_add(16 * (n + l - pad));
            st.set_hibit(l, true);
        }
        if steps > 2 {
            // SAFETY: steps 1..steps-1 read blocks n - pad .. (steps - 1) n - pad.
            unsafe { (k.poly)(&mut st, steps - 2) };
        }
        last(&mut st);
        // SAFETY: the final step reads the run's last n blocks.
        unsafe { (k.poly)(&mut st, 1) };
    }
    (0..n).fold(Limbs::ZERO, |acc, l| acc.add(st.get_h(l)))
}

/// The tag of one job.
///
/// # Safety
/// `k`'s kernels run on this CPU; the job's aad and text lie in the memory at
/// `base`, which nothing writes during the call.
pub(crate) unsafe fn poly(
    k: &Kernels,
    j: &Job,
    base: *const u8,
    otk: &[u8; 64],
    tail: &mut [u8; 48],
) -> [u8; 16] {
    // SAFETY: the ranges are in the memory (caller).
    unsafe { fill_tail(j, base, tail) };
    let r = Limbs::clamped_r(otk[..16].try_into().expect("16 bytes"));
    let pw = powers(r, k.lanes);
    let tail = &*tail;
    // The MAC input as runs of whole blocks (as `lane_path::segments`).
    let runs: [(*const u8, usize); 4] = [
        (base.wrapping_add(j.aad), j.aad_len as usize / 16),
        (tail.as_ptr(), !j.aad_len.is_multiple_of(16) as usize),
        (base.wrapping_add(j.text), j.len / 16),
        if !j.len.is_multiple_of(16) {
            (tail.as_ptr().wrapping_add(16), 2)
        } else {
            (tail.as_ptr().wrapping_add(32), 1)
        },
    ];
    let mut h = Limbs::ZERO;
    for (p, blocks) in runs {
        if blocks >= k.lanes {
            // SAFETY: a run of whole blocks inside the memory or the tail.
            h = unsafe { horner(k, h, p, blocks, &pw) };
        } else if blocks > 0 {
            // A few blocks: scalar Horner costs less than a lane setup.
            // SAFETY: as above; nothing writes these bytes while the slice lives.
            let b = unsafe { core::slice::from_raw_parts(p, 16 * blocks) };
            h = field::absorb_blocks(h, r, b);
        }
    }
    h.tag(otk[16..32].try_into().expect("16 bytes"))
}
