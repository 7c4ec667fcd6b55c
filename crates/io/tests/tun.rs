//! TUN device against the real kernel, inside a network namespace made for the test.
//! Needs root and /dev/net/tun; skipped with a note otherwise.

use std::io::ErrorKind;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

use io::netns::{NetNs, is_root, skip_test};
use io::{Interest, PollFd, RecvMeta, TunDevice, UdpSocket, is_gone, poll};

const TUN_ADDR: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const PEER_ADDR: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const TUN_ADDR6: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1);
const PEER_ADDR6: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 2);
const PEER_PORT: u16 = 9999;
const WAIT: Duration = Duration::from_secs(3);

fn tun_available(test: &str) -> bool {
    if !is_root() {
        skip_test(test, "needs root");
        return false;
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        skip_test(test, "/dev/net/tun is missing");
        return false;
    }
    true
}

fn wait_readable(fd: i32, timeout: Duration) -> bool {
    let mut fds = [PollFd::new(fd, Interest::READABLE)];
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if poll(&mut fds, Some(Duration::from_millis(50))).unwrap() > 0 {
            return true;
        }
    }
    false
}

/// Reads from the TUN until `want` matches a packet; other traffic (IPv6 router
/// solicitations and the like, which the kernel sends on a fresh link) is skipped.
fn read_matching(tun: &TunDevice, want: impl Fn(&[u8]) -> bool) -> Option<Vec<u8>> {
    let mut storage = vec![[0u8; 2048]; 8];
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if !wait_readable(tun.as_raw_fd(), Duration::from_millis(100)) {
            continue;
        }
        let mut bufs: Vec<&mut [u8]> = storage.iter_mut().map(|b| b.as_mut_slice()).collect();
        let mut lens = [0usize; 8];
        let n = tun.read_batch(&mut bufs, &mut lens).unwrap();
        for i in 0..n {
            let pkt = &bufs[i][..lens[i]];
            if want(pkt) {
                return Some(pkt.to_vec());
            }
        }
    }
    None
}

fn recv_on(sock: &UdpSocket, count: usize) -> Vec<(Vec<u8>, SocketAddr)> {
    let mut storage = vec![[0u8; 2048]; count];
    let mut bufs: Vec<&mut [u8]> = storage.iter_mut().map(|b| b.as_mut_slice()).collect();
    let mut meta = vec![RecvMeta::default(); count];
    let mut got = 0;
    let deadline = Instant::now() + WAIT;
    while got < count && Instant::now() < deadline {
        wait_readable(sock.as_raw_fd(), Duration::from_millis(100));
        got += sock.recv_batch(&mut bufs[got..], &mut meta[got..]).unwrap();
    }
    (0..got)
        .map(|i| (bufs[i][..meta[i].len].to_vec(), meta[i].src))
        .collect()
}

/// The Internet checksum over `chunks` in turn (each but the last of even length).
fn checksum(chunks: &[&[u8]]) -> u16 {
    use wire::checksum::{combine, sum};
    !chunks.iter().fold(0, |acc, c| combine(acc, sum(c)))
}

fn udp_header(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let len = (8 + payload.len()) as u16;
    let mut udp = Vec::with_capacity(len as usize);
    udp.extend_from_slice(&sport.to_be_bytes());
    udp.extend_from_slice(&dport.to_be_bytes());
    udp.extend_from_slice(&len.to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(payload);
    udp
}

/// An IPv4/UDP packet; the UDP checksum is left 0, which IPv4 allows.
fn ipv4_udp(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let udp = udp_header(sport, dport, payload);
    let total = (20 + udp.len()) as u16;
    let mut ip = vec![0x45, 0];
    ip.extend_from_slice(&total.to_be_bytes());
    ip.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0]);
    ip.extend_from_slice(&src.octets());
    ip.extend_from_slice(&dst.octets());
    let sum = checksum(&[&ip]);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    ip.extend_from_slice(&udp);
    ip
}

/// An IPv6/UDP packet with its (mandatory) UDP checksum.
fn ipv6_udp(src: Ipv6Addr, dst: Ipv6Addr, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut udp = udp_header(sport, dport, payload);
    let len = udp.len() as u32;
    let pseudo: Vec<u8> = [
        &src.octets()[..],
        &dst.octets()[..],
        &len.to_be_bytes()[..],
        &[0, 0, 0, 17][..],
    ]
    .concat();
    let sum = checksum(&[&pseudo, &udp]);
    udp[6..8].copy_from_slice(&sum.to_be_bytes());
    let mut ip = vec![0x60, 0, 0, 0];
    ip.extend_from_slice(&(len as u16).to_be_bytes());
    ip.extend_from_slice(&[17, 64]);
    ip.extend_from_slice(&src.octets());
    ip.extend_from_slice(&dst.octets());
    ip.extend_from_slice(&udp);
    ip
}

