//! The frames a port's driver lost, each counted once under one reason, with what
//! the reason means: what `show errors` lists beside the nodes' drops (as the
//! node `port-NAME`) and what `linerate_port_drops_total` counts.
//!
//! The drivers' own counters overlap: the kernel counts a frame that found no
//! fill-ring buffer both in `rx_dropped` and in `rx_fill_empty`, and a frame the
//! port could not queue both in the port's `tx_dropped` and in the driver's
//! `tx_ring_full`. Here each lost frame has one reason.

/// One reason, its counter's name in `show errors`, and what it means.
pub struct DropReason {
    /// The counter's name, as `show errors` lists it.
    pub name: &'static str,
    /// What it means, in a sentence.
    pub meaning: &'static str,
}

/// The reasons a port's frames are lost for, on either driver.
pub const REASONS: [DropReason; 9] = [
    DropReason {
        name: "rx-fill-empty",
        meaning: "AF_XDP: a frame arrived while the kernel held no buffer of ours to put it in (the fill ring was empty); dropped by the kernel",
    },
    DropReason {
        name: "rx-ring-full",
        meaning: "the kernel's receive ring was full (the worker did not read fast enough); dropped by the kernel",
    },
    DropReason {
        name: "rx-other",
        meaning: "AF_XDP: the kernel dropped a frame for this socket for another reason (larger than a buffer, for one)",
    },
    DropReason {
        name: "rx-truncated",
        meaning: "a frame larger than a ring slot or a buffer (AF_PACKET), or than a buffer holds once its parts are joined (AF_XDP on jumbo buffers); dropped",
    },
    DropReason {
        name: "rx-no-buffer",
        meaning: "AF_XDP on jumbo buffers: a frame's parts came while the worker had no free buffer to join them in; dropped",
    },
    DropReason {
        name: "tx-too-big",
        meaning: "AF_PACKET: a frame larger than a transmit ring slot; dropped",
    },
    DropReason {
        name: "tx-ring-full",
        meaning: "the transmit ring had no free slot (the link is slower than what was routed to it); dropped",
    },
    DropReason {
        name: "tx-rejected",
        meaning: "AF_PACKET: the kernel refused a queued frame as malformed; dropped",
    },
    DropReason {
        name: "tx-invalid",
        meaning: "AF_XDP: the kernel refused a transmit descriptor; dropped",
    },
];

/// What `reason` means, for `show errors`.
pub fn meaning(reason: &str) -> Option<&'static str> {
    REASONS.iter().find(|r| r.name == reason).map(|r| r.meaning)
}

/// The node name a port's drops are listed under.
pub fn node_name(port: &str) -> String {
    format!("port-{port}")
}

/// The lost frames by reason, from the driver counters of an AF_PACKET port.
pub fn packet(
    rx_truncated: u64,
    rx_dropped: u64,
    tx_too_big: u64,
    tx_ring_full: u64,
    tx_rejected: u64,
) -> Vec<(&'static str, u64)> {
    vec![
        ("rx-ring-full", rx_dropped),
        ("rx-truncated", rx_truncated),
        ("tx-too-big", tx_too_big),
        ("tx-ring-full", tx_ring_full),
        ("tx-rejected", tx_rejected),
    ]
}

/// The lost frames by reason, from the kernel's statistics of an AF_XDP socket and
/// the frames the port could not queue for sending. The kernel's `rx_dropped`
/// holds the fill-ring misses (and frames too large for a buffer); a full RX ring
/// is counted apart from it.
pub fn xdp(
    rx_dropped: u64,
    rx_fill_empty: u64,
    rx_ring_full: u64,
    tx_unqueued: u64,
    tx_invalid: u64,
) -> Vec<(&'static str, u64)> {
    vec![
        ("rx-fill-empty", rx_fill_empty),
        ("rx-ring-full", rx_ring_full),
        ("rx-other", rx_dropped.saturating_sub(rx_fill_empty)),
        ("tx-ring-full", tx_unqueued),
        ("tx-invalid", tx_invalid),
    ]
}

/// The lost frames by reason of an AF_XDP port on jumbo buffers, beyond
/// [`xdp`]'s: frames whose parts joined are larger than a buffer holds, and
/// frames that found no free buffer to be joined in.
pub fn xdp_parts(rx_too_big: u64, rx_no_buffer: u64) -> Vec<(&'static str, u64)> {
    vec![("rx-truncated", rx_too_big), ("rx-no-buffer", rx_no_buffer)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_has_a_meaning_and_each_frame_one_reason() {
        let all = packet(1, 2, 3, 4, 5)
            .into_iter()
            .chain(xdp(9, 7, 1, 2, 3))
            .chain(xdp_parts(1, 2));
        for (name, _) in all {
            assert!(meaning(name).is_some(), "{name}");
        }
        // Seven frames without a fill buffer are in the kernel's rx_dropped too: two
        // more were dropped for other reasons, and a full ring's one is apart.
        let total: u64 = xdp(9, 7, 1, 0, 0).iter().map(|(_, v)| v).sum();
        assert_eq!(total, 10);
    }
}
