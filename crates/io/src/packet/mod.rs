//! An AF_PACKET port with memory-mapped TPACKET_V2 rings: whole Ethernet frames in and
//! out of one interface, for gateways where an XDP program cannot attach.
//!
//! The receive and transmit rings share one mapping with the kernel. Receiving copies
//! frames the kernel has filled out of the ring and hands the slots back; sending fills
//! free slots and flushes them all with one `send`. Neither costs a system call per
//! frame, and nothing allocates after [`PacketPort::open`].
//!
//! Each slot's `tp_status` word is the hand-over point: it is read with Acquire before
//! the slot's bytes are touched, and written with Release after, so the kernel sees the
//! bytes before it sees the slot as its own.

mod layout;
mod rings;

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64};

use crate::{context, cvt};
use layout::{Layout, MAX_FRAMES};
pub use layout::{MAX_FRAME, MIN_FRAME};

/// `TPACKET_V2` in `enum tpacket_versions`.
const TPACKET_V2: libc::c_int = 1;
/// `TP_STATUS_WRONG_FORMAT`: a TX slot the kernel refused (when `PACKET_LOSS` is off).
const TP_STATUS_WRONG_FORMAT: u32 = 1 << 2;

/// An AF_PACKET socket bound to one interface, with RX and TX rings mapped.
#[derive(Debug)]
pub struct PacketPort {
    fd: OwnedFd,
    ifname: String,
    ifindex: libc::c_int,
    map: NonNull<u8>,
    map_len: usize,
    layout: Layout,
    rx_head: usize,
    tx_head: usize,
    rx_truncated: u64,
    tx_too_big: u64,
    tx_ring_full: u64,
    tx_rejected: u64,
    tx_flush_errors: u64,
    /// Drops the kernel reported so far; `PACKET_STATISTICS` resets on each read.
    rx_dropped: AtomicU64,
}

// SAFETY: the mapping belongs to this port alone; the raw pointer is only dereferenced
// through `&mut self` (ring access) or not at all, so moving the port to another thread
// is as safe as moving the fd.
unsafe impl Send for PacketPort {}
// SAFETY: `&self` methods touch only the fd (socket options) and atomics, never the rings.
unsafe impl Sync for PacketPort {}

/// How a fanout group shares an interface's frames (see
/// [`PacketPort::join_fanout`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fanout {
    /// By the flow's hash: each flow to one socket, whatever queue it came on.
    Hash,
    /// By the receive queue the frame came on (modulo the group's size): socket `i`
    /// serves queue `i`, as an AF_XDP socket per queue would.
    Queue,
}

