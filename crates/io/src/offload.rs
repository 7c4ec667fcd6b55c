//! TUN offloads: with `IFF_VNET_HDR` and `TUNSETOFFLOAD`, the kernel hands the TUN
//! reader whole TCP send bursts (up to 64 KiB, one `virtio_net_hdr` in front) instead of
//! MTU-sized packets, and leaves checksums for the reader to finish. One read then
//! replaces dozens. This module turns such a burst back into MTU-sized packets with
//! complete headers and checksums: what the kernel's own GSO would have done, and what
//! every packet sent through the tunnel must look like.

use core::net::{Ipv4Addr, Ipv6Addr};
use wire::checksum::{combine, pseudo_header_v4, pseudo_header_v6, sum};

/// `struct virtio_net_hdr` (include/uapi/linux/virtio_net.h), little-endian on x86.
pub const VNET_HDR_LEN: usize = 10;
const F_NEEDS_CSUM: u8 = 1;
const GSO_NONE: u8 = 0;
const GSO_TCPV4: u8 = 1;
const GSO_TCPV6: u8 = 4;
const GSO_ECN: u8 = 0x80;

const TCP: u8 = 6;
const TCP_FIN: u8 = 0x01;
const TCP_PSH: u8 = 0x08;
const TCP_CWR: u8 = 0x80;

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
        let b: &[u8; VNET_HDR_LEN] = b.get(..VNET_HDR_LEN)?.try_into().ok()?;
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
    match hdr.gso_type & !GSO_ECN {
        GSO_NONE => {
            if hdr.flags & F_NEEDS_CSUM != 0 {
                finish_checksum(pkt, hdr.csum_start as usize, hdr.csum_offset as usize)?;
            }
            emit(pkt);
            Ok(1)
        }
        GSO_TCPV4 | GSO_TCPV6 => split_tcp(hdr.gso_size as usize, pkt, scratch, emit),
        _ => Err(OffloadError::Unsupported),
    }
}

fn split_tcp(
    mss: usize,
    pkt: &[u8],
    out: &mut [u8],
    mut emit: impl FnMut(&[u8]),
) -> Result<usize, OffloadError> {
    let v4 = match pkt.first().map(|b| b >> 4) {
        Some(4) => true,
        Some(6) => false,
        _ => return Err(OffloadError::Malformed),
    };
    let ip_len = if v4 {
        ((pkt[0] & 0x0f) as usize) * 4
    } else {
        40
    };
    let proto = if v4 { pkt.get(9) } else { pkt.get(6) };
    if ip_len < 20 || proto != Some(&TCP) || pkt.len() < ip_len + 20 {
        return Err(OffloadError::Malformed);
    }
    let tcp_len = ((pkt[ip_len + 12] >> 4) as usize) * 4;
    let headers = ip_len + tcp_len;
    if tcp_len < 20 || pkt.len() < headers || mss == 0 || out.len() < headers + mss {
        return Err(OffloadError::Malformed);
    }
    let payload = &pkt[headers..];
    let seq = u32::from_be_bytes(pkt[ip_len + 4..ip_len + 8].try_into().expect("4 bytes"));
    let ident = u16::from_be_bytes([pkt[4], pkt[5]]);
    let flags = pkt[ip_len + 13];
    let count = payload.len().div_ceil(mss).max(1);
    for i in 0..count {
        let start = i * mss;
        let chunk = &payload[start..(start + mss).min(payload.len())];
        let len = headers + chunk.len();
        let seg = &mut out[..len];
        seg[..headers].copy_from_slice(&pkt[..headers]);
        seg[headers..].copy_from_slice(chunk);
        if v4 {
            seg[2..4].copy_from_slice(&(len as u16).to_be_bytes());
            seg[4..6].copy_from_slice(&ident.wrapping_add(i as u16).to_be_bytes());
            seg[10..12].fill(0);
            let c = !sum(&seg[..ip_len]);
            seg[10..12].copy_from_slice(&c.to_be_bytes());
        } else {
            seg[4..6].copy_from_slice(&((len - 40) as u16).to_be_bytes());
        }
        let tcp = ip_len;
        seg[tcp + 4..tcp + 8].copy_from_slice(&seq.wrapping_add(start as u32).to_be_bytes());
        let mut f = flags;
        if i + 1 < count {
            f &= !(TCP_FIN | TCP_PSH);
        }
        if i > 0 {
            f &= !TCP_CWR;
        }
        seg[tcp + 13] = f;
        seg[tcp + 16..tcp + 18].fill(0);
        let seg_len = len - ip_len;
        let pseudo = if v4 {
            let src = Ipv4Addr::from(<[u8; 4]>::try_from(&seg[12..16]).expect("4 bytes"));
            let dst = Ipv4Addr::from(<[u8; 4]>::try_from(&seg[16..20]).expect("4 bytes"));
            pseudo_header_v4(src, dst, TCP, seg_len as u16)
        } else {
            let src = Ipv6Addr::from(<[u8; 16]>::try_from(&seg[8..24]).expect("16 bytes"));
            let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&seg[24..40]).expect("16 bytes"));
            pseudo_header_v6(&src, &dst, TCP, seg_len as u32)
        };
        let c = !combine(pseudo, sum(&seg[tcp..]));
        seg[tcp + 16..tcp + 18].copy_from_slice(&c.to_be_bytes());
        emit(seg);
    }
    Ok(count)
}

