//! The outer side in host mode: one UDP socket, batched with recvmmsg/sendmmsg.
//!
//! The socket is dual-stack IPv6 when the kernel has IPv6, so one socket serves IPv4
//! and IPv6 peers; IPv4 peers appear as plain [`SocketAddr::V4`] to the caller in both
//! directions, never as v4-mapped IPv6 addresses.
//!
//! The hot path allocates nothing: the mmsghdr, iovec and address arrays live in a
//! [`RecvBatch`] / [`SendBatch`] made once. Each socket owns one of each (behind a mutex,
//! uncontended when one thread receives and one sends); a worker that wants no lock at
//! all keeps its own and calls the `_with` variants.
//!
//! By concern: `addr` converts socket addresses to and from the kernel's layout,
//! `arrays` holds the scratch arrays the batch calls point into, `batch` the plain
//! recvmmsg/sendmmsg batches and the one sendmmsg retry loop, `gso` sends runs of
//! datagrams with UDP segmentation offload, and `socket` makes the socket and sets
//! its options.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

mod addr;
mod arrays;
mod batch;
mod gso;
mod socket;

pub use arrays::{Batch, Direction, RecvBatch, Rx, SendBatch, Tx};
pub use gso::GsoSendBatch;

/// The largest batch one syscall moves (one frame of the data path).
pub const MAX_BATCH: usize = 256;

/// How long [`UdpSocket::send_batch`] waits, in total, for send-buffer room before it
/// counts the rest as failed.
const SEND_WAIT: Duration = Duration::from_millis(5);

/// What [`UdpSocket::recv_batch`] learned about one datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvMeta {
    /// Bytes written into the buffer (at most its length).
    pub len: usize,
    /// The sender; IPv4 senders are always `SocketAddr::V4`.
    pub src: SocketAddr,
    /// The datagram was longer than the buffer and was cut to `len`.
    pub truncated: bool,
}

impl Default for RecvMeta {
    fn default() -> RecvMeta {
        RecvMeta {
            len: 0,
            src: SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)),
            truncated: false,
        }
    }
}

/// The outcome of [`UdpSocket::send_batch`]: `sent + failed` is the number of packets
/// given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendResult {
    /// Datagrams the kernel accepted.
    pub sent: usize,
    /// Datagrams refused (unreachable, filtered, address family not usable) or not sent
    /// because the send buffer stayed full.
    pub failed: usize,
}
/// A non-blocking UDP socket bound to all addresses on one port. `Send + Sync`.
pub struct UdpSocket {
    fd: OwnedFd,
    v6: bool,
    port: u16,
    rx: Mutex<RecvBatch>,
    tx: Mutex<SendBatch>,
    /// errno of the last datagram the kernel refused, 0 for none; see
    /// [`UdpSocket::last_send_error`].
    last_send_errno: AtomicI32,
    /// UDP segmentation offload works (cleared when the kernel refuses it once).
    gso: AtomicBool,
}

impl UdpSocket {
    /// The bound port (the one the kernel picked, for port 0).
    pub fn local_port(&self) -> u16 {
        self.port
    }

    /// Whether this is the dual-stack IPv6 socket (false: the IPv4-only fallback).
    pub fn is_ipv6(&self) -> bool {
        self.v6
    }

    /// The error of the last datagram the kernel refused in a batch send, if any; kept
    /// so that a rising `failed` count can be explained (e.g. EPERM from a firewall).
    pub fn last_send_error(&self) -> Option<io::Error> {
        match self.last_send_errno.load(Ordering::Relaxed) {
            0 => None,
            errno => Some(io::Error::from_raw_os_error(errno)),
        }
    }

    /// The socket fd, to poll.
    pub fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl std::fmt::Debug for UdpSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdpSocket")
            .field("fd", &self.fd.as_raw_fd())
            .field("ipv6", &self.v6)
            .field("port", &self.port)
            .finish()
    }
}

descriptor_is!(UdpSocket, fd);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::poll::Interest;
    use std::time::Instant;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn is_send_and_sync() {
        assert_send_sync::<UdpSocket>();
        fn assert_send<T: Send>() {}
        assert_send::<RecvBatch>();
        assert_send::<SendBatch>();
    }

    #[test]
    fn ipv4_fallback_socket_works() {
        let a = UdpSocket::bind_ipv4(0).unwrap();
        let b = UdpSocket::bind_ipv4(0).unwrap();
        assert!(!a.is_ipv6());
        assert_ne!(a.local_port(), 0);
        let to_a: SocketAddr = SocketAddr::from((Ipv4Addr::LOCALHOST, a.local_port()));
        let res = b.send_batch(&[
            (b"one".as_slice(), to_a),
            (b"bad".as_slice(), "[2001:2::1]:9".parse().unwrap()),
            (b"two".as_slice(), to_a),
        ]);
        assert_eq!(res, SendResult { sent: 2, failed: 1 });
        assert_eq!(
            b.last_send_error().and_then(|e| e.raw_os_error()),
            Some(libc::EAFNOSUPPORT)
        );

        let mut storage = [[0u8; 64]; 4];
        let mut bufs: Vec<&mut [u8]> = storage.iter_mut().map(|b| b.as_mut_slice()).collect();
        let mut meta = [RecvMeta::default(); 4];
        let mut got = 0;
        let start = Instant::now();
        while got < 2 && start.elapsed() < Duration::from_secs(5) {
            crate::poll::wait_fd(
                a.as_raw_fd(),
                Interest::READABLE,
                Duration::from_millis(100),
            );
            got += a.recv_batch(&mut bufs[got..], &mut meta[got..]).unwrap();
        }
        assert_eq!(got, 2);
        assert_eq!(&bufs[0][..meta[0].len], b"one");
        assert_eq!(&bufs[1][..meta[1].len], b"two");
        assert_eq!(
            meta[0].src,
            SocketAddr::from((Ipv4Addr::LOCALHOST, b.local_port()))
        );
    }
}
