//! Linux drivers for host mode: a layer-3 TUN device and a batched UDP socket; for
//! whole Ethernet frames, an AF_XDP port on the caller's own buffers and an AF_PACKET
//! port where XDP cannot attach; plus the small pieces a data-path thread needs around
//! them (poll, an eventfd waker) and the network-namespace support that integration
//! tests use.
//!
//! Drivers move bytes; they know nothing of WireGuard. Every call is non-blocking, except
//! where a bounded wait is documented (a full send queue), so a worker loop never stalls.

#![cfg(target_os = "linux")]
#![warn(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]

#[macro_use]
mod fd;
pub mod affinity;
pub mod heap;
pub mod netdev;
pub mod netns;
pub mod offload;
pub mod packet;
pub mod poll;
pub mod port_drops;
pub mod port_lock;
pub mod service_notify;
pub mod tun;
pub mod udp;
pub mod waker;
pub mod xdp;

pub use packet::{Fanout, PacketPort};
pub use poll::{Interest, PollFd, poll};
pub use port_lock::{LockError, PortLock};
pub use tun::{TunDevice, is_gone};
pub use udp::{GsoSendBatch, MAX_BATCH, RecvBatch, RecvMeta, SendBatch, SendResult, UdpSocket};
pub use waker::Waker;
pub use xdp::{Fragment, XdpAttachment, XdpMode, XdpOptions, XdpPort};

use std::io;

/// Turns a libc return value into a `Result`, reading `errno` for -1.
fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Keeps the error kind (and so `ErrorKind` matching) while saying what was attempted.
/// The original error stays reachable, so [`os_errno`] still sees its errno.
fn context(err: io::Error, what: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        err.kind(),
        Context {
            what: what.to_string(),
            source: err,
        },
    )
}

#[derive(Debug)]
struct Context {
    what: String,
    source: io::Error,
}

impl std::fmt::Display for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.what, self.source)
    }
}

impl std::error::Error for Context {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// The errno behind `err`, also when this crate wrapped it with context.
fn os_errno(err: &io::Error) -> Option<i32> {
    err.raw_os_error().or_else(|| {
        err.get_ref()?
            .downcast_ref::<Context>()
            .and_then(|c| os_errno(&c.source))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_keeps_kind_and_errno() {
        let err = context(io::Error::from_raw_os_error(libc::ENODEV), "get MTU of x");
        assert_eq!(os_errno(&err), Some(libc::ENODEV));
        assert_eq!(
            err.kind(),
            io::Error::from_raw_os_error(libc::ENODEV).kind()
        );
        assert!(err.to_string().starts_with("get MTU of x: "), "{err}");
        let twice = context(err, "outer");
        assert_eq!(os_errno(&twice), Some(libc::ENODEV));
        assert_eq!(os_errno(&io::Error::other("plain")), None);
    }
}
