//! Takes a whole vector of ops and runs it: validates each op, sends each down the
//! path that suits its size, and orders the passes so that a decryption's tag is
//! checked before any of its plaintext exists.
//!
//! The passes, for the vector paths:
//! 1. keystream block 0 of every decryption (its Poly1305 one-time key; an
//!    encryption's comes in the same lane as its text, in pass 3);
//! 2. Poly1305 over the ciphertext of every decryption, then the constant-time tag
//!    comparison;
//! 3. ChaCha20 over every encryption and every decryption that verified;
//! 4. Poly1305 over the ciphertext of every encryption, written as its tag;
//! 5. failed decryptions get their output zeroed.
//!
//! Long ops that would hold a lane busy after the others drained go through the
//! block path (one packet across all lanes), the rest through the lanes, longest
//! first (see [`Split`]).

use crate::dispatch::Kernels;
use crate::job::{Census, Job, Scratch};
use crate::lane_path::MacOut;
use crate::longest_first::LengthBuckets;
use crate::{block_path, lane_path, scalar};
use crypto::{AeadOp, OpStatus};

/// Lists of job indices, kept between calls so that a steady state allocates nothing.
#[derive(Default)]
pub(crate) struct Lists {
    buckets: LengthBuckets,
    lane: Vec<u32>,
    block: Vec<u32>,
    pick: Vec<u32>,
    rest: Vec<u32>,
}

/// The verdict on a decryption's tag, as a status, in constant time: the XOR of
/// the two tags is OR-folded into one word, and only that word (zero or not, the
/// verdict itself) decides anything. `black_box` keeps the compiler from turning
/// the fold back into a comparison that stops at the first differing half.
/// (`subtle`'s byte-wise `ct_eq` does the same with a barrier per byte, which cost
/// a sixth of the time of a 64-byte decryption.)
fn verdict(mac: &[u8; 16], tag: &[u8]) -> OpStatus {
    let tag: &[u8; 16] = tag.try_into().expect("16-byte tag");
    let x = u128::from_le_bytes(*mac) ^ u128::from_le_bytes(*tag);
    let folded = core::hint::black_box(x as u64 | (x >> 64) as u64);
    if folded == 0 {
        OpStatus::Ok
    } else {
        OpStatus::BadTag
    }
}

/// The scalar path: each job start to end.
pub(crate) fn run_scalar(jobs: &[Job], mem: &mut [u8], ops: &mut [AeadOp]) {
    for j in jobs {
        // SAFETY: a job's row is its key's, live until the engine's call returns.
        let (key, nonce) = (unsafe { &*j.row }.key(), j.nonce);
        let otk = scalar::block(&key, 0, &nonce);
        let text = j.text..j.text + j.len;
        let aad = j.aad..j.aad + j.aad_len as usize;
        let status = if j.decrypt {
            let mac = scalar::aead_tag(&otk, &mem[aad], &mem[text.clone()]);
            let status = verdict(&mac, &mem[j.tag..j.tag + 16]);
            if status == OpStatus::Ok {
                scalar::xor_keystream(&key, &nonce, 1, &mut mem[text]);
            } else {
                mem[text].fill(0);
            }
            status
        } else {
            scalar::xor_keystream(&key, &nonce, 1, &mut mem[text.clone()]);
            let mac = scalar::aead_tag(&otk, &mem[aad], &mem[text]);
            mem[j.tag..j.tag + 16].copy_from_slice(&mac);
            OpStatus::Ok
        };
        ops[j.op as usize].status = status;
    }
}

/// How ops are split between the lane-parallel and the block-parallel path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Split {
    /// An op goes through the block path when it is at least `min_len` bytes and
    /// longer (in ChaCha20 blocks) than the average lane's share of the vector with
    /// it: in the lanes it would keep one lane busy after the others drained.
    /// Checked longest first, each op that leaves taking its share with it.
    Adaptive { min_len: usize },
    /// Ops of at least this many bytes go through the block path (for measurements:
    /// `usize::MAX` is lanes only, 0 block path only).
    Threshold(usize),
}

/// ChaCha20 blocks of a job, one-time key included.
fn blocks(j: &Job) -> usize {
    1 + j.len.div_ceil(64)
}

