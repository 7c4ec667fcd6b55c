//! What the gateway's control threads (the key exchange, the OpenVPN servers)
//! share: handing a step's work to the owner worker and waiting, bounded, for
//! its answer; and the recent log lines `show` prints.

use std::collections::VecDeque;
use std::sync::mpsc::{RecvTimeoutError, SyncSender, sync_channel};
use std::time::Duration;

/// How long a step waits for the owner worker to carry out its work.
const WORKER_ANSWER: Duration = Duration::from_secs(5);
/// The log lines a control thread's `show` keeps.
const RECENT: usize = 32;

/// How a control thread hands the owner worker one step's work: false when the
/// owner is gone.
pub type ToWorker<W> = Box<dyn Fn(W, SyncSender<String>) -> bool + Send>;

/// Hands `work` to the owner worker and logs each line of its answer (what it
/// refused) with `log`; false when the owner is gone, and the thread should end.
pub fn hand_over<W>(to_worker: &ToWorker<W>, work: W, log: &mut dyn FnMut(String)) -> bool {
    let (tx, rx) = sync_channel(1);
    if !to_worker(work, tx) {
        return false;
    }
    match rx.recv_timeout(WORKER_ANSWER) {
        Ok(text) => {
            for line in text.lines().filter(|l| !l.is_empty()) {
                log(line.to_string());
            }
            true
        }
        Err(RecvTimeoutError::Timeout) => {
            log("the owner worker did not answer in time".into());
            true
        }
        Err(RecvTimeoutError::Disconnected) => false,
    }
}

/// Says `line` on stderr, prefixed with the thread's name, and keeps it among
/// the last lines `show` prints.
pub fn remember(recent: &mut VecDeque<String>, thread: &str, line: String) {
    eprintln!("linerate: {thread}: {line}");
    if recent.len() == RECENT {
        recent.pop_front();
    }
    recent.push_back(line);
}
