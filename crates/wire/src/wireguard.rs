//! WireGuard message formats (whitepaper §5.4, "Messages").
//!
//! Every message starts with a 32-bit little-endian type word: the type in
//! the first byte and three reserved bytes that must be zero. All integers
//! are little-endian. The three handshake messages have one fixed size each;
//! a transport data message is a 16-byte header followed by an encrypted
//! packet with its 16-byte tag.
//!
//! [`Message::classify`] looks at the type word and length only; the views
//! ([`HandshakeInitiation`], [`HandshakeResponse`], [`CookieReply`],
//! [`TransportData`]) check lengths, like every view in this crate, and leave
//! the type to `classify`. [`Message::parse`] does both in one call.

use crate::bytes::{
    clamped, clamped_mut, fixed, fixed_mut, set_u32_le, set_u64_le, u32_le, u64_le,
};
use crate::error::{Error, Result};

/// Type of the first handshake message, initiator to responder (§5.4.2).
pub const MESSAGE_HANDSHAKE_INITIATION: u32 = 1;
/// Type of the second handshake message, responder to initiator (§5.4.3).
pub const MESSAGE_HANDSHAKE_RESPONSE: u32 = 2;
/// Type of the cookie reply sent under load (§5.4.7).
pub const MESSAGE_COOKIE_REPLY: u32 = 3;
/// Type of a transport data message (§5.4.6).
pub const MESSAGE_TRANSPORT_DATA: u32 = 4;

/// Size of a Curve25519 public key, the unencrypted ephemeral (§5.4: DH
/// outputs and public keys are 32 bytes).
pub const KEY_LEN: usize = 32;
/// Size of the Poly1305 tag that every AEAD output carries (§5.4: AEAD is
/// ChaCha20Poly1305, RFC 7539).
pub const AEAD_TAG_LEN: usize = 16;
/// Size of a TAI64N timestamp, the plaintext of `encrypted_timestamp`
/// (§5.4.2).
pub const TIMESTAMP_LEN: usize = 12;
/// Size of mac1 and mac2: keyed BLAKE2s with a 16-byte output (§5.4: MAC;
/// §5.4.4).
pub const MAC_LEN: usize = 16;
/// Size of a cookie, itself a 16-byte MAC (§5.4.7).
pub const COOKIE_LEN: usize = 16;
/// Size of the random XChaCha20Poly1305 nonce of a cookie reply (§5.4: XAEAD;
/// §5.4.7).
pub const XCHACHA_NONCE_LEN: usize = 24;

/// Size of `encrypted_static`: a public key and its tag (§5.4.2).
pub const ENCRYPTED_STATIC_LEN: usize = KEY_LEN + AEAD_TAG_LEN;
/// Size of `encrypted_timestamp`: a TAI64N timestamp and its tag (§5.4.2).
pub const ENCRYPTED_TIMESTAMP_LEN: usize = TIMESTAMP_LEN + AEAD_TAG_LEN;
/// Size of `encrypted_nothing`: the tag of an empty plaintext (§5.4.3).
pub const ENCRYPTED_NOTHING_LEN: usize = AEAD_TAG_LEN;
/// Size of `encrypted_cookie`: a cookie and its tag (§5.4.7).
pub const ENCRYPTED_COOKIE_LEN: usize = COOKIE_LEN + AEAD_TAG_LEN;

/// Size of a handshake initiation message (§5.4.2).
pub const HANDSHAKE_INITIATION_LEN: usize = 148;
/// Size of a handshake response message (§5.4.3).
pub const HANDSHAKE_RESPONSE_LEN: usize = 92;
/// Size of a cookie reply message (§5.4.7).
pub const COOKIE_REPLY_LEN: usize = 64;
/// Size of a transport data header: type word, receiver index, counter
/// (§5.4.6).
pub const TRANSPORT_HEADER_LEN: usize = 16;
/// The smallest transport data message: a header and the tag of an empty
/// packet. A keepalive is exactly this long (§6.5).
pub const TRANSPORT_MIN_LEN: usize = TRANSPORT_HEADER_LEN + AEAD_TAG_LEN;
/// Encapsulated packets are zero-padded to a multiple of this before
/// encryption (§5.4.6).
pub const PADDING_MULTIPLE: usize = 16;

/// The length an inner packet of `len` bytes is padded to on an interface of `mtu`
/// (§5.4.6): the next multiple of [`PADDING_MULTIPLE`], but never past the MTU, so a
/// full-sized inner packet makes an outer packet of exactly MTU plus overhead, which
/// is what the underlay was sized for. A packet already longer than the MTU (none
/// should be) is not padded at all. `mtu` 0 means no bound is known.
pub const fn padded_len(len: usize, mtu: usize) -> usize {
    let aligned = len.next_multiple_of(PADDING_MULTIPLE);
    if mtu == 0 || aligned <= mtu {
        aligned
    } else if len >= mtu {
        len
    } else {
        mtu
    }
}

mod field {
    use super::*;

    /// The type word at the start of every message.
    pub const TYPE: usize = 0;
    const INDEX_LEN: usize = 4;
    const COUNTER_LEN: usize = 8;

    pub mod initiation {
        use super::*;
        pub const SENDER: usize = TYPE + 4;
        pub const EPHEMERAL: usize = SENDER + INDEX_LEN;
        pub const STATIC: usize = EPHEMERAL + KEY_LEN;
        pub const TIMESTAMP: usize = STATIC + ENCRYPTED_STATIC_LEN;
        pub const MAC1: usize = TIMESTAMP + ENCRYPTED_TIMESTAMP_LEN;
        pub const MAC2: usize = MAC1 + MAC_LEN;
        const _: () = assert!(MAC2 + MAC_LEN == HANDSHAKE_INITIATION_LEN);
    }

