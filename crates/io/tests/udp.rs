//! Batched UDP between real sockets: on the host's loopback (which never leaves the
//! machine), and inside a test namespace where a route is needed.

use std::io::ErrorKind;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

use io::netns::{NetNs, is_root, skip_test};
use io::{
    Interest, MAX_BATCH, PollFd, RecvBatch, RecvMeta, SendBatch, SendResult, UdpSocket, poll,
};

const WAIT: Duration = Duration::from_secs(3);

/// Packet `i` of a test stream: a size that varies from 1 to 1400 bytes, and content
/// that says which packet it is.
fn payload(i: usize) -> Vec<u8> {
    let len = 1 + (i * 397) % 1400;
    (0..len)
        .map(|j| (i as u8).wrapping_mul(31) ^ (j as u8))
        .collect()
}

fn wait_readable(sock: &UdpSocket) {
    let mut fds = [PollFd::new(sock.as_raw_fd(), Interest::READABLE)];
    poll(&mut fds, Some(Duration::from_millis(100))).unwrap();
}

/// Receives until `count` datagrams arrived or time runs out.
fn recv_all(sock: &UdpSocket, count: usize, buf_len: usize) -> Vec<(Vec<u8>, RecvMeta)> {
    let mut storage = vec![vec![0u8; buf_len]; count];
    let mut bufs: Vec<&mut [u8]> = storage.iter_mut().map(|b| b.as_mut_slice()).collect();
    let mut meta = vec![RecvMeta::default(); count];
    let mut got = 0;
    let deadline = Instant::now() + WAIT;
    while got < count && Instant::now() < deadline {
        wait_readable(sock);
        got += sock.recv_batch(&mut bufs[got..], &mut meta[got..]).unwrap();
    }
    (0..got)
        .map(|i| (bufs[i][..meta[i].len].to_vec(), meta[i]))
        .collect()
}

/// Big buffers so a whole batch can sit in the queue; without root the kernel caps
/// them, so the sender then goes in smaller steps.
fn step_for(rx: &UdpSocket) -> usize {
    rx.set_buffer_sizes(8 << 20, 8 << 20).unwrap();
    let (rcv, _) = rx.buffer_sizes().unwrap();
    if rcv >= 4 << 20 {
        usize::MAX
    } else {
        eprintln!("note: receive buffer capped at {rcv} bytes (not root); sending in steps");
        16
    }
}

fn batch_round_trip(dst_ip: IpAddr) {
    let rx = UdpSocket::bind(0).unwrap();
    let tx = UdpSocket::bind(0).unwrap();
    assert!(
        rx.is_ipv6(),
        "the host has IPv6, so the socket is dual-stack"
    );
    let dst = SocketAddr::new(dst_ip, rx.local_port());
    let step = step_for(&rx);

    let payloads: Vec<Vec<u8>> = (0..200).map(payload).collect();
    let pkts: Vec<(&[u8], SocketAddr)> = payloads.iter().map(|p| (p.as_slice(), dst)).collect();
    let mut got = Vec::new();
    for chunk in pkts.chunks(step) {
        let res = tx.send_batch(chunk);
        assert_eq!(
            res,
            SendResult {
                sent: chunk.len(),
                failed: 0
            }
        );
        got.extend(recv_all(&rx, chunk.len(), 2048));
    }

    assert_eq!(got.len(), 200);
    let expected_src = SocketAddr::new(dst_ip, tx.local_port());
    for (i, (data, meta)) in got.iter().enumerate() {
        assert_eq!(data, &payloads[i], "packet {i}");
        assert_eq!(meta.len, payloads[i].len());
        assert!(!meta.truncated);
        // An IPv4 sender comes back as V4, not as ::ffff:a.b.c.d.
        assert_eq!(meta.src, expected_src, "packet {i}");
    }
}

#[test]
fn batch_over_ipv4_loopback() {
    batch_round_trip(IpAddr::V4(Ipv4Addr::LOCALHOST));
}

#[test]
fn batch_over_ipv6_loopback() {
    batch_round_trip(IpAddr::V6(Ipv6Addr::LOCALHOST));
}

