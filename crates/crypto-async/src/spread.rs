//! Spreading one worker's batch of ops over the other workers, a crypto scheduler as
//! VPP has: a tunnel's packets arrive on one queue, so one worker finds a whole frame
//! to decrypt while the others may have little of their own.
//!
//! Every worker has a [`Spreader`] on one shared [`SpreadBoard`]. A worker with a
//! frame of ops cuts it into pieces, one for itself and one for each worker that is
//! lingering (polling without sleeping, because it helped or was asked to recently),
//! posts the other pieces on its own slots of the board, and runs its own piece.
//! Lingering workers take posted pieces between their own batches and run them on
//! their own engines. When its piece is done the poster takes back every piece nobody
//! took and runs it itself, and waits for the ones being run elsewhere (a taken piece
//! is always being run: a helper never waits while it holds one). So a frame is whole
//! again when `process` returns: packets leave in the order they came, and no busy or
//! sleeping worker can hold a frame up for longer than its piece takes.
//!
//! When no worker lingers, the poster runs the whole frame and asks one worker to
//! linger (its wake-up, at most once per [`LINGER`]), so that the next frames spread.
//!
//! Memory is shared by pointer, as with the asynchronous engine: the poster's buffer
//! memory and op vector are lent to the helper for the time of one `process` call,
//! which does not return before every piece is back. Pieces cover disjoint ops, and
//! the data path's ops each cover their own packet buffer.

use crypto::{AeadOp, Engine, KeyRegistry};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Pieces a frame is cut into at most (the poster's own included).
pub const MAX_PIECES: usize = 8;
/// Frames of fewer ops are not worth cutting: each piece costs the helper a few cache
/// misses on the ops and the packets.
pub const MIN_SPREAD: usize = 32;
/// How long a worker keeps polling without sleeping after it helped or was asked.
pub const LINGER: Duration = Duration::from_micros(500);
/// Spins while waiting for a helper's piece before yielding the core (a piece of a
/// frame takes some tens of microseconds).
const SPINS_BEFORE_YIELD: u32 = 20_000;

const EMPTY: u32 = 0;
const POSTED: u32 = 1;
const TAKEN: u32 = 2;
const DONE: u32 = 3;

/// One posted piece: where its memory and ops are, and the registry its keys are in.
#[derive(Clone, Copy)]
struct Piece {
    mem: *mut u8,
    mem_len: usize,
    ops: *mut AeadOp,
    count: usize,
    keys: *const KeyRegistry,
}

impl Piece {
    const NONE: Piece = Piece {
        mem: std::ptr::null_mut(),
        mem_len: 0,
        ops: std::ptr::null_mut(),
        count: 0,
        keys: std::ptr::null(),
    };
}

/// A slot of the board, on its own cache line.
#[repr(align(64))]
struct Slot {
    state: AtomicU32,
    piece: UnsafeCell<Piece>,
}

// SAFETY: `piece` is written only by the slot's owner while the state is EMPTY (nobody
// else reads it then), and read by the one helper whose compare-and-swap moved the
// state from POSTED to TAKEN; the state's release and acquire order those accesses.
unsafe impl Sync for Slot {}
// SAFETY: the pointers in `piece` are only followed under the protocol above, by
// whichever thread holds the piece; the slot itself may live anywhere.
unsafe impl Send for Slot {}

/// What the board knows of one worker.
#[repr(align(64))]
#[derive(Default)]
struct Member {
    /// Polling without sleeping: it will take a posted piece soon.
    lingering: AtomicBool,
    /// Asked to linger by a worker with a full frame.
    asked: AtomicBool,
    /// Wakes the worker from its sleep.
    wake: OnceLock<Box<dyn Fn() + Send + Sync>>,
}

/// The board every worker posts pieces on and takes them from.
pub struct SpreadBoard {
    slots: Box<[Slot]>,
    members: Box<[Member]>,
}

impl SpreadBoard {
    pub fn new(workers: usize) -> Arc<SpreadBoard> {
        let workers = workers.max(1);
        Arc::new(SpreadBoard {
            slots: (0..workers * (MAX_PIECES - 1))
                .map(|_| Slot {
                    state: AtomicU32::new(EMPTY),
                    piece: UnsafeCell::new(Piece::NONE),
                })
                .collect(),
            members: (0..workers).map(|_| Member::default()).collect(),
        })
    }

    pub fn workers(&self) -> usize {
        self.members.len()
    }

    /// Worker `me`'s side of the board. `wake` wakes it from its sleep (an eventfd
    /// write, say); it is set once.
    pub fn spreader(
        self: &Arc<Self>,
        me: usize,
        wake: impl Fn() + Send + Sync + 'static,
    ) -> Spreader {
        assert!(me < self.workers(), "worker {me} of {}", self.workers());
        let _ = self.members[me].wake.set(Box::new(wake));
        Spreader {
            board: self.clone(),
            me,
            linger_until: None,
            last_ask: None,
            counters: SpreadCounters::default(),
        }
    }

    fn own_slots(&self, me: usize) -> &[Slot] {
        &self.slots[me * (MAX_PIECES - 1)..(me + 1) * (MAX_PIECES - 1)]
    }
}

/// What a worker's spreader did, for its counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpreadCounters {
    /// Frames cut into pieces.
    pub spread: u64,
    /// Pieces posted that another worker ran.
    pub pieces_helped: u64,
    /// Pieces posted that nobody took in time, run by the poster.
    pub pieces_taken_back: u64,
    /// Other workers' pieces this worker ran.
    pub pieces_run_for_others: u64,
    /// Times this worker asked another to linger.
    pub asks: u64,
}

