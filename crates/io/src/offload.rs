//! TUN offloads: with `IFF_VNET_HDR` and `TUNSETOFFLOAD`, the kernel hands the TUN
//! reader whole TCP send bursts (up to 64 KiB, one `virtio_net_hdr` in front) instead of
//! MTU-sized packets, and leaves checksums for the reader to finish. One read then
//! replaces dozens. This module turns such a burst back into MTU-sized packets with
//! complete headers and checksums: what the kernel's own GSO would have done, and what
//! every packet sent through the tunnel must look like. The other way, it joins
//! consecutive segments of one flow into such a burst for the TUN writer.
//!
//! IP and TCP headers are read and written through `wire`'s views, so every offset and
//! checksum rule is defined in one place; only the virtio-net header is laid out here.

use wire::checksum::{pseudo_header_v4, pseudo_header_v6, sum};
use wire::ip::protocol::TCP;
use wire::tcp::flags::{ACK, CWR, FIN, PSH};
use wire::{ipv4, ipv6, tcp};

/// `struct virtio_net_hdr` (include/uapi/linux/virtio_net.h), little-endian on x86.
pub const VNET_HDR_LEN: usize = 10;
const F_NEEDS_CSUM: u8 = 1;
const GSO_NONE: u8 = 0;
const GSO_TCPV4: u8 = 1;
const GSO_TCPV6: u8 = 4;
const GSO_ECN: u8 = 0x80;

/// The offload header in front of every packet on an `IFF_VNET_HDR` TUN.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VnetHdr {
    /// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: the checksum is left to the reader.
    pub flags: u8,
    /// How the packet is to be segmented (none, TCPv4, TCPv6; ECN bit).
    pub gso_type: u8,
    /// Length of the headers, as the kernel saw them (not trusted here).
    pub hdr_len: u16,
    /// Payload bytes per segment.
    pub gso_size: u16,
    /// Where the partial checksum starts.
    pub csum_start: u16,
    /// Where, from `csum_start`, the checksum field is.
    pub csum_offset: u16,
}

impl VnetHdr {
    /// Reads the header from the first bytes of `b`.
    pub fn parse(b: &[u8]) -> Option<VnetHdr> {
        let b: &[u8; VNET_HDR_LEN] = b.first_chunk()?;
        let u = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        Some(VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u(2),
            gso_size: u(4),
            csum_start: u(6),
            csum_offset: u(8),
        })
    }

    /// Writes the header in the layout [`parse`](VnetHdr::parse) reads.
    pub fn emit(&self, b: &mut [u8; VNET_HDR_LEN]) {
        b[0] = self.flags;
        b[1] = self.gso_type;
        for (at, v) in [
            (2, self.hdr_len),
            (4, self.gso_size),
            (6, self.csum_start),
            (8, self.csum_offset),
        ] {
            b[at..at + 2].copy_from_slice(&v.to_le_bytes());
        }
    }
}

/// Why a packet from the kernel could not be made into tunnel packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffloadError {
    /// The header or packet is inconsistent (lengths, offsets, IP version).
    Malformed,
    /// A segmentation type this reader did not ask for.
    Unsupported,
}

/// Finishes a partial checksum: the field at `csum_start + csum_offset` holds the
/// pseudo-header sum; the checksum covers everything from `csum_start` on.
fn finish_checksum(pkt: &mut [u8], start: usize, offset: usize) -> Result<(), OffloadError> {
    let field = start.checked_add(offset).ok_or(OffloadError::Malformed)?;
    if field + 2 > pkt.len() || start > pkt.len() {
        return Err(OffloadError::Malformed);
    }
    let s = sum(&pkt[start..]);
    pkt[field..field + 2].copy_from_slice(&(!s).to_be_bytes());
    Ok(())
}

