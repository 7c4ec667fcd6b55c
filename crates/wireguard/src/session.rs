//! One packet on one session, the same for the device's data path and a
//! follower's: the ticket to seal a packet (key, counter, receiver index,
//! endpoint) or to open one (the session found, its counter checked), and the
//! commit once a received packet's tag verified (the allowed-IPs check, then the
//! session's replay window, shared by every worker).

use crate::allowed_ips::AllowedIps;
use crate::constants::REJECT_AFTER_MESSAGES;
use crate::drop::DropReason;
use crate::keypair::Keypair;
use crate::peer_id::PeerId;
use crypto::KeyHandle;
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

/// Everything the data path needs to encrypt one packet to a peer.
#[derive(Debug, Clone, Copy)]
pub struct SendTicket {
    pub key: KeyHandle,
    pub counter: u64,
    pub receiver_index: u32,
    pub endpoint: SocketAddr,
    /// The session's [`Keypair::serial`]: what a later ticket of the same frame is
    /// taken on (`Device::advance_ticket`).
    pub serial: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// No usable session: stage the packet; a handshake has been asked for.
    NoSession,
    NoEndpoint,
}

/// What the data path needs to decrypt one packet, found by receiver index.
#[derive(Debug, Clone, Copy)]
pub struct RecvTicket {
    pub peer: PeerId,
    pub key: KeyHandle,
    pub local_index: u32,
}

/// The ticket for a packet with `counter` on `peer`'s session `k`, if it may be
/// decrypted now; the device's and a follower's data path alike. Changes nothing.
#[inline]
pub(crate) fn recv_ticket_on(
    peer: PeerId,
    k: &Keypair,
    counter: u64,
    now: Instant,
) -> Result<RecvTicket, DropReason> {
    check_receive(k, counter, now)?;
    Ok(RecvTicket {
        peer,
        key: k.recv_key,
        local_index: k.local_index,
    })
}

/// After the tag verified: the inner source must be one of the peer's allowed IPs,
/// and the counter is committed in the session's window (shared by every worker).
/// Nothing changes when it returns an error.
pub(crate) fn commit_on(
    allowed_ips: &AllowedIps<PeerId>,
    t: &RecvTicket,
    k: &Keypair,
    counter: u64,
    inner_src: Option<IpAddr>,
) -> Result<(), DropReason> {
    if let Some(ip) = inner_src
        && allowed_ips.lookup(ip) != Some(t.peer)
    {
        return Err(DropReason::SourceNotAllowed);
    }
    if !k.replay.commit(counter) {
        return Err(DropReason::Replay);
    }
    Ok(())
}

/// May a packet with `counter` be decrypted on `k` now? Changes nothing.
#[inline]
fn check_receive(k: &Keypair, counter: u64, now: Instant) -> Result<(), DropReason> {
    if !k.can_receive(now) {
        return Err(DropReason::KeyExpired);
    }
    if !k.replay.check(counter) {
        return Err(if counter >= REJECT_AFTER_MESSAGES {
            DropReason::KeyExpired
        } else {
            DropReason::Replay
        });
    }
    Ok(())
}
