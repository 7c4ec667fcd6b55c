//! One packet on one session, the same for the device's data path and a
//! follower's:
//! - the ticket to open a packet (the session found, its counter checked; the
//!   ticket types are `tickets`);
//! - the commit once a received packet's tag verified (the allowed-IPs check, then
//!   the session's replay window, shared by every worker);
//! - a run of packets on one session within a frame (the session found once, each
//!   packet's counter checked or taken);
//! - the data path's one interface to either side ([`SessionPath`]).

use crate::allowed_ips::AllowedIps;
use crate::constants::REJECT_AFTER_MESSAGES;
use crate::drop::DropReason;
use crate::keypair::Keypair;
use crate::peer_id::PeerId;
use crate::runs::{ReceivedRun, SentRun};
pub use crate::tickets::{RecvTicket, SendError, SendTicket};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

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

/// The session a receiver index names, held for the frame's packets that carry it.
pub struct RecvRun {
    index: u32,
    peer: PeerId,
    keypair: Arc<Keypair>,
}

impl RecvRun {
    /// The run of `index`, from what a session lookup by that index found.
    pub(crate) fn found(
        index: u32,
        session: Result<(PeerId, &Arc<Keypair>), DropReason>,
    ) -> Result<RecvRun, DropReason> {
        let (peer, k) = session?;
        Ok(RecvRun {
            index,
            peer,
            keypair: k.clone(),
        })
    }

    /// The receiver index the run was found by.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The ticket for a packet of the run with `counter`, or why it may not be
    /// decrypted now (see [`SessionPath::recv_ticket`]).
    /// Changes nothing.
    pub fn ticket(&self, counter: u64, now: Instant) -> Result<RecvTicket, DropReason> {
        recv_ticket_on(self.peer, &self.keypair, counter, now)
    }
}

pub(crate) fn advance(counter: Option<u64>, t: &mut SendTicket) -> bool {
    match counter {
        Some(c) => {
            t.counter = c;
            true
        }
        None => false,
    }
}

/// One tunnel's data path as a worker runs it, the same whether the worker owns
/// the device ([`crate::Device`]) or follows it ([`crate::Follower`]): the one
/// interface the data path calls, so that it tells the two apart in one place.
/// Each side says where it keeps the sessions and allowed IPs and how it takes
/// counters and learns of traffic; the checks over them are written here once.
pub trait SessionPath {
    /// The allowed IPs this side routes by and checks sources against.
    fn allowed_ips(&self) -> &AllowedIps<PeerId>;

    /// The peer and session this side has for our index `local_index`.
    fn session_by_index(&self, local_index: u32) -> Result<(PeerId, &Arc<Keypair>), DropReason>;

    /// The session a receive ticket names, if it is still there.
    fn session(&self, t: &RecvTicket) -> Result<&Keypair, DropReason>;

    /// `peer`'s current session, the one it sends on.
    fn sending_session(&self, peer: PeerId) -> Option<&Arc<Keypair>>;

    /// Counter and key for one packet to `peer`, or why not. On `NoSession` the
    /// packet waits for a session (the owner stages it; a follower hands it to the
    /// owner).
    fn send_ticket(&mut self, peer: PeerId, now: Instant) -> Result<SendTicket, SendError>;

    /// Moves `t`, a ticket this frame took, on to the next counter of this
    /// worker's block for its session (the key, index and endpoint stay); false,
    /// and `t` untouched, when the block is used up: take a full ticket then.
    fn advance_ticket(&mut self, t: &mut SendTicket) -> bool;

    /// Packets sent to a peer (a run of them, see `runs`): counted, and the
    /// timers told (the owner at once; a follower in its run's report).
    fn note_sent_run(&mut self, run: &SentRun, now: Instant);

    /// Authenticated packets arrived on one of our sessions, their counters
    /// committed: counted, a responder's new session confirmed, the timers told,
    /// the endpoint moved (the owner at once; a follower in its run's report).
    fn note_received_run(&mut self, run: &ReceivedRun, now: Instant);

    /// The data path sent a packet to `peer` (`plaintext_len` 0 is a keepalive).
    fn note_sent(&mut self, peer: PeerId, plaintext_len: usize, wire_len: usize, now: Instant) {
        self.note_sent_run(&SentRun::one(peer, plaintext_len, wire_len), now);
    }

    /// After the tag verified: checks the inner source against the peer's allowed
    /// IPs and commits the counter in the session's window, then notes the packet
    /// as a run of one (`note_received_run`: the owner confirms a responder's
    /// session, runs the timers and moves the endpoint; a follower reports it).
    /// `inner_src` is `None` for a keepalive. Nothing changes when it returns an
    /// error.
    fn recv_commit(
        &mut self,
        t: &RecvTicket,
        counter: u64,
        inner_src: Option<IpAddr>,
        wire_len: usize,
        src: SocketAddr,
        now: Instant,
    ) -> Result<(), DropReason> {
        commit_on(self.allowed_ips(), t, self.session(t)?, counter, inner_src)?;
        self.note_received_run(
            &ReceivedRun::one(t, inner_src.is_some(), wire_len, src),
            now,
        );
        Ok(())
    }

    /// Finds the session for a data packet and checks its counter, changing nothing.
    fn recv_ticket(
        &self,
        receiver_index: u32,
        counter: u64,
        now: Instant,
    ) -> Result<RecvTicket, DropReason> {
        let (peer, k) = self.session_by_index(receiver_index)?;
        recv_ticket_on(peer, k, counter, now)
    }

    /// The peer whose allowed IPs hold `dst` (longest prefix).
    fn peer_for_destination(&self, dst: IpAddr) -> Option<PeerId> {
        self.allowed_ips().lookup(dst)
    }

    /// Is `inner_src` one of the allowed IPs of the peer `t` names? The check a
    /// decrypted packet passes before its counter is committed.
    fn source_allowed(&self, t: &RecvTicket, inner_src: IpAddr) -> bool {
        self.allowed_ips().lookup(inner_src) == Some(t.peer)
    }

    /// Commits, in order, the counters of packets on `t`'s session whose tags
    /// verified: `accepted[i]` says whether `counters[i]` was taken (see
    /// [`crate::replay::ReplayWindow::commit_all`]). `UnknownIndex`, and nothing
    /// taken, when the session is gone. It checks no source: the caller has
    /// passed each packet through [`source_allowed`](Self::source_allowed) first.
    fn commit_counters(
        &self,
        t: &RecvTicket,
        counters: &[u64],
        accepted: &mut [bool],
    ) -> Result<(), DropReason> {
        self.session(t)?.replay.commit_all(counters, accepted);
        Ok(())
    }

    /// The session for packets with `receiver_index`, to take their tickets on.
    fn recv_run(&self, receiver_index: u32) -> Result<RecvRun, DropReason> {
        RecvRun::found(receiver_index, self.session_by_index(receiver_index))
    }

    /// `peer`'s current session if its serial is `serial` (a ticket's): what the
    /// data path holds while the packets sealed on it wait for their driver (the
    /// late check).
    fn ticket_session(&self, peer: PeerId, serial: u64) -> Option<Arc<Keypair>> {
        self.sending_session(peer)
            .filter(|k| k.serial == serial)
            .cloned()
    }
}
