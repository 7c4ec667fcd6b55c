//! The inbound anti-replay window of an SA (RFC 4303 section 3.4.3 and Appendix A),
//! with extended sequence numbers, shared by every worker that decrypts for the SA.
//!
//! A window of size W accepts a sequence number once, and only while it is at most
//! W - 1 behind the newest number accepted: with T the newest, any number from
//! T - W + 1 on, T and those after it included. The number 0 is never accepted, as a
//! sender's first is 1 (section 3.3.3). Before any packet, T counts as 0.
//!
//! With extended sequence numbers (section 2.2.1) a packet carries only the low 32
//! bits of its number; the receiver infers the high 32 from the window (Appendix
//! A2.2): the number is the one with those low bits from T - W + 1 up to 2^32 - 1
//! past it, that is in the window or ahead of it. A number really further behind is
//! taken for one ahead, the ICV (computed over the inferred high bits) does not
//! verify, and the packet is dropped without touching the window. While T is below
//! W - 1 the range starts below 0, and a number that would fall there is refused as
//! too old: no number before the first was ever sent. Without extended sequence
//! numbers the number is the 32 bits on the wire.
//!
//! Workers commit concurrently and without a lock, on the ring of tagged blocks
//! that WireGuard's window uses too (`replay_window::SeenRing`). Under concurrency a
//! worker decides with the newest number it has seen; the window it used may be a
//! moment old, but a number is still accepted at most once.
//!
//! Checking and committing are separate: the data path checks before it spends a
//! decryption on a packet, and commits only after the ICV has verified, so a forged
//! packet can never move the window.
//!
//! A window of size 0 is off (section 3.4.3 lets a receiver not check): every number
//! but 0 is accepted, again and again. It is refused with extended sequence numbers,
//! whose high halves cannot be inferred without a window.

use replay_window::{BLOCK, Seen, SeenRing};
use std::fmt;

/// The largest window accepted: 16384 numbers, 8 KiB of ring.
pub const MAX_WINDOW: u32 = 16384;
/// The window an SA gets when configuration names none.
pub const DEFAULT_WINDOW: u32 = 1024;
/// The smallest window a receiver must support (RFC 4303 section 3.4.3); none is
/// smaller.
const MIN_WINDOW: u32 = 32;

/// Why a sequence number is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplayError {
    Replayed,
    TooOld,
}

impl ReplayError {
    pub const fn name(self) -> &'static str {
        match self {
            ReplayError::Replayed => "replayed",
            ReplayError::TooOld => "too-old",
        }
    }

    pub const fn explain(self) -> &'static str {
        match self {
            ReplayError::Replayed => "the sequence number was already received on this SA",
            ReplayError::TooOld => {
                "the sequence number is behind the anti-replay window, or 0, which is never sent"
            }
        }
    }
}

pub struct ReplayWindow {
    /// Numbers this far behind the newest are accepted, less one; 0: the window is off.
    size: u32,
    esn: bool,
    /// `None` when the window is off.
    ring: Option<SeenRing>,
}

impl ReplayWindow {
    /// A window accepting every number at most `size - 1` behind the newest accepted,
    /// inferring high halves when `esn` (extended sequence numbers) is on. `size` is
    /// 32 to [`MAX_WINDOW`], or 0 for no window, which only 32-bit numbers allow.
    pub fn new(size: u32, esn: bool) -> Result<ReplayWindow, String> {
        if size == 0 && esn {
            return Err(
                "an anti-replay window is needed with extended sequence numbers: \
                 the high 32 bits of each sequence number are inferred from it"
                    .into(),
            );
        }
        if size != 0 && !(MIN_WINDOW..=MAX_WINDOW).contains(&size) {
            return Err(format!(
                "an anti-replay window of {size} is out of range: \
                 {MIN_WINDOW} to {MAX_WINDOW}, or 0 for none without extended sequence numbers"
            ));
        }
        Ok(ReplayWindow {
            size,
            esn,
            ring: (size != 0).then(|| SeenRing::for_window(u64::from(size))),
        })
    }

    /// The window's size; 0: off.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// Whether sequence numbers are extended (64-bit, the high half inferred).
    pub fn esn(&self) -> bool {
        self.esn
    }

    /// The newest number accepted (for show); `None` before the first, and always
    /// when the window is off.
    pub fn newest(&self) -> Option<u64> {
        self.ring.as_ref()?.newest()
    }

