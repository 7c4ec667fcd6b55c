//! The reliability layer that carries TLS over UDP: each reliable control packet
//! has a message id; the receiver acknowledges every one it takes (again if it
//! comes again) and hands their payloads on in order; the sender keeps each
//! until it is acknowledged and sends it again on a timeout that doubles each
//! time, or at once when three later packets were acknowledged before it. Both
//! windows are bounded, so a peer cannot make an end hold more than a few
//! packets.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use crate::{Opcode, Refusal};

/// Reliable packets in flight at once (OpenVPN's send buffers).
pub const SEND_WINDOW: usize = 6;
/// How far past the next expected id a packet may be and be held.
pub const RECEIVE_WINDOW: u32 = 12;
/// The first retransmission timeout (OpenVPN's default `tls-timeout`).
pub const INITIAL_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest a timeout grows to; the handshake's own deadline ends a session
/// that needs more.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(16);
/// Acknowledgements of later packets after which an unacknowledged one is
/// sent again without waiting for its timeout.
const FAST_RETRANSMIT_AFTER: u8 = 3;

struct InFlight {
    id: u32,
    opcode: Opcode,
    payload: Vec<u8>,
    next_try: Instant,
    timeout: Duration,
    later_acks: u8,
}

/// One reliable packet to put on the wire now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    pub message_id: u32,
    pub opcode: Opcode,
    pub payload: Vec<u8>,
}

/// The sending side: message ids in order, each kept until acknowledged.
pub struct SendWindow {
    next_id: u32,
    in_flight: VecDeque<InFlight>,
}

impl Default for SendWindow {
    fn default() -> Self {
        SendWindow::new()
    }
}

impl SendWindow {
    pub fn new() -> SendWindow {
        SendWindow {
            next_id: 0,
            in_flight: VecDeque::with_capacity(SEND_WINDOW),
        }
    }

    /// Whether another packet fits in the window.
    pub fn has_room(&self) -> bool {
        self.in_flight.len() < SEND_WINDOW
    }

    /// Takes a packet to send with the next message id, which it returns; it
    /// goes out from [`SendWindow::due`]. `None` when the window is full: the
    /// caller holds the payload until an acknowledgement makes room.
    pub fn push(&mut self, opcode: Opcode, payload: Vec<u8>, now: Instant) -> Option<u32> {
        if !self.has_room() {
            return None;
        }
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        self.in_flight.push_back(InFlight {
            id,
            opcode,
            payload,
            next_try: now,
            timeout: INITIAL_TIMEOUT,
            later_acks: 0,
        });
        Some(id)
    }

    /// Takes an acknowledgement; true when it acknowledged a packet in flight.
    pub fn ack(&mut self, id: u32) -> bool {
        let Some(at) = self.in_flight.iter().position(|p| p.id == id) else {
            return false;
        };
        self.in_flight.remove(at);
        for earlier in self.in_flight.iter_mut().take(at) {
            earlier.later_acks = earlier.later_acks.saturating_add(1);
        }
        true
    }

    /// The packets to send now (new ones, timed out ones, and ones passed by
    /// three acknowledgements), each rescheduled with its timeout doubled.
    pub fn due(&mut self, now: Instant) -> Vec<Transmit> {
        let mut out = Vec::new();
        for p in &mut self.in_flight {
            if now >= p.next_try || p.later_acks >= FAST_RETRANSMIT_AFTER {
                out.push(Transmit {
                    message_id: p.id,
                    opcode: p.opcode,
                    payload: p.payload.clone(),
                });
                p.next_try = now + p.timeout;
                p.timeout = (p.timeout * 2).min(MAX_TIMEOUT);
                p.later_acks = 0;
            }
        }
        out
    }

    /// When the next packet falls due, if any is in flight.
    pub fn next_due(&self) -> Option<Instant> {
        self.in_flight.iter().map(|p| p.next_try).min()
    }

    pub fn is_empty(&self) -> bool {
        self.in_flight.is_empty()
    }
}

/// What the receiving side did with a reliable packet. Either way its id is to
/// be acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Received {
    /// Held for delivery in order.
    New,
    /// Seen before: acknowledged again (the first acknowledgement may have been
    /// lost) and otherwise ignored.
    Duplicate,
}

/// The receiving side: packets held until every earlier id has arrived.
#[derive(Default)]
pub struct ReceiveWindow {
    next: u32,
    held: BTreeMap<u32, (Opcode, Vec<u8>)>,
}

