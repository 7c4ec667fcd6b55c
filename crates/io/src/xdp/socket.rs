//! The AF_XDP socket and its UMEM registration, made through libxdp, with the four
//! rings' state (owned by the shim) that both point into.

use std::ffi::CString;
use std::io;
use std::os::fd::{BorrowedFd, RawFd};
use std::ptr::{self, NonNull};
use std::time::{Duration, Instant};

use super::XdpOptions;
use super::ffi::{self, Rings, XskSocket, XskUmem, neg_errno};
use super::umem::Region;
use crate::context;

/// How long [`Xsk::open`] keeps trying a queue that answers `EBUSY`.
const BUSY_WAIT: Duration = Duration::from_secs(1);

/// One AF_XDP socket bound to one queue, on a UMEM of its own. Drop deletes the socket,
/// then the UMEM registration, then the ring state (libxdp points into it until then).
#[derive(Debug)]
pub(super) struct Xsk {
    rings: NonNull<Rings>,
    umem: *mut XskUmem,
    socket: *mut XskSocket,
}

// SAFETY: the socket, UMEM and ring state belong to this value alone; rings are only
// touched through `&mut self`, so moving it to another thread is as safe as moving an fd.
unsafe impl Send for Xsk {}
// SAFETY: `&self` methods read the socket's fd and nothing else.
unsafe impl Sync for Xsk {}

impl Xsk {
    /// Registers `region` as a UMEM and binds a socket on it to `queue` of `ifname`:
    /// zero-copy first when `opts.zero_copy`, copy mode when that is refused. Returns
    /// the socket and whether it runs zero-copy.
    ///
    /// A queue that a socket closed moments ago still holds (the kernel lets it go in
    /// deferred work) answers `EBUSY`; that is retried for up to [`BUSY_WAIT`].
    ///
    /// # Safety
    ///
    /// `region` must stay valid, and unused by anything but this socket's rings, for as
    /// long as the returned value lives (see [`XdpPort::open`](super::XdpPort::open)).
    pub(super) unsafe fn open(
        ifname: &str,
        queue: u32,
        region: Region,
        opts: &XdpOptions,
    ) -> io::Result<(Xsk, bool)> {
        let deadline = Instant::now() + BUSY_WAIT;
        // Bounded by the deadline as well as the count.
        for _ in 0..BUSY_WAIT.as_millis() {
            // SAFETY: passed on from the caller; a failed try leaves nothing behind.
            match unsafe { Xsk::open_once(ifname, queue, region, opts) } {
                Err(e) if crate::os_errno(&e) == Some(libc::EBUSY) && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                done => return done,
            }
        }
        // SAFETY: as above.
        unsafe { Xsk::open_once(ifname, queue, region, opts) }
    }

    /// One try at [`Xsk::open`].
    ///
    /// # Safety
    ///
    /// As for [`Xsk::open`].
    unsafe fn open_once(
        ifname: &str,
        queue: u32,
        region: Region,
        opts: &XdpOptions,
    ) -> io::Result<(Xsk, bool)> {
        // Multi-buffer sockets say so at bind (`XDP_USE_SG`), in either mode.
        let sg = if opts.multi_buffer {
            libc::XDP_USE_SG
        } else {
            0
        };
        let copy = libc::XDP_USE_NEED_WAKEUP | libc::XDP_COPY | sg;
        if !opts.zero_copy {
            // SAFETY: passed on from the caller.
            return unsafe { Xsk::with_flags(ifname, queue, region, opts, copy, None) }
                .map(|x| (x, false));
        }
        let zc = libc::XDP_USE_NEED_WAKEUP | libc::XDP_ZEROCOPY | sg;
        // SAFETY: passed on from the caller.
        let zc_err = match unsafe { Xsk::with_flags(ifname, queue, region, opts, zc, None) } {
            Ok(x) => return Ok((x, true)),
            Err(e) => e,
        };
        // A fresh UMEM for the second try: a failed bind leaves the first one's rings
        // set up, which only libxdp's internals know how to reuse. The error says why
        // zero-copy failed, by its errno alone: the step is the same.
        let why = crate::os_errno(&zc_err).map_or(zc_err, io::Error::from_raw_os_error);
        // SAFETY: passed on from the caller; the first try's socket and UMEM are gone.
        unsafe { Xsk::with_flags(ifname, queue, region, opts, copy, Some(&why)) }
            .map(|x| (x, false))
    }

