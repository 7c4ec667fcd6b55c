//! AF_XDP port against the real kernel: a veth pair inside a network namespace made for
//! the test, the XDP port on one end (`xa`) and AF_PACKET ports to send, receive and
//! watch with. Needs root; skipped with a note otherwise.
//!
//! Every loop is bounded by a count and a deadline, so no test can hang.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use io::netns::{NetNs, bare_veth_ns, root_or_skip};
use io::xdp::{FRAME_SIZE, XDP_PACKET_HEADROOM};
use io::{Fragment, Interest, PacketPort, PollFd, XdpMode, XdpOptions, XdpPort, poll};

const XDP_IF: &str = "xa";
const PEER_IF: &str = "xb";
/// A local experimental EtherType, which no protocol in the kernel answers.
const EXPERIMENTAL: [u8; 2] = [0x88, 0xb5];
const XDP_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x60, 0x01];
const PEER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x60, 0x02];
/// Buffers in the test's UMEM.
const FRAMES: usize = 4096;
/// Where the test puts frames it sends: the data plane's headroom.
const TX_OFFSET: u16 = 128;
const BATCH: usize = 32;
const WAIT: Duration = Duration::from_secs(10);

/// A namespace holding a veth pair `xa` <-> `xb`, both up, with no addresses.
fn veth_ns() -> NetNs {
    let ns = bare_veth_ns("lr-io-xdp", XDP_IF, PEER_IF).unwrap();
    // No IPv6 on either end: the kernel's own neighbour discovery and router
    // solicitations would reach the port, and before it has buffers count as drops.
    for ifname in [XDP_IF, PEER_IF] {
        let key = format!("net.ipv6.conf.{ifname}.disable_ipv6=1");
        ns.exec_checked(&["sysctl", "-q", "-w", &key]).unwrap();
    }
    ns
}

/// Page-aligned anonymous memory for the UMEM, unmapped on drop.
struct Umem {
    base: *mut u8,
    len: usize,
    /// Bytes per buffer.
    chunk: usize,
}

// SAFETY: the tests share a Umem with the namespace threads they start only to open
// ports on it and to copy frames in and out of buffers they own at the time.
unsafe impl Sync for Umem {}

impl Umem {
    fn new(frames: usize) -> Umem {
        Umem::with_chunks(frames, FRAME_SIZE)
    }

    fn with_chunks(frames: usize, chunk: usize) -> Umem {
        let len = frames * chunk;
        // SAFETY: a fresh private anonymous mapping; no pointer is passed in.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED, "mmap of the UMEM");
        Umem {
            base: base.cast(),
            len,
            chunk,
        }
    }

    /// The mapping's start (a method: a closure capturing the field itself would not be
    /// Send).
    fn base(&self) -> *mut u8 {
        self.base
    }

    /// Opens a port on `XDP_IF` over this memory.
    fn open(&self, queue: u32, opts: &XdpOptions) -> std::io::Result<XdpPort> {
        // SAFETY: the mapping outlives every port the tests open on it (each test drops
        // its ports before the Umem), and the tests touch a buffer only while it is
        // theirs: before fill/send, after recv/complete.
        unsafe { XdpPort::open(XDP_IF, queue, self.base, self.len, opts) }
    }

    /// Writes `frame` at `offset` into buffer `buf`, which the caller owns.
    fn write(&self, buf: u32, offset: u16, frame: &[u8]) {
        let start = buf as usize * self.chunk + usize::from(offset);
        assert!(start + frame.len() <= self.len);
        // SAFETY: inside the mapping (checked), in a buffer the kernel does not hold.
        unsafe { std::ptr::copy_nonoverlapping(frame.as_ptr(), self.base.add(start), frame.len()) };
    }

