//! An AF_XDP port: whole Ethernet frames in and out of one queue of one interface,
//! straight from and into the caller's own packet buffers (the UMEM), with no copy in
//! zero-copy mode and one copy by the kernel in copy mode.
//!
//! The caller owns one page-aligned block of buffers of one power-of-two size
//! ([`FRAME_SIZE`] unless the options say otherwise) and names buffers by number.
//! Buffers travel through four rings shared with the kernel, each
//! moved in batches with no system call of its own:
//!
//! - [`XdpPort::fill`] lends free buffers to the kernel to receive into;
//! - [`XdpPort::recv`] takes back buffers holding received frames;
//! - [`XdpPort::send`] lends buffers holding frames to send (and wakes the kernel
//!   where it needs that: one `sendto`);
//! - [`XdpPort::complete`] takes back buffers the kernel has sent.
//!
//! A frame larger than a buffer travels in several (multi-buffer, with the
//! options' `multi_buffer`): [`XdpPort::recv_fragments`] and
//! [`XdpPort::send_fragments`] move such frames as runs of [`Fragment`]s.
//!
//! Only the frames the gateway handles reach the port: an XDP program
//! (`redirect.bpf.c`) redirects ARP, IPv4 and IPv6 to the socket bound on the queue
//! they arrived on and passes every other EtherType (LLDP, VLAN tags, ...) to the
//! kernel. [`XdpPort::open`] attaches it (native mode, or generic where native is
//! refused) and Drop detaches it, leaving the interface as it was.
//!
//! By concern: `ffi` declares the C side (libxdp, libbpf and the shim in `shim.c` that
//! wraps libxdp's inline ring helpers), `umem` checks the caller's memory and does the
//! address arithmetic, `socket` registers the UMEM and binds the socket, `program`
//! loads, attaches and detaches the XDP program, and `rings` moves buffers and counts
//! what did not make it.

mod attached;
mod ffi;
mod program;
mod rings;
mod socket;
mod umem;

use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;

use crate::context;
use program::Program;

pub use attached::{AttachedProgram, attached_programs, detach_ours};
use socket::Xsk;
use umem::Region;
pub use umem::{FRAME_SIZE, MIN_CHUNK, XDP_PACKET_HEADROOM};

/// Queues the XDP program can send to a socket: the entries of its XSKMAP
/// (`max_entries` in `redirect.bpf.c`). A port on a queue past them is refused at
/// open, so that joining the map in `start_receiving` does not fail for it.
const XSKMAP_ENTRIES: u32 = 256;

/// How the XDP program runs on the interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XdpMode {
    /// In the driver, before any socket buffer is allocated.
    Native,
    /// Generic XDP, after the kernel has built a socket buffer: works on any interface,
    /// at a cost per frame.
    Skb,
}

/// Settings for [`XdpPort::open`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XdpOptions {
    /// Entries in each of the four rings (fill, completion, RX, TX): a power of two.
    pub ring_size: u32,
    /// Ask the driver for zero-copy; copy mode where it refuses.
    pub zero_copy: bool,
    /// Attach the program in generic (SKB) mode without trying native mode first.
    pub skb_mode: bool,
    /// The UMEM's frame headroom: bytes the kernel leaves free in each buffer, on top
    /// of [`XDP_PACKET_HEADROOM`], before a received frame. Received data starts at
    /// `headroom + XDP_PACKET_HEADROOM` into its buffer (384 by default), as
    /// [`XdpPort::recv`] reports.
    pub headroom: u32,
    /// Bytes per buffer: a power of two from [`MIN_CHUNK`] to a page.
    pub chunk_size: u32,
    /// Frames larger than a buffer come and go in several (`XDP_USE_SG`): see
    /// [`XdpPort::recv_fragments`]. The attachment's program must take them
    /// too ([`XdpAttachment::attach`]'s `fragments`).
    pub multi_buffer: bool,
}

impl Default for XdpOptions {
    fn default() -> XdpOptions {
        XdpOptions {
            ring_size: 2048,
            zero_copy: true,
            skb_mode: false,
            headroom: 128,
            chunk_size: FRAME_SIZE as u32,
            multi_buffer: false,
        }
    }
}

impl XdpOptions {
    /// Whether the kernel could take these, and if not why.
    fn check(&self) -> Result<(), String> {
        if !self.ring_size.is_power_of_two() {
            return Err(format!(
                "ring size {} is not a power of two",
                self.ring_size
            ));
        }
        let chunk = self.chunk_size as usize;
        umem::check_chunk(chunk, umem::page_size())?;
        // The kernel needs room for at least a minimal frame after the headroom.
        if self.headroom as usize + XDP_PACKET_HEADROOM as usize + 64 > chunk {
            return Err(format!(
                "headroom {} leaves no room for a frame in a {chunk}-byte buffer",
                self.headroom
            ));
        }
        Ok(())
    }
}

