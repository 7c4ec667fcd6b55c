//! Where frames lie in a TPACKET_V2 ring: the sizes handed to `PACKET_RX_RING` and
//! `PACKET_TX_RING`, and the byte offset of each frame in the shared mapping.
//!
//! Kept apart from the socket so the arithmetic, which the kernel checks strictly
//! (`EINVAL` with no further word), can be tested without privileges.

/// `TPACKET_ALIGNMENT` (include/uapi/linux/if_packet.h): headers and frames start on it.
const ALIGNMENT: usize = 16;

const fn align(x: usize) -> usize {
    (x + ALIGNMENT - 1) & !(ALIGNMENT - 1)
}

/// `TPACKET2_HDRLEN`: the aligned `tpacket2_hdr` followed by a `sockaddr_ll`.
pub(crate) const HDRLEN: usize =
    align(size_of::<libc::tpacket2_hdr>()) + size_of::<libc::sockaddr_ll>();

/// Where the kernel puts an outgoing frame's bytes in a TX slot (without
/// `PACKET_TX_HAS_OFF`): right after the aligned `tpacket2_hdr`.
pub(crate) const TX_DATA_OFFSET: usize = HDRLEN - size_of::<libc::sockaddr_ll>();

/// The longest Ethernet frame a slot holds at least, headers included: what a
/// standard MTU needs.
pub const MIN_FRAME: usize = 2048;

/// The longest Ethernet frame a slot may be asked to hold: a jumbo frame of 9216
/// bytes of payload, two VLAN tags and the header, with room to spare.
pub const MAX_FRAME: usize = 10240;

/// Bytes per slot for frames of up to `max_frame` bytes. On receive the kernel
/// starts an Ethernet frame at `align(HDRLEN + 16) - 14` (it leaves room for a
/// 16-byte link header), so the slot is that offset plus the frame, rounded up to
/// the alignment.
pub(crate) const fn slot_size(max_frame: usize) -> usize {
    align(align(HDRLEN + 16) + max_frame)
}

/// Bytes per block: a multiple of the page size, as the kernel requires, large enough
/// to hold several slots without wasting much of each block.
const BLOCK_PAGES: usize = 8;

/// The most slots a ring may have here; more is refused rather than mapping gigabytes.
pub(crate) const MAX_FRAMES: usize = 1 << 16;

/// The shape of one ring (RX and TX are the same shape, mapped back to back).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    pub(crate) block_size: usize,
    pub(crate) block_nr: usize,
    pub(crate) frames_per_block: usize,
    pub(crate) frame_nr: usize,
    /// Bytes per slot (see [`slot_size`]).
    pub(crate) frame_size: usize,
}

impl Layout {
    /// The smallest ring of whole blocks that holds at least `frames` slots (at least
    /// one) for frames of up to `max_frame` bytes (at least [`MIN_FRAME`]), for pages
    /// of `page_size` bytes; `None` past [`MAX_FRAMES`] or [`MAX_FRAME`].
    pub(crate) fn new(frames: usize, page_size: usize, max_frame: usize) -> Option<Layout> {
        if frames > MAX_FRAMES || page_size == 0 || max_frame > MAX_FRAME {
            return None;
        }
        let frame_size = slot_size(max_frame.max(MIN_FRAME));
        let mut block_size = page_size * BLOCK_PAGES;
        while block_size < frame_size {
            block_size += page_size;
        }
        let frames_per_block = block_size / frame_size;
        let block_nr = frames.max(1).div_ceil(frames_per_block);
        Some(Layout {
            block_size,
            block_nr,
            frames_per_block,
            frame_nr: block_nr * frames_per_block,
            frame_size,
        })
    }

    /// The request for `PACKET_RX_RING` or `PACKET_TX_RING`.
    pub(crate) fn req(&self) -> libc::tpacket_req {
        libc::tpacket_req {
            tp_block_size: self.block_size as libc::c_uint,
            tp_block_nr: self.block_nr as libc::c_uint,
            tp_frame_size: self.frame_size as libc::c_uint,
            tp_frame_nr: self.frame_nr as libc::c_uint,
        }
    }

    /// Bytes of one ring in the mapping.
    pub(crate) fn ring_bytes(&self) -> usize {
        self.block_size * self.block_nr
    }

    /// Offset of slot `i` (below `frame_nr`) from the start of its ring. Slots never
    /// straddle blocks: the tail of a block that no whole slot fits is unused.
    pub(crate) fn offset(&self, i: usize) -> usize {
        debug_assert!(i < self.frame_nr);
        (i / self.frames_per_block) * self.block_size
            + (i % self.frames_per_block) * self.frame_size
    }

    /// The longest frame a TX slot takes.
    pub(crate) fn tx_capacity(&self) -> usize {
        self.frame_size - TX_DATA_OFFSET
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_sizes_match_the_kernel() {
        assert_eq!(HDRLEN, 52);
        assert_eq!(TX_DATA_OFFSET, 32);
        for max in [MIN_FRAME, 9216 + 22, MAX_FRAME] {
            assert_eq!(slot_size(max) % ALIGNMENT, 0);
            // A full-size Ethernet frame fits where the kernel places received ones.
            assert!(align(HDRLEN + 16) - 14 + max <= slot_size(max));
        }
    }

    #[test]
    fn rounds_up_to_whole_blocks() {
        let l = Layout::new(1000, 4096, MIN_FRAME).unwrap();
        assert_eq!(l.block_size % 4096, 0);
        assert!(l.frame_nr >= 1000);
        assert_eq!(l.frame_nr, l.block_nr * l.frames_per_block);
        assert!(l.frame_nr - 1000 < l.frames_per_block);
        let one = Layout::new(0, 4096, MIN_FRAME).unwrap();
        assert_eq!(one.block_nr, 1);
        assert!(Layout::new(MAX_FRAMES + 1, 4096, MIN_FRAME).is_none());
        assert!(Layout::new(16, 4096, MAX_FRAME + 1).is_none());
        // A short frame still gets a standard slot.
        assert_eq!(
            Layout::new(16, 4096, 64).unwrap().frame_size,
            slot_size(MIN_FRAME)
        );
    }

    #[test]
    fn slots_stay_inside_their_block() {
        for (page, max) in [4096, 16384, 65536]
            .into_iter()
            .flat_map(|p| [(p, MIN_FRAME), (p, 9216 + 22), (p, MAX_FRAME)])
        {
            let l = Layout::new(100, page, max).unwrap();
            let size = l.frame_size;
            for i in 0..l.frame_nr {
                let off = l.offset(i);
                assert_eq!(off % ALIGNMENT, 0);
                let block = off / l.block_size;
                assert_eq!((off + size - 1) / l.block_size, block, "slot {i}");
                assert!(off + size <= l.ring_bytes());
            }
            assert!(l.tx_capacity() >= max, "{page} {max}");
        }
    }
}
