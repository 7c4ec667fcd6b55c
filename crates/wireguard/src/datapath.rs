//! One tunnel on every worker: what a worker that does not own the device needs to
//! encrypt and decrypt for the device's peers, and what it reports back.
//!
//! The device stays with one worker (its owner: handshakes, timers, configuration).
//! After every change that matters to the data path (a session made, confirmed or
//! dropped, an endpoint moved, a peer or an allowed IP added or removed) the device
//! publishes a [`View`]: each peer's sending session and endpoint, every live session
//! by receiver index, and the allowed IPs. The sessions in it are the device's own
//! keypairs, shared: their send counters and replay windows are atomics, so a
//! [`Follower`] takes counters (in blocks, per worker) and commits received counters
//! without a lock, and no counter is used twice whichever worker sends.
//!
//! A follower sees a new view at the start of its next run: the device bumps a
//! generation number, and only a follower that sees it changed takes the short lock
//! that hands the new view over; the packet path itself takes none. What the device
//! must learn from the data path (bytes, the timers' events, the endpoint a peer
//! sends from, a responder's session confirmed by data) the follower gathers per run
//! in an [`Activity`] report, which the owner hands to [`Device::apply_activity`].
//!
//! [`Device::apply_activity`]: crate::Device::apply_activity

use crate::allowed_ips::{AllowedIps, Prefix};
use crate::drop::DropReason;
use crate::index_hash::IndexMap;
use crate::keypair::Keypair;
use crate::peer_id::PeerId;
use crate::runs::{ReceivedRun, SentRun};
use crate::session::{RecvTicket, SendError, SendTicket, SessionPath, advance};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Send counters a worker takes at once for a session. Counters of a block left over
/// at the end of a run are never used (the receiver sees a gap, which costs nothing),
/// so that no worker holds old counters while the others move on: a worker's packets
/// are never further behind the newest than one run, far inside the replay window.
/// 256 counters are one cache line of the receiver's replay window, so workers that
/// also decrypt what they send do not share lines there.
pub const COUNTER_BLOCK: u64 = 256;

/// A peer as the data path sees it.
#[derive(Clone, Default)]
pub struct PeerPath {
    pub(crate) current: Option<Arc<Keypair>>,
    pub(crate) endpoint: Option<SocketAddr>,
}

/// What the device published: see the module doc.
#[derive(Clone, Default)]
pub struct View {
    /// By `PeerId.0`.
    pub(crate) peers: Vec<Option<PeerPath>>,
    /// Every live session (next, current, previous) by our receiver index.
    pub(crate) sessions: IndexMap<(PeerId, Arc<Keypair>)>,
    /// Every peer's allowed IPs, and the generation they were published in: a
    /// follower rebuilds its own lookup table only when that changes.
    pub(crate) allowed_ips: Arc<Vec<(Prefix, PeerId)>>,
    pub(crate) allowed_ips_generation: u64,
}

/// Where the device publishes its view and followers pick it up.
#[derive(Default)]
pub struct ViewCell {
    generation: AtomicU64,
    view: Mutex<Arc<View>>,
}

impl ViewCell {
    pub(crate) fn publish(&self, view: View) {
        // A poisoned lock only means a follower panicked while cloning an Arc; the
        // view behind it is whole.
        let mut slot = self.view.lock().unwrap_or_else(|e| e.into_inner());
        *slot = Arc::new(view);
        self.generation.fetch_add(1, Ordering::Release);
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    fn load(&self) -> (u64, Arc<View>) {
        let slot = self.view.lock().unwrap_or_else(|e| e.into_inner());
        (self.generation(), slot.clone())
    }
}

/// What one peer's traffic on a follower told during a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PeerActivity {
    pub peer: Option<PeerId>,
    pub sent_packets: u64,
    /// Sent packets that carried data (not keepalives).
    pub sent_data: u64,
    pub sent_bytes: u64,
    pub received_packets: u64,
    pub received_data: u64,
    pub received_bytes: u64,
    /// The receiver indices data arrived on (a session and its successor, at most).
    pub received_on: Vec<u32>,
    /// Where the newest authenticated packet came from.
    pub received_from: Option<SocketAddr>,
    /// A packet found no session: the device should start a handshake.
    pub wants_session: bool,
}

