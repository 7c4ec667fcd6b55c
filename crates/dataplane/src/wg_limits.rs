//! How large WireGuard's packets may be in a worker's buffers: the largest inner
//! MTU the data path carries, and what the tunnel adds to an inner packet. Both
//! graphs, the context and the IP nodes size things by these.

use crate::arena::{HEADROOM, TAILROOM};

/// The largest inner MTU a data path with buffers of `buffer` bytes carries both
/// ways: a received datagram (transport header, the inner packet padded to at most
/// the MTU, the tag) must fit the part of a buffer a receive may fill (all but
/// headroom and tail room). An interface asking for more is refused.
pub const fn max_mtu(buffer: usize) -> usize {
    buffer - HEADROOM - TAILROOM - wire::wireguard::TRANSPORT_HEADER_LEN - crypto::TAG_LEN
}

/// The largest datagram a host with buffers of `buffer` bytes takes whole: a
/// transport message carrying an inner packet of [`max_mtu`].
pub const fn max_datagram(buffer: usize) -> usize {
    wire::wireguard::TRANSPORT_HEADER_LEN + max_mtu(buffer) + crypto::TAG_LEN
}

/// What WireGuard adds to an inner packet inside its UDP datagram: the transport
/// header and the tag (padding aside, which never takes a packet past the MTU).
pub const OUTER_OVERHEAD: usize = wire::wireguard::TRANSPORT_HEADER_LEN + crypto::TAG_LEN;
