//! The caller's packet memory as a UMEM: which blocks the kernel takes, and how a
//! buffer number and an offset in it become a UMEM address and back.
//!
//! Kept apart from the sockets so the arithmetic can be tested without privileges.

use super::ffi::XdpDesc;

/// Bytes per buffer (UMEM chunk). AF_XDP's aligned mode wants a power of two.
pub const FRAME_SIZE: usize = 2048;

/// `log2(FRAME_SIZE)`: buffer number <-> chunk address.
pub(super) const FRAME_SHIFT: u32 = FRAME_SIZE.trailing_zeros();

/// `XDP_PACKET_HEADROOM`: what the kernel keeps free in front of a received frame
/// before the UMEM's own headroom, in copy and zero-copy mode alike.
pub const XDP_PACKET_HEADROOM: u32 = 256;

/// A block of memory that can be registered as a UMEM: page aligned, a whole number of
/// buffers, at least one, and at most `u32::MAX` of them.
#[derive(Clone, Copy, Debug)]
pub(super) struct Region {
    pub(super) base: *mut u8,
    pub(super) len: usize,
    pub(super) frames: u32,
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
    /// Checks `base` and `len` for registration with pages of `page` bytes; the error
    /// says what is wrong.
    pub(super) fn new(base: *mut u8, len: usize, page: usize) -> Result<Region, String> {
        if base.is_null() || page == 0 || (base as usize) % page != 0 {
            return Err(format!(
                "UMEM at {base:p} is not page aligned ({page}-byte pages)"
            ));
        }
        if len == 0 || len % FRAME_SIZE != 0 {
            return Err(format!(
                "UMEM of {len} bytes is not a whole, non-zero number of {FRAME_SIZE}-byte buffers"
            ));
        }
        let frames = u32::try_from(len / FRAME_SIZE)
            .map_err(|_| format!("UMEM of {len} bytes has more than {} buffers", u32::MAX))?;
        Ok(Region { base, len, frames })
    }

    /// The TX descriptor for `len` bytes at `offset` in buffer `buf`; `None` when that
    /// does not lie inside one buffer of this region.
    pub(super) fn tx_desc(&self, (buf, offset, len): (u32, u16, u16)) -> Option<XdpDesc> {
        if buf >= self.frames || usize::from(offset) + usize::from(len) > FRAME_SIZE {
            return None;
        }
        Some(XdpDesc {
            addr: (u64::from(buf) << FRAME_SHIFT) | u64::from(offset),
            len: u32::from(len),
            options: 0,
        })
    }
}

/// A received descriptor as (buffer, offset in it, length). In aligned mode the kernel
/// never hands out an address whose frame crosses a buffer boundary.
pub(super) fn rx_frame(desc: &XdpDesc) -> (u32, u16, u16) {
    let buf = (desc.addr >> FRAME_SHIFT) as u32;
    let offset = (desc.addr & (FRAME_SIZE as u64 - 1)) as u16;
    // At most FRAME_SIZE - offset, so it fits.
    (buf, offset, desc.len.min(FRAME_SIZE as u32) as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_shift_matches_size() {
        assert_eq!(1usize << FRAME_SHIFT, FRAME_SIZE);
    }

    #[test]
    fn region_checks() {
        let page = 4096;
        let base = (16 * page) as *mut u8;
        let r = Region::new(base, 8 * FRAME_SIZE, page).unwrap();
        assert_eq!(r.frames, 8);
        assert!(Region::new(std::ptr::null_mut(), FRAME_SIZE, page).is_err());
        assert!(Region::new(base.wrapping_add(64), FRAME_SIZE, page).is_err());
        assert!(Region::new(base, 0, page).is_err());
        assert!(Region::new(base, FRAME_SIZE + 1, page).is_err());
        // Half a page is a whole buffer: allowed.
        assert_eq!(Region::new(base, FRAME_SIZE, page).unwrap().frames, 1);
    }

    #[test]
    fn tx_descriptors_stay_in_their_buffer() {
        let r = Region::new((4096 * 4) as *mut u8, 4 * FRAME_SIZE, 4096).unwrap();
        let d = r.tx_desc((3, 128, 1500)).unwrap();
        assert_eq!(d.addr, 3 * 2048 + 128);
        assert_eq!(d.len, 1500);
        assert_eq!(rx_frame(&d), (3, 128, 1500));
        assert!(r.tx_desc((4, 0, 60)).is_none(), "past the last buffer");
        assert!(
            r.tx_desc((0, 2000, 49)).is_none(),
            "crosses into the next buffer"
        );
        assert!(r.tx_desc((0, 2000, 48)).is_some());
    }

    #[test]
    fn received_addresses_split() {
        let d = XdpDesc {
            addr: 7 * 2048 + 384,
            len: 60,
            options: 0,
        };
        assert_eq!(rx_frame(&d), (7, 384, 60));
    }
}