/// How a TCP packet written to the TUN may join a burst: its flow, where its payload
/// starts and how long it is, its sequence number and flags.
struct TcpSeg<'a> {
    v4: bool,
    /// Everything up to the payload except the fields that differ per segment.
    headers: &'a [u8],
    ip_len: usize,
    seq: u32,
    flags: u8,
    payload_len: usize,
}

const TCP_ACK: u8 = 0x10;

fn tcp_seg(p: &[u8]) -> Option<TcpSeg<'_>> {
    let v4 = match p.first()? >> 4 {
        4 => true,
        6 => false,
        _ => return None,
    };
    let ip_len = if v4 {
        // No options, no fragments.
        if p[0] & 0x0f != 5
            || p.len() < 20
            || p[9] != TCP
            || u16::from_be_bytes([p[6], p[7]]) & 0x3fff != 0
        {
            return None;
        }
        if u16::from_be_bytes([p[2], p[3]]) as usize != p.len() {
            return None;
        }
        20
    } else {
        if p.len() < 40 || p[6] != TCP || u16::from_be_bytes([p[4], p[5]]) as usize + 40 != p.len()
        {
            return None;
        }
        40
    };
    let tcp_len = ((*p.get(ip_len + 12)? >> 4) as usize) * 4;
    if tcp_len < 20 || p.len() <= ip_len + tcp_len {
        return None;
    }
    let flags = p[ip_len + 13];
    // Only plain data segments join bursts (the kernel's GRO is as strict).
    if flags & !(TCP_ACK | TCP_PSH) != 0 || flags & TCP_ACK == 0 {
        return None;
    }
    Some(TcpSeg {
        v4,
        headers: &p[..ip_len + tcp_len],
        ip_len,
        seq: u32::from_be_bytes(p[ip_len + 4..ip_len + 8].try_into().ok()?),
        flags,
        payload_len: p.len() - ip_len - tcp_len,
    })
}

/// Whether `b` continues the burst that `a` started: same flow and the same headers in
/// every field that does not change from segment to segment.
fn same_burst(a: &TcpSeg, b: &TcpSeg) -> bool {
    if a.v4 != b.v4 || a.headers.len() != b.headers.len() {
        return false;
    }
    let (x, y) = (a.headers, b.headers);
    let ip_same = if a.v4 {
        // version/IHL, TOS, flags, TTL, protocol, addresses; not length, ident, checksum
        x[0..2] == y[0..2] && x[6..10] == y[6..10] && x[12..20] == y[12..20]
    } else {
        x[0..4] == y[0..4] && x[6..40] == y[6..40]
    };
    let t = a.ip_len;
    // ports; ack number, header length, window; options (timestamps must match too)
    ip_same
        && x[t..t + 4] == y[t..t + 4]
        && x[t + 8..t + 13] == y[t + 8..t + 13]
        && x[t + 14..t + 16] == y[t + 14..t + 16]
        && x[t + 20..] == y[t + 20..]
}