    /// Would the packet whose sequence number's low 32 bits are `seq_low` be accepted
    /// now? If so, the full sequence number it stands for, for the ICV and the
    /// commit. Changes nothing.
    pub fn check(&self, seq_low: u32) -> Result<u64, ReplayError> {
        let Some(ring) = &self.ring else {
            return match seq_low {
                0 => Err(ReplayError::TooOld),
                _ => Ok(u64::from(seq_low)),
            };
        };
        let seq = if self.esn {
            // The inferred number is never below the window's first (that is how it
            // is chosen), so the window's place refuses only 0: no second look at
            // the newest number here; the commit looks again anyway.
            match ring.with_newest(|newest| self.infer(seq_low, newest)) {
                Some(0) | None => return Err(ReplayError::TooOld),
                Some(seq) => seq,
            }
        } else {
            let seq = u64::from(seq_low);
            self.admit(ring, seq)?;
            seq
        };
        match ring.seen(seq) {
            Seen::Fresh => Ok(seq),
            Seen::Seen => Err(ReplayError::Replayed),
            Seen::Evicted => Err(ReplayError::TooOld),
        }
    }

    /// Records `seq`, a full number [`check`](Self::check) gave, once the packet's ICV
    /// has verified. Refused when already seen or out of the window: a second packet
    /// with one number, on this worker or another, ends here.
    pub fn commit(&self, seq: u64) -> Result<(), ReplayError> {
        let Some(ring) = &self.ring else {
            return match seq {
                0 => Err(ReplayError::TooOld),
                _ => Ok(()),
            };
        };
        self.admit(ring, seq)?;
        match ring.record(seq / BLOCK, 1 << (seq % BLOCK)) {
            Ok(0) => Err(ReplayError::Replayed),
            Ok(_) => Ok(()),
            Err(_) => Err(ReplayError::TooOld),
        }
    }

    /// Refuses what the window's place alone refuses: 0, and a number more than
    /// `size - 1` behind the newest.
    fn admit(&self, ring: &SeenRing, seq: u64) -> Result<(), ReplayError> {
        if seq == 0 || !ring.within(seq, u64::from(self.size)) {
            return Err(ReplayError::TooOld);
        }
        Ok(())
    }

    /// The full number with low half `seq_low`, the newest being `newest` (RFC 4303
    /// Appendix A2.2): the one from the window's first number, `bottom`, up to 2^32 - 1
    /// past it. `None` when that falls below 0 (or past the last number there is).
    ///
    /// This is the appendix's two cases in one. Case A (Tl >= W - 1): `bottom` is in
    /// T's high half Th, so a low half at or above `bottom`'s gives Th, one below it
    /// Th + 1. Case B (Tl < W - 1): `bottom` is in Th - 1, so a low half at or above
    /// `bottom`'s gives Th - 1, one below it Th; and Th - 1 does not exist while Th is
    /// 0, which is when `bottom` is below 0.
    fn infer(&self, seq_low: u32, newest: u64) -> Option<u64> {
        let bottom = i128::from(newest) - i128::from(self.size) + 1;
        // `bottom as u32`: its low half, two's complement keeping it right below 0.
        let seq = bottom + i128::from(seq_low.wrapping_sub(bottom as u32));
        u64::try_from(seq).ok()
    }
}

