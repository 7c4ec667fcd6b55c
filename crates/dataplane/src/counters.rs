//! Per-node counters: calls, vectors, packets, clocks and drops by reason.

use wireguard::DropReason;

#[derive(Clone, Debug, Default)]
pub struct NodeCounters {
    /// Times the node ran.
    pub calls: u64,
    /// Frames it was handed (equals calls: a node runs once per frame).
    pub vectors: u64,
    pub packets: u64,
    /// Time-stamp-counter ticks spent inside the node.
    pub clocks: u64,
    pub drops: [u64; DropReason::COUNT],
    /// Packets the node finished with on purpose without passing them on (a
    /// handshake consumed, a packet staged for a handshake, a keepalive received).
    pub consumed: u64,
}

impl NodeCounters {
    pub fn drop(&mut self, reason: DropReason) {
        self.drops[reason.index()] += 1;
    }

    pub fn dropped(&self) -> u64 {
        self.drops.iter().sum()
    }

    pub fn add(&mut self, other: &NodeCounters) {
        self.calls += other.calls;
        self.vectors += other.vectors;
        self.packets += other.packets;
        self.clocks += other.clocks;
        self.consumed += other.consumed;
        for (a, b) in self.drops.iter_mut().zip(other.drops.iter()) {
            *a += b;
        }
    }
}

/// The CPU's time-stamp counter: cheap enough to read twice per frame.
#[inline]
pub fn clocks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    {
        // SAFETY: RDTSC reads a counter; it has no memory effects and exists on every
        // x86_64 CPU.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        use std::sync::OnceLock;
        use std::time::Instant;
        static START: OnceLock<Instant> = OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}
