//! The data channel's keys for one key id: cut from 256 bytes of key material
//! (the TLS exporter's or OpenVPN's PRF's, a [`Key2`]) by role. The server sends
//! with the second half and the client with the first; in each half the cipher
//! key is the first bytes of the cipher part and the implicit IV the first eight
//! of the HMAC part (an AEAD channel has no HMAC key).

use zeroize::{Zeroize, ZeroizeOnDrop};

use crate::static_key::{Direction, Key2};
use crate::{DataCipher, Role};

/// Bytes of the implicit IV: the nonce is the packet id (4) and these (8).
pub const IMPLICIT_IV_LEN: usize = 8;

/// One direction's key and implicit IV, zeroed when dropped.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct DirectionKey {
    key: [u8; 32],
    #[zeroize(skip)]
    key_len: usize,
    implicit_iv: [u8; IMPLICIT_IV_LEN],
}

impl DirectionKey {
    pub fn key(&self) -> &[u8] {
        &self.key[..self.key_len]
    }

    pub fn implicit_iv(&self) -> &[u8; IMPLICIT_IV_LEN] {
        &self.implicit_iv
    }

    /// The 96-bit nonce of the packet with `packet_id` (OpenVPN 2.6's layout:
    /// the id, then the implicit IV; not the XOR of OpenVPN 2.7's epoch keys).
    pub fn nonce(&self, packet_id: u32) -> [u8; 12] {
        let mut n = [0; 12];
        n[..4].copy_from_slice(&packet_id.to_be_bytes());
        n[4..].copy_from_slice(&self.implicit_iv);
        n
    }
}

/// Both directions' keys for one key id of one client.
#[derive(Clone)]
pub struct DataKeys {
    pub cipher: DataCipher,
    pub send: DirectionKey,
    pub recv: DirectionKey,
}

impl DataKeys {
    pub fn new(material: &Key2, cipher: DataCipher, role: Role) -> DataKeys {
        let direction = match role {
            Role::Server => Direction::Inverse,
            Role::Client => Direction::Normal,
        };
        let (send, recv) = material.halves(direction);
        let cut = |half: crate::static_key::KeyHalf<'_>| {
            let mut key = [0; 32];
            key[..cipher.key_len()].copy_from_slice(&half.cipher()[..cipher.key_len()]);
            DirectionKey {
                key,
                key_len: cipher.key_len(),
                implicit_iv: half.hmac()[..IMPLICIT_IV_LEN].try_into().expect("8 bytes"),
            }
        };
        DataKeys {
            cipher,
            send: cut(send),
            recv: cut(recv),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_ends_cut_matching_keys() {
        let material = Key2::from_bytes(std::array::from_fn(|i| i as u8));
        let server = DataKeys::new(&material, DataCipher::Aes128Gcm, Role::Server);
        let client = DataKeys::new(&material, DataCipher::Aes128Gcm, Role::Client);
        assert_eq!(server.send.key(), client.recv.key());
        assert_eq!(server.recv.implicit_iv(), client.send.implicit_iv());
        assert_eq!(server.send.key().len(), 16);
        // The server sends with the second half: cipher at 128, HMAC at 192.
        assert_eq!(server.send.key()[0], 128);
        assert_eq!(server.send.implicit_iv()[0], 192);
        assert_eq!(server.send.nonce(0x01020304)[..5], [1, 2, 3, 4, 192]);
    }
}
