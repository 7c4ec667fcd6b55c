//! `icmp-error`: answers a packet the gateway cannot deliver with the ICMP (ICMPv6)
//! error its metadata names (time exceeded, destination unreachable, fragmentation
//! needed / packet too big), built in the same buffer: the new IP and ICMP headers go
//! in front of the offending packet, which is cut to the quote (its header and 8
//! bytes for IPv4, RFC 792; as much as fits 1280 bytes for IPv6, RFC 4443 2.4(c)).
//! The error is routed back to the packet's source through `ip-lookup`.
//!
//! No error answers an error, a fragment other than the first, or a packet with no
//! unicast source (RFC 1812 4.3.2.7, RFC 4443 2.4(e)), and errors are rate-limited
//! per worker (RFC 1812 4.3.2.8, RFC 4443 2.4(f)): a token bucket of
//! [`ERROR_BURST`] refilled at [`ERRORS_PER_SECOND`].

use crate::arena::{Handle, IcmpReason};
use crate::context::Context;
use crate::counters::NodeCounters;
use crate::fib::PortId;
use crate::nodes::PerPacket;
use std::net::IpAddr;
use std::time::Instant;
use wire::ip::IpRepr;
use wire::{icmp, icmpv6, ip, ipv4, ipv6};

/// Errors a worker may send in a burst.
pub const ERROR_BURST: u32 = 100;
/// Errors a worker sends per second, sustained.
pub const ERRORS_PER_SECOND: u32 = 1000;
/// The TTL (hop limit) of the errors.
const ERROR_TTL: u8 = 64;

crate::node_errors! {
    /// Why icmp-error sends no error (the offending packet is dropped either way).
    pub enum IcmpErrorError {
        ForAnError => "for-an-error", "No error answers an ICMP error or a later fragment.";
        RateLimited => "rate-limited", "Past the rate of ICMP errors.";
        NoSource => "no-source", "The gateway has no address of the packet's family.";
        NoRoom => "no-room", "No room in the buffer for the error's headers.";
        Unreadable => "unreadable", "The offending packet does not parse.";
    }
}

#[repr(u16)]
enum Next {
    Lookup = 0,
}

pub struct IcmpError {
    tokens: u32,
    refilled: Option<Instant>,
}

impl Default for IcmpError {
    fn default() -> Self {
        IcmpError {
            tokens: ERROR_BURST,
            refilled: None,
        }
    }
}

impl IcmpError {
    pub const NAME: &'static str = "icmp-error";

    fn take_token(&mut self, now: Instant) -> bool {
        let since = self.refilled.map_or(std::time::Duration::MAX, |t| {
            now.saturating_duration_since(t)
        });
        let new = (since.as_micros().min(u128::from(u32::MAX)) as u64
            * u64::from(ERRORS_PER_SECOND)
            / 1_000_000) as u32;
        if new > 0 || self.refilled.is_none() {
            self.tokens = (self.tokens + new).min(ERROR_BURST);
            self.refilled = Some(now);
        }
        if self.tokens == 0 {
            return false;
        }
        self.tokens -= 1;
        true
    }
}