/// One worker's side of the board: see the module doc.
pub struct Spreader {
    board: Arc<SpreadBoard>,
    me: usize,
    linger_until: Option<Instant>,
    last_ask: Option<Instant>,
    counters: SpreadCounters,
}

impl Spreader {
    pub fn counters(&self) -> SpreadCounters {
        self.counters
    }

    /// Runs every op of `ops` on `engine`, pieces of it on lingering workers; returns
    /// when every op has its status.
    pub fn process(
        &mut self,
        engine: &mut dyn Engine,
        keys: &KeyRegistry,
        mem: &mut [u8],
        ops: &mut [AeadOp],
    ) {
        let helpers = self.lingering_others();
        if ops.len() < MIN_SPREAD || helpers == 0 {
            if ops.len() >= MIN_SPREAD {
                self.ask_one();
            }
            engine.process(keys, mem, ops);
            return;
        }
        self.counters.spread += 1;
        let pieces = (helpers + 1).min(MAX_PIECES).min(ops.len());
        let size = ops.len().div_ceil(pieces);
        let (own, rest) = ops.split_at_mut(size.min(ops.len()));
        let slots = self.board.own_slots(self.me);
        let mut posted = 0;
        for (slot, chunk) in slots.iter().zip(rest.chunks_mut(size)) {
            let piece = Piece {
                mem: mem.as_mut_ptr(),
                mem_len: mem.len(),
                ops: chunk.as_mut_ptr(),
                count: chunk.len(),
                keys,
            };
            // SAFETY: the slot is EMPTY (every piece of the last call came back), so
            // no other thread reads `piece` until the release store below.
            unsafe { *slot.piece.get() = piece };
            slot.state.store(POSTED, Ordering::Release);
            posted += 1;
        }
        engine.process(keys, mem, own);
        for slot in &slots[..posted] {
            match slot
                .state
                .compare_exchange(POSTED, EMPTY, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    self.counters.pieces_taken_back += 1;
                    // SAFETY: taken back before any helper took it: this thread alone
                    // holds the piece, whose ops lie in `rest` (disjoint from `own`).
                    let p = unsafe { *slot.piece.get() };
                    let ops = unsafe { std::slice::from_raw_parts_mut(p.ops, p.count) };
                    engine.process(keys, mem, ops);
                }
                Err(_) => {
                    // A helper holds it and is running it: it never waits meanwhile,
                    // but it may have lost its core (more threads than cores): after
                    // a short spin, give the core up until it is done.
                    let mut spins = 0u32;
                    while slot.state.load(Ordering::Acquire) != DONE {
                        if spins < SPINS_BEFORE_YIELD {
                            spins += 1;
                            std::hint::spin_loop();
                        } else {
                            std::thread::yield_now();
                        }
                    }
                    slot.state.store(EMPTY, Ordering::Relaxed);
                    self.counters.pieces_helped += 1;
                }
            }
        }
    }

    /// Runs the pieces other workers posted, on `engine`; returns how many. A worker
    /// calls it between its own batches while it lingers.
    pub fn help(&mut self, engine: &mut dyn Engine) -> usize {
        let mut ran = 0;
        let workers = self.board.workers();
        for other in (1..workers).map(|k| (self.me + k) % workers) {
            for slot in self.board.own_slots(other) {
                if slot.state.load(Ordering::Relaxed) != POSTED
                    || slot
                        .state
                        .compare_exchange(POSTED, TAKEN, Ordering::AcqRel, Ordering::Relaxed)
                        .is_err()
                {
                    continue;
                }
                // SAFETY: this thread's compare-and-swap took the piece; its poster
                // keeps the memory, the ops and the registry alive and leaves these
                // ops alone until the DONE store below (see the module doc).
                let p = unsafe { *slot.piece.get() };
                let (mem, ops, keys) = unsafe {
                    (
                        std::slice::from_raw_parts_mut(p.mem, p.mem_len),
                        std::slice::from_raw_parts_mut(p.ops, p.count),
                        &*p.keys,
                    )
                };
                engine.process(keys, mem, ops);
                slot.state.store(DONE, Ordering::Release);
                ran += 1;
            }
        }
        if ran > 0 {
            self.counters.pieces_run_for_others += ran as u64;
            self.linger_at_least(Instant::now() + LINGER);
        }
        ran
    }

    /// How long the worker may sleep in its poll, given what it would sleep for its
    /// own sake: not at all while it lingers (and it says so on the board).
    pub fn sleep(&mut self, own: Duration) -> Duration {
        let now = Instant::now();
        if self.board.members[self.me]
            .asked
            .swap(false, Ordering::AcqRel)
        {
            self.linger_at_least(now + LINGER);
        }
        let lingering = self.linger_until.is_some_and(|t| now < t);
        self.board.members[self.me]
            .lingering
            .store(lingering, Ordering::Release);
        if lingering { Duration::ZERO } else { own }
    }

    fn linger_at_least(&mut self, until: Instant) {
        self.linger_until = Some(self.linger_until.map_or(until, |t| t.max(until)));
    }

    fn lingering_others(&self) -> usize {
        self.board
            .members
            .iter()
            .enumerate()
            .filter(|&(i, m)| i != self.me && m.lingering.load(Ordering::Acquire))
            .count()
    }

    /// Asks the next worker that is not lingering to linger, at most once a LINGER.
    fn ask_one(&mut self) {
        let now = Instant::now();
        if self.last_ask.is_some_and(|t| now < t + LINGER) {
            return;
        }
        self.last_ask = Some(now);
        let workers = self.board.workers();
        for other in (1..workers).map(|k| (self.me + k) % workers) {
            let m = &self.board.members[other];
            if !m.lingering.load(Ordering::Acquire) {
                m.asked.store(true, Ordering::Release);
                if let Some(wake) = m.wake.get() {
                    wake();
                }
                self.counters.asks += 1;
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crypto::{Algorithm, Direction, OpStatus, Span, TAG_LEN};

    const LEN: usize = 200;
    const STRIDE: usize = LEN + TAG_LEN;

    fn ops(keys: &KeyRegistry, key: crypto::KeyHandle, n: usize, d: Direction) -> Vec<AeadOp> {
        let _ = keys;
        (0..n)
            .map(|i| {
                let mut nonce = [0; 12];
                nonce[..8].copy_from_slice(&(i as u64).to_le_bytes());
                AeadOp::in_place(
                    Algorithm::ChaCha20Poly1305,
                    key,
                    d,
                    nonce,
                    Span::EMPTY,
                    Span::new((i * STRIDE) as u32, LEN as u32),
                )
            })
            .collect()
    }

    /// Three workers: one posts frames, two linger and help. Every op comes back done,
    /// and the bytes are what one engine alone makes of them.
    #[test]
    fn spread_frames_come_back_whole_and_right() {
        let keys = Arc::new(KeyRegistry::new(4));
        let key = keys.insert(Algorithm::ChaCha20Poly1305, &[9; 32]).unwrap();
        let board = SpreadBoard::new(3);
        let stop = Arc::new(AtomicBool::new(false));
        let helpers: Vec<_> = (1..3)
            .map(|w| {
                let (board, stop) = (board.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut s = board.spreader(w, || {});
                    let mut engine = crypto_awslc::AwsLcEngine::new();
                    s.linger_until = Some(Instant::now() + Duration::from_secs(60));
                    while !stop.load(Ordering::Relaxed) {
                        s.sleep(Duration::from_millis(1));
                        s.help(&mut engine);
                    }
                    s.counters().pieces_run_for_others
                })
            })
            .collect();
        let mut me = board.spreader(0, || {});
        let mut engine = crypto_awslc::AwsLcEngine::new();
        let n = 256;
        let plain: Vec<u8> = (0..n * STRIDE).map(|i| (i % 253) as u8).collect();
        let mut expected = plain.clone();
        let mut reference = crypto_awslc::AwsLcEngine::new();
        reference.process(
            &keys,
            &mut expected,
            &mut ops(&keys, key, n, Direction::Encrypt),
        );
        // Wait until both helpers say they linger.
        while me.lingering_others() < 2 {
            std::thread::yield_now();
        }
        for round in 0..200 {
            let mut mem = plain.clone();
            let mut v = ops(&keys, key, n, Direction::Encrypt);
            me.process(&mut engine, &keys, &mut mem, &mut v);
            assert!(v.iter().all(|o| o.status == OpStatus::Ok), "round {round}");
            assert!(mem == expected, "round {round}: bytes differ");
        }
        stop.store(true, Ordering::Relaxed);
        let ran: u64 = helpers.into_iter().map(|h| h.join().unwrap()).sum();
        let c = me.counters();
        assert_eq!(c.spread, 200);
        assert_eq!(
            c.pieces_helped, ran,
            "what the helpers ran, the poster saw done"
        );
        assert_eq!(c.pieces_helped + c.pieces_taken_back, 400);
    }

    /// With nobody lingering the poster runs the frame itself and asks one worker,
    /// once per LINGER; the asked worker lingers at its next look.
    #[test]
    fn alone_the_poster_runs_everything_and_asks_for_help() {
        let keys = KeyRegistry::new(4);
        let key = keys.insert(Algorithm::ChaCha20Poly1305, &[1; 32]).unwrap();
        let board = SpreadBoard::new(2);
        let woken = Arc::new(AtomicU32::new(0));
        let w = woken.clone();
        let mut helper = board.spreader(1, move || {
            w.fetch_add(1, Ordering::Relaxed);
        });
        let mut me = board.spreader(0, || {});
        let mut engine = crypto_awslc::AwsLcEngine::new();
        let mut mem = vec![0u8; 64 * STRIDE];
        let start = std::time::Instant::now();
        for _ in 0..3 {
            let mut v = ops(&keys, key, 64, Direction::Encrypt);
            me.process(&mut engine, &keys, &mut mem, &mut v);
            assert!(v.iter().all(|o| o.status == OpStatus::Ok));
        }
        // Once per LINGER: once, unless a busy machine stretched the three frames
        // over more of them.
        let lingers = start.elapsed().as_micros() / LINGER.as_micros();
        let asked = u128::from(woken.load(Ordering::Relaxed));
        assert!(
            (1..=1 + lingers).contains(&asked),
            "asked {asked} times in {lingers} LINGERs"
        );
        assert_eq!(me.counters().spread, 0);
        assert_eq!(helper.sleep(Duration::from_millis(100)), Duration::ZERO);
        assert_eq!(me.lingering_others(), 1);
        // Small frames are never cut.
        let mut v = ops(&keys, key, MIN_SPREAD - 1, Direction::Encrypt);
        me.process(&mut engine, &keys, &mut mem, &mut v);
        assert_eq!(me.counters().spread, 0);
        // A frame posted while the helper does not run is taken back whole.
        let mut v = ops(&keys, key, 64, Direction::Encrypt);
        me.process(&mut engine, &keys, &mut mem, &mut v);
        assert!(v.iter().all(|o| o.status == OpStatus::Ok));
        assert_eq!(me.counters().pieces_taken_back, 1);
    }
}