fn is_udp4_to(pkt: &[u8], dst: Ipv4Addr, dport: u16) -> bool {
    pkt.len() >= 28
        && pkt[0] >> 4 == 4
        && pkt[9] == 17
        && pkt[16..20] == dst.octets()
        && pkt[22..24] == dport.to_be_bytes()
}

fn is_udp6_to(pkt: &[u8], dst: Ipv6Addr, dport: u16) -> bool {
    pkt.len() >= 48
        && pkt[0] >> 4 == 6
        && pkt[6] == 17
        && pkt[24..40] == dst.octets()
        && pkt[42..44] == dport.to_be_bytes()
}

#[test]
fn tun_round_trip_in_netns() {
    if !tun_available("tun_round_trip_in_netns") {
        return;
    }
    let ns = NetNs::new("lr-io-tun").unwrap();
    ns.run(|| {
        let tun = TunDevice::create("lrt%d").unwrap();
        let name = tun.name().to_owned();
        assert!(name.starts_with("lrt") && !name.contains('%'), "{name}");
        assert!(tun.still_exists());
        assert!(!tun.is_up().unwrap());

        // if_nametoindex resolves in this thread's namespace, where the device lives.
        let cname = std::ffi::CString::new(name.clone()).unwrap();
        // SAFETY: cname is a valid NUL-terminated string.
        let by_name = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        assert_eq!(tun.ifindex().unwrap(), by_name);

        ns.add_addr(&name, "198.18.0.1/24").unwrap();
        ns.add_addr(&name, "2001:2::1/64").unwrap();
        ns.link_up(&name).unwrap();
        assert!(tun.is_up().unwrap());

        tun.set_mtu(1420).unwrap();
        assert_eq!(tun.mtu().unwrap(), 1420);
        let err = tun.set_mtu(10).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
        assert!(err.to_string().contains(&name), "{err}");

        // Socket -> kernel routing -> TUN.
        let sock = UdpSocket::bind(0).unwrap();
        let port = sock.local_port();
        sock.send_to(b"hello tun", SocketAddr::from((PEER_ADDR, PEER_PORT)))
            .unwrap();
        let pkt = read_matching(&tun, |p| is_udp4_to(p, PEER_ADDR, PEER_PORT))
            .expect("the datagram never reached the TUN");
        assert_eq!(pkt[0], 0x45, "IPv4, 20-byte header");
        assert_eq!(u16::from_be_bytes([pkt[2], pkt[3]]) as usize, pkt.len());
        assert_eq!(pkt[9], 17, "UDP");
        assert_eq!(pkt[12..16], TUN_ADDR.octets());
        assert_eq!(pkt[16..20], PEER_ADDR.octets());
        assert_eq!(pkt[20..22], port.to_be_bytes());
        assert_eq!(&pkt[28..], b"hello tun");
        assert_eq!(checksum(&[&pkt[..20]]), 0, "header checksum");

        // The same over IPv6.
        sock.send_to(b"hello tun6", SocketAddr::from((PEER_ADDR6, PEER_PORT)))
            .unwrap();
        let pkt = read_matching(&tun, |p| is_udp6_to(p, PEER_ADDR6, PEER_PORT))
            .expect("the IPv6 datagram never reached the TUN");
        assert_eq!(pkt[8..24], TUN_ADDR6.octets());
        assert_eq!(&pkt[48..], b"hello tun6");

        // A packet bigger than the buffer is dropped and counted, never returned; one
        // that exactly fills it is returned whole.
        let before = tun.too_big();
        sock.send_to(&[0xab; 1000], SocketAddr::from((PEER_ADDR, PEER_PORT)))
            .unwrap();
        sock.send_to(&[0xcd; 200 - 28], SocketAddr::from((PEER_ADDR, PEER_PORT)))
            .unwrap();
        let mut small = vec![[0u8; 200]; 4];
        let mut exact = None;
        let deadline = Instant::now() + WAIT;
        while (exact.is_none() || tun.too_big() == before) && Instant::now() < deadline {
            wait_readable(tun.as_raw_fd(), Duration::from_millis(100));
            let mut bufs: Vec<&mut [u8]> = small.iter_mut().map(|b| b.as_mut_slice()).collect();
            let mut lens = [0usize; 4];
            let n = tun.read_batch(&mut bufs, &mut lens).unwrap();
            for i in 0..n {
                let pkt = &bufs[i][..lens[i]];
                if is_udp4_to(pkt, PEER_ADDR, PEER_PORT) {
                    assert!(exact.is_none(), "only the exact fit may come back");
                    exact = Some(pkt.to_vec());
                }
            }
        }
        assert_eq!(tun.too_big(), before + 1);
        let exact = exact.expect("the 200-byte packet never came back");
        assert_eq!(exact.len(), 200);
        assert!(exact[28..].iter().all(|&b| b == 0xcd));

        // TUN -> kernel -> socket.
        let from_peer = ipv4_udp(PEER_ADDR, TUN_ADDR, 7777, port, b"from tun");
        tun.write(&from_peer).unwrap();
        let got = recv_on(&sock, 1);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, b"from tun");
        assert_eq!(got[0].1, SocketAddr::from((PEER_ADDR, 7777)));

        let from_peer6 = ipv6_udp(PEER_ADDR6, TUN_ADDR6, 7778, port, b"from tun6");
        tun.write(&from_peer6).unwrap();
        let got = recv_on(&sock, 1);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, b"from tun6");
        assert_eq!(got[0].1, SocketAddr::from((PEER_ADDR6, 7778)));

        // A batch with a malformed packet in the middle: the kernel refuses it (not
        // IPv4 or IPv6), the others go through.
        let a = ipv4_udp(PEER_ADDR, TUN_ADDR, 7001, port, b"batch a");
        let b = ipv4_udp(PEER_ADDR, TUN_ADDR, 7002, port, b"batch b");
        let garbage = [0u8; 40];
        let err = tun.write(&garbage).unwrap_err();
        eprintln!("kernel: writing a non-IP packet to a TUN gives {err:?}");
        assert!(!is_gone(&err));
        let dropped = tun.dropped();
        assert_eq!(tun.write_batch(&[&a, &garbage, &b]), 2);
        assert_eq!(tun.dropped(), dropped + 1);
        let mut got = recv_on(&sock, 2);
        got.sort();
        assert_eq!(
            got[0],
            (b"batch a".to_vec(), SocketAddr::from((PEER_ADDR, 7001)))
        );
        assert_eq!(
            got[1],
            (b"batch b".to_vec(), SocketAddr::from((PEER_ADDR, 7002)))
        );

        // Nothing pending: read_batch returns 0 at once.
        while tun
            .read_batch(&mut [&mut [0u8; 2048][..]], &mut [0])
            .unwrap()
            > 0
        {}
        let start = Instant::now();
        assert_eq!(
            tun.read_batch(&mut [&mut [0u8; 2048][..]], &mut [0])
                .unwrap(),
            0
        );
        assert!(start.elapsed() < Duration::from_millis(100));

        // Delete the interface under the open fd.
        ns.exec_checked(&["ip", "link", "del", &name]).unwrap();
        assert!(!tun.still_exists());

        let mut fds = [PollFd::new(tun.as_raw_fd(), Interest::BOTH)];
        let n = poll(&mut fds, Some(Duration::from_millis(500))).unwrap();
        eprintln!("kernel: poll on a deleted TUN: {n} ready, {:?}", fds[0]);
        assert!(fds[0].error(), "{:?}", fds[0]);

        let mut buf = [0u8; 2048];
        let err = tun
            .read_batch(&mut [&mut buf[..]], &mut [0])
            .expect_err("read on a deleted TUN");
        eprintln!("kernel: read on a deleted TUN: {err:?}");
        assert!(is_gone(&err), "{err:?}");

        let err = tun.write(&from_peer).expect_err("write on a deleted TUN");
        eprintln!("kernel: write on a deleted TUN: {err:?}");
        assert!(is_gone(&err), "{err:?}");

        let dropped = tun.dropped();
        assert_eq!(tun.write_batch(&[&from_peer, &from_peer]), 0);
        assert_eq!(tun.dropped(), dropped + 2);

        let err = tun.mtu().expect_err("MTU of a deleted interface");
        eprintln!("kernel: SIOCGIFMTU on a deleted TUN: {err}");
        assert!(is_gone(&err), "{err:?}");
        assert!(is_gone(&tun.ifindex().unwrap_err()));
    })
    .unwrap();
}

