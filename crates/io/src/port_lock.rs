//! One process per interface: whoever takes an interface over (a gateway's port)
//! holds an advisory lock on a file named by the network namespace and the
//! interface, so a second process on the same interface is refused before it
//! opens anything, with the first one's own words on who it is. The kernel drops
//! an flock with the last descriptor, so a process that died (kill -9, the OOM
//! killer) leaves no lock behind, and the next start knows that what it finds
//! attached to the interface is left over, not in use.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Where the lock files are kept.
pub const LOCK_DIR: &str = "/run/linerate/ports";

/// A held lock on one interface; released when dropped (or when the process ends).
#[derive(Debug)]
pub struct PortLock {
    _file: File,
    path: PathBuf,
}

/// Why an interface could not be locked.
#[derive(Debug)]
pub enum LockError {
    /// Another live process holds it; what it wrote of itself.
    Held(String),
    /// The lock file could not be made or locked.
    Io(io::Error),
}

impl std::fmt::Display for LockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LockError::Held(by) => write!(f, "is in use by another process ({by})"),
            LockError::Io(e) => write!(f, "could not be locked: {e}"),
        }
    }
}

impl PortLock {
    /// Locks `ifname` of the calling thread's network namespace, in `dir`, and
    /// writes `holder` (who we are, for a second process's message) into the file.
    pub fn take(dir: &Path, ifname: &str, holder: &str) -> Result<PortLock, LockError> {
        if ifname.is_empty() || ifname.contains('/') || ifname.starts_with('.') {
            return Err(LockError::Io(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{ifname:?} is not an interface name"),
            )));
        }
        let ns = std::fs::metadata("/proc/thread-self/ns/net")
            .map_err(LockError::Io)?
            .ino();
        std::fs::create_dir_all(dir).map_err(LockError::Io)?;
        let path = dir.join(format!("netns{ns}-{ifname}.lock"));
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(LockError::Io)?;
        // SAFETY: flock on a descriptor we own; no memory is passed.
        let ret = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if ret != 0 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                let mut by = String::new();
                let _ = file.read_to_string(&mut by);
                let by = by.trim();
                return Err(LockError::Held(if by.is_empty() {
                    "it did not say who it is".into()
                } else {
                    by.to_string()
                }));
            }
            return Err(LockError::Io(err));
        }
        file.set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| file.write_all(holder.as_bytes()))
            .map_err(LockError::Io)?;
        Ok(PortLock { _file: file, path })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("linerate-port-lock-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn a_second_taker_is_refused_with_the_first_ones_words_until_it_lets_go() {
        let d = dir();
        let first = PortLock::take(&d, "lan", "pid 1, control /run/a.sock").unwrap();
        match PortLock::take(&d, "lan", "pid 2") {
            Err(LockError::Held(by)) => assert_eq!(by, "pid 1, control /run/a.sock"),
            other => panic!("{other:?}"),
        }
        let other_port = PortLock::take(&d, "wan", "pid 2").unwrap();
        drop(first);
        let again = PortLock::take(&d, "lan", "pid 3").unwrap();
        assert_eq!(std::fs::read_to_string(again.path()).unwrap(), "pid 3");
        drop((again, other_port));
        assert!(PortLock::take(&d, "../x", "pid 4").is_err());
        let _ = std::fs::remove_dir_all(&d);
    }
}
