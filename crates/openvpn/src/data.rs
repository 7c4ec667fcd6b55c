//! The data channel's packets (P_DATA_V2 with an AEAD cipher): the first byte
//! (opcode and key id), a 24-bit peer-id, a 32-bit packet id, the 16-byte tag,
//! and the ciphertext. The first eight bytes are the associated data. Inside, a
//! packet is an IP packet, or one of OpenVPN's two fixed messages: the keepalive
//! ping, and (from clients without control-channel exit notification) the exit
//! notice.
//!
//! The graph's `ovpn-encrypt` and `ovpn-decrypt` stages write and read this
//! layout with their engines; [`seal`] and [`open`] here are the reference they
//! are tested against, and what the control side uses for its own few packets.

use aws_lc_rs::aead::{
    AES_128_GCM, AES_256_GCM, Aad, CHACHA20_POLY1305, LessSafeKey, Nonce, UnboundKey,
};

use crate::data_keys::DirectionKey;
use crate::{DataCipher, KeyId, Opcode, Refusal};

/// Bytes before the tag: first byte, peer-id, packet id. All of them are the
/// associated data.
pub const HEADER_LEN: usize = 8;
/// Bytes of the AEAD tag.
pub const TAG_LEN: usize = 16;
/// Bytes a data packet adds to what it carries.
pub const OVERHEAD: usize = HEADER_LEN + TAG_LEN;
/// The peer-id that means "none" (a client that was not given one).
pub const NO_PEER_ID: u32 = 0x00ff_ffff;
/// A sender's packet id past which the key must be renegotiated: ids never
/// wrap under one key, and this leaves room for the packets sent while the new
/// key is negotiated.
pub const REKEY_AT_PACKET_ID: u32 = 0xff00_0000;

/// The keepalive message (`ping`): sent when nothing else was, and dropped by
/// the receiver once it has noted that the peer is alive.
pub const PING: [u8; 16] = [
    0x2a, 0x18, 0x7b, 0xf3, 0x64, 0x1e, 0xb4, 0xcb, 0x07, 0xed, 0x2d, 0x0a, 0x98, 0x1f, 0xc7, 0x48,
];
/// The prefix of OpenVPN's option-compatibility messages; followed by 6, it is
/// a client's notice that it is leaving (`explicit-exit-notify`).
pub const OCC_MAGIC: [u8; 16] = [
    0x28, 0x7f, 0x34, 0x6b, 0xd4, 0xef, 0x7a, 0x81, 0x2d, 0x56, 0xb8, 0xd3, 0xaf, 0xc5, 0x45, 0x9c,
];
const OCC_EXIT: u8 = 6;

/// What a decrypted data packet carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inner {
    Ping,
    Exit,
    /// Anything else: an IP packet for the tunnel, or another OCC message,
    /// which the caller's IP checks refuse.
    Packet,
}

/// What a plaintext is.
pub fn classify(plain: &[u8]) -> Inner {
    if plain == PING {
        Inner::Ping
    } else if plain.len() == OCC_MAGIC.len() + 1
        && plain[..16] == OCC_MAGIC
        && plain[16] == OCC_EXIT
    {
        Inner::Exit
    } else {
        Inner::Packet
    }
}

/// A P_DATA_V2 packet's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataHeader {
    pub key_id: KeyId,
    pub peer_id: u32,
    pub packet_id: u32,
}

impl DataHeader {
    /// The header of a packet long enough to hold a tag. Opcodes other than
    /// P_DATA_V2 are refused: P_DATA_V1 comes only from peers without peer-ids.
    pub fn parse(packet: &[u8]) -> Result<DataHeader, Refusal> {
        let head: &[u8; HEADER_LEN] = packet
            .first_chunk()
            .filter(|_| packet.len() >= OVERHEAD)
            .ok_or(Refusal::Truncated)?;
        if Opcode::of(head[0])? != Opcode::DataV2 {
            return Err(Refusal::UnknownOpcode);
        }
        Ok(DataHeader {
            key_id: KeyId::of(head[0]),
            peer_id: u32::from_be_bytes([0, head[1], head[2], head[3]]),
            packet_id: u32::from_be_bytes([head[4], head[5], head[6], head[7]]),
        })
    }

    pub fn to_bytes(self) -> [u8; HEADER_LEN] {
        let p = self.peer_id.to_be_bytes();
        let n = self.packet_id.to_be_bytes();
        [
            Opcode::DataV2.byte(self.key_id),
            p[1],
            p[2],
            p[3],
            n[0],
            n[1],
            n[2],
            n[3],
        ]
    }
}

