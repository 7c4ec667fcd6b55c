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

use std::io;
use std::mem::size_of;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::ptr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::{Duration, Instant};

use crate::poll::{Interest, wait_fd};
use crate::{context, cvt};

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

/// Room for either socket address family, so one array serves both.
#[derive(Clone, Copy)]
#[repr(C)]
union SockAddr {
    v4: libc::sockaddr_in,
    v6: libc::sockaddr_in6,
}

impl SockAddr {
    const EMPTY: SockAddr = SockAddr {
        v6: libc::sockaddr_in6 {
            sin6_family: 0,
            sin6_port: 0,
            sin6_flowinfo: 0,
            sin6_addr: libc::in6_addr { s6_addr: [0; 16] },
            sin6_scope_id: 0,
        },
    };

    /// Encodes `addr` for a socket of the given family. `None` when it cannot be
    /// reached from that socket (a real IPv6 address on an IPv4-only socket).
    fn encode(addr: SocketAddr, v6_socket: bool) -> Option<(SockAddr, libc::socklen_t)> {
        match (addr, v6_socket) {
            (SocketAddr::V4(a), true) => Some(Self::in6(a.ip().to_ipv6_mapped(), a.port(), 0, 0)),
            (SocketAddr::V6(a), true) => {
                Some(Self::in6(*a.ip(), a.port(), a.flowinfo(), a.scope_id()))
            }
            (SocketAddr::V4(a), false) => Some(Self::in4(*a.ip(), a.port())),
            (SocketAddr::V6(a), false) => a.ip().to_ipv4_mapped().map(|ip| Self::in4(ip, a.port())),
        }
    }

    fn in4(ip: Ipv4Addr, port: u16) -> (SockAddr, libc::socklen_t) {
        let sa = SockAddr {
            v4: libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: port.to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(ip.octets()),
                },
                sin_zero: [0; 8],
            },
        };
        (sa, size_of::<libc::sockaddr_in>() as libc::socklen_t)
    }

    fn in6(ip: Ipv6Addr, port: u16, flowinfo: u32, scope_id: u32) -> (SockAddr, libc::socklen_t) {
        let sa = SockAddr {
            v6: libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: port.to_be(),
                sin6_flowinfo: flowinfo,
                sin6_addr: libc::in6_addr {
                    s6_addr: ip.octets(),
                },
                sin6_scope_id: scope_id,
            },
        };
        (sa, size_of::<libc::sockaddr_in6>() as libc::socklen_t)
    }

    /// The address the kernel wrote; v4-mapped IPv6 becomes `V4`. `None` for a family
    /// other than IPv4/IPv6 (which a UDP socket never reports).
    fn decode(&self) -> Option<SocketAddr> {
        // SAFETY: both members start with the family field at the same offset, and the
        // union is always initialised in full (EMPTY or a kernel-written address).
        let family = unsafe { self.v4.sin_family } as libc::c_int;
        match family {
            libc::AF_INET => {
                // SAFETY: the family says the kernel wrote a sockaddr_in.
                let sin = unsafe { self.v4 };
                let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
                Some(SocketAddr::V4(SocketAddrV4::new(
                    ip,
                    u16::from_be(sin.sin_port),
                )))
            }
            libc::AF_INET6 => {
                // SAFETY: the family says the kernel wrote a sockaddr_in6.
                let sin6 = unsafe { self.v6 };
                let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
                let port = u16::from_be(sin6.sin6_port);
                Some(match ip.to_ipv4_mapped() {
                    Some(v4) => SocketAddr::V4(SocketAddrV4::new(v4, port)),
                    None => SocketAddr::V6(SocketAddrV6::new(
                        ip,
                        port,
                        sin6.sin6_flowinfo,
                        sin6.sin6_scope_id,
                    )),
                })
            }
            _ => None,
        }
    }
}

/// The arrays one recvmmsg/sendmmsg call points into, allocated once.
struct MsgArrays {
    hdrs: Box<[libc::mmsghdr]>,
    iovs: Box<[libc::iovec]>,
    addrs: Box<[SockAddr]>,
}

