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
