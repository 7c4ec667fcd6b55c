//! The gateway's IKE ports. Key exchange runs on its own thread, away from the
//! packets: a datagram to UDP port 500, or to 4500 behind the non-ESP marker (RFC
//! 3948), is copied into the key exchange's inbox, a bounded channel, and its
//! buffer freed; when the inbox is full (a flood) the datagram is dropped and
//! counted, and the packet path never waits. The key exchange's answers come back
//! as datagrams the graph sends like its own (`GatewayGraph::send_udp`).

use std::net::SocketAddr;

pub const IKE_PORT: u16 = 500;
pub const NAT_T_PORT: u16 = 4500;

/// IKE messages waiting for the key exchange, from every worker together.
pub const INBOX_LEN: usize = 1024;

/// One UDP datagram to an IKE port: the payload as received (with the marker on
/// port 4500), the gateway's address and port it came to, and where from.
pub struct IkeDatagram {
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub payload: Vec<u8>,
}

/// What a worker hands the key exchange.
pub enum IkeInput {
    /// An IKE message, reassembled by the worker from IP fragments if its
    /// peer's kernel cut it (a large certificate without RFC 7383 fragmentation).
    Datagram(IkeDatagram),
    /// A NAT keepalive (RFC 3948) on port 4500, and where it came from.
    Keepalive {
        local: SocketAddr,
        remote: SocketAddr,
    },
}

/// Whether a UDP datagram to our `dst_port` carrying `payload` is IKE's: to port
/// 500, or to 4500 behind the non-ESP marker (RFC 3948).
pub(crate) fn is_ike(dst_port: u16, payload: &[u8]) -> bool {
    dst_port == IKE_PORT
        || (dst_port == NAT_T_PORT
            && wire::esp::classify_udp(payload) == Ok(wire::esp::UdpPayload::Ike))
}

/// The IKE datagram in a whole IP packet (one reassembled from fragments): UDP to
/// port 500, or to 4500 behind the non-ESP marker, its checksum verified; else
/// why not.
pub fn datagram_in(packet: &[u8]) -> Result<IkeDatagram, &'static str> {
    use std::net::IpAddr;
    use wire::{ip, ipv4, ipv6, udp};
    let (src, dst, protocol, body) = match packet.first().map(|b| b >> 4) {
        Some(4) => {
            let p = ipv4::Packet::new_checked(packet).map_err(|_| "malformed")?;
            let body = packet.get(p.header_len()..).ok_or("malformed")?;
            let (s, d) = (IpAddr::V4(p.src_addr()), IpAddr::V4(p.dst_addr()));
            (s, d, p.protocol(), body)
        }
        Some(6) => {
            let p = ipv6::Packet::new_checked(packet).map_err(|_| "malformed")?;
            let body = packet.get(ipv6::HEADER_LEN..).ok_or("malformed")?;
            let (s, d) = (IpAddr::V6(p.src_addr()), IpAddr::V6(p.dst_addr()));
            (s, d, p.next_header(), body)
        }
        _ => return Err("malformed"),
    };
    if protocol != ip::protocol::UDP {
        return Err("not-ike");
    }
    let u = udp::Packet::new_checked(body).map_err(|_| "malformed")?;
    let len = usize::from(u.length());
    if len < udp::HEADER_LEN || len > body.len() {
        return Err("malformed");
    }
    let u = udp::Packet::new_unchecked(&body[..len]);
    if !u.verify_checksum(src, dst) {
        return Err("bad-udp-checksum");
    }
    if !is_ike(u.dst_port(), u.payload()) {
        return Err("not-ike");
    }
    Ok(IkeDatagram {
        local: SocketAddr::new(dst, u.dst_port()),
        remote: SocketAddr::new(src, u.src_port()),
        payload: u.payload().to_vec(),
    })
}

/// A worker's way into the key exchange's inbox, which holds [`INBOX_LEN`]
/// messages (`IkeInbox::bounded(INBOX_LEN)`).
pub type IkeInbox = crate::inbox::Inbox<IkeInput>;