// SAFETY: the raw pointers inside the mmsghdr/iovec entries are scratch values, rewritten
// before every syscall and never dereferenced by Rust code; they own nothing, so moving
// the arrays to another thread is harmless.
unsafe impl Send for MsgArrays {}

impl MsgArrays {
    fn new(capacity: usize) -> MsgArrays {
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

    fn capacity(&self) -> usize {
        self.hdrs.len()
    }

    /// Points header `i` at iovec `i` (already filled) and address slot `i`.
    fn link(&mut self, i: usize, namelen: libc::socklen_t) {
        let iov: *mut libc::iovec = &mut self.iovs[i];
        let name: *mut SockAddr = &mut self.addrs[i];
        let h = &mut self.hdrs[i];
        h.msg_hdr.msg_name = name.cast();
        h.msg_hdr.msg_namelen = namelen;
        h.msg_hdr.msg_iov = iov;
        h.msg_hdr.msg_iovlen = 1;
        h.msg_hdr.msg_control = ptr::null_mut();
        h.msg_hdr.msg_controllen = 0;
        h.msg_hdr.msg_flags = 0;
        h.msg_len = 0;
    }
}

/// Scratch space for [`UdpSocket::recv_batch_with`]: up to [`MAX_BATCH`] messages.
pub struct RecvBatch(MsgArrays);

impl RecvBatch {
    /// Room for [`MAX_BATCH`] datagrams per call.
    pub fn new() -> RecvBatch {
        RecvBatch::with_capacity(MAX_BATCH)
    }

    /// Room for `capacity` datagrams per call (clamped to 1..=[`MAX_BATCH`]).
    pub fn with_capacity(capacity: usize) -> RecvBatch {
        RecvBatch(MsgArrays::new(capacity))
    }

    /// Datagrams one call can receive.
    pub fn capacity(&self) -> usize {
        self.0.capacity()
    }
}

impl Default for RecvBatch {
    fn default() -> RecvBatch {
        RecvBatch::new()
    }
}

impl std::fmt::Debug for RecvBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RecvBatch({})", self.capacity())
    }
}

/// Scratch space for [`UdpSocket::send_batch_with`]: up to [`MAX_BATCH`] messages per
/// syscall (longer inputs go out in several).
pub struct SendBatch(MsgArrays);

impl SendBatch {
    /// Room for [`MAX_BATCH`] datagrams per syscall.
    pub fn new() -> SendBatch {
        SendBatch::with_capacity(MAX_BATCH)
    }

    /// Room for `capacity` datagrams per syscall (clamped to 1..=[`MAX_BATCH`]).
    pub fn with_capacity(capacity: usize) -> SendBatch {
        SendBatch(MsgArrays::new(capacity))
    }

    /// Datagrams one syscall can send.
    pub fn capacity(&self) -> usize {
        self.0.capacity()
    }
}

impl Default for SendBatch {
    fn default() -> SendBatch {
        SendBatch::new()
    }
}

