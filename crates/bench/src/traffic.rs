//! `linerate bench traffic`: a packet generator and a counting sink on AF_XDP, for
//! measuring a gateway (or anything that forwards) between two interfaces. The
//! sender puts IPv4/UDP packets of the asked sizes on the wire as fast as the
//! interface takes them, from buffers filled once and reused as the kernel hands
//! them back; the sink counts the UDP packets to one port that arrive. Both print
//! one `key=value` line at the end, for scripts.
//!
//! Jumbo frames (IP packets past 1500 bytes; with `--jumbo` for the sink) go in
//! parts over page-sized buffers (multi-buffer AF_XDP): the sender writes each
//! frame across a slot of consecutive buffers and sends it as their parts.

use crate::options::{TrafficCount, TrafficSend};
use io::{Fragment, XdpOptions, XdpPort};
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

/// Buffers the sender and the sink use.
const BUFFERS: usize = 4096;
const BATCH: usize = 64;
/// The largest IP packet sent: a 9216-byte MTU's.
const MAX_IP: usize = 9216;

/// How a queue's memory is cut: standard frames one to a 2048-byte buffer,
/// written 256 bytes in (the data plane's headroom); jumbo ones across slots of
/// three page-sized buffers, from the first's start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layout {
    buffer: usize,
    slot: usize,
    start: usize,
}

const STANDARD: Layout = Layout {
    buffer: io::xdp::FRAME_SIZE,
    slot: 1,
    start: 256,
};
const JUMBO: Layout = Layout {
    buffer: 4096,
    slot: 3,
    start: 0,
};

impl Layout {
    /// The layout for IP packets of up to `largest` bytes.
    fn for_packets(largest: usize) -> Layout {
        if 14 + largest <= STANDARD.buffer - STANDARD.start {
            STANDARD
        } else {
            JUMBO
        }
    }

    fn slots(&self) -> usize {
        BUFFERS / self.slot
    }

    /// How many parts a `len`-byte frame takes.
    fn part_count(&self, len: usize) -> usize {
        let room = self.buffer - self.start;
        if len <= room {
            1
        } else {
            1 + (len - room).div_ceil(self.buffer)
        }
    }

    /// The buffer of the last part of a `len`-byte frame in slot `s`.
    fn last_buffer(&self, s: usize, len: usize) -> usize {
        s * self.slot + self.part_count(len) - 1
    }

    /// The parts of a `len`-byte frame in slot `s`.
    fn parts(&self, s: usize, len: usize, out: &mut Vec<Fragment>) {
        let first = s * self.slot;
        let room = self.buffer - self.start;
        let n = self.part_count(len);
        for i in 0..n {
            let (offset, here) = if i == 0 {
                (self.start, len.min(room))
            } else {
                (0, (len - room - (i - 1) * self.buffer).min(self.buffer))
            };
            out.push(Fragment {
                buf: (first + i) as u32,
                offset: offset as u16,
                len: here as u16,
                more: i + 1 < n,
            });
        }
    }

    fn options(&self) -> XdpOptions {
        XdpOptions {
            ring_size: 2048,
            zero_copy: true,
            skb_mode: false,
            headroom: 0,
            chunk_size: self.buffer as u32,
            multi_buffer: *self == JUMBO,
        }
    }
}

/// The UMEM of one queue: page-aligned memory, as a worker's arena has.
struct Umem(dataplane::arena::PageMemory, Layout);

impl Umem {
    fn new(layout: Layout) -> Umem {
        Umem(
            dataplane::arena::PageMemory::new(BUFFERS * layout.buffer),
            layout,
        )
    }

    /// Slot `s`, from where its frame starts.
    fn slot(&mut self, s: usize) -> &mut [u8] {
        let l = self.1;
        assert!(s < l.slots());
        let (at, len) = (s * l.slot * l.buffer + l.start, l.slot * l.buffer - l.start);
        // SAFETY: inside the allocation; the caller writes a slot only while the
        // kernel does not hold it (before the first send), and `&mut self` keeps
        // any other view of this memory out meanwhile.
        unsafe { std::slice::from_raw_parts_mut(self.0.base().add(at), len) }
    }

    /// Buffer `i`.
    fn buffer(&mut self, i: usize) -> &mut [u8] {
        let b = self.1.buffer;
        assert!(i < BUFFERS);
        // SAFETY: as for `slot`: a buffer the kernel has handed back.
        unsafe { std::slice::from_raw_parts_mut(self.0.base().add(i * b), b) }
    }
}

fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let parts: Vec<&str> = s.split(':').collect();
    let mut mac = [0u8; 6];
    if parts.len() != 6 {
        return Err(format!("{s:?} is not a MAC address"));
    }
    for (m, p) in mac.iter_mut().zip(parts) {
        *m = u8::from_str_radix(p, 16).map_err(|_| format!("{s:?} is not a MAC address"))?;
    }
    Ok(mac)
}

/// What every generated frame shares.
struct Template {
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src: Ipv4Addr,
    dst: Ipv4Addr,
    dport: u16,
}

/// An Ethernet frame with an IPv4/UDP packet of `ip_len` bytes from `sport`; its
/// length.
fn frame(buf: &mut [u8], t: &Template, sport: u16, ip_len: usize) -> usize {
    let f = &mut buf[..14 + ip_len];
    f.fill(0);
    f[..6].copy_from_slice(&t.dst_mac);
    f[6..12].copy_from_slice(&t.src_mac);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let header = wire::ipv4::Ipv4Repr {
        src_addr: t.src,
        dst_addr: t.dst,
        protocol: wire::ip::protocol::UDP,
        payload_len: (ip_len - 20) as u16,
        ttl: 64,
        dscp: 0,
        ecn: 0,
        ident: 0,
        dont_frag: false,
    };
    let _ = header.emit(&mut f[14..]); // cannot fail: 20 bytes, length checked
    let u = &mut f[34..];
    u[..2].copy_from_slice(&sport.to_be_bytes());
    u[2..4].copy_from_slice(&t.dport.to_be_bytes());
    u[4..6].copy_from_slice(&((ip_len - 20) as u16).to_be_bytes());
    // Checksum 0: none (RFC 768); the payload is zeros.
    14 + ip_len
}

/// The sizes a run cycles through: one size, or imix (7:4:1 of 64, 570 and 1420
/// bytes: the classic mix with its largest size at the tunnel MTU).
fn sizes(spec: &str) -> Result<Vec<usize>, String> {
    if spec == "imix" {
        let mut v = vec![64; 7];
        v.extend([570; 4]);
        v.push(1420);
        return Ok(v);
    }
    let n: usize = spec
        .parse()
        .map_err(|_| format!("{spec:?} is not a size or imix"))?;
    if !(28..=MAX_IP).contains(&n) {
        return Err(format!(
            "size {n}: an IPv4/UDP packet of 28 to {MAX_IP} bytes"
        ));
    }
    Ok(vec![n])
}

/// One AF_XDP socket per queue, 0 up, each on its own memory, under one program.
/// (Field order: the sockets go before the memory they use.)
struct Queues {
    ports: Vec<XdpPort>,
    mems: Vec<Umem>,
}

impl Queues {
    fn open(ifname: &str, queues: u32, layout: Layout) -> Result<Queues, String> {
        let opts = layout.options();
        let program = io::XdpAttachment::attach(ifname, false, opts.multi_buffer)
            .map_err(|e| format!("{ifname}: {e}"))?;
        let mems: Vec<Umem> = (0..queues).map(|_| Umem::new(layout)).collect();
        let mut ports = Vec::with_capacity(mems.len());
        for (q, mem) in mems.iter().enumerate() {
            // SAFETY: the memory is page-aligned, BUFFERS whole buffers, and outlives
            // the port (Queues drops its ports first); buffers lent to the kernel
            // are not touched until they come back; no other socket registers it.
            let port =
                unsafe { XdpPort::open_on(&program, q as u32, mem.0.base(), mem.0.len(), &opts) }
                    .map_err(|e| format!("{ifname}: queue {q}: {e}"))?;
            ports.push(port);
        }
        Ok(Queues { ports, mems })
    }
}

