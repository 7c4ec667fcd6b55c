//! VXLAN header view (RFC 7348 section 5): eight bytes in front of an Ethernet
//! frame, carried in UDP (port 4789).
//!
//! ```text
//!  0                   1                   2                   3
//!  |R|R|R|R|I|R|R|R|            Reserved                           |
//!  |                VXLAN Network Identifier (VNI) |   Reserved    |
//! ```
//!
//! The I flag must be set; every reserved bit is sent as zero. RFC 7348 has a
//! receiver ignore the reserved bits, but the group-policy and generic-protocol
//! extensions give some of them meanings that change the frame's handling, so
//! [`Header::check_len`] refuses a header with any of them set: such a frame was not
//! meant for a plain VXLAN endpoint.

use crate::error::{Error, Result};

/// The length of the VXLAN header.
pub const HEADER_LEN: usize = 8;
/// The IANA-assigned UDP port.
pub const PORT: u16 = 4789;
/// The flags byte of every valid header: the I flag alone.
pub const FLAGS_I: u8 = 0x08;
/// The largest VNI (24 bits).
pub const MAX_VNI: u32 = 0x00ff_ffff;

checked_view! {
    /// A view of a VXLAN header and the frame after it.
    pub struct Header, at least HEADER_LEN;
}

impl<T: AsRef<[u8]>> Header<T> {
    /// Checks that the buffer holds a header with the I flag set and every reserved bit
    /// zero.
    pub fn check_len(&self) -> Result<()> {
        self.check_min_len()?;
        let b = self.buffer.as_ref();
        if b[0] != FLAGS_I || b[1..4] != [0, 0, 0] || b[7] != 0 {
            return Err(Error::ReservedNotZero);
        }
        Ok(())
    }

    /// The VXLAN network identifier.
    pub fn vni(&self) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_be_bytes([0, b[4], b[5], b[6]])
    }

    /// The Ethernet frame carried (clamped to the buffer).
    pub fn payload(&self) -> &[u8] {
        self.buffer.as_ref().get(HEADER_LEN..).unwrap_or(&[])
    }
}

/// Writes a header for `vni` (its low 24 bits) into the first [`HEADER_LEN`]
/// bytes of `buf`; [`Error::Truncated`] if there are fewer.
pub fn emit(buf: &mut [u8], vni: u32) -> Result<()> {
    let h = buf.get_mut(..HEADER_LEN).ok_or(Error::Truncated)?;
    let v = (vni & MAX_VNI).to_be_bytes();
    h.copy_from_slice(&[FLAGS_I, 0, 0, 0, v[1], v[2], v[3], 0]);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_round_trips() {
        let mut b = [0u8; 12];
        emit(&mut b, 0x12_3456).unwrap();
        assert_eq!(b[..8], [0x08, 0, 0, 0, 0x12, 0x34, 0x56, 0]);
        let h = Header::new_checked(&b[..]).unwrap();
        assert_eq!(h.vni(), 0x12_3456);
        assert_eq!(h.payload().len(), 4);
        // Only 24 bits of VNI fit.
        emit(&mut b, 0xff12_3456).unwrap();
        assert_eq!(Header::new_checked(&b[..]).unwrap().vni(), 0x12_3456);
        assert_eq!(emit(&mut b[..7], 1), Err(Error::Truncated));
    }

    #[test]
    fn flags_and_reserved_bits_are_checked() {
        let good = [0x08, 0, 0, 0, 0, 0, 1, 0];
        assert!(Header::new_checked(&good[..]).is_ok());
        assert_eq!(
            Header::new_checked(&good[..7]).err(),
            Some(Error::Truncated)
        );
        for (i, bad) in [
            (0, 0x00), // no I flag
            (0, 0x0c), // I and a reserved flag (the generic-protocol P bit)
            (1, 0x01),
            (3, 0x80),
            (7, 0x01),
        ] {
            let mut b = good;
            b[i] = bad;
            assert_eq!(
                Header::new_checked(&b[..]).err(),
                Some(Error::ReservedNotZero),
                "byte {i} = {bad:#x}"
            );
        }
    }
}