#[test]
fn tun_down_and_busy() {
    if !tun_available("tun_down_and_busy") {
        return;
    }
    let ns = NetNs::new("lr-io-tun2").unwrap();
    ns.run(|| {
        let tun = TunDevice::create("lrbusy0").unwrap();
        assert_eq!(tun.name(), "lrbusy0");

        let err = TunDevice::create("lrbusy0").unwrap_err();
        eprintln!("kernel: second TUNSETIFF on an attached TUN: {err}");
        assert_eq!(err.kind(), ErrorKind::ResourceBusy);
        assert!(err.to_string().contains("busy"), "{err}");

        // An interface of another type under the wanted name.
        let out = std::process::Command::new("ip")
            .args(["link", "add", "lrdummy0", "type", "dummy"])
            .output()
            .unwrap();
        if out.status.success() {
            let err = TunDevice::create("lrdummy0").unwrap_err();
            eprintln!("kernel: TUNSETIFF on a dummy's name: {err}");
            assert!(err.to_string().contains("lrdummy0"), "{err}");
        }

        // Down, with no address: reads find nothing, and a write is not a "gone" error.
        assert!(!tun.is_up().unwrap());
        assert_eq!(
            tun.read_batch(&mut [&mut [0u8; 2048][..]], &mut [0])
                .unwrap(),
            0
        );
        let pkt = ipv4_udp(PEER_ADDR, TUN_ADDR, 1, 2, b"x");
        match tun.write(&pkt) {
            Ok(()) => eprintln!("kernel: write on a down TUN succeeds (packet dropped)"),
            Err(e) => {
                eprintln!("kernel: write on a down TUN: {e:?}");
                assert!(!is_gone(&e));
            }
        }
        let dropped = tun.dropped();
        assert_eq!(tun.write_batch(&[&pkt, &pkt, &pkt]), 0);
        assert_eq!(tun.dropped(), dropped + 3);
        assert!(tun.still_exists());

        // Dropping the device removes the interface.
        let name = tun.name().to_owned();
        drop(tun);
        let out = std::process::Command::new("ip")
            .args(["link", "show", &name])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{name} survived its fd");
    })
    .unwrap();
}