impl fmt::Debug for ReplayWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplayWindow")
            .field("size", &self.size)
            .field("esn", &self.esn)
            .field("newest", &self.newest())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ReplayError::{Replayed, TooOld};

    /// 2^32: the first number with high half 1.
    const H: u64 = 1 << 32;

    /// One step of a table: the number sent, what check gives for its low half, what
    /// commit gives for it.
    type Step = (u64, Result<u64, ReplayError>, Result<(), ReplayError>);

    fn run_table(w: &ReplayWindow, steps: &[Step]) {
        for (i, &(sent, check, commit)) in steps.iter().enumerate() {
            assert_eq!(w.check(sent as u32), check, "step {i}: check({sent:#x})");
            assert_eq!(w.commit(sent), commit, "step {i}: commit({sent:#x})");
        }
    }

    /// Step by step, without extended sequence numbers: (number, what check gives,
    /// what commit gives).
    #[test]
    fn replay_table() {
        for size in [64, 4096] {
            let w = ReplayWindow::new(size, false).expect("a valid size");
            let s = u64::from(size);
            let max = u64::from(u32::MAX);
            let ok = |n: u64| (n, Ok(n), Ok(()));
            let refused = |n: u64, e: ReplayError| (n, Err(e), Err(e));
            let steps = [
                refused(0, TooOld),
                ok(1),
                refused(1, Replayed),
                ok(9),
                ok(8),
                ok(7),
                refused(7, Replayed),
                ok(s),
                ok(s - 1),
                refused(s - 1, Replayed),
                ok(s - 2),
                ok(2),
                refused(2, Replayed),
                refused(1, Replayed),
                ok(s + 16),
                refused(16, TooOld),
                ok(17),
                refused(17, Replayed),
                refused(3, TooOld),
                refused(s + 16, Replayed),
                ok(s * 4),
                ok(s * 4 - (s - 1)),
                refused(s * 4 - s, TooOld),
                refused(10, TooOld),
                ok(s * 4 - (s - 2)),
                refused(s * 4 - (s - 1), Replayed),
                ok(s * 4 + 1),
                refused(s * 3 + 1, TooOld),
                refused(s * 3 + 2, Replayed),
                ok(max - 1),
                ok(max),
                refused(max, Replayed),
                ok(max - (s - 1)),
                refused(max - s, TooOld),
                refused(max - 1, Replayed),
                refused(0, TooOld),
            ];
            run_table(&w, &steps);
        }
    }

    /// Step by step with extended sequence numbers, across 2^32 and 2^33: (number
    /// sent, what check gives for its low half, what commit gives for it). Where
    /// check infers another number than the one sent, the ICV would not verify and
    /// the packet would never be committed; committing the number sent is refused.
    #[test]
    fn replay_table_with_esn() {
        const W: u64 = 64;
        let w = ReplayWindow::new(W as u32, true).expect("a valid size");
        let ok = |n: u64| (n, Ok(n), Ok(()));
        let refused = |n: u64, e: ReplayError| (n, Err(e), Err(e));
        let taken_for = |n: u64, ahead: u64| (n, Ok(ahead), Err(TooOld));
        let steps = [
            ok(1),
            // A leap ahead: anything less than 2^32 - W ahead is taken as ahead.
            ok(0x8000_0000),
            ok(0xFFFF_FFF0),
            ok(0xFFFF_FFF2),
            ok(0xFFFF_FFF1),
            refused(0xFFFF_FFF2, Replayed),
            // Past the wrap: low halves 0, 1, 2 with high half 1 (case A, Th + 1).
            ok(H),
            ok(H + 1),
            ok(H + 2),
            // Case B (Tl = 2 < W - 1): a low half at or above the window's first
            // (H + 2 - 63 = 0xFFFF_FFC3) is from before the wrap (Th - 1).
            ok(0xFFFF_FFF3),
            refused(0xFFFF_FFF0, Replayed),
            ok(H + 2 - (W - 1)),
            // One below the window's first: taken for the number 2^32 ahead.
            taken_for(H + 2 - W, 2 * H + 2 - W),
            refused(H + 1, Replayed),
            // Case A again (Tl = 256).
            ok(H + 256),
            taken_for(H, 2 * H),
            ok(H + 256 - (W - 1)),
            taken_for(H + 256 - W, 2 * H + 256 - W),
            // Far behind: taken for a number ahead.
            taken_for(0x8000_0000, H + 0x8000_0000),
            refused(H + 256, Replayed),
            // Across 2^33, case B with high half 2.
            ok(2 * H - 1),
            ok(2 * H + 5),
            ok(2 * H + 5 - (W - 1)),
            taken_for(2 * H + 5 - W, 3 * H + 5 - W),
            refused(2 * H - 1, Replayed),
            refused(2 * H + 5, Replayed),
        ];
        run_table(&w, &steps);
        assert_eq!(w.newest(), Some(2 * H + 5));
    }

    /// Before the window's first number reaches 0 (T < W - 1 with Th = 0), a low
    /// half that would need high half -1 stands for no number ever sent.
    #[test]
    fn esn_refuses_numbers_before_the_first() {
        let w = ReplayWindow::new(64, true).expect("a valid size");
        assert_eq!(w.check(0), Err(TooOld));
        assert_eq!(w.check(u32::MAX), Err(TooOld));
        assert_eq!(w.check(u32::MAX - 62), Err(TooOld));
        // Just below those: a leap ahead of 2^32 - 64.
        assert_eq!(w.check(u32::MAX - 63), Ok(u64::from(u32::MAX - 63)));
        assert_eq!(w.commit(10), Ok(()));
        assert_eq!(w.check(u32::MAX - 52), Err(TooOld));
        assert_eq!(w.check(u32::MAX - 53), Ok(u64::from(u32::MAX - 53)));
        assert_eq!(w.check(5), Ok(5));
        assert_eq!(w.check(0), Err(TooOld));
    }

    #[test]
    fn every_number_in_window_once_in_any_order() {
        for size in [32, 64, 100, 1000, 1024, 16384] {
            for esn in [false, true] {
                let starts: &[u64] = if esn {
                    &[0, 63, 64, 65, H - 5, 7 * H - 1000]
                } else {
                    &[0, 63, 64, 65, 0xFFFF_0000]
                };
                for &start in starts {
                    let s = u64::from(size);
                    let w = ReplayWindow::new(size, esn).expect("a valid size");
                    let newest = start + s;
                    assert_eq!(w.commit(newest), Ok(()));
                    for n in (start + 1..newest).rev() {
                        let what = format!("size {size} esn {esn} start {start:#x}: {n:#x}");
                        assert_eq!(w.check(n as u32), Ok(n), "{what}");
                        assert_eq!(w.commit(n), Ok(()), "{what} first time");
                        assert_eq!(w.check(n as u32), Err(Replayed), "{what} again");
                        assert_eq!(w.commit(n), Err(Replayed), "{what} again");
                    }
                    assert_eq!(w.commit(start), Err(TooOld), "size {size} start {start:#x}");
                    assert_eq!(w.newest(), Some(newest));
                }
            }
        }
    }

    #[test]
    fn check_changes_nothing() {
        for esn in [false, true] {
            let w = ReplayWindow::new(64, esn).expect("a valid size");
            assert_eq!(w.newest(), None);
            assert_eq!(w.check(5), Ok(5));
            assert_eq!(w.check(5), Ok(5));
            assert_eq!(w.newest(), None);
            assert_eq!(w.commit(5), Ok(()));
            assert_eq!(w.check(5), Err(Replayed));
            // Checking a number far ahead does not move the window.
            assert_eq!(w.check(1_000_000), Ok(1_000_000));
            assert_eq!(w.check(6), Ok(6));
            assert_eq!(w.newest(), Some(5));
        }
    }

    #[test]
    fn sizes_are_validated() {
        let esn_needs_a_window = ReplayWindow::new(0, true).expect_err("no window with ESN");
        assert!(
            esn_needs_a_window.contains("extended sequence numbers"),
            "{esn_needs_a_window}"
        );
        for size in [1, 31, MAX_WINDOW + 1, u32::MAX] {
            for esn in [false, true] {
                let message = ReplayWindow::new(size, esn).expect_err("out of range");
                assert!(message.contains(&size.to_string()), "{message}");
                assert!(message.contains("32 to 16384"), "{message}");
            }
        }
        for size in [32, 33, 64, DEFAULT_WINDOW, MAX_WINDOW] {
            for esn in [false, true] {
                let w = ReplayWindow::new(size, esn).expect("a valid size");
                assert_eq!((w.size(), w.esn()), (size, esn));
            }
        }
    }

    #[test]
    fn disabled_window_accepts_everything_but_zero() {
        let w = ReplayWindow::new(0, false).expect("no window without ESN");
        assert_eq!((w.size(), w.esn()), (0, false));
        for _ in 0..2 {
            assert_eq!(w.check(0), Err(TooOld));
            assert_eq!(w.commit(0), Err(TooOld));
            for n in [1, 5, u32::MAX, 5] {
                assert_eq!(w.check(n), Ok(u64::from(n)));
                assert_eq!(w.commit(u64::from(n)), Ok(()));
            }
        }
        assert_eq!(w.newest(), None);
    }

    #[test]
    fn errors_have_names() {
        assert_eq!(Replayed.name(), "replayed");
        assert_eq!(TooOld.name(), "too-old");
        assert!(!Replayed.explain().is_empty() && !TooOld.explain().is_empty());
    }

    #[test]
    fn is_shared_between_workers() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<ReplayWindow>();
    }

    /// The window as the protocol states it, over the full numbers sent: a number is
    /// taken once, never 0, and only while at most size - 1 behind the newest taken.
    struct Model {
        size: u64,
        newest: u64,
        seen: std::collections::HashSet<u64>,
    }

    impl Model {
        fn verdict(&self, seq: u64) -> Result<(), ReplayError> {
            if seq == 0 || self.newest.saturating_sub(seq) >= self.size {
                return Err(TooOld);
            }
            if self.seen.contains(&seq) {
                return Err(Replayed);
            }
            Ok(())
        }

        fn commit(&mut self, seq: u64) {
            self.seen.insert(seq);
            self.newest = self.newest.max(seq);
        }
    }

    /// A sender's numbers, reordered, replayed, leaping ahead (across 2^32 and its
    /// multiples) and far behind, fed through check and commit as the data path does,
    /// with extended sequence numbers: the window agrees with the model. The window
    /// sees only low halves, so a number the model finds too old may be refused
    /// either way, or taken for another with its low half, in the window or ahead,
    /// whose ICV would not verify; committing the number sent is refused.
    #[test]
    fn agrees_with_the_model_with_esn() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for round in 0..25 {
            let size = [32u32, 64, 100, 1024, 4096][round % 5];
            let w = ReplayWindow::new(size, true).expect("a valid size");
            let s = u64::from(size);
            let mut model = Model {
                size: s,
                newest: 0,
                seen: Default::default(),
            };
            let mut base = 0u64;
            let mut crossings = 0;
            for i in 0..20_000 {
                let sent = match rng.gen_range(0..100) {
                    0 => {
                        base += rng.gen_range(0..3 * s);
                        base
                    }
                    1 => {
                        // As far ahead as a leap can be and still be told from one
                        // behind: less than 2^32 - size past the newest.
                        let before = base >> 32;
                        base = base.max(model.newest + rng.gen_range(1 << 31..H - s));
                        crossings += (base >> 32) - before;
                        base
                    }
                    2..=9 => base.saturating_sub(rng.gen_range(0..2 * s)),
                    10..=14 => base.saturating_sub(rng.gen_range(s.saturating_sub(40)..s + 40)),
                    15..=16 => base.saturating_sub(rng.gen_range(H..2 * H)),
                    _ => {
                        base += rng.gen_range(0..4);
                        base.saturating_sub(rng.gen_range(0..64))
                    }
                };
                let what = format!("round {round} (size {size}) step {i}: sent {sent:#x}");
                let checked = w.check(sent as u32);
                match model.verdict(sent) {
                    Ok(()) => {
                        assert_eq!(checked, Ok(sent), "{what}");
                        assert_eq!(w.commit(sent), Ok(()), "{what}");
                        model.commit(sent);
                    }
                    Err(Replayed) => {
                        assert_eq!(checked, Err(Replayed), "{what}");
                        assert_eq!(w.commit(sent), Err(Replayed), "{what}");
                    }
                    Err(TooOld) => {
                        if let Ok(seq) = checked {
                            assert_ne!(seq, sent, "{what}");
                            assert_eq!(seq as u32, sent as u32, "{what}: inferred {seq:#x}");
                            assert!(model.newest.saturating_sub(seq) < s, "{what}: {seq:#x}");
                        }
                        assert_eq!(w.commit(sent), Err(TooOld), "{what}");
                    }
                }
                assert_eq!(w.newest().unwrap_or(0), model.newest, "{what}");
            }
            assert!(
                crossings > 10,
                "round {round}: {crossings} crossings of 2^32"
            );
        }
    }

    /// Threads check and commit one stream of numbers crossing 2^32 (the race of
    /// `replay_window::race`): each number is accepted exactly once, its high half
    /// inferred right.
    #[test]
    fn concurrent_commits_accept_each_number_exactly_once() {
        use replay_window::race::{ROUND, ROUNDS, accepts_each_once};
        const START: u64 = H - ROUND * ROUNDS / 2;
        let w = ReplayWindow::new(4096, true).expect("a valid size");
        assert_eq!(w.commit(START), Ok(()));
        accepts_each_once("number", START + 1, |_, _, mine| {
            let mut accepted = Vec::new();
            for &mut n in mine {
                match w.check(n as u32) {
                    Ok(seq) => {
                        assert_eq!(seq, n, "inferred high half");
                        if w.commit(seq).is_ok() {
                            accepted.push(seq);
                        }
                    }
                    Err(e) => assert_eq!(e, Replayed, "{n:#x}"),
                }
            }
            accepted
        });
        let last = START + ROUND * ROUNDS;
        assert_eq!(w.newest(), Some(last));
        assert_eq!(w.check(last as u32), Err(Replayed));
        assert_eq!(w.check(last as u32 + 1), Ok(last + 1));
    }
}