/// Fills `lists.lane` (longest first) and `lists.block`.
fn split(k: &Kernels, how: Split, jobs: &[Job], uniform: bool, lists: &mut Lists) {
    lists.lane.clear();
    lists.block.clear();
    lists.lane.extend(0..jobs.len() as u32);
    // Longest first: the lanes drain on the shortest packets (see lane_path). Equal
    // lengths, the common case, are in order already.
    let longer_first = |a: &u32, b: &u32| jobs[*a as usize].len >= jobs[*b as usize].len;
    if !uniform && !lists.lane.is_sorted_by(longer_first) {
        lists
            .buckets
            .longest_first(jobs.len(), |i| jobs[i].len, &mut lists.lane);
    }
    let cut = match how {
        Split::Threshold(t) => lists.lane.partition_point(|&i| jobs[i as usize].len >= t),
        // The longest job is first: shorter than `min_len`, none leaves the lanes
        // (the common vector of small packets, decided without counting blocks).
        Split::Adaptive { min_len }
            if lists
                .lane
                .first()
                .is_none_or(|&i| jobs[i as usize].len < min_len) =>
        {
            0
        }
        Split::Adaptive { min_len } => {
            let mut rest: usize = jobs.iter().map(blocks).sum();
            let mut cut = 0;
            for &i in &lists.lane {
                let j = &jobs[i as usize];
                if j.len < min_len || blocks(j) * k.chacha_lanes <= rest {
                    break;
                }
                rest -= blocks(j);
                cut += 1;
            }
            cut
        }
    };
    lists.block.extend(lists.lane.drain(..cut));
}

/// The vector paths.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_vector(
    k: &Kernels,
    how: Split,
    jobs: &[Job],
    census: Census,
    scratch: &mut Scratch,
    lists: &mut Lists,
    mem: &mut [u8],
    ops: &mut [AeadOp],
) {
    debug_assert_eq!(census, Census::of(jobs));
    let uniform = census.uniform;
    scratch.reset(jobs.len());
    split(k, how, jobs, uniform, lists);

    // SAFETY (every unsafe block below): `k` came from `Kernels::for_path`, which
    // checked the CPU; every job was validated against `mem` (its ranges lie inside,
    // its output overlaps neither its aad nor its tag); the raw pointers come from
    // `mem` and `scratch` just before each pass, and neither is otherwise used until
    // the pass returns. Slots of `scratch` exist for every job index (reset above).

    // A data path's vector is usually all one direction: the passes of the other
    // are skipped, not run over an empty list, and the lane order serves a pass
    // as it is where every job of the list qualifies.
    let decrypts = census.decrypts;
    let encrypts = jobs.len() - decrypts;
    let Lists {
        lane,
        block,
        pick,
        rest,
        ..
    } = lists;

    // 1. One-time keys of decryptions, needed first; encryptions make theirs in the
    // same pass as their text (pass 3).
    let mut failed = 0;
    if decrypts > 0 {
        pick.clear();
        pick.extend((0..jobs.len() as u32).filter(|&i| jobs[i as usize].decrypt));
        // SAFETY: as stated at the top of this function.
        unsafe { chacha_pass(k, jobs, pick, uniform, rest, scratch, mem, false) };

        // 2. Tags of decryptions, checked before any of their plaintext is made.
        let order = one_direction(jobs, lane, pick, encrypts == 0, true);
        mac_pass(k, jobs, order, block, uniform, rest, scratch, mem, true);
        for (i, j) in jobs.iter().enumerate().filter(|(_, j)| j.decrypt) {
            ops[j.op as usize].status = verdict(&scratch.mac[i], &mem[j.tag..j.tag + 16]);
            failed += (ops[j.op as usize].status != OpStatus::Ok) as usize;
        }
    }

    // 3. ChaCha20 over encryptions and decryptions that verified.
    let wanted = |j: &Job| !j.decrypt || ops[j.op as usize].status == OpStatus::Ok;
    let order: &[u32] = if failed == 0 {
        lane
    } else {
        pick.clear();
        pick.extend(lane.iter().filter(|&&i| wanted(&jobs[i as usize])));
        pick
    };
    // SAFETY: as stated at the top of this function.
    unsafe { chacha_pass(k, jobs, order, uniform, rest, scratch, mem, true) };
    let otk = scratch.otk.as_mut_ptr();
    let base = mem.as_mut_ptr();
    for &i in block.iter() {
        let j = &jobs[i as usize];
        if wanted(j) {
            // SAFETY: as above; slot i exists.
            let key = (!j.decrypt).then(|| unsafe { otk.add(i as usize) }.cast());
            // SAFETY: as stated at the top of this function.
            unsafe { block_path::chacha(k, j, base, key) };
        }
    }

    // 4. Tags of encryptions, written into the packets (their statuses are `Ok`
    // since the engine took them: nothing after validation can fail an encryption).
    if encrypts > 0 {
        let order = one_direction(jobs, lane, pick, decrypts == 0, false);
        mac_pass(k, jobs, order, block, uniform, rest, scratch, mem, false);
    }

    // 5. No unauthenticated output: a failed decryption leaves zeros.
    if failed > 0 {
        for j in jobs.iter().filter(|j| j.decrypt) {
            if ops[j.op as usize].status != OpStatus::Ok {
                mem[j.text..j.text + j.len].fill(0);
            }
        }
    }
}

