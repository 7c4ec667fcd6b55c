//! A tunnel's outer headers built once (a rewrite string): IP, and UDP when the
//! tunnel's packets travel in UDP. Per packet only the lengths change, so the
//! IPv4 checksum is the template's sum plus the total length, and nothing else
//! is recomputed; building the headers field by field and summing them costs a
//! share of a small packet's budget.
//!
//! The fields are those the nodes wrote before: TTL (hop limit) 64, DF set, no
//! DSCP or ECN, identification 0, UDP checksum 0 over IPv4 (RFC 3948 section
//! 2.1) and a full one over IPv6, which requires it.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use wire::ip::IpRepr;
use wire::{checksum, ip, ipv4, ipv6, udp};

/// The TTL (hop limit) of the outer header, before the rewrite takes one off.
pub(crate) const OUTER_TTL: u8 = 64;

/// The longest template: IPv6 and UDP.
const MAX_LEN: usize = ipv6::HEADER_LEN + udp::HEADER_LEN;

#[derive(Clone, Copy, Debug)]
pub struct OuterHeader {
    bytes: [u8; MAX_LEN],
    ip_len: u8,
    udp: bool,
    /// IPv4: the folded sum of the header with length and checksum zero.
    sum: u16,
    /// IPv6 with UDP: the addresses, for the checksum's pseudo-header.
    v6: Option<(Ipv6Addr, Ipv6Addr)>,
}

impl OuterHeader {
    /// Headers from `from` to `to` (one family: the caller checked), carrying
    /// `protocol`, or UDP between `ports` (ours, theirs) when given.
    pub fn new(from: IpAddr, to: IpAddr, protocol: u8, ports: Option<(u16, u16)>) -> OuterHeader {
        let mut bytes = [0u8; MAX_LEN];
        let protocol = if ports.is_some() {
            ip::protocol::UDP
        } else {
            protocol
        };
        let header = IpRepr {
            src: from,
            dst: to,
            protocol,
            payload_len: 0,
            hop_limit: OUTER_TTL,
            dont_frag: true,
        };
        let ip_len = header.header_len();
        header
            .emit(&mut bytes[..ip_len])
            .expect("a tunnel's addresses are of one family");
        let v6 = match (from, to) {
            (IpAddr::V6(src), IpAddr::V6(dst)) => ports.map(|_| (src, dst)),
            _ => None,
        };
        if let Some((ours, theirs)) = ports {
            let u = &mut bytes[ip_len..ip_len + udp::HEADER_LEN];
            u[0..2].copy_from_slice(&ours.to_be_bytes());
            u[2..4].copy_from_slice(&theirs.to_be_bytes());
        }
        let mut sum = 0;
        if ip_len == ipv4::HEADER_LEN {
            // The emitted header counts 20 bytes of payload-less length: take the
            // length and checksum out, so each packet adds its own length back.
            bytes[2..4].fill(0);
            bytes[10..12].fill(0);
            sum = checksum::sum(&bytes[..ip_len]);
        }
        OuterHeader {
            bytes,
            ip_len: ip_len as u8,
            udp: ports.is_some(),
            sum,
            v6,
        }
    }

    /// The length of the headers.
    #[inline]
    pub fn len(&self) -> usize {
        usize::from(self.ip_len) + if self.udp { udp::HEADER_LEN } else { 0 }
    }

    /// Writes the headers at the start of `packet`, whose rest is their payload.
    #[inline]
    pub fn write(&self, packet: &mut [u8]) {
        self.write_inner(packet, None);
    }

    /// [`OuterHeader::write`] with the UDP source port given per packet (a VXLAN
    /// flow's), in place of the template's. The template must be one with UDP.
    #[inline]
    pub fn write_from_port(&self, packet: &mut [u8], source_port: u16) {
        debug_assert!(self.udp, "a source port needs UDP");
        self.write_inner(packet, Some(source_port));
    }

    #[inline(always)]
    fn write_inner(&self, packet: &mut [u8], source_port: Option<u16>) {
        let (ip_len, len) = (usize::from(self.ip_len), self.len());
        // One copy of a length known here per shape, not a call to memcpy.
        match len {
            20 => packet[..20].copy_from_slice(&self.bytes[..20]),
            28 => packet[..28].copy_from_slice(&self.bytes[..28]),
            40 => packet[..40].copy_from_slice(&self.bytes[..40]),
            _ => packet[..MAX_LEN].copy_from_slice(&self.bytes),
        }
        if let Some(port) = source_port {
            // Before any checksum: IPv6's UDP checksum covers it (IPv4's UDP has
            // none, and the IP header's does not cover UDP).
            packet[ip_len..ip_len + 2].copy_from_slice(&port.to_be_bytes());
        }
        let total = packet.len() as u16;
        if ip_len == ipv4::HEADER_LEN {
            packet[2..4].copy_from_slice(&total.to_be_bytes());
            let sum = checksum::combine(self.sum, total);
            packet[10..12].copy_from_slice(&(!sum).to_be_bytes());
        } else {
            packet[4..6].copy_from_slice(&(total - ip_len as u16).to_be_bytes());
        }
        if self.udp {
            let udp_len = total - ip_len as u16;
            let (_, datagram) = packet.split_at_mut(ip_len);
            datagram[4..6].copy_from_slice(&udp_len.to_be_bytes());
            if let Some((src, dst)) = &self.v6 {
                udp::Packet::new_unchecked(datagram).fill_checksum_v6(src, dst);
            }
        }
    }
}

