//! A thin wrapper over ppoll(2): enough for a data-path thread to sleep on a TUN fd, a UDP
//! socket and a waker at once.

use std::io;
use std::os::fd::RawFd;
use std::ptr;
use std::time::{Duration, Instant};

use crate::cvt;

/// What a [`PollFd`] waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interest(libc::c_short);

impl Interest {
    /// Data can be read without blocking.
    pub const READABLE: Interest = Interest(libc::POLLIN);
    /// Data can be written without blocking.
    pub const WRITABLE: Interest = Interest(libc::POLLOUT);
    /// Either of the above.
    pub const BOTH: Interest = Interest(libc::POLLIN | libc::POLLOUT);
    /// Only errors and hang-ups, which poll(2) always reports.
    pub const NONE: Interest = Interest(0);
}

/// One descriptor to poll. `repr(transparent)` so that a slice of these is the
/// `struct pollfd` array the kernel reads, without copying.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct PollFd(libc::pollfd);

impl PollFd {
    /// Watches `fd` for `interest`. The fd is not owned: the caller keeps it open while
    /// polling (a closed fd is reported as an error, not undefined behaviour).
    pub fn new(fd: RawFd, interest: Interest) -> PollFd {
        PollFd(libc::pollfd {
            fd,
            events: interest.0,
            revents: 0,
        })
    }

    /// The watched descriptor.
    pub fn fd(&self) -> RawFd {
        self.0.fd
    }

    /// Changes what the next [`poll`] waits for, e.g. WRITABLE only while a queue is full.
    pub fn set_interest(&mut self, interest: Interest) {
        self.0.events = interest.0;
    }

    /// The last poll found data to read.
    pub fn readable(&self) -> bool {
        self.0.revents & libc::POLLIN != 0
    }

    /// The last poll found room to write.
    pub fn writable(&self) -> bool {
        self.0.revents & libc::POLLOUT != 0
    }

    /// The last poll found an error condition, a hang-up or an invalid fd. A deleted TUN
    /// device shows up here.
    pub fn error(&self) -> bool {
        self.0.revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0
    }
}

impl std::fmt::Debug for PollFd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PollFd")
            .field("fd", &self.0.fd)
            .field("events", &self.0.events)
            .field("revents", &self.0.revents)
            .finish()
    }
}

/// Waits until one of `fds` is ready or `timeout` passes (`None`: forever). Returns how
/// many entries have events; 0 on timeout and also when a signal interrupted the wait,
/// so the caller's loop simply goes round again.
pub fn poll(fds: &mut [PollFd], timeout: Option<Duration>) -> io::Result<usize> {
    let ts = timeout.map(|d| libc::timespec {
        // Clamp absurd timeouts instead of overflowing; ~68 years is "forever" enough.
        tv_sec: d.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: PollFd is repr(transparent) over pollfd, so the slice is a valid pollfd
    // array of fds.len() entries that the kernel may write revents into; ts_ptr is null
    // or points to a timespec that lives until the call returns; a null sigmask means
    // "leave the mask alone", which makes ppoll behave like poll with ns precision.
    let ret = unsafe {
        libc::ppoll(
            fds.as_mut_ptr().cast::<libc::pollfd>(),
            fds.len() as libc::nfds_t,
            ts_ptr,
            ptr::null(),
        )
    };
    match cvt(ret) {
        Ok(n) => Ok(n as usize),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(0),
        Err(e) => Err(e),
    }
}

/// Waits up to `timeout` for `fd` to be ready for `interest`; true when it is (or when it
/// reports an error, so that the caller's next syscall surfaces that error).
pub(crate) fn wait_fd(fd: RawFd, interest: Interest, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    let mut fds = [PollFd::new(fd, interest)];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match poll(&mut fds, Some(left)) {
            Ok(n) if n > 0 => return true,
            Ok(_) if left.is_zero() => return false,
            Ok(_) => {}
            Err(_) => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn times_out_with_nothing_ready() {
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut fds = [PollFd::new(sock.as_raw_fd(), Interest::READABLE)];
        let start = Instant::now();
        let n = poll(&mut fds, Some(Duration::from_millis(20))).unwrap();
        assert_eq!(n, 0);
        assert!(start.elapsed() >= Duration::from_millis(15));
        assert!(!fds[0].readable() && !fds[0].error());
    }

    #[test]
    fn reports_readable_and_writable() {
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        b.send_to(b"x", a.local_addr().unwrap()).unwrap();
        let mut fds = [
            PollFd::new(a.as_raw_fd(), Interest::READABLE),
            PollFd::new(b.as_raw_fd(), Interest::WRITABLE),
        ];
        let n = poll(&mut fds, Some(Duration::from_secs(2))).unwrap();
        assert_eq!(n, 2);
        assert!(fds[0].readable() && !fds[0].writable());
        assert!(fds[1].writable() && !fds[1].readable());
        assert_eq!(fds[0].fd(), a.as_raw_fd());
    }

    #[test]
    fn wait_fd_bounded() {
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let start = Instant::now();
        assert!(!wait_fd(
            sock.as_raw_fd(),
            Interest::READABLE,
            Duration::from_millis(5)
        ));
        assert!(start.elapsed() < Duration::from_secs(1));
        assert!(wait_fd(
            sock.as_raw_fd(),
            Interest::WRITABLE,
            Duration::from_millis(5)
        ));
    }
}
