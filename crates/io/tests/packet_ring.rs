//! AF_PACKET port against the real kernel: a veth pair inside a network namespace made
//! for the test, a port on each end. Needs root; skipped with a note otherwise.

use std::time::{Duration, Instant};

use io::netns::{NetNs, bare_veth_ns, root_or_skip};
use io::{Interest, PacketPort, PollFd, poll};

/// A local experimental EtherType, which no protocol in the kernel answers.
const ETHERTYPE: [u8; 2] = [0x88, 0xb5];
const SRC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x50, 0x01];
const DST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x50, 0x02];
const COUNT: usize = 1000;
const BATCH: usize = 32;
const WAIT: Duration = Duration::from_secs(10);

/// A namespace holding a veth pair `pa` <-> `pb`, both up, with no addresses.
fn veth_ns() -> NetNs {
    bare_veth_ns("lr-io-pkt", "pa", "pb").unwrap()
}

/// Frame `seq`: Ethernet header, the sequence number, then a pattern; 60 to 1514 bytes.
fn frame(seq: usize) -> Vec<u8> {
    let len = 60 + (seq * 97) % (1514 - 60 + 1);
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&DST_MAC);
    f.extend_from_slice(&SRC_MAC);
    f.extend_from_slice(&ETHERTYPE);
    f.extend_from_slice(&(seq as u32).to_be_bytes());
    f.extend((f.len()..len).map(|i| (i as u8) ^ (seq as u8)));
    f
}

fn is_ours(f: &[u8]) -> bool {
    f.len() >= 14 && f[12..14] == ETHERTYPE && f[6..12] == SRC_MAC
}

/// Receives what is waiting (after polling up to `wait`), keeping only test frames.
fn drain(port: &mut PacketPort, wait: Duration, got: &mut Vec<Vec<u8>>) {
    drain_into(port, wait, 2048, got)
}

/// [`drain`] into buffers of `size` bytes.
fn drain_into(port: &mut PacketPort, wait: Duration, size: usize, got: &mut Vec<Vec<u8>>) {
    let mut fds = [PollFd::new(port.as_raw_fd(), Interest::READABLE)];
    poll(&mut fds, Some(wait)).unwrap();
    let mut storage = vec![vec![0u8; size]; BATCH];
    // Bounded: the ring holds a limited number of frames and each turn empties some.
    for _ in 0..64 {
        let mut bufs: Vec<&mut [u8]> = storage.iter_mut().map(|b| b.as_mut_slice()).collect();
        let mut lens = [0usize; BATCH];
        let n = port.recv_batch(&mut bufs, &mut lens);
        got.extend(
            (0..n)
                .map(|i| &bufs[i][..lens[i]])
                .filter(|f| is_ours(f))
                .map(<[u8]>::to_vec),
        );
        if n < BATCH {
            break;
        }
    }
}

#[test]
fn frames_cross_a_veth_in_order() {
    if !root_or_skip("frames_cross_a_veth_in_order") {
        return;
    }
    let ns = veth_ns();
    let frames: Vec<Vec<u8>> = (0..COUNT).map(frame).collect();
    let (got, echoed, tx) = ns
        .run(|| {
            let mut tx = PacketPort::open("pa", 256, 2048).unwrap();
            let mut rx = PacketPort::open("pb", 1024, 2048).unwrap();
            rx.set_promiscuous(true).unwrap();
            // A second port on the sending end: it must not see frames leaving there
            // either (a socket never sees its own, so this is what tests the option).
            let mut watch = PacketPort::open("pa", 64, 2048).unwrap();
            assert!(tx.frames() >= 256 && rx.frames() >= 1024);
            let mut got = Vec::new();
            let mut echoed = Vec::new();
            let mut next = 0;
            let deadline = Instant::now() + WAIT;
            while (next < COUNT || got.len() < COUNT) && Instant::now() < deadline {
                if next < COUNT {
                    let batch: Vec<&[u8]> = frames[next..(next + BATCH).min(COUNT)]
                        .iter()
                        .map(Vec::as_slice)
                        .collect();
                    next += tx.send_batch(&batch);
                }
                drain(&mut rx, Duration::from_millis(10), &mut got);
                drain(&mut tx, Duration::ZERO, &mut echoed);
                drain(&mut watch, Duration::ZERO, &mut echoed);
            }
            (
                got,
                echoed,
                (tx.tx_too_big(), rx.rx_truncated(), rx.rx_dropped()),
            )
        })
        .unwrap();
    assert_eq!(tx, (0, 0, 0), "too big, truncated, dropped");
    assert_eq!(got.len(), COUNT, "frames received");
    for (seq, f) in got.iter().enumerate() {
        assert!(*f == frames[seq], "frame {seq} differs (len {})", f.len());
    }
    assert!(
        echoed.is_empty(),
        "the sending end read back {} frames",
        echoed.len()
    );
}

