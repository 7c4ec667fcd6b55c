//! TAI64N timestamps (whitepaper section 5.4.2: the initiation's replay protection).

use crate::constants::TIMESTAMP_WHITENER_MASK;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// 2^62 + 10: TAI64's label for 1970 plus the TAI-UTC offset the reference uses.
const TAI64_BASE: u64 = (1 << 62) + 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Tai64N(pub [u8; 12]);

impl Tai64N {
    /// The timestamp of `wall`, its nanoseconds rounded down (see the whitener mask).
    pub fn at(wall: SystemTime) -> Tai64N {
        let since = wall.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
        let nanos = since.subsec_nanos() & !TIMESTAMP_WHITENER_MASK;
        let mut b = [0u8; 12];
        b[..8].copy_from_slice(&(TAI64_BASE + since.as_secs()).to_be_bytes());
        b[8..].copy_from_slice(&nanos.to_be_bytes());
        Tai64N(b)
    }

    /// Big-endian seconds then nanoseconds: byte order is time order.
    pub fn is_after(&self, other: &Tai64N) -> bool {
        self.0 > other.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_follows_time_and_whitening_rounds_down() {
        let t = UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789);
        let a = Tai64N::at(t);
        let b = Tai64N::at(t + Duration::from_millis(1));
        assert_eq!(a, b, "1 ms apart is inside one whitening step");
        let c = Tai64N::at(t + Duration::from_millis(40));
        assert!(c.is_after(&a));
        assert!(!a.is_after(&c));
        assert_eq!(&a.0[..8], &(TAI64_BASE + 1_700_000_000).to_be_bytes());
    }
}