impl std::fmt::Debug for SendBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SendBatch({})", self.capacity())
    }
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
    /// Binds `[::]:port` with IPV6_V6ONLY off, so IPv4 peers arrive on the same socket;
    /// falls back to `0.0.0.0:port` when the kernel has no IPv6. Port 0 picks a free port
    /// (see [`local_port`](UdpSocket::local_port)).
    pub fn bind(port: u16) -> io::Result<UdpSocket> {
        match new_socket(libc::AF_INET6) {
            Ok(fd) => UdpSocket::bind_fd(fd, true, port),
            Err(e) if e.raw_os_error() == Some(libc::EAFNOSUPPORT) => UdpSocket::bind_ipv4(port),
            Err(e) => Err(context(e, "creating UDP socket")),
        }
    }

    /// The IPv4-only socket that [`bind`](UdpSocket::bind) falls back to.
    pub(crate) fn bind_ipv4(port: u16) -> io::Result<UdpSocket> {
        let fd = new_socket(libc::AF_INET).map_err(|e| context(e, "creating UDP socket"))?;
        UdpSocket::bind_fd(fd, false, port)
    }

    fn bind_fd(fd: OwnedFd, v6: bool, port: u16) -> io::Result<UdpSocket> {
        if v6 {
            setsockopt_int(&fd, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 0)
                .map_err(|e| context(e, "clearing IPV6_V6ONLY"))?;
        }
        let (sa, len) = if v6 {
            SockAddr::in6(Ipv6Addr::UNSPECIFIED, port, 0, 0)
        } else {
            SockAddr::in4(Ipv4Addr::UNSPECIFIED, port)
        };
        // SAFETY: sa is a live sockaddr of `len` bytes for the socket's family.
        let ret = unsafe { libc::bind(fd.as_raw_fd(), (&sa as *const SockAddr).cast(), len) };
        cvt(ret).map_err(|e| {
            let all = if v6 { "[::]" } else { "0.0.0.0" };
            context(e, format_args!("binding UDP {all}:{port}"))
        })?;

        let mut bound = SockAddr::EMPTY;
        let mut len = size_of::<SockAddr>() as libc::socklen_t;
        // SAFETY: bound has room for `len` bytes; the kernel writes at most that and
        // updates len.
        let ret = unsafe {
            libc::getsockname(
                fd.as_raw_fd(),
                (&mut bound as *mut SockAddr).cast(),
                &mut len,
            )
        };
        cvt(ret).map_err(|e| context(e, "getsockname"))?;
        let port = bound.decode().map_or(port, |a| a.port());

        Ok(UdpSocket {
            gso: AtomicBool::new(true),
            fd,
            v6,
            port,
            rx: Mutex::new(RecvBatch::new()),
            tx: Mutex::new(SendBatch::new()),
            last_send_errno: AtomicI32::new(0),
        })
    }

    /// The bound port (the one the kernel picked, for port 0).
    pub fn local_port(&self) -> u16 {
        self.port
    }

    /// Whether this is the dual-stack IPv6 socket (false: the IPv4-only fallback).
    pub fn is_ipv6(&self) -> bool {
        self.v6
    }

    /// Sets SO_MARK on outgoing packets, for policy routing that keeps tunnel traffic
    /// out of the tunnel; 0 clears it. Needs CAP_NET_ADMIN.
    pub fn set_fwmark(&self, mark: u32) -> io::Result<()> {
        setsockopt_int(
            &self.fd,
            libc::SOL_SOCKET,
            libc::SO_MARK,
            mark as libc::c_int,
        )
        .map_err(|e| context(e, format_args!("setting SO_MARK {mark:#x}")))
    }

    /// The current SO_MARK.
    pub fn fwmark(&self) -> io::Result<u32> {
        getsockopt_int(&self.fd, libc::SOL_SOCKET, libc::SO_MARK).map(|v| v as u32)
    }

    /// Asks for receive and send buffers of `rcv` and `snd` bytes. Tries the FORCE
    /// options first, which ignore the rmem_max/wmem_max limits but need CAP_NET_ADMIN,
    /// then the plain ones, which the kernel silently caps.
    pub fn set_buffer_sizes(&self, rcv: usize, snd: usize) -> io::Result<()> {
        let rcv = libc::c_int::try_from(rcv).unwrap_or(libc::c_int::MAX);
        let snd = libc::c_int::try_from(snd).unwrap_or(libc::c_int::MAX);
        setsockopt_int(&self.fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, rcv)
            .or_else(|_| setsockopt_int(&self.fd, libc::SOL_SOCKET, libc::SO_RCVBUF, rcv))
            .map_err(|e| context(e, "setting SO_RCVBUF"))?;
        setsockopt_int(&self.fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, snd)
            .or_else(|_| setsockopt_int(&self.fd, libc::SOL_SOCKET, libc::SO_SNDBUF, snd))
            .map_err(|e| context(e, "setting SO_SNDBUF"))?;
        Ok(())
    }

    /// The (receive, send) buffer sizes the kernel uses. Linux reports twice what was
    /// asked, because it counts its bookkeeping overhead too.
    pub fn buffer_sizes(&self) -> io::Result<(usize, usize)> {
        let rcv = getsockopt_int(&self.fd, libc::SOL_SOCKET, libc::SO_RCVBUF)?;
        let snd = getsockopt_int(&self.fd, libc::SOL_SOCKET, libc::SO_SNDBUF)?;
        Ok((rcv as usize, snd as usize))
    }

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
        let arrays = &mut scratch.0;
        let n = bufs.len().min(meta.len()).min(arrays.capacity());
        if n == 0 {
            return Ok(0);
        }
        for (i, buf) in bufs.iter_mut().take(n).enumerate() {
            arrays.iovs[i] = libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: buf.len(),
            };
            arrays.link(i, size_of::<SockAddr>() as libc::socklen_t);
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
        let arrays = &mut scratch.0;
        let mut res = SendResult::default();
        let mut deadline: Option<Instant> = None;
        for chunk in pkts.chunks(arrays.capacity()) {
            let mut n = 0;
            for &(pkt, addr) in chunk {
                let Some((sa, len)) = SockAddr::encode(addr, self.v6) else {
                    self.last_send_errno
                        .store(libc::EAFNOSUPPORT, Ordering::Relaxed);
                    res.failed += 1;
                    continue;
                };
                arrays.addrs[n] = sa;
                arrays.iovs[n] = libc::iovec {
                    // The kernel only reads through iov_base on send.
                    iov_base: pkt.as_ptr().cast_mut().cast(),
                    iov_len: pkt.len(),
                };
                arrays.link(n, len);
                n += 1;
            }

            let mut pos = 0;
            while pos < n {
                // SAFETY: headers pos..n point at iovecs covering live caller payloads
                // and at address slots holding `msg_namelen` valid bytes; everything
                // stays borrowed until the call returns.
                let ret = unsafe {
                    libc::sendmmsg(
                        self.fd.as_raw_fd(),
                        arrays.hdrs.as_mut_ptr().add(pos),
                        (n - pos) as libc::c_uint,
                        libc::MSG_DONTWAIT,
                    )
                };
                if ret > 0 {
                    pos += ret as usize;
                    res.sent += ret as usize;
                    continue;
                }
                let err = if ret == 0 {
                    // Not expected for a non-empty vector; treat like a full buffer
                    // rather than spin.
                    io::Error::from(io::ErrorKind::WouldBlock)
                } else {
                    io::Error::last_os_error()
                };
                match err.kind() {
                    io::ErrorKind::Interrupted => {}
                    io::ErrorKind::WouldBlock => {
                        let deadline = *deadline.get_or_insert_with(|| Instant::now() + SEND_WAIT);
                        let left = deadline.saturating_duration_since(Instant::now());
                        if left.is_zero() || !wait_fd(self.fd.as_raw_fd(), Interest::WRITABLE, left)
                        {
                            // Give up on everything not yet sent, in later chunks too.
                            res.failed = pkts.len() - res.sent;
                            return res;
                        }
                    }
                    _ => {
                        // sendmmsg reports an error only for the first message of the
                        // vector: skip that one and go on.
                        self.last_send_errno
                            .store(err.raw_os_error().unwrap_or(0), Ordering::Relaxed);
                        res.failed += 1;
                        pos += 1;
                    }
                }
            }
        }
        res
    }

    /// Sends one datagram without blocking (`WouldBlock` when the buffer is full).
    pub fn send_to(&self, pkt: &[u8], addr: SocketAddr) -> io::Result<()> {
        let (sa, len) = SockAddr::encode(addr, self.v6).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::Unsupported,
                format!("{addr} is not reachable from an IPv4-only socket"),
            )
        })?;
        loop {
            // SAFETY: pkt is valid for reads of pkt.len() bytes; sa holds `len` valid
            // address bytes.
            let ret = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    pkt.as_ptr().cast(),
                    pkt.len(),
                    libc::MSG_DONTWAIT,
                    (&sa as *const SockAddr).cast(),
                    len,
                )
            };
            if ret >= 0 {
                return Ok(());
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
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

impl AsRawFd for UdpSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for UdpSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

fn new_socket(domain: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: socket takes no pointers; it returns a new fd or -1.
    let fd = cvt(unsafe {
        libc::socket(
            domain,
            libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            libc::IPPROTO_UDP,
        )
    })?;
    // SAFETY: fd was just returned by socket and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn setsockopt_int(
    fd: &OwnedFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: passes a pointer to a live c_int and its exact size.
    let ret = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    cvt(ret).map(drop)
}

fn getsockopt_int(fd: &OwnedFd, level: libc::c_int, name: libc::c_int) -> io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: value has room for `len` bytes; the kernel writes at most that.
    let ret = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    cvt(ret)?;
    Ok(value)
}