    pub mod response {
        use super::*;
        pub const SENDER: usize = TYPE + 4;
        pub const RECEIVER: usize = SENDER + INDEX_LEN;
        pub const EPHEMERAL: usize = RECEIVER + INDEX_LEN;
        pub const EMPTY: usize = EPHEMERAL + KEY_LEN;
        pub const MAC1: usize = EMPTY + ENCRYPTED_NOTHING_LEN;
        pub const MAC2: usize = MAC1 + MAC_LEN;
        const _: () = assert!(MAC2 + MAC_LEN == HANDSHAKE_RESPONSE_LEN);
    }

    pub mod cookie {
        use super::*;
        pub const RECEIVER: usize = TYPE + 4;
        pub const NONCE: usize = RECEIVER + INDEX_LEN;
        pub const COOKIE: usize = NONCE + XCHACHA_NONCE_LEN;
        const _: () = assert!(COOKIE + ENCRYPTED_COOKIE_LEN == COOKIE_REPLY_LEN);
    }

    pub mod transport {
        use super::*;
        pub const RECEIVER: usize = TYPE + 4;
        pub const COUNTER: usize = RECEIVER + INDEX_LEN;
        pub const PACKET: usize = COUNTER + COUNTER_LEN;
        const _: () = assert!(PACKET == TRANSPORT_HEADER_LEN);
    }
}

/// The four message types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessageType {
    /// [`MESSAGE_HANDSHAKE_INITIATION`].
    HandshakeInitiation,
    /// [`MESSAGE_HANDSHAKE_RESPONSE`].
    HandshakeResponse,
    /// [`MESSAGE_COOKIE_REPLY`].
    CookieReply,
    /// [`MESSAGE_TRANSPORT_DATA`].
    TransportData,
}

impl MessageType {
    /// The type word's value.
    pub const fn value(self) -> u32 {
        match self {
            MessageType::HandshakeInitiation => MESSAGE_HANDSHAKE_INITIATION,
            MessageType::HandshakeResponse => MESSAGE_HANDSHAKE_RESPONSE,
            MessageType::CookieReply => MESSAGE_COOKIE_REPLY,
            MessageType::TransportData => MESSAGE_TRANSPORT_DATA,
        }
    }

    /// The type whose value is `value`, reserved bytes included.
    pub const fn from_value(value: u32) -> Option<Self> {
        match value {
            MESSAGE_HANDSHAKE_INITIATION => Some(MessageType::HandshakeInitiation),
            MESSAGE_HANDSHAKE_RESPONSE => Some(MessageType::HandshakeResponse),
            MESSAGE_COOKIE_REPLY => Some(MessageType::CookieReply),
            MESSAGE_TRANSPORT_DATA => Some(MessageType::TransportData),
            _ => None,
        }
    }

    /// The one size a message of this type has; `None` for transport data,
    /// whose size varies.
    pub const fn fixed_len(self) -> Option<usize> {
        match self {
            MessageType::HandshakeInitiation => Some(HANDSHAKE_INITIATION_LEN),
            MessageType::HandshakeResponse => Some(HANDSHAKE_RESPONSE_LEN),
            MessageType::CookieReply => Some(COOKIE_REPLY_LEN),
            MessageType::TransportData => None,
        }
    }
}

fn check_exact_len(buf: &[u8], expected: usize) -> Result<()> {
    if buf.len() == expected {
        Ok(())
    } else {
        Err(Error::WrongLength {
            expected,
            got: buf.len(),
        })
    }
}

fn check_transport_len(buf: &[u8]) -> Result<()> {
    if buf.len() < TRANSPORT_MIN_LEN {
        Err(Error::Truncated)
    } else {
        Ok(())
    }
}

/// The type word with reserved bytes zero, written into a view's buffer.
fn put_type(buf: &mut [u8], message_type: u32) {
    set_u32_le(buf, field::TYPE, message_type);
}

/// A checked view of any of the four messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Message<T> {
    /// A handshake initiation.
    HandshakeInitiation(HandshakeInitiation<T>),
    /// A handshake response.
    HandshakeResponse(HandshakeResponse<T>),
    /// A cookie reply.
    CookieReply(CookieReply<T>),
    /// A transport data message (a keepalive included).
    TransportData(TransportData<T>),
}

impl Message<&[u8]> {
    /// Is `buf` a transport data message as [`Message::classify`] judges it (the
    /// whole type word 4, at least [`TRANSPORT_MIN_LEN`] bytes)? The data path's
    /// test for nearly every datagram, one comparison of the word and one of the
    /// length.
    #[inline(always)]
    pub fn is_transport_data(buf: &[u8]) -> bool {
        buf.len() >= TRANSPORT_MIN_LEN
            && buf
                .first_chunk::<4>()
                .is_some_and(|w| u32::from_le_bytes(*w) == MESSAGE_TRANSPORT_DATA)
    }

    /// Which message `buf` holds, judged by its type word and length alone.
    ///
    /// Fewer than 4 bytes, or a transport data message shorter than
    /// [`TRANSPORT_MIN_LEN`], is [`Error::Truncated`]; a type byte other than
    /// 1 to 4 is [`Error::UnknownType`] with the whole type word; a known
    /// type byte with non-zero reserved bytes is [`Error::ReservedNotZero`];
    /// a handshake or cookie message of the wrong size is
    /// [`Error::WrongLength`]. Inlined: the data path classifies every datagram.
    #[inline]
    pub fn classify(buf: &[u8]) -> Result<MessageType> {
        let word = *buf.first_chunk::<4>().ok_or(Error::Truncated)?;
        let message_type = match MessageType::from_value(u32::from(word[0])) {
            Some(t) => t,
            None => return Err(Error::UnknownType(u32::from_le_bytes(word))),
        };
        // The reference implementations compare the whole type word, so they
        // drop these too; a reason of its own makes a sender that puts its
        // own data in the reserved bytes (some deployments do) show up in the
        // counters instead of hiding among unknown types.
        if word[1..] != [0, 0, 0] {
            return Err(Error::ReservedNotZero);
        }
        match message_type.fixed_len() {
            Some(expected) => check_exact_len(buf, expected)?,
            None => check_transport_len(buf)?,
        }
        Ok(message_type)
    }
}

