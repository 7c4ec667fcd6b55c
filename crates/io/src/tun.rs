//! A layer-3 TUN device (`IFF_TUN | IFF_NO_PI`): each read or write on the fd is one bare
//! IPv4 or IPv6 packet, with no packet-info header in front.
//!
//! The device lives as long as the fd: it is not made persistent, so dropping the
//! [`TunDevice`] removes the interface.
//!
//! With offloads ([`TunDevice::create_offload`]) one read may bring a TCP burst of many
//! packets, and one write may carry many. The buffers for that (the burst as read, one
//! segment, the burst being built) are allocated with the device and reused: a burst
//! that does not fit the caller's batch stays where it was read and is split further on
//! the next call, so nothing on the packet path allocates or copies a segment twice.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::offload::{self, VNET_HDR_LEN, VnetHdr};
use crate::poll::{Interest, wait_fd};
use crate::{context, cvt, os_errno};
use std::sync::Mutex;

const TUN_PATH: &CStr = c"/dev/net/tun";

/// How long [`TunDevice::write_batch`] waits, in total, for the fd to take packets again
/// before it drops the rest. Short, because the caller is a data-path loop.
const WRITE_WAIT: Duration = Duration::from_millis(2);

/// An open TUN interface. All I/O is non-blocking. `Send + Sync`: reads and writes may
/// come from different threads.
#[derive(Debug)]
pub struct TunDevice {
    fd: OwnedFd,
    /// An AF_INET datagram socket for the SIOC[GS]IF* ioctls, which the TUN fd does not
    /// answer. Made together with the device, so it resolves names in the same network
    /// namespace even when the calling thread later moves to another one.
    ctl: OwnedFd,
    name: String,
    /// Packets read that did not fit the caller's buffer.
    too_big: AtomicU64,
    /// Offloaded bursts whose header or segments made no sense.
    malformed: AtomicU64,
    dropped: AtomicU64,
    /// Present when the device was made with offloads (see [`TunDevice::create_offload`]).
    offload: Option<Mutex<OffloadState>>,
    /// With offloads: the buffer write bursts are built in.
    burst: Mutex<Vec<u8>>,
}

/// Buffers for reading offloaded bursts: the burst as read and one segment, both
/// allocated once.
#[derive(Debug)]
struct OffloadState {
    rx: Vec<u8>,
    scratch: Vec<u8>,
    /// A burst in `rx` whose later segments did not fit the caller's batch; they are
    /// handed out first on the next call, and `rx` is not read into until then.
    pending: Option<Pending>,
}

/// Where to resume splitting the burst left in [`OffloadState::rx`].
#[derive(Debug, Clone, Copy)]
struct Pending {
    /// Bytes of `rx` the burst fills, virtio-net header included.
    len: usize,
    hdr: VnetHdr,
    /// The first segment not yet handed out.
    next: usize,
}

/// TUNSETOFFLOAD flags (include/uapi/linux/if_tun.h).
const TUN_F_CSUM: libc::c_ulong = 0x01;
const TUN_F_TSO4: libc::c_ulong = 0x02;
const TUN_F_TSO6: libc::c_ulong = 0x04;
/// The largest burst the kernel hands over with TSO: an IP packet of 64 KiB.
const MAX_BURST: usize = 65536;

impl TunDevice {
    /// Creates (or attaches to a persistent) TUN interface called `name`, in the calling
    /// thread's network namespace. `name` may be a pattern such as `"wg%d"`, or empty for
    /// the kernel's `tun%d`; [`name`](TunDevice::name) then gives the final name.
    pub fn create(name: &str) -> io::Result<TunDevice> {
        Self::create_with(name, false)
    }

    /// Like [`create`](TunDevice::create), with TCP segmentation and checksum offload:
    /// reads return TCP bursts already cut back into MTU-sized packets with complete
    /// checksums, but far fewer read calls happen. Fails where the kernel lacks
    /// `IFF_VNET_HDR` or `TUNSETOFFLOAD`; callers fall back to `create`.
    pub fn create_offload(name: &str) -> io::Result<TunDevice> {
        Self::create_with(name, true)
    }

