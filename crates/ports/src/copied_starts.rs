//! Where a port that copies frames into arena buffers puts them: AF_PACKET's
//! ports, and AF_XDP's on jumbo buffers, whose frames are joined from parts.

use dataplane::{HEADROOM, RxStarts};

/// The kernel writes a received frame at this offset of an AF_XDP buffer (no UMEM
/// headroom: its own 256 bytes already leave the graph's 128 for outer headers).
pub(crate) const XDP_DATA_OFFSET: usize = io::xdp::XDP_PACKET_HEADROOM as usize;

/// Where a port on `mtu` has its frames copied into buffers of `buffer` bytes:
/// from 256 bytes in, as the kernel puts an AF_XDP port's (room in front for
/// every outer header a frame may get, VXLAN and WireGuard over IPv6 both), at up
/// to three starts a cache line apart (see `dataplane::rx_starts`) as far as a
/// frame of the MTU, two VLAN tags included, leaves room; from the headroom where
/// an MTU leaves too little for that.
pub fn copied_rx_starts(buffer: usize, mtu: u16) -> RxStarts {
    let room = usize::from(mtu) + wire::ethernet::QINQ_HEADER_LEN;
    RxStarts::spread(buffer, XDP_DATA_OFFSET, room)
        .or_else(|| RxStarts::spread(buffer, HEADROOM, room))
        .unwrap_or(RxStarts::at_headroom(buffer))
}

#[cfg(test)]
mod tests {
    use super::*;
    use dataplane::{JUMBO_BUFFER, STANDARD_BUFFER};

    fn distinct(s: RxStarts) -> Vec<usize> {
        let mut v: Vec<usize> = (0..4).map(|h| s.of(h)).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Copied frames get an AF_XDP port's room in front and room for a
    /// tagged frame of the MTU behind, spread where the MTU leaves room; a large MTU
    /// gets the headroom and the room the buffers had before.
    #[test]
    fn copied_frames_start_past_the_xdp_headroom_while_the_mtu_leaves_room() {
        const FRAME_SIZE: usize = STANDARD_BUFFER;
        assert_eq!(
            distinct(copied_rx_starts(FRAME_SIZE, 1500)),
            [256, 320, 384]
        );
        assert_eq!(distinct(copied_rx_starts(FRAME_SIZE, 1700)), [256]);
        for mtu in [576, 1280, 1500, 1600, 1700, 1738] {
            let s = copied_rx_starts(FRAME_SIZE, mtu);
            assert!((0..4).all(|h| s.of(h) >= XDP_DATA_OFFSET), "{mtu}");
            assert!(s.least_room() >= usize::from(mtu) + 22, "{mtu}");
        }
        for mtu in [1740, 1800, 1866] {
            let s = copied_rx_starts(FRAME_SIZE, mtu);
            assert!((0..4).all(|h| s.of(h) >= HEADROOM), "{mtu}");
            assert!(s.least_room() >= usize::from(mtu) + 22, "{mtu}");
        }
        let s = copied_rx_starts(FRAME_SIZE, 9000);
        assert_eq!(s, RxStarts::at_headroom(FRAME_SIZE));
        assert_eq!(
            s.least_room(),
            FRAME_SIZE - HEADROOM - dataplane::arena::TAILROOM
        );
        // Jumbo buffers take a 9216-byte port's tagged frames past the XDP headroom.
        for mtu in [1500, 9000, 9216] {
            let s = copied_rx_starts(JUMBO_BUFFER, mtu);
            assert!((0..4).all(|h| s.of(h) >= XDP_DATA_OFFSET), "{mtu}");
            assert!(s.least_room() >= usize::from(mtu) + 22, "{mtu}");
        }
    }
}
