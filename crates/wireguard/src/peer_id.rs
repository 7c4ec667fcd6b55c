//! A peer's name inside the device: what every other part (the data path, the
//! staging queue, the runs' reports) knows a peer by.

/// A peer's slot in the device; stable while the peer exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PeerId(pub u32);