/// A follower's report for one run, for [`crate::Device::apply_activity`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Activity {
    pub peers: Vec<PeerActivity>,
}

impl Activity {
    pub fn is_empty(&self) -> bool {
        self.peers.is_empty()
    }

    /// Adds a later report to this one.
    pub fn merge(&mut self, later: Activity) {
        for b in later.peers {
            let Some(peer) = b.peer else { continue };
            let a = self.of(peer);
            a.sent_packets += b.sent_packets;
            a.sent_data += b.sent_data;
            a.sent_bytes += b.sent_bytes;
            a.received_packets += b.received_packets;
            a.received_data += b.received_data;
            a.received_bytes += b.received_bytes;
            for index in b.received_on {
                if !a.received_on.contains(&index) {
                    a.received_on.push(index);
                }
            }
            a.received_from = b.received_from.or(a.received_from);
            a.wants_session |= b.wants_session;
        }
    }

    fn of(&mut self, peer: PeerId) -> &mut PeerActivity {
        // Few peers are active in one run; a linear search beats a map here.
        match self.peers.iter().position(|a| a.peer == Some(peer)) {
            Some(i) => &mut self.peers[i],
            None => {
                self.peers.push(PeerActivity {
                    peer: Some(peer),
                    ..PeerActivity::default()
                });
                self.peers.last_mut().expect("just pushed")
            }
        }
    }
}

/// A block of send counters taken for one session.
struct CounterBlock {
    /// The session's [`Keypair::serial`].
    serial: u64,
    next: u64,
    end: u64,
}

/// The blocks of send counters one worker holds, one per session it sends on; the
/// device's owner and every follower keep one each.
#[derive(Default)]
pub struct CounterBlocks {
    blocks: Vec<CounterBlock>,
}

impl CounterBlocks {
    /// The next counter for `k`, from this worker's block, taking a new block when
    /// it is used up; `None` once the session may send no more.
    pub fn take(&mut self, k: &Keypair) -> Option<u64> {
        let block = match self.blocks.iter_mut().find(|b| b.serial == k.serial) {
            Some(b) if b.next < b.end => b,
            found => {
                // Near the end of a session's counters, one at a time.
                let (first, n) = match k.take_counters(COUNTER_BLOCK) {
                    Some(first) => (first, COUNTER_BLOCK),
                    None => (k.take_counters(1)?, 1),
                };
                let fresh = CounterBlock {
                    serial: k.serial,
                    next: first,
                    end: first + n,
                };
                match found {
                    Some(b) => {
                        *b = fresh;
                        b
                    }
                    None => {
                        self.blocks.push(fresh);
                        self.blocks.last_mut().expect("just pushed")
                    }
                }
            }
        };
        let counter = block.next;
        block.next += 1;
        Some(counter)
    }

    /// The next counter of this worker's block for the session with `serial`, if it
    /// holds one with counters left; a session's first counter, and a fresh block,
    /// come from [`CounterBlocks::take`].
    pub fn next_of(&mut self, serial: u64) -> Option<u64> {
        let block = self
            .blocks
            .iter_mut()
            .find(|b| b.serial == serial && b.next < b.end)?;
        let counter = block.next;
        block.next += 1;
        Some(counter)
    }

    /// Lets go of every block (the end of a run, or a new view).
    pub fn clear(&mut self) {
        self.blocks.clear();
    }
}

/// A worker's side of the device: see the module doc.
pub struct Follower {
    cell: Arc<ViewCell>,
    generation: u64,
    view: Arc<View>,
    allowed_ips: AllowedIps<PeerId>,
    allowed_ips_generation: u64,
    blocks: CounterBlocks,
    activity: Activity,
}

impl Follower {
    pub fn new(cell: Arc<ViewCell>) -> Follower {
        let mut f = Follower {
            cell,
            generation: u64::MAX,
            view: Arc::default(),
            allowed_ips: AllowedIps::new(),
            allowed_ips_generation: u64::MAX,
            blocks: CounterBlocks::default(),
            activity: Activity::default(),
        };
        f.refresh();
        f
    }

