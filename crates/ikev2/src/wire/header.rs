//! The IKE header (RFC 7296 section 3.1): 28 bytes in front of every message.

use super::{Error, be32, flags};

pub const HEADER_LEN: usize = 28;

/// The fixed header. `length` is the whole message's, header included.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub spi_i: u64,
    pub spi_r: u64,
    pub next_payload: u8,
    pub exchange: u8,
    pub flags: u8,
    pub message_id: u32,
    pub length: u32,
}

impl Header {
    /// Parses the header of `message`, checking the version and that the length
    /// field equals the datagram's length (RFC 7296 section 3.1: anything after the
    /// message is not part of it, and a shorter datagram is truncated).
    pub fn parse(message: &[u8]) -> Result<Header, Error> {
        if message.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let version = message[17];
        if version >> 4 != 2 {
            return Err(Error::BadVersion);
        }
        let length = be32(message, 24);
        if length as usize != message.len() {
            return Err(Error::BadLength);
        }
        Ok(Header {
            spi_i: u64::from_be_bytes(message[0..8].try_into().expect("8 bytes")),
            spi_r: u64::from_be_bytes(message[8..16].try_into().expect("8 bytes")),
            next_payload: message[16],
            exchange: message[18],
            flags: message[19],
            message_id: be32(message, 20),
            length,
        })
    }

    pub fn is_response(&self) -> bool {
        self.flags & flags::RESPONSE != 0
    }

    pub fn from_initiator(&self) -> bool {
        self.flags & flags::INITIATOR != 0
    }

    /// Appends the 28 bytes (version 2.0).
    pub fn emit(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.spi_i.to_be_bytes());
        out.extend_from_slice(&self.spi_r.to_be_bytes());
        out.push(self.next_payload);
        out.push(0x20);
        out.push(self.exchange);
        out.push(self.flags);
        out.extend_from_slice(&self.message_id.to_be_bytes());
        out.extend_from_slice(&self.length.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Header {
        Header {
            spi_i: 0x0102030405060708,
            spi_r: 0,
            next_payload: 33,
            exchange: 34,
            flags: flags::INITIATOR,
            message_id: 0,
            length: HEADER_LEN as u32,
        }
    }

    #[test]
    fn round_trips() {
        let mut b = Vec::new();
        sample().emit(&mut b);
        assert_eq!(b.len(), HEADER_LEN);
        assert_eq!(Header::parse(&b), Ok(sample()));
    }

    #[test]
    fn refuses_wrong_version_and_lengths() {
        let mut b = Vec::new();
        sample().emit(&mut b);
        let mut v1 = b.clone();
        v1[17] = 0x10;
        assert_eq!(Header::parse(&v1), Err(Error::BadVersion));
        let mut longer = b.clone();
        longer.push(0);
        assert_eq!(Header::parse(&longer), Err(Error::BadLength));
        assert_eq!(Header::parse(&b[..27]), Err(Error::Truncated));
    }
}
