//! The lane-parallel path: one packet per lane, every lane on its own key, nonce and
//! counter. A lane that finishes its packet takes the next one from the list at once,
//! so lanes idle only when the list runs dry; the scheduler hands packets longest
//! first, which leaves short ones for the end and keeps that drain short.
//! Whole groups of packets of one shape, the usual vector, need no refills at all:
//! ChaCha20 and Poly1305 take them first (`chacha_groups`, `poly_groups`).

use crate::dispatch::Kernels;
use crate::field::Limbs;
use crate::job::Job;
use crate::lanes::{ChachaLanes, MAX_CHACHA_LANES, MAX_LANES, PolyLanes, Radix};

/// Runs ChaCha20 for the jobs in `order` through the lanes.
///
/// With `text` false, each job's keystream block 0 goes into its one-time-key slot
/// `otk[job]` (zeroed before). With `text` true, blocks 1.. are XORed over each
/// job's text, and an encryption first puts block 0 into its slot in the same lane
/// (its counter runs on from 0), which saves the lane a refill.
///
/// # Safety
/// `k`'s kernels run on this CPU; every listed job's text range lies in the memory at
/// `base`; `otk` has a slot for every listed job. Nothing else reads or writes those
/// bytes during the call.
pub(crate) unsafe fn chacha(
    k: &Kernels,
    jobs: &[Job],
    order: &[u32],
    otk: *mut [u8; 64],
    base: *mut u8,
    text: bool,
) {
    let mut idle = [0u8; 64];
    let mut st = ChachaLanes::idle(idle.as_mut_ptr(), 64, 1);
    // A lane's second stretch: the text after the one-time key.
    let mut then: [Option<(*mut u8, usize)>; MAX_CHACHA_LANES] = [None; MAX_CHACHA_LANES];
    let mut next = 0;
    loop {
        let mut busy = false;
        for (lane, then) in then.iter_mut().enumerate().take(k.chacha_lanes) {
            while st.rem[lane] == 0 {
                if let Some((p, n)) = then.take() {
                    st.ptr[lane] = p;
                    st.rem[lane] = n;
                    break;
                }
                let Some(&i) = order.get(next) else { break };
                next += 1;
                let (i, j) = (i as usize, &jobs[i as usize]);
                // SAFETY: the text range is in the memory (caller).
                let body = (text && j.len > 0).then(|| (unsafe { base.add(j.text) }, j.len));
                if !text || !j.decrypt {
                    // SAFETY: slot i exists (caller).
                    st.load(lane, j.row, &j.nonce, 0, unsafe { otk.add(i) }.cast(), 64);
                    *then = body;
                } else if let Some((p, n)) = body {
                    st.load(lane, j.row, &j.nonce, 1, p, n);
                }
            }
            busy |= st.rem[lane] != 0;
        }
        if !busy {
            return;
        }
        // SAFETY: busy lanes point at `rem` valid bytes (above); idle ones touch nothing;
        // every row pointer is a listed job's row or the idle row.
        unsafe { (k.chacha)(&mut st, 1) };
    }
}

/// ChaCha20 for whole groups of `k.chacha_lanes` jobs of one direction and (with
/// `text`) one length, the usual make-up of a data path's vector: the lanes of a
/// group are loaded together and step together to the end, with none of
/// [`chacha`]'s refills lane by lane. What each lane makes is what [`chacha`] makes
/// for its job (`text` as there). The jobs of `order` that make no whole group are
/// appended to `rest`, in order, for [`chacha`].
///
/// # Safety
/// As [`chacha`].
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn chacha_groups(
    k: &Kernels,
    jobs: &[Job],
    order: &[u32],
    otk: *mut [u8; 64],
    base: *mut u8,
    text: bool,
    uniform: bool,
    rest: &mut Vec<u32>,
) {
    // Without text every job is one block, whatever its length: pass 1 takes the
    // decryptions in vector order, and a mix of lengths need not split its groups.
    let shape = |i: u32| {
        let j = &jobs[i as usize];
        (if text { j.len } else { 0 }, j.decrypt)
    };
    let mut idle = [0u8; 64];
    let mut st = ChachaLanes::idle(idle.as_mut_ptr(), 64, 1);
    groups_of_one_shape(order, k.chacha_lanes, uniform, shape, rest, |members| {
        // SAFETY: as the caller guarantees for every listed job.
        unsafe { chacha_group(k, &mut st, jobs, members, otk, base, text) };
    });
}