    /// Picks up the newest view if the device published one; once per run.
    pub fn refresh(&mut self) {
        if self.cell.generation() == self.generation {
            return;
        }
        let (generation, view) = self.cell.load();
        if view.allowed_ips_generation != self.allowed_ips_generation {
            let mut table = AllowedIps::new();
            for &(prefix, peer) in view.allowed_ips.iter() {
                table.insert(prefix, peer);
            }
            self.allowed_ips = table;
            self.allowed_ips_generation = view.allowed_ips_generation;
        }
        self.generation = generation;
        self.view = view;
        // Blocks of a session that left the view must not be used again.
        self.blocks.clear();
    }

    /// Ends a run: counters left in blocks are let go (see [`COUNTER_BLOCK`]) and the
    /// run's report is handed out.
    pub fn end_run(&mut self) -> Activity {
        self.blocks.clear();
        std::mem::take(&mut self.activity)
    }

    /// The data path sent a run of packets to one peer (see `runs`).
    fn report_sent_run(&mut self, run: &SentRun) {
        let a = self.activity.of(run.peer);
        a.sent_packets += run.packets;
        a.sent_data += run.data;
        a.sent_bytes += run.bytes;
    }

    /// Authenticated packets arrived, their counters committed (see `runs`): the
    /// run's report tells the device.
    fn report_received_run(&mut self, run: &ReceivedRun) {
        let a = self.activity.of(run.peer);
        a.received_packets += run.packets;
        a.received_data += run.data;
        a.received_bytes += run.bytes;
        a.received_from = Some(run.src);
        if !a.received_on.contains(&run.local_index) {
            a.received_on.push(run.local_index);
        }
    }

    /// This worker's blocks of send counters.
    pub(crate) fn blocks_mut(&mut self) -> &mut CounterBlocks {
        &mut self.blocks
    }
}

/// The follower's side of the data path's one interface: the published view's
/// sessions and allowed IPs, its own counter blocks, and what it learns gathered
/// in its run's report for the owner.
impl SessionPath for Follower {
    fn allowed_ips(&self) -> &AllowedIps<PeerId> {
        &self.allowed_ips
    }

    /// The peer and session the view has for our index `local_index`.
    fn session_by_index(&self, local_index: u32) -> Result<(PeerId, &Arc<Keypair>), DropReason> {
        let (peer, k) = self
            .view
            .sessions
            .get(&local_index)
            .ok_or(DropReason::UnknownIndex)?;
        Ok((*peer, k))
    }

    /// The session a receive ticket names, if the view still has it.
    fn session(&self, t: &RecvTicket) -> Result<&Keypair, DropReason> {
        let (_, k) = self.session_by_index(t.local_index)?;
        Ok(k)
    }

    /// `peer`'s current session, as the view has it.
    fn sending_session(&self, peer: PeerId) -> Option<&Arc<Keypair>> {
        self.view
            .peers
            .get(peer.0 as usize)?
            .as_ref()?
            .current
            .as_ref()
    }

    /// Counter and key for one packet to `peer`. On `NoSession` the caller hands the
    /// packet to the device's owner to wait for a session.
    fn send_ticket(&mut self, peer: PeerId, now: Instant) -> Result<SendTicket, SendError> {
        let Some(p) = self
            .view
            .peers
            .get(peer.0 as usize)
            .and_then(Option::as_ref)
        else {
            return Err(SendError::NoSession);
        };
        let endpoint = p.endpoint.ok_or(SendError::NoEndpoint)?;
        let Some(k) = p.current.as_ref().filter(|k| now < k.reject_at) else {
            self.activity.of(peer).wants_session = true;
            return Err(SendError::NoSession);
        };
        let Some(counter) = self.blocks.take(k) else {
            self.activity.of(peer).wants_session = true;
            return Err(SendError::NoSession);
        };
        Ok(SendTicket::on(k, counter, endpoint))
    }

    /// As the owner's, from this worker's blocks.
    fn advance_ticket(&mut self, t: &mut SendTicket) -> bool {
        advance(self.blocks_mut().next_of(t.serial), t)
    }

    /// Gathered in the run's report: the owner tells its timers (`end_run`).
    fn note_sent_run(&mut self, run: &SentRun, _now: Instant) {
        self.report_sent_run(run);
    }

    /// Gathered in the run's report: the owner confirms sessions, tells its timers
    /// and moves endpoints (`end_run`).
    fn note_received_run(&mut self, run: &ReceivedRun, _now: Instant) {
        self.report_received_run(run);
    }
}
