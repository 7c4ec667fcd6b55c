//! An AF_XDP port beside jumbo buffers. The kernel lends an AF_XDP socket
//! buffers of at most a page, and a jumbo worker's are 10,240 bytes, so such a
//! port has memory of its own: page-sized buffers, registered as its UMEM, in
//! which frames larger than one come and go in parts (multi-buffer AF_XDP). A
//! received frame's parts are copied into one arena buffer, where the graph
//! finds it whole as from any other port; a frame to send is copied out of its
//! arena buffer into parts.
//!
//! That is one copy each way in the worker, on top of the kernel's in copy mode:
//! the price of carrying every packet whole in one buffer through the graph and
//! the engines, which take no packet in pieces.

use std::sync::Arc;

use dataplane::arena::Arena;
use dataplane::arena::{PageMemory, TAILROOM};
use dataplane::{Handle, RxStarts};
use io::Fragment;

/// Bytes per buffer of the port's own memory: a page, the most AF_XDP takes on
/// any system (a frame of a 9216-byte MTU is then three parts).
pub(crate) const PART_SIZE: usize = 4096;

/// The most parts a received frame may come in: a jumbo arena buffer's worth.
/// A run longer than that is no frame this port carries, and is dropped.
const MAX_PARTS: usize = dataplane::arena::LARGEST_BUFFER
    .div_ceil(PART_SIZE - io::xdp::XDP_PACKET_HEADROOM as usize)
    + 1;

/// The port's own buffers and what it does with them. The first half receives,
/// the second sends: a link slower than what is routed to it then holds the
/// sending half at most, and the port always has buffers to lend the kernel
/// for receiving.
pub(crate) struct Parts {
    memory: Arc<PageMemory>,
    count: u32,
    /// Free receiving buffers (below `count / 2`): neither lent to the kernel
    /// nor holding a frame being received.
    free: Vec<u32>,
    /// Free sending buffers (from `count / 2`): not on the TX ring.
    tx_free: Vec<u32>,
    /// The parts so far of a frame whose last part has not come yet.
    partial: Vec<Fragment>,
    /// Dropping the rest of a run of parts too long for a frame, up to its end.
    skipping: bool,
    /// Where received frames are copied into arena buffers.
    starts: RxStarts,
    /// Frames dropped for being longer than an arena buffer holds from its start.
    pub(crate) rx_too_big: u64,
    /// Frames dropped for want of a free arena buffer to copy them into (the
    /// port takes no more parts than the arena has free buffers, so this stays 0
    /// unless that accounting is wrong).
    pub(crate) rx_no_buffer: u64,
}

impl Parts {
    /// `count` page-sized buffers, half to receive into and half to send from;
    /// received frames are copied to `starts`.
    pub(crate) fn new(count: u32, starts: RxStarts) -> Parts {
        let half = count / 2;
        Parts {
            memory: Arc::new(PageMemory::new(count as usize * PART_SIZE)),
            count,
            free: (0..half).rev().collect(),
            tx_free: (half..count).rev().collect(),
            partial: Vec::with_capacity(MAX_PARTS),
            skipping: false,
            starts,
            rx_too_big: 0,
            rx_no_buffer: 0,
        }
    }

    /// The memory, to register as the socket's UMEM (and keep alive with it).
    pub(crate) fn memory(&self) -> &Arc<PageMemory> {
        &self.memory
    }

    /// Up to `n` free receiving buffers, to lend the kernel; the rest of `out` is
    /// unused.
    pub(crate) fn take(&mut self, n: usize, out: &mut [u32]) -> usize {
        let n = n.min(out.len()).min(self.free.len());
        for slot in &mut out[..n] {
            *slot = self.free.pop().expect("counted above");
        }
        n
    }

    /// Buffers back from the kernel (sent, or lent and not taken), each to its
    /// half.
    pub(crate) fn give_back(&mut self, bufs: &[u32]) {
        for &b in bufs {
            self.give_back_one(b);
        }
    }

    fn give_back_one(&mut self, b: u32) {
        if b < self.count / 2 {
            self.free.push(b);
        } else if b < self.count {
            self.tx_free.push(b);
        }
    }

    /// The bytes of `part`, inside the port's memory.
    #[allow(unsafe_code)]
    fn bytes(&self, part: &Fragment) -> &[u8] {
        let start = part.buf as usize * PART_SIZE + usize::from(part.offset);
        let len = usize::from(part.len).min(PART_SIZE - usize::from(part.offset) % PART_SIZE);
        assert!(
            part.buf < self.count && start + len <= self.memory.len(),
            "part {part:?} outside the port's memory"
        );
        // SAFETY: inside the memory (checked); the part's buffer was handed back by
        // the kernel, which no longer writes it, and is not lent again before this
        // borrow ends (`&self`).
        unsafe { std::slice::from_raw_parts(self.memory.base().add(start), len) }
    }