/// Most segments one UDP GSO send may carry (the kernel's UDP_MAX_SEGMENTS).
const GSO_MAX_SEGMENTS: usize = 64;
/// Most bytes one UDP GSO send may carry.
const GSO_MAX_BYTES: usize = 65000;
/// `UDP_SEGMENT` (include/uapi/linux/udp.h).
const UDP_SEGMENT: libc::c_int = 103;

/// How a kernel refusal of a whole GSO run is handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GsoRefusal {
    /// No UDP GSO on this socket's path at all (no such option, or a device or xfrm
    /// path without checksum offload: EIO): plain sends from now on.
    ForGood,
    /// The run's segments do not fit the path MTU (EMSGSIZE, or EINVAL when the
    /// segment size plus headers exceeds it): plain sends, which the stack can
    /// fragment, for this run; GSO stays on for the other paths.
    ThisRun,
}

fn gso_refusal(err: &io::Error) -> Option<GsoRefusal> {
    match err.raw_os_error()? {
        libc::ENOPROTOOPT | libc::EIO => Some(GsoRefusal::ForGood),
        libc::EMSGSIZE | libc::EINVAL => Some(GsoRefusal::ThisRun),
        _ => None,
    }
}

/// Scratch space for [`UdpSocket::send_gso_batch_with`].
pub struct GsoSendBatch {
    arrays: MsgArrays,
    /// One control message (UDP_SEGMENT) per header; u64s keep it aligned.
    cmsgs: Box<[[u64; 4]]>,
    /// (first datagram, datagrams) of each header's run.
    runs: Vec<(usize, usize)>,
}

