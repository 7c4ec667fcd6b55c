//! The first byte of every OpenVPN packet: an opcode in its high five bits and a
//! key id in its low three.

use crate::Refusal;

/// The opcodes this crate parses. Version 1 hard resets and P_DATA_V1 (no
/// peer-id) belong to OpenVPN 2.3 and older, whose clients no longer connect
/// to a server that pushes peer-ids; they are named so that they are refused
/// as such rather than as unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Opcode {
    HardResetClientV1 = 1,
    HardResetServerV1 = 2,
    SoftResetV1 = 3,
    ControlV1 = 4,
    AckV1 = 5,
    DataV1 = 6,
    HardResetClientV2 = 7,
    HardResetServerV2 = 8,
    DataV2 = 9,
    HardResetClientV3 = 10,
    ControlWkcV1 = 11,
}

impl Opcode {
    /// The opcode of a packet's first byte.
    pub fn of(first: u8) -> Result<Opcode, Refusal> {
        Ok(match first >> 3 {
            1 => Opcode::HardResetClientV1,
            2 => Opcode::HardResetServerV1,
            3 => Opcode::SoftResetV1,
            4 => Opcode::ControlV1,
            5 => Opcode::AckV1,
            6 => Opcode::DataV1,
            7 => Opcode::HardResetClientV2,
            8 => Opcode::HardResetServerV2,
            9 => Opcode::DataV2,
            10 => Opcode::HardResetClientV3,
            11 => Opcode::ControlWkcV1,
            _ => return Err(Refusal::UnknownOpcode),
        })
    }

    /// The first byte of a packet with this opcode and key id (0-7).
    pub fn byte(self, key_id: KeyId) -> u8 {
        (self as u8) << 3 | key_id.get()
    }

    /// Data packets carry no session id and go to the data channel.
    pub fn is_data(self) -> bool {
        matches!(self, Opcode::DataV1 | Opcode::DataV2)
    }

    /// Packets that carry a message id and are acknowledged (all control
    /// packets but a bare acknowledgement).
    pub fn is_reliable(self) -> bool {
        !self.is_data() && self != Opcode::AckV1
    }
}

/// A key id, 0 to 7: which of a session's keys a packet belongs to. Key 0 is the
/// first; each renegotiation takes the next, wrapping from 7 to 1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct KeyId(u8);

impl KeyId {
    /// The key id of a packet's first byte.
    pub fn of(first: u8) -> KeyId {
        KeyId(first & 7)
    }

    /// A key id from its number; `None` above 7.
    pub fn new(id: u8) -> Option<KeyId> {
        (id < 8).then_some(KeyId(id))
    }

    pub fn get(self) -> u8 {
        self.0
    }

    /// The key id a renegotiation after this one uses: 0 is never reused, so
    /// that a late packet of the first key cannot be taken for a new one.
    pub fn next(self) -> KeyId {
        KeyId(if self.0 == 7 { 1 } else { self.0 + 1 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_byte_round_trips() {
        for id in 0..8 {
            let k = KeyId::new(id).unwrap();
            let b = Opcode::DataV2.byte(k);
            assert_eq!(Opcode::of(b), Ok(Opcode::DataV2));
            assert_eq!(KeyId::of(b), k);
        }
        assert_eq!(Opcode::of(0), Err(Refusal::UnknownOpcode));
        assert_eq!(Opcode::of(12 << 3), Err(Refusal::UnknownOpcode));
        assert_eq!(KeyId::new(8), None);
    }

    #[test]
    fn key_ids_skip_zero_when_they_wrap() {
        let ids: Vec<u8> = std::iter::successors(Some(KeyId::default()), |k| Some(k.next()))
            .take(10)
            .map(KeyId::get)
            .collect();
        assert_eq!(ids, [0, 1, 2, 3, 4, 5, 6, 7, 1, 2]);
    }
}
