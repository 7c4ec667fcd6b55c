//! The lane-parallel path: one packet per lane, every lane on its own key, nonce and
//! counter. A lane that finishes its packet takes the next one from the list at once,
//! so lanes idle only when the list runs dry; the scheduler hands packets longest
//! first, which leaves short ones for the end and keeps that drain short.

use crate::dispatch::Kernels;
use crate::field::Limbs;
use crate::job::Job;
use crate::lanes::{ChachaLanes, MAX_LANES, PolyLanes};

/// Where a ChaCha20 pass puts its keystream.
#[derive(Clone, Copy)]
pub(crate) enum Target {
    /// Block 0 of each listed op into its one-time-key slot (`otk[job]`, zeroed).
    OneTimeKey(*mut [u8; 64]),
    /// Blocks 1.. of each listed op XORed over its text in packet memory (`base`).
    Text(*mut u8),
}

/// Runs ChaCha20 for the jobs in `order` through the lanes.
///
/// # Safety
/// `k`'s kernels run on this CPU. For `Text(base)`, every listed job's text range
/// lies in the memory at `base`; for `OneTimeKey(otk)`, `otk` has a slot for every
/// listed job index. Nothing else reads or writes those bytes during the call.
pub(crate) unsafe fn chacha(k: &Kernels, jobs: &[Job], order: &[u32], target: Target) {
    let mut idle = [0u8; 64];
    let mut st = ChachaLanes::idle(idle.as_mut_ptr(), 64, 1);
    let mut next = 0;
    loop {
        let mut busy = false;
        for lane in 0..k.lanes {
            while st.rem[lane] == 0 && next < order.len() {
                let i = order[next] as usize;
                next += 1;
                let j = &jobs[i];
                match target {
                    // SAFETY: the caller guarantees slot i exists.
                    Target::OneTimeKey(otk) => {
                        st.load(lane, &j.key, &j.nonce, 0, unsafe { otk.add(i) }.cast(), 64)
                    }
                    // SAFETY: the caller guarantees the text range is in the memory.
                    Target::Text(base) => st.load(
                        lane,
                        &j.key,
                        &j.nonce,
                        1,
                        unsafe { base.add(j.text) },
                        j.len,
                    ),
                }
            }
            busy |= st.rem[lane] != 0;
        }
        if !busy {
            return;
        }
        // SAFETY: busy lanes point at `rem` valid bytes (above); idle ones touch nothing.
        unsafe { (k.chacha)(&mut st) };
    }
}

/// The MAC input of one job as up to four runs of whole blocks: aad, its padded
/// tail, text, then the padded text tail and the lengths (from `tail`).
fn segments(j: &Job, base: *const u8, tail: *const u8) -> ([(*const u8, usize); 4], usize) {
    let mut s = [(core::ptr::null(), 0); 4];
    let mut n = 0;
    let mut push = |p: *const u8, blocks: usize| {
        if blocks > 0 {
            s[n] = (p, blocks);
            n += 1;
        }
    };
    push(base.wrapping_add(j.aad), j.aad_len / 16);
    push(tail, !j.aad_len.is_multiple_of(16) as usize);
    push(base.wrapping_add(j.text), j.len / 16);
    if !j.len.is_multiple_of(16) {
        push(tail.wrapping_add(16), 2);
    } else {
        push(tail.wrapping_add(32), 1);
    }
    (s, n)
}

/// Writes the MAC input blocks that are not in packet memory into `tail`.
///
/// # Safety
/// The job's aad and text ranges lie in the memory at `base`.
pub(crate) unsafe fn fill_tail(j: &Job, base: *const u8, tail: &mut [u8; 48]) {
    *tail = [0; 48];
    let (a, t) = (j.aad_len % 16, j.len % 16);
    // SAFETY: both copies read the last partial block of a range inside the memory
    // and write into the 48-byte tail (at most 15 bytes at 0 and at 16).
    unsafe {
        core::ptr::copy_nonoverlapping(base.add(j.aad + j.aad_len - a), tail.as_mut_ptr(), a);
        core::ptr::copy_nonoverlapping(base.add(j.text + j.len - t), tail.as_mut_ptr().add(16), t);
    }
    tail[32..40].copy_from_slice(&(j.aad_len as u64).to_le_bytes());
    tail[40..].copy_from_slice(&(j.len as u64).to_le_bytes());
}

/// Computes the tag of every job in `order` into `mac[job]`.
///
/// # Safety
/// `k`'s kernels run on this CPU; every listed job's aad and text lie in the memory
/// at `base`, which nothing writes during the call; `otk` and `tail` have a slot
/// for every listed job, and `otk` holds their one-time keys.
pub(crate) unsafe fn poly(
    k: &Kernels,
    jobs: &[Job],
    order: &[u32],
    base: *const u8,
    otk: *const [u8; 64],
    tail: *mut [u8; 48],
    mac: &mut [[u8; 16]],
) {
    const NONE: usize = usize::MAX;
    let mut st = PolyLanes::idle(k.radix);
    let mut job = [NONE; MAX_LANES];
    let mut segs = [([(core::ptr::null(), 0); 4], 0usize); MAX_LANES];
    let mut seg = [0usize; MAX_LANES];
    // Blocks left in the lane's current segment; idle lanes never limit a run.
    let mut left = [usize::MAX; MAX_LANES];
    left[..k.lanes].fill(0);
    let mut next = 0;
    loop {
        for lane in 0..k.lanes {
            while left[lane] == 0 {
                if seg[lane] + 1 < segs[lane].1 {
                    seg[lane] += 1;
                    let (p, n) = segs[lane].0[seg[lane]];
                    st.ptr[lane] = p;
                    left[lane] = n;
                    continue;
                }
                if job[lane] != NONE {
                    let i = job[lane];
                    // SAFETY: slot i exists (caller).
                    let key = unsafe { &*otk.add(i) };
                    mac[i] = st
                        .get_h(lane)
                        .tag(key[16..32].try_into().expect("16 bytes"));
                    job[lane] = NONE;
                }
                if next == order.len() {
                    st.park(lane);
                    left[lane] = usize::MAX;
                    break;
                }
                let i = order[next] as usize;
                next += 1;
                let j = &jobs[i];
                // SAFETY: slots i exist and the job's ranges are in the memory (caller).
                let (key, t) = unsafe { (&*otk.add(i), &mut *tail.add(i)) };
                unsafe { fill_tail(j, base, t) };
                segs[lane] = segments(j, base, t.as_ptr());
                seg[lane] = 0;
                st.set_h(lane, Limbs::ZERO);
                st.set_r(
                    lane,
                    Limbs::clamped_r(key[..16].try_into().expect("16 bytes")),
                );
                st.set_hibit(lane, true);
                st.stride[lane] = 16;
                let (p, n) = segs[lane].0[0];
                st.ptr[lane] = p;
                left[lane] = n;
                job[lane] = i;
            }
        }
        let run = left[..k.lanes].iter().copied().min().unwrap_or(usize::MAX);
        if run == usize::MAX {
            return; // every lane idle: all jobs done
        }
        // SAFETY: every busy lane has `run` whole blocks left in its current segment,
        // each inside the memory or the lane's tail slot; idle lanes read ZERO_BLOCK
        // with stride 0.
        unsafe { (k.poly)(&mut st, run) };
        for l in left[..k.lanes].iter_mut().filter(|l| **l != usize::MAX) {
            *l -= run;
        }
    }
}
