//! A peer's timer deadlines (whitepaper section 6), kept with the peer; the named
//! events that arm and fire them are `device::timers`.

use std::time::Instant;

/// The deadlines of section 6's timers; `None` is "not armed".
#[derive(Default, Debug, Clone)]
pub struct Timers {
    pub retransmit_handshake: Option<Instant>,
    pub send_keepalive: Option<Instant>,
    pub new_handshake: Option<Instant>,
    pub zero_key_material: Option<Instant>,
    pub persistent_keepalive: Option<Instant>,
    pub handshake_attempts: u32,
    pub need_another_keepalive: bool,
    pub sent_lastminute_handshake: bool,
    pub last_sent_handshake: Option<Instant>,
}

impl Timers {
    pub fn next_deadline(&self) -> Option<Instant> {
        [
            self.retransmit_handshake,
            self.send_keepalive,
            self.new_handshake,
            self.zero_key_material,
            self.persistent_keepalive,
        ]
        .into_iter()
        .flatten()
        .min()
    }
}
