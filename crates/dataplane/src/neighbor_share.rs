//! Neighbors heard by one worker, told to the others. Each gateway worker keeps its
//! own neighbor table, so nothing on the packet path takes a lock; but the answer to
//! one worker's ARP request or neighbor solicitation arrives on whichever queue the
//! network hashes it to, often another worker's. So after each run a worker sends
//! the others what it heard from the wire (ARP, neighbor solicitations and
//! advertisements: address, port, and how it was heard), and before each run it
//! learns what they heard, the same way as if the message had come to it. A worker
//! whose solicitation was answered on another queue thus sends its waiting packets
//! within one turn of the other worker's run.
//!
//! The news travels in one batch per run over bounded channels, never through a
//! lock. A batch is capped, and one that finds a worker's inbox full is dropped and
//! counted: that worker asks again when its entry's probe is due, so nothing waits
//! forever for lost news.

use crate::fib::PortId;
use crate::neighbor::{Heard, Mac};
use std::net::IpAddr;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};

/// What one worker heard about one neighbor.
pub type News = ((PortId, IpAddr, Mac), Heard);

/// Batches waiting in one worker's inbox, at most.
const BATCHES_IN_FLIGHT: usize = 64;
/// News one run passes on, at most (a storm of ARP requests is heard, and answered,
/// by the worker it reaches; the others learn the first of it).
pub const MAX_NEWS_PER_RUN: usize = 256;

/// One worker's end of the mesh.
pub struct NeighborShare {
    inbox: Receiver<Vec<News>>,
    others: Vec<SyncSender<Vec<News>>>,
    /// What this run heard, to send when it ends.
    heard: Vec<News>,
    /// News not passed on: past the cap of a run, or for an inbox that was full
    /// (counted once per worker it missed).
    lost: u64,
}

/// One end per worker, each connected to every other.
pub fn mesh(workers: usize) -> Vec<NeighborShare> {
    let (senders, inboxes): (Vec<_>, Vec<_>) = (0..workers)
        .map(|_| sync_channel(BATCHES_IN_FLIGHT))
        .unzip();
    inboxes
        .into_iter()
        .enumerate()
        .map(|(i, inbox)| NeighborShare {
            inbox,
            others: senders
                .iter()
                .enumerate()
                .filter(|&(j, _)| j != i)
                .map(|(_, s)| s.clone())
                .collect(),
            heard: Vec::new(),
            lost: 0,
        })
        .collect()
}

impl NeighborShare {
    /// Notes what this worker heard, to pass on at the end of the run.
    pub(crate) fn heard(&mut self, news: News) {
        if self.heard.len() < MAX_NEWS_PER_RUN {
            self.heard.push(news);
        } else {
            self.lost += 1;
        }
    }

    /// Sends this run's news to every other worker.
    pub(crate) fn send(&mut self) {
        if self.heard.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.heard);
        for to in &self.others {
            match to.try_send(batch.clone()) {
                Ok(()) => {}
                Err(TrySendError::Full(b)) => self.lost += b.len() as u64,
                // A worker that has gone needs no news.
                Err(TrySendError::Disconnected(_)) => {}
            }
        }
        // Keep the vector's memory for the next run.
        let mut batch = batch;
        batch.clear();
        self.heard = batch;
    }

    /// What the other workers heard since the last call, in the order they sent it.
    pub(crate) fn received(&mut self, into: &mut Vec<News>) {
        while let Ok(batch) = self.inbox.try_recv() {
            into.extend(batch);
        }
    }

    /// News not passed on, in all.
    pub fn lost(&self) -> u64 {
        self.lost
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn news(last: u8) -> News {
        (
            (
                PortId(0),
                IpAddr::V4(Ipv4Addr::new(198, 18, 0, last)),
                [2, 0, 0, 0, 0, last],
            ),
            Heard::Answer,
        )
    }

    #[test]
    fn every_other_worker_hears_each_run_once() {
        let mut m = mesh(3);
        m[1].heard(news(1));
        m[1].heard(news(2));
        m[1].send();
        m[1].send(); // nothing new: nothing sent
        let mut got = Vec::new();
        m[1].received(&mut got);
        assert!(got.is_empty(), "a worker does not hear itself");
        for i in [0, 2] {
            m[i].received(&mut got);
            assert_eq!(got, [news(1), news(2)]);
            got.clear();
            m[i].received(&mut got);
            assert!(got.is_empty());
        }
    }

    #[test]
    fn past_the_caps_news_is_counted_lost() {
        let mut m = mesh(2);
        for i in 0..MAX_NEWS_PER_RUN + 3 {
            m[0].heard(news(i as u8));
        }
        assert_eq!(m[0].lost(), 3);
        m[0].send();
        for _ in 0..BATCHES_IN_FLIGHT + 2 {
            m[0].heard(news(1));
            m[0].send();
        }
        // The first batch and BATCHES_IN_FLIGHT - 1 single ones fit; 3 did not.
        assert_eq!(m[0].lost(), 3 + 3);
        let mut got = Vec::new();
        m[1].received(&mut got);
        assert_eq!(got.len(), MAX_NEWS_PER_RUN + BATCHES_IN_FLIGHT - 1);
        // A worker that went away is no loss.
        drop(m.remove(1));
        m[0].heard(news(9));
        m[0].send();
        assert_eq!(m[0].lost(), 6);
    }
}