/// Rings made for jumbo frames carry a 9216-byte MTU's frames whole both ways; a
/// frame past the slot is still counted, not sent.
#[test]
fn jumbo_frames_cross_a_veth_whole() {
    if !root_or_skip("jumbo_frames_cross_a_veth_whole") {
        return;
    }
    let ns = veth_ns();
    for dev in ["pa", "pb"] {
        ns.exec_checked(&["ip", "link", "set", dev, "mtu", "9216"])
            .unwrap();
    }
    let sizes = [14 + 9216, 9014, 5000, 60, 2000];
    let frames: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(seq, &len)| {
            let mut f = frame(seq);
            f.resize(len, seq as u8);
            f
        })
        .collect();
    let (got, counts) = ns
        .run(|| {
            let mut tx = PacketPort::open("pa", 64, 9216 + 14).unwrap();
            let mut rx = PacketPort::open("pb", 64, 9216 + 14).unwrap();
            rx.set_promiscuous(true).unwrap();
            assert!(tx.max_frame() >= 9216 + 14);
            let batch: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
            let mut too_long = frames[0].clone();
            too_long.resize(tx.max_frame() + 1, 1);
            assert_eq!(tx.send_batch(&batch), frames.len());
            assert_eq!(tx.send_batch(&[&too_long]), 0);
            let mut got = Vec::new();
            let deadline = Instant::now() + WAIT;
            while got.len() < frames.len() && Instant::now() < deadline {
                drain_into(&mut rx, Duration::from_millis(20), 10240, &mut got);
            }
            (got, (tx.tx_too_big(), rx.rx_truncated(), rx.rx_dropped()))
        })
        .unwrap();
    assert_eq!(counts, (1, 0, 0), "too big, truncated, dropped");
    assert_eq!(got.len(), frames.len());
    for (seq, (g, f)) in got.iter().zip(&frames).enumerate() {
        assert!(g == f, "frame {seq}: {} bytes, sent {}", g.len(), f.len());
    }
}

#[test]
fn oversized_frame_is_counted_not_sent() {
    if !root_or_skip("oversized_frame_is_counted_not_sent") {
        return;
    }
    let ns = veth_ns();
    let (got, too_big, full, queued) = ns
        .run(|| {
            let mut tx = PacketPort::open("pa", 16, 2048).unwrap();
            let mut rx = PacketPort::open("pb", 16, 2048).unwrap();
            let mut big = frame(1);
            big.resize(tx.max_frame() + 1, 0xee);
            let small = frame(2);
            let queued = tx.send_batch(&[&big, &small]);
            let mut got = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(2);
            while got.is_empty() && Instant::now() < deadline {
                drain(&mut rx, Duration::from_millis(50), &mut got);
            }
            // Time for a stray big frame to arrive, had it been sent.
            drain(&mut rx, Duration::from_millis(200), &mut got);
            (got, tx.tx_too_big(), tx.tx_ring_full(), queued)
        })
        .unwrap();
    assert_eq!(queued, 1);
    assert_eq!(too_big, 1);
    assert_eq!(full, 0);
    assert_eq!(got, vec![frame(2)]);
}

#[test]
fn full_tx_ring_counts_the_rest() {
    if !root_or_skip("full_tx_ring_counts_the_rest") {
        return;
    }
    let ns = veth_ns();
    // The interface is down, so the kernel keeps every queued slot.
    ns.exec_checked(&["ip", "link", "set", "pa", "down"])
        .unwrap();
    let (frames, queued, full, flush_errors) = ns
        .run(|| {
            let mut tx = PacketPort::open("pa", 1, 2048).unwrap();
            let f = frame(3);
            let batch = vec![f.as_slice(); tx.frames() + 5];
            let queued = tx.send_batch(&batch);
            (tx.frames(), queued, tx.tx_ring_full(), tx.tx_flush_errors())
        })
        .unwrap();
    assert_eq!(queued, frames, "a fresh ring takes one frame per slot");
    assert_eq!(full, 5);
    assert_eq!(flush_errors, 1, "sending on a down interface fails");
}

