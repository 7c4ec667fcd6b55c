//! The device's side of one tunnel on every worker (see [`crate::datapath`]): it
//! publishes the data path's view after a change, and takes in what the followers
//! report.

use super::Device;
use crate::datapath::{Activity, PeerPath, View, ViewCell};
use crate::runs::{ReceivedRun, SentRun};
use crate::session::SessionPath;
use std::sync::Arc;
use std::time::Instant;

/// What the device keeps to publish its view.
#[derive(Default)]
pub(super) struct Publisher {
    cell: Arc<ViewCell>,
    /// Something the view shows changed since it was last published.
    dirty: bool,
    /// The allowed IPs changed too (they are rebuilt by every follower, so they are
    /// published only when they change).
    allowed_ips_dirty: bool,
    allowed_ips_generation: u64,
    allowed_ips: Arc<Vec<(crate::Prefix, crate::PeerId)>>,
}

impl Device {
    /// Where followers pick up this device's view.
    pub fn view_cell(&self) -> Arc<ViewCell> {
        self.publisher.cell.clone()
    }

    /// Something the data path's view shows changed.
    pub(super) fn view_changed(&mut self) {
        self.publisher.dirty = true;
    }

    /// The allowed IPs changed.
    pub(super) fn allowed_ips_changed(&mut self) {
        self.publisher.dirty = true;
        self.publisher.allowed_ips_dirty = true;
    }

    /// Publishes the view if anything in it changed; the owner calls it after every
    /// run and every change of configuration. Costs a flag test otherwise.
    pub fn publish(&mut self) {
        if !self.publisher.dirty {
            return;
        }
        let ids = self.peer_ids();
        if self.publisher.allowed_ips_dirty {
            let mut list = Vec::new();
            for &id in &ids {
                list.extend(
                    self.allowed_ips
                        .prefixes_of(id)
                        .into_iter()
                        .map(|p| (p, id)),
                );
            }
            self.publisher.allowed_ips = Arc::new(list);
            self.publisher.allowed_ips_generation += 1;
            self.publisher.allowed_ips_dirty = false;
        }
        let mut view = View {
            peers: vec![None; self.peers.len()],
            allowed_ips: self.publisher.allowed_ips.clone(),
            allowed_ips_generation: self.publisher.allowed_ips_generation,
            ..View::default()
        };
        for id in ids {
            let Some(p) = self.peer(id) else { continue };
            view.peers[id.0 as usize] = Some(PeerPath {
                current: p.keypairs.current.clone(),
                endpoint: p.endpoint,
            });
            for k in p.keypairs.all() {
                view.sessions.insert(k.local_index, (id, k.clone()));
            }
        }
        self.publisher.cell.publish(view);
        self.publisher.dirty = false;
    }

    /// Takes in a follower's report of one run: bytes, the timers' events, the
    /// endpoint, sessions confirmed by data, handshakes asked for. A report keeps
    /// no order between what was sent and what was received: its sends are told
    /// first, as if the run had ended on received data.
    pub fn apply_activity(&mut self, activity: &Activity, now: Instant) {
        for a in &activity.peers {
            let Some(id) = a.peer.filter(|&id| self.peer(id).is_some()) else {
                continue;
            };
            if a.sent_packets > 0 {
                let run = SentRun {
                    peer: id,
                    packets: a.sent_packets,
                    data: a.sent_data,
                    bytes: a.sent_bytes,
                };
                self.note_sent_run(&run, now);
            }
            if let Some(src) = a.received_from {
                // The bytes and the data events once, with the first session.
                for (i, &local_index) in a.received_on.iter().enumerate() {
                    let first = i == 0;
                    let run = ReceivedRun {
                        peer: id,
                        local_index,
                        src,
                        packets: if first { a.received_packets } else { 0 },
                        data: if first { a.received_data } else { 0 },
                        bytes: if first { a.received_bytes } else { 0 },
                    };
                    self.note_received_run(&run, now);
                }
            }
            if a.wants_session {
                self.initiate(id, false, now);
            }
        }
    }
}