pub fn send(a: &TrafficSend) -> Result<(), String> {
    let sizes = sizes(&a.size)?;
    let t = Template {
        src_mac: io::netdev::mac_address(&a.interface).map_err(|e| e.to_string())?,
        dst_mac: parse_mac(&a.dst_mac)?,
        src: a.src,
        dst: a.dst,
        dport: a.port,
    };
    let layout = Layout::for_packets(sizes.iter().copied().max().unwrap_or(0));
    let mut queues = Queues::open(&a.interface, a.queues, layout)?;
    let nq = queues.ports.len();
    // Flow f leaves from queue f % nq: each queue's buffers carry its own flows.
    let flows = usize::from(a.flows.max(1));
    let mut lens = vec![vec![0u16; layout.slots()]; nq];
    for (q, (mem, lens)) in queues.mems.iter_mut().zip(&mut lens).enumerate() {
        let own: Vec<usize> = (0..flows).filter(|f| f % nq == q).collect();
        let own = if own.is_empty() { vec![q] } else { own };
        for (i, len) in lens.iter_mut().enumerate() {
            let ip_len = sizes[i % sizes.len()];
            let sport = 10000 + own[i % own.len()] as u16;
            *len = frame(mem.slot(i), &t, sport, ip_len) as u16;
        }
    }
    // Free slots by number; a slot is free again once its last part completes.
    let mut free: Vec<Vec<u32>> = (0..nq)
        .map(|_| (0..layout.slots() as u32).rev().collect())
        .collect();
    let last_part = |lens: &[u16], buf: u32| {
        let s = buf as usize / layout.slot;
        (buf as usize == layout.last_buffer(s, usize::from(lens[s]))).then_some(s as u32)
    };
    let mut batch: Vec<u32> = Vec::with_capacity(BATCH);
    let mut parts: Vec<Fragment> = Vec::with_capacity(BATCH * layout.slot);
    let mut done = [0u32; BATCH];
    let (mut packets, mut bytes) = (0u64, 0u64);
    let limit = a.count.unwrap_or(u64::MAX);
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(a.seconds);
    'run: while Instant::now() < end {
        for (q, port) in queues.ports.iter_mut().enumerate() {
            if packets >= limit {
                break 'run;
            }
            // Paced: no more than the rate allows by now (a batch at most ahead).
            let allowed = match a.rate {
                Some(pps) => {
                    let due = (start.elapsed().as_secs_f64() * pps as f64) as u64;
                    if due <= packets {
                        std::thread::sleep(Duration::from_micros(20));
                        continue;
                    }
                    (due - packets).min(BATCH as u64)
                }
                None => BATCH as u64,
            };
            let free = &mut free[q];
            let lens = &lens[q];
            loop {
                let n = port.complete(&mut done);
                free.extend(done[..n].iter().filter_map(|&b| last_part(lens, b)));
                if n < BATCH {
                    break;
                }
            }
            batch.clear();
            parts.clear();
            while (batch.len() as u64) < allowed && (packets + batch.len() as u64) < limit {
                match free.pop() {
                    Some(s) => {
                        batch.push(s);
                        layout.parts(s as usize, usize::from(lens[s as usize]), &mut parts);
                    }
                    None => break,
                }
            }
            let queued = port.send_fragments(&parts);
            let sent = parts[..queued].iter().filter(|p| !p.more).count();
            for &s in &batch[..sent] {
                packets += 1;
                bytes += u64::from(lens[s as usize]) - 14; // IP bytes, as the sink counts
            }
            free.extend_from_slice(&batch[sent..]);
        }
    }
    let secs = start.elapsed().as_secs_f64();
    // Let the last frames go before the memory does.
    let settle = Instant::now() + Duration::from_millis(200);
    for port in &mut queues.ports {
        while port.tx_in_flight() > 0 && Instant::now() < settle {
            port.complete(&mut done);
        }
    }
    drop(queues);
    println!("sent packets={packets} bytes={bytes} seconds={secs:.3}");
    Ok(())
}

