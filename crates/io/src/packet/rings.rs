//! Moving frames through the mapped rings, and the counters for frames that did not
//! make it.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;

use super::{PacketPort, TP_STATUS_WRONG_FORMAT, layout::TX_DATA_OFFSET};
use crate::context;

impl PacketPort {
    /// Copies up to `bufs.len()` (and `lens.len()`) frames waiting in the RX ring into
    /// `bufs`, their lengths into `lens`, and returns how many. Every slot read goes back
    /// to the kernel. A frame longer than its buffer, or one the kernel cut short because
    /// it did not fit a slot, is dropped and counted in
    /// [`rx_truncated`](PacketPort::rx_truncated).
    pub fn recv_batch(&mut self, bufs: &mut [&mut [u8]], lens: &mut [usize]) -> usize {
        let want = bufs.len().min(lens.len());
        let mut n = 0;
        // Bounded by the ring: each turn consumes one slot, and the kernel cannot refill
        // a slot before it is handed back.
        for _ in 0..self.layout.frame_nr {
            if n == want {
                break;
            }
            let i = self.rx_head;
            let status = self.status(false, i).load(Ordering::Acquire);
            if status & libc::TP_STATUS_USER == 0 {
                break;
            }
            let hdr = self.slot(false, i).cast::<libc::tpacket2_hdr>();
            // SAFETY: the slot is ours (TP_STATUS_USER, loaded with Acquire, so the
            // kernel's writes to it are visible) until its status is stored back below.
            let (len, snap, mac, tci, tpid) = unsafe {
                (
                    (&raw const (*hdr).tp_len).read() as usize,
                    (&raw const (*hdr).tp_snaplen).read() as usize,
                    (&raw const (*hdr).tp_mac).read() as usize,
                    (&raw const (*hdr).tp_vlan_tci).read(),
                    (&raw const (*hdr).tp_vlan_tpid).read(),
                )
            };
            // The kernel takes a VLAN tag out of the frame on receive (into the
            // header); it goes back in, so the frame is the one on the wire.
            let tag = (status & libc::TP_STATUS_VLAN_VALID != 0).then(|| {
                let tpid = if status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
                    tpid
                } else {
                    0x8100
                };
                let mut t = [0u8; 4];
                t[..2].copy_from_slice(&tpid.to_be_bytes());
                t[2..].copy_from_slice(&tci.to_be_bytes());
                t
            });
            let extra = if tag.is_some() { 4 } else { 0 };
            let buf = &mut *bufs[n];
            if snap < len
                || len + extra > buf.len()
                || mac + snap > self.layout.frame_size
                || (tag.is_some() && len < 12)
            {
                self.rx_truncated += 1;
            } else {
                let src = self.slot(false, i).wrapping_add(mac);
                let dst = buf.as_mut_ptr();
                if let Some(t) = tag {
                    // SAFETY: `mac + snap` lies within the slot (checked above) and
                    // len >= 12; the slot is ours, and `buf` is a distinct Rust buffer
                    // of at least `len + 4` bytes: the address bytes, the tag, the rest.
                    unsafe {
                        std::ptr::copy_nonoverlapping(src, dst, 12);
                        std::ptr::copy_nonoverlapping(t.as_ptr(), dst.add(12), 4);
                        std::ptr::copy_nonoverlapping(src.add(12), dst.add(16), len - 12);
                    }
                } else {
                    // SAFETY: `mac + snap` lies within the slot (checked above); the
                    // slot is ours, and `buf` is a distinct Rust buffer of at least
                    // `len` bytes.
                    unsafe { std::ptr::copy_nonoverlapping(src, dst, len) };
                }
                lens[n] = len + extra;
                n += 1;
            }
            self.status(false, i)
                .store(libc::TP_STATUS_KERNEL, Ordering::Release);
            self.rx_head = (i + 1) % self.layout.frame_nr;
        }
        n
    }

    /// Queues `frames` (whole Ethernet frames) in the TX ring and asks the kernel to send
    /// them, with one system call. Returns how many were queued. A frame longer than
    /// [`max_frame`](PacketPort::max_frame) is dropped and counted in
    /// [`tx_too_big`](PacketPort::tx_too_big); once no slot is free the rest are counted
    /// in [`tx_ring_full`](PacketPort::tx_ring_full) and not queued.
    pub fn send_batch(&mut self, frames: &[&[u8]]) -> usize {
        let cap = self.layout.tx_capacity();
        let mut queued = 0;
        for (k, frame) in frames.iter().enumerate() {
            if frame.len() > cap {
                self.tx_too_big += 1;
                continue;
            }
            let i = self.tx_head;
            let status = self.status(true, i).load(Ordering::Acquire);
            if status == TP_STATUS_WRONG_FORMAT {
                // Only without PACKET_LOSS, which open sets; counted, and the slot reused.
                self.tx_rejected += 1;
            } else if status != libc::TP_STATUS_AVAILABLE {
                let rest = &frames[k..];
                self.tx_too_big += rest.iter().filter(|f| f.len() > cap).count() as u64;
                self.tx_ring_full += rest.iter().filter(|f| f.len() <= cap).count() as u64;
                break;
            }
            let slot = self.slot(true, i);
            // SAFETY: the slot is free (TP_STATUS_AVAILABLE, loaded with Acquire), so the
            // kernel neither reads nor writes it until its status says SEND_REQUEST; the
            // frame fits after the header (`cap` is the slot size less the header).
            unsafe {
                std::ptr::copy_nonoverlapping(
                    frame.as_ptr(),
                    slot.add(TX_DATA_OFFSET),
                    frame.len(),
                );
                let hdr = slot.cast::<libc::tpacket2_hdr>();
                (&raw mut (*hdr).tp_len).write(frame.len() as u32);
                (&raw mut (*hdr).tp_snaplen).write(frame.len() as u32);
            }
            self.status(true, i)
                .store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
            self.tx_head = (i + 1) % self.layout.frame_nr;
            queued += 1;
        }
        if queued > 0 {
            self.flush();
        }
        queued
    }

    /// Asks the kernel to send every slot marked SEND_REQUEST. A failure leaves them
    /// marked, for the next flush to retry; it is counted in
    /// [`tx_flush_errors`](PacketPort::tx_flush_errors).
    fn flush(&mut self) {
        // SAFETY: a null buffer of length 0 is what a TX ring socket expects: the kernel
        // takes the frames from the ring.
        let ret =
            unsafe { libc::send(self.fd.as_raw_fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT) };
        if ret < 0 {
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::WouldBlock && err.kind() != io::ErrorKind::Interrupted {
                self.tx_flush_errors += 1;
            }
        }
    }

    /// Frames dropped by [`recv_batch`](PacketPort::recv_batch) because they did not fit
    /// the caller's buffer or a ring slot, since open.
    pub fn rx_truncated(&self) -> u64 {
        self.rx_truncated
    }

    /// Frames the kernel dropped because the RX ring was full, since open (read from
    /// `PACKET_STATISTICS`; 0 if that read fails).
    pub fn rx_dropped(&self) -> u64 {
        if let Ok(stats) = self.read_stats() {
            self.rx_dropped
                .fetch_add(u64::from(stats.tp_drops), Ordering::Relaxed);
        }
        self.rx_dropped.load(Ordering::Relaxed)
    }

    /// Frames [`send_batch`](PacketPort::send_batch) dropped as longer than a slot.
    pub fn tx_too_big(&self) -> u64 {
        self.tx_too_big
    }

    /// Frames [`send_batch`](PacketPort::send_batch) did not queue because the TX ring
    /// had no free slot.
    pub fn tx_ring_full(&self) -> u64 {
        self.tx_ring_full
    }

    /// Slots the kernel refused to send (malformed frames), found when reusing them.
    pub fn tx_rejected(&self) -> u64 {
        self.tx_rejected
    }

    /// Flushes of the TX ring that failed with an error other than "try again".
    pub fn tx_flush_errors(&self) -> u64 {
        self.tx_flush_errors
    }

    /// Reads (and so resets) the kernel's packet and drop counts for this socket.
    fn read_stats(&self) -> io::Result<libc::tpacket_stats> {
        let mut stats = libc::tpacket_stats {
            tp_packets: 0,
            tp_drops: 0,
        };
        let mut len = size_of::<libc::tpacket_stats>() as libc::socklen_t;
        // SAFETY: `stats` and `len` are live and `len` is the size of `stats`.
        let ret = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&raw mut stats).cast(),
                &mut len,
            )
        };
        crate::cvt(ret)
            .map_err(|e| context(e, format_args!("PACKET_STATISTICS on {}", self.ifname)))?;
        Ok(stats)
    }
}