/// Splits one packet read from an offloading TUN (header already parsed, `pkt` without
/// it) into packets of at most `gso_size` payload, calling `emit` with each. Returns
/// how many were emitted. `scratch` must hold one segment (64 KiB is always enough).
pub fn split(
    hdr: &VnetHdr,
    pkt: &mut [u8],
    scratch: &mut [u8],
    mut emit: impl FnMut(&[u8]),
) -> Result<usize, OffloadError> {
    let mut count = 0;
    split_from(hdr, pkt, scratch, 0, |seg| {
        emit(seg);
        count += 1;
        true
    })?;
    Ok(count)
}

/// [`split`] that can stop and resume: starts at segment `first` (0 for the whole
/// packet) and stops before a segment for which `take` returns false. Returns the index
/// of that segment, to resume from with the same `hdr` and `pkt`, or `None` when every
/// segment was taken. Each segment depends only on the packet and its index, so a
/// reader whose batch is full keeps the rest of a burst where it was read, without
/// copying it. The packet is checked in full before the first segment, so resuming a
/// packet that was split before cannot fail.
pub fn split_from(
    hdr: &VnetHdr,
    pkt: &mut [u8],
    scratch: &mut [u8],
    first: usize,
    take: impl FnMut(&[u8]) -> bool,
) -> Result<Option<usize>, OffloadError> {
    match hdr.gso_type & !GSO_ECN {
        GSO_NONE if first > 0 => Ok(None),
        GSO_NONE => {
            if hdr.flags & F_NEEDS_CSUM != 0 {
                finish_checksum(pkt, hdr.csum_start as usize, hdr.csum_offset as usize)?;
            }
            let mut take = take;
            Ok((!take(pkt)).then_some(0))
        }
        GSO_TCPV4 | GSO_TCPV6 => split_tcp(hdr.gso_size as usize, pkt, scratch, first, take),
        _ => Err(OffloadError::Unsupported),
    }
}

/// Whether `pkt` is IPv4, and where its TCP header starts, from the IP header's
/// version, length (IPv4 options included; IPv6 extension headers are not walked) and
/// protocol, which must be TCP. `None` for anything else. The IP length fields are not
/// looked at: each caller checks them as strictly as it needs.
fn tcp_after_ip(pkt: &[u8]) -> Option<(bool, usize)> {
    match pkt.first()? >> 4 {
        ipv4::VERSION => {
            let ip = ipv4::Packet::new_unchecked(pkt.get(..ipv4::HEADER_LEN)?);
            let ip_len = ip.header_len();
            (ip.protocol() == TCP && ip_len >= ipv4::HEADER_LEN).then_some((true, ip_len))
        }
        ipv6::VERSION => {
            let ip = ipv6::Packet::new_unchecked(pkt.get(..ipv6::HEADER_LEN)?);
            (ip.next_header() == TCP).then_some((false, ipv6::HEADER_LEN))
        }
        _ => None,
    }
}

fn split_tcp(
    mss: usize,
    pkt: &[u8],
    out: &mut [u8],
    first: usize,
    mut take: impl FnMut(&[u8]) -> bool,
) -> Result<Option<usize>, OffloadError> {
    let (v4, ip_len) = tcp_after_ip(pkt).ok_or(OffloadError::Malformed)?;
    let burst = pkt
        .get(ip_len..)
        .and_then(|t| tcp::Packet::new_checked(t).ok())
        .ok_or(OffloadError::Malformed)?;
    let headers = ip_len + burst.header_len();
    if mss == 0 || out.len() < headers + mss {
        return Err(OffloadError::Malformed);
    }
    let payload = burst.payload();
    let seq = burst.seq_number();
    let flags = burst.flags();
    let ident = if v4 {
        ipv4::Packet::new_unchecked(pkt).ident()
    } else {
        0
    };
    let count = payload.len().div_ceil(mss).max(1);
    for i in first..count {
        let start = i * mss;
        let chunk = &payload[start..(start + mss).min(payload.len())];
        let len = headers + chunk.len();
        let seg = &mut out[..len];
        seg[..headers].copy_from_slice(&pkt[..headers]);
        seg[headers..].copy_from_slice(chunk);
        let (ip, tcp) = seg.split_at_mut(ip_len);
        let mut tcp = tcp::Packet::new_unchecked(tcp);
        tcp.set_seq_number(seq.wrapping_add(start as u32));
        let mut f = flags;
        if i + 1 < count {
            f &= !(FIN | PSH);
        }
        if i > 0 {
            f &= !CWR;
        }
        tcp.set_flags(f);
        if v4 {
            let mut ip = ipv4::Packet::new_unchecked(ip);
            ip.set_total_len(len as u16);
            ip.set_ident(ident.wrapping_add(i as u16));
            ip.fill_checksum();
            tcp.fill_checksum_v4(ip.src_addr(), ip.dst_addr());
        } else {
            let mut ip = ipv6::Packet::new_unchecked(ip);
            ip.set_payload_len((len - ipv6::HEADER_LEN) as u16);
            tcp.fill_checksum_v6(&ip.src_addr(), &ip.dst_addr());
        }
        if !take(seg) {
            return Ok(Some(i));
        }
    }
    Ok(None)
}