    /// One try at [`Xsk::open`] with the given bind flags (and, for copy mode after
    /// zero-copy failed, why it did).
    ///
    /// # Safety
    ///
    /// As for [`Xsk::open`].
    unsafe fn with_flags(
        ifname: &str,
        queue: u32,
        region: Region,
        opts: &XdpOptions,
        bind_flags: u16,
        zc_refused: Option<&io::Error>,
    ) -> io::Result<Xsk> {
        let step = |what: &str| {
            let what = format!("{ifname}: {what}");
            move |e: io::Error| context(e, what)
        };
        // SAFETY: lr_xsk_rings_new only allocates (zeroed) memory.
        let rings = NonNull::new(unsafe { ffi::lr_xsk_rings_new() })
            .ok_or_else(|| step("allocating ring state")(io::ErrorKind::OutOfMemory.into()))?;
        // From here Drop releases what exists.
        let mut xsk = Xsk {
            rings,
            umem: ptr::null_mut(),
            socket: ptr::null_mut(),
        };
        // SAFETY: the region is valid for the socket's life (the caller's promise); the
        // ring state outlives the UMEM (Drop frees it last); `xsk.umem` is written on
        // success only.
        let ret = unsafe {
            ffi::lr_xsk_umem_create(
                &mut xsk.umem,
                xsk.rings.as_ptr(),
                region.base.cast(),
                region.len as u64,
                opts.ring_size,
                opts.ring_size,
                region.chunk() as u32,
                opts.headroom,
            )
        };
        if ret != 0 {
            return Err(step("registering the UMEM")(neg_errno(ret)));
        }
        let name = CString::new(ifname).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("interface name {ifname:?} contains a NUL byte"),
            )
        })?;
        // SAFETY: `umem` was made above, the ring state outlives the socket, `name` is
        // NUL-terminated and outlives the call; `xsk.socket` is written on success only.
        let ret = unsafe {
            ffi::lr_xsk_socket_create(
                &mut xsk.socket,
                xsk.rings.as_ptr(),
                xsk.umem,
                name.as_ptr(),
                queue,
                opts.ring_size,
                opts.ring_size,
                bind_flags,
            )
        };
        if ret != 0 {
            let mode = match (bind_flags & libc::XDP_ZEROCOPY != 0, zc_refused) {
                (true, _) => "zero-copy".to_owned(),
                (false, None) => "copy mode".to_owned(),
                (false, Some(zc)) => format!("copy mode; zero-copy: {zc}"),
            };
            return Err(step(&format!(
                "binding an AF_XDP socket to queue {queue} ({mode})"
            ))(neg_errno(ret)));
        }
        Ok(xsk)
    }

    /// Puts this socket in `map_fd` (an XSKMAP) at its queue's index.
    pub(super) fn insert_into(&mut self, map_fd: RawFd) -> io::Result<()> {
        // SAFETY: `socket` is live (made in `open`); libxdp reads its queue and fd.
        let ret = unsafe { ffi::xsk_socket__update_xskmap(self.socket, map_fd) };
        if ret != 0 {
            return Err(neg_errno(ret));
        }
        Ok(())
    }

    /// The socket's fd (owned by libxdp, closed on drop).
    pub(super) fn fd(&self) -> RawFd {
        // SAFETY: `socket` is live; xsk_socket__fd only reads it.
        unsafe { ffi::xsk_socket__fd(self.socket) }
    }

    /// The socket's fd, borrowed for as long as this value lives.
    pub(super) fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: libxdp closes the fd only in xsk_socket__delete, in Drop, which cannot
        // run while the borrow lasts.
        unsafe { BorrowedFd::borrow_raw(self.fd()) }
    }

    /// Whether the kernel runs this socket zero-copy (`XDP_OPTIONS`).
    pub(super) fn kernel_says_zero_copy(&self) -> io::Result<bool> {
        let mut opts = libc::xdp_options { flags: 0 };
        self.getsockopt(libc::XDP_OPTIONS, &mut opts)?;
        Ok(opts.flags & libc::XDP_OPTIONS_ZEROCOPY != 0)
    }

    /// The kernel's counters for this socket (`XDP_STATISTICS`).
    pub(super) fn statistics(&self) -> io::Result<libc::xdp_statistics> {
        let mut stats = no_statistics();
        self.getsockopt(libc::XDP_STATISTICS, &mut stats)?;
        Ok(stats)
    }

    /// Reads SOL_XDP option `opt` into `*val` (the kernel may fill less of it).
    fn getsockopt<T>(&self, opt: libc::c_int, val: &mut T) -> io::Result<()> {
        let mut len = size_of::<T>() as libc::socklen_t;
        // SAFETY: `val` and `len` are live, and `len` is the size of `*val`.
        let ret = unsafe {
            libc::getsockopt(
                self.fd(),
                libc::SOL_XDP,
                opt,
                (val as *mut T).cast(),
                &mut len,
            )
        };
        crate::cvt(ret).map(drop)
    }

    /// The ring state, for the shim's batch calls.
    pub(super) fn rings(&mut self) -> *mut Rings {
        self.rings.as_ptr()
    }
}

impl Drop for Xsk {
    fn drop(&mut self) {
        // SAFETY: each pointer is null or what libxdp made in `with_flags`, deleted only
        // here, socket before UMEM (libxdp refuses the reverse) and both before the
        // ring state they point into. Closing the socket also takes it out of the XSKMAP.
        unsafe {
            if !self.socket.is_null() {
                ffi::xsk_socket__delete(self.socket);
            }
            if !self.umem.is_null() {
                ffi::xsk_umem__delete(self.umem);
            }
            ffi::lr_xsk_rings_free(self.rings.as_ptr());
        }
    }
}

/// The kernel's counters for a socket, all zero: where they are read into, and
/// what a socket whose kernel will not say reports.
pub(super) const fn no_statistics() -> libc::xdp_statistics {
    libc::xdp_statistics {
        rx_dropped: 0,
        rx_invalid_descs: 0,
        tx_invalid_descs: 0,
        rx_ring_full: 0,
        rx_fill_ring_empty_descs: 0,
        tx_ring_empty_descs: 0,
    }
}