impl<T: AsRef<[u8]>> Message<T> {
    /// Classifies `buffer` with [`Message::classify`] and wraps it in the
    /// matching view.
    pub fn parse(buffer: T) -> Result<Self> {
        Ok(match Message::classify(buffer.as_ref())? {
            MessageType::HandshakeInitiation => {
                Message::HandshakeInitiation(HandshakeInitiation::new_unchecked(buffer))
            }
            MessageType::HandshakeResponse => {
                Message::HandshakeResponse(HandshakeResponse::new_unchecked(buffer))
            }
            MessageType::CookieReply => Message::CookieReply(CookieReply::new_unchecked(buffer)),
            MessageType::TransportData => {
                Message::TransportData(TransportData::new_unchecked(buffer))
            }
        })
    }

    /// The type of the message viewed.
    pub fn message_type(&self) -> MessageType {
        match self {
            Message::HandshakeInitiation(_) => MessageType::HandshakeInitiation,
            Message::HandshakeResponse(_) => MessageType::HandshakeResponse,
            Message::CookieReply(_) => MessageType::CookieReply,
            Message::TransportData(_) => MessageType::TransportData,
        }
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        match self {
            Message::HandshakeInitiation(m) => m.into_inner(),
            Message::HandshakeResponse(m) => m.into_inner(),
            Message::CookieReply(m) => m.into_inner(),
            Message::TransportData(m) => m.into_inner(),
        }
    }
}