    /// Copies `len` bytes at `offset` out of buffer `buf`, which the caller owns.
    fn read(&self, buf: u32, offset: u16, len: u16) -> Vec<u8> {
        let start = buf as usize * self.chunk + usize::from(offset);
        assert!(start + usize::from(len) <= self.len);
        let mut out = vec![0; usize::from(len)];
        // SAFETY: inside the mapping (checked), in a buffer the kernel has handed back.
        unsafe { std::ptr::copy_nonoverlapping(self.base.add(start), out.as_mut_ptr(), out.len()) };
        out
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped only here, after the ports on it.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

fn ethernet(dst: [u8; 6], src: [u8; 6], ethertype: [u8; 2]) -> Vec<u8> {
    let mut f = Vec::with_capacity(1514);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ethertype);
    f
}

/// Frame `seq` from the XDP port: the sequence number, then a pattern; 60 to 1514 bytes.
fn tx_frame(seq: usize) -> Vec<u8> {
    let len = 60 + (seq * 97) % (1514 - 60 + 1);
    let mut f = ethernet(PEER_MAC, XDP_MAC, EXPERIMENTAL);
    f.extend_from_slice(&(seq as u32).to_be_bytes());
    f.extend((f.len()..len).map(|i| (i as u8) ^ (seq as u8)));
    f
}

fn checksum(bytes: &[u8]) -> u16 {
    wire::checksum::checksum(bytes)
}

/// An IPv4 UDP datagram 198.18.20.2:4000 -> 198.18.20.1:5000 from the peer.
fn ipv4_udp() -> Vec<u8> {
    let payload = b"linerate xdp test datagram";
    let udp_len = 8 + payload.len();
    let total = 20 + udp_len;
    let mut ip = vec![
        0x45,
        0,
        (total >> 8) as u8,
        total as u8,
        0x12,
        0x34,
        0x40,
        0,
        64,
        17,
        0,
        0,
    ];
    ip.extend_from_slice(&[198, 18, 20, 2, 198, 18, 20, 1]);
    let sum = checksum(&ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    let mut f = ethernet(XDP_MAC, PEER_MAC, [0x08, 0x00]);
    f.extend_from_slice(&ip);
    f.extend_from_slice(&4000u16.to_be_bytes());
    f.extend_from_slice(&5000u16.to_be_bytes());
    f.extend_from_slice(&(udp_len as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]); // no UDP checksum (allowed over IPv4)
    f.extend_from_slice(payload);
    f
}

/// An ARP request from the peer: who has 198.18.20.1? Tell 198.18.20.2.
fn arp_request() -> Vec<u8> {
    let mut f = ethernet([0xff; 6], PEER_MAC, [0x08, 0x06]);
    f.extend_from_slice(&[0, 1, 0x08, 0x00, 6, 4, 0, 1]);
    f.extend_from_slice(&PEER_MAC);
    f.extend_from_slice(&[198, 18, 20, 2]);
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&[198, 18, 20, 1]);
    f.resize(60, 0);
    f
}

/// An IPv6 packet with no next header, 2001:2:0:20::2 -> 2001:2:0:20::1.
fn ipv6_empty() -> Vec<u8> {
    let mut f = ethernet(XDP_MAC, PEER_MAC, [0x86, 0xdd]);
    f.extend_from_slice(&[0x60, 0, 0, 0, 0, 0, 59, 64]);
    for last in [2u8, 1] {
        f.extend_from_slice(&[0x20, 0x01, 0, 2, 0, 0, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, last]);
    }
    f.resize(60, 0);
    f
}

/// An LLDP frame from the peer (EtherType 0x88cc): chassis, port and TTL TLVs.
fn lldp() -> Vec<u8> {
    let mut f = ethernet([0x01, 0x80, 0xc2, 0, 0, 0x0e], PEER_MAC, [0x88, 0xcc]);
    f.extend_from_slice(&[0x02, 0x07, 0x04]);
    f.extend_from_slice(&PEER_MAC);
    f.extend_from_slice(&[0x04, 0x03, 0x05, b'x', b'b', 0x06, 0x02, 0, 120, 0, 0]);
    f.resize(60, 0);
    f
}

/// Receives what waits on an AF_PACKET port (after polling up to `wait`), keeping
/// frames from `src`.
fn drain_packet(port: &mut PacketPort, wait: Duration, src: [u8; 6], got: &mut Vec<Vec<u8>>) {
    let mut fds = [PollFd::new(port.as_raw_fd(), Interest::READABLE)];
    poll(&mut fds, Some(wait)).unwrap();
    let mut storage = vec![[0u8; 2048]; BATCH];
    // Bounded: the ring holds a limited number of frames and each turn empties some.
    for _ in 0..64 {
        let mut bufs: Vec<&mut [u8]> = storage.iter_mut().map(|b| b.as_mut_slice()).collect();
        let mut lens = [0usize; BATCH];
        let n = port.recv_batch(&mut bufs, &mut lens);
        got.extend(
            (0..n)
                .map(|i| &bufs[i][..lens[i]])
                .filter(|f| f.len() >= 14 && f[6..12] == src)
                .map(<[u8]>::to_vec),
        );
        if n < BATCH {
            break;
        }
    }
}

/// Whether `ip link show xa` reports an XDP program (native, generic or offloaded).
fn xdp_attached(ns: &NetNs) -> bool {
    let out = ns.exec_checked(&["ip", "link", "show", XDP_IF]).unwrap();
    out.contains("xdp")
}

fn run_send_test(skb_mode: bool) {
    let ns = veth_ns();
    let umem = Umem::new(FRAMES);
    let frames: Vec<Vec<u8>> = (0..1000).map(tx_frame).collect();
    let opts = XdpOptions {
        skb_mode,
        ..XdpOptions::default()
    };
    let (got, free, port_state) = ns
        .run(|| {
            let mut xdp = umem.open(0, &opts).unwrap();
            eprintln!(
                "XDP port on {XDP_IF}: mode {:?}, zero-copy {}",
                xdp.mode(),
                xdp.zero_copy()
            );
            let want_mode = if skb_mode {
                XdpMode::Skb
            } else {
                XdpMode::Native
            };
            assert_eq!(xdp.mode(), want_mode, "veth takes native XDP");
            let mut peer = PacketPort::open(PEER_IF, 1024, 2048).unwrap();
            peer.set_promiscuous(true).unwrap();

            // 256 buffers for sending, recycled through completions: 1000 frames need
            // each about four times.
            let mut free: Vec<u32> = (0..256).collect();
            let mut got = Vec::new();
            let mut next = 0;
            let mut done = [0u32; 256];
            let deadline = Instant::now() + WAIT;
            while (next < frames.len() || got.len() < frames.len() || free.len() < 256)
                && Instant::now() < deadline
            {
                let take = BATCH.min(free.len()).min(frames.len() - next);
                if take > 0 {
                    let bufs: Vec<u32> = free.drain(free.len() - take..).collect();
                    let descs: Vec<(u32, u16, u16)> = bufs
                        .iter()
                        .zip(&frames[next..next + take])
                        .map(|(&b, f)| {
                            umem.write(b, TX_OFFSET, f);
                            (b, TX_OFFSET, f.len() as u16)
                        })
                        .collect();
                    let queued = xdp.send(&descs);
                    next += queued;
                    free.extend_from_slice(&bufs[queued..]);
                }
                let n = xdp.complete(&mut done);
                free.extend_from_slice(&done[..n]);
                drain_packet(&mut peer, Duration::from_millis(5), XDP_MAC, &mut got);
            }
            let state = (
                xdp.tx_in_flight(),
                xdp.tx_kick_errors(),
                xdp.tx_invalid(),
                peer.rx_dropped(),
            );
            (got, free, state)
        })
        .unwrap();
    assert_eq!(
        port_state,
        (0, 0, 0, 0),
        "in flight, kick errors, invalid, peer drops"
    );
    assert_eq!(got.len(), frames.len(), "frames received by the peer");
    for (seq, f) in got.iter().enumerate() {
        assert!(*f == frames[seq], "frame {seq} differs (len {})", f.len());
    }
    let unique: HashSet<u32> = free.iter().copied().collect();
    assert_eq!(free.len(), 256, "every buffer back");
    assert_eq!(unique.len(), 256, "no buffer back twice");
}

#[test]
fn frames_sent_arrive_at_the_peer_native() {
    if root_or_skip("frames_sent_arrive_at_the_peer_native") {
        run_send_test(false);
    }
}

#[test]
fn frames_sent_arrive_at_the_peer_generic() {
    if root_or_skip("frames_sent_arrive_at_the_peer_generic") {
        run_send_test(true);
    }
}

fn run_receive_test(skb_mode: bool) {
    let ns = veth_ns();
    let umem = Umem::new(FRAMES);
    let opts = XdpOptions {
        skb_mode,
        ..XdpOptions::default()
    };
    let ours = [ipv4_udp(), arp_request(), ipv6_empty()];
    let other = lldp();
    let (received, filled, kernel_saw) = ns
        .run(|| {
            let mut xdp = umem.open(0, &opts).unwrap();
            // Frames that reach the kernel on the XDP side show here.
            let mut watch = PacketPort::open(XDP_IF, 64, 2048).unwrap();
            watch.set_promiscuous(true).unwrap();
            let mut peer = PacketPort::open(PEER_IF, 64, 2048).unwrap();

            let filled: Vec<u32> = (1000..2024).collect();
            assert_eq!(
                xdp.fill(&filled),
                filled.len(),
                "a fresh fill ring takes 1024"
            );
            xdp.start_receiving().unwrap();

            let mut sent: Vec<&[u8]> = ours.iter().map(Vec::as_slice).collect();
            sent.insert(1, &other);
            assert_eq!(peer.send_batch(&sent), sent.len());

            let mut received = Vec::new();
            let mut kernel_saw = Vec::new();
            let mut out = [(0u32, 0u16, 0u16); BATCH];
            let mut fds = [PollFd::new(xdp.as_raw_fd(), Interest::READABLE)];
            // Until ours have all come, then a little longer for anything that should
            // not: LLDP, had the program redirected it.
            let mut deadline = Instant::now() + Duration::from_secs(5);
            let mut settled = false;
            for _ in 0..1000 {
                if Instant::now() >= deadline {
                    break;
                }
                poll(&mut fds, Some(Duration::from_millis(20))).unwrap();
                let n = xdp.recv(&mut out);
                for &(buf, off, len) in &out[..n] {
                    received.push((buf, off, umem.read(buf, off, len)));
                }
                drain_packet(&mut watch, Duration::ZERO, PEER_MAC, &mut kernel_saw);
                let mine = received.iter().filter(|r| r.2[6..12] == PEER_MAC).count();
                if !settled && mine >= ours.len() {
                    settled = true;
                    deadline = Instant::now() + Duration::from_millis(300);
                }
            }
            drain_packet(
                &mut watch,
                Duration::from_millis(50),
                PEER_MAC,
                &mut kernel_saw,
            );
            assert_eq!(xdp.rx_dropped(), 0);
            assert_eq!(xdp.rx_invalid(), 0);
            (received, filled, kernel_saw)
        })
        .unwrap();

    let filled: HashSet<u32> = filled.into_iter().collect();
    let mut seen = HashSet::new();
    for (buf, off, _) in &received {
        assert!(filled.contains(buf), "buffer {buf} was never filled");
        assert!(seen.insert(*buf), "buffer {buf} received twice");
        assert!(
            usize::from(*off) >= opts.headroom as usize,
            "data at {off}, inside the headroom"
        );
        eprintln!("received into buffer {buf} at offset {off}");
    }
    // Only the test's frames come from the peer's address; the test tells them apart by
    // content all the same.
    let frames: Vec<&Vec<u8>> = received
        .iter()
        .filter(|r| r.2[6..12] == PEER_MAC)
        .map(|r| &r.2)
        .collect();
    for f in &ours {
        assert_eq!(
            frames.iter().filter(|g| **g == f).count(),
            1,
            "EtherType {:02x}{:02x} not received once, byte for byte",
            f[12],
            f[13]
        );
    }
    assert!(
        !frames.iter().any(|g| **g == other),
        "the XDP port received LLDP"
    );
    let offsets: HashSet<u16> = received.iter().map(|r| r.1).collect();
    assert_eq!(
        offsets.len(),
        1,
        "every frame at the same offset: {offsets:?}"
    );
    assert!(
        kernel_saw.contains(&other),
        "LLDP did not reach the kernel: {kernel_saw:?}"
    );
    for f in &ours {
        assert!(
            !kernel_saw.contains(f),
            "EtherType {:02x}{:02x} reached the kernel too",
            f[12],
            f[13]
        );
    }
}

#[test]
fn peer_frames_are_received_by_ethertype_native() {
    if root_or_skip("peer_frames_are_received_by_ethertype_native") {
        run_receive_test(false);
    }
}

#[test]
fn peer_frames_are_received_by_ethertype_generic() {
    if root_or_skip("peer_frames_are_received_by_ethertype_generic") {
        run_receive_test(true);
    }
}

/// Jumbo frames over a multi-buffer socket on page-sized buffers: what the peer
/// sends arrives in parts that join into the frames, byte for byte, and what
/// the port sends in parts arrives at the peer whole.
fn run_jumbo_test(skb_mode: bool) {
    const CHUNK: usize = 4096;
    let ns = veth_ns();
    for ifname in [XDP_IF, PEER_IF] {
        ns.exec_checked(&["ip", "link", "set", ifname, "mtu", "9216"])
            .unwrap();
    }
    let umem = Umem::with_chunks(1024, CHUNK);
    let opts = XdpOptions {
        skb_mode,
        headroom: 0,
        chunk_size: CHUNK as u32,
        multi_buffer: true,
        ..XdpOptions::default()
    };
    // IPv4's EtherType, which the program sends to the socket; the kernel never
    // sees these frames to mind what follows it.
    let frames: Vec<Vec<u8>> = [60, 1514, 3853, 3854, 4096, 7000, 9014, 9230]
        .iter()
        .enumerate()
        .map(|(seq, &len)| {
            let mut f = ethernet(XDP_MAC, PEER_MAC, [0x08, 0x00]);
            f.extend_from_slice(&(seq as u32).to_be_bytes());
            f.extend((f.len()..len).map(|i| (i as u8) ^ (i >> 8) as u8 ^ (seq as u8)));
            f
        })
        .collect();
    let (received, parts_seen, sent_back, stats) = ns
        .run(|| {
            let mut xdp = umem.open(0, &opts).unwrap();
            eprintln!(
                "multi-buffer XDP port on {XDP_IF}: mode {:?}, zero-copy {}",
                xdp.mode(),
                xdp.zero_copy()
            );
            let want_mode = if skb_mode {
                XdpMode::Skb
            } else {
                XdpMode::Native
            };
            assert_eq!(
                xdp.mode(),
                want_mode,
                "veth takes native XDP with fragments"
            );
            let mut peer = PacketPort::open(PEER_IF, 64, 10240).unwrap();
            peer.set_promiscuous(true).unwrap();
            let fill: Vec<u32> = (0..512).collect();
            assert_eq!(xdp.fill(&fill), fill.len());
            xdp.start_receiving().unwrap();
            let batch: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
            assert_eq!(peer.send_batch(&batch), batch.len());

            // Receive: join the parts of each frame.
            let (mut received, mut current, mut parts_seen) = (Vec::new(), Vec::new(), 0);
            let mut out = [Fragment::default(); BATCH];
            let mut fds = [PollFd::new(xdp.as_raw_fd(), Interest::READABLE)];
            let deadline = Instant::now() + WAIT;
            while received.len() < frames.len() && Instant::now() < deadline {
                poll(&mut fds, Some(Duration::from_millis(20))).unwrap();
                let n = xdp.recv_fragments(&mut out);
                for part in &out[..n] {
                    assert!(part.buf < 512, "a part in buffer {} never filled", part.buf);
                    current.extend(umem.read(part.buf, part.offset, part.len));
                    parts_seen += 1;
                    if !part.more {
                        received.push(std::mem::take(&mut current));
                    }
                }
            }

            // Send: each frame in parts of up to a buffer, from buffers 512 on.
            let mut parts = Vec::new();
            let mut next = 512u32;
            for f in &frames {
                let pieces: Vec<&[u8]> = f.chunks(CHUNK).collect();
                for (i, piece) in pieces.iter().enumerate() {
                    umem.write(next, 0, piece);
                    parts.push(Fragment {
                        buf: next,
                        offset: 0,
                        len: piece.len() as u16,
                        more: i + 1 < pieces.len(),
                    });
                    next += 1;
                }
            }
            assert_eq!(xdp.send_fragments(&parts), parts.len());
            let mut sent_back = Vec::new();
            let mut done = [0u32; 64];
            let mut completed = 0;
            let deadline = Instant::now() + WAIT;
            while (sent_back.len() < frames.len() || completed < parts.len())
                && Instant::now() < deadline
            {
                completed += xdp.complete(&mut done);
                let mut fds = [PollFd::new(peer.as_raw_fd(), Interest::READABLE)];
                poll(&mut fds, Some(Duration::from_millis(20))).unwrap();
                let mut storage = vec![[0u8; 10240]; 8];
                let mut bufs: Vec<&mut [u8]> =
                    storage.iter_mut().map(|b| b.as_mut_slice()).collect();
                let mut lens = [0usize; 8];
                let n = peer.recv_batch(&mut bufs, &mut lens);
                sent_back.extend(
                    (0..n)
                        .map(|i| bufs[i][..lens[i]].to_vec())
                        .filter(|f| f[6..12] == PEER_MAC),
                );
            }
            let stats = (
                xdp.rx_dropped(),
                xdp.rx_invalid(),
                xdp.tx_invalid(),
                xdp.tx_in_flight(),
                peer.rx_truncated(),
            );
            (received, parts_seen, sent_back, stats)
        })
        .unwrap();
    assert_eq!(
        stats,
        (0, 0, 0, 0, 0),
        "rx dropped, rx invalid, tx invalid, in flight, peer truncated"
    );
    assert_eq!(received.len(), frames.len(), "frames received");
    for (got, want) in received.iter().zip(&frames) {
        assert!(
            got == want,
            "a {}-byte frame came as {} bytes or changed",
            want.len(),
            got.len()
        );
    }
    assert!(
        parts_seen > frames.len(),
        "frames past a buffer came in parts ({parts_seen} for {})",
        frames.len()
    );
    assert_eq!(sent_back.len(), frames.len(), "frames the peer received");
    for (got, want) in sent_back.iter().zip(&frames) {
        assert!(
            got == want,
            "a {}-byte frame arrived as {} bytes or changed",
            want.len(),
            got.len()
        );
    }
}

#[test]
fn jumbo_frames_cross_in_parts_native() {
    if root_or_skip("jumbo_frames_cross_in_parts_native") {
        run_jumbo_test(false);
    }
}

#[test]
fn jumbo_frames_cross_in_parts_generic() {
    if root_or_skip("jumbo_frames_cross_in_parts_generic") {
        run_jumbo_test(true);
    }
}

/// Until the port starts receiving, the program leaves its queue's frames to the
/// kernel: none is dropped for want of a buffer while the port has lent none.
#[test]
fn frames_before_the_start_go_to_the_kernel() {
    if !root_or_skip("frames_before_the_start_go_to_the_kernel") {
        return;
    }
    let ns = veth_ns();
    let umem = Umem::new(64);
    let opts = XdpOptions {
        ring_size: 64,
        ..XdpOptions::default()
    };
    let (kernel_saw, fill_empty) = ns
        .run(|| {
            let xdp = umem.open(0, &opts).unwrap();
            let mut watch = PacketPort::open(XDP_IF, 64, 2048).unwrap();
            watch.set_promiscuous(true).unwrap();
            let mut peer = PacketPort::open(PEER_IF, 16, 2048).unwrap();
            let frame = ipv4_udp();
            let mut got = Vec::new();
            for _ in 0..50 {
                assert_eq!(peer.send_batch(&[&frame]), 1);
                drain_packet(&mut watch, Duration::from_millis(100), PEER_MAC, &mut got);
                if !got.is_empty() {
                    break;
                }
            }
            (got.len(), xdp.rx_fill_empty())
        })
        .unwrap();
    assert!(kernel_saw > 0, "the kernel saw the frames");
    assert_eq!(fill_empty, 0, "no frame dropped for want of a buffer");
}

#[test]
fn received_data_starts_after_both_headrooms() {
    if !root_or_skip("received_data_starts_after_both_headrooms") {
        return;
    }
    let ns = veth_ns();
    let umem = Umem::new(64);
    for headroom in [0, 128] {
        let opts = XdpOptions {
            headroom,
            ring_size: 64,
            ..XdpOptions::default()
        };
        let offset = ns
            .run(|| {
                let mut xdp = umem.open(0, &opts).unwrap();
                let mut peer = PacketPort::open(PEER_IF, 16, 2048).unwrap();
                let bufs: Vec<u32> = (0..32).collect();
                assert_eq!(xdp.fill(&bufs), 32);
                xdp.start_receiving().unwrap();
                let frame = ipv4_udp();
                let mut out = [(0u32, 0u16, 0u16); 8];
                let deadline = Instant::now() + Duration::from_secs(5);
                let mut fds = [PollFd::new(xdp.as_raw_fd(), Interest::READABLE)];
                for _ in 0..500 {
                    if Instant::now() >= deadline {
                        break;
                    }
                    assert_eq!(peer.send_batch(&[&frame]), 1);
                    poll(&mut fds, Some(Duration::from_millis(20))).unwrap();
                    let n = xdp.recv(&mut out);
                    if let Some(&(buf, off, len)) = out[..n]
                        .iter()
                        .find(|&&(b, o, l)| umem.read(b, o, l) == frame)
                    {
                        assert_eq!(usize::from(len), frame.len());
                        assert!(buf < 32);
                        return Some(off);
                    }
                }
                None
            })
            .unwrap()
            .expect("no frame received");
        eprintln!("headroom {headroom}: data at offset {offset}");
        assert_eq!(u32::from(offset), headroom + XDP_PACKET_HEADROOM);
    }
}

#[test]
fn drop_detaches_the_program() {
    if !root_or_skip("drop_detaches_the_program") {
        return;
    }
    let ns = veth_ns();
    let umem = Umem::new(64);
    let opts = XdpOptions {
        ring_size: 64,
        ..XdpOptions::default()
    };
    assert!(!xdp_attached(&ns), "a fresh veth has no XDP program");
    for round in 0..2 {
        let port = ns.run(|| umem.open(0, &opts).unwrap()).unwrap();
        assert!(xdp_attached(&ns), "round {round}: no program while open");
        // Dropped on this thread, outside the namespace: the port detaches from the
        // namespace it attached in.
        drop(port);
        assert!(!xdp_attached(&ns), "round {round}: program left after drop");
    }
}

#[test]
fn failed_open_leaves_no_program() {
    if !root_or_skip("failed_open_leaves_no_program") {
        return;
    }
    let ns = veth_ns();
    let umem = Umem::new(64);
    let opts = XdpOptions {
        ring_size: 64,
        ..XdpOptions::default()
    };
    // veth has one queue: binding to queue 7 fails after the program is attached.
    let err = ns.run(|| umem.open(7, &opts).unwrap_err()).unwrap();
    let msg = err.to_string();
    assert!(
        msg.starts_with("xa: binding an AF_XDP socket to queue 7 (copy mode; zero-copy: "),
        "{msg}"
    );
    assert!(
        !xdp_attached(&ns),
        "program left after a failed open: {msg}"
    );

    let bad_ring = XdpOptions {
        ring_size: 100,
        ..opts
    };
    let err = ns.run(|| umem.open(0, &bad_ring).unwrap_err()).unwrap();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains("power of two"), "{err}");