/// How a TCP packet written to the TUN may join a burst: its flow, where its payload
/// starts and how long it is, its sequence number and flags.
struct TcpSeg<'a> {
    v4: bool,
    /// The IP and TCP headers, up to the payload.
    headers: &'a [u8],
    ip_len: usize,
    seq: u32,
    flags: u8,
    payload_len: usize,
}

/// The longest headers a segment that joins bursts can have: IPv6 (IPv4 options are
/// not accepted) and TCP with the most options.
const MAX_HEADERS: usize = ipv6::HEADER_LEN + tcp::MAX_HEADER_LEN;

impl TcpSeg<'_> {
    /// The headers with the fields that differ from segment to segment of one burst
    /// zeroed: the IP length, identification and checksum; the TCP sequence number,
    /// flags, checksum and urgent pointer. Segments of one burst agree in the rest
    /// byte for byte (the kernel's GRO is as strict).
    fn fixed_headers<'b>(&self, buf: &'b mut [u8; MAX_HEADERS]) -> &'b [u8] {
        let headers = &mut buf[..self.headers.len()];
        headers.copy_from_slice(self.headers);
        let (ip, tcp) = headers.split_at_mut(self.ip_len);
        if self.v4 {
            let mut ip = ipv4::Packet::new_unchecked(ip);
            ip.set_total_len(0);
            ip.set_ident(0);
            ip.set_checksum(0);
        } else {
            ipv6::Packet::new_unchecked(ip).set_payload_len(0);
        }
        let mut tcp = tcp::Packet::new_unchecked(tcp);
        tcp.set_seq_number(0);
        tcp.set_flags(0);
        tcp.set_checksum(0);
        tcp.set_urgent_ptr(0);
        headers
    }
}

/// `p` as a segment that may join a burst: an IPv4 packet without options or
/// fragmentation, or an IPv6 packet without extension headers, whose length fields
/// match the buffer, carrying a TCP data segment with ACK and at most PSH besides.
fn tcp_seg(p: &[u8]) -> Option<TcpSeg<'_>> {
    let (v4, ip_len) = tcp_after_ip(p)?;
    let whole = if v4 {
        let ip = ipv4::Packet::new_unchecked(p);
        ip_len == ipv4::HEADER_LEN && !ip.is_fragment() && usize::from(ip.total_len()) == p.len()
    } else {
        ipv6::Packet::new_unchecked(p).total_len() == p.len()
    };
    if !whole {
        return None;
    }
    let tcp = tcp::Packet::new_checked(p.get(ip_len..)?).ok()?;
    let flags = tcp.flags();
    // Only plain data segments join bursts (the kernel's GRO is as strict).
    if tcp.payload().is_empty() || flags & !(ACK | PSH) != 0 || flags & ACK == 0 {
        return None;
    }
    Some(TcpSeg {
        v4,
        headers: &p[..ip_len + tcp.header_len()],
        ip_len,
        seq: tcp.seq_number(),
        flags,
        payload_len: tcp.payload().len(),
    })
}