    /// Joins received parts into frames, each copied into a fresh arena buffer
    /// appended to `out`; their buffers become free. Parts of a frame whose end
    /// has not come wait for the next call.
    pub(crate) fn gather(&mut self, arena: &mut Arena, parts: &[Fragment], out: &mut Vec<Handle>) {
        for &part in parts {
            if self.skipping {
                self.give_back_one(part.buf);
                self.skipping = part.more;
                continue;
            }
            self.partial.push(part);
            if part.more {
                if self.partial.len() < MAX_PARTS {
                    continue;
                }
                // Longer than any frame this port carries: dropped, with what
                // follows of it up to its end.
                self.rx_too_big += 1;
                self.skipping = true;
            } else if let Some(h) = self.copy_in(arena) {
                out.push(h);
            }
            for i in 0..self.partial.len() {
                self.give_back_one(self.partial[i].buf);
            }
            self.partial.clear();
        }
    }

    /// The frame in `partial`, copied into a fresh arena buffer; `None` (counted)
    /// when it does not fit one or none is free.
    fn copy_in(&mut self, arena: &mut Arena) -> Option<Handle> {
        let len: usize = self.partial.iter().map(|p| usize::from(p.len)).sum();
        let Some(h) = arena.alloc() else {
            self.rx_no_buffer += 1;
            return None;
        };
        let start = self.starts.of(h);
        if start + len > arena.buffer_size() - TAILROOM {
            arena.free(h);
            self.rx_too_big += 1;
            return None;
        }
        let buffer = arena.buffer_mut(h);
        let mut at = start;
        for part in &self.partial {
            let bytes = self.bytes(part);
            buffer[at..at + bytes.len()].copy_from_slice(bytes);
            at += bytes.len();
        }
        let m = arena.meta_mut(h);
        m.offset = start as u16;
        m.len = (at - start) as u16;
        Some(h)
    }

    /// Copies `frame` into free sending buffers as parts appended to `out`;
    /// false (and nothing appended) when too few are free.
    #[allow(unsafe_code)]
    pub(crate) fn scatter(&mut self, frame: &[u8], out: &mut Vec<Fragment>) -> bool {
        let need = frame.len().div_ceil(PART_SIZE);
        if need == 0 || self.tx_free.len() < need {
            return false;
        }
        for (i, piece) in frame.chunks(PART_SIZE).enumerate() {
            let buf = self.tx_free.pop().expect("counted above");
            let start = buf as usize * PART_SIZE;
            // SAFETY: buffer `buf` is inside the memory (a free one is below
            // `count`) and free: neither lent to the kernel nor read by anyone until
            // it is queued below.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    piece.as_ptr(),
                    self.memory.base().add(start),
                    piece.len(),
                );
            }
            out.push(Fragment {
                buf,
                offset: 0,
                len: piece.len() as u16,
                more: i + 1 < need,
            });
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dataplane::JUMBO_BUFFER;

