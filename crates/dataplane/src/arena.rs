//! One block of equal packet buffers, allocated once. A packet is a handle (the
//! buffer's number) plus [`PacketMeta`]. Buffers are [`STANDARD_BUFFER`] bytes, or
//! [`JUMBO_BUFFER`] in an arena made for jumbo frames (one size per arena: a packet
//! is always whole in one buffer, so every node and engine sees it contiguous), with
//! [`HEADROOM`] bytes kept free in front for outer headers, so encapsulation never
//! copies (a receive that needs less in front may start its packets elsewhere: see
//! [`RxStarts`]); the layout (equal frames, one page-aligned block) is what an
//! AF_XDP UMEM wants: a driver registers the block ([`Arena::umem`]) and the kernel
//! writes and reads the buffers in place.

// The arena's memory is reached through raw pointers on purpose (see `base`).
#![allow(unsafe_code)]

pub mod rx_starts;

use rx_starts::RxStarts;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;

/// The size of every buffer of an arena for standard frames, and of an AF_XDP UMEM's
/// chunks.
pub const STANDARD_BUFFER: usize = 2048;
/// The size of every buffer of an arena for jumbo frames: a 9216-byte port's frame
/// (VLAN tag included) or a 9000-byte inner packet with a tunnel's headers, with the
/// headroom and tail room. Not a power of two on purpose: consecutive buffers then
/// start at different offsets modulo 4 KiB and spread over the caches' sets.
pub const JUMBO_BUFFER: usize = 10240;
/// The largest buffer any arena has: what scratch copies of a packet are sized by.
pub const LARGEST_BUFFER: usize = JUMBO_BUFFER;
/// Room in front of received data for headers added on the way out: up to an
/// Ethernet, IPv6 and UDP header and the WireGuard data header (14 + 40 + 8 + 16).
pub const HEADROOM: usize = 128;
/// Room kept at the end for the AEAD tag and padding.
pub const TAILROOM: usize = 32;
/// The most data a buffer of `buffer` bytes holds between its headroom and tail room.
pub const fn max_data(buffer: usize) -> usize {
    buffer - HEADROOM - TAILROOM
}

pub type Handle = u32;

/// The most buffers [`Arena::with_rx_slices`] lends at once: a frame.
pub const RX_BATCH: usize = crypto::FRAME_LEN;

/// Where a packet's bytes are in its buffer and what the path knows about it.
#[derive(Clone, Copy, Debug)]
pub struct PacketMeta {
    /// Start of the packet's data within its buffer.
    pub offset: u16,
    pub len: u16,
    /// The peer it belongs to, once known (u32::MAX: none).
    pub peer: u32,
    /// Outer address: the source of a received datagram, the destination of one to
    /// send; for a packet a gateway routes out of a port, its next hop (port 0).
    pub addr: SocketAddr,
    /// The UDP source port of a datagram the gateway sends through `udp-encap`
    /// (0: the WireGuard listen port; IKE sends from 500 or 4500).
    pub src_port: u16,
    /// A gateway's port: the one it came in on, then the one it leaves by (u16::MAX:
    /// none).
    pub port: u16,
    /// Why the packet goes to `icmp-error`: the ICMP error that answers it.
    pub icmp: Option<IcmpReason>,
    /// A WireGuard data packet this worker sealed: where, and on which session, for
    /// the check before it leaves (see `seal_ledger`).
    pub seal: SealMark,
}

/// Where a sealed WireGuard packet's transport header is in its buffer (outer
/// headers go in front of it, so it does not move), and its session in the worker's
/// ledger of that `epoch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SealMark {
    pub epoch: u16,
    /// The session's entry in the ledger; `u16::MAX`: not sealed here.
    pub run: u16,
    pub at: u16,
}

impl SealMark {
    pub const NONE: SealMark = SealMark {
        epoch: 0,
        run: u16::MAX,
        at: 0,
    };
}

/// An ICMP (ICMPv6) error a routed packet is answered with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IcmpReason {
    /// Its TTL (hop limit) ran out here.
    TimeExceeded,
    /// No route covers its destination.
    NoRoute,
    /// It does not fit the next link, whose MTU this is, and may not be fragmented.
    TooBig { mtu: u16 },
}

