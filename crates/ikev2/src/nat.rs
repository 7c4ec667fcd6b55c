//! NAT detection (RFC 7296 section 2.23): each side sends SHA-1(SPIi | SPIr |
//! address | port) of the source and of the destination it sees; a mismatch means
//! an address translator sits between, and then IKE moves to port 4500 and ESP
//! goes in UDP.

use aws_lc_rs::digest;
use std::net::SocketAddr;

pub const HASH_LEN: usize = 20;

/// The NAT_DETECTION_*_IP notify data for `addr` in the SA with these SPIs.
pub fn hash(spi_i: u64, spi_r: u64, addr: SocketAddr) -> [u8; HASH_LEN] {
    let mut ctx = digest::Context::new(&digest::SHA1_FOR_LEGACY_USE_ONLY);
    ctx.update(&spi_i.to_be_bytes());
    ctx.update(&spi_r.to_be_bytes());
    match addr.ip() {
        std::net::IpAddr::V4(a) => ctx.update(&a.octets()),
        std::net::IpAddr::V6(a) => ctx.update(&a.octets()),
    }
    ctx.update(&addr.port().to_be_bytes());
    ctx.finish().as_ref().try_into().expect("SHA-1 is 20 bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_covers_every_field() {
        let a: SocketAddr = "198.18.0.1:500".parse().unwrap();
        let base = hash(1, 2, a);
        assert_ne!(base, hash(1, 3, a));
        assert_ne!(base, hash(4, 2, a));
        assert_ne!(base, hash(1, 2, "198.18.0.1:4500".parse().unwrap()));
        assert_ne!(base, hash(1, 2, "198.18.0.2:500".parse().unwrap()));
        assert_eq!(base, hash(1, 2, a));
    }
}