/// The XDP program attached to one interface, for the ports on its queues to share
/// (see [`XdpPort::open_on`]). Dropping it and every port opened on it detaches the
/// program.
#[derive(Debug)]
pub struct XdpAttachment {
    program: Arc<Program>,
    ifname: String,
}

impl XdpAttachment {
    /// Attaches the program to `ifname` (in the calling thread's network namespace):
    /// native mode unless `skb_mode`, generic mode where native is refused. With
    /// `fragments`, the program takes frames larger than a page (the kernel then
    /// gives it them in parts, and native mode on an interface with a large MTU
    /// needs that), for sockets bound with `multi_buffer`.
    pub fn attach(ifname: &str, skb_mode: bool, fragments: bool) -> io::Result<XdpAttachment> {
        let ifindex = crate::packet::if_index(ifname)?;
        let program = Program::attach(ifname, ifindex, skb_mode, fragments)?;
        Ok(XdpAttachment {
            program: Arc::new(program),
            ifname: ifname.to_owned(),
        })
    }

    /// Whether frames reach the sockets with the VLAN tags the driver took out of
    /// them (a NIC's receive offload; on veth, the sender's) put back; where not,
    /// such frames arrive untagged.
    pub fn restores_vlan_tags(&self) -> bool {
        self.program.restores_vlan_tags()
    }

    /// How the program runs: native, or generic where the driver refused native.
    pub fn mode(&self) -> XdpMode {
        self.program.mode()
    }

    /// The interface the program is attached to.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// Has the program send every frame to the sockets, whatever its EtherType (an
    /// interface taken whole), or (false, the default) only ARP, IPv4 and IPv6.
    pub fn take_all(&self, on: bool) -> io::Result<()> {
        self.program.set_take_all(on).map_err(|e| {
            context(
                e,
                format_args!(
                    "{}: setting the XDP program to take every frame",
                    self.ifname
                ),
            )
        })
    }
}

/// One buffer's part of a frame: the buffer, where the part starts in it and its
/// length, and whether the frame goes on in the next part. A frame that fits one
/// buffer is one part with `more` false.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fragment {
    /// The buffer's number in the UMEM.
    pub buf: u32,
    /// Where the part starts in its buffer.
    pub offset: u16,
    /// The part's bytes.
    pub len: u16,
    /// Whether the frame goes on in the next part.
    pub more: bool,
}

/// An AF_XDP socket bound to one queue of one interface, on the caller's memory, with
/// the XDP program that feeds it attached.
#[derive(Debug)]
pub struct XdpPort {
    // Field order is drop order: the socket and UMEM go before the program is detached.
    xsk: Xsk,
    program: Arc<Program>,
    region: Region,
    ifname: String,
    queue: u32,
    zero_copy: bool,
    tx_in_flight: usize,
    tx_ring_full: u64,
    tx_kick_errors: u64,
    rx_kick_errors: u64,
}

