//! One tunnel on every worker, in the graph: a worker that does not own the
//! WireGuard device follows it (`wireguard::Follower`: the device's sessions, shared)
//! and sends its owner, once per run, a report: what the device must learn from the
//! run's traffic, and the packets only the owner can handle (handshake messages, and
//! packets for a peer that has no session yet, which wait in the owner's staging
//! queue). The owner takes the reports in after each pass of its graph, and
//! publishes the device's view when the run is done.
//!
//! The report goes through a bounded channel, never a lock. When the channel is
//! full, the follower keeps the report and folds the next run's into it, so no count
//! is lost; the packets it carries are bounded (see [`MAX_HANDED_OVER`]).

use std::net::SocketAddr;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use wireguard::{Activity, Follower, PeerId};

/// Reports waiting for the owner; a follower that finds the channel full folds its
/// reports together until there is room.
const REPORTS_IN_FLIGHT: usize = 64;

/// Packets a follower hands over in one report, at most (the owner's staging queue
/// holds fewer per peer anyway); more are dropped and counted as `staged-overflow`.
pub const MAX_HANDED_OVER: usize = 256;

/// What a follower sends its owner: see the module doc.
#[derive(Default)]
pub struct Report {
    pub activity: Activity,
    /// Inner packets for a peer without a session, for the owner's wg-encrypt.
    pub waiting: Vec<(PeerId, Vec<u8>)>,
    /// Handshake messages and cookie replies, with their source, for the owner's
    /// wg-input.
    pub handshakes: Vec<(SocketAddr, Vec<u8>)>,
}

impl Report {
    fn is_empty(&self) -> bool {
        self.activity.is_empty() && self.waiting.is_empty() && self.handshakes.is_empty()
    }

    fn packets(&self) -> usize {
        self.waiting.len() + self.handshakes.len()
    }

    fn fold(&mut self, later: Report) {
        self.activity.merge(later.activity);
        self.waiting.extend(later.waiting);
        self.handshakes.extend(later.handshakes);
    }
}

/// A follower's side: the shared sessions and the way to its owner.
pub struct FollowerLink {
    pub(crate) follower: Follower,
    to_owner: SyncSender<Report>,
    /// This run's packets for the owner.
    report: Report,
    /// A report the owner had no room for yet.
    unsent: Option<Report>,
    /// Wakes the owner when a report carries packets (a handshake should not wait
    /// for the owner's next timer), or finds the owner's inbox full.
    nudge: Option<Box<dyn Fn() + Send>>,
}

/// The owner's side: where followers' reports arrive.
pub struct OwnerInbox {
    from_followers: Receiver<Report>,
}

/// A follower of the view published in `cell` (a device's `view_cell`) and the inbox
/// its owner reads. Make one per follower worker: the link goes to the follower's
/// context ([`crate::Context::follow_wg_device`]), the inbox to the owner's
/// ([`crate::Context::lead_wg_follower`], which takes one per follower).
pub fn link(cell: std::sync::Arc<wireguard::ViewCell>) -> (FollowerLink, OwnerInbox) {
    let (tx, rx) = sync_channel(REPORTS_IN_FLIGHT);
    (
        FollowerLink {
            follower: Follower::new(cell),
            to_owner: tx,
            report: Report::default(),
            unsent: None,
            nudge: None,
        },
        OwnerInbox { from_followers: rx },
    )
}

impl FollowerLink {
    /// Calls `wake` after sending a report that carries packets for the owner.
    pub fn set_nudge(&mut self, wake: impl Fn() + Send + 'static) {
        self.nudge = Some(Box::new(wake));
    }

    /// Room for one more packet for the owner in this run?
    pub(crate) fn can_hand_over(&self) -> bool {
        self.report.packets() + self.unsent.as_ref().map_or(0, Report::packets) < MAX_HANDED_OVER
    }

    /// An inner packet for `peer`, which has no session here yet.
    pub(crate) fn hand_over_waiting(&mut self, peer: PeerId, packet: &[u8]) {
        self.report.waiting.push((peer, packet.to_vec()));
    }

    /// A handshake message (or cookie reply) from `src`.
    pub(crate) fn hand_over_handshake(&mut self, src: SocketAddr, packet: &[u8]) {
        self.report.handshakes.push((src, packet.to_vec()));
    }

    /// The start of a run: the device's newest view.
    pub(crate) fn begin_run(&mut self) {
        self.follower.refresh();
    }

    /// The end of a run: the report goes to the owner (or waits, folded, for room).
    pub(crate) fn end_run(&mut self) {
        let mut report = std::mem::take(&mut self.report);
        report.activity = self.follower.end_run();
        if let Some(mut earlier) = self.unsent.take() {
            earlier.fold(report);
            report = earlier;
        }
        if report.is_empty() {
            return;
        }
        let urgent = report.packets() > 0;
        match self.to_owner.try_send(report) {
            Ok(()) => {
                if let Some(wake) = self.nudge.as_ref().filter(|_| urgent) {
                    wake();
                }
            }
            Err(TrySendError::Full(r)) => {
                // The owner is behind (asleep, its own sockets quiet): wake it to
                // take the reports in; this one goes with the next run's.
                self.unsent = Some(r);
                if let Some(wake) = self.nudge.as_ref() {
                    wake();
                }
            }
            // The owner is gone (shutting down): nothing is left to tell.
            Err(TrySendError::Disconnected(_)) => {}
        }
    }
}

impl OwnerInbox {
    /// The next report waiting, if any.
    pub(crate) fn next(&self) -> Option<Report> {
        // Empty, or every follower gone: nothing to take in either way.
        self.from_followers.try_recv().ok()
    }
}