    /// What the kernel would hand back for `frame` received into `parts`' buffers:
    /// the frame copied in at the kernel's headroom, a part per buffer.
    fn receive(parts: &mut Parts, frame: &[u8]) -> Vec<Fragment> {
        let room = PART_SIZE - io::xdp::XDP_PACKET_HEADROOM as usize;
        let mut bufs = vec![0; frame.len().div_ceil(room)];
        assert_eq!(parts.take(bufs.len(), &mut bufs), bufs.len());
        let pieces: Vec<&[u8]> = frame.chunks(room).collect();
        bufs.iter()
            .zip(&pieces)
            .enumerate()
            .map(|(i, (&buf, piece))| {
                let offset = io::xdp::XDP_PACKET_HEADROOM as usize;
                let at = buf as usize * PART_SIZE + offset;
                // SAFETY: the test owns the memory and this buffer.
                #[allow(unsafe_code)]
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        piece.as_ptr(),
                        parts.memory.base().add(at),
                        piece.len(),
                    );
                }
                Fragment {
                    buf,
                    offset: offset as u16,
                    len: piece.len() as u16,
                    more: i + 1 < pieces.len(),
                }
            })
            .collect()
    }

    fn frame(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i ^ (i >> 8)) as u8).collect()
    }

    fn parts() -> Parts {
        Parts::new(64, RxStarts::fixed(JUMBO_BUFFER, 256))
    }

    /// Frames of every size class come out of their parts whole, in order, even
    /// when a frame's parts are split between two calls; every buffer comes back.
    #[test]
    fn received_parts_join_into_whole_frames() {
        let mut p = parts();
        let mut arena = Arena::with_buffers(16, JUMBO_BUFFER);
        let frames: Vec<Vec<u8>> = [60, 1514, 3840, 3841, 7681, 9238].map(frame).into();
        let mut all = Vec::new();
        for f in &frames {
            all.extend(receive(&mut p, f));
        }
        let mut out = Vec::new();
        let (a, b) = all.split_at(4);
        p.gather(&mut arena, a, &mut out);
        p.gather(&mut arena, b, &mut out);
        assert_eq!(out.len(), frames.len());
        for (&h, f) in out.iter().zip(&frames) {
            assert_eq!(arena.data(h), f.as_slice());
            assert_eq!(arena.meta(h).offset, 256);
        }
        assert_eq!(p.free.len(), 32, "every buffer free again");
        assert_eq!((p.rx_too_big, p.rx_no_buffer), (0, 0));
    }

    /// A frame longer than a jumbo buffer holds, and a run of parts longer than
    /// any frame, are dropped and counted, their buffers free again (the run's
    /// up to its end, even in a later call), and the frame after each comes
    /// through alone.
    #[test]
    fn a_frame_past_a_buffer_is_dropped_and_counted() {
        let mut p = parts();
        let mut arena = Arena::with_buffers(4, JUMBO_BUFFER);
        let mut out = Vec::new();
        let huge = receive(&mut p, &frame(12_000));
        p.gather(&mut arena, &huge, &mut out);
        assert_eq!((out.len(), p.rx_too_big), (0, 1));
        let mut bufs = [0; MAX_PARTS + 3];
        assert_eq!(p.take(bufs.len(), &mut bufs), bufs.len());
        let endless: Vec<Fragment> = bufs
            .iter()
            .enumerate()
            .map(|(i, &buf)| Fragment {
                buf,
                offset: 256,
                len: 100,
                more: i + 1 < bufs.len(),
            })
            .collect();
        let (a, b) = endless.split_at(MAX_PARTS + 1);
        p.gather(&mut arena, a, &mut out);
        p.gather(&mut arena, b, &mut out);
        assert_eq!((out.len(), p.rx_too_big), (0, 2));
        let ok = receive(&mut p, &frame(1514));
        p.gather(&mut arena, &ok, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(arena.data(out[0]), frame(1514).as_slice());
        assert_eq!(p.free.len(), 32, "every buffer free again");
        assert_eq!(arena.available(), 3, "no arena buffer lost");
    }

    /// With no free arena buffer a frame is dropped and counted, its parts free.
    #[test]
    fn no_arena_buffer_drops_and_counts() {
        let mut p = parts();
        let mut arena = Arena::with_buffers(1, JUMBO_BUFFER);
        let held = arena.alloc().unwrap();
        let mut out = Vec::new();
        let parts_in = receive(&mut p, &frame(5000));
        p.gather(&mut arena, &parts_in, &mut out);
        assert!(out.is_empty());
        assert_eq!(p.rx_no_buffer, 1);
        assert_eq!(p.free.len(), 32);
        arena.free(held);
    }

    /// A frame goes out in page-sized parts of the sending half, the last flagged
    /// as the end; with too few free buffers nothing is taken, and the receiving
    /// half is never touched.
    #[test]
    fn frames_to_send_split_into_parts() {
        let mut p = Parts::new(8, RxStarts::fixed(JUMBO_BUFFER, 256));
        let f = frame(9238);
        let mut out = Vec::new();
        assert!(p.scatter(&f, &mut out));
        assert_eq!(out.len(), 3);
        assert_eq!(
            out.iter().map(|x| (x.len, x.more)).collect::<Vec<_>>(),
            [(4096, true), (4096, true), (1046, false)]
        );
        let joined: Vec<u8> = out.iter().flat_map(|x| p.bytes(x).to_vec()).collect();
        assert_eq!(joined, f);
        assert!(out.iter().all(|x| x.buf >= 4), "from the sending half");
        assert!(!p.scatter(&f, &mut out), "one buffer left, three needed");
        assert_eq!(out.len(), 3);
        assert!(p.scatter(&frame(60), &mut out));
        assert!(!out[3].more);
        assert_eq!(p.free.len(), 4, "the receiving half untouched");
        let sent: Vec<u32> = out.iter().map(|x| x.buf).collect();
        p.give_back(&sent);
        assert_eq!(
            (p.free.len(), p.tx_free.len()),
            (4, 4),
            "each back to its half"
        );
    }
}