/// Cuts `order` into runs of jobs of one `shape`, hands each whole group of `lanes`
/// jobs of a run to `group`, and appends the rest of each run to `rest`, in order.
/// `uniform` says that every job of the vector has one shape (see
/// `job::Census`): then `order` is one run, known without reading a job.
fn groups_of_one_shape<S: PartialEq>(
    order: &[u32],
    lanes: usize,
    uniform: bool,
    shape: impl Fn(u32) -> S,
    rest: &mut Vec<u32>,
    mut group: impl FnMut(&[u32]),
) {
    let mut at = 0;
    while at < order.len() {
        let run = if uniform {
            order.len()
        } else {
            let first = shape(order[at]);
            order[at..]
                .iter()
                .take_while(|&&i| shape(i) == first)
                .count()
        };
        let whole = run / lanes * lanes;
        order[at..at + whole]
            .chunks_exact(lanes)
            .for_each(&mut group);
        rest.extend_from_slice(&order[at + whole..at + run]);
        at += run;
    }
}

/// One group of [`chacha_groups`]: `members` are `k.chacha_lanes` jobs of one
/// direction, and of one length when `text`.
///
/// # Safety
/// As [`chacha`].
unsafe fn chacha_group(
    k: &Kernels,
    st: &mut ChachaLanes,
    jobs: &[Job],
    members: &[u32],
    otk: *mut [u8; 64],
    base: *mut u8,
    text: bool,
) {
    let first = &jobs[members[0] as usize];
    let (len, decrypt) = (first.len, first.decrypt);
    // Block 0 into the one-time-key slots, in the first step of the same call as
    // the text that follows it (see `ChachaLanes::keyed`): every job's without
    // text, an encryption's before its text. A decryption's text comes later, its
    // counters from 1.
    let keyed = !text || !decrypt;
    let body = if text { len } else { 0 };
    for (lane, &i) in members.iter().enumerate() {
        let (i, j) = (i as usize, &jobs[i as usize]);
        // Formed, not used, without text: `rem` is 0.
        let p = base.wrapping_add(j.text);
        st.load(lane, j.row, &j.nonce, (!keyed) as u32, p, body);
        // Slot i exists (caller).
        st.key[lane] = otk.wrapping_add(i).cast();
    }
    let steps = keyed as usize + body.div_ceil(64);
    if steps == 0 {
        return; // decryptions with no text
    }
    st.keyed = keyed;
    // SAFETY: every lane has `rem` valid bytes of its job's text at `ptr` and a
    // 64-byte key slot; the rows stay the jobs' through all the steps.
    unsafe { (k.chacha)(st, steps) };
}

/// Where a run of whole MAC input blocks lies: in packet memory (the aad, the
/// text) or in the job's tail slot (see [`fill_tail`]).
#[derive(Clone, Copy)]
enum Part {
    Aad,
    AadTail,
    Text,
    /// The text's padded last block, then the lengths.
    TextTail,
    /// The lengths alone.
    Lengths,
}

/// The MAC input of a job as up to four runs of whole blocks: aad, its padded
/// tail, text, then the padded text tail and the lengths. Jobs of one shape (the
/// same aad and text lengths) have the same parts.
fn parts(j: &Job, s: &mut [(Part, usize); 4]) -> usize {
    let mut n = 0;
    let mut push = |part: Part, blocks: usize| {
        if blocks > 0 {
            s[n] = (part, blocks);
            n += 1;
        }
    };
    push(Part::Aad, j.aad_len as usize / 16);
    push(Part::AadTail, !j.aad_len.is_multiple_of(16) as usize);
    push(Part::Text, j.len / 16);
    if !j.len.is_multiple_of(16) {
        push(Part::TextTail, 2);
    } else {
        push(Part::Lengths, 1);
    }
    n
}

