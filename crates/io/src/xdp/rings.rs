//! Moving buffers through the four rings (fill, RX, TX, completion) in batches, the
//! wake-ups the kernel asks for, and the counters for what did not make it.

use std::io;

use super::ffi::{self, XdpDesc};
use super::{Fragment, XdpPort};

/// Descriptors moved per shim call: the scratch array lives on the stack.
const CHUNK: usize = 64;

/// In copy mode the kernel sends at most this many frames per wake-up and answers
/// `EAGAIN` while more wait (`TX_BATCH_SIZE` in net/xdp/xsk.c).
const COPY_TX_BATCH: usize = 32;

const NO_DESC: XdpDesc = XdpDesc {
    addr: 0,
    len: 0,
    options: 0,
};

impl XdpPort {
    /// Hands free buffers (by number) to the kernel's fill ring, for it to receive
    /// into; returns how many it took (the first that many of `bufs`), fewer when the
    /// ring is full. The rest stay the caller's.
    ///
    /// # Panics
    ///
    /// If a buffer number is not below [`frames`](XdpPort::frames).
    pub fn fill(&mut self, bufs: &[u32]) -> usize {
        if let Some(bad) = bufs.iter().find(|&&b| b >= self.region.frames) {
            panic!(
                "fill: buffer {bad} outside the UMEM's {} buffers",
                self.region.frames
            );
        }
        let n = u32::try_from(bufs.len()).unwrap_or(u32::MAX);
        // SAFETY: `bufs` holds at least `n` numbers, all inside the UMEM; the ring state
        // is live and only reached through `&mut self`.
        unsafe { ffi::lr_xsk_fill(self.xsk.rings(), bufs.as_ptr(), n, self.region.shift) as usize }
    }

    /// Takes received frames off the RX ring into `out`, as (buffer, offset of the
    /// frame in it, length); returns how many. The buffers are the caller's again.
    /// The offset is where the kernel put the data: the UMEM headroom plus
    /// [`XDP_PACKET_HEADROOM`](super::XDP_PACKET_HEADROOM), 384 with the default
    /// options; use it as given rather than assuming a value.
    ///
    /// With nothing received, wakes the driver when it asks for it (zero-copy drivers
    /// that stopped for want of fill buffers).
    pub fn recv(&mut self, out: &mut [(u32, u16, u16)]) -> usize {
        let region = self.region;
        self.recv_descs(out.len(), |i, desc| {
            let f = region.rx_fragment(desc);
            out[i] = (f.buf, f.offset, f.len);
        })
    }

    /// As [`recv`](XdpPort::recv), for a multi-buffer socket: takes received
    /// parts of frames into `out`, in order; a frame is the parts up to and with
    /// the first whose `more` is false. A frame may end in a later call's parts.
    pub fn recv_fragments(&mut self, out: &mut [Fragment]) -> usize {
        let region = self.region;
        self.recv_descs(out.len(), |i, desc| out[i] = region.rx_fragment(desc))
    }

    /// Takes up to `want` descriptors off the RX ring, handing each to `put` with
    /// its index; wakes the driver when nothing came and it asks for that.
    fn recv_descs(&mut self, want: usize, mut put: impl FnMut(usize, &XdpDesc)) -> usize {
        let mut descs = [NO_DESC; CHUNK];
        let mut n = 0;
        // Bounded: each turn either takes CHUNK more or ends the loop.
        while n < want {
            let ask = (want - n).min(CHUNK);
            // SAFETY: `descs` has room for `ask` descriptors; the ring state is live and
            // only reached through `&mut self`.
            let got = unsafe { ffi::lr_xsk_recv(self.xsk.rings(), descs.as_mut_ptr(), ask as u32) }
                as usize;
            for (i, desc) in descs[..got].iter().enumerate() {
                put(n + i, desc);
            }
            n += got;
            if got < ask {
                break;
            }
        }
        // SAFETY: the ring state is live; this only reads the fill ring's flags word.
        if n == 0 && unsafe { ffi::lr_xsk_fill_needs_wakeup(self.xsk.rings()) } != 0 {
            self.kick_rx();
        }
        n
    }