impl GsoSendBatch {
    /// Room for [`MAX_BATCH`] datagrams per syscall.
    pub fn new() -> GsoSendBatch {
        GsoSendBatch {
            arrays: MsgArrays::new(MAX_BATCH),
            cmsgs: vec![[0u64; 4]; MAX_BATCH].into_boxed_slice(),
            runs: Vec::with_capacity(MAX_BATCH),
        }
    }
}

impl Default for GsoSendBatch {
    fn default() -> GsoSendBatch {
        GsoSendBatch::new()
    }
}

impl UdpSocket {
    /// Whether UDP segmentation offload is in use (see
    /// [`send_gso_batch_with`](UdpSocket::send_gso_batch_with)).
    pub fn gso_enabled(&self) -> bool {
        self.gso.load(Ordering::Relaxed)
    }

    /// Turns UDP segmentation offload off (or back on, to be tried again).
    pub fn set_gso(&self, on: bool) {
        self.gso.store(on, Ordering::Relaxed);
    }

    /// Like [`send_batch_with`](UdpSocket::send_batch_with), but runs of datagrams to
    /// one address, all of one size but a shorter last one, go down as one UDP GSO send
    /// (`UDP_SEGMENT`): the stack then handles each run once instead of per datagram.
    /// A run the kernel refuses as a whole is sent again as plain datagrams with the
    /// rest of the batch, never lost: for good when the path has no GSO at all, for
    /// this batch when the run did not fit the path's MTU.
    pub fn send_gso_batch_with(
        &self,
        scratch: &mut GsoSendBatch,
        plain: &mut SendBatch,
        pkts: &[(&[u8], SocketAddr)],
    ) -> SendResult {
        if !self.gso_enabled() {
            return self.send_batch_with(plain, pkts);
        }
        let mut res = SendResult::default();
        let mut start = 0;
        while start < pkts.len() {
            let end = (start + MAX_BATCH).min(pkts.len());
            let chunk = &pkts[start..end];
            let (sent, failed, refused_gso) = self.send_gso_chunk(scratch, chunk);
            res.sent += sent;
            res.failed += failed;
            if let Some(from) = refused_gso {
                let rest = self.send_batch_with(plain, &pkts[start + from..]);
                res.sent += rest.sent;
                res.failed += rest.failed;
                return res;
            }
            start = end;
        }
        res
    }

