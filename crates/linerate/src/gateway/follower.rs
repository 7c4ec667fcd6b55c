//! A gateway worker other than the WireGuard device's owner: its own queue of each
//! port and its own graph following the owner's device (one tunnel on every worker,
//! see `dataplane::wg_follow`). What the owner changes for every worker (routes and
//! the tunnel's port and MTU on a reload or a `wg set`) and asks of them (what they
//! counted, their report of the tunnel's traffic) comes over a channel with an
//! eventfd wake-up, never through a lock.

use super::lane::{Lane, LaneSnapshot, NEIGHBOR_TICK};
use super::reload::Changes;
use io::Waker;
use runtime::follower_thread::FollowerThread;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{Receiver, SyncSender};
use std::time::Instant;

/// What the owner sends a follower.
pub enum LaneControl {
    /// What it counted, please.
    Snapshot(SyncSender<LaneSnapshot>),
    /// Send the owner what this worker's traffic told so far, then answer.
    Report(SyncSender<()>),
    /// A reload's routes and tunnel settings (the peers are the owner's).
    Reload(Changes, SyncSender<String>),
    /// The tunnel's UDP port and inner MTU, after a `wg set`.
    Tunnel { listen_port: u16, mtu: usize },
    /// An ESP SA added or removed (the owner applied it already).
    Esp(
        dataplane::esp::EspChange,
        SyncSender<Result<String, String>>,
    ),
    /// OpenVPN clients or keys added or removed, in order (the owner applied
    /// them already); the answer lists the refusals.
    Ovpn(Vec<dataplane::ovpn::OvpnChange>, SyncSender<Vec<String>>),
}

/// The owner's hold on a follower.
pub type FollowerHandle = FollowerThread<LaneControl>;

/// What the owner asks of a follower, each a request and its bounded wait.
pub trait LaneRequests {
    /// What it counted; `None` if no answer came.
    fn snapshot(&self) -> Option<LaneSnapshot>;
    /// Has the follower send its report of its traffic so far; false if it did not
    /// answer in time.
    fn report(&self) -> bool;
    /// Applies an ESP change there; its result, or `None` if no answer came.
    fn esp(&self, change: dataplane::esp::EspChange) -> Option<Result<String, String>>;
    /// Applies a reload's changes there; what was done, or `None` if no answer came.
    fn reload(&self, changes: Changes) -> Option<String>;
    /// Applies OpenVPN changes there, in order; the refusals, or `None` if no
    /// answer came.
    fn ovpn(&self, changes: Vec<dataplane::ovpn::OvpnChange>) -> Option<Vec<String>>;
}

impl LaneRequests for FollowerHandle {
    fn snapshot(&self) -> Option<LaneSnapshot> {
        self.ask(LaneControl::Snapshot)
    }

    fn report(&self) -> bool {
        self.ask(LaneControl::Report).is_some()
    }

    fn esp(&self, change: dataplane::esp::EspChange) -> Option<Result<String, String>> {
        self.ask(|tx| LaneControl::Esp(change, tx))
    }

    fn reload(&self, changes: Changes) -> Option<String> {
        self.ask(|tx| LaneControl::Reload(changes, tx))
    }

    fn ovpn(&self, changes: Vec<dataplane::ovpn::OvpnChange>) -> Option<Vec<String>> {
        self.ask(|tx| LaneControl::Ovpn(changes, tx))
    }
}

/// Starts `lane` as a follower on its own thread (pinned to `core` if given), woken
/// by `waker`. Setting `stop` ends it; so does an error, which it reports and passes
/// on by setting `stop` and waking the owner (`owner`).
pub fn spawn(
    lane: Lane,
    core: Option<usize>,
    waker: Arc<Waker>,
    stop: Arc<AtomicBool>,
    owner: Arc<Waker>,
) -> Result<FollowerHandle, String> {
    FollowerThread::spawn(lane.index, waker, stop, owner, move || {
        core.map_or(Ok(()), io::affinity::pin_to)?;
        let mut lane = lane;
        Ok(move |control: &Receiver<LaneControl>, waker: &Waker| step(&mut lane, control, waker))
    })
}

/// One turn of the follower's loop: frames in and out, and the owner's requests
/// when it woke us; `Break` with why the follower stops.
fn step(
    lane: &mut Lane,
    control: &Receiver<LaneControl>,
    waker: &Waker,
) -> ControlFlow<Option<String>> {
    match lane.receive(waker, NEIGHBOR_TICK) {
        Ok(true) => {
            waker.drain();
            while let Ok(c) = control.try_recv() {
                obey(lane, c);
            }
        }
        Ok(false) => {}
        Err(e) => return ControlFlow::Break(Some(e)),
    }
    // Also when idle: the device's new view is picked up and the report sent.
    lane.finish();
    ControlFlow::Continue(())
}

fn obey(lane: &mut Lane, c: LaneControl) {
    match c {
        LaneControl::Snapshot(reply) => {
            let _ = reply.send(lane.snapshot());
        }
        LaneControl::Report(reply) => {
            lane.gw.run(Instant::now());
            let _ = reply.send(());
        }
        LaneControl::Reload(changes, reply) => {
            let text = changes.apply(&mut lane.gw, Instant::now());
            lane.transmit();
            let _ = reply.send(text);
        }
        LaneControl::Tunnel { listen_port, mtu } => lane.gw.set_wireguard(listen_port, mtu),
        LaneControl::Esp(change, reply) => {
            let _ = reply.send(change.apply(lane.gw.esp_mut()).map_err(|e| e.to_string()));
        }
        LaneControl::Ovpn(changes, reply) => {
            let table = lane.gw.ovpn_mut();
            let refused = changes
                .iter()
                .filter_map(|c| table.apply(c).err().map(|e| e.to_string()))
                .collect();
            let _ = reply.send(refused);
        }
    }
}
