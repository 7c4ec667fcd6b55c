//! The arrays one recvmmsg/sendmmsg call points into (mmsghdr, iovec, address),
//! allocated once and only re-pointed before each call, so that the hot path allocates
//! nothing. [`Batch`] wraps them as the caller-owned scratch space of the `_with`
//! calls, one type per direction, written once for both.

use std::marker::PhantomData;
use std::ptr;

use super::MAX_BATCH;
use super::addr::SockAddr;

/// The arrays one recvmmsg/sendmmsg call points into, allocated once.
pub(super) struct MsgArrays {
    pub(super) hdrs: Box<[libc::mmsghdr]>,
    pub(super) iovs: Box<[libc::iovec]>,
    pub(super) addrs: Box<[SockAddr]>,
}

// SAFETY: the raw pointers inside the mmsghdr/iovec entries are scratch values, rewritten
// before every syscall and never dereferenced by Rust code; they own nothing, so moving
// the arrays to another thread is harmless.
unsafe impl Send for MsgArrays {}

impl MsgArrays {
    /// Room for `capacity` messages, clamped to 1..=[`MAX_BATCH`].
    pub(super) fn new(capacity: usize) -> MsgArrays {
        let capacity = capacity.clamp(1, MAX_BATCH);
        // SAFETY: an all-zero mmsghdr is valid: null pointers, zero lengths and flags.
        let hdr: libc::mmsghdr = unsafe { std::mem::zeroed() };
        let iov = libc::iovec {
            iov_base: ptr::null_mut(),
            iov_len: 0,
        };
        MsgArrays {
            hdrs: vec![hdr; capacity].into_boxed_slice(),
            iovs: vec![iov; capacity].into_boxed_slice(),
            addrs: vec![SockAddr::EMPTY; capacity].into_boxed_slice(),
        }
    }

    pub(super) fn capacity(&self) -> usize {
        self.hdrs.len()
    }

    /// Points header `h` at the `iovlen` iovecs from `iov` on (already filled) and at
    /// address slot `h`, with no control message.
    pub(super) fn link(&mut self, h: usize, iov: usize, iovlen: usize, namelen: libc::socklen_t) {
        let iov: *mut libc::iovec = &mut self.iovs[iov];
        let name: *mut SockAddr = &mut self.addrs[h];
        let hdr = &mut self.hdrs[h];
        hdr.msg_hdr.msg_name = name.cast();
        hdr.msg_hdr.msg_namelen = namelen;
        hdr.msg_hdr.msg_iov = iov;
        hdr.msg_hdr.msg_iovlen = iovlen;
        hdr.msg_hdr.msg_control = ptr::null_mut();
        hdr.msg_hdr.msg_controllen = 0;
        hdr.msg_hdr.msg_flags = 0;
        hdr.msg_len = 0;
    }
}

/// Which call a [`Batch`] is scratch space for: [`Rx`] or [`Tx`]. Sealed.
pub trait Direction: sealed::Sealed {
    /// The name `Debug` shows.
    const NAME: &'static str;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Rx {}
    impl Sealed for super::Tx {}
}

/// Marks scratch space for receiving ([`RecvBatch`]).
#[derive(Debug)]
pub enum Rx {}

/// Marks scratch space for sending ([`SendBatch`]).
#[derive(Debug)]
pub enum Tx {}

impl Direction for Rx {
    const NAME: &'static str = "RecvBatch";
}

impl Direction for Tx {
    const NAME: &'static str = "SendBatch";
}

/// Scratch space for up to [`MAX_BATCH`] messages per syscall; longer send inputs go out
/// in several syscalls. The two directions are kept apart by type so that a worker's
/// receive and send scratch cannot be mixed up.
pub struct Batch<D> {
    pub(super) arrays: MsgArrays,
    dir: PhantomData<D>,
}

/// Scratch space for [`UdpSocket::recv_batch_with`](super::UdpSocket::recv_batch_with).
pub type RecvBatch = Batch<Rx>;

/// Scratch space for [`UdpSocket::send_batch_with`](super::UdpSocket::send_batch_with).
pub type SendBatch = Batch<Tx>;

impl<D: Direction> Batch<D> {
    /// Room for [`MAX_BATCH`] datagrams per syscall.
    pub fn new() -> Batch<D> {
        Batch::with_capacity(MAX_BATCH)
    }

    /// Room for `capacity` datagrams per syscall (clamped to 1..=[`MAX_BATCH`]).
    pub fn with_capacity(capacity: usize) -> Batch<D> {
        Batch {
            arrays: MsgArrays::new(capacity),
            dir: PhantomData,
        }
    }

    /// Datagrams one syscall can move.
    pub fn capacity(&self) -> usize {
        self.arrays.capacity()
    }
}

impl<D: Direction> Default for Batch<D> {
    fn default() -> Batch<D> {
        Batch::new()
    }
}

impl<D: Direction> std::fmt::Debug for Batch<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}({})", D::NAME, self.capacity())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_capacity_is_clamped() {
        assert_eq!(RecvBatch::with_capacity(0).capacity(), 1);
        assert_eq!(RecvBatch::with_capacity(100_000).capacity(), MAX_BATCH);
        assert_eq!(SendBatch::new().capacity(), MAX_BATCH);
    }

    #[test]
    fn debug_names_the_direction() {
        assert_eq!(format!("{:?}", RecvBatch::with_capacity(8)), "RecvBatch(8)");
        assert_eq!(format!("{:?}", SendBatch::new()), "SendBatch(256)");
    }
}