/// A multi-queue TUN: the kernel hands each flow to one queue, every packet to some
/// queue, and any queue can write.
#[test]
fn a_multi_queue_tun_keeps_each_flow_on_one_queue() {
    if !tun_available("a_multi_queue_tun_keeps_each_flow_on_one_queue") {
        return;
    }
    let ns = NetNs::new("lr-io-tunmq").unwrap();
    ns.run(|| {
        let queues = TunDevice::create_queues("lrmq%d", 4, false).unwrap();
        let name = queues[0].name().to_owned();
        assert!(queues.iter().all(|q| q.name() == name));
        ns.add_addr(&name, "198.18.0.1/24").unwrap();
        ns.link_up(&name).unwrap();
        let senders: Vec<UdpSocket> = (0..8).map(|_| UdpSocket::bind(0).unwrap()).collect();
        let dst = SocketAddr::from((PEER_ADDR, PEER_PORT));
        for round in 0..4u8 {
            for s in &senders {
                s.send_to(&[round; 8], dst).unwrap();
            }
        }
        let mut queue_of: std::collections::HashMap<u16, usize> = Default::default();
        let mut total = 0;
        let deadline = Instant::now() + WAIT;
        let mut storage = vec![[0u8; 2048]; 8];
        while total < 32 && Instant::now() < deadline {
            for (k, q) in queues.iter().enumerate() {
                let mut bufs: Vec<&mut [u8]> =
                    storage.iter_mut().map(|b| b.as_mut_slice()).collect();
                let mut lens = [0usize; 8];
                let n = match q.read_batch(&mut bufs, &mut lens) {
                    Ok(n) => n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => 0,
                    Err(e) => panic!("reading queue {k}: {e}"),
                };
                for i in 0..n {
                    let pkt = &bufs[i][..lens[i]];
                    if !is_udp4_to(pkt, PEER_ADDR, PEER_PORT) {
                        continue;
                    }
                    let sport = u16::from_be_bytes([pkt[20], pkt[21]]);
                    let on = *queue_of.entry(sport).or_insert(k);
                    assert_eq!(on, k, "flow from port {sport} on two queues");
                    total += 1;
                }
            }
        }
        assert_eq!(total, 32, "every packet reached a queue");
        assert_eq!(queue_of.len(), 8);
    })
    .unwrap();
}