impl ReceiveWindow {
    pub fn new() -> ReceiveWindow {
        ReceiveWindow::default()
    }

    /// What [`ReceiveWindow::receive`] would do with `id`, without doing it.
    pub fn check(&self, id: u32) -> Result<Received, Refusal> {
        let ahead = id.wrapping_sub(self.next);
        // Ids behind `next` (up to half the id space) are old duplicates.
        if ahead > u32::MAX / 2 || self.held.contains_key(&id) {
            return Ok(Received::Duplicate);
        }
        if ahead >= RECEIVE_WINDOW {
            return Err(Refusal::OutOfWindow);
        }
        Ok(Received::New)
    }

    /// Takes a reliable packet. One too far ahead is refused and must not be
    /// acknowledged, so that its sender tries it again later.
    pub fn receive(
        &mut self,
        id: u32,
        opcode: Opcode,
        payload: &[u8],
    ) -> Result<Received, Refusal> {
        let verdict = self.check(id)?;
        if verdict == Received::New {
            self.held.insert(id, (opcode, payload.to_vec()));
        }
        Ok(verdict)
    }

    /// The next packet in order, if it has arrived.
    pub fn deliver(&mut self) -> Option<(Opcode, Vec<u8>)> {
        let packet = self.held.remove(&self.next)?;
        self.next = self.next.wrapping_add(1);
        Some(packet)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packets_are_sent_until_acknowledged_with_doubling_timeouts() {
        let t0 = Instant::now();
        let mut w = SendWindow::new();
        assert_eq!(w.push(Opcode::ControlV1, b"a".to_vec(), t0), Some(0));
        assert_eq!(w.due(t0).len(), 1);
        assert!(w.due(t0 + Duration::from_millis(1999)).is_empty());
        assert_eq!(w.due(t0 + Duration::from_secs(2)).len(), 1);
        // The second timeout is 4 s.
        assert!(w.due(t0 + Duration::from_secs(5)).is_empty());
        assert_eq!(w.due(t0 + Duration::from_secs(6)).len(), 1);
        assert!(w.ack(0));
        assert!(!w.ack(0));
        assert!(w.is_empty());
        assert_eq!(w.next_due(), None);
    }

    #[test]
    fn the_window_is_bounded_and_ack_makes_room() {
        let t0 = Instant::now();
        let mut w = SendWindow::new();
        for i in 0..SEND_WINDOW as u32 {
            assert_eq!(w.push(Opcode::ControlV1, vec![], t0), Some(i));
        }
        assert_eq!(w.push(Opcode::ControlV1, vec![], t0), None);
        w.ack(3);
        assert_eq!(
            w.push(Opcode::ControlV1, vec![], t0),
            Some(SEND_WINDOW as u32)
        );
    }

    #[test]
    fn three_later_acks_resend_at_once() {
        let t0 = Instant::now();
        let mut w = SendWindow::new();
        for _ in 0..4 {
            w.push(Opcode::ControlV1, vec![], t0);
        }
        w.due(t0);
        for id in 1..4 {
            w.ack(id);
        }
        let again = w.due(t0 + Duration::from_millis(10));
        assert_eq!(again.iter().map(|t| t.message_id).collect::<Vec<_>>(), [0]);
    }

    #[test]
    fn the_receiver_delivers_in_order_once() {
        let mut r = ReceiveWindow::new();
        assert_eq!(r.receive(1, Opcode::ControlV1, b"b"), Ok(Received::New));
        assert_eq!(r.deliver(), None);
        assert_eq!(r.receive(0, Opcode::ControlV1, b"a"), Ok(Received::New));
        assert_eq!(
            r.receive(1, Opcode::ControlV1, b"b"),
            Ok(Received::Duplicate)
        );
        assert_eq!(r.deliver().unwrap().1, b"a");
        assert_eq!(r.deliver().unwrap().1, b"b");
        assert_eq!(r.deliver(), None);
        assert_eq!(
            r.receive(0, Opcode::ControlV1, b"a"),
            Ok(Received::Duplicate)
        );
        assert_eq!(
            r.receive(2 + RECEIVE_WINDOW, Opcode::ControlV1, b"x"),
            Err(Refusal::OutOfWindow)
        );
        assert_eq!(
            r.receive(1 + RECEIVE_WINDOW, Opcode::ControlV1, b"x"),
            Ok(Received::New)
        );
    }
}