    let err = ns
        .run(|| {
            // SAFETY: refused before the memory is used: it is not page aligned.
            unsafe { XdpPort::open(XDP_IF, 0, umem.base().add(64), FRAME_SIZE, &opts) }.unwrap_err()
        })
        .unwrap();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");
    assert!(!xdp_attached(&ns));

    let err = ns
        .run(|| {
            // SAFETY: refused before the memory is used: no such interface.
            unsafe { XdpPort::open("nosuch0", 0, umem.base(), FRAME_SIZE, &opts) }.unwrap_err()
        })
        .unwrap();
    assert!(err.to_string().contains("\"nosuch0\" not found"), "{err}");
}

/// A namespace holding a veth pair `xa` <-> `xb` with two queues each way, up, no
/// addresses, no IPv6.
fn two_queue_veth_ns() -> NetNs {
    let ns = NetNs::new("lr-io-xdpq").unwrap();
    let q = ["numtxqueues", "2", "numrxqueues", "2"];
    let mut args = vec!["ip", "link", "add", XDP_IF];
    args.extend(q);
    args.extend(["type", "veth", "peer", "name", PEER_IF]);
    args.extend(q);
    ns.exec_checked(&args).unwrap();
    for ifname in [XDP_IF, PEER_IF] {
        let key = format!("net.ipv6.conf.{ifname}.disable_ipv6=1");
        ns.exec_checked(&["sysctl", "-q", "-w", &key]).unwrap();
        ns.link_up(ifname).unwrap();
    }
    ns
}

