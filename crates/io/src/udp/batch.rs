//! Plain batches: one datagram per message, up to [`MAX_BATCH`] messages per
//! recvmmsg/sendmmsg call, through the scratch arrays of `arrays`.
//!
//! The sendmmsg retry loop ([`UdpSocket::send_headers`]) lives here too: plain and GSO
//! sends differ only in how many datagrams one header carries and in which errors end
//! the attempt, so both go through the one loop, and partial sends, EINTR and a full
//! send buffer are handled in one place.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::ptr;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::addr::SockAddr;
use super::{RecvBatch, RecvMeta, SEND_WAIT, SendBatch, SendResult, UdpSocket};
use crate::cvt;
use crate::poll::{Interest, wait_fd};

/// Why [`UdpSocket::send_headers`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stop {
    /// Every header was sent or counted as failed.
    Done,
    /// The send buffer stayed full until the deadline; the headers not sent are
    /// counted as failed.
    Full,
    /// The caller's `give_up` said to stop at this header, which is not counted.
    GaveUp(usize),
}

/// What [`UdpSocket::send_headers`] did, in datagrams.
pub(super) struct Sent {
    pub(super) sent: usize,
    pub(super) failed: usize,
    pub(super) stop: Stop,
}

impl UdpSocket {
    /// Receives up to `min(bufs.len(), meta.len(), MAX_BATCH)` datagrams without
    /// blocking, datagram `i` into `bufs[i]` and described by `meta[i]`. Returns how many
    /// arrived; 0 when none was pending (or a signal interrupted the call).
    pub fn recv_batch(&self, bufs: &mut [&mut [u8]], meta: &mut [RecvMeta]) -> io::Result<usize> {
        let mut scratch = self.rx.lock().unwrap_or_else(|p| p.into_inner());
        self.recv_batch_with(&mut scratch, bufs, meta)
    }