fn aead_key(cipher: DataCipher, key: &DirectionKey) -> LessSafeKey {
    let alg = match cipher {
        DataCipher::Aes128Gcm => &AES_128_GCM,
        DataCipher::Aes256Gcm => &AES_256_GCM,
        DataCipher::Chacha20Poly1305 => &CHACHA20_POLY1305,
    };
    LessSafeKey::new(UnboundKey::new(alg, key.key()).expect("the key has the cipher's length"))
}

/// The packet carrying `plain` under `header`.
pub fn seal(cipher: DataCipher, key: &DirectionKey, header: DataHeader, plain: &[u8]) -> Vec<u8> {
    let head = header.to_bytes();
    let mut body = plain.to_vec();
    let tag = aead_key(cipher, key)
        .seal_in_place_separate_tag(
            Nonce::assume_unique_for_key(key.nonce(header.packet_id)),
            Aad::from(head),
            &mut body,
        )
        .expect("seal takes any length a packet has");
    [&head[..], tag.as_ref(), &body].concat()
}

/// The header and plaintext of a packet that verifies. The caller checks the
/// packet id against its replay window afterwards (only an authentic packet may
/// move the window).
pub fn open(
    cipher: DataCipher,
    key: &DirectionKey,
    packet: &[u8],
) -> Result<(DataHeader, Vec<u8>), Refusal> {
    let header = DataHeader::parse(packet)?;
    let (tag, ciphertext) = packet[HEADER_LEN..].split_at(TAG_LEN);
    // The library takes the tag after the ciphertext; OpenVPN puts it before.
    let mut body = [ciphertext, tag].concat();
    let head: [u8; HEADER_LEN] = packet[..HEADER_LEN].try_into().expect("8 bytes");
    let plain_len = aead_key(cipher, key)
        .open_in_place(
            Nonce::assume_unique_for_key(key.nonce(header.packet_id)),
            Aad::from(head),
            &mut body,
        )
        .map_err(|_| Refusal::BadAuth)?
        .len();
    body.truncate(plain_len);
    Ok((header, body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Role;
    use crate::data_keys::DataKeys;
    use crate::static_key::Key2;

    #[test]
    fn packets_seal_and_open_across_the_two_ends_for_every_cipher() {
        let material = Key2::from_bytes(std::array::from_fn(|i| (i * 7) as u8));
        for cipher in DataCipher::ALL {
            let server = DataKeys::new(&material, cipher, Role::Server);
            let client = DataKeys::new(&material, cipher, Role::Client);
            let header = DataHeader {
                key_id: KeyId::new(3).unwrap(),
                peer_id: 0x00abcdef,
                packet_id: 9,
            };
            let packet = seal(cipher, &server.send, header, b"an inner packet");
            assert_eq!(packet.len(), OVERHEAD + 15);
            assert_eq!(packet[0], 9 << 3 | 3);
            assert_eq!(
                open(cipher, &client.recv, &packet),
                Ok((header, b"an inner packet".to_vec()))
            );
            // Each byte of the header is authenticated, and so is the tag.
            for at in [0, 1, 4, 8, packet.len() - 1] {
                let mut forged = packet.clone();
                forged[at] ^= 1;
                assert!(
                    open(cipher, &client.recv, &forged).is_err(),
                    "{cipher:?} byte {at}"
                );
            }
            // Its own send key does not open it.
            assert_eq!(open(cipher, &client.send, &packet), Err(Refusal::BadAuth));
        }
    }

    #[test]
    fn short_and_foreign_packets_are_refused() {
        assert_eq!(
            DataHeader::parse(&[0x48; OVERHEAD - 1]),
            Err(Refusal::Truncated)
        );
        assert_eq!(
            DataHeader::parse(&[6 << 3; OVERHEAD]),
            Err(Refusal::UnknownOpcode)
        );
        assert_eq!(
            DataHeader::parse(&[0; OVERHEAD]),
            Err(Refusal::UnknownOpcode)
        );
    }

    #[test]
    fn pings_and_exits_are_told_apart_from_packets() {
        assert_eq!(classify(&PING), Inner::Ping);
        let exit = [&OCC_MAGIC[..], &[OCC_EXIT]].concat();
        assert_eq!(classify(&exit), Inner::Exit);
        assert_eq!(classify(&exit[..16]), Inner::Packet);
        assert_eq!(classify(&[0x45; 20]), Inner::Packet);
    }
}