impl PacketPort {
    /// Opens a port on `ifname` (in the calling thread's network namespace) with rings
    /// of at least `frames` slots each (rounded up to whole blocks; at most 65,536),
    /// each slot holding an Ethernet frame of up to `max_frame` bytes (at least
    /// [`MIN_FRAME`], at most [`MAX_FRAME`]). The port does not see the frames it
    /// sends itself, where the kernel supports that.
    pub fn open(ifname: &str, frames: usize, max_frame: usize) -> io::Result<PacketPort> {
        let ifindex = if_index(ifname)?;
        // SAFETY: sysconf has no memory-safety preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let page = usize::try_from(page).unwrap_or(4096);
        let layout = Layout::new(frames, page, max_frame).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "AF_PACKET ring of {frames} frames of {max_frame} bytes on {ifname}: at most {MAX_FRAMES} frames of {MAX_FRAME} bytes"
                ),
            )
        })?;

        // Protocol 0 until bind: with ETH_P_ALL here the socket would take frames from
        // every interface into its ring until it is bound to the one it serves.
        // SAFETY: socket takes no pointers; it returns a new fd or -1.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        };
        let raw = cvt(raw).map_err(fail("AF_PACKET socket", ifname))?;
        // SAFETY: `raw` is a fresh fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };

        setsockopt(&fd, libc::PACKET_VERSION, &TPACKET_V2)
            .map_err(fail("PACKET_VERSION", ifname))?;
        // Refused by kernels before 4.20: the port then sees its own frames, which the
        // caller would have to tell apart. Not worth failing over.
        let _ = setsockopt(&fd, libc::PACKET_IGNORE_OUTGOING, &1 as &libc::c_int);
        // Discard a frame the kernel will not send instead of blocking its slot.
        setsockopt(&fd, libc::PACKET_LOSS, &1 as &libc::c_int)
            .map_err(fail("PACKET_LOSS", ifname))?;
        let req = layout.req();
        setsockopt(&fd, libc::PACKET_RX_RING, &req).map_err(fail("PACKET_RX_RING", ifname))?;
        setsockopt(&fd, libc::PACKET_TX_RING, &req).map_err(fail("PACKET_TX_RING", ifname))?;

        let map_len = 2 * layout.ring_bytes();
        // SAFETY: a fresh shared mapping of the socket's rings (RX then TX); the kernel
        // checks the length against the rings it set up.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(fail("mmap of AF_PACKET rings", ifname)(
                io::Error::last_os_error(),
            ));
        }
        // From here Drop unmaps, even if binding fails.
        let port = PacketPort {
            fd,
            ifname: ifname.to_owned(),
            ifindex,
            map: NonNull::new(map.cast()).expect("mmap returned a null mapping"),
            map_len,
            layout,
            rx_head: 0,
            tx_head: 0,
            rx_truncated: 0,
            tx_too_big: 0,
            tx_ring_full: 0,
            tx_rejected: 0,
            tx_flush_errors: 0,
            rx_dropped: AtomicU64::new(0),
        };

        // SAFETY: sockaddr_ll is plain data; all zeroes is a valid value.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        addr.sll_ifindex = ifindex;
        // SAFETY: `addr` is a sockaddr_ll and the length passed is its size.
        let ret = unsafe {
            libc::bind(
                port.fd.as_raw_fd(),
                (&raw const addr).cast(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        cvt(ret).map_err(fail("binding AF_PACKET socket", ifname))?;
        Ok(port)
    }

    /// Turns promiscuous mode on or off for the interface, for as long as this port is
    /// open (the kernel counts such requests per socket and undoes them on close).
    pub fn set_promiscuous(&self, on: bool) -> io::Result<()> {
        let mreq = libc::packet_mreq {
            mr_ifindex: self.ifindex,
            mr_type: libc::PACKET_MR_PROMISC as u16,
            mr_alen: 0,
            mr_address: [0; 8],
        };
        let opt = if on {
            libc::PACKET_ADD_MEMBERSHIP
        } else {
            libc::PACKET_DROP_MEMBERSHIP
        };
        setsockopt(&self.fd, opt, &mreq)
            .map_err(|e| context(e, format_args!("promiscuous mode on {}", self.ifname)))
    }

    /// Joins fanout group `group` of the interface: the kernel then hands each frame
    /// it receives to one socket of the group, chosen as `how` says, so several
    /// workers share the interface without seeing a frame twice. Every socket of a
    /// group must be bound to the same interface and join it the same way; `group`
    /// is unique per interface among the processes of the namespace.
    pub fn join_fanout(&self, group: u16, how: Fanout) -> io::Result<()> {
        let mode = match how {
            Fanout::Hash => libc::PACKET_FANOUT_HASH,
            Fanout::Queue => libc::PACKET_FANOUT_QM,
        };
        let arg = libc::c_int::from(group) | ((mode as libc::c_int) << 16);
        setsockopt(&self.fd, libc::PACKET_FANOUT, &arg).map_err(|e| {
            context(
                e,
                format_args!("joining fanout group {group} on {}", self.ifname),
            )
        })
    }

    /// The interface this port is bound to.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// The longest frame [`send_batch`](PacketPort::send_batch) takes.
    pub fn max_frame(&self) -> usize {
        self.layout.tx_capacity()
    }

    /// Slots in each ring, after rounding.
    pub fn frames(&self) -> usize {
        self.layout.frame_nr
    }

    /// The socket, to poll: readable when the RX ring holds a frame.
    pub fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The `tp_status` word of slot `i` of the RX (`tx == false`) or TX ring.
    fn status(&self, tx: bool, i: usize) -> &AtomicU32 {
        let off = usize::from(tx) * self.layout.ring_bytes() + self.layout.offset(i);
        // SAFETY: `off` is a slot inside the mapping (the layout keeps slots within their
        // ring), slots are 16-byte aligned and start with the u32 tp_status, which the
        // kernel also accesses atomically.
        unsafe { AtomicU32::from_ptr(self.map.as_ptr().add(off).cast()) }
    }

    /// Pointer to the start of slot `i` (its tpacket2_hdr).
    fn slot(&self, tx: bool, i: usize) -> *mut u8 {
        let off = usize::from(tx) * self.layout.ring_bytes() + self.layout.offset(i);
        // SAFETY: `off` is within the mapping, as in `status`.
        unsafe { self.map.as_ptr().add(off) }
    }
}

descriptor_is!(PacketPort, fd);

impl Drop for PacketPort {
    fn drop(&mut self) {
        // SAFETY: `map` and `map_len` are the mapping made in `open`, unmapped only here;
        // the fd closes after (OwnedFd), which also tears down the rings.
        unsafe { libc::munmap(self.map.as_ptr().cast(), self.map_len) };
    }
}

/// The index of interface `name` in the calling thread's namespace.
pub(crate) fn if_index(name: &str) -> io::Result<libc::c_int> {
    let c = CString::new(name).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("interface name {name:?} contains a NUL byte"),
        )
    })?;
    // SAFETY: `c` is a NUL-terminated string that outlives the call.
    let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if index == 0 {
        return Err(context(
            io::Error::last_os_error(),
            format_args!("interface {name:?} not found"),
        ));
    }
    Ok(index as libc::c_int)
}

/// Adds to an error what failed on which interface.
fn fail<'a>(what: &'a str, ifname: &'a str) -> impl FnOnce(io::Error) -> io::Error + 'a {
    move |e| context(e, format_args!("{what} on {ifname}"))
}

/// Sets SOL_PACKET option `opt` to `*val`.
fn setsockopt<T>(fd: &OwnedFd, opt: libc::c_int, val: &T) -> io::Result<()> {
    // SAFETY: `val` points to a live T and the length passed is its size.
    let ret = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            opt,
            (val as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    cvt(ret).map(drop)
}
