//! Runs of packets: what the data path tells the device about its traffic, once per
//! run of packets to or from the same peer rather than once per packet.
//!
//! A frame is mostly one peer's packets. Telling the device about each of them (its
//! bytes, the timers' events, the endpoint, a responder's session confirmed by data)
//! cost more at 64 bytes than any other step of the graph beside the crypto. A run
//! of `n` packets told once changes the device exactly as the `n` packets told one
//! by one would: every event but one is idempotent for packets of one peer, session
//! and source at one time, and the one that is not (data received: a keepalive
//! owed, then a second one) is told `min(n, 2)` times.
//!
//! Only consecutive packets make a run, so events keep their order: a packet of
//! another peer, session or source between two packets ends the first run.

use crate::peer_id::PeerId;
use crate::tickets::RecvTicket;
use std::net::SocketAddr;

/// Packets sent to one peer, one after another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SentRun {
    pub peer: PeerId,
    pub packets: u64,
    /// Those that carried data (not keepalives).
    pub data: u64,
    /// Their bytes on the wire.
    pub bytes: u64,
}

/// Authenticated packets received from one peer on one of our sessions, from one
/// source, one after another; their counters are committed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReceivedRun {
    pub peer: PeerId,
    /// Our receiver index of the session they came on.
    pub local_index: u32,
    pub src: SocketAddr,
    pub packets: u64,
    /// Those that carried data (not keepalives).
    pub data: u64,
    /// Their bytes on the wire.
    pub bytes: u64,
}

impl SentRun {
    /// A run of one packet (`plaintext_len` 0 is a keepalive).
    #[inline]
    pub fn one(peer: PeerId, plaintext_len: usize, wire_len: usize) -> SentRun {
        SentRun {
            peer,
            packets: 1,
            data: u64::from(plaintext_len > 0),
            bytes: wire_len as u64,
        }
    }
}

impl ReceivedRun {
    /// A run of one packet, received on `t`'s session from `src`.
    #[inline]
    pub fn one(t: &RecvTicket, data: bool, wire_len: usize, src: SocketAddr) -> ReceivedRun {
        ReceivedRun {
            peer: t.peer,
            local_index: t.local_index,
            src,
            packets: 1,
            data: u64::from(data),
            bytes: wire_len as u64,
        }
    }
}

/// The run each direction is gathering. Adding a packet that does not continue the
/// run hands the finished run back, to tell the device before the new one.
#[derive(Clone, Debug, Default)]
pub struct RunTally {
    sent: Option<SentRun>,
    received: Option<ReceivedRun>,
}

impl RunTally {
    /// One packet sent to `peer` (`plaintext_len` 0 is a keepalive).
    #[inline]
    pub fn sent(&mut self, peer: PeerId, plaintext_len: usize, wire_len: usize) -> Option<SentRun> {
        // Field by field, as `received`: no run of one is made for a packet that
        // joins the run already open.
        match self.sent.as_mut() {
            Some(r) if r.peer == peer => {
                r.packets += 1;
                r.data += u64::from(plaintext_len > 0);
                r.bytes += wire_len as u64;
                None
            }
            _ => self
                .sent
                .replace(SentRun::one(peer, plaintext_len, wire_len)),
        }
    }

    /// One packet received on `t`'s session from `src`, its counter committed.
    #[inline]
    pub fn received(
        &mut self,
        t: &RecvTicket,
        data: bool,
        wire_len: usize,
        src: SocketAddr,
    ) -> Option<ReceivedRun> {
        // Field by field, the cheap ones first: the packet's own fields are fresh
        // stores the run's copy would stall on.
        match self.received.as_mut() {
            Some(r) if r.peer == t.peer && r.local_index == t.local_index && r.src == src => {
                r.packets += 1;
                r.data += u64::from(data);
                r.bytes += wire_len as u64;
                None
            }
            _ => self
                .received
                .replace(ReceivedRun::one(t, data, wire_len, src)),
        }
    }

    /// The run of sent packets gathered so far, ending it.
    pub fn take_sent(&mut self) -> Option<SentRun> {
        self.sent.take()
    }

    /// The run of received packets gathered so far, ending it.
    pub fn take_received(&mut self) -> Option<ReceivedRun> {
        self.received.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crypto::KeyHandle;

    fn ticket(peer: u32, local_index: u32) -> RecvTicket {
        RecvTicket {
            peer: PeerId(peer),
            key: KeyHandle::INVALID,
            local_index,
        }
    }

    #[test]
    fn a_run_ends_when_the_peer_the_session_or_the_source_changes() {
        let (a, b): (SocketAddr, SocketAddr) = (
            "198.18.0.1:1".parse().unwrap(),
            "198.18.0.2:1".parse().unwrap(),
        );
        let mut t = RunTally::default();
        assert_eq!(t.received(&ticket(1, 10), true, 100, a), None);
        assert_eq!(t.received(&ticket(1, 10), false, 32, a), None);
        let first = t.received(&ticket(1, 11), true, 100, a).unwrap();
        assert_eq!((first.packets, first.data, first.bytes), (2, 1, 132));
        assert_eq!(first.local_index, 10);
        let second = t.received(&ticket(1, 11), true, 100, b).unwrap();
        assert_eq!((second.local_index, second.src), (11, a));
        let third = t.received(&ticket(2, 11), true, 100, b).unwrap();
        assert_eq!((third.peer, third.src), (PeerId(1), b));
        assert_eq!(t.take_received().map(|r| r.peer), Some(PeerId(2)));
        assert_eq!(t.take_received(), None);

        assert_eq!(t.sent(PeerId(1), 10, 64), None);
        assert_eq!(t.sent(PeerId(1), 0, 32), None);
        let sent = t.sent(PeerId(2), 10, 64).unwrap();
        assert_eq!(
            (sent.peer, sent.packets, sent.data, sent.bytes),
            (PeerId(1), 2, 1, 96)
        );
        assert_eq!(t.take_sent().map(|r| r.packets), Some(1));
        assert_eq!(t.take_sent(), None);
    }
}
