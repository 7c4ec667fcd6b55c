//! A host-mode worker other than the device's owner: its own TUN queue, its own UDP
//! socket on the shared port, its own graph following the owner's device (one tunnel
//! on every worker, see `dataplane::wg_follow`). What the owner changes for every
//! worker (the socket after a listen-port change, the MTU) and asks of them (their
//! counters) comes over a channel with an eventfd wake-up, never through a lock.

use crate::counter_report::CounterReport;
use crate::host_path::HostPath;
use io::{Interest, PollFd, UdpSocket, Waker};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Longest sleep between two looks at the stop flag.
const MAX_SLEEP: Duration = Duration::from_millis(500);
/// How long the owner waits for a follower's counters.
const COUNTERS_WAIT: Duration = Duration::from_secs(1);

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
    control: Sender<FollowerControl>,
    waker: Arc<Waker>,
    /// The follower's socket, through another descriptor: options set on it apply to
    /// the follower's socket too.
    pub udp: UdpSocket,
    thread: Option<JoinHandle<()>>,
}

impl FollowerHandle {
    /// Sends `c` and wakes the follower; false when it is gone.
    pub fn send(&self, c: FollowerControl) -> bool {
        let sent = self.control.send(c).is_ok();
        let _ = self.waker.wake();
        sent
    }

    /// The follower's counters (`None` if it did not answer in time).
    pub fn counters(&self) -> Option<CounterReport> {
        let (tx, rx) = mpsc::sync_channel(1);
        if !self.send(FollowerControl::Counters(tx)) {
            return None;
        }
        rx.recv_timeout(COUNTERS_WAIT).ok()
    }

    /// Has the follower send its report of its traffic so far; false if it did not
    /// answer in time.
    pub fn report(&self) -> bool {
        let (tx, rx) = mpsc::sync_channel(1);
        self.send(FollowerControl::Report(tx)) && rx.recv_timeout(COUNTERS_WAIT).is_ok()
    }

    /// Waits for the follower to end (after the stop flag was set).
    pub fn join(&mut self) {
        let _ = self.waker.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Starts follower `index` on its own thread, woken by `waker`. Setting `stop` ends
/// it; so does its
/// TUN queue going away, or an error reading it, which it reports and passes on by
/// setting `stop` and waking the owner (`owner`).
pub fn spawn(
    index: usize,
    path: HostPath,
    waker: Arc<Waker>,
    stop: Arc<AtomicBool>,
    owner: Arc<Waker>,
) -> Result<FollowerHandle, String> {
    let udp = path
        .udp
        .duplicate()
        .map_err(|e| format!("worker {index}: {e}"))?;
    let (tx, rx) = mpsc::channel();
    let thread_waker = waker.clone();
    let thread = std::thread::Builder::new()
        .name(format!("worker-{index}"))
        .spawn(move || {
            let why = run(path, &rx, &thread_waker, &stop);
            if let Some(why) = why {
                eprintln!("linerate: worker {index}: {why}; stopping");
            }
            stop.store(true, Ordering::Relaxed);
            let _ = owner.wake();
        })
        .map_err(|e| format!("starting worker {index}: {e}"))?;
    Ok(FollowerHandle {
        control: tx,
        waker,
        udp,
        thread: Some(thread),
    })
}

/// The follower's loop; returns why it stopped when that is not the stop flag.
fn run(
    mut path: HostPath,
    control: &Receiver<FollowerControl>,
    waker: &Waker,
    stop: &AtomicBool,
) -> Option<String> {
    loop {
        if stop.load(Ordering::Relaxed) {
            return None;
        }
        let mut fds = [
            PollFd::new(path.tun.as_raw_fd(), Interest::READABLE),
            PollFd::new(path.udp.as_raw_fd(), Interest::READABLE),
            PollFd::new(waker.as_raw_fd(), Interest::READABLE),
        ];
        let sleep = path.wg.context_mut().helper_sleep(MAX_SLEEP);
        if let Err(e) = io::poll(&mut fds, Some(sleep)) {
            return Some(format!("poll: {e}"));
        }
        if fds[1].readable() {
            path.read_udp();
        }
        if (fds[0].readable() || fds[0].error())
            && let Err(e) = path.read_tun()
        {
            if io::is_gone(&e) {
                return None; // the owner sees the interface go too
            }
            return Some(format!("reading the TUN: {e}"));
        }
        if fds[2].readable() {
            waker.drain();
            while let Ok(c) = control.try_recv() {
                match c {
                    FollowerControl::Socket(udp) => path.udp = udp,
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
    }
}