#[test]
fn missing_interface_is_named() {
    if !root_or_skip("missing_interface_is_named") {
        return;
    }
    let ns = NetNs::new("lr-io-pkt").unwrap();
    let err = ns
        .run(|| PacketPort::open("nosuch0", 16, 2048).unwrap_err())
        .unwrap();
    let msg = err.to_string();
    assert!(msg.contains("\"nosuch0\" not found"), "{msg}");
}

#[test]
fn a_fanout_group_sees_each_frame_once() {
    if !root_or_skip("a_fanout_group_sees_each_frame_once") {
        return;
    }
    let ns = veth_ns();
    let got = ns
        .run(|| {
            let mut tx = PacketPort::open("pa", 256, 2048).unwrap();
            let mut group = [(); 2].map(|_| PacketPort::open("pb", 2048, 2048).unwrap());
            for p in &group {
                p.join_fanout(0x4c52, io::Fanout::Hash).unwrap();
            }
            let frames: Vec<Vec<u8>> = (0..COUNT).map(frame).collect();
            let mut sent = 0;
            let deadline = Instant::now() + WAIT;
            let mut got = Vec::new();
            for _ in 0..10_000 {
                if (sent == COUNT && got.len() >= COUNT) || Instant::now() >= deadline {
                    break;
                }
                let end = (sent + BATCH).min(COUNT);
                let batch: Vec<&[u8]> = frames[sent..end].iter().map(Vec::as_slice).collect();
                sent += tx.send_batch(&batch);
                for p in &mut group {
                    drain(p, Duration::from_millis(1), &mut got);
                }
            }
            got
        })
        .unwrap();
    let mut seqs: Vec<u32> = got
        .iter()
        .map(|f| u32::from_be_bytes([f[14], f[15], f[16], f[17]]))
        .collect();
    seqs.sort_unstable();
    let all: Vec<u32> = (0..COUNT as u32).collect();
    assert_eq!(seqs, all, "each frame once across the group");

    // A socket of another interface cannot join the group.
    let err = ns
        .run(|| {
            let a = PacketPort::open("pb", 64, 2048).unwrap();
            a.join_fanout(0x4c53, io::Fanout::Hash).unwrap();
            let b = PacketPort::open("pa", 64, 2048).unwrap();
            b.join_fanout(0x4c53, io::Fanout::Hash).unwrap_err()
        })
        .unwrap();
    assert!(
        err.to_string()
            .starts_with("joining fanout group 19539 on pa: "),
        "{err}"
    );
}

#[test]
fn a_vlan_tag_the_kernel_takes_out_is_put_back() {
    if !root_or_skip("a_vlan_tag_the_kernel_takes_out_is_put_back") {
        return;
    }
    let ns = veth_ns();
    let mut tagged = Vec::new();
    tagged.extend_from_slice(&DST_MAC);
    tagged.extend_from_slice(&SRC_MAC);
    tagged.extend_from_slice(&[0x81, 0x00, 0x20, 0x64]); // priority 1, VLAN 100
    tagged.extend_from_slice(&ETHERTYPE);
    tagged.extend((0..50u8).collect::<Vec<_>>());
    let got = ns
        .run(|| {
            let mut tx = PacketPort::open("pa", 64, 2048).unwrap();
            let mut rx = PacketPort::open("pb", 64, 2048).unwrap();
            assert_eq!(tx.send_batch(&[&tagged]), 1);
            let mut storage = [0u8; 2048];
            let mut lens = [0usize; 1];
            let deadline = Instant::now() + WAIT;
            for _ in 0..1000 {
                let mut fds = [PollFd::new(rx.as_raw_fd(), Interest::READABLE)];
                poll(&mut fds, Some(Duration::from_millis(10))).unwrap();
                let mut bufs = [&mut storage[..]];
                if rx.recv_batch(&mut bufs, &mut lens) == 1 && storage[6..12] == SRC_MAC {
                    return Some(storage[..lens[0]].to_vec());
                }
                if Instant::now() >= deadline {
                    break;
                }
            }
            None
        })
        .unwrap();
    assert_eq!(
        got.as_deref(),
        Some(&tagged[..]),
        "the frame as it was on the wire"
    );
}