/// Groups `pkts` (in order) into runs that can be written as one burst: consecutive
/// segments of one TCP flow, in sequence, all of one size but the last, with PSH at
/// most on the last, at most 64 KiB together. Calls `run(first, count)` per run; a run
/// of one is a packet written as it is.
pub fn bursts(pkts: &[&[u8]], mut run: impl FnMut(usize, usize)) {
    let mut i = 0;
    while i < pkts.len() {
        let count = burst_len(pkts, i);
        run(i, count);
        i += count;
    }
}

/// The length of the run that starts at `pkts[i]` (see [`bursts`]): at least 1 when
/// `i` is in range, 0 past the end. Lets a writer take one run at a time, with no list
/// of runs to keep.
pub fn burst_len(pkts: &[&[u8]], i: usize) -> usize {
    let Some(first) = pkts.get(i) else {
        return 0;
    };
    let Some(first) = tcp_seg(first) else {
        return 1;
    };
    let mut first_buf = [0u8; MAX_HEADERS];
    let mut seg_buf = [0u8; MAX_HEADERS];
    let first_fixed = first.fixed_headers(&mut first_buf);
    let mss = first.payload_len;
    let mut total = pkts[i].len();
    let mut next_seq = first.seq.wrapping_add(mss as u32);
    let mut prev_flags = first.flags;
    let mut j = i + 1;
    while j < pkts.len() && prev_flags & PSH == 0 {
        let Some(seg) = tcp_seg(pkts[j]) else { break };
        if seg.seq != next_seq
            || seg.payload_len > mss
            || total + seg.payload_len > MAX_BURST_LEN
            || seg.fixed_headers(&mut seg_buf) != first_fixed
        {
            break;
        }
        total += seg.payload_len;
        next_seq = next_seq.wrapping_add(seg.payload_len as u32);
        prev_flags = seg.flags;
        j += 1;
        if seg.payload_len < mss {
            break;
        }
    }
    j - i
}

/// The largest packet a burst may become.
const MAX_BURST_LEN: usize = 65535;