    /// Queues `frames` (buffer, offset of the frame in it, length) on the TX ring and
    /// wakes the kernel to send them where it needs that (always in copy mode; when it
    /// asks, in zero-copy mode). Returns how many were queued, the first that many of
    /// `frames`: their buffers are the kernel's until [`complete`](XdpPort::complete)
    /// returns them. The rest, counted in [`tx_ring_full`](XdpPort::tx_ring_full), stay
    /// the caller's.
    ///
    /// # Panics
    ///
    /// If a frame does not lie inside one buffer of the UMEM.
    pub fn send(&mut self, frames: &[(u32, u16, u16)]) -> usize {
        let queued = self.put_descs(frames.iter().map(|&(buf, offset, len)| Fragment {
            buf,
            offset,
            len,
            more: false,
        }));
        self.tx_ring_full += (frames.len() - queued) as u64;
        self.sent(frames.len(), queued);
        queued
    }

    /// As [`send`](XdpPort::send), for a multi-buffer socket: queues frames given as
    /// runs of parts (see [`Fragment`]), whole frames only, as many as the ring has
    /// room for; returns how many parts were queued, the first that many of
    /// `parts`. A frame left out (counted in [`tx_ring_full`](XdpPort::tx_ring_full)),
    /// and a last run that does not end, stay the caller's.
    ///
    /// # Panics
    ///
    /// If a part does not lie inside one buffer of the UMEM.
    pub fn send_fragments(&mut self, parts: &[Fragment]) -> usize {
        let n = u32::try_from(parts.len()).unwrap_or(u32::MAX);
        // SAFETY: the ring state is live and only reached through `&mut self`.
        let room = unsafe { ffi::lr_xsk_tx_free(self.xsk.rings(), n) } as usize;
        // A frame cut here would be joined by the kernel to the next one queued.
        let whole = parts
            .iter()
            .take(room)
            .rposition(|p| !p.more)
            .map_or(0, |last| last + 1);
        let queued = self.put_descs(parts[..whole].iter().copied());
        let left = parts[queued..].iter().filter(|p| !p.more).count();
        self.tx_ring_full += left as u64;
        self.sent(parts.len(), queued);
        queued
    }

    /// Puts descriptors for `parts` on the TX ring, in order, while it has room;
    /// how many.
    fn put_descs(&mut self, parts: impl Iterator<Item = Fragment>) -> usize {
        let mut descs = [NO_DESC; CHUNK];
        let mut queued = 0;
        let mut parts = parts.peekable();
        while parts.peek().is_some() {
            let mut len = 0;
            for (desc, part) in descs.iter_mut().zip(parts.by_ref()) {
                *desc = self.region.tx_desc(part).unwrap_or_else(|| {
                    panic!(
                        "send: {part:?} outside the UMEM's {} buffers",
                        self.region.frames
                    )
                });
                len += 1;
            }
            // SAFETY: `descs` holds `len` descriptors inside the UMEM; the ring state
            // is live and only reached through `&mut self`.
            let put =
                unsafe { ffi::lr_xsk_send(self.xsk.rings(), descs.as_ptr(), len as u32) as usize };
            queued += put;
            if put < len {
                break;
            }
        }
        queued
    }

    /// After `asked` descriptors were offered and `queued` put on the ring: counts
    /// them in flight and wakes the kernel.
    fn sent(&mut self, asked: usize, queued: usize) {
        self.tx_in_flight += queued;
        if asked > 0 {
            // Also when nothing fitted: the ring may be full of frames a copy-mode
            // wake-up left for the next one.
            self.kick_tx(queued.max(1));
        }
    }

    /// Takes buffers the kernel has finished sending off the completion ring into
    /// `out`; returns how many. They are the caller's again. While sent frames are
    /// still out, also wakes the kernel where it needs that, so frames a copy-mode
    /// wake-up left behind go out: call it regularly while anything is in flight.
    pub fn complete(&mut self, out: &mut [u32]) -> usize {
        let n = u32::try_from(out.len()).unwrap_or(u32::MAX);
        // SAFETY: `out` has room for `n` numbers; the ring state is live and only reached
        // through `&mut self`.
        let got = unsafe {
            ffi::lr_xsk_complete(self.xsk.rings(), out.as_mut_ptr(), n, self.region.shift) as usize
        };
        self.tx_in_flight = self.tx_in_flight.saturating_sub(got);
        if self.tx_in_flight > 0 {
            self.kick_tx(COPY_TX_BATCH);
        }
        got
    }

    /// Buffers queued by [`send`](XdpPort::send) and not yet returned by
    /// [`complete`](XdpPort::complete).
    pub fn tx_in_flight(&self) -> usize {
        self.tx_in_flight
    }

