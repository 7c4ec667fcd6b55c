//! RFC 7383: IKE messages too large for the path go as encrypted fragments, each
//! sealed on its own (`crate::sk`), so no IP fragment is needed; both ends say
//! they take them in IKE_SA_INIT (IKEV2_FRAGMENTATION_SUPPORTED). Here the
//! fragments of one incoming message are gathered, each authenticated before it
//! is kept, the message held no longer than its exchange and bounded in count
//! and bytes; a retransmission's first fragment alone asks for the answer again.

use super::*;
use crate::sk::Fragment;

/// Whether `msg` (a message for this SA) is whole or the first of its fragments.
pub(super) fn first_or_whole(h: &Header, msg: &[u8]) -> bool {
    if h.next_payload != crate::wire::payload_type::SKF {
        return true;
    }
    crate::sk::fragment_numbers(msg, HEADER_LEN).is_some_and(|(n, _)| n == 1)
}

impl IkeSa {
    /// Keeps an authenticated fragment of the message `h` heads; the whole inner
    /// chain (its first payload's type, its bytes) once every fragment is in.
    pub(super) fn take_fragment(
        &mut self,
        h: &Header,
        first_inner: u8,
        f: Fragment,
    ) -> Result<(u8, Vec<u8>), Undecrypted> {
        if f.total > MAX_FRAGMENTS {
            return Err(Undecrypted::Dropped("too-many-fragments"));
        }
        let response = h.is_response();
        let same = self
            .incoming
            .as_ref()
            .is_some_and(|m| m.message_id == h.message_id && m.response == response);
        match &self.incoming {
            // A total below the one gathered is an older copy's: dropped. One
            // above is a retransmission cut smaller, and the fragments so far
            // are of no use (RFC 7383 section 2.6.2): it starts again.
            Some(m) if same && f.total < m.total => {
                return Err(Undecrypted::Dropped("stale-fragment"));
            }
            Some(m) if same && f.total == m.total => {}
            _ => {
                self.incoming = Some(Incoming {
                    message_id: h.message_id,
                    response,
                    total: f.total,
                    first_inner: None,
                    pieces: Default::default(),
                    bytes: 0,
                });
            }
        }
        let m = self.incoming.as_mut().expect("set above");
        if m.pieces.contains_key(&f.number) {
            return Err(Undecrypted::Dropped("duplicate-fragment"));
        }
        if m.bytes + f.piece.len() > MAX_FRAGMENT_BYTES {
            self.incoming = None;
            return Err(Undecrypted::Dropped("fragments-too-big"));
        }
        if f.number == 1 {
            m.first_inner = Some(first_inner);
        }
        m.bytes += f.piece.len();
        m.pieces.insert(f.number, f.piece);
        if m.pieces.len() < usize::from(m.total) {
            return Err(Undecrypted::Waiting);
        }
        let m = self.incoming.take().expect("complete");
        let first = m.first_inner.expect("fragment 1 is among them");
        Ok((first, m.pieces.into_values().flatten().collect()))
    }
}
