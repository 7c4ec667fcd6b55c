//! A worker other than the owner, as the owner holds it (host mode's and the
//! gateway's alike): its thread, the channel the owner sends it control messages
//! of type `C` on, and the eventfd that wakes it to read them. Requests that want
//! an answer carry a one-slot channel back, waited on for a bounded time.

use io::Waker;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long the owner waits for a follower's answer.
const ANSWER_WAIT: Duration = Duration::from_secs(1);

pub struct FollowerThread<C> {
    pub index: usize,
    control: Sender<C>,
    waker: Arc<Waker>,
    thread: Option<JoinHandle<()>>,
}

impl<C: Send + 'static> FollowerThread<C> {
    /// Starts follower `index` on its own thread, woken by `waker`. On the
    /// thread, `start` makes the follower's loop step (or says why it cannot
    /// start), and the step runs, on the control channel's receiving end, until
    /// `stop` is set or the step breaks: quietly (`None`: what it serves went away)
    /// or with why, which is reported. Either way `stop` is then set and the
    /// owner (`owner`) woken, so one worker's failure stops them all.
    pub fn spawn<S>(
        index: usize,
        waker: Arc<Waker>,
        stop: Arc<AtomicBool>,
        owner: Arc<Waker>,
        start: impl FnOnce() -> Result<S, String> + Send + 'static,
    ) -> Result<FollowerThread<C>, String>
    where
        S: FnMut(&Receiver<C>, &Waker) -> ControlFlow<Option<String>>,
    {
        let (tx, rx) = mpsc::channel();
        let thread_waker = waker.clone();
        let thread = std::thread::Builder::new()
            .name(format!("worker-{index}"))
            .spawn(move || {
                let why = match start() {
                    Ok(mut step) => loop {
                        if stop.load(Ordering::Relaxed) {
                            break None;
                        }
                        if let ControlFlow::Break(why) = step(&rx, &thread_waker) {
                            break why;
                        }
                    },
                    Err(why) => Some(why),
                };
                if let Some(why) = why {
                    eprintln!("linerate: worker {index}: {why}; stopping");
                }
                stop.store(true, Ordering::Relaxed);
                let _ = owner.wake();
            })
            .map_err(|e| format!("starting worker {index}: {e}"))?;
        Ok(FollowerThread {
            index,
            control: tx,
            waker,
            thread: Some(thread),
        })
    }

    /// Sends `c` and wakes the follower; false when it is gone.
    pub fn send(&self, c: C) -> bool {
        let sent = self.control.send(c).is_ok();
        let _ = self.waker.wake();
        sent
    }

    /// Asks with `make` and waits for the answer (`None` if none came in time).
    pub fn ask<T>(&self, make: impl FnOnce(SyncSender<T>) -> C) -> Option<T> {
        let (tx, rx) = mpsc::sync_channel(1);
        if !self.send(make(tx)) {
            return None;
        }
        rx.recv_timeout(ANSWER_WAIT).ok()
    }

    /// Waits for the follower to end (after the stop flag was set).
    pub fn join(&mut self) {
        let _ = self.waker.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
