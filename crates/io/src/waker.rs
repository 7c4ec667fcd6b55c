//! Cross-thread wake-up for a data-path thread asleep in [`crate::poll()`]: an eventfd that
//! becomes readable when anyone calls [`Waker::wake`].

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::cvt;

/// An eventfd counter. Wakes coalesce: any number of `wake` calls before a `drain` make
/// one readable event. `Send + Sync` (it is only an fd), so it can be shared in an `Arc`.
#[derive(Debug)]
pub struct Waker {
    fd: OwnedFd,
}

impl Waker {
    /// Creates a non-blocking, close-on-exec eventfd.
    pub fn new() -> io::Result<Waker> {
        // SAFETY: eventfd takes no pointers; it returns a new fd or -1.
        let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
        // SAFETY: fd was just returned by eventfd and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Waker { fd })
    }

    /// Makes the fd readable until the next [`drain`](Waker::drain).
    pub fn wake(&self) -> io::Result<()> {
        let one: u64 = 1;
        loop {
            // SAFETY: writes 8 bytes from a live u64 to an fd we own.
            let ret = unsafe {
                libc::write(
                    self.fd.as_raw_fd(),
                    (&one as *const u64).cast(),
                    size_of::<u64>(),
                )
            };
            if ret >= 0 {
                return Ok(());
            }
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::Interrupted => continue,
                // The counter is saturated: the reader has a wake pending anyway.
                io::ErrorKind::WouldBlock => return Ok(()),
                _ => return Err(err),
            }
        }
    }

    /// Resets the counter. Returns true when at least one wake was pending.
    pub fn drain(&self) -> bool {
        let mut count: u64 = 0;
        loop {
            // SAFETY: reads 8 bytes into a live u64 from an fd we own.
            let ret = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    (&mut count as *mut u64).cast(),
                    size_of::<u64>(),
                )
            };
            if ret >= 0 {
                return count > 0;
            }
            if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                // EAGAIN: nothing pending. Nothing else can fail on a valid eventfd.
                return false;
            }
        }
    }

    /// The fd to poll for readability.
    pub fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

descriptor_is!(Waker, fd);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Interest, PollFd, poll};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn is_send_and_sync() {
        assert_send_sync::<Waker>();
    }

    #[test]
    fn wake_then_drain() {
        let w = Waker::new().unwrap();
        assert!(!w.drain());
        w.wake().unwrap();
        w.wake().unwrap();
        assert!(w.drain());
        assert!(!w.drain());
    }

    #[test]
    fn wakes_a_thread_blocked_in_poll() {
        let w = Arc::new(Waker::new().unwrap());
        let remote = Arc::clone(&w);
        let start = Instant::now();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            remote.wake().unwrap();
        });
        let mut fds = [PollFd::new(w.as_raw_fd(), Interest::READABLE)];
        let mut woken = false;
        while start.elapsed() < Duration::from_secs(5) {
            if poll(&mut fds, Some(Duration::from_secs(5))).unwrap() > 0 {
                woken = fds[0].readable();
                break;
            }
        }
        t.join().unwrap();
        assert!(woken);
        assert!(w.drain());
        // Drained: a zero-timeout poll finds nothing.
        assert_eq!(poll(&mut fds, Some(Duration::ZERO)).unwrap(), 0);
    }
}