    /// `queues` queues of one new TUN interface (`IFF_MULTI_QUEUE`), each its own
    /// device to read and write: the kernel hands each flow's packets to one queue, so
    /// a worker per queue sees whole flows. One queue is [`create`] or
    /// [`create_offload`] as they are. The first queue's name is the interface's
    /// (a pattern such as `"wg%d"` resolves there); the others attach to it.
    ///
    /// [`create`]: TunDevice::create
    /// [`create_offload`]: TunDevice::create_offload
    pub fn create_queues(name: &str, queues: usize, offload: bool) -> io::Result<Vec<TunDevice>> {
        let first = Self::create_flags(name, offload, queues > 1)?;
        let name = first.name().to_string();
        let mut all = vec![first];
        for _ in 1..queues {
            all.push(Self::create_flags(&name, offload, true)?);
        }
        Ok(all)
    }

    fn create_with(name: &str, offload: bool) -> io::Result<TunDevice> {
        Self::create_flags(name, offload, false)
    }

    fn create_flags(name: &str, offload: bool, multi_queue: bool) -> io::Result<TunDevice> {
        if name.len() >= libc::IFNAMSIZ {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "TUN name {name:?} is {} bytes; interface names are at most {}",
                    name.len(),
                    libc::IFNAMSIZ - 1
                ),
            ));
        }
        let mut ifr = ifreq_named(name)?;

        // SAFETY: TUN_PATH is a NUL-terminated string; open returns a new fd or -1.
        let raw = unsafe {
            libc::open(
                TUN_PATH.as_ptr(),
                libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        };
        let raw = cvt(raw).map_err(|e| {
            let hint = match e.raw_os_error() {
                Some(libc::ENOENT) | Some(libc::ENODEV) | Some(libc::ENXIO) => {
                    " (no TUN support: is the tun module loaded?)"
                }
                Some(libc::EACCES) | Some(libc::EPERM) => " (permission denied)",
                _ => "",
            };
            context(e, format_args!("opening /dev/net/tun{hint}"))
        })?;
        // SAFETY: raw was just returned by open and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };

        let vnet = if offload { libc::IFF_VNET_HDR } else { 0 };
        let multi = if multi_queue {
            libc::IFF_MULTI_QUEUE
        } else {
            0
        };
        ifr.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI | vnet | multi) as libc::c_short;
        // SAFETY: TUNSETIFF reads and writes one struct ifreq, which ifr is.
        let ret = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &mut ifr) };
        cvt(ret).map_err(|e| {
            let hint = match e.raw_os_error() {
                Some(libc::EPERM) | Some(libc::EACCES) => {
                    "permission denied (needs CAP_NET_ADMIN in this network namespace)"
                }
                Some(libc::EBUSY) => {
                    "device busy (another fd, maybe another process, holds this TUN)"
                }
                Some(libc::EINVAL) => {
                    "invalid name, or an interface of another type already has it"
                }
                _ => "TUNSETIFF failed",
            };
            context(e, format_args!("creating TUN {name:?}: {hint}"))
        })?;
        let name = name_of(&ifr);
        if offload {
            let flags = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6;
            // SAFETY: TUNSETOFFLOAD takes its flags by value.
            let ret = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETOFFLOAD, flags) };
            cvt(ret).map_err(|e| context(e, format_args!("enabling offloads on TUN {name:?}")))?;
        }

        // SAFETY: socket takes no pointers; it returns a new fd or -1.
        let ctl = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        let ctl = cvt(ctl).map_err(|e| context(e, "control socket for TUN ioctls"))?;
        // SAFETY: ctl was just returned by socket and is owned by nobody else.
        let ctl = unsafe { OwnedFd::from_raw_fd(ctl) };

        Ok(TunDevice::from_parts(fd, ctl, name, offload))
    }

    /// The device around an open TUN fd and its control socket, with the buffers that
    /// offloads need allocated here, once.
    fn from_parts(fd: OwnedFd, ctl: OwnedFd, name: String, offload: bool) -> TunDevice {
        TunDevice {
            fd,
            ctl,
            name,
            too_big: AtomicU64::new(0),
            malformed: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            offload: offload.then(|| {
                Mutex::new(OffloadState {
                    rx: vec![0; VNET_HDR_LEN + MAX_BURST],
                    scratch: vec![0; MAX_BURST],
                    pending: None,
                })
            }),
            burst: Mutex::new(if offload {
                vec![0; VNET_HDR_LEN + MAX_BURST]
            } else {
                Vec::new()
            }),
        }
    }

    /// Whether reads and writes carry offload headers.
    pub fn has_offload(&self) -> bool {
        self.offload.is_some()
    }

    /// The interface name the kernel gave the device.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The interface MTU.
    pub fn mtu(&self) -> io::Result<u32> {
        let ifr = self.ctl_ioctl(libc::SIOCGIFMTU, "get MTU", |_| {})?;
        // SAFETY: SIOCGIFMTU filled the ifru_mtu member of the union.
        Ok(unsafe { ifr.ifr_ifru.ifru_mtu } as u32)
    }

    /// Sets the interface MTU (the kernel accepts 68..=65535 for TUN).
    pub fn set_mtu(&self, mtu: u32) -> io::Result<()> {
        let mtu_c = libc::c_int::try_from(mtu)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "MTU out of range"))?;
        self.ctl_ioctl(libc::SIOCSIFMTU, format_args!("set MTU {mtu}"), |ifr| {
            ifr.ifr_ifru.ifru_mtu = mtu_c;
        })?;
        Ok(())
    }

    /// The interface index.
    pub fn ifindex(&self) -> io::Result<u32> {
        let ifr = self.ctl_ioctl(libc::SIOCGIFINDEX, "get ifindex", |_| {})?;
        // SAFETY: SIOCGIFINDEX filled the ifru_ifindex member of the union.
        Ok(unsafe { ifr.ifr_ifru.ifru_ifindex } as u32)
    }

    /// Whether the interface is administratively up (IFF_UP).
    pub fn is_up(&self) -> io::Result<bool> {
        let ifr = self.ctl_ioctl(libc::SIOCGIFFLAGS, "get flags", |_| {})?;
        // SAFETY: SIOCGIFFLAGS filled the ifru_flags member of the union.
        let flags = unsafe { ifr.ifr_ifru.ifru_flags };
        Ok(flags & libc::IFF_UP as libc::c_short != 0)
    }

    /// Whether the fd is still attached to an interface. Asks the TUN fd itself
    /// (TUNGETIFF), so the answer does not depend on names or on the calling thread's
    /// network namespace: after `ip link del` the kernel detaches the fd and this
    /// returns false.
    pub fn still_exists(&self) -> bool {
        // SAFETY: all-zero bytes are a valid ifreq (integers, arrays and a union of them).
        let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
        // SAFETY: TUNGETIFF writes one struct ifreq, which ifr is.
        let ret = unsafe { libc::ioctl(self.fd.as_raw_fd(), libc::TUNGETIFF, &mut ifr) };
        ret == 0
    }

    /// Reads up to `min(bufs.len(), lens.len())` packets; packet `i` lands in `bufs[i]`
    /// with its length in `lens[i]`. Returns how many were read, 0 when none was pending;
    /// never blocks. A packet longer than its buffer is cut by the kernel: it is dropped
    /// (its slot is reused) and counted in [`too_big`](TunDevice::too_big). An error is returned only when
    /// no packet was read; otherwise it comes back on the next call.
    pub fn read_batch(&self, bufs: &mut [&mut [u8]], lens: &mut [usize]) -> io::Result<usize> {
        if let Some(state) = &self.offload {
            let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
            return self.read_batch_offload(&mut state, bufs, lens);
        }
        let slots = bufs.len().min(lens.len());
        let mut n = 0;
        // Truncated packets use a read but no slot; bound the reads so a flood of
        // oversized packets cannot keep this call going forever.
        let mut reads_left = slots.saturating_mul(2);
        while n < slots && reads_left > 0 {
            reads_left -= 1;
            let buf = &mut *bufs[n];
            // The kernel fills what fits and returns the bytes copied, so a packet that
            // exactly fills the buffer and a longer, cut one look alike. One spare byte
            // after the buffer tells them apart: it is only reached by a packet that
            // did not fit.
            let mut spare = 0u8;
            let iov = [
                libc::iovec {
                    iov_base: buf.as_mut_ptr().cast(),
                    iov_len: buf.len(),
                },
                libc::iovec {
                    iov_base: (&mut spare as *mut u8).cast(),
                    iov_len: 1,
                },
            ];
            // SAFETY: both iovecs cover live, writable memory (the caller's buffer and
            // `spare`) that outlives the call.
            let ret = unsafe { libc::readv(self.fd.as_raw_fd(), iov.as_ptr(), 2) };
            let len = match read_step(ret, n)? {
                ReadStep::Got(len) => len,
                ReadStep::Retry => continue,
                ReadStep::Stop => break,
            };
            if len == 0 {
                break;
            }
            if len > buf.len() {
                self.too_big.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            lens[n] = len;
            n += 1;
        }
        Ok(n)
    }

    /// The offload flavour of [`read_batch`](TunDevice::read_batch): each read may
    /// bring a burst that becomes many packets.
    fn read_batch_offload(
        &self,
        state: &mut OffloadState,
        bufs: &mut [&mut [u8]],
        lens: &mut [usize],
    ) -> io::Result<usize> {
        let slots = bufs.len().min(lens.len());
        let mut n = 0;
        if let Some(pending) = state.pending.take() {
            self.hand_out(state, pending, bufs, lens, &mut n);
        }
        let mut reads_left = slots;
        while n < slots && reads_left > 0 {
            reads_left -= 1;
            // SAFETY: reads at most rx.len() bytes into rx, which is valid for writes.
            let ret = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    state.rx.as_mut_ptr().cast(),
                    state.rx.len(),
                )
            };
            let len = match read_step(ret, n)? {
                ReadStep::Got(len) => len,
                ReadStep::Retry => continue,
                ReadStep::Stop => break,
            };
            let Some(hdr) = VnetHdr::parse(&state.rx[..len]) else {
                self.malformed.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            let burst = Pending { len, hdr, next: 0 };
            self.hand_out(state, burst, bufs, lens, &mut n);
        }
        Ok(n)
    }

    /// Splits the burst in `state.rx` from segment `burst.next` on into the caller's
    /// slots from `n` on; what does not fit stays pending. A segment longer than its
    /// slot is dropped and counted, a burst that makes no sense is counted as
    /// malformed.
    fn hand_out(
        &self,
        state: &mut OffloadState,
        burst: Pending,
        bufs: &mut [&mut [u8]],
        lens: &mut [usize],
        n: &mut usize,
    ) {
        let slots = bufs.len().min(lens.len());
        let OffloadState {
            rx,
            scratch,
            pending,
        } = state;
        let pkt = &mut rx[VNET_HDR_LEN..burst.len];
        let res = offload::split_from(&burst.hdr, pkt, scratch, burst.next, |seg| {
            if *n >= slots {
                return false;
            }
            if seg.len() > bufs[*n].len() {
                self.too_big.fetch_add(1, Ordering::Relaxed);
            } else {
                bufs[*n][..seg.len()].copy_from_slice(seg);
                lens[*n] = seg.len();
                *n += 1;
            }
            true
        });
        match res {
            Ok(None) => {}
            Ok(Some(next)) => *pending = Some(Pending { next, ..burst }),
            Err(_) => {
                self.malformed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Writes one packet (a whole IPv4 or IPv6 packet). `WouldBlock` when the fd is full.
    pub fn write(&self, pkt: &[u8]) -> io::Result<()> {
        // With offloads every packet carries a header; all zeros says "nothing to do".
        let hdr = [0u8; VNET_HDR_LEN];
        self.writev2(if self.offload.is_some() { &hdr } else { &[] }, pkt)
    }

    /// Writes `head` and `pkt` as one packet.
    fn writev2(&self, head: &[u8], pkt: &[u8]) -> io::Result<()> {
        let iov = [
            libc::iovec {
                iov_base: head.as_ptr() as *mut libc::c_void,
                iov_len: head.len(),
            },
            libc::iovec {
                iov_base: pkt.as_ptr() as *mut libc::c_void,
                iov_len: pkt.len(),
            },
        ];
        let want = iov[0].iov_len + pkt.len();
        loop {
            // SAFETY: both iovecs point at live memory valid for reads (writev only
            // reads them) that outlives the call.
            let ret = unsafe { libc::writev(self.fd.as_raw_fd(), iov.as_ptr(), 2) };
            if ret < 0 {
                let err = io::Error::last_os_error();
                if err.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(err);
            }
            if ret as usize != want {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    format!("short TUN write: {ret} of {want} bytes"),
                ));
            }
            return Ok(());
        }
    }

    /// Writes `pkts` in order and returns how many the kernel took. When the fd is full
    /// it waits (a couple of milliseconds in all) for room, then gives up; packets not
    /// written — for that reason, because the kernel refused one (e.g. not IP), or
    /// because the device is down or gone — are counted in
    /// [`dropped`](TunDevice::dropped).
    ///
    /// With offloads, consecutive segments of one TCP flow go down as one burst (what
    /// the kernel's GRO would have made of them), so the stack handles them once.
    pub fn write_batch(&self, pkts: &[&[u8]]) -> usize {
        let mut burst = self.burst.lock().unwrap_or_else(|p| p.into_inner());
        let mut written = 0;
        let mut refused = 0;
        let mut deadline: Option<Instant> = None;
        let mut i = 0;
        while i < pkts.len() {
            // Runs are found one at a time (again after a wait: it is cheap), so no
            // list of them is kept.
            let count = if self.offload.is_some() {
                offload::burst_len(pkts, i)
            } else {
                1
            };
            let res = if count == 1 {
                self.write(pkts[i])
            } else {
                let n = offload::build_burst(&pkts[i..i + count], &mut burst);
                self.writev2(&[], &burst[..n])
            };
            match res {
                Ok(()) => {
                    written += count;
                    i += count;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let deadline = *deadline.get_or_insert_with(|| Instant::now() + WRITE_WAIT);
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() || !wait_fd(self.fd.as_raw_fd(), Interest::WRITABLE, left) {
                        break;
                    }
                }
                // Gone, or down (EIO): every later write would fail the same way.
                Err(e) if is_gone(&e) || e.raw_os_error() == Some(libc::EIO) => break,
                Err(_) => {
                    refused += count;
                    i += count;
                }
            }
        }
        let dropped = refused + (pkts.len() - i);
        if dropped > 0 {
            self.dropped.fetch_add(dropped as u64, Ordering::Relaxed);
        }
        written
    }

    /// Packets dropped by [`read_batch`](TunDevice::read_batch) because they did not fit
    /// their buffer (longer than the data path carries), since creation.
    pub fn too_big(&self) -> u64 {
        self.too_big.load(Ordering::Relaxed)
    }

    /// Offloaded bursts [`read_batch`](TunDevice::read_batch) dropped because their
    /// virtio-net header or segments were malformed, since creation.
    pub fn malformed(&self) -> u64 {
        self.malformed.load(Ordering::Relaxed)
    }

    /// Packets [`write_batch`](TunDevice::write_batch) could not write, since creation.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// The TUN fd, to poll.
    pub fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Runs one SIOC*IF* ioctl on the control socket for this interface's name.
    fn ctl_ioctl(
        &self,
        request: libc::Ioctl,
        what: impl std::fmt::Display,
        fill: impl FnOnce(&mut libc::ifreq),
    ) -> io::Result<libc::ifreq> {
        let mut ifr = ifreq_named(&self.name)?;
        fill(&mut ifr);
        // SAFETY: every request used here reads and/or writes one struct ifreq.
        let ret = unsafe { libc::ioctl(self.ctl.as_raw_fd(), request, &mut ifr) };
        cvt(ret).map_err(|e| context(e, format_args!("{what} of {}", self.name)))?;
        Ok(ifr)
    }
}

