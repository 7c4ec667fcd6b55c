//! The header ICMP (RFC 792) and ICMPv6 (RFC 4443 §2.1) share: type, code,
//! checksum, and four bytes whose meaning depends on the type (an echo's
//! identifier and sequence number among them), with the body after it. Its
//! accessors are declared once here for both views; each protocol adds what
//! differs (its checksum, what its types make of the four bytes).

use crate::bytes::{set_u16_be, set_u32_be};
use crate::error::{Error, Result};

/// The header's fields, the same in both protocols.
pub(crate) mod field {
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: usize = 2;
    pub const REST: usize = 4;
    pub const IDENT: usize = 4;
    pub const SEQ: usize = 6;
}

/// The length of the shared header.
pub(crate) const HEADER_LEN: usize = 8;

/// A message's header as it is written: type, code, and the four bytes after
/// the checksum.
pub(crate) type HeaderFields = (u8, u8, u32);

/// Writes a message into the start of `buf`: its header (the checksum left zero)
/// and `body` after it. Returns the message, for the protocol to fill its
/// checksum, or [`Error::Truncated`] if `buf` is too short.
pub(crate) fn write_message<'b>(
    buf: &'b mut [u8],
    (msg_type, code, rest): HeaderFields,
    body: &[u8],
) -> Result<&'b mut [u8]> {
    let message = buf
        .get_mut(..HEADER_LEN + body.len())
        .ok_or(Error::Truncated)?;
    message[field::TYPE] = msg_type;
    message[field::CODE] = code;
    set_u16_be(message, field::CHECKSUM, 0);
    set_u32_be(message, field::REST, rest);
    message[HEADER_LEN..].copy_from_slice(body);
    Ok(message)
}

/// The four bytes after an echo's checksum: its identifier and sequence number.
pub(crate) const fn echo_rest(identifier: u16, sequence: u16) -> u32 {
    (identifier as u32) << 16 | sequence as u32
}

/// Declares the shared header's accessors on `Packet` in the module that calls
/// it; that module has an `is_error_type(u8) -> bool` of its protocol's types.
macro_rules! icmp_header_accessors {
    () => {
        impl<T: AsRef<[u8]>> Packet<T> {
            /// Checks that the buffer holds the header.
            pub fn check_len(&self) -> Result<()> {
                self.check_min_len()?;
                Ok(())
            }

            /// Message type (see [`msg_type`]).
            pub fn msg_type(&self) -> u8 {
                self.data()[crate::icmp_header::field::TYPE]
            }

            /// Code, whose meaning depends on the type.
            pub fn code(&self) -> u8 {
                self.data()[crate::icmp_header::field::CODE]
            }

            /// The checksum field.
            pub fn checksum(&self) -> u16 {
                crate::bytes::u16_be(self.data(), crate::icmp_header::field::CHECKSUM)
            }

            /// The four bytes after the checksum, whatever the type makes of them.
            pub fn rest_of_header(&self) -> u32 {
                crate::bytes::u32_be(self.data(), crate::icmp_header::field::REST)
            }

            /// Identifier of an echo request or reply.
            pub fn identifier(&self) -> u16 {
                crate::bytes::u16_be(self.data(), crate::icmp_header::field::IDENT)
            }

            /// Sequence number of an echo request or reply.
            pub fn sequence(&self) -> u16 {
                crate::bytes::u16_be(self.data(), crate::icmp_header::field::SEQ)
            }

            /// Whether this is an error message (see [`is_error_type`]).
            pub fn is_error(&self) -> bool {
                is_error_type(self.msg_type())
            }

            /// Everything after the header: the data of an echo, the quoted
            /// packet of an error.
            pub fn payload(&self) -> &[u8] {
                crate::bytes::clamped(self.data(), HEADER_LEN, usize::MAX)
            }
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
            /// Sets the message type.
            pub fn set_msg_type(&mut self, value: u8) {
                self.data_mut()[crate::icmp_header::field::TYPE] = value;
            }

            /// Sets the code.
            pub fn set_code(&mut self, value: u8) {
                self.data_mut()[crate::icmp_header::field::CODE] = value;
            }

            /// Sets the checksum field as given; see
            /// [`fill_checksum`](Self::fill_checksum).
            pub fn set_checksum(&mut self, value: u16) {
                crate::bytes::set_u16_be(
                    self.data_mut(),
                    crate::icmp_header::field::CHECKSUM,
                    value,
                );
            }

            /// Sets the four bytes after the checksum.
            pub fn set_rest_of_header(&mut self, value: u32) {
                crate::bytes::set_u32_be(self.data_mut(), crate::icmp_header::field::REST, value);
            }

            /// Sets the echo identifier.
            pub fn set_identifier(&mut self, value: u16) {
                crate::bytes::set_u16_be(self.data_mut(), crate::icmp_header::field::IDENT, value);
            }

            /// Sets the echo sequence number.
            pub fn set_sequence(&mut self, value: u16) {
                crate::bytes::set_u16_be(self.data_mut(), crate::icmp_header::field::SEQ, value);
            }

            /// The payload, writable.
            pub fn payload_mut(&mut self) -> &mut [u8] {
                crate::bytes::clamped_mut(self.data_mut(), HEADER_LEN, usize::MAX)
            }
        }

        impl<T: AsRef<[u8]>> AsRef<[u8]> for Packet<T> {
            fn as_ref(&self) -> &[u8] {
                self.buffer.as_ref()
            }
        }
    };
}