#[test]
fn more_than_one_syscall_worth_with_own_scratch() {
    let rx = UdpSocket::bind(0).unwrap();
    let tx = UdpSocket::bind(0).unwrap();
    let step = step_for(&rx);
    let dst = SocketAddr::from((Ipv4Addr::LOCALHOST, rx.local_port()));
    let count = MAX_BATCH + 44;
    let payloads: Vec<[u8; 4]> = (0..count as u32).map(u32::to_be_bytes).collect();
    let pkts: Vec<(&[u8], SocketAddr)> = payloads.iter().map(|p| (p.as_slice(), dst)).collect();

    let mut send_scratch = SendBatch::with_capacity(64);
    let mut recv_scratch = RecvBatch::new();
    let mut storage = vec![[0u8; 16]; count];
    let mut bufs: Vec<&mut [u8]> = storage.iter_mut().map(|b| b.as_mut_slice()).collect();
    let mut meta = vec![RecvMeta::default(); count];
    let mut got = 0;
    for chunk in pkts.chunks(step) {
        let res = tx.send_batch_with(&mut send_scratch, chunk);
        assert_eq!(res.sent, chunk.len());
        let want = got + chunk.len();
        let deadline = Instant::now() + WAIT;
        while got < want && Instant::now() < deadline {
            wait_readable(&rx);
            let n = rx
                .recv_batch_with(
                    &mut recv_scratch,
                    &mut bufs[got..want],
                    &mut meta[got..want],
                )
                .unwrap();
            assert!(n <= MAX_BATCH);
            got += n;
        }
    }
    assert_eq!(got, count);
    for i in 0..count {
        assert_eq!(&bufs[i][..meta[i].len], &payloads[i]);
    }
}

#[test]
fn truncated_datagram_is_flagged() {
    let rx = UdpSocket::bind(0).unwrap();
    let tx = UdpSocket::bind(0).unwrap();
    let dst = SocketAddr::from((Ipv4Addr::LOCALHOST, rx.local_port()));
    let big = payload(2);
    assert!(big.len() > 100);
    let res = tx.send_batch(&[(&big, dst), (b"small", dst)]);
    assert_eq!(res.sent, 2);
    let got = recv_all(&rx, 2, 100);
    assert_eq!(got.len(), 2);
    assert!(got[0].1.truncated);
    assert_eq!(got[0].1.len, 100);
    assert_eq!(got[0].0, big[..100]);
    assert!(!got[1].1.truncated);
    assert_eq!(got[1].0, b"small");
}

#[test]
fn nothing_pending_returns_zero_at_once() {
    let rx = UdpSocket::bind(0).unwrap();
    let mut buf = [0u8; 64];
    let mut meta = [RecvMeta::default()];
    let start = Instant::now();
    assert_eq!(rx.recv_batch(&mut [&mut buf[..]], &mut meta).unwrap(), 0);
    assert!(start.elapsed() < Duration::from_millis(100));
    assert_eq!(rx.recv_batch(&mut [], &mut meta).unwrap(), 0);
    assert_eq!(rx.send_batch(&[]), SendResult::default());
}

#[test]
fn port_in_use_is_a_clear_error() {
    let a = UdpSocket::bind(0).unwrap();
    let err = UdpSocket::bind(a.local_port()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::AddrInUse);
    assert!(
        err.to_string().contains(&a.local_port().to_string()),
        "{err}"
    );
}

#[test]
fn single_send_to_both_families() {
    let rx = UdpSocket::bind(0).unwrap();
    let tx = UdpSocket::bind(0).unwrap();
    tx.send_to(
        b"four",
        SocketAddr::from((Ipv4Addr::LOCALHOST, rx.local_port())),
    )
    .unwrap();
    tx.send_to(
        b"six",
        SocketAddr::from((Ipv6Addr::LOCALHOST, rx.local_port())),
    )
    .unwrap();
    let mut got = recv_all(&rx, 2, 64);
    got.sort_by_key(|(d, _)| d.clone());
    assert_eq!(got[0].0, b"four");
    assert_eq!(
        got[0].1.src,
        SocketAddr::from((Ipv4Addr::LOCALHOST, tx.local_port()))
    );
    assert_eq!(got[1].0, b"six");
    assert_eq!(
        got[1].1.src,
        SocketAddr::from((Ipv6Addr::LOCALHOST, tx.local_port()))
    );
}

#[test]
fn fwmark_set_and_clear() {
    if !is_root() {
        skip_test("fwmark_set_and_clear", "SO_MARK needs root");
        return;
    }
    let sock = UdpSocket::bind(0).unwrap();
    assert_eq!(sock.fwmark().unwrap(), 0);
    sock.set_fwmark(0xca6c).unwrap();
    assert_eq!(sock.fwmark().unwrap(), 0xca6c);
    sock.set_fwmark(u32::MAX).unwrap();
    assert_eq!(sock.fwmark().unwrap(), u32::MAX);
    sock.set_fwmark(0).unwrap();
    assert_eq!(sock.fwmark().unwrap(), 0);
}