impl Default for PacketMeta {
    fn default() -> Self {
        PacketMeta {
            offset: HEADROOM as u16,
            len: 0,
            peer: u32::MAX,
            addr: SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)),
            src_port: 0,
            port: u16::MAX,
            icmp: None,
            seal: SealMark::NONE,
        }
    }
}

/// The alignment of the arena's memory: a page, as a UMEM must start on one.
pub const MEM_ALIGN: usize = 4096;

/// Zeroed, page-aligned memory, freed on drop: an arena's buffers, and the memory a
/// driver registers with the kernel as an AF_XDP UMEM (shared through an `Arc`, so
/// that it lives for as long as the driver that registered it, whatever is dropped
/// first).
pub struct PageMemory {
    /// What the allocator gave, a page more than asked for.
    raw: std::ptr::NonNull<u8>,
    layout: std::alloc::Layout,
    /// The first page boundary in it.
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

// SAFETY: the memory is owned by this value alone and handed out only as a raw
// pointer; whoever writes through it says why no one else does meanwhile.
unsafe impl Send for PageMemory {}
// SAFETY: `&PageMemory` gives the pointer and the length, never the bytes.
unsafe impl Sync for PageMemory {}

impl PageMemory {
    /// `len` zeroed bytes (not zero) starting on a page. The memory is asked for
    /// with the allocator's own alignment and a page more, and starts at its first
    /// page boundary: asked for page-aligned, zeroed memory the allocator writes
    /// every byte, where asked for plainly it takes fresh pages from the system,
    /// which are zero already and backed only once written (a jumbo arena is
    /// mostly never touched).
    pub fn new(len: usize) -> PageMemory {
        assert!(len > 0, "memory size");
        let layout = std::alloc::Layout::from_size_align(len + MEM_ALIGN, 16).expect("memory size");
        // SAFETY: the layout's size is not zero.
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let raw =
            std::ptr::NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        let skip = raw.as_ptr().align_offset(MEM_ALIGN);
        assert!(skip < MEM_ALIGN, "page alignment");
        // SAFETY: `skip` < MEM_ALIGN, so the page boundary and the `len` bytes after
        // it lie inside the `len + MEM_ALIGN` bytes allocated.
        let ptr = unsafe { raw.add(skip) };
        PageMemory {
            raw,
            layout,
            ptr,
            len,
        }
    }

    /// The first byte, on a page.
    pub fn base(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Never: the memory has at least one byte.
    pub fn is_empty(&self) -> bool {
        false
    }
}

impl Drop for PageMemory {
    fn drop(&mut self) {
        // SAFETY: allocated in PageMemory::new with this layout, freed once.
        unsafe { std::alloc::dealloc(self.raw.as_ptr(), self.layout) }
    }
}

pub struct Arena {
    /// Owns the memory (with the AF_XDP sockets it is registered with); never
    /// resized, so `base` stays valid.
    mem: Arc<PageMemory>,
    /// The memory's start. Every access goes through it and covers only the buffers
    /// it names, so that buffers lent to another thread (an async crypto engine) are
    /// never covered by a reference while that thread writes them.
    base: *mut u8,
    /// Frames lent out and not yet returned; while any are, no reference to the whole
    /// memory may be made ([`Arena::mem_mut`] refuses).
    lent: usize,
    /// Scratch for with_rx_slices' distinctness check, one flag per buffer.
    seen: Vec<bool>,
    meta: Vec<PacketMeta>,
    free: Vec<Handle>,
    /// Debug aid and double-free guard: which buffers are out.
    in_use: Vec<bool>,
    /// Every buffer's size: [`STANDARD_BUFFER`] or [`JUMBO_BUFFER`].
    buffer: usize,
}

// SAFETY: `base` points into `mem`, which the arena holds and moves with it (shared
// only with the AF_XDP sockets registered on it, which keep it alive and never touch
// it from this process); the arena is used by one thread at a time (`&mut self` for
// every write).
unsafe impl Send for Arena {}

impl Arena {
    /// `count` buffers of [`STANDARD_BUFFER`] bytes; memory is taken once here and
    /// never grows.
    pub fn new(count: usize) -> Arena {
        Arena::with_buffers(count, STANDARD_BUFFER)
    }