    /// [`recv_batch`](UdpSocket::recv_batch) with caller-owned scratch space: no lock.
    pub fn recv_batch_with(
        &self,
        scratch: &mut RecvBatch,
        bufs: &mut [&mut [u8]],
        meta: &mut [RecvMeta],
    ) -> io::Result<usize> {
        let arrays = &mut scratch.arrays;
        let n = bufs.len().min(meta.len()).min(arrays.capacity());
        if n == 0 {
            return Ok(0);
        }
        for (i, buf) in bufs.iter_mut().take(n).enumerate() {
            arrays.iovs[i] = libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: buf.len(),
            };
            arrays.link(i, i, 1, SockAddr::LEN);
        }
        // SAFETY: the first n headers point at n iovecs, each covering a live, writable
        // caller buffer, and at n address slots of the size given in msg_namelen; all
        // stay borrowed until the call returns. A null timeout with MSG_DONTWAIT never
        // blocks.
        let ret = unsafe {
            libc::recvmmsg(
                self.fd.as_raw_fd(),
                arrays.hdrs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_DONTWAIT,
                ptr::null_mut(),
            )
        };
        let got = match cvt(ret) {
            Ok(got) => got as usize,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) =>
            {
                return Ok(0);
            }
            Err(e) => return Err(e),
        };
        for i in 0..got {
            let h = &arrays.hdrs[i];
            meta[i] = RecvMeta {
                len: (h.msg_len as usize).min(bufs[i].len()),
                src: arrays.addrs[i].decode().unwrap_or(RecvMeta::default().src),
                truncated: h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
            };
        }
        Ok(got)
    }

    /// Sends each `(payload, destination)` as one datagram, in order, without stopping
    /// at the first problem: a datagram the kernel refuses (EHOSTUNREACH, ENETUNREACH,
    /// EPERM from a firewall, ...) is counted as failed and the next one goes. When the
    /// send buffer is full it waits a few milliseconds in all for room, then counts the
    /// rest as failed.
    pub fn send_batch(&self, pkts: &[(&[u8], SocketAddr)]) -> SendResult {
        let mut scratch = self.tx.lock().unwrap_or_else(|p| p.into_inner());
        self.send_batch_with(&mut scratch, pkts)
    }

    /// [`send_batch`](UdpSocket::send_batch) with caller-owned scratch space: no lock.
    pub fn send_batch_with(
        &self,
        scratch: &mut SendBatch,
        pkts: &[(&[u8], SocketAddr)],
    ) -> SendResult {
        let arrays = &mut scratch.arrays;
        let mut res = SendResult::default();
        let mut deadline: Option<Instant> = None;
        for chunk in pkts.chunks(arrays.capacity()) {
            let mut n = 0;
            for &(pkt, addr) in chunk {
                let Some((sa, len)) = self.encode_dst(addr) else {
                    res.failed += 1;
                    continue;
                };
                arrays.addrs[n] = sa;
                arrays.iovs[n] = libc::iovec {
                    // The kernel only reads through iov_base on send.
                    iov_base: pkt.as_ptr().cast_mut().cast(),
                    iov_len: pkt.len(),
                };
                arrays.link(n, n, 1, len);
                n += 1;
            }
            // SAFETY: headers 0..n were linked just above to iovecs over live caller
            // payloads (borrowed from `pkts` for this whole call) and to address slots
            // holding `msg_namelen` valid bytes, with no control data.
            let done = unsafe {
                self.send_headers(&mut arrays.hdrs[..n], |_| 1, &mut deadline, |_, _| false)
            };
            res.sent += done.sent;
            res.failed += done.failed;
            if done.stop == Stop::Full {
                // Give up on everything not yet sent, in later chunks too.
                res.failed = pkts.len() - res.sent;
                return res;
            }
        }
        res
    }

    /// Encodes a destination for this socket, or records EAFNOSUPPORT as the last send
    /// error when it cannot be reached from it.
    pub(super) fn encode_dst(&self, addr: SocketAddr) -> Option<(SockAddr, libc::socklen_t)> {
        let encoded = SockAddr::encode(addr, self.v6);
        if encoded.is_none() {
            self.last_send_errno
                .store(libc::EAFNOSUPPORT, Ordering::Relaxed);
        }
        encoded
    }

    /// Sends `hdrs` with sendmmsg until each is sent or counted as failed; header `h`
    /// carries `datagrams(h)` datagrams. Partial sends go on from the first header not
    /// sent, EINTR retries, and a full send buffer (EAGAIN) is waited out until
    /// `deadline` (set on the first wait, [`SEND_WAIT`] ahead, and shared by the
    /// caller's later calls if it keeps it). sendmmsg reports an error only for the
    /// first message of the vector: that header's errno is recorded as the last send
    /// error and, unless `give_up(&err, h)` says to stop there, the header is counted as
    /// failed and the next one goes.
    ///
    /// # Safety
    ///
    /// Every header must point at iovecs covering memory valid for reads, an address
    /// slot holding `msg_namelen` valid bytes, and a valid control buffer (or none), all
    /// live until this returns.
    pub(super) unsafe fn send_headers(
        &self,
        hdrs: &mut [libc::mmsghdr],
        datagrams: impl Fn(usize) -> usize,
        deadline: &mut Option<Instant>,
        mut give_up: impl FnMut(&io::Error, usize) -> bool,
    ) -> Sent {
        let mut sent = 0;
        let mut failed = 0;
        let mut pos = 0;
        while pos < hdrs.len() {
            // SAFETY: the headers from pos on are valid by this function's contract and
            // stay borrowed until the call returns.
            let ret = unsafe {
                libc::sendmmsg(
                    self.fd.as_raw_fd(),
                    hdrs.as_mut_ptr().add(pos),
                    (hdrs.len() - pos) as libc::c_uint,
                    libc::MSG_DONTWAIT,
                )
            };
            if ret > 0 {
                for _ in 0..ret {
                    sent += datagrams(pos);
                    pos += 1;
                }
                continue;
            }
            let err = if ret == 0 {
                // Not expected for a non-empty vector; treat like a full buffer rather
                // than spin.
                io::Error::from(io::ErrorKind::WouldBlock)
            } else {
                io::Error::last_os_error()
            };
            match err.kind() {
                io::ErrorKind::Interrupted => {}
                io::ErrorKind::WouldBlock => {
                    let deadline = *deadline.get_or_insert_with(|| Instant::now() + SEND_WAIT);
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() || !wait_fd(self.fd.as_raw_fd(), Interest::WRITABLE, left) {
                        failed += (pos..hdrs.len()).map(&datagrams).sum::<usize>();
                        return Sent {
                            sent,
                            failed,
                            stop: Stop::Full,
                        };
                    }
                }
                _ => {
                    self.last_send_errno
                        .store(err.raw_os_error().unwrap_or(0), Ordering::Relaxed);
                    if give_up(&err, pos) {
                        return Sent {
                            sent,
                            failed,
                            stop: Stop::GaveUp(pos),
                        };
                    }
                    failed += datagrams(pos);
                    pos += 1;
                }
            }
        }
        Sent {
            sent,
            failed,
            stop: Stop::Done,
        }
    }
}