#[test]
fn refused_datagrams_are_skipped_not_fatal() {
    if !is_root() {
        skip_test(
            "refused_datagrams_are_skipped_not_fatal",
            "needs root for a namespace",
        );
        return;
    }
    // A namespace with only loopback: 198.18.99.1 has no route there (ENETUNREACH), so
    // the refusals are real and nothing can leave.
    let ns = NetNs::new("lr-io-udp").unwrap();
    ns.run(|| {
        let rx = UdpSocket::bind(0).unwrap();
        let tx = UdpSocket::bind(0).unwrap();
        let ok = SocketAddr::from((Ipv4Addr::LOCALHOST, rx.local_port()));
        let unroutable = SocketAddr::from((Ipv4Addr::new(198, 18, 99, 1), 9));
        let unroutable6 = SocketAddr::from(("2001:2::99".parse::<Ipv6Addr>().unwrap(), 9));
        let res = tx.send_batch(&[
            (b"a", ok),
            (b"x", unroutable),
            (b"b", ok),
            (b"y", unroutable6),
            (b"z", unroutable),
            (b"c", ok),
        ]);
        assert_eq!(res, SendResult { sent: 3, failed: 3 });
        let err = tx.last_send_error().expect("the refusal is remembered");
        eprintln!("kernel: sendmmsg to an unroutable address: {err}");
        assert_eq!(err.raw_os_error(), Some(libc::ENETUNREACH));
        let got = recv_all(&rx, 3, 16);
        let data: Vec<&[u8]> = got.iter().map(|(d, _)| d.as_slice()).collect();
        assert_eq!(data, [b"a", b"b", b"c"]);

        let err = tx.send_to(b"x", unroutable).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENETUNREACH));
    })
    .unwrap();
}

/// Runs of equal-size datagrams to one address go down as UDP GSO sends and arrive as
/// the datagrams they were, in order, mixed with other sizes and two destinations.
#[test]
fn gso_batch_arrives_datagram_by_datagram() {
    let rx1 = UdpSocket::bind(0).unwrap();
    let rx2 = UdpSocket::bind(0).unwrap();
    // Room for the whole burst: the default receive buffer holds fewer datagrams.
    rx1.set_buffer_sizes(4 << 20, 4 << 20).unwrap();
    rx2.set_buffer_sizes(4 << 20, 4 << 20).unwrap();
    let tx = UdpSocket::bind(0).unwrap();
    let a1 = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), rx1.local_port());
    let a2 = SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), rx2.local_port());
    let mut sent1 = Vec::new();
    let mut sent2 = Vec::new();
    for i in 0..150usize {
        // Mostly 1200-byte runs to a1, with a short tail now and then and some to a2.
        let len = if i % 37 == 36 { 300 } else { 1200 };
        let body: Vec<u8> = (0..len).map(|j| (i ^ j) as u8).collect();
        if i % 50 < 45 {
            sent1.push(body)
        } else {
            sent2.push(body)
        }
    }
    let mut pkts: Vec<(&[u8], SocketAddr)> = Vec::new();
    let (mut k1, mut k2) = (0, 0);
    for i in 0..150usize {
        if i % 50 < 45 {
            pkts.push((&sent1[k1], a1));
            k1 += 1;
        } else {
            pkts.push((&sent2[k2], a2));
            k2 += 1;
        }
    }
    let res = tx.send_gso_batch_with(&mut io::GsoSendBatch::new(), &mut SendBatch::new(), &pkts);
    assert_eq!(
        res,
        SendResult {
            sent: 150,
            failed: 0
        }
    );
    let got1: Vec<Vec<u8>> = recv_all(&rx1, sent1.len(), 2000)
        .into_iter()
        .map(|(d, _)| d)
        .collect();
    let got2: Vec<Vec<u8>> = recv_all(&rx2, sent2.len(), 2000)
        .into_iter()
        .map(|(d, _)| d)
        .collect();
    for (got, sent) in [(&got1, &sent1), (&got2, &sent2)] {
        let lens = |v: &Vec<Vec<u8>>| v.iter().map(|d| d.len()).collect::<Vec<_>>();
        assert_eq!(got.len(), sent.len(), "datagrams received");
        assert_eq!(lens(got), lens(sent), "datagram sizes in order");
        let bad = got.iter().zip(sent.iter()).position(|(g, s)| g != s);
        assert_eq!(bad, None, "first datagram whose content differs");
    }
}