    /// `count` buffers of `buffer` bytes ([`STANDARD_BUFFER`] or [`JUMBO_BUFFER`]).
    /// The memory is reserved here; the system backs a page only once a packet has
    /// been written to it, so a jumbo arena costs what its busiest moment held.
    pub fn with_buffers(count: usize, buffer: usize) -> Arena {
        assert!(
            buffer == STANDARD_BUFFER || buffer == JUMBO_BUFFER,
            "buffer size {buffer}"
        );
        assert!(
            count > 0 && count * buffer <= u32::MAX as usize,
            "arena size"
        );
        let mem = Arc::new(PageMemory::new(count * buffer));
        let base = mem.base();
        Arena {
            mem,
            base,
            lent: 0,
            seen: vec![false; count],
            meta: vec![PacketMeta::default(); count],
            free: (0..count as Handle).rev().collect(),
            in_use: vec![false; count],
            buffer,
        }
    }

    /// Every buffer's size in bytes.
    pub fn buffer_size(&self) -> usize {
        self.buffer
    }

    /// The most data a buffer holds between its headroom and tail room.
    pub fn max_data(&self) -> usize {
        max_data(self.buffer)
    }

    pub fn capacity(&self) -> usize {
        self.meta.len()
    }

    pub fn available(&self) -> usize {
        self.free.len()
    }

    /// A buffer with fresh metadata, or `None` when the pool is empty (the caller
    /// drops the packet and counts it).
    pub fn alloc(&mut self) -> Option<Handle> {
        let h = self.free.pop()?;
        self.in_use[h as usize] = true;
        self.meta[h as usize] = PacketMeta::default();
        Some(h)
    }

    pub fn free(&mut self, h: Handle) {
        let used = &mut self.in_use[h as usize];
        assert!(*used, "buffer {h} freed twice");
        *used = false;
        self.free.push(h);
    }

    pub fn meta(&self, h: Handle) -> &PacketMeta {
        &self.meta[h as usize]
    }

    pub fn meta_mut(&mut self, h: Handle) -> &mut PacketMeta {
        &mut self.meta[h as usize]
    }

    /// Where buffer `h` starts in [`Arena::mem_mut`], in bytes: what engine ops
    /// address packets by.
    #[inline]
    pub fn offset_of(&self, h: Handle) -> usize {
        h as usize * self.buffer
    }

    /// `len` bytes at `offset` of buffer `h`, checked to stay inside that buffer.
    fn bytes(&self, h: Handle, offset: usize, len: usize) -> *mut u8 {
        assert!(
            (h as usize) < self.meta.len()
                && offset
                    .checked_add(len)
                    .is_some_and(|end| end <= self.buffer),
            "range outside buffer {h}"
        );
        // SAFETY: the checks above keep the pointer inside the allocation.
        unsafe { self.base.add(self.offset_of(h) + offset) }
    }

    /// The whole buffer.
    pub fn buffer_mut(&mut self, h: Handle) -> &mut [u8] {
        let p = self.bytes(h, 0, self.buffer);
        // SAFETY: `p..p+buffer` is buffer `h` alone; `&mut self` excludes other
        // references into the arena, and a buffer lent to an engine is not handed to
        // anyone (its packet is parked) until the engine gives it back.
        unsafe { std::slice::from_raw_parts_mut(p, self.buffer) }
    }

    /// The packet's bytes.
    pub fn data(&self, h: Handle) -> &[u8] {
        let m = &self.meta[h as usize];
        let p = self.bytes(h, m.offset as usize, m.len as usize);
        // SAFETY: inside buffer `h` (checked); shared access while `&self` lives, and
        // lent buffers are not read until they come back (see buffer_mut).
        unsafe { std::slice::from_raw_parts(p, m.len as usize) }
    }

    pub fn data_mut(&mut self, h: Handle) -> &mut [u8] {
        let m = self.meta[h as usize];
        let p = self.bytes(h, m.offset as usize, m.len as usize);
        // SAFETY: as buffer_mut, for the packet's part of buffer `h`.
        unsafe { std::slice::from_raw_parts_mut(p, m.len as usize) }
    }