/// Where each [`Part`] of job `j` starts, its tail slot at `tail`.
fn part_starts(j: &Job, base: *const u8, tail: *const u8) -> [*const u8; 5] {
    [
        base.wrapping_add(j.aad),
        tail,
        base.wrapping_add(j.text),
        tail.wrapping_add(16),
        tail.wrapping_add(32),
    ]
}

/// The MAC input of one job as up to four runs of whole blocks (see [`parts`]),
/// each as where it starts and how many blocks.
/// Written in place: building an array and returning it made the copy wait on a
/// store-to-load forward that fails for the variable-index stores.
fn segments(j: &Job, base: *const u8, tail: *const u8, s: &mut [(*const u8, usize); 4]) -> usize {
    let mut p = [(Part::Lengths, 0); 4];
    let n = parts(j, &mut p);
    let starts = part_starts(j, base, tail);
    for (s, &(part, blocks)) in s.iter_mut().zip(&p[..n]) {
        *s = (starts[part as usize], blocks);
    }
    n
}

/// Writes the MAC input blocks that are not in packet memory into `tail`.
///
/// # Safety
/// The job's aad and text ranges lie in the memory at `base`.
pub(crate) unsafe fn fill_tail(j: &Job, base: *const u8, tail: &mut [u8; 48]) {
    let (a, t) = (j.aad_len as usize % 16, j.len % 16);
    // Only what the segments will read: WireGuard pads its plaintext to 16 bytes and
    // has no aad, so usually just the lengths.
    if a != 0 {
        tail[..16].fill(0);
        // SAFETY: the aad's last partial block is inside the memory; at most 15 bytes
        // go to the tail's first block.
        unsafe {
            core::ptr::copy_nonoverlapping(
                base.add(j.aad + j.aad_len as usize - a),
                tail.as_mut_ptr(),
                a,
            )
        };
    }
    if t != 0 {
        tail[16..32].fill(0);
        // SAFETY: as above, for the text's last partial block into the second block.
        unsafe {
            core::ptr::copy_nonoverlapping(
                base.add(j.text + j.len - t),
                tail.as_mut_ptr().add(16),
                t,
            )
        };
    }
    tail[32..40].copy_from_slice(&(j.aad_len as u64).to_le_bytes());
    tail[40..].copy_from_slice(&(j.len as u64).to_le_bytes());
}

/// Runs Poly1305 over the MAC input of every job in `order` and leaves each
/// accumulator, not yet reduced, in `acc[job]` (see `finish`).
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
    acc: &mut [[u64; 5]],
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
                    // Limb by limb from the kernel's arrays: a `Limbs` built on the
                    // stack and copied in stalled on store-to-load forwarding.
                    let a = &mut acc[job[lane]];
                    for (a, h) in a.iter_mut().zip(&st.h) {
                        *a = h[lane];
                    }
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
                segs[lane].1 = segments(j, base, t.as_ptr(), &mut segs[lane].0);
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

/// Poly1305 for whole groups of `k.lanes` jobs of one shape (the same text and aad
/// lengths), the usual make-up of a data path's vector. The lanes of a group run the
/// same segments in step, so they start together, run with no refill in between and
/// finish together, and the path's vector code clamps their keys and makes their
/// tags (`k.poly_group`) instead of scalar code lane by lane. Tags go where `out`
/// says. The jobs of `order` that make no whole group are appended to `rest`, in
/// order, for [`poly`] and [`finish`].
///
/// # Safety
/// As [`poly`], with `out` a slot for every listed job (`Slots`), or the memory at
/// `base` (`Packets`: writable, and the jobs' tags in it).
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn poly_groups(
    k: &Kernels,
    jobs: &[Job],
    order: &[u32],
    base: *const u8,
    otk: *const [u8; 64],
    tail: *mut [u8; 48],
    out: MacOut,
    uniform: bool,
    rest: &mut Vec<u32>,
) {
    let shape = |i: u32| {
        let j = &jobs[i as usize];
        (j.len, j.aad_len)
    };
    let mut st = PolyLanes::idle(k.radix);
    let mut lanes = GroupLanes::new();
    groups_of_one_shape(order, k.lanes, uniform, shape, rest, |members| {
        // SAFETY: as the caller guarantees for every listed job.
        unsafe { poly_group(k, &mut st, &mut lanes, jobs, members, base, otk, tail, out) };
    });
}