    /// Wakes the kernel to send what the TX ring holds, when it needs waking: always in
    /// copy mode, where each wake-up sends a batch of at most [`COPY_TX_BATCH`] and is
    /// repeated (up to what covers `frames`) while the kernel says more wait.
    fn kick_tx(&mut self, frames: usize) {
        // SAFETY: the ring state is live; this only reads the TX ring's flags word.
        let asks = unsafe { ffi::lr_xsk_tx_needs_wakeup(self.xsk.rings()) } != 0;
        if self.zero_copy && !asks {
            return;
        }
        let tries = if self.zero_copy {
            1
        } else {
            frames.div_ceil(COPY_TX_BATCH) + 1
        };
        for _ in 0..tries {
            // SAFETY: a zero-length send with no buffer and no address: AF_XDP takes the
            // frames from the TX ring.
            let ret = unsafe {
                libc::sendto(
                    self.xsk.fd(),
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            if ret >= 0 {
                return;
            }
            match io::Error::last_os_error().raw_os_error() {
                // More waiting (copy mode), or the completion ring is full.
                Some(libc::EAGAIN) if !self.zero_copy => continue,
                Some(libc::EAGAIN | libc::EBUSY | libc::ENOBUFS | libc::EINTR) => return,
                _ => {
                    self.tx_kick_errors += 1;
                    return;
                }
            }
        }
    }

    /// Wakes a driver that stopped receiving for want of fill buffers.
    fn kick_rx(&mut self) {
        // SAFETY: a zero-length receive with no buffer: AF_XDP only wakes the driver.
        let ret = unsafe {
            libc::recvfrom(
                self.xsk.fd(),
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        if ret < 0
            && !matches!(
                io::Error::last_os_error().raw_os_error(),
                Some(libc::EAGAIN | libc::EBUSY | libc::ENOBUFS | libc::EINTR)
            )
        {
            self.rx_kick_errors += 1;
        }
    }

    /// The kernel's counters for the socket; all zero if it will not say.
    fn stats(&self) -> libc::xdp_statistics {
        self.xsk
            .statistics()
            .unwrap_or(super::socket::no_statistics())
    }

    /// Frames for this socket the kernel dropped since open: longer than a buffer
    /// holds after the headroom, or (copy mode) arriving with no buffer in the fill
    /// ring. From `XDP_STATISTICS`; 0 if that read fails.
    pub fn rx_dropped(&self) -> u64 {
        self.stats().rx_dropped
    }

    /// Descriptors the kernel found invalid on the receive side since open (from
    /// `XDP_STATISTICS`; 0 if that read fails).
    pub fn rx_invalid(&self) -> u64 {
        self.stats().rx_invalid_descs
    }

    /// Frames the kernel dropped because the RX ring was full (the caller did not
    /// [`recv`](XdpPort::recv) fast enough), since open (from `XDP_STATISTICS`; 0 if
    /// that read fails).
    pub fn rx_ring_full(&self) -> u64 {
        self.stats().rx_ring_full
    }

    /// Times the kernel wanted a buffer and found the fill ring empty (the caller did
    /// not [`fill`](XdpPort::fill) enough), since open (from `XDP_STATISTICS`; 0 if
    /// that read fails).
    pub fn rx_fill_empty(&self) -> u64 {
        self.stats().rx_fill_ring_empty_descs
    }

    /// TX descriptors the kernel refused since open. It skips them without a
    /// completion, so their buffers never come back through
    /// [`complete`](XdpPort::complete). [`send`](XdpPort::send) checks that frames
    /// lie inside the UMEM, so this stays 0 unless the kernel's own checks are stricter
    /// (from `XDP_STATISTICS`; 0 if that read fails).
    pub fn tx_invalid(&self) -> u64 {
        self.stats().tx_invalid_descs
    }

    /// Frames [`send`](XdpPort::send) did not queue because the TX ring had no room.
    pub fn tx_ring_full(&self) -> u64 {
        self.tx_ring_full
    }

    /// Wake-ups of the kernel for sending that failed with an error other than "busy,
    /// try again" (the interface went down, for instance).
    pub fn tx_kick_errors(&self) -> u64 {
        self.tx_kick_errors
    }

    /// Wake-ups of the driver for receiving that failed with an error other than
    /// "busy, try again".
    pub fn rx_kick_errors(&self) -> u64 {
        self.rx_kick_errors
    }
}