    /// Sends up to MAX_BATCH datagrams; returns (sent, failed, Some(index) if the kernel
    /// refused a GSO run starting at that datagram, which is then not counted).
    fn send_gso_chunk(
        &self,
        scratch: &mut GsoSendBatch,
        pkts: &[(&[u8], SocketAddr)],
    ) -> (usize, usize, Option<usize>) {
        let GsoSendBatch {
            arrays,
            cmsgs,
            runs,
        } = scratch;
        runs.clear();
        let mut failed = 0;
        let mut i = 0;
        let mut h = 0;
        while i < pkts.len() {
            let (first, addr) = pkts[i];
            let Some((sa, namelen)) = SockAddr::encode(addr, self.v6) else {
                self.last_send_errno
                    .store(libc::EAFNOSUPPORT, Ordering::Relaxed);
                failed += 1;
                i += 1;
                continue;
            };
            let size = first.len();
            let mut j = i + 1;
            let mut total = size;
            while j < pkts.len()
                && j - i < GSO_MAX_SEGMENTS
                && pkts[j].1 == addr
                && pkts[j].0.len() <= size
                && total + pkts[j].0.len() <= GSO_MAX_BYTES
                && size > 0
            {
                total += pkts[j].0.len();
                j += 1;
                if pkts[j - 1].0.len() < size {
                    break;
                }
            }
            for (iov, (pkt, _)) in arrays.iovs[i..j].iter_mut().zip(&pkts[i..j]) {
                *iov = libc::iovec {
                    // The kernel only reads through iov_base on send.
                    iov_base: pkt.as_ptr().cast_mut().cast(),
                    iov_len: pkt.len(),
                };
            }
            arrays.addrs[h] = sa;
            let iov: *mut libc::iovec = &mut arrays.iovs[i];
            let name: *mut SockAddr = &mut arrays.addrs[h];
            let hdr = &mut arrays.hdrs[h];
            hdr.msg_hdr.msg_name = name.cast();
            hdr.msg_hdr.msg_namelen = namelen;
            hdr.msg_hdr.msg_iov = iov;
            hdr.msg_hdr.msg_iovlen = j - i;
            hdr.msg_hdr.msg_flags = 0;
            hdr.msg_len = 0;
            if j - i > 1 {
                let buf = &mut cmsgs[h];
                // SAFETY: CMSG_SPACE/CMSG_LEN are pure arithmetic.
                let (space, len) = unsafe { (libc::CMSG_SPACE(2), libc::CMSG_LEN(2)) };
                hdr.msg_hdr.msg_control = buf.as_mut_ptr().cast();
                hdr.msg_hdr.msg_controllen = space as usize;
                // SAFETY: the control buffer is 32 bytes, aligned for cmsghdr, and larger
                // than CMSG_SPACE(2); CMSG_FIRSTHDR points into it.
                unsafe {
                    let c = libc::CMSG_FIRSTHDR(&hdr.msg_hdr);
                    (*c).cmsg_level = libc::SOL_UDP;
                    (*c).cmsg_type = UDP_SEGMENT;
                    (*c).cmsg_len = len as usize;
                    std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), size as u16);
                }
            } else {
                hdr.msg_hdr.msg_control = ptr::null_mut();
                hdr.msg_hdr.msg_controllen = 0;
            }
            runs.push((i, j - i));
            h += 1;
            i = j;
        }
        let mut sent = 0;
        let mut pos = 0;
        let mut deadline: Option<Instant> = None;
        while pos < h {
            // SAFETY: headers pos..h point at iovecs over live caller payloads, address
            // slots with `msg_namelen` valid bytes and control buffers set up above; all
            // stay borrowed until the call returns.
            let ret = unsafe {
                libc::sendmmsg(
                    self.fd.as_raw_fd(),
                    arrays.hdrs.as_mut_ptr().add(pos),
                    (h - pos) as libc::c_uint,
                    libc::MSG_DONTWAIT,
                )
            };
            if ret > 0 {
                for _ in 0..ret {
                    sent += runs[pos].1;
                    pos += 1;
                }
                continue;
            }
            let err = if ret == 0 {
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
                        return (
                            sent,
                            failed + runs[pos..].iter().map(|r| r.1).sum::<usize>(),
                            None,
                        );
                    }
                }
                _ if runs[pos].1 > 1 && gso_refusal(&err).is_some() => {
                    // The run goes again as plain datagrams, which the stack may
                    // fragment; see `gso_refusal` for whether GSO stays on.
                    self.last_send_errno
                        .store(err.raw_os_error().unwrap_or(0), Ordering::Relaxed);
                    if gso_refusal(&err) == Some(GsoRefusal::ForGood) {
                        self.set_gso(false);
                    }
                    return (sent, failed, Some(runs[pos].0));
                }
                _ => {
                    self.last_send_errno
                        .store(err.raw_os_error().unwrap_or(0), Ordering::Relaxed);
                    failed += runs[pos].1;
                    pos += 1;
                }
            }
        }
        (sent, failed, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn is_send_and_sync() {
        assert_send_sync::<UdpSocket>();
        fn assert_send<T: Send>() {}
        assert_send::<RecvBatch>();
        assert_send::<SendBatch>();
    }

    #[test]
    fn v4_destination_is_mapped_on_a_v6_socket() {
        let addr: SocketAddr = "198.18.0.7:51820".parse().unwrap();
        let (sa, len) = SockAddr::encode(addr, true).unwrap();
        assert_eq!(len as usize, size_of::<libc::sockaddr_in6>());
        // SAFETY: encode wrote the v6 member.
        let sin6 = unsafe { sa.v6 };
        assert_eq!(
            Ipv6Addr::from(sin6.sin6_addr.s6_addr),
            "::ffff:198.18.0.7".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(u16::from_be(sin6.sin6_port), 51820);
        // And back: a mapped source becomes V4 again.
        assert_eq!(sa.decode(), Some(addr));
    }

    #[test]
    fn v6_round_trip_keeps_scope() {
        let addr = SocketAddr::V6(SocketAddrV6::new("2001:2::9".parse().unwrap(), 7, 0, 3));
        let (sa, _) = SockAddr::encode(addr, true).unwrap();
        assert_eq!(sa.decode(), Some(addr));
    }

    #[test]
    fn v4_only_socket_encoding() {
        let v4: SocketAddr = "198.18.1.1:9".parse().unwrap();
        let (sa, len) = SockAddr::encode(v4, false).unwrap();
        assert_eq!(len as usize, size_of::<libc::sockaddr_in>());
        assert_eq!(sa.decode(), Some(v4));
        let mapped: SocketAddr = "[::ffff:198.18.1.1]:9".parse().unwrap();
        assert_eq!(
            SockAddr::encode(mapped, false).unwrap().0.decode(),
            Some(v4)
        );
        let v6: SocketAddr = "[2001:2::1]:9".parse().unwrap();
        assert!(SockAddr::encode(v6, false).is_none());
    }

    #[test]
    fn unknown_family_decodes_to_none() {
        assert_eq!(SockAddr::EMPTY.decode(), None);
    }

    #[test]
    fn scratch_capacity_is_clamped() {
        assert_eq!(RecvBatch::with_capacity(0).capacity(), 1);
        assert_eq!(RecvBatch::with_capacity(100_000).capacity(), MAX_BATCH);
        assert_eq!(SendBatch::new().capacity(), MAX_BATCH);
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