impl XdpPort {
    /// Opens a port on queue `queue` of `ifname` (in the calling thread's network
    /// namespace), with `umem_len` bytes at `umem` as its buffers: attaches the XDP
    /// program, registers the memory and binds the socket (zero-copy when `opts` asks
    /// and the driver agrees). On any error the interface is left as it was found; the
    /// error names the interface and the step that failed.
    ///
    /// The port starts with no buffers to receive into, and the program does not send
    /// it frames yet (the kernel's stack has them): [`fill`](XdpPort::fill) some, then
    /// [`start_receiving`](XdpPort::start_receiving). Sending needs neither.
    /// A queue that a socket closed moments ago still holds is waited for, up to a
    /// second.
    ///
    /// # Safety
    ///
    /// - `umem` is page aligned and `umem_len` a non-zero multiple of the options'
    ///   `chunk_size` (checked: an error otherwise), and the memory stays mapped, readable and
    ///   writable until the port is dropped.
    /// - A buffer lent to the kernel (given to [`fill`](XdpPort::fill) or queued by
    ///   [`send`](XdpPort::send)) is neither read nor written by the caller, through
    ///   any reference or pointer, until [`recv`](XdpPort::recv) or
    ///   [`complete`](XdpPort::complete) hands it back: the kernel writes received
    ///   frames into it and reads frames to send from it at any time in between.
    /// - The caller must drop the port before freeing the memory. Other sockets may
    ///   register the same memory only if no buffer is ever lent to two of them at
    ///   once (each lends the kernel only buffers it holds alone).
    pub unsafe fn open(
        ifname: &str,
        queue: u32,
        umem: *mut u8,
        umem_len: usize,
        opts: &XdpOptions,
    ) -> io::Result<XdpPort> {
        opts.check().map_err(|why| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("{ifname}: {why}"))
        })?;
        let attachment = XdpAttachment::attach(ifname, opts.skb_mode, opts.multi_buffer)?;
        // SAFETY: the caller's promises, passed on.
        unsafe { XdpPort::open_on(&attachment, queue, umem, umem_len, opts) }
    }

    /// Opens a port on queue `queue` of the interface `attachment` holds the program
    /// on: as [`open`](XdpPort::open), but the program is shared. Several ports, one
    /// per queue and each with its own memory, serve one interface this way (one
    /// worker per queue); the program stays attached until the last of them and the
    /// attachment are dropped. `opts.skb_mode` is the attachment's business and
    /// ignored here.
    ///
    /// # Safety
    ///
    /// As for [`open`](XdpPort::open), for this port's memory.
    pub unsafe fn open_on(
        attachment: &XdpAttachment,
        queue: u32,
        umem: *mut u8,
        umem_len: usize,
        opts: &XdpOptions,
    ) -> io::Result<XdpPort> {
        let ifname = attachment.ifname.as_str();
        let invalid =
            |why: String| io::Error::new(io::ErrorKind::InvalidInput, format!("{ifname}: {why}"));
        if queue >= XSKMAP_ENTRIES {
            return Err(invalid(format!(
                "queue {queue} is past the {XSKMAP_ENTRIES} queues the XDP program serves"
            )));
        }
        opts.check().map_err(invalid)?;
        if opts.multi_buffer && !attachment.program.takes_fragments() {
            return Err(invalid(
                "a multi-buffer socket needs the program attached for fragments".to_owned(),
            ));
        }
        let region = Region::new(umem, umem_len, umem::page_size(), opts.chunk_size as usize)
            .map_err(invalid)?;
        let program = attachment.program.clone();

        // SAFETY: the region is valid and lent to the socket for its life, as the
        // caller promised for the port's.
        let (xsk, zc_bound) = unsafe { Xsk::open(ifname, queue, region, opts)? };
        // Found now, so that a program without one fails the open, not the start.
        program
            .map_fd()
            .map_err(|e| context(e, format_args!("{ifname}: finding the XSKMAP")))?;
        // The kernel has the last word on the mode; what we bound with is the fallback.
        let zero_copy = xsk.kernel_says_zero_copy().unwrap_or(zc_bound);
        Ok(XdpPort {
            xsk,
            program,
            region,
            ifname: ifname.to_owned(),
            queue,
            zero_copy,
            tx_in_flight: 0,
            tx_ring_full: 0,
            tx_kick_errors: 0,
            rx_kick_errors: 0,
        })
    }

    /// Starts receiving: puts the socket in the program's XSKMAP at its queue, so
    /// that the program sends it that queue's frames. Lend the kernel buffers with
    /// [`fill`](XdpPort::fill) first: a frame that finds none is dropped (counted in
    /// [`rx_fill_empty`](XdpPort::rx_fill_empty)).
    pub fn start_receiving(&mut self) -> io::Result<()> {
        let (ifname, queue) = (&self.ifname, self.queue);
        let map_fd = self
            .program
            .map_fd()
            .map_err(|e| context(e, format_args!("{ifname}: finding the XSKMAP")))?;
        self.xsk.insert_into(map_fd).map_err(|e| {
            context(
                e,
                format_args!("{ifname}: putting the socket in the XSKMAP at queue {queue}"),
            )
        })
    }

    /// The interface this port is bound to.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// The queue this port is bound to.
    pub fn queue(&self) -> u32 {
        self.queue
    }

    /// Buffers in the UMEM; buffer numbers run from 0 to this, exclusive.
    pub fn frames(&self) -> u32 {
        self.region.frames
    }

    /// Bytes per buffer.
    pub fn chunk_size(&self) -> usize {
        self.region.chunk()
    }

    /// How the XDP program runs: native, or generic where the driver refused native.
    pub fn mode(&self) -> XdpMode {
        self.program.mode()
    }

    /// Whether the socket runs zero-copy (the kernel's word); copy mode otherwise.
    pub fn zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// The socket, to poll: readable when the RX ring holds a frame, writable when the
    /// TX ring has room.
    pub fn as_raw_fd(&self) -> RawFd {
        self.xsk.fd()
    }
}

descriptor_is!(XdpPort, xsk);
