//! The control channel's packet ids (tls-auth and tls-crypt): a 32-bit count and
//! the 32-bit time (seconds) at which the count began, written before the body and
//! covered by the HMAC or tag, and the replay check a receiver makes once the
//! packet is authenticated.

use crate::Refusal;

/// A packet id in its long form: the count and the time the count began.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketId {
    pub id: u32,
    pub time: u32,
}

/// Bytes of a long-form packet id on the wire.
pub const PACKET_ID_LEN: usize = 8;

impl PacketId {
    pub fn to_bytes(self) -> [u8; PACKET_ID_LEN] {
        let mut b = [0; PACKET_ID_LEN];
        b[..4].copy_from_slice(&self.id.to_be_bytes());
        b[4..].copy_from_slice(&self.time.to_be_bytes());
        b
    }

    pub fn from_bytes(b: [u8; PACKET_ID_LEN]) -> PacketId {
        PacketId {
            id: u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
            time: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
        }
    }
}

/// A sender's packet ids: 1, 2, 3... with the time the count began; when the
/// count would wrap it begins again at 1 with the time of that moment, so an id
/// is never sent twice under one time.
#[derive(Clone, Debug)]
pub struct PacketIdSender {
    next: PacketId,
}

impl PacketIdSender {
    /// `now` is seconds on the wall clock (OpenVPN compares times only for
    /// order, so any clock that does not go back will do).
    pub fn new(now: u32) -> PacketIdSender {
        PacketIdSender {
            next: PacketId { id: 1, time: now },
        }
    }

    pub fn next(&mut self, now: u32) -> PacketId {
        let id = self.next;
        self.next = match id.id.checked_add(1) {
            Some(n) => PacketId {
                id: n,
                time: id.time,
            },
            None => PacketId {
                id: 1,
                time: now.max(id.time.wrapping_add(1)),
            },
        };
        id
    }
}

/// How many ids behind the newest one a late packet may be and still pass.
pub const REPLAY_WINDOW: u32 = 64;

/// A receiver's replay check on authenticated control packets: a newer time
/// starts a new window; under the newest time, each id is taken once within the
/// last [`REPLAY_WINDOW`]; an older time is refused.
#[derive(Clone, Debug, Default)]
pub struct ReplayGuard {
    newest: Option<PacketId>,
    /// Bit `n` set: id `newest.id - n` was seen.
    seen: u64,
}

impl ReplayGuard {
    /// Whether `pid` would pass, without recording it.
    pub fn check(&self, pid: PacketId) -> Result<(), Refusal> {
        let Some(newest) = self.newest else {
            return Ok(());
        };
        if pid.time > newest.time || (pid.time == newest.time && pid.id > newest.id) {
            return Ok(());
        }
        if pid.time < newest.time {
            return Err(Refusal::Replay);
        }
        let behind = newest.id - pid.id;
        if behind >= REPLAY_WINDOW || self.seen >> behind & 1 == 1 {
            return Err(Refusal::Replay);
        }
        Ok(())
    }

    /// Records `pid` if it passes; refuses it, and changes nothing, if not.
    pub fn accept(&mut self, pid: PacketId) -> Result<(), Refusal> {
        self.check(pid)?;
        match self.newest {
            Some(newest) if pid.time == newest.time && pid.id <= newest.id => {
                self.seen |= 1 << (newest.id - pid.id);
            }
            Some(newest) if pid.time == newest.time => {
                let ahead = pid.id - newest.id;
                self.seen = if ahead >= 64 { 0 } else { self.seen << ahead };
                self.seen |= 1;
                self.newest = Some(pid);
            }
            _ => {
                self.seen = 1;
                self.newest = Some(pid);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pid(id: u32, time: u32) -> PacketId {
        PacketId { id, time }
    }

    #[test]
    fn each_id_passes_once_in_any_order_within_the_window() {
        let mut g = ReplayGuard::default();
        for id in [5, 3, 4, 1, 2, 70, 7] {
            g.accept(pid(id, 100)).unwrap();
        }
        for id in [5, 3, 70, 7] {
            assert_eq!(g.accept(pid(id, 100)), Err(Refusal::Replay));
        }
        // 70 - 64 = 6 is the first id out of the window.
        assert_eq!(g.accept(pid(6, 100)), Err(Refusal::Replay));
        g.accept(pid(8, 100)).unwrap();
    }

    #[test]
    fn a_newer_time_restarts_and_an_older_one_is_refused() {
        let mut g = ReplayGuard::default();
        g.accept(pid(900, 100)).unwrap();
        g.accept(pid(1, 101)).unwrap();
        assert_eq!(g.accept(pid(901, 100)), Err(Refusal::Replay));
        g.accept(pid(2, 101)).unwrap();
    }

    #[test]
    fn the_sender_never_repeats_an_id_under_one_time() {
        let mut s = PacketIdSender::new(50);
        assert_eq!(s.next(50), pid(1, 50));
        assert_eq!(s.next(60), pid(2, 50));
        s.next = pid(u32::MAX, 50);
        assert_eq!(s.next(50), pid(u32::MAX, 50));
        assert_eq!(s.next(50), pid(1, 51));
    }

    #[test]
    fn ids_round_trip_through_bytes() {
        let p = pid(0x01020304, 0x0a0b0c0d);
        assert_eq!(p.to_bytes(), [1, 2, 3, 4, 10, 11, 12, 13]);
        assert_eq!(PacketId::from_bytes(p.to_bytes()), p);
    }
}