/// `ipv4_udp` from source port `port`: another flow for the sender's queue choice.
fn ipv4_udp_from(port: u16) -> Vec<u8> {
    let mut f = ipv4_udp();
    f[34..36].copy_from_slice(&port.to_be_bytes());
    f
}

#[test]
fn one_program_serves_a_port_per_queue() {
    if !root_or_skip("one_program_serves_a_port_per_queue") {
        return;
    }
    let ns = two_queue_veth_ns();
    let (a, b) = (Umem::new(1024), Umem::new(1024));
    let opts = XdpOptions {
        ring_size: 512,
        ..XdpOptions::default()
    };
    const FLOWS: u16 = 200;
    let per_queue = ns
        .run(|| {
            let attachment = io::XdpAttachment::attach(XDP_IF, false, false).unwrap();
            assert_eq!(attachment.mode(), XdpMode::Native, "veth takes native XDP");
            let mut ports = [(0, &a), (1, &b)].map(|(queue, umem)| {
                // SAFETY: each Umem outlives its port (dropped at the end of this
                // closure, before the Umems), and its buffers are touched only while
                // the test holds them.
                unsafe { XdpPort::open_on(&attachment, queue, umem.base(), umem.len, &opts) }
                    .unwrap()
            });
            drop(attachment); // the ports keep the program
            for p in &mut ports {
                let bufs: Vec<u32> = (0..512).collect();
                assert_eq!(p.fill(&bufs), 512);
                p.start_receiving().unwrap();
            }
            let mut peer = PacketPort::open(PEER_IF, 256, 2048).unwrap();
            let frames: Vec<Vec<u8>> = (0..FLOWS).map(|i| ipv4_udp_from(10_000 + i)).collect();
            let sent: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
            let mut n = 0;
            for chunk in sent.chunks(BATCH) {
                n += peer.send_batch(chunk);
            }
            assert_eq!(n, sent.len());
            let mut got = [0usize; 2];
            let mut out = [(0u32, 0u16, 0u16); BATCH];
            let deadline = Instant::now() + WAIT;
            for _ in 0..10_000 {
                if got.iter().sum::<usize>() >= sent.len() || Instant::now() >= deadline {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
                for (q, p) in ports.iter_mut().enumerate() {
                    let umem = if q == 0 { &a } else { &b };
                    let n = p.recv(&mut out);
                    got[q] += out[..n]
                        .iter()
                        .filter(|&&(buf, off, len)| umem.read(buf, off, len)[6..12] == PEER_MAC)
                        .count();
                }
            }
            assert!(xdp_attached(&ns), "the ports hold the program");
            drop(ports);
            got
        })
        .unwrap();
    assert_eq!(
        per_queue.iter().sum::<usize>(),
        usize::from(FLOWS),
        "every frame received once, on one queue or the other: {per_queue:?}"
    );
    // 200 flows hashed over two queues: both get some.
    assert!(per_queue.iter().all(|&n| n > 0), "{per_queue:?}");
    assert!(!xdp_attached(&ns), "program left after the last port went");
}
