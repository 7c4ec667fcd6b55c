//! A host-mode worker other than the device's owner: its own TUN queue, its own UDP
//! socket on the shared port, its own graph following the owner's device (one tunnel
//! on every worker, see `dataplane::wg_follow`). What the owner changes for every
//! worker (the socket after a listen-port change, the MTU) and asks of them (their
//! counters) comes over a channel with an eventfd wake-up, never through a lock.

use super::path::HostPath;
use crate::control::counter_report::CounterReport;
use io::{Interest, PollFd, UdpSocket, Waker};
use runtime::follower_thread::FollowerThread;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{Receiver, SyncSender};
use std::time::{Duration, Instant};

/// Longest sleep between two looks at the stop flag.
const MAX_SLEEP: Duration = Duration::from_millis(500);

/// What the owner sends a follower.
pub enum FollowerControl {
    /// The socket to use from now on (the listen port changed).
    Socket(UdpSocket),
    /// The interface's MTU, which bounds the padding.
    Mtu(usize),
    /// Its counters, please.
    Counters(SyncSender<CounterReport>),
    /// Send the owner what this worker's traffic told so far, then answer.
    Report(SyncSender<()>),
}

/// The owner's hold on a follower.
pub struct FollowerHandle {
    thread: FollowerThread<FollowerControl>,
    /// The follower's socket, through another descriptor: options set on it apply to
    /// the follower's socket too.
    pub udp: UdpSocket,
}

impl FollowerHandle {
    /// Sends `c` and wakes the follower; false when it is gone.
    pub fn send(&self, c: FollowerControl) -> bool {
        self.thread.send(c)
    }

    /// The follower's counters (`None` if it did not answer in time).
    pub fn counters(&self) -> Option<CounterReport> {
        self.thread.ask(FollowerControl::Counters)
    }

    /// Has the follower send its report of its traffic so far; false if it did not
    /// answer in time.
    pub fn report(&self) -> bool {
        self.thread.ask(FollowerControl::Report).is_some()
    }

    /// Waits for the follower to end (after the stop flag was set).
    pub fn join(&mut self) {
        self.thread.join();
    }
}

/// Starts follower `index` on its own thread, woken by `waker`. Setting `stop` ends
/// it; so does its TUN queue going away, or an error reading it, which it reports
/// and passes on by setting `stop` and waking the owner (`owner`).
pub fn spawn(
    index: usize,
    path: HostPath,
    waker: Arc<Waker>,
    stop: Arc<AtomicBool>,
    owner: Arc<Waker>,
) -> Result<FollowerHandle, String> {
    let udp = path
        .udp
        .socket
        .duplicate()
        .map_err(|e| format!("worker {index}: {e}"))?;
    let thread = FollowerThread::spawn(index, waker, stop, owner, move || {
        let mut path = path;
        Ok(move |control: &Receiver<FollowerControl>, waker: &Waker| {
            step(&mut path, control, waker)
        })
    })?;
    Ok(FollowerHandle { thread, udp })
}

/// One turn of the follower's loop: packets from the TUN and the socket, and
/// the owner's requests when it woke us; `Break` with why the follower stops
/// (`None` when its TUN queue went away, which the owner sees too).
fn step(
    path: &mut HostPath,
    control: &Receiver<FollowerControl>,
    waker: &Waker,
) -> ControlFlow<Option<String>> {
    let mut fds = [
        PollFd::new(path.tun.device.as_raw_fd(), Interest::READABLE),
        PollFd::new(path.udp.socket.as_raw_fd(), Interest::READABLE),
        PollFd::new(waker.as_raw_fd(), Interest::READABLE),
    ];
    let sleep = path.wg.context_mut().helper_sleep(MAX_SLEEP);
    if let Err(e) = io::poll(&mut fds, Some(sleep)) {
        return ControlFlow::Break(Some(format!("poll: {e}")));
    }
    if fds[1].readable() {
        path.read_udp();
    }
    if (fds[0].readable() || fds[0].error())
        && let Err(e) = path.read_tun()
    {
        if io::is_gone(&e) {
            return ControlFlow::Break(None); // the owner sees the interface go too
        }
        return ControlFlow::Break(Some(format!("reading the TUN: {e}")));
    }
    if fds[2].readable() {
        waker.drain();
        while let Ok(c) = control.try_recv() {
            match c {
                FollowerControl::Socket(udp) => path.udp.socket = udp,
                FollowerControl::Mtu(mtu) => path.wg.set_mtu(mtu),
                FollowerControl::Counters(reply) => {
                    let _ = reply.send(path.counter_report());
                }
                FollowerControl::Report(reply) => {
                    path.run(Instant::now());
                    let _ = reply.send(());
                }
            }
        }
    }
    // Also when idle: the device's new view is picked up and the report sent.
    path.run(Instant::now());
    path.wg.context_mut().help_others();
    ControlFlow::Continue(())
}
