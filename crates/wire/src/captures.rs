//! Packets captured from real stacks, shared by the tests of every view.
//!
//! The IP packets were built by the Linux kernel. Those read from a TUN
//! device come from a private network namespace with no offloads on the
//! TUN, so the kernel computed every checksum in full, as it would for a
//! real link. The WireGuard messages were written by wireguard-go.

use std::vec::Vec;

/// Decodes a hex string; the constants here are all well formed.
pub(crate) fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// UDP "hello wire" from 198.18.0.1:51820 to 198.18.0.2:51820, read from a
/// TUN device.
pub(crate) const TUN_UDP_V4: &str = "450000268ee6400040111fb9c6120001c6120002\
                                     ca6cca6c0012b10768656c6c6f2077697265";

/// UDP "hello wire" from [2001:2::1]:51820 to [2001:2::2]:51820, read from
/// a TUN device.
pub(crate) const TUN_UDP_V6: &str = "6000dbd500121140\
                                     20010002000000000000000000000001\
                                     20010002000000000000000000000002\
                                     ca6cca6c0012fd2668656c6c6f2077697265";

/// ICMPv6 router solicitation the kernel sent when that TUN came up:
/// link-local source, all-routers destination, hop limit 255.
pub(crate) const TUN_ROUTER_SOLICIT: &str = "6000000000083aff\
                                             fe80000000000000b51b26b4c773c747\
                                             ff020000000000000000000000000002\
                                             850012ac00000000";

/// ICMP echo reply from 127.0.0.1 to 127.0.0.1, the kernel's answer to a
/// raw-socket echo request (id 0x1234, seq 1, "linerate"), read back from
/// the raw socket.
pub(crate) const LO_ECHO_REPLY: &str = "45000024c88a00004001b44c7f0000017f000001\
                                        00002c35123400016c696e6572617465";

// One handshake and the first data packet between two wireguard-go
// devices on loopback in a private network namespace, as handed to the
// UDP socket. Static private keys (clamped): A = 0x11 repeated, B = 0x22
// repeated; ephemerals were random. A initiated by sending B a 32-byte
// ICMP echo request from 198.18.0.1 to 198.18.0.2.

/// A to B: handshake initiation.
pub(crate) const WG_GO_INITIATION: &str = concat!(
    "0100000090b977234121bbe676f6ccf20c49f422312f18acad806cbef4ecd436",
    "f8a5746c1f66f260e097b94a2e7bf8ed205d073c9043bac32cf2266e1d6f31d3",
    "9140a4b7af99db87733dc653f9f0e4a2eee0a9588c8877af9d13fd848c0e4212",
    "3edf52bfd9e62869b8f33fe0639884df8059086751b9088eae8ed5cab64ec8ea",
    "5c8bb73500000000000000000000000000000000",
);
/// B to A: handshake response.
pub(crate) const WG_GO_RESPONSE: &str = concat!(
    "0200000081bca4c890b977230bd47855b7b5cbe5c453748009e788631206af62",
    "eb00339be7607e61d11e2c19cbb84a2c25d075c25df939608b47f7a617619e9a",
    "d9f9cdddd7923e25a313702d00000000000000000000000000000000",
);
/// A to B: the echo request, padded and sealed.
pub(crate) const WG_GO_TRANSPORT: &str = concat!(
    "0400000081bca4c8000000000000000017fa6fc608e0e1ad8c1e8b3f184a1d39",
    "958fdef4f6c4900df76ba46f7f81d959f71f4718962e9b6c5c6513097aabeedd",
);