/// The lane order's jobs of one direction: the lane order itself when `all` of
/// them are of it, else those picked out into `pick`.
fn one_direction<'a>(
    jobs: &[Job],
    lane: &'a [u32],
    pick: &'a mut Vec<u32>,
    all: bool,
    decrypt: bool,
) -> &'a [u32] {
    if all {
        return lane;
    }
    pick.clear();
    pick.extend(
        lane.iter()
            .filter(|&&i| jobs[i as usize].decrypt == decrypt),
    );
    pick
}

/// ChaCha20 through the lanes for the jobs in `order` (see `lane_path::chacha` for
/// `text`): whole groups of one shape first, the rest lane by lane.
///
/// # Safety
/// As in `run_vector`, for the jobs in `order`.
#[allow(clippy::too_many_arguments)]
unsafe fn chacha_pass(
    k: &Kernels,
    jobs: &[Job],
    order: &[u32],
    uniform: bool,
    rest: &mut Vec<u32>,
    scratch: &mut Scratch,
    mem: &mut [u8],
    text: bool,
) {
    let otk = scratch.otk.as_mut_ptr();
    let base = mem.as_mut_ptr();
    rest.clear();
    // SAFETY: as the caller guarantees.
    unsafe {
        lane_path::chacha_groups(k, jobs, order, otk, base, text, uniform, rest);
        lane_path::chacha(k, jobs, rest, otk, base, text);
    }
}

/// Poly1305 over `order` (the lane order's jobs of one direction) and the block
/// path's jobs of that direction: decryptions' tags into `scratch.mac`, for the
/// comparison; encryptions' into the packets.
#[allow(clippy::too_many_arguments)]
fn mac_pass(
    k: &Kernels,
    jobs: &[Job],
    order: &[u32],
    block: &[u32],
    uniform: bool,
    rest: &mut Vec<u32>,
    scratch: &mut Scratch,
    mem: &mut [u8],
    decrypt: bool,
) {
    let base_mut = mem.as_mut_ptr();
    let base = base_mut.cast_const();
    let (otk, tail) = (scratch.otk.as_ptr(), scratch.tail.as_mut_ptr());
    let mac = scratch.mac.as_mut_ptr();
    let out = if decrypt {
        MacOut::Slots(mac)
    } else {
        MacOut::Packets(base_mut)
    };
    // Whole groups of one shape first; what is left goes lane by lane below.
    rest.clear();
    // SAFETY: as in `run_vector`; this pass reads the aad and text of packet memory
    // and writes only encryptions' tags, each of which overlaps neither its own op's
    // aad nor its text (validated) nor, by the engine's contract (ops of one vector
    // do not overlap each other's memory), any other op's: reads and writes go
    // through the one base pointer.
    unsafe { lane_path::poly_groups(k, jobs, order, base, otk, tail, out, uniform, rest) };
    // SAFETY: as in `run_vector`; this pass only reads packet memory.
    unsafe { lane_path::poly(k, jobs, rest, base, otk, tail, &mut scratch.acc) };
    lane_path::finish(k.radix, rest, &scratch.acc, &scratch.otk, &mut scratch.mac);
    for &i in block {
        let (i, j) = (i as usize, &jobs[i as usize]);
        if j.decrypt == decrypt {
            // SAFETY: as above.
            scratch.mac[i] =
                unsafe { block_path::poly(k, j, base, &scratch.otk[i], &mut scratch.tail[i]) };
        }
    }
    if !decrypt {
        for &i in rest
            .iter()
            .chain(block.iter().filter(|&&i| !jobs[i as usize].decrypt))
        {
            let j = &jobs[i as usize];
            mem[j.tag..j.tag + 16].copy_from_slice(&scratch.mac[i as usize]);
        }
    }
}
