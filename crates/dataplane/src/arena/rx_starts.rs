//! Where a receive puts each packet in its buffer. Standard buffers are 2 KiB apart, so the
//! packets of a frame read at one offset all begin at the same place modulo 4 KiB:
//! their bytes fall on the same few sets of the L1 cache. A crypto engine streams a
//! frame's texts twice (ChaCha20 over all of them, then Poly1305 over all of them),
//! and texts that share a set evict one another between the two passes. Starting
//! the packets of a frame at three offsets a cache line apart, chosen by the
//! buffer's number, spreads them over three times the sets; the WireGuard graph ran
//! 5 to 7% faster at 570 and 1,420 bytes for it (two offsets gained nothing; four
//! no more than three; starts off a line boundary gave back half the gain).

use crate::arena::{HEADROOM, Handle, TAILROOM};

/// A cache line: starts are this far apart, on its boundaries where they can be.
pub const LINE: usize = 64;

/// Where receives start in each buffer: one start per value of the buffer number's
/// two low bits (a frame's buffers come off the free list in any order, so they
/// spread over the starts about as the table does).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxStarts {
    by_low_bits: [u16; 4],
    /// The size of the buffers these starts are for.
    buffer: u16,
}

impl RxStarts {
    /// Every receive into a buffer of `buffer` bytes at the headroom: a port's,
    /// whose frames may leave again with any outer header in front.
    pub const fn at_headroom(buffer: usize) -> RxStarts {
        RxStarts::fixed(buffer, HEADROOM as u16)
    }

    /// Every receive into a buffer of `buffer` bytes at `offset`.
    pub const fn fixed(buffer: usize, offset: u16) -> RxStarts {
        assert!(buffer <= u16::MAX as usize, "buffer size");
        RxStarts {
            by_low_bits: [offset; 4],
            buffer: buffer as u16,
        }
    }

    /// The size of the buffers these starts are for (an arena refuses others).
    pub fn buffer(&self) -> usize {
        self.buffer as usize
    }

    /// Starts for a receive into buffers of `buffer` bytes that keeps at least `front` bytes free in front of the
    /// packet (for headers added on the way out) and lets it fill at least `room`
    /// bytes (up to the tail room): up to three starts a line apart, on line
    /// boundaries, from the first boundary at or after `front`. Where no boundary
    /// fits, the one start `front`; `None` when not even that leaves `room` bytes.
    pub fn spread(buffer: usize, front: usize, room: usize) -> Option<RxStarts> {
        let last = (buffer - TAILROOM).checked_sub(room)?;
        if front > last {
            return None;
        }
        let first = front.next_multiple_of(LINE);
        if first > last {
            return Some(RxStarts::fixed(buffer, front as u16));
        }
        let lines = ((last - first) / LINE + 1).min(3);
        let start = |i: usize| (first + (i % lines) * LINE) as u16;
        // With three starts the first takes the fourth slot too.
        Some(RxStarts {
            by_low_bits: [start(0), start(1), start(2), start(3)],
            buffer: u16::try_from(buffer).expect("buffer size"),
        })
    }

    /// Where the packet received into buffer `h` starts.
    #[inline]
    pub fn of(&self, h: Handle) -> usize {
        self.by_low_bits[h as usize & 3] as usize
    }

    /// The least room any buffer's receive has: the largest packet every buffer
    /// takes whole, and so what every receive is lent (a packet is taken or cut
    /// alike whichever buffer it lands in).
    pub fn least_room(&self) -> usize {
        let latest = self.by_low_bits.iter().max().copied().unwrap_or(0) as usize;
        self.buffer as usize - TAILROOM - latest
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arena::{JUMBO_BUFFER, STANDARD_BUFFER};
    const FRAME_SIZE: usize = STANDARD_BUFFER;

    fn starts(s: &RxStarts) -> Vec<usize> {
        let mut v: Vec<usize> = (0..4).map(|h| s.of(h)).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    #[test]
    fn three_line_aligned_starts_where_the_buffer_leaves_room() {
        // A datagram receive: nothing needed in front, the largest datagram behind.
        let s = RxStarts::spread(FRAME_SIZE, 0, 1888).unwrap();
        assert_eq!(starts(&s), [0, 64, 128]);
        assert_eq!(s.least_room(), 1888);
        // A TUN read: the WireGuard header in front, an MTU of 1420 behind.
        let s = RxStarts::spread(FRAME_SIZE, 16, 1420).unwrap();
        assert_eq!(starts(&s), [64, 128, 192]);
        assert!(s.least_room() >= 1420);
    }

    #[test]
    fn every_start_keeps_front_and_room_and_the_low_bits_pick_them_all() {
        for front in [0, 1, 16, 63, 64, 65, 128, 300] {
            for room in [0, 64, 1420, 1500, 1824, 1856, 1888, 1900, 2016] {
                let Some(s) = RxStarts::spread(FRAME_SIZE, front, room) else {
                    assert!(front + room > FRAME_SIZE - TAILROOM, "{front} {room}");
                    continue;
                };
                for h in 0..64u32 {
                    let at = s.of(h);
                    assert!(at >= front, "{front} {room}: {at}");
                    assert!(at + room <= FRAME_SIZE - TAILROOM, "{front} {room}: {at}");
                }
                assert!(s.least_room() >= room);
                let v = starts(&s);
                // As many starts as line boundaries fit, up to three, each used.
                let first = front.next_multiple_of(LINE);
                let last = FRAME_SIZE - TAILROOM - room;
                let fit = if first > last {
                    1
                } else {
                    ((last - first) / LINE + 1).min(3)
                };
                assert_eq!(v.len(), fit, "{front} {room}: {v:?}");
                if fit > 1 {
                    assert!(v.iter().all(|a| a % LINE == 0), "{front} {room}: {v:?}");
                    assert!(v.windows(2).all(|w| w[1] - w[0] == LINE));
                }
            }
        }
    }

    #[test]
    fn a_fixed_start_is_every_buffers() {
        let s = RxStarts::fixed(FRAME_SIZE, 384);
        assert!((0..16).all(|h| s.of(h) == 384));
        assert_eq!(s.least_room(), FRAME_SIZE - TAILROOM - 384);
    }

    #[test]
    fn jumbo_buffers_take_a_jumbo_datagram_at_every_start() {
        let s = RxStarts::spread(JUMBO_BUFFER, 0, 9216 + 18).unwrap();
        assert_eq!(starts(&s), [0, 64, 128]);
        assert!(s.least_room() >= 9216 + 18);
        assert_eq!(s.buffer(), JUMBO_BUFFER);
        assert!(RxStarts::spread(FRAME_SIZE, 0, 9216).is_none());
    }
}