    /// All buffers as one slice: what a synchronous crypto engine works on, by
    /// offset. Refused while frames are lent to an asynchronous one. The slice also
    /// covers the buffers an AF_XDP port has lent the kernel to receive into: the
    /// engines read and write only their ops' spans, which are the graph's packets,
    /// never those.
    pub fn mem_mut(&mut self) -> &mut [u8] {
        assert_eq!(self.lent, 0, "the whole arena while frames are lent out");
        // SAFETY: the whole allocation, derived from `base` like every other access
        // (a reference made through `mem` would retire `base` in the aliasing model);
        // nothing is lent, and `&mut self` makes it exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.base, self.mem.len()) }
    }

    /// The memory's start and length, to lend frames to an asynchronous engine;
    /// counts one frame out until [`Arena::returned`] is called for it.
    pub fn lend(&mut self) -> (*mut u8, usize) {
        self.lent += 1;
        (self.base, self.mem.len())
    }

    /// Bytes of memory in all.
    pub fn mem_len(&self) -> usize {
        self.mem.len()
    }

    /// The memory, for a driver to register with the kernel as an AF_XDP UMEM and
    /// keep for as long as the kernel may write into it. The driver lends the kernel
    /// only buffers it allocated from this arena and frees each when the kernel gives
    /// it back, so the kernel never writes a buffer the graph holds.
    /// Only an arena of standard buffers has one: an AF_XDP socket addresses its
    /// memory in chunks of [`STANDARD_BUFFER`] bytes, and a larger buffer would be
    /// several chunks the kernel could lend apart.
    pub fn umem(&self) -> Option<Arc<PageMemory>> {
        (self.buffer == STANDARD_BUFFER).then(|| Arc::clone(&self.mem))
    }

    /// One lent frame is back.
    pub fn returned(&mut self) {
        self.lent -= 1;
    }

    /// Every lent frame is back (an engine said it holds none).
    pub fn all_returned(&mut self) {
        self.lent = 0;
    }

    pub fn lent(&self) -> usize {
        self.lent
    }

    /// Lends `f` mutable views of several buffers at once, each from its start in
    /// `starts`, all as long as the least room a start leaves before the tail room,
    /// in the order of `handles` (distinct, at most [`RX_BATCH`]): what a driver
    /// reads a batch into. Each buffer's packet is set to begin at its start. The
    /// views live in an array on the stack, so a batch allocates nothing.
    pub fn with_rx_slices<R>(
        &mut self,
        handles: &[Handle],
        starts: RxStarts,
        f: impl FnOnce(&mut [&mut [u8]]) -> R,
    ) -> R {
        assert!(
            handles.len() <= RX_BATCH,
            "more than {RX_BATCH} buffers at once"
        );
        // Distinct handles make disjoint slices; a repeat would alias.
        for &h in handles {
            assert!(self.in_use[h as usize], "buffer {h} is not allocated");
            assert!(
                !std::mem::replace(&mut self.seen[h as usize], true),
                "buffer {h} twice"
            );
        }
        for &h in handles {
            self.seen[h as usize] = false;
        }
        assert_eq!(
            starts.buffer(),
            self.buffer,
            "starts for another buffer size"
        );
        let len = starts.least_room();
        let mut views: [&mut [u8]; RX_BATCH] = std::array::from_fn(|_| Default::default());
        for (view, &h) in views.iter_mut().zip(handles) {
            let offset = starts.of(h);
            let p = self.bytes(h, offset, len);
            self.meta[h as usize].offset = offset as u16;
            // SAFETY: each slice lies inside its own buffer (checked by `bytes`) and
            // the handles are distinct (checked above), so the slices are disjoint;
            // `&mut self` keeps them exclusive while `f` runs, and they do not outlive it.
            *view = unsafe { std::slice::from_raw_parts_mut(p, len) };
        }
        f(&mut views[..handles.len()])
    }