pub fn count(a: &TrafficCount) -> Result<(), String> {
    let layout = if a.jumbo { JUMBO } else { STANDARD };
    let mut queues = Queues::open(&a.interface, a.queues, layout)?;
    let all: Vec<u32> = (0..BUFFERS as u32).collect();
    let mut spare: Vec<Vec<u32>> = Vec::new();
    for port in &mut queues.ports {
        let filled = port.fill(&all[..BUFFERS / 2]);
        spare.push(all[filled..].to_vec());
        port.start_receiving()
            .map_err(|e| format!("{}: {e}", a.interface))?;
    }
    let mut rx = [Fragment::default(); BATCH];
    // Per queue: whether the frame under way is counted, and its bytes so far
    // (None between frames).
    let mut under_way: Vec<Option<(bool, u64)>> = vec![None; queues.ports.len()];
    let (mut packets, mut bytes, mut first, mut last) = (0u64, 0u64, None, Instant::now());
    let end = Instant::now() + Duration::from_secs_f64(a.seconds);
    let mut fds: Vec<io::PollFd> = Vec::new();
    while Instant::now() < end {
        fds.clear();
        fds.extend(
            queues
                .ports
                .iter()
                .map(|p| io::PollFd::new(p.as_raw_fd(), io::Interest::READABLE)),
        );
        let _ = io::poll(&mut fds, Some(Duration::from_millis(10)));
        for (q, port) in queues.ports.iter_mut().enumerate() {
            let mem = &mut queues.mems[q];
            let spare = &mut spare[q];
            loop {
                let n = port.recv_fragments(&mut rx);
                for part in &rx[..n] {
                    let (counted, so_far) = *under_way[q].get_or_insert_with(|| {
                        let (off, len) = (usize::from(part.offset), usize::from(part.len));
                        let f = &mem.buffer(part.buf as usize)[off..off + len];
                        let udp_to_port = f.len() >= 42
                            && f[12..14] == [0x08, 0x00]
                            && f[23] == wire::ip::protocol::UDP
                            && u16::from_be_bytes([f[36], f[37]]) == a.port;
                        (udp_to_port, 0)
                    });
                    let so_far = so_far + u64::from(part.len);
                    under_way[q] = Some((counted, so_far));
                    if !part.more {
                        under_way[q] = None;
                        if counted {
                            packets += 1;
                            bytes += so_far - 14;
                            first.get_or_insert_with(Instant::now);
                            last = Instant::now();
                        }
                    }
                    spare.push(part.buf);
                }
                let took = port.fill(spare);
                spare.drain(..took);
                if n < BATCH {
                    break;
                }
            }
        }
    }
    let secs = first.map_or(0.0, |f| last.duration_since(f).as_secs_f64());
    drop(queues);
    println!("received packets={packets} bytes={bytes} seconds={secs:.3}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_macs_are_checked() {
        assert_eq!(sizes("64").unwrap(), [64]);
        let imix = sizes("imix").unwrap();
        assert_eq!(imix.iter().filter(|&&s| s == 64).count(), 7);
        assert_eq!(imix.len(), 12);
        assert_eq!(sizes("9216").unwrap(), [9216]);
        assert!(sizes("27").is_err() && sizes("9217").is_err() && sizes("big").is_err());
        assert_eq!(parse_mac("02:00:00:00:0a:01").unwrap(), [2, 0, 0, 0, 10, 1]);
        assert!(parse_mac("02:00:00:00:0a").is_err() && parse_mac("zz:00:00:00:0a:01").is_err());
    }

    /// A frame's parts cover it once, in its slot's buffers, none past a buffer,
    /// and the last says so; standard frames are one part, as before.
    #[test]
    fn frames_are_cut_into_their_slots_parts() {
        assert_eq!(Layout::for_packets(1500), STANDARD);
        assert_eq!(Layout::for_packets(1779), JUMBO);
        for (layout, len) in [
            (STANDARD, 1514),
            (STANDARD, 60),
            (JUMBO, 9230),
            (JUMBO, 4096),
            (JUMBO, 60),
        ] {
            let mut parts = Vec::new();
            layout.parts(5, len, &mut parts);
            let total: usize = parts.iter().map(|p| usize::from(p.len)).sum();
            assert_eq!(total, len, "{layout:?} {len}");
            for (i, p) in parts.iter().enumerate() {
                assert_eq!(p.buf as usize, 5 * layout.slot + i);
                assert!(usize::from(p.offset) + usize::from(p.len) <= layout.buffer);
                assert_eq!(p.more, i + 1 < parts.len());
            }
            assert!(parts.len() <= layout.slot);
            assert_eq!(
                layout.last_buffer(5, len),
                parts.last().unwrap().buf as usize
            );
        }
    }

    #[test]
    fn a_frame_is_a_valid_ipv4_udp_packet_of_the_size() {
        let t = Template {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src: Ipv4Addr::new(198, 19, 1, 10),
            dst: Ipv4Addr::new(198, 19, 3, 10),
            dport: 9,
        };
        let mut buf = [0u8; 1600];
        let n = frame(&mut buf, &t, 10001, 64);
        assert_eq!(n, 78);
        let p = wire::ipv4::Packet::new_checked(&buf[14..n]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!(usize::from(p.total_len()), 64);
        let u = wire::udp::Packet::new_checked(p.payload()).unwrap();
        assert_eq!((u.src_port(), u.dst_port(), u.length()), (10001, 9, 44));
    }
}