/// Where each lane of a group reads and writes. Made once per [`poly_groups`] and
/// overwritten by each group: made afresh per group, its zeros cost as much as the
/// group's tags.
struct GroupLanes {
    starts: [[*const u8; 5]; MAX_LANES],
    keys: [*const u8; MAX_LANES],
    macs: [*mut u8; MAX_LANES],
}

impl GroupLanes {
    fn new() -> GroupLanes {
        GroupLanes {
            starts: [[core::ptr::null(); 5]; MAX_LANES],
            keys: [core::ptr::null(); MAX_LANES],
            macs: [core::ptr::null_mut(); MAX_LANES],
        }
    }
}

/// One group of [`poly_groups`]: `members` are `k.lanes` jobs of one shape, so one
/// list of parts serves every lane, and only where each part starts differs.
///
/// # Safety
/// As [`poly_groups`].
#[allow(clippy::too_many_arguments)]
unsafe fn poly_group(
    k: &Kernels,
    st: &mut PolyLanes,
    lanes: &mut GroupLanes,
    jobs: &[Job],
    members: &[u32],
    base: *const u8,
    otk: *const [u8; 64],
    tail: *mut [u8; 48],
    out: MacOut,
) {
    let GroupLanes { starts, keys, macs } = lanes;
    let first = &jobs[members[0] as usize];
    let mut plan = [(Part::Lengths, 0); 4];
    let n = parts(first, &mut plan);
    // Without a partial aad or text block (WireGuard's packets) the tail holds only
    // the lengths, which one shape shares: written once, in the first job's slot,
    // and read by every lane.
    let shared = (first.aad_len.is_multiple_of(16) && first.len.is_multiple_of(16)).then(|| {
        let t = tail.wrapping_add(members[0] as usize);
        // SAFETY: the first job's slot exists and its ranges are in the memory (caller).
        unsafe { fill_tail(first, base, &mut *t) };
        t.cast_const().cast::<u8>()
    });
    for (lane, &i) in members.iter().enumerate() {
        let (i, j) = (i as usize, &jobs[i as usize]);
        let t = match shared {
            Some(t) => t,
            None => {
                // SAFETY: slot i exists and the job's ranges are in the memory (caller).
                let t = unsafe { &mut *tail.add(i) };
                unsafe { fill_tail(j, base, t) };
                t.as_ptr()
            }
        };
        starts[lane] = part_starts(j, base, t);
        keys[lane] = otk.wrapping_add(i).cast();
        macs[lane] = match out {
            MacOut::Slots(mac) => mac.wrapping_add(i).cast(),
            MacOut::Packets(base) => base.wrapping_add(j.tag),
        };
    }
    // SAFETY: every lane's key slot holds 32 readable bytes and its mac slot 16
    // writable ones (caller); each part's blocks are in the memory or the tail.
    unsafe {
        (k.poly_group.start)(st, keys);
        for &(part, blocks) in &plan[..n] {
            for (p, at) in st.ptr.iter_mut().zip(starts.iter()).take(k.lanes) {
                *p = at[part as usize];
            }
            (k.poly)(st, blocks);
        }
        (k.poly_group.tags)(st, keys, macs);
    }
}

/// The tags of the jobs in `order` from their accumulators (limbs in `radix`) and
/// one-time keys.
pub(crate) fn finish(
    radix: Radix,
    order: &[u32],
    acc: &[[u64; 5]],
    otk: &[[u8; 64]],
    mac: &mut [[u8; 16]],
) {
    for &i in order {
        let (i, a) = (i as usize, &acc[i as usize]);
        let h = match radix {
            Radix::R44 => Limbs([a[0], a[1], a[2]]),
            Radix::R26 => Limbs::from_radix26(*a),
        };
        mac[i] = h.tag(otk[i][16..32].try_into().expect("16 bytes"));
    }
}

/// Where the MAC pass's group kernels write each job's tag.
#[derive(Clone, Copy)]
pub(crate) enum MacOut {
    /// Into the job's slot of `Scratch::mac` (at this pointer to slot 0).
    Slots(*mut [u8; 16]),
    /// Into the packet, at the job's tag offset from this base.
    Packets(*mut u8),
}
