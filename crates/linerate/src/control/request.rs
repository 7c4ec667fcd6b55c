//! A request the control socket hands to a worker, and the channel its answer
//! goes back on. Host mode and the gateway both take these; each refuses what it
//! has no state for.

use super::{esp_request::EspRequest, uapi};
use std::sync::mpsc::SyncSender;

/// What a control request asks of the worker.
pub enum Control {
    Uapi(uapi::Request),
    /// `linerate show counters`.
    Counters,
    /// `linerate show WHAT` of a gateway (interfaces, runtime, fib, neighbors,
    /// metrics); host mode has none of these and refuses.
    Show(String),
    /// An ESP SA added or removed (a gateway's; host mode refuses).
    Esp(EspRequest),
}

pub struct ControlRequest {
    pub what: Control,
    pub reply: SyncSender<String>,
}