descriptor_is!(TunDevice, fd);

/// What one read's return value means for a batch holding `have` packets so far.
enum ReadStep {
    /// The read brought this many bytes.
    Got(usize),
    /// A signal interrupted it: read again.
    Retry,
    /// Nothing more to read now, or an error after some packets were read (the
    /// error comes back on the next call): return what the batch has.
    Stop,
}

/// Sorts a read's return value; call right after the read, while errno is its own.
/// An error with no packet read yet is returned.
fn read_step(ret: isize, have: usize) -> io::Result<ReadStep> {
    if ret >= 0 {
        return Ok(ReadStep::Got(ret as usize));
    }
    let err = io::Error::last_os_error();
    match err.kind() {
        io::ErrorKind::Interrupted => Ok(ReadStep::Retry),
        io::ErrorKind::WouldBlock => Ok(ReadStep::Stop),
        _ if have > 0 => Ok(ReadStep::Stop),
        _ => Err(err),
    }
}

/// Whether `err`, from a [`TunDevice`] call, means the interface is gone (deleted, or its
/// namespace destroyed) rather than a passing condition. The kernel detaches the fd on
/// deletion and then answers reads and writes with EBADFD; the ioctls by name (MTU,
/// ifindex, flags) fail with ENODEV. A write to a device that is merely down fails with
/// EIO, which is not "gone".
pub fn is_gone(err: &io::Error) -> bool {
    matches!(
        os_errno(err),
        Some(libc::EBADFD) | Some(libc::ENODEV) | Some(libc::ENXIO)
    )
}

