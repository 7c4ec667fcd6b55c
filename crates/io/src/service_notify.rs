//! The service manager's notification socket: systemd's `sd_notify` protocol,
//! spoken directly (one datagram of `KEY=VALUE` lines to the socket that
//! `NOTIFY_SOCKET` names). A unit of `Type=notify` learns from it when the
//! daemon is ready, when it reloads, when it stops, and, with `WatchdogSec=`,
//! that it is still alive.
//!
//! Without `NOTIFY_SOCKET` (not started by a service manager that listens)
//! there is no notifier and nothing is sent.

use std::ffi::OsString;
use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

/// The longest a message waits for room in the service manager's queue.
const SEND_TIMEOUT: Duration = Duration::from_secs(2);

/// Where the service manager listens.
pub struct Notifier {
    socket: UnixDatagram,
    to: SocketAddr,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifier").field("to", &self.to).finish()
    }
}

impl Notifier {
    /// The socket `NOTIFY_SOCKET` names: `None` when it is unset or empty; an
    /// error when it names no socket we can send to.
    pub fn from_env() -> io::Result<Option<Notifier>> {
        match std::env::var_os("NOTIFY_SOCKET") {
            Some(v) if !v.is_empty() => Notifier::to(&v).map(Some),
            _ => Ok(None),
        }
    }

    /// A notifier for the socket at `name`: a path, or an abstract name written
    /// with a leading `@`.
    pub fn to(name: &std::ffi::OsStr) -> io::Result<Notifier> {
        let bytes = name.as_bytes();
        let to = match bytes.split_first() {
            Some((b'@', abstract_name)) => SocketAddr::from_abstract_name(abstract_name)?,
            Some((b'/', _)) => SocketAddr::from_pathname(name)?,
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "NOTIFY_SOCKET {:?} is neither a path nor an abstract name (@...)",
                        OsString::from(name)
                    ),
                ));
            }
        };
        let socket = UnixDatagram::unbound()?;
        // Blocking, with a bound: a service manager busy at boot may have its
        // queue full for a moment, and a READY=1 lost to that fails the start.
        socket.set_write_timeout(Some(SEND_TIMEOUT))?;
        Ok(Notifier { socket, to })
    }

    /// Sends `state`: `KEY=VALUE` lines, as the protocol has them.
    pub fn send(&self, state: &str) -> io::Result<()> {
        self.socket
            .send_to_addr(state.as_bytes(), &self.to)
            .map(drop)
    }

    /// Ready: the daemon does its job now; `status` says how, for `systemctl
    /// status`.
    pub fn ready(&self, status: &str) -> io::Result<()> {
        self.send(&format!("READY=1\nSTATUS={}", one_line(status)))
    }

    /// Reloading its configuration: ready again at the next [`ready`](Notifier::ready).
    pub fn reloading(&self) -> io::Result<()> {
        self.send(&format!("RELOADING=1\nMONOTONIC_USEC={}", monotonic_usec()))
    }

    /// Stopping.
    pub fn stopping(&self) -> io::Result<()> {
        self.send("STOPPING=1")
    }

    /// Still alive (the watchdog's ping).
    pub fn watchdog(&self) -> io::Result<()> {
        self.send("WATCHDOG=1")
    }
}

/// How often the service manager expects [`Notifier::watchdog`]: `WATCHDOG_USEC`,
/// when it is meant for this process (`WATCHDOG_PID` unset or this process's).
pub fn watchdog_interval() -> Option<Duration> {
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    if let Ok(pid) = std::env::var("WATCHDOG_PID")
        && pid.parse::<u32>().ok() != Some(std::process::id())
    {
        return None;
    }
    (usec > 0).then(|| Duration::from_micros(usec))
}

/// `CLOCK_MONOTONIC` in microseconds: the clock the service manager compares
/// `MONOTONIC_USEC` with.
pub fn monotonic_usec() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live timespec the call writes.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1_000
}

/// `text` on one line: a status is one `KEY=VALUE` line.
fn one_line(text: &str) -> String {
    text.replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn messages_reach_a_path_socket_in_order() {
        let dir = std::env::temp_dir().join(format!("lr-notify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify.sock");
        let _ = std::fs::remove_file(&path);
        let listener = UnixDatagram::bind(&path).unwrap();
        let n = Notifier::to(path.as_os_str()).unwrap();
        n.ready("up\nnow").unwrap();
        n.reloading().unwrap();
        n.watchdog().unwrap();
        let mut buf = [0u8; 256];
        let mut got = Vec::new();
        for _ in 0..3 {
            let len = listener.recv(&mut buf).unwrap();
            got.push(String::from_utf8_lossy(&buf[..len]).into_owned());
        }
        assert_eq!(got[0], "READY=1\nSTATUS=up now");
        assert!(
            got[1].starts_with("RELOADING=1\nMONOTONIC_USEC="),
            "{}",
            got[1]
        );
        assert_eq!(got[2], "WATCHDOG=1");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn abstract_names_and_nonsense() {
        let name = format!("lr-notify-test-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let listener = UnixDatagram::bind_addr(&addr).unwrap();
        let n = Notifier::to(OsStr::new(&format!("@{name}"))).unwrap();
        n.stopping().unwrap();
        let mut buf = [0u8; 64];
        let len = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"STOPPING=1");
        assert!(Notifier::to(OsStr::new("relative/path")).is_err());
        assert!(Notifier::to(OsStr::new("")).is_err());
    }

    #[test]
    fn the_monotonic_clock_moves_on() {
        let a = monotonic_usec();
        std::thread::sleep(Duration::from_millis(2));
        assert!(monotonic_usec() >= a + 1_000);
    }
}
