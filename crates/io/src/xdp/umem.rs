//! The caller's packet memory as a UMEM: which blocks the kernel takes, and how a
//! buffer number and an offset in it become a UMEM address and back.
//!
//! Kept apart from the sockets so the arithmetic can be tested without privileges.

use super::Fragment;
use super::ffi::XdpDesc;

/// Bytes per buffer (UMEM chunk) unless the options say otherwise: the graph's
/// standard buffer. AF_XDP's aligned mode wants a power of two from 2048 up to a
/// page.
pub const FRAME_SIZE: usize = 2048;

/// The smallest chunk the kernel takes (`XDP_UMEM_MIN_CHUNK_SIZE`).
pub const MIN_CHUNK: usize = 2048;

/// `XDP_PACKET_HEADROOM`: what the kernel keeps free in front of a received frame
/// before the UMEM's own headroom, in copy and zero-copy mode alike.
pub const XDP_PACKET_HEADROOM: u32 = 256;

/// A block of memory that can be registered as a UMEM: page aligned, a whole number of
/// buffers (chunks) of one power-of-two size, at least one, and at most `u32::MAX`
/// of them.
#[derive(Clone, Copy, Debug)]
pub(super) struct Region {
    pub(super) base: *mut u8,
    pub(super) len: usize,
    pub(super) frames: u32,
    /// `log2` of the chunk size: buffer number <-> chunk address.
    pub(super) shift: u32,
}

// SAFETY: a region is an address and a length that Rust code never dereferences; only
// the kernel reaches the memory, whichever thread holds the port.
unsafe impl Send for Region {}
// SAFETY: as for Send.
unsafe impl Sync for Region {}

/// The size of a page, which a UMEM must start on.
pub(super) fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(page).unwrap_or(4096)
}

impl Region {
    /// Checks `base` and `len` for registration as `chunk`-byte buffers with pages
    /// of `page` bytes; the error says what is wrong.
    pub(super) fn new(
        base: *mut u8,
        len: usize,
        page: usize,
        chunk: usize,
    ) -> Result<Region, String> {
        if base.is_null() || page == 0 || (base as usize) % page != 0 {
            return Err(format!(
                "UMEM at {base:p} is not page aligned ({page}-byte pages)"
            ));
        }
        check_chunk(chunk, page)?;
        if len == 0 || len % chunk != 0 {
            return Err(format!(
                "UMEM of {len} bytes is not a whole, non-zero number of {chunk}-byte buffers"
            ));
        }
        let frames = u32::try_from(len / chunk)
            .map_err(|_| format!("UMEM of {len} bytes has more than {} buffers", u32::MAX))?;
        Ok(Region {
            base,
            len,
            frames,
            shift: chunk.trailing_zeros(),
        })
    }

    /// Bytes per buffer.
    pub(super) fn chunk(&self) -> usize {
        1 << self.shift
    }

    /// The TX descriptor for `len` bytes at `offset` in buffer `buf`, flagged as
    /// continued in the next one when `more`; `None` when that does not lie inside
    /// one buffer of this region.
    pub(super) fn tx_desc(&self, f: Fragment) -> Option<XdpDesc> {
        if f.buf >= self.frames || usize::from(f.offset) + usize::from(f.len) > self.chunk() {
            return None;
        }
        Some(XdpDesc {
            addr: (u64::from(f.buf) << self.shift) | u64::from(f.offset),
            len: u32::from(f.len),
            options: if f.more { libc::XDP_PKT_CONTD } else { 0 },
        })
    }

    /// A received descriptor as a buffer, the offset in it and a length, and
    /// whether the frame goes on in the next descriptor. In aligned mode the
    /// kernel never hands out an address whose data crosses a buffer boundary.
    pub(super) fn rx_fragment(&self, desc: &XdpDesc) -> Fragment {
        let chunk = self.chunk() as u64;
        let offset = desc.addr & (chunk - 1);
        Fragment {
            buf: (desc.addr >> self.shift) as u32,
            // Below the chunk size, at most a page: it fits.
            offset: offset as u16,
            len: u64::from(desc.len).min(chunk - offset) as u16,
            more: desc.options & libc::XDP_PKT_CONTD != 0,
        }
    }
}