/// Builds the error for the packet at the start of `buf[at..at + len]` into `buf`,
/// ending where the quote ends; returns the new start and length.
fn build(
    buf: &mut [u8],
    at: usize,
    len: usize,
    reason: IcmpReason,
    source: IpAddr,
) -> Result<(usize, usize), IcmpErrorError> {
    let offending = &buf[at..at + len];
    let v4 = offending[0] >> 4 == 4;
    // The packet is copied out first: the error's headers are written over what
    // precedes it, and the quote is taken from the copy.
    let mut copy = [0u8; crate::arena::LARGEST_BUFFER];
    copy[..len].copy_from_slice(offending);
    let quote = &copy[..len];
    let dst = if v4 {
        let p = ipv4::Packet::new_checked(quote).map_err(|_| IcmpErrorError::Unreadable)?;
        if icmp::is_icmp_error(&p) {
            return Err(IcmpErrorError::ForAnError);
        }
        IpAddr::V4(p.src_addr())
    } else {
        let p = ipv6::Packet::new_checked(quote).map_err(|_| IcmpErrorError::Unreadable)?;
        if icmpv6::is_icmpv6_error(&p) {
            return Err(IcmpErrorError::ForAnError);
        }
        IpAddr::V6(p.src_addr())
    };
    let header = if v4 {
        ipv4::HEADER_LEN
    } else {
        ipv6::HEADER_LEN
    } + icmp::HEADER_LEN;
    let start = at.checked_sub(header).ok_or(IcmpErrorError::NoRoom)?;
    let body = &mut buf[start..];
    // The ICMP message first, after where the IP header goes; then that header.
    let (protocol, ip_len) = match (source, dst) {
        (IpAddr::V4(_), IpAddr::V4(_)) => (ip::protocol::ICMP, ipv4::HEADER_LEN),
        (IpAddr::V6(_), IpAddr::V6(_)) => (ip::protocol::ICMPV6, ipv6::HEADER_LEN),
        _ => return Err(IcmpErrorError::NoSource),
    };
    let message = &mut body[ip_len..];
    let n = match (source, dst) {
        (IpAddr::V6(src), IpAddr::V6(dst)) => {
            let e = match reason {
                IcmpReason::TimeExceeded => icmpv6::ErrorRepr::TimeExceeded {
                    code: icmpv6::time_exceeded::HOP_LIMIT,
                },
                IcmpReason::NoRoute => icmpv6::ErrorRepr::DestUnreachable {
                    code: icmpv6::unreachable::NO_ROUTE,
                },
                IcmpReason::TooBig { mtu } => icmpv6::ErrorRepr::PacketTooBig { mtu: mtu.into() },
            };
            e.emit(message, &src, &dst, quote)
        }
        _ => {
            let e = match reason {
                IcmpReason::TimeExceeded => icmp::ErrorRepr::TimeExceeded {
                    code: icmp::time_exceeded::TTL,
                },
                IcmpReason::NoRoute => icmp::ErrorRepr::DestUnreachable {
                    code: icmp::unreachable::NET,
                },
                IcmpReason::TooBig { mtu } => icmp::ErrorRepr::FragNeeded { next_hop_mtu: mtu },
            };
            e.emit(message, quote)
        }
    }
    .map_err(|_| IcmpErrorError::NoRoom)?;
    // An IPv4 error may be fragmented on its way (DF clear), as routers send them.
    let ip_header = IpRepr {
        src: source,
        dst,
        protocol,
        payload_len: n as u16,
        hop_limit: ERROR_TTL,
        dont_frag: false,
    };
    ip_header.emit(body).map_err(|_| IcmpErrorError::NoRoom)?;
    let n = ip_len + n;
    Ok((start, n))
}

impl PerPacket for IcmpError {
    per_packet_node!(errors: IcmpErrorError, next: [crate::nodes::IpLookup::NAME]);

    fn one(
        &mut self,
        cx: &mut Context,
        h: Handle,
        _: &mut NodeCounters,
    ) -> Result<u16, IcmpErrorError> {
        let m = *cx.arena.meta(h);
        let reason = m.icmp.ok_or(IcmpErrorError::Unreadable)?;
        let origin = wire::ip::addrs(cx.arena.data(h))
            .map_err(|_| IcmpErrorError::Unreadable)?
            .0;
        let ports = &cx.ip.interfaces;
        let source = ports
            .source_for(PortId(m.port), origin)
            .or_else(|| ports.iter().find_map(|(p, _)| ports.source_for(p, origin)))
            .ok_or(IcmpErrorError::NoSource)?;
        if !self.take_token(cx.now) {
            return Err(IcmpErrorError::RateLimited);
        }
        let (at, len) = (m.offset as usize, m.len as usize);
        let (start, n) = build(cx.arena.buffer_mut(h), at, len, reason, source)?;
        let meta = cx.arena.meta_mut(h);
        meta.offset = start as u16;
        meta.len = n as u16;
        meta.icmp = None;
        Ok(Next::Lookup as u16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn errors_are_limited_to_a_burst_then_the_sustained_rate() {
        let mut e = IcmpError::default();
        let t0 = Instant::now();
        let sent = (0..1000).filter(|_| e.take_token(t0)).count();
        assert_eq!(sent, ERROR_BURST as usize);
        // 10 ms later: 10 more at 1000 a second.
        let t1 = t0 + Duration::from_millis(10);
        assert_eq!((0..1000).filter(|_| e.take_token(t1)).count(), 10);
        // Idle for long: the bucket fills to the burst, no further.
        let t2 = t1 + Duration::from_secs(60);
        assert_eq!(
            (0..1000).filter(|_| e.take_token(t2)).count(),
            ERROR_BURST as usize
        );
    }
}