    /// Copies `len` bytes from offset `from` of buffer `src` to offset `to` of
    /// another buffer `dst`, with no copy in between (what cutting a packet into
    /// pieces does).
    pub fn copy_between(&mut self, src: Handle, from: usize, dst: Handle, to: usize, len: usize) {
        assert_ne!(src, dst, "a buffer copied onto itself");
        let s = self.bytes(src, from, len);
        let d = self.bytes(dst, to, len);
        // SAFETY: both ranges lie inside their own buffers (checked by `bytes`), and
        // the buffers differ, so they do not overlap; `&mut self` excludes any other
        // reference into the arena meanwhile.
        unsafe { std::ptr::copy_nonoverlapping(s, d, len) }
    }

    /// Copies `bytes` into a new buffer at the usual headroom.
    pub fn alloc_with(&mut self, bytes: &[u8]) -> Option<Handle> {
        if bytes.len() > self.max_data() {
            return None;
        }
        let h = self.alloc()?;
        self.buffer_mut(h)[HEADROOM..HEADROOM + bytes.len()].copy_from_slice(bytes);
        self.meta[h as usize].len = bytes.len() as u16;
        Some(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_is_bounded_and_reuses() {
        let mut a = Arena::new(2);
        let x = a.alloc().unwrap();
        let y = a.alloc_with(b"hello").unwrap();
        assert!(a.alloc().is_none());
        assert_eq!(a.data(y), b"hello");
        a.free(x);
        assert_eq!(a.alloc(), Some(x));
        assert_eq!(a.available(), 0);
    }

    #[test]
    fn rx_slices_are_the_right_buffers() {
        let mut a = Arena::new(4);
        let hs = [a.alloc().unwrap(), a.alloc().unwrap(), a.alloc().unwrap()];
        let order = [hs[2], hs[0], hs[1]];
        a.with_rx_slices(&order, RxStarts::at_headroom(STANDARD_BUFFER), |views| {
            assert_eq!(views.len(), 3);
            for (i, s) in views.iter_mut().enumerate() {
                assert_eq!(s.len(), STANDARD_BUFFER - HEADROOM - TAILROOM);
                s[0] = i as u8 + 1;
            }
        });
        for (i, &h) in order.iter().enumerate() {
            a.meta_mut(h).len = 1;
            assert_eq!(a.data(h), &[i as u8 + 1]);
        }
    }

    #[test]
    fn rx_slices_begin_at_each_buffers_start_and_the_packet_with_them() {
        let mut a = Arena::new(8);
        let hs: Vec<Handle> = (0..8).map(|_| a.alloc().unwrap()).collect();
        let starts = RxStarts::spread(STANDARD_BUFFER, 0, 1888).unwrap();
        a.with_rx_slices(&hs, starts, |views| {
            for (s, &h) in views.iter_mut().zip(&hs) {
                assert_eq!(s.len(), 1888);
                s[..2].copy_from_slice(&[h as u8, 0xee]);
            }
        });
        let mut seen = std::collections::BTreeSet::new();
        for &h in &hs {
            assert_eq!(a.meta(h).offset as usize, starts.of(h));
            seen.insert(starts.of(h));
            a.meta_mut(h).len = 2;
            assert_eq!(a.data(h), &[h as u8, 0xee]);
        }
        assert_eq!(seen.len(), 3, "{seen:?}");
    }

    #[test]
    #[should_panic(expected = "twice")]
    fn a_buffer_lent_twice_in_one_batch_is_caught() {
        let mut a = Arena::new(2);
        let x = a.alloc().unwrap();
        a.with_rx_slices(&[x, x], RxStarts::at_headroom(STANDARD_BUFFER), |_| ());
    }

    #[test]
    #[should_panic(expected = "freed twice")]
    fn double_free_is_caught() {
        let mut a = Arena::new(1);
        let x = a.alloc().unwrap();
        a.free(x);
        a.free(x);
    }

    #[test]
    fn the_memory_starts_on_a_page_for_a_umem() {
        let mut a = Arena::new(3);
        let umem = a.umem().unwrap();
        assert!(Arena::with_buffers(3, JUMBO_BUFFER).umem().is_none());
        assert_eq!(umem.base() as usize % MEM_ALIGN, 0);
        assert_eq!(umem.len(), 3 * STANDARD_BUFFER);
        assert!(a.mem_mut().iter().all(|&b| b == 0), "zeroed");
    }
}