/// The fields both handshake messages carry, each at its own offset (`$f`, the
/// message's module in `field`): the sender's index, the sender's unencrypted
/// ephemeral key, and mac1 and mac2 at the end with the bytes each covers
/// (§5.4.2, §5.4.3, §5.4.4). Declared once for both.
macro_rules! handshake_fields {
    ($name:ident, $f:ident) => {
        impl<T: AsRef<[u8]>> $name<T> {
            /// The sender's index for this handshake.
            pub fn sender_index(&self) -> u32 {
                u32_le(self.data(), field::$f::SENDER)
            }

            /// The sender's ephemeral public key.
            pub fn unencrypted_ephemeral(&self) -> &[u8; KEY_LEN] {
                fixed(self.data(), field::$f::EPHEMERAL)
            }

            /// mac1 (§5.4.4).
            pub fn mac1(&self) -> &[u8; MAC_LEN] {
                fixed(self.data(), field::$f::MAC1)
            }

            /// mac2 (§5.4.4); all zero unless the sender holds a cookie.
            pub fn mac2(&self) -> &[u8; MAC_LEN] {
                fixed(self.data(), field::$f::MAC2)
            }

            /// The bytes mac1 is computed over: everything before it (§5.4.4).
            pub fn mac1_covered(&self) -> &[u8] {
                clamped(self.data(), 0, field::$f::MAC1)
            }

            /// The bytes mac2 is computed over: everything before it, mac1
            /// included (§5.4.4).
            pub fn mac2_covered(&self) -> &[u8] {
                clamped(self.data(), 0, field::$f::MAC2)
            }
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> $name<T> {
            /// Sets the sender index.
            pub fn set_sender_index(&mut self, index: u32) {
                set_u32_le(self.data_mut(), field::$f::SENDER, index);
            }

            /// Sets the unencrypted ephemeral.
            pub fn set_unencrypted_ephemeral(&mut self, key: &[u8; KEY_LEN]) {
                *fixed_mut(self.data_mut(), field::$f::EPHEMERAL) = *key;
            }

            /// Sets mac1.
            pub fn set_mac1(&mut self, mac: &[u8; MAC_LEN]) {
                *fixed_mut(self.data_mut(), field::$f::MAC1) = *mac;
            }

            /// Sets mac2.
            pub fn set_mac2(&mut self, mac: &[u8; MAC_LEN]) {
                *fixed_mut(self.data_mut(), field::$f::MAC2) = *mac;
            }
        }
    };
}

checked_view! {
    /// First handshake message, initiator to responder (§5.4.2), 148 bytes.
    pub struct HandshakeInitiation, at least HANDSHAKE_INITIATION_LEN;
}

handshake_fields!(HandshakeInitiation, initiation);

impl<T: AsRef<[u8]>> HandshakeInitiation<T> {
    /// Checks that the buffer is exactly [`HANDSHAKE_INITIATION_LEN`] bytes long. The
    /// type word is not checked: that is [`Message::classify`]'s job.
    pub fn check_len(&self) -> Result<()> {
        check_exact_len(self.buffer.as_ref(), HANDSHAKE_INITIATION_LEN)
    }

    /// The initiator's static public key, encrypted, with its tag.
    pub fn encrypted_static(&self) -> &[u8; ENCRYPTED_STATIC_LEN] {
        fixed(self.data(), field::initiation::STATIC)
    }

    /// The TAI64N timestamp, encrypted, with its tag.
    pub fn encrypted_timestamp(&self) -> &[u8; ENCRYPTED_TIMESTAMP_LEN] {
        fixed(self.data(), field::initiation::TIMESTAMP)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> HandshakeInitiation<T> {
    /// Checks the length of `buffer`, writes the type word and the sender
    /// index, and returns the view for the remaining fields to be set.
    pub fn emit(buffer: T, sender_index: u32) -> Result<Self> {
        let mut message = Self::new_checked(buffer)?;
        put_type(message.data_mut(), MESSAGE_HANDSHAKE_INITIATION);
        message.set_sender_index(sender_index);
        Ok(message)
    }

    /// Sets the encrypted static.
    pub fn set_encrypted_static(&mut self, value: &[u8; ENCRYPTED_STATIC_LEN]) {
        *self.encrypted_static_mut() = *value;
    }

    /// The encrypted static, writable, for sealing in place.
    pub fn encrypted_static_mut(&mut self) -> &mut [u8; ENCRYPTED_STATIC_LEN] {
        fixed_mut(self.data_mut(), field::initiation::STATIC)
    }

    /// Sets the encrypted timestamp.
    pub fn set_encrypted_timestamp(&mut self, value: &[u8; ENCRYPTED_TIMESTAMP_LEN]) {
        *self.encrypted_timestamp_mut() = *value;
    }

    /// The encrypted timestamp, writable, for sealing in place.
    pub fn encrypted_timestamp_mut(&mut self) -> &mut [u8; ENCRYPTED_TIMESTAMP_LEN] {
        fixed_mut(self.data_mut(), field::initiation::TIMESTAMP)
    }
}

checked_view! {
    /// Second handshake message, responder to initiator (§5.4.3), 92 bytes.
    pub struct HandshakeResponse, at least HANDSHAKE_RESPONSE_LEN;
}

handshake_fields!(HandshakeResponse, response);

impl<T: AsRef<[u8]>> HandshakeResponse<T> {
    /// Checks that the buffer is exactly [`HANDSHAKE_RESPONSE_LEN`] bytes long. The
    /// type word is not checked.
    pub fn check_len(&self) -> Result<()> {
        check_exact_len(self.buffer.as_ref(), HANDSHAKE_RESPONSE_LEN)
    }

    /// The initiator's index, echoed from the initiation.
    pub fn receiver_index(&self) -> u32 {
        u32_le(self.data(), field::response::RECEIVER)
    }

    /// The tag of an empty plaintext, which authenticates the handshake.
    pub fn encrypted_nothing(&self) -> &[u8; ENCRYPTED_NOTHING_LEN] {
        fixed(self.data(), field::response::EMPTY)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> HandshakeResponse<T> {
    /// Checks the length of `buffer`, writes the type word and both indices,
    /// and returns the view for the remaining fields to be set.
    pub fn emit(buffer: T, sender_index: u32, receiver_index: u32) -> Result<Self> {
        let mut message = Self::new_checked(buffer)?;
        put_type(message.data_mut(), MESSAGE_HANDSHAKE_RESPONSE);
        message.set_sender_index(sender_index);
        message.set_receiver_index(receiver_index);
        Ok(message)
    }

    /// Sets the receiver index.
    pub fn set_receiver_index(&mut self, index: u32) {
        set_u32_le(self.data_mut(), field::response::RECEIVER, index);
    }

    /// Sets the encrypted nothing.
    pub fn set_encrypted_nothing(&mut self, tag: &[u8; ENCRYPTED_NOTHING_LEN]) {
        *self.encrypted_nothing_mut() = *tag;
    }

    /// The encrypted nothing, writable, for sealing in place.
    pub fn encrypted_nothing_mut(&mut self) -> &mut [u8; ENCRYPTED_NOTHING_LEN] {
        fixed_mut(self.data_mut(), field::response::EMPTY)
    }
}

checked_view! {
    /// Cookie reply, sent instead of a response while under load (§5.4.7),
    /// 64 bytes.
    pub struct CookieReply, at least COOKIE_REPLY_LEN;
}

impl<T: AsRef<[u8]>> CookieReply<T> {
    /// Checks that the buffer is exactly [`COOKIE_REPLY_LEN`] bytes long. The type word
    /// is not checked.
    pub fn check_len(&self) -> Result<()> {
        check_exact_len(self.buffer.as_ref(), COOKIE_REPLY_LEN)
    }

    /// The sender index of the handshake message this replies to.
    pub fn receiver_index(&self) -> u32 {
        u32_le(self.data(), field::cookie::RECEIVER)
    }

    /// The random XChaCha20Poly1305 nonce.
    pub fn nonce(&self) -> &[u8; XCHACHA_NONCE_LEN] {
        fixed(self.data(), field::cookie::NONCE)
    }

    /// The cookie, encrypted, with its tag.
    pub fn encrypted_cookie(&self) -> &[u8; ENCRYPTED_COOKIE_LEN] {
        fixed(self.data(), field::cookie::COOKIE)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> CookieReply<T> {
    /// Checks the length of `buffer`, writes the type word and the receiver
    /// index, and returns the view for the remaining fields to be set.
    pub fn emit(buffer: T, receiver_index: u32) -> Result<Self> {
        let mut message = Self::new_checked(buffer)?;
        put_type(message.data_mut(), MESSAGE_COOKIE_REPLY);
        message.set_receiver_index(receiver_index);
        Ok(message)
    }

    /// Sets the receiver index.
    pub fn set_receiver_index(&mut self, index: u32) {
        set_u32_le(self.data_mut(), field::cookie::RECEIVER, index);
    }

    /// Sets the nonce.
    pub fn set_nonce(&mut self, nonce: &[u8; XCHACHA_NONCE_LEN]) {
        *fixed_mut(self.data_mut(), field::cookie::NONCE) = *nonce;
    }

    /// Sets the encrypted cookie.
    pub fn set_encrypted_cookie(&mut self, value: &[u8; ENCRYPTED_COOKIE_LEN]) {
        *self.encrypted_cookie_mut() = *value;
    }

    /// The encrypted cookie, writable, for sealing in place.
    pub fn encrypted_cookie_mut(&mut self) -> &mut [u8; ENCRYPTED_COOKIE_LEN] {
        fixed_mut(self.data_mut(), field::cookie::COOKIE)
    }
}

checked_view! {
    /// Transport data message (§5.4.6): header, then an encrypted, padded
    /// packet and its tag. At least [`TRANSPORT_MIN_LEN`] bytes.
    pub struct TransportData, at least TRANSPORT_HEADER_LEN;
}

impl<T: AsRef<[u8]>> TransportData<T> {
    /// Checks that the buffer holds at least [`TRANSPORT_MIN_LEN`] bytes. The type word
    /// is not checked.
    pub fn check_len(&self) -> Result<()> {
        check_transport_len(self.buffer.as_ref())
    }

    /// The index the receiver chose for this session.
    pub fn receiver_index(&self) -> u32 {
        u32_le(self.data(), field::transport::RECEIVER)
    }

    /// The nonce counter.
    pub fn counter(&self) -> u64 {
        u64_le(self.data(), field::transport::COUNTER)
    }

    /// The encrypted packet with its tag: everything after the header, at
    /// least [`AEAD_TAG_LEN`] bytes once checked.
    pub fn payload(&self) -> &[u8] {
        let end = self.data().len();
        clamped(self.data(), field::transport::PACKET, end)
    }

    /// Whether the encrypted packet is empty: only the tag follows the
    /// header (§6.5).
    pub fn is_keepalive(&self) -> bool {
        self.data().len() == TRANSPORT_MIN_LEN
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TransportData<T> {
    /// Checks the length of `buffer`, writes the header, and returns the
    /// view with the payload left for encryption in place.
    pub fn emit(buffer: T, receiver_index: u32, counter: u64) -> Result<Self> {
        let mut message = Self::new_checked(buffer)?;
        put_type(message.data_mut(), MESSAGE_TRANSPORT_DATA);
        message.set_receiver_index(receiver_index);
        message.set_counter(counter);
        Ok(message)
    }

    /// Sets the receiver index.
    pub fn set_receiver_index(&mut self, index: u32) {
        set_u32_le(self.data_mut(), field::transport::RECEIVER, index);
    }

    /// Sets the counter.
    pub fn set_counter(&mut self, counter: u64) {
        set_u64_le(self.data_mut(), field::transport::COUNTER, counter);
    }

    /// The encrypted packet with its tag, writable, for sealing or opening
    /// in place.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = self.data().len();
        clamped_mut(self.data_mut(), field::transport::PACKET, end)
    }
}

macro_rules! as_ref_impl {
    ($($view:ident),*) => {$(
        impl<T: AsRef<[u8]>> AsRef<[u8]> for $view<T> {
            fn as_ref(&self) -> &[u8] {
                self.buffer.as_ref()
            }
        }
    )*};
}

as_ref_impl!(
    HandshakeInitiation,
    HandshakeResponse,
    CookieReply,
    TransportData
);

#[cfg(test)]
mod tests {
    /// The data path's quick test says transport data exactly when the full
    /// classification does: every type byte 0 to 5 with zero and non-zero reserved
    /// bytes, at every length around the minimum and the handshakes' sizes.
    #[test]
    fn the_quick_data_test_agrees_with_the_classification() {
        use super::{Message, MessageType};
        for t in 0u8..=5 {
            for reserved in [[0u8, 0, 0], [1, 0, 0], [0, 0, 0x80]] {
                for len in (0..=40).chain([92, 148, 149, 1500]) {
                    let mut whole = [0u8; 1500];
                    whole[..4].copy_from_slice(&[t, reserved[0], reserved[1], reserved[2]]);
                    let buf = &whole[..len];
                    let full = Message::classify(buf) == Ok(MessageType::TransportData);
                    assert_eq!(
                        Message::is_transport_data(buf),
                        full,
                        "type {t}, reserved {reserved:?}, {len} bytes"
                    );
                }
            }
        }
    }

    #[test]
    fn padding_never_passes_the_mtu() {
        use super::{PADDING_MULTIPLE, padded_len};
        for mtu in [0usize, 576, 1280, 1420, 1421, 1500] {
            for len in 0..=1600usize {
                let p = padded_len(len, mtu);
                assert!(p >= len, "mtu {mtu} len {len}: {p} cuts the packet");
                if mtu == 0 {
                    assert_eq!(p, len.next_multiple_of(PADDING_MULTIPLE));
                } else if len <= mtu {
                    assert!(p <= mtu, "mtu {mtu} len {len}: padded to {p}");
                    assert!(
                        p == mtu || p % PADDING_MULTIPLE == 0,
                        "mtu {mtu} len {len}: {p}"
                    );
                    assert!(p - len < PADDING_MULTIPLE);
                } else {
                    assert_eq!(p, len, "mtu {mtu} len {len}: over the MTU, no padding");
                }
            }
        }
        assert_eq!(padded_len(1420, 1420), 1420);
        assert_eq!(padded_len(1419, 1420), 1420);
        assert_eq!(padded_len(1409, 1420), 1420);
        assert_eq!(padded_len(1408, 1420), 1408);
    }

    use super::*;
    use crate::captures::{WG_GO_INITIATION, WG_GO_RESPONSE, WG_GO_TRANSPORT, hex};
    use std::vec::Vec;

    fn concat(parts: &[&[u8]]) -> Vec<u8> {
        parts.concat()
    }

    /// An initiation laid out by hand from the field table in §5.4.2, each
    /// field filled with its own byte so that an offset error shows.
    fn initiation_bytes() -> Vec<u8> {
        concat(&[
            &[1, 0, 0, 0],
            &[0x78, 0x56, 0x34, 0x12],
            &[0xe0; 32],
            &[0x5a; 48],
            &[0x7b; 28],
            &[0x31; 16],
            &[0x32; 16],
        ])
    }

    /// A response laid out by hand from §5.4.3.
    fn response_bytes() -> Vec<u8> {
        concat(&[
            &[2, 0, 0, 0],
            &[0x01, 0x00, 0x00, 0x80],
            &[0x78, 0x56, 0x34, 0x12],
            &[0xe1; 32],
            &[0x0e; 16],
            &[0x41; 16],
            &[0x42; 16],
        ])
    }

    /// A cookie reply laid out by hand from §5.4.7.
    fn cookie_bytes() -> Vec<u8> {
        concat(&[
            &[3, 0, 0, 0],
            &[0xef, 0xbe, 0xad, 0xde],
            &[0x24; 24],
            &[0xcc; 32],
        ])
    }

    /// A keepalive laid out by hand from §5.4.6: header, empty packet, tag.
    fn keepalive_bytes() -> Vec<u8> {
        concat(&[
            &[4, 0, 0, 0],
            &[0x01, 0x00, 0x00, 0x80],
            &[0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01],
            &[0x7a; 16],
        ])
    }

    #[test]
    fn reads_a_wireguard_go_handshake() {
        let init = hex(WG_GO_INITIATION);
        let Ok(Message::HandshakeInitiation(init)) = Message::parse(&init[..]) else {
            panic!("not an initiation");
        };
        let resp = hex(WG_GO_RESPONSE);
        let Ok(Message::HandshakeResponse(resp)) = Message::parse(&resp[..]) else {
            panic!("not a response");
        };
        let data = hex(WG_GO_TRANSPORT);
        let Ok(Message::TransportData(data)) = Message::parse(&data[..]) else {
            panic!("not transport data");
        };

        assert_eq!(init.sender_index(), 0x2377_b990);
        assert_eq!(resp.receiver_index(), init.sender_index());
        assert_eq!(resp.sender_index(), 0xc8a4_bc81);
        assert_eq!(data.receiver_index(), resp.sender_index());
        assert_eq!(data.counter(), 0);

        // Neither side held a cookie, so mac2 is zero (§5.4.4); mac1 is not.
        assert_eq!(init.mac2(), &[0; MAC_LEN]);
        assert_eq!(resp.mac2(), &[0; MAC_LEN]);
        assert_ne!(init.mac1(), &[0; MAC_LEN]);
        assert_ne!(resp.mac1(), &[0; MAC_LEN]);
        assert_eq!(&init.mac2_covered()[116..], init.mac1());
        assert_eq!(&resp.mac2_covered()[60..], resp.mac1());

        // The 32-byte echo request needs no padding: 32 bytes and a tag.
        let inner_len = 32usize;
        assert_eq!(
            data.payload().len(),
            inner_len.next_multiple_of(PADDING_MULTIPLE) + AEAD_TAG_LEN
        );
        assert!(!data.is_keepalive());
    }

    #[test]
    fn emit_reproduces_wireguard_go_headers() {
        let init = hex(WG_GO_INITIATION);
        let mut copy = init.clone();
        copy[..8].fill(0xff);
        HandshakeInitiation::emit(&mut copy[..], 0x2377_b990).unwrap();
        assert_eq!(copy, init);

        let resp = hex(WG_GO_RESPONSE);
        let mut copy = resp.clone();
        copy[..12].fill(0xff);
        HandshakeResponse::emit(&mut copy[..], 0xc8a4_bc81, 0x2377_b990).unwrap();
        assert_eq!(copy, resp);

        let data = hex(WG_GO_TRANSPORT);
        let mut copy = data.clone();
        copy[..16].fill(0xff);
        TransportData::emit(&mut copy[..], 0xc8a4_bc81, 0).unwrap();
        assert_eq!(copy, data);
    }

    #[test]
    fn constants_match_the_whitepaper() {
        assert_eq!(
            [
                MESSAGE_HANDSHAKE_INITIATION,
                MESSAGE_HANDSHAKE_RESPONSE,
                MESSAGE_COOKIE_REPLY,
                MESSAGE_TRANSPORT_DATA
            ],
            [1, 2, 3, 4]
        );
        assert_eq!(HANDSHAKE_INITIATION_LEN, 148);
        assert_eq!(HANDSHAKE_RESPONSE_LEN, 92);
        assert_eq!(COOKIE_REPLY_LEN, 64);
        assert_eq!(TRANSPORT_HEADER_LEN, 16);
        assert_eq!(TRANSPORT_MIN_LEN, 32);
        assert_eq!((AEAD_TAG_LEN, MAC_LEN, COOKIE_LEN), (16, 16, 16));
        assert_eq!(XCHACHA_NONCE_LEN, 24);
        assert_eq!(ENCRYPTED_STATIC_LEN, 48);
        assert_eq!(ENCRYPTED_TIMESTAMP_LEN, 28);
        assert_eq!(ENCRYPTED_COOKIE_LEN, 32);
        assert_eq!(
            (field::initiation::MAC1, field::initiation::MAC2),
            (116, 132)
        );
        assert_eq!((field::response::MAC1, field::response::MAC2), (60, 76));
    }

    #[test]
    fn message_type_values_round_trip() {
        for t in [
            MessageType::HandshakeInitiation,
            MessageType::HandshakeResponse,
            MessageType::CookieReply,
            MessageType::TransportData,
        ] {
            assert_eq!(MessageType::from_value(t.value()), Some(t));
        }
        assert_eq!(MessageType::from_value(0), None);
        assert_eq!(MessageType::from_value(0x0000_0101), None);
        assert_eq!(MessageType::TransportData.fixed_len(), None);
    }

    #[test]
    fn reads_an_initiation() {
        let bytes = initiation_bytes();
        assert_eq!(
            Message::classify(&bytes),
            Ok(MessageType::HandshakeInitiation)
        );
        let m = HandshakeInitiation::new_checked(&bytes[..]).unwrap();
        assert_eq!(m.sender_index(), 0x1234_5678);
        assert_eq!(m.unencrypted_ephemeral(), &[0xe0; 32]);
        assert_eq!(m.encrypted_static(), &[0x5a; 48]);
        assert_eq!(m.encrypted_timestamp(), &[0x7b; 28]);
        assert_eq!(m.mac1(), &[0x31; 16]);
        assert_eq!(m.mac2(), &[0x32; 16]);
        assert_eq!(m.mac1_covered(), &bytes[..116]);
        assert_eq!(m.mac2_covered(), &bytes[..132]);
        assert_eq!(m.mac2_covered()[116..], [0x31; 16]);
    }

    #[test]
    fn reads_a_response() {
        let bytes = response_bytes();
        assert_eq!(
            Message::classify(&bytes),
            Ok(MessageType::HandshakeResponse)
        );
        let m = HandshakeResponse::new_checked(&bytes[..]).unwrap();
        assert_eq!(m.sender_index(), 0x8000_0001);
        assert_eq!(m.receiver_index(), 0x1234_5678);
        assert_eq!(m.unencrypted_ephemeral(), &[0xe1; 32]);
        assert_eq!(m.encrypted_nothing(), &[0x0e; 16]);
        assert_eq!(m.mac1(), &[0x41; 16]);
        assert_eq!(m.mac2(), &[0x42; 16]);
        assert_eq!(m.mac1_covered(), &bytes[..60]);
        assert_eq!(m.mac2_covered(), &bytes[..76]);
    }

    #[test]
    fn reads_a_cookie_reply() {
        let bytes = cookie_bytes();
        assert_eq!(Message::classify(&bytes), Ok(MessageType::CookieReply));
        let m = CookieReply::new_checked(&bytes[..]).unwrap();
        assert_eq!(m.receiver_index(), 0xdead_beef);
        assert_eq!(m.nonce(), &[0x24; 24]);
        assert_eq!(m.encrypted_cookie(), &[0xcc; 32]);
    }

    #[test]
    fn reads_transport_data() {
        let bytes = keepalive_bytes();
        assert_eq!(Message::classify(&bytes), Ok(MessageType::TransportData));
        let m = TransportData::new_checked(&bytes[..]).unwrap();
        assert_eq!(m.receiver_index(), 0x8000_0001);
        assert_eq!(m.counter(), 0x0102_0304_0506_0708);
        assert_eq!(m.payload(), &[0x7a; 16]);
        assert!(m.is_keepalive());

        let mut longer = bytes.clone();
        longer.extend_from_slice(&[0x11; 48]);
        let m = TransportData::new_checked(&longer[..]).unwrap();
        assert_eq!(m.payload().len(), 64);
        assert!(!m.is_keepalive());
    }

    #[test]
    fn classify_tells_each_drop_reason_apart() {
        assert_eq!(Message::classify(&[]), Err(Error::Truncated));
        assert_eq!(Message::classify(&[1, 0, 0]), Err(Error::Truncated));
        assert_eq!(Message::classify(&[0, 0, 0, 0]), Err(Error::UnknownType(0)));
        assert_eq!(Message::classify(&[5, 0, 0, 0]), Err(Error::UnknownType(5)));
        assert_eq!(
            Message::classify(&[0, 0, 0, 1]),
            Err(Error::UnknownType(0x0100_0000))
        );
        assert_eq!(
            Message::classify(&[0xff, 0xff, 0xff, 0xff]),
            Err(Error::UnknownType(u32::MAX))
        );
        let mut reserved = initiation_bytes();
        reserved[3] = 1;
        assert_eq!(Message::classify(&reserved), Err(Error::ReservedNotZero));
        reserved[3] = 0;
        reserved[1] = 0x80;
        assert_eq!(Message::classify(&reserved), Err(Error::ReservedNotZero));

        let init = initiation_bytes();
        assert_eq!(
            Message::classify(&init[..147]),
            Err(Error::WrongLength {
                expected: 148,
                got: 147
            })
        );
        let mut long = init.clone();
        long.push(0);
        assert_eq!(
            Message::classify(&long),
            Err(Error::WrongLength {
                expected: 148,
                got: 149
            })
        );
        assert_eq!(
            Message::classify(&response_bytes()[..4]),
            Err(Error::WrongLength {
                expected: 92,
                got: 4
            })
        );
        assert_eq!(
            Message::classify(&cookie_bytes()[..63]),
            Err(Error::WrongLength {
                expected: 64,
                got: 63
            })
        );
        assert_eq!(
            Message::classify(&keepalive_bytes()[..31]),
            Err(Error::Truncated)
        );
        assert_eq!(Message::classify(&[4, 0, 0, 0]), Err(Error::Truncated));
    }

    #[test]
    fn parse_builds_the_matching_view() {
        for (bytes, t) in [
            (initiation_bytes(), MessageType::HandshakeInitiation),
            (response_bytes(), MessageType::HandshakeResponse),
            (cookie_bytes(), MessageType::CookieReply),
            (keepalive_bytes(), MessageType::TransportData),
        ] {
            let m = Message::parse(&bytes[..]).unwrap();
            assert_eq!(m.message_type(), t);
            let ok = match m {
                Message::HandshakeInitiation(v) => v.sender_index() == 0x1234_5678,
                Message::HandshakeResponse(v) => v.receiver_index() == 0x1234_5678,
                Message::CookieReply(v) => v.receiver_index() == 0xdead_beef,
                Message::TransportData(v) => v.receiver_index() == 0x8000_0001,
            };
            assert!(ok, "{t:?}");
            assert_eq!(m.into_inner(), &bytes[..]);
        }
        assert_eq!(
            Message::parse(&[9u8, 0, 0, 0][..]),
            Err(Error::UnknownType(9))
        );
    }

    fn touch_all(buf: &[u8]) {
        if let Ok(m) = HandshakeInitiation::new_checked(buf) {
            let _ = (
                m.sender_index(),
                m.unencrypted_ephemeral(),
                m.encrypted_static(),
            );
            let _ = (m.encrypted_timestamp(), m.mac1(), m.mac2());
            let _ = (m.mac1_covered(), m.mac2_covered());
        }
        if let Ok(m) = HandshakeResponse::new_checked(buf) {
            let _ = (
                m.sender_index(),
                m.receiver_index(),
                m.unencrypted_ephemeral(),
            );
            let _ = (m.encrypted_nothing(), m.mac1(), m.mac2());
            let _ = (m.mac1_covered(), m.mac2_covered());
        }
        if let Ok(m) = CookieReply::new_checked(buf) {
            let _ = (m.receiver_index(), m.nonce(), m.encrypted_cookie());
        }
        if let Ok(m) = TransportData::new_checked(buf) {
            assert!(m.payload().len() >= AEAD_TAG_LEN);
            let _ = (m.receiver_index(), m.counter(), m.is_keepalive());
        }
    }

    #[test]
    fn no_length_panics() {
        for type_byte in 0..=6u8 {
            let mut buf = std::vec![0xa5u8; 200];
            buf[..4].copy_from_slice(&[type_byte, 0, 0, 0]);
            for len in 0..=buf.len() {
                let b = &buf[..len];
                touch_all(b);
                match Message::classify(b) {
                    Ok(t) => {
                        match t.fixed_len() {
                            Some(l) => assert_eq!(l, len),
                            None => assert!(len >= TRANSPORT_MIN_LEN),
                        }
                        assert_eq!(t.value(), u32::from(type_byte));
                        assert_eq!(Message::parse(b).map(|m| m.message_type()), Ok(t));
                    }
                    Err(e) => assert_eq!(Message::parse(b).map(|_| ()), Err(e)),
                }
            }
        }
    }

    #[test]
    fn view_lengths_are_checked() {
        let short = [0u8; 147];
        assert_eq!(
            HandshakeInitiation::new_checked(&short[..]).map(|_| ()),
            Err(Error::WrongLength {
                expected: 148,
                got: 147
            })
        );
        assert!(HandshakeResponse::new_checked(&short[..91]).is_err());
        assert!(CookieReply::new_checked(&short[..65]).is_err());
        assert_eq!(
            TransportData::new_checked(&short[..31]).map(|_| ()),
            Err(Error::Truncated)
        );
        assert!(TransportData::new_checked(&short[..32]).is_ok());
    }

    #[test]
    fn emit_and_setters_build_what_the_reader_reads() {
        let mut buf = [0xffu8; HANDSHAKE_INITIATION_LEN];
        let mut m = HandshakeInitiation::emit(&mut buf[..], 0x1234_5678).unwrap();
        m.set_unencrypted_ephemeral(&[0xe0; 32]);
        m.set_encrypted_static(&[0x5a; 48]);
        m.set_encrypted_timestamp(&[0x7b; 28]);
        m.set_mac1(&[0x31; 16]);
        m.set_mac2(&[0x32; 16]);
        assert_eq!(&buf[..], &initiation_bytes()[..]);
        let mut m = HandshakeInitiation::new_checked(&mut buf[..]).unwrap();
        m.encrypted_static_mut()[47] = 0;
        m.encrypted_timestamp_mut()[0] = 0;
        m.set_sender_index(7);
        assert_eq!((buf[87], buf[88], buf[4]), (0, 0, 7));

        let mut buf = [0u8; HANDSHAKE_RESPONSE_LEN];
        let mut m = HandshakeResponse::emit(&mut buf[..], 0x8000_0001, 0x1234_5678).unwrap();
        m.set_unencrypted_ephemeral(&[0xe1; 32]);
        m.set_encrypted_nothing(&[0x0e; 16]);
        m.set_mac1(&[0x41; 16]);
        m.set_mac2(&[0x42; 16]);
        assert_eq!(&buf[..], &response_bytes()[..]);
        let mut m = HandshakeResponse::new_checked(&mut buf[..]).unwrap();
        m.encrypted_nothing_mut()[15] = 0;
        assert_eq!(buf[59], 0);

        let mut buf = [0u8; COOKIE_REPLY_LEN];
        let mut m = CookieReply::emit(&mut buf[..], 0xdead_beef).unwrap();
        m.set_nonce(&[0x24; 24]);
        m.set_encrypted_cookie(&[0xcc; 32]);
        assert_eq!(&buf[..], &cookie_bytes()[..]);
        let mut m = CookieReply::new_checked(&mut buf[..]).unwrap();
        m.encrypted_cookie_mut()[31] = 0;
        assert_eq!(buf[63], 0);

        let mut buf = [0x7au8; TRANSPORT_MIN_LEN];
        let m = TransportData::emit(&mut buf[..], 0x8000_0001, 0x0102_0304_0506_0708).unwrap();
        assert_eq!(m.into_inner(), &keepalive_bytes()[..]);
        let mut m = TransportData::new_checked(&mut buf[..]).unwrap();
        m.payload_mut().fill(0);
        m.set_counter(u64::MAX);
        m.set_receiver_index(0);
        assert_eq!(
            &buf[4..],
            &[&[0u8; 4][..], &[0xff; 8], &[0; 16]].concat()[..]
        );
    }

    #[test]
    fn emit_overwrites_a_dirty_type_word() {
        let mut buf = [0xffu8; TRANSPORT_MIN_LEN + 16];
        TransportData::emit(&mut buf[..], 1, 2).unwrap();
        assert_eq!(Message::classify(&buf), Ok(MessageType::TransportData));
    }

    #[test]
    fn emit_refuses_wrong_sizes() {
        let mut buf = [0u8; 200];
        assert!(HandshakeInitiation::emit(&mut buf[..147], 0).is_err());
        assert!(HandshakeResponse::emit(&mut buf[..93], 0, 0).is_err());
        assert!(CookieReply::emit(&mut buf[..0], 0).is_err());
        assert_eq!(
            TransportData::emit(&mut buf[..31], 0, 0).map(|_| ()),
            Err(Error::Truncated)
        );
        assert_eq!(buf, [0; 200]);
    }
}