/// Groups `pkts` (in order) into runs that can be written as one burst: consecutive
/// segments of one TCP flow, in sequence, all of one size but the last, with PSH at
/// most on the last, at most 64 KiB together. Calls `run(first, count)` per run; a run
/// of one is a packet written as it is.
pub fn bursts(pkts: &[&[u8]], mut run: impl FnMut(usize, usize)) {
    let mut i = 0;
    while i < pkts.len() {
        let Some(first) = tcp_seg(pkts[i]) else {
            run(i, 1);
            i += 1;
            continue;
        };
        let mss = first.payload_len;
        let mut total = pkts[i].len();
        let mut next_seq = first.seq.wrapping_add(mss as u32);
        let mut prev_flags = first.flags;
        let mut j = i + 1;
        while j < pkts.len() && prev_flags & TCP_PSH == 0 {
            let Some(seg) = tcp_seg(pkts[j]) else { break };
            if seg.seq != next_seq
                || seg.payload_len > mss
                || total + seg.payload_len > MAX_BURST_LEN
                || !same_burst(&first, &seg)
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
        run(i, j - i);
        i = j;
    }
}

/// The largest packet a burst may become.
const MAX_BURST_LEN: usize = 65535;

/// Builds the burst of `pkts` (one run from [`bursts`], more than one packet) into
/// `out` behind a virtio-net header; returns the bytes to write.
pub fn build_burst(pkts: &[&[u8]], out: &mut [u8]) -> usize {
    let first = tcp_seg(pkts[0]).expect("bursts() checked it");
    let headers = first.headers.len();
    let ip_len = first.ip_len;
    let mut len = VNET_HDR_LEN + headers;
    let body = &mut out[VNET_HDR_LEN..];
    body[..headers].copy_from_slice(&pkts[0][..headers]);
    let mut at = headers;
    let mut flags = 0u8;
    for p in pkts {
        let payload = &p[headers..];
        body[at..at + payload.len()].copy_from_slice(payload);
        at += payload.len();
        flags |= p[ip_len + 13];
    }
    len += at - headers;
    let pkt_len = at;
    body[ip_len + 13] = flags; // PSH from the last segment
    let tcp_total = pkt_len - ip_len;
    let pseudo = if first.v4 {
        body[2..4].copy_from_slice(&(pkt_len as u16).to_be_bytes());
        body[10..12].fill(0);
        let c = !sum(&body[..20]);
        body[10..12].copy_from_slice(&c.to_be_bytes());
        let src = Ipv4Addr::from(<[u8; 4]>::try_from(&body[12..16]).expect("4 bytes"));
        let dst = Ipv4Addr::from(<[u8; 4]>::try_from(&body[16..20]).expect("4 bytes"));
        pseudo_header_v4(src, dst, TCP, tcp_total as u16)
    } else {
        body[4..6].copy_from_slice(&((pkt_len - 40) as u16).to_be_bytes());
        let src = Ipv6Addr::from(<[u8; 16]>::try_from(&body[8..24]).expect("16 bytes"));
        let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&body[24..40]).expect("16 bytes"));
        pseudo_header_v6(&src, &dst, TCP, tcp_total as u32)
    };
    // A partial checksum, as the kernel's own GSO packets carry: the pseudo-header sum
    // in the field, the rest left to whoever segments or checks it.
    body[ip_len + 16..ip_len + 18].copy_from_slice(&pseudo.to_be_bytes());
    let mss = (pkts[0].len() - headers) as u16;
    let hdr = &mut out[..VNET_HDR_LEN];
    hdr[0] = F_NEEDS_CSUM;
    hdr[1] = if first.v4 { GSO_TCPV4 } else { GSO_TCPV6 };
    hdr[2..4].copy_from_slice(&(headers as u16).to_le_bytes());
    hdr[4..6].copy_from_slice(&mss.to_le_bytes());
    hdr[6..8].copy_from_slice(&(ip_len as u16).to_le_bytes());
    hdr[8..10].copy_from_slice(&16u16.to_le_bytes());
    len
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let mut pkt = tcp_v4(3000, TCP_PSH | TCP_FIN | 0x10);
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
            assert_eq!(
                s[33] & (TCP_FIN | TCP_PSH) != 0,
                last,
                "FIN/PSH only on the last"
            );
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
        let mut big = tcp_v4(4000, TCP_PSH | TCP_ACK);
        let hdr = VnetHdr {
            gso_type: GSO_TCPV4,
            gso_size: 1000,
            ..Default::default()
        };
        let mut scratch = vec![0u8; 65536];
        let mut segs = Vec::new();
        split(&hdr, &mut big, &mut scratch, |s| segs.push(s.to_vec())).unwrap();
        let mut other = tcp_v4(10, TCP_ACK);
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
        let mut again = Vec::new();
        split(&h, &mut out[VNET_HDR_LEN..n], &mut scratch, |s| {
            again.push(s.to_vec())
        })
        .unwrap();
        assert_eq!(again, segs[2..4].to_vec());
    }

    #[test]
    fn nonsense_is_refused_not_panicked() {
        let mut scratch = vec![0u8; 2000];
        for len in 0..80 {
            let mut pkt = vec![0x45u8; len];
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
}