/// Builds the burst of `pkts` (one run from [`bursts`], more than one packet) into
/// `out` behind a virtio-net header; returns the bytes to write.
pub fn build_burst(pkts: &[&[u8]], out: &mut [u8]) -> usize {
    let first = tcp_seg(pkts[0]).expect("bursts() checked it");
    let headers = first.headers.len();
    let ip_len = first.ip_len;
    let (vnet, body) = out
        .split_first_chunk_mut::<VNET_HDR_LEN>()
        .expect("room for the virtio-net header");
    body[..headers].copy_from_slice(first.headers);
    let mut at = headers;
    let mut flags = 0u8;
    for p in pkts {
        let payload = &p[headers..];
        body[at..at + payload.len()].copy_from_slice(payload);
        at += payload.len();
        flags |= tcp::Packet::new_unchecked(&p[ip_len..]).flags();
    }
    let pkt_len = at;
    let (ip, seg) = body[..pkt_len].split_at_mut(ip_len);
    let pseudo = if first.v4 {
        let mut ip = ipv4::Packet::new_unchecked(ip);
        ip.set_total_len(pkt_len as u16);
        ip.fill_checksum();
        pseudo_header_v4(ip.src_addr(), ip.dst_addr(), TCP, seg.len() as u16)
    } else {
        let mut ip = ipv6::Packet::new_unchecked(ip);
        ip.set_payload_len((pkt_len - ipv6::HEADER_LEN) as u16);
        pseudo_header_v6(&ip.src_addr(), &ip.dst_addr(), TCP, seg.len() as u32)
    };
    let mut tcp = tcp::Packet::new_unchecked(seg);
    tcp.set_flags(flags); // PSH from the last segment
    // A partial checksum, as the kernel's own GSO packets carry: the pseudo-header sum
    // in the field, the rest left to whoever segments or checks it.
    tcp.set_checksum(pseudo);
    VnetHdr {
        flags: F_NEEDS_CSUM,
        gso_type: if first.v4 { GSO_TCPV4 } else { GSO_TCPV6 },
        hdr_len: headers as u16,
        gso_size: (pkts[0].len() - headers) as u16,
        csum_start: ip_len as u16,
        csum_offset: tcp::CHECKSUM_OFFSET as u16,
    }
    .emit(vnet);
    VNET_HDR_LEN + pkt_len
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::{Ipv4Addr, Ipv6Addr};
    use wire::checksum::combine;

    fn tcp_v4(payload_len: usize, flags: u8) -> Vec<u8> {
        let total = 20 + 20 + payload_len;
        let mut p = vec![0u8; total];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        p[4..6].copy_from_slice(&100u16.to_be_bytes());
        p[8] = 64;
        p[9] = TCP;
        p[12..16].copy_from_slice(&[198, 19, 0, 1]);
        p[16..20].copy_from_slice(&[198, 19, 0, 2]);
        p[20..22].copy_from_slice(&5001u16.to_be_bytes());
        p[24..28].copy_from_slice(&1000u32.to_be_bytes());
        p[32] = 5 << 4;
        p[33] = flags;
        for (i, b) in p[40..].iter_mut().enumerate() {
            *b = i as u8;
        }
        p
    }

    fn tcp_checksum_ok(seg: &[u8]) -> bool {
        let src = Ipv4Addr::from(<[u8; 4]>::try_from(&seg[12..16]).unwrap());
        let dst = Ipv4Addr::from(<[u8; 4]>::try_from(&seg[16..20]).unwrap());
        combine(
            pseudo_header_v4(src, dst, TCP, (seg.len() - 20) as u16),
            sum(&seg[20..]),
        ) == 0xffff
    }

    #[test]
    fn tcp_burst_becomes_mss_segments() {
        let mut pkt = tcp_v4(3000, PSH | FIN | 0x10);
        let hdr = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4,
            hdr_len: 40,
            gso_size: 1400,
            csum_start: 20,
            csum_offset: 16,
        };
        let mut scratch = vec![0u8; 65536];
        let mut segs = Vec::new();
        let n = split(&hdr, &mut pkt, &mut scratch, |s| segs.push(s.to_vec())).unwrap();
        assert_eq!(n, 3);
        assert_eq!(
            segs.iter().map(|s| s.len()).collect::<Vec<_>>(),
            vec![1440, 1440, 240]
        );
        let mut joined = Vec::new();
        for (i, s) in segs.iter().enumerate() {
            assert_eq!(sum(&s[..20]), 0xffff, "IPv4 header checksum of segment {i}");
            assert!(tcp_checksum_ok(s), "TCP checksum of segment {i}");
            assert_eq!(u16::from_be_bytes([s[4], s[5]]), 100 + i as u16);
            assert_eq!(
                u32::from_be_bytes(s[24..28].try_into().unwrap()),
                1000 + 1400 * i as u32
            );
            let last = i == 2;
            assert_eq!(s[33] & (FIN | PSH) != 0, last, "FIN/PSH only on the last");
            joined.extend_from_slice(&s[40..]);
        }
        assert_eq!(joined, pkt[40..]);
    }

    #[test]
    fn partial_checksum_is_finished() {
        let mut pkt = tcp_v4(100, 0x10);
        // The kernel leaves the pseudo-header sum in the field.
        let ph = pseudo_header_v4(
            Ipv4Addr::new(198, 19, 0, 1),
            Ipv4Addr::new(198, 19, 0, 2),
            TCP,
            120,
        );
        pkt[36..38].copy_from_slice(&ph.to_be_bytes());
        let hdr = VnetHdr {
            flags: F_NEEDS_CSUM,
            csum_start: 20,
            csum_offset: 16,
            ..Default::default()
        };
        let mut out = Vec::new();
        split(&hdr, &mut pkt, &mut [], |s| out = s.to_vec()).unwrap();
        assert!(tcp_checksum_ok(&out));
    }

    /// Segments of one flow come back together, and splitting the burst gives the
    /// segments back byte for byte.
    #[test]
    fn bursts_round_trip_through_split() {
        let mut big = tcp_v4(4000, PSH | ACK);
        let segs = segments(&mut big, GSO_TCPV4, 1000);
        let mut other = tcp_v4(10, ACK);
        other[20] = 9; // another flow
        let mut pkts: Vec<&[u8]> = segs.iter().map(|s| s.as_slice()).collect();
        pkts.insert(2, &other);
        let mut runs = Vec::new();
        bursts(&pkts, |i, n| runs.push((i, n)));
        assert_eq!(runs, vec![(0, 2), (2, 1), (3, 2)]);
        let mut out = vec![0u8; 70000];
        let n = build_burst(&pkts[3..5], &mut out);
        let h = VnetHdr::parse(&out).unwrap();
        assert_eq!(
            (h.gso_type, h.gso_size, h.csum_start, h.csum_offset),
            (GSO_TCPV4, 1000, 20, 16)
        );
        let again = segments_by(&h, &mut out[VNET_HDR_LEN..n]);
        assert_eq!(again, segs[2..4].to_vec());
    }

    #[test]
    fn nonsense_is_refused_not_panicked() {
        let mut scratch = vec![0u8; 2000];
        for (first, len) in [0x45u8, 0x4f, 0x60]
            .into_iter()
            .flat_map(|f| (0..80).map(move |l| (f, l)))
        {
            let mut pkt = vec![first; len];
            if len > 9 {
                pkt[6] = TCP;
                pkt[9] = TCP;
            }
            for gso_type in [GSO_NONE, GSO_TCPV4, GSO_TCPV6, 3, 0x81] {
                let hdr = VnetHdr {
                    flags: F_NEEDS_CSUM,
                    gso_type,
                    gso_size: 7,
                    csum_start: 60,
                    csum_offset: 30,
                    ..Default::default()
                };
                let _ = split(&hdr, &mut pkt, &mut scratch, |_| {});
            }
        }
        let hdr = VnetHdr {
            gso_type: GSO_TCPV4,
            gso_size: 1400,
            ..Default::default()
        };
        let mut pkt = tcp_v4(3000, 0);
        assert_eq!(
            split(&hdr, &mut pkt, &mut [0u8; 100], |_| {}),
            Err(OffloadError::Malformed)
        );
    }

    fn tcp_v6(payload_len: usize, flags: u8) -> Vec<u8> {
        let v4 = tcp_v4(payload_len, flags);
        let mut p = vec![0u8; 40];
        p[0] = 0x60;
        p[4..6].copy_from_slice(&((20 + payload_len) as u16).to_be_bytes());
        p[6] = TCP;
        p[7] = 64;
        p[8..24].copy_from_slice(&V6_SRC.octets());
        p[24..40].copy_from_slice(&V6_DST.octets());
        p.extend_from_slice(&v4[20..]);
        p
    }

    /// `packet` split in place as the kernel's offload header says (`gso_type`,
    /// segments of `gso_size` bytes of payload), the segments copied out.
    fn segments(packet: &mut [u8], gso_type: u8, gso_size: u16) -> Vec<Vec<u8>> {
        let hdr = VnetHdr {
            gso_type,
            gso_size,
            ..Default::default()
        };
        segments_by(&hdr, packet)
    }

    /// `packet` split in place as `hdr` says, the segments copied out.
    fn segments_by(hdr: &VnetHdr, packet: &mut [u8]) -> Vec<Vec<u8>> {
        let mut scratch = vec![0u8; 65536];
        let mut segs = Vec::new();
        split(hdr, packet, &mut scratch, |s| segs.push(s.to_vec())).unwrap();
        segs
    }

    const V6_SRC: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1);
    const V6_DST: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 2);

    /// The IPv6 flavour: payload length and checksum over the IPv6 pseudo-header per
    /// segment, and back into one burst.
    #[test]
    fn ipv6_burst_round_trip() {
        let mut big = tcp_v6(2500, PSH | ACK);
        let segs = segments(&mut big, GSO_TCPV6, 1000);
        assert_eq!(
            segs.iter().map(|s| s.len()).collect::<Vec<_>>(),
            vec![1060, 1060, 560]
        );
        for (i, s) in segs.iter().enumerate() {
            let tcp_len = s.len() - 40;
            assert_eq!(u16::from_be_bytes([s[4], s[5]]) as usize, tcp_len);
            let pseudo = pseudo_header_v6(&V6_SRC, &V6_DST, TCP, tcp_len as u32);
            assert_eq!(combine(pseudo, sum(&s[40..])), 0xffff, "segment {i}");
            assert_eq!(s[53] & PSH != 0, i == 2, "PSH only on the last");
        }
        let pkts: Vec<&[u8]> = segs.iter().map(|s| s.as_slice()).collect();
        let mut runs = Vec::new();
        bursts(&pkts, |i, n| runs.push((i, n)));
        assert_eq!(runs, vec![(0, 3)]);
        let mut out = vec![0u8; 70000];
        let n = build_burst(&pkts, &mut out);
        let h = VnetHdr::parse(&out).unwrap();
        assert_eq!(
            (
                h.gso_type,
                h.hdr_len,
                h.gso_size,
                h.csum_start,
                h.csum_offset
            ),
            (GSO_TCPV6, 60, 1000, 40, 16)
        );
        // The original burst again, but for the partial checksum in the TCP header.
        let built = &out[VNET_HDR_LEN..n];
        assert!(built[..56] == big[..56] && built[58..] == big[58..]);
        let pseudo = pseudo_header_v6(&V6_SRC, &V6_DST, TCP, 2520);
        assert_eq!(built[56..58], pseudo.to_be_bytes());
        let again = segments_by(&h, &mut out[VNET_HDR_LEN..n]);
        assert!(again == segs);
    }

    /// Segments that differ in a header field that must match stay apart.
    #[test]
    fn headers_that_differ_break_a_burst() {
        let mut big = tcp_v4(2000, ACK);
        let segs = segments(&mut big, GSO_TCPV4, 1000);
        // TTL, window, the IP reserved flag: each keeps the second segment out.
        for (at, bit) in [(8, 1u8), (34, 1), (6, 0x80)] {
            let mut second = segs[1].clone();
            second[at] ^= bit;
            let pkts: [&[u8]; 2] = [&segs[0], &second];
            let mut runs = Vec::new();
            bursts(&pkts, |i, n| runs.push((i, n)));
            assert_eq!(runs, vec![(0, 1), (1, 1)], "byte {at}");
        }
        // Identification and checksum may differ.
        let mut second = segs[1].clone();
        second[4] ^= 0x55;
        second[10] ^= 0x55;
        let pkts: [&[u8]; 2] = [&segs[0], &second];
        let mut runs = Vec::new();
        bursts(&pkts, |i, n| runs.push((i, n)));
        assert_eq!(runs, vec![(0, 2)]);
    }

    /// Stopping and resuming gives the same segments as one whole split.
    #[test]
    fn split_resumes_where_it_stopped() {
        let hdr = VnetHdr {
            gso_type: GSO_TCPV4,
            gso_size: 500,
            ..Default::default()
        };
        let mut scratch = vec![0u8; 65536];
        let mut pkt = tcp_v4(2200, PSH | ACK);
        let mut whole = Vec::new();
        split(&hdr, &mut pkt, &mut scratch, |s| whole.push(s.to_vec())).unwrap();
        assert_eq!(whole.len(), 5);
        let mut pieces = Vec::new();
        let mut next = Some(0);
        while let Some(first) = next {
            let mut room = 2;
            next = split_from(&hdr, &mut pkt, &mut scratch, first, |s| {
                if room == 0 {
                    return false;
                }
                room -= 1;
                pieces.push(s.to_vec());
                true
            })
            .unwrap();
        }
        assert!(pieces == whole);
        assert_eq!(
            split_from(&hdr, &mut pkt, &mut scratch, 9, |_| panic!("past the end")),
            Ok(None)
        );
        let plain = VnetHdr::default();
        assert_eq!(
            split_from(&plain, &mut pkt, &mut scratch, 0, |_| false),
            Ok(Some(0))
        );
        assert_eq!(
            split_from(&plain, &mut pkt, &mut scratch, 1, |_| true),
            Ok(None)
        );
    }
}
