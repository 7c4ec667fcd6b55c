//! Zero-copy views of packet formats.
//!
//! Each protocol module has a `Packet<T: AsRef<[u8]>>`-style view over a byte
//! buffer. `new_checked` validates every length the view relies on, once, so
//! that each accessor afterwards cannot panic on any input; `new_unchecked`
//! skips that for buffers the caller has already validated or is about to
//! fill, and its accessors panic if the buffer is too short for a fixed field.
//! Variable-length parts (`payload()` and friends) are clamped to the buffer,
//! so they never panic, even after a setter has changed a length field.
//!
//! The views:
//!
//! - [`ethernet`]: Ethernet II frames with at most one 802.1Q tag, and
//!   [`MacAddr`](ethernet::MacAddr).
//! - [`arp`]: ARP for Ethernet and IPv4, and builders for requests and
//!   replies.
//! - [`ipv4`], [`ipv6`] and [`IpPacket`] for either; [`ip`] has the
//!   protocol numbers.
//! - [`icmp`]: ICMP for IPv4, echo and error messages, and a builder for
//!   errors that quote the offending packet.
//! - [`icmpv6`]: ICMPv6, echo and error messages, and neighbor
//!   solicitations and advertisements.
//! - [`udp`] and [`tcp`], with their checksums over either pseudo-header.
//! - [`vxlan`]: the VXLAN header.
//! - [`wireguard`]: the four WireGuard messages.
//! - [`checksum`]: the Internet checksum.
//!
//! Nothing here allocates, performs I/O or uses `unsafe`.

#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(test)]
extern crate std;

#[macro_use]
mod view;
#[macro_use]
mod icmp_header;

pub mod arp;
mod bytes;
#[cfg(test)]
mod captures;
pub mod checksum;
pub mod error;
pub mod esp;
pub mod ethernet;
pub mod icmp;
pub mod icmpv6;
pub mod ip;
pub mod ip_protocol;
pub mod ipv4;
pub mod ipv6;
pub mod tcp;
pub mod udp;
pub mod vxlan;
pub mod wireguard;

pub use error::{Error, Result};
pub use ip::IpPacket;
