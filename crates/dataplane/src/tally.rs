//! Packets and bytes a worker carried on something every worker shares (an ESP SA,
//! an OpenVPN key), added up here over a frame and added to the shared atomic
//! counters once at the frame's end: the packet path then takes no locked
//! instruction, and workers on one SA or key do not fight over its cache line.

/// What one worker carried on one shared thing since it last flushed.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Tally {
    pub packets: u64,
    pub bytes: u64,
}

impl Tally {
    /// Counts one packet of `bytes`. True when the tally was empty before: the
    /// caller then marks its owner for flushing at the frame's end.
    pub fn add(&mut self, bytes: u64) -> bool {
        let first = self.packets == 0;
        self.packets += 1;
        self.bytes += bytes;
        first
    }

    /// What was counted, if anything, leaving the tally empty.
    pub fn take(&mut self) -> Option<(u64, u64)> {
        (self.packets > 0).then(|| {
            let t = std::mem::take(self);
            (t.packets, t.bytes)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Tally;

    #[test]
    fn a_tally_says_its_first_packet_and_empties_when_taken() {
        let mut t = Tally::default();
        assert_eq!(t.take(), None);
        assert!(t.add(100));
        assert!(!t.add(50));
        assert_eq!(t.take(), Some((2, 150)));
        assert_eq!(t.take(), None);
        assert!(t.add(1));
    }
}
