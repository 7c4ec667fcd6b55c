//! One block of fixed-size packet buffers, allocated once. A packet is a handle (the
//! buffer's number) plus [`PacketMeta`]. Buffers are 2048 bytes with [`HEADROOM`]
//! bytes kept free in front for outer headers, so encapsulation never copies; the
//! layout (equal frames, one block) is what an AF_XDP UMEM wants.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

pub const FRAME_SIZE: usize = 2048;
/// Room in front of received data for headers added on the way out: up to an
/// Ethernet, IPv6 and UDP header and the WireGuard data header (14 + 40 + 8 + 16).
pub const HEADROOM: usize = 128;
/// Room kept at the end for the AEAD tag and padding.
pub const TAILROOM: usize = 32;

pub type Handle = u32;

/// Where a packet's bytes are in its buffer and what the path knows about it.
#[derive(Clone, Copy, Debug)]
pub struct PacketMeta {
    /// Start of the packet's data within its buffer.
    pub offset: u16,
    pub len: u16,
    /// The peer it belongs to, once known (u32::MAX: none).
    pub peer: u32,
    /// Outer address: the source of a received datagram, the destination of one to send.
    pub addr: SocketAddr,
}

impl Default for PacketMeta {
    fn default() -> Self {
        PacketMeta {
            offset: HEADROOM as u16,
            len: 0,
            peer: u32::MAX,
            addr: SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)),
        }
    }
}

pub struct Arena {
    mem: Vec<u8>,
    meta: Vec<PacketMeta>,
    free: Vec<Handle>,
    /// Debug aid and double-free guard: which buffers are out.
    in_use: Vec<bool>,
}

impl Arena {
    /// `count` buffers; memory is taken once here and never grows.
    pub fn new(count: usize) -> Arena {
        assert!(
            count > 0 && count * FRAME_SIZE <= u32::MAX as usize,
            "arena size"
        );
        Arena {
            mem: vec![0; count * FRAME_SIZE],
            meta: vec![PacketMeta::default(); count],
            free: (0..count as Handle).rev().collect(),
            in_use: vec![false; count],
        }
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

    /// Offset of the buffer's first byte in [`Arena::mem_mut`].
    pub fn base(h: Handle) -> usize {
        h as usize * FRAME_SIZE
    }

    /// The whole buffer.
    pub fn buffer_mut(&mut self, h: Handle) -> &mut [u8] {
        let b = Self::base(h);
        &mut self.mem[b..b + FRAME_SIZE]
    }

    /// The packet's bytes.
    pub fn data(&self, h: Handle) -> &[u8] {
        let m = &self.meta[h as usize];
        let start = Self::base(h) + m.offset as usize;
        &self.mem[start..start + m.len as usize]
    }

    pub fn data_mut(&mut self, h: Handle) -> &mut [u8] {
        let m = self.meta[h as usize];
        let start = Self::base(h) + m.offset as usize;
        &mut self.mem[start..start + m.len as usize]
    }

    /// All buffers as one slice: what crypto engines work on, by offset.
    pub fn mem_mut(&mut self) -> &mut [u8] {
        &mut self.mem
    }

    /// Mutable views of several buffers at once, each from `offset` to the end less
    /// the tail room, in the order of `handles` (which must be distinct): what a
    /// driver reads a batch into.
    pub fn rx_slices(&mut self, handles: &[Handle], offset: usize) -> Vec<&mut [u8]> {
        let mut order: Vec<usize> = (0..handles.len()).collect();
        order.sort_unstable_by_key(|&i| handles[i]);
        let mut out: Vec<Option<&mut [u8]>> = (0..handles.len()).map(|_| None).collect();
        let mut rest: &mut [u8] = &mut self.mem;
        let mut base = 0usize;
        for i in order {
            let start = Self::base(handles[i]) + offset;
            let tail = std::mem::take(&mut rest);
            let (_, from) = tail.split_at_mut(start - base);
            let (buf, after) = from.split_at_mut(FRAME_SIZE - offset - TAILROOM);
            out[i] = Some(buf);
            rest = after;
            base = start + FRAME_SIZE - offset - TAILROOM;
        }
        out.into_iter()
            .map(|b| b.expect("every handle filled"))
            .collect()
    }

    /// Copies `bytes` into a new buffer at the usual headroom.
    pub fn alloc_with(&mut self, bytes: &[u8]) -> Option<Handle> {
        if bytes.len() > FRAME_SIZE - HEADROOM - TAILROOM {
            return None;
        }
        let h = self.alloc()?;
        let b = Self::base(h) + HEADROOM;
        self.mem[b..b + bytes.len()].copy_from_slice(bytes);
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
        for (i, s) in a.rx_slices(&order, HEADROOM).into_iter().enumerate() {
            assert_eq!(s.len(), FRAME_SIZE - HEADROOM - TAILROOM);
            s[0] = i as u8 + 1;
        }
        for (i, &h) in order.iter().enumerate() {
            a.meta_mut(h).len = 1;
            assert_eq!(a.data(h), &[i as u8 + 1]);
        }
    }

    #[test]
    #[should_panic(expected = "freed twice")]
    fn double_free_is_caught() {
        let mut a = Arena::new(1);
        let x = a.alloc().unwrap();
        a.free(x);
        a.free(x);
    }
}
