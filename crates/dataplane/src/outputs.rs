//! The output queues a worker's graph leaves finished packets in, each drained by
//! one driver (a socket, a port's transmit ring, the TUN), and the few messages made
//! outside the arena that go out beside them.

use crate::arena::Handle;
use std::net::SocketAddr;

/// One of the context's output queues, each drained by one driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputId(pub usize);

/// Packets the graph finished, waiting for the drivers.
pub(crate) struct Outputs {
    pub(crate) queues: Vec<Vec<Handle>>,
    /// Messages made outside the arena (handshakes, cookie replies), to send as they
    /// are: rare, small, and not on the packet path.
    pub(crate) control: Vec<(SocketAddr, Vec<u8>)>,
}

impl Outputs {
    pub(crate) fn new(count: usize) -> Outputs {
        Outputs {
            queues: (0..count).map(|_| Vec::new()).collect(),
            control: Vec::new(),
        }
    }

    pub(crate) fn queue(&mut self, id: OutputId) -> &mut Vec<Handle> {
        &mut self.queues[id.0]
    }

    /// Whether every queue has gone to its driver.
    pub(crate) fn all_empty(&self) -> bool {
        self.queues.iter().all(Vec::is_empty)
    }

    pub(crate) fn add(&mut self) -> OutputId {
        self.queues.push(Vec::new());
        OutputId(self.queues.len() - 1)
    }
}