/// A GSO run whose datagrams do not fit the path MTU is refused by the kernel as a
/// whole; it must go again as plain datagrams (which IPv6 fragments at the source)
/// and arrive, not be lost or counted as failed.
#[test]
fn gso_run_over_the_path_mtu_falls_back_to_plain_sends() {
    if !is_root() {
        skip_test(
            "gso_run_over_the_path_mtu_falls_back_to_plain_sends",
            "needs root for namespaces",
        );
        return;
    }
    let a = NetNs::new("lr-io-gso-a").unwrap();
    let b = NetNs::new("lr-io-gso-b").unwrap();
    io::netns::veth_pair(
        &io::netns::VethEnd {
            ns: &a,
            ifname: "gso-a",
            addrs: &["2001:2:0:9::1/64"],
        },
        &io::netns::VethEnd {
            ns: &b,
            ifname: "gso-b",
            addrs: &["2001:2:0:9::2/64"],
        },
    )
    .unwrap();
    for (ns, dev) in [(&a, "gso-a"), (&b, "gso-b")] {
        ns.exec_checked(&["ip", "link", "set", dev, "mtu", "1280"])
            .unwrap();
    }
    let rx = b
        .run(|| {
            let rx = UdpSocket::bind(0).unwrap();
            rx.set_buffer_sizes(4 << 20, 4 << 20).unwrap();
            rx
        })
        .unwrap();
    let tx = a.run(|| UdpSocket::bind(0).unwrap()).unwrap();
    let to = SocketAddr::new("2001:2:0:9::2".parse().unwrap(), rx.local_port());
    // 1300-byte datagrams: with IPv6 and UDP headers over a 1280-byte link.
    let sent: Vec<Vec<u8>> = (0..20usize)
        .map(|i| (0..1300).map(|j| (i * 7 + j) as u8).collect())
        .collect();
    let pkts: Vec<(&[u8], SocketAddr)> = sent.iter().map(|d| (d.as_slice(), to)).collect();
    let res = tx.send_gso_batch_with(&mut io::GsoSendBatch::new(), &mut SendBatch::new(), &pkts);
    eprintln!(
        "kernel: a GSO run over the path MTU: {:?}",
        tx.last_send_error()
    );
    assert_eq!(
        res,
        SendResult {
            sent: 20,
            failed: 0
        }
    );
    let got: Vec<Vec<u8>> = recv_all(&rx, sent.len(), 2000)
        .into_iter()
        .map(|(d, _)| d)
        .collect();
    assert!(got == sent, "the 20 datagrams arrive intact and in order");
    assert!(
        tx.gso_enabled(),
        "an MTU refusal leaves GSO on for other paths"
    );
}

/// A group of sockets on one port: each sender's datagrams all reach one of them,
/// and every datagram reaches one.
#[test]
fn a_reuseport_group_shares_one_port_and_keeps_each_sender_on_one_socket() {
    let group = UdpSocket::bind_group(0, 3).unwrap();
    let port = group[0].local_port();
    assert!(group.iter().all(|s| s.local_port() == port));
    let senders: Vec<UdpSocket> = (0..12).map(|_| UdpSocket::bind(0).unwrap()).collect();
    let dst = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    for round in 0..4u8 {
        for (i, s) in senders.iter().enumerate() {
            s.send_to(&[i as u8, round], dst).unwrap();
        }
    }
    let mut seen_on: std::collections::HashMap<u16, usize> = Default::default();
    let mut total = 0;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    while total < 48 && std::time::Instant::now() < deadline {
        for (k, sock) in group.iter().enumerate() {
            let mut storage = vec![[0u8; 64]; 16];
            let mut bufs: Vec<&mut [u8]> = storage.iter_mut().map(|b| b.as_mut_slice()).collect();
            let mut meta = vec![RecvMeta::default(); 16];
            let n = sock.recv_batch(&mut bufs, &mut meta).unwrap_or(0);
            for m in &meta[..n] {
                let on = *seen_on.entry(m.src.port()).or_insert(k);
                assert_eq!(on, k, "a sender's datagrams went to two sockets");
                total += 1;
            }
        }
    }
    assert_eq!(total, 48, "every datagram arrived");
    assert_eq!(seen_on.len(), 12);
    let twin = group[1].duplicate().unwrap();
    assert_eq!(twin.local_port(), port);
}