/// Writes the IP header (`ip_len` bytes) and the UDP header in front of the payload
/// that fills the rest of `buf`. The addresses are of one family (the source was
/// chosen for the destination). IPv4 with `fragmentable` (an identification) goes
/// without DF.
pub(crate) fn write_headers(
    buf: &mut [u8],
    ip_len: usize,
    from: SocketAddr,
    to: SocketAddr,
    fragmentable: Option<u16>,
) {
    let total = buf.len();
    let udp_len = (total - ip_len) as u16;
    let (head, datagram) = buf.split_at_mut(ip_len);
    {
        let mut u = udp::Packet::new_unchecked(&mut *datagram);
        u.set_src_port(from.port());
        u.set_dst_port(to.port());
        u.set_length(udp_len);
        u.set_checksum(0);
    }
    // Cannot fail: the header fits `head` and the caller checked the length.
    let _ = match (from.ip(), to.ip()) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => wire::ipv4::Ipv4Repr {
            src_addr: src,
            dst_addr: dst,
            protocol: ip::protocol::UDP,
            payload_len: udp_len,
            ttl: OUTER_TTL,
            dscp: 0,
            ecn: 0,
            ident: fragmentable.unwrap_or(0),
            dont_frag: fragmentable.is_none(),
        }
        .emit(head),
        (IpAddr::V6(src), IpAddr::V6(dst)) => {
            let r = wire::ipv6::Ipv6Repr {
                src_addr: src,
                dst_addr: dst,
                next_header: ip::protocol::UDP,
                payload_len: udp_len,
                hop_limit: OUTER_TTL,
                traffic_class: 0,
                flow_label: 0,
            }
            .emit(head);
            udp::Packet::new_unchecked(datagram).fill_checksum_v6(&src, &dst);
            r
        }
        _ => unreachable!("the source was chosen for the destination's family"),
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    /// What the nodes wrote field by field before the template.
    fn by_fields(from: IpAddr, to: IpAddr, ports: Option<(u16, u16)>, payload: &[u8]) -> Vec<u8> {
        let ip_len = if to.is_ipv4() { 20 } else { 40 };
        let head = ip_len + if ports.is_some() { 8 } else { 0 };
        let mut p = vec![0u8; head];
        p.extend_from_slice(payload);
        match ports {
            Some((a, b)) => write_headers(
                &mut p,
                ip_len,
                SocketAddr::new(from, a),
                SocketAddr::new(to, b),
                None,
            ),
            None => {
                let header = IpRepr {
                    src: from,
                    dst: to,
                    protocol: ip::protocol::ESP,
                    payload_len: (p.len() - ip_len) as u16,
                    hop_limit: OUTER_TTL,
                    dont_frag: true,
                };
                header.emit(&mut p).unwrap();
            }
        }
        p
    }

    #[test]
    fn the_template_writes_what_the_fields_did() {
        let pairs: [(IpAddr, IpAddr); 2] = [
            (
                "198.18.0.1".parse().unwrap(),
                "198.19.255.254".parse().unwrap(),
            ),
            (
                "2001:2::1".parse().unwrap(),
                "2001:2:ffff::2".parse().unwrap(),
            ),
        ];
        for (from, to) in pairs {
            for ports in [None, Some((4500, 4500)), Some((61000, 4500))] {
                let t = OuterHeader::new(from, to, ip::protocol::ESP, ports);
                for n in [0usize, 1, 7, 64, 1419, 1500, 65000] {
                    let payload: Vec<u8> = (0..n).map(|i| (i * 7 + 3) as u8).collect();
                    let want = by_fields(from, to, ports, &payload);
                    let mut got = vec![0xa5u8; t.len()];
                    got.extend_from_slice(&payload);
                    t.write(&mut got);
                    assert_eq!(got, want, "{from} {ports:?} {n}");
                    if let Some((_, theirs)) = ports {
                        let want = by_fields(from, to, Some((49999, theirs)), &payload);
                        got[..t.len()].fill(0x5a);
                        t.write_from_port(&mut got, 49999);
                        assert_eq!(got, want, "{from} {ports:?} {n} from port 49999");
                    }
                }
            }
        }
    }
}