/// Whether the kernel takes `chunk`-byte buffers on `page`-byte pages in aligned
/// mode: a power of two from [`MIN_CHUNK`] to a page.
pub(super) fn check_chunk(chunk: usize, page: usize) -> Result<(), String> {
    if !chunk.is_power_of_two() || chunk < MIN_CHUNK || chunk > page {
        return Err(format!(
            "a UMEM buffer of {chunk} bytes is not a power of two from {MIN_CHUNK} to the page's {page}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(buf: u32, offset: u16, len: u16) -> Fragment {
        Fragment {
            buf,
            offset,
            len,
            more: false,
        }
    }

    #[test]
    fn region_checks() {
        let page = 4096;
        let base = (16 * page) as *mut u8;
        let r = Region::new(base, 8 * FRAME_SIZE, page, FRAME_SIZE).unwrap();
        assert_eq!((r.frames, r.chunk()), (8, FRAME_SIZE));
        assert!(Region::new(std::ptr::null_mut(), FRAME_SIZE, page, FRAME_SIZE).is_err());
        assert!(Region::new(base.wrapping_add(64), FRAME_SIZE, page, FRAME_SIZE).is_err());
        assert!(Region::new(base, 0, page, FRAME_SIZE).is_err());
        assert!(Region::new(base, FRAME_SIZE + 1, page, FRAME_SIZE).is_err());
        // Half a page is a whole buffer: allowed.
        assert_eq!(
            Region::new(base, FRAME_SIZE, page, FRAME_SIZE)
                .unwrap()
                .frames,
            1
        );
        // Page-sized buffers too; none larger than a page, none that is not a
        // power of two, none under the kernel's least.
        assert_eq!(Region::new(base, 4 * page, page, page).unwrap().frames, 4);
        for chunk in [1024, 3072, 8192] {
            assert!(Region::new(base, 8 * page, page, chunk).is_err(), "{chunk}");
        }
    }

    #[test]
    fn tx_descriptors_stay_in_their_buffer() {
        let r = Region::new((4096 * 4) as *mut u8, 4 * FRAME_SIZE, 4096, FRAME_SIZE).unwrap();
        let d = r.tx_desc(whole(3, 128, 1500)).unwrap();
        assert_eq!(d.addr, 3 * 2048 + 128);
        assert_eq!((d.len, d.options), (1500, 0));
        assert_eq!(r.rx_fragment(&d), whole(3, 128, 1500));
        assert!(r.tx_desc(whole(4, 0, 60)).is_none(), "past the last buffer");
        assert!(
            r.tx_desc(whole(0, 2000, 49)).is_none(),
            "crosses into the next buffer"
        );
        assert!(r.tx_desc(whole(0, 2000, 48)).is_some());
    }

    /// A frame in several buffers: every part but the last says more follow.
    #[test]
    fn fragments_carry_the_continue_flag_both_ways() {
        let r = Region::new((4096 * 4) as *mut u8, 4 * 4096, 4096, 4096).unwrap();
        let first = Fragment {
            buf: 2,
            offset: 0,
            len: 4096,
            more: true,
        };
        let d = r.tx_desc(first).unwrap();
        assert_eq!((d.addr, d.options), (2 * 4096, libc::XDP_PKT_CONTD));
        assert_eq!(r.rx_fragment(&d), first);
        let last = r.tx_desc(whole(3, 0, 1046)).unwrap();
        assert_eq!(last.options, 0);
        assert!(!r.rx_fragment(&last).more);
    }

    #[test]
    fn received_addresses_split() {
        let r = Region::new((4096 * 8) as *mut u8, 8 * FRAME_SIZE, 4096, FRAME_SIZE).unwrap();
        let d = XdpDesc {
            addr: 7 * 2048 + 384,
            len: 60,
            options: 0,
        };
        assert_eq!(r.rx_fragment(&d), whole(7, 384, 60));
    }
}
