//! Making the socket and setting its options: the dual-stack bind with its IPv4-only
//! fallback, SO_MARK, buffer sizes, and the single unbatched send.
//!
//! Nothing here runs per packet except [`UdpSocket::send_to`], which the data path uses
//! only for the odd handshake message; the batched calls are in `batch` and `gso`.

use std::io;
use std::mem::size_of;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI32};

use super::addr::SockAddr;
use super::{RecvBatch, SendBatch, UdpSocket};
use crate::{context, cvt};

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

    /// `count` sockets on one port with SO_REUSEPORT, one per worker: the kernel
    /// hands each peer's datagrams (by their addresses' hash) to one of them, and each
    /// sends from the same port. Port 0 picks a free port for all of them. One socket
    /// is [`bind`](UdpSocket::bind) as it is.
    pub fn bind_group(port: u16, count: usize) -> io::Result<Vec<UdpSocket>> {
        if count <= 1 {
            return Ok(vec![UdpSocket::bind(port)?]);
        }
        let first = UdpSocket::bind_reuseport(port)?;
        let port = first.local_port();
        let mut all = vec![first];
        for _ in 1..count {
            all.push(UdpSocket::bind_reuseport(port)?);
        }
        Ok(all)
    }

    fn bind_reuseport(port: u16) -> io::Result<UdpSocket> {
        let (fd, v6) = match new_socket(libc::AF_INET6) {
            Ok(fd) => (fd, true),
            Err(e) if e.raw_os_error() == Some(libc::EAFNOSUPPORT) => (
                new_socket(libc::AF_INET).map_err(|e| context(e, "creating UDP socket"))?,
                false,
            ),
            Err(e) => return Err(context(e, "creating UDP socket")),
        };
        setsockopt_int(&fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)
            .map_err(|e| context(e, "setting SO_REUSEPORT"))?;
        UdpSocket::bind_fd(fd, v6, port)
    }

    /// Another handle on this socket (a duplicated descriptor): options set through
    /// either apply to the one socket.
    pub fn duplicate(&self) -> io::Result<UdpSocket> {
        let fd = self
            .fd
            .try_clone()
            .map_err(|e| context(e, "duplicating the UDP socket"))?;
        Ok(UdpSocket {
            gso: AtomicBool::new(true),
            fd,
            v6: self.v6,
            port: self.port,
            rx: Mutex::new(RecvBatch::new()),
            tx: Mutex::new(SendBatch::new()),
            last_send_errno: AtomicI32::new(0),
        })
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
        let mut len = SockAddr::LEN;
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