/// A zeroed ifreq carrying `name`.
fn ifreq_named(name: &str) -> io::Result<libc::ifreq> {
    if name.len() >= libc::IFNAMSIZ || name.bytes().any(|b| b == 0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad interface name {name:?}"),
        ));
    }
    // SAFETY: all-zero bytes are a valid ifreq (integers, arrays and a union of them).
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, &src) in ifr.ifr_name.iter_mut().zip(name.as_bytes()) {
        *dst = src as libc::c_char;
    }
    Ok(ifr)
}

/// The NUL-terminated name the kernel wrote back into `ifr`.
fn name_of(ifr: &libc::ifreq) -> String {
    let bytes: Vec<u8> = ifr
        .ifr_name
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn is_send_and_sync() {
        assert_send_sync::<TunDevice>();
    }

    #[test]
    fn long_name_is_refused_before_any_syscall() {
        let err = TunDevice::create("a-name-much-too-long").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("at most 15"), "{err}");
    }

    #[test]
    fn nul_in_name_is_refused() {
        let err = TunDevice::create("bad\0name").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn ifreq_name_round_trip() {
        let ifr = ifreq_named("wg%d").unwrap();
        assert_eq!(name_of(&ifr), "wg%d");
        let ifr = ifreq_named("fifteen-chars-x").unwrap();
        assert_eq!(name_of(&ifr), "fifteen-chars-x");
    }

    #[test]
    fn gone_errnos() {
        assert!(is_gone(&io::Error::from_raw_os_error(libc::EBADFD)));
        assert!(is_gone(&io::Error::from_raw_os_error(libc::ENODEV)));
        assert!(!is_gone(&io::Error::from_raw_os_error(libc::EAGAIN)));
        assert!(!is_gone(&io::Error::from_raw_os_error(libc::EINVAL)));
        assert!(!is_gone(&io::Error::other("not an os error")));
    }

    /// A connected pair of non-blocking SOCK_SEQPACKET sockets: like a TUN fd, each
    /// read and write is one whole message, so the reader's side of offloads can be
    /// tested without a device.
    fn seqpacket_pair() -> (OwnedFd, OwnedFd) {
        let mut fds = [0; 2];
        // SAFETY: socketpair writes two fds into the array it is given.
        let ret = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        };
        cvt(ret).unwrap();
        // SAFETY: both fds were just made by socketpair and are owned by nobody else.
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
    }

    /// An IPv4 TCP burst of `segments` segments of `mss` bytes, behind the
    /// virtio-net header the kernel puts in front of it.
    fn burst(seq: u32, segments: usize, mss: u16) -> Vec<u8> {
        use wire::{ipv4, tcp};
        let payload_len = segments * mss as usize;
        let mut b = vec![0u8; VNET_HDR_LEN + 40 + payload_len];
        let (hdr, pkt) = b.split_at_mut(VNET_HDR_LEN);
        offload::VnetHdr {
            gso_type: 1, // TCPv4
            gso_size: mss,
            hdr_len: 40,
            ..Default::default()
        }
        .emit(hdr.try_into().unwrap());
        ipv4::Ipv4Repr {
            src_addr: "198.18.0.1".parse().unwrap(),
            dst_addr: "198.18.0.2".parse().unwrap(),
            protocol: wire::ip::protocol::TCP,
            payload_len: (20 + payload_len) as u16,
            ttl: 64,
            dscp: 0,
            ecn: 0,
            ident: 1,
            dont_frag: true,
        }
        .emit(pkt)
        .unwrap();
        let mut t = tcp::Packet::new_unchecked(&mut pkt[20..]);
        t.set_header_len(20);
        t.set_seq_number(seq);
        t.set_flags(tcp::flags::ACK);
        for (i, b) in t.payload_mut().iter_mut().enumerate() {
            *b = (seq as usize + i) as u8;
        }
        b
    }

    /// Bursts split over many small reads keep every segment, in order: the rest of a
    /// burst that did not fit one call comes first in the next, before anything read
    /// after it, and a malformed message in between is counted and skipped.
    #[test]
    fn bursts_split_across_reads_keep_every_segment_in_order() {
        let (ours, theirs) = seqpacket_pair();
        let (ctl, _ctl_peer) = seqpacket_pair();
        let tun = TunDevice::from_parts(ours, ctl, "test".into(), true);

        let mut want: Vec<Vec<u8>> = Vec::new();
        let mut scratch = vec![0u8; MAX_BURST];
        for k in 0..12u32 {
            let mut msg = burst(k * 100_000, 1 + k as usize % 7, 100 + k as u16);
            if k == 5 {
                // A message too short for a virtio-net header.
                let junk = [0u8; 4];
                // SAFETY: junk is valid for reads of its length.
                let ret = unsafe { libc::write(theirs.as_raw_fd(), junk.as_ptr().cast(), 4) };
                assert_eq!(ret, 4);
            }
            // SAFETY: msg is valid for reads of its length.
            let ret = unsafe { libc::write(theirs.as_raw_fd(), msg.as_ptr().cast(), msg.len()) };
            assert_eq!(ret as usize, msg.len());
            let hdr = VnetHdr::parse(&msg).unwrap();
            offload::split(&hdr, &mut msg[VNET_HDR_LEN..], &mut scratch, |s| {
                want.push(s.to_vec())
            })
            .unwrap();
        }
        assert_eq!(want.len(), (0..12).map(|k| 1 + k % 7).sum::<usize>());

        let mut storage = vec![[0u8; 2048]; 3];
        let mut got: Vec<Vec<u8>> = Vec::new();
        loop {
            let mut bufs: Vec<&mut [u8]> = storage.iter_mut().map(|b| &mut b[..]).collect();
            let mut lens = [0usize; 3];
            let n = tun.read_batch(&mut bufs, &mut lens).unwrap();
            if n == 0 {
                break;
            }
            got.extend((0..n).map(|i| bufs[i][..lens[i]].to_vec()));
        }
        assert_eq!(got.len(), want.len());
        assert!(got == want, "segments differ or are out of order");
        assert_eq!(tun.malformed(), 1);
        assert_eq!(tun.too_big(), 0);
    }

    /// Written segments of one flow go down as one burst per run, and the bursts give
    /// the segments back; a packet that joins no burst goes alone.
    #[test]
    fn write_batch_joins_runs_into_bursts() {
        let (ours, theirs) = seqpacket_pair();
        let (ctl, _ctl_peer) = seqpacket_pair();
        let tun = TunDevice::from_parts(ours, ctl, "test".into(), true);

        let mut scratch = vec![0u8; MAX_BURST];
        let mut segs: Vec<Vec<u8>> = Vec::new();
        for (seq, count) in [(0, 5), (1_000_000, 3)] {
            let mut msg = burst(seq, count, 500);
            let hdr = VnetHdr::parse(&msg).unwrap();
            offload::split(&hdr, &mut msg[VNET_HDR_LEN..], &mut scratch, |s| {
                segs.push(s.to_vec())
            })
            .unwrap();
        }
        let lone = segs[0][..30].to_vec(); // not TCP data: written alone
        let mut pkts: Vec<&[u8]> = segs.iter().map(|s| s.as_slice()).collect();
        pkts.insert(5, &lone);
        assert_eq!(tun.write_batch(&pkts), pkts.len());
        assert_eq!(tun.dropped(), 0);

        let mut back: Vec<Vec<u8>> = Vec::new();
        let mut messages = 0;
        let mut buf = vec![0u8; VNET_HDR_LEN + MAX_BURST];
        loop {
            // SAFETY: buf is valid for writes of its length.
            let ret = unsafe { libc::read(theirs.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if ret <= 0 {
                break;
            }
            messages += 1;
            let len = ret as usize;
            let hdr = VnetHdr::parse(&buf).unwrap();
            offload::split(&hdr, &mut buf[VNET_HDR_LEN..len], &mut scratch, |s| {
                back.push(s.to_vec())
            })
            .unwrap();
        }
        assert_eq!(messages, 3, "two bursts and the lone packet");
        assert_eq!(back.len(), pkts.len());
        assert!(back.iter().zip(&pkts).all(|(a, b)| a == b));
    }
}
