//! A control thread's inbox: a bounded channel that every worker hands messages
//! into without waiting. When it is full (a flood, or a control thread that
//! fell behind) the message is refused and the worker counts the drop; the
//! packet path never blocks on the control plane. The key exchange's inbox
//! (`ike`) and the OpenVPN control channel's (`ovpn`) are each one of these.

use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

/// A worker's way into one control thread's inbox.
pub struct Inbox<T> {
    tx: SyncSender<T>,
}

impl<T> Clone for Inbox<T> {
    fn clone(&self) -> Self {
        Inbox {
            tx: self.tx.clone(),
        }
    }
}

impl<T> Inbox<T> {
    /// An inbox holding at most `len` messages, and the control thread's end.
    pub fn bounded(len: usize) -> (Inbox<T>, Receiver<T>) {
        let (tx, rx) = sync_channel(len);
        (Inbox { tx }, rx)
    }

    /// Hands a message over; false when the inbox is full or its reader gone.
    pub(crate) fn hand_over(&self, message: T) -> bool {
        self.tx.try_send(message).is_ok()
    }
}
