//! The gateway graph between two real links through AF_PACKET ports: three network
//! namespaces, a host on each side and the gateway between them (the kernel in the
//! gateway's namespace has no address on its interfaces). The hosts' own kernels ping through
//! it and ping it over IPv4 and IPv6: ARP and neighbor discovery, forwarding, TTL
//! and hop-limit rewriting and ICMP echo, end to end. Needs
//! root; skipped with a note otherwise.

use crypto::EngineSet;
use dataplane::Arena;
use dataplane::context::OutputId;
use dataplane::fib::PortId;
use dataplane::gateway::GatewayGraph;
use dataplane::interfaces::Interface;
use io::netns::{NetNs, VethEnd, is_root, skip_test, veth_pair};
use io::{Interest, PollFd, poll};
use ports::Port;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A WireGuard device with no key or peers: the gateway serves no tunnel.
fn no_tunnel(now: Instant) -> wireguard::Device {
    let keys = std::sync::Arc::new(crypto::KeyRegistry::new(1));
    wireguard::Device::new(keys, now, std::time::SystemTime::now())
}

/// The longest the gateway runs, whatever the pings do.
const RUN_AT_MOST: Duration = Duration::from_secs(20);

fn mac_of(ns: &NetNs, ifname: &str) -> [u8; 6] {
    let text = ns
        .exec_checked(&["cat", &format!("/sys/class/net/{ifname}/address")])
        .unwrap();
    let mut mac = [0u8; 6];
    for (b, part) in mac.iter_mut().zip(text.trim().split(':')) {
        *b = u8::from_str_radix(part, 16).unwrap();
    }
    mac
}

/// Runs the gateway on `lan` and `wan` (in the current namespace) until `stop`.
fn run_gateway(macs: ([u8; 6], [u8; 6]), stop: &AtomicBool) -> Vec<(String, u64)> {
    let now = Instant::now();
    let mut gw = GatewayGraph::new(
        Arena::new(1024),
        EngineSet::new(vec![]),
        no_tunnel(now),
        now,
    );
    let port = |name: &str, mac, addr: &[&str]| Interface {
        name: name.into(),
        mac,
        mtu: 1500,
        addrs: addr.iter().map(|a| a.parse().unwrap()).collect(),
        output: OutputId(0),
    };
    let ids: [PortId; 2] = [
        gw.add_port(port("lan", macs.0, &["198.19.1.1/24", "2001:2:0:1::1/64"]))
            .unwrap(),
        gw.add_port(port("wan", macs.1, &["198.19.2.1/24", "2001:2:0:2::1/64"]))
            .unwrap(),
    ];
    let mut ports = [
        Port::open_packet(ids[0], "lan", "lan", 1500, dataplane::STANDARD_BUFFER, None)
            .expect("lan port"),
        Port::open_packet(ids[1], "wan", "wan", 1500, dataplane::STANDARD_BUFFER, None)
            .expect("wan port"),
    ];
    let start = Instant::now();
    while !stop.load(Ordering::Relaxed) && start.elapsed() < RUN_AT_MOST {
        let mut fds = ports
            .each_ref()
            .map(|p| PollFd::new(p.fd(), Interest::READABLE));
        poll(&mut fds, Some(Duration::from_millis(10))).unwrap();
        for port in &mut ports {
            port.receive(&mut gw);
        }
        let now = Instant::now();
        gw.tick(now);
        gw.run(now);
        for port in &mut ports {
            port.transmit(&mut gw);
        }
    }
    for port in &ports {
        assert_eq!(
            port.drops().iter().map(|d| d.1).sum::<u64>(),
            0,
            "{}",
            port.name
        );
    }
    assert_eq!(gw.context().arena().available(), 1024, "every buffer back");
    gw.counters()
        .flat_map(|(node, c)| {
            c.drops()
                .filter(|d| d.1 > 0)
                .map(move |(e, v)| (format!("{node}.{}", e.name), v))
        })
        .collect()
}

#[test]
fn hosts_ping_through_the_gateway_and_the_gateway_itself() {
    if !is_root() {
        skip_test(
            "hosts_ping_through_the_gateway_and_the_gateway_itself",
            "needs root",
        );
        return;
    }
    let (a, gw, b) = (
        NetNs::new("lr-gwv-a").unwrap(),
        NetNs::new("lr-gwv-gw").unwrap(),
        NetNs::new("lr-gwv-b").unwrap(),
    );
    let end = |ns, ifname, addrs| VethEnd { ns, ifname, addrs };
    veth_pair(
        &end(&a, "eth0", &["198.19.1.2/24", "2001:2:0:1::2/64"]),
        &end(&gw, "lan", &[]),
    )
    .unwrap();
    veth_pair(
        &end(&b, "eth0", &["198.19.2.2/24", "2001:2:0:2::2/64"]),
        &end(&gw, "wan", &[]),
    )
    .unwrap();
    for (host, via4, via6) in [
        (&a, "198.19.1.1", "2001:2:0:1::1"),
        (&b, "198.19.2.1", "2001:2:0:2::1"),
    ] {
        host.exec_checked(&["ip", "route", "add", "default", "via", via4])
            .unwrap();
        host.exec_checked(&["ip", "-6", "route", "add", "default", "via", via6])
            .unwrap();
    }
    for ifname in ["lan", "wan"] {
        gw.exec_checked(&[
            "sysctl",
            "-qw",
            &format!("net.ipv6.conf.{ifname}.disable_ipv6=1"),
        ])
        .unwrap();
    }
    let macs = (mac_of(&gw, "lan"), mac_of(&gw, "wan"));
    let stop = AtomicBool::new(false);
    let (through, itself, through6, itself6, drops) = std::thread::scope(|s| {
        let gateway = s.spawn(|| gw.run(|| run_gateway(macs, &stop)).unwrap());
        let ping = |to: &str| {
            a.exec(&["ping", "-c", "3", "-i", "0.2", "-W", "2", "-n", to])
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default()
        };
        std::thread::sleep(Duration::from_millis(200));
        let through = ping("198.19.2.2");
        let itself = ping("198.19.1.1");
        let through6 = ping("2001:2:0:2::2");
        let itself6 = ping("2001:2:0:1::1");
        stop.store(true, Ordering::Relaxed);
        (through, itself, through6, itself6, gateway.join().unwrap())
    });
    assert!(
        through.contains(" 0% packet loss"),
        "through the gateway:\n{through}\ndrops: {drops:?}"
    );
    assert!(
        through.contains("ttl=63"),
        "one hop on the way: the gateway took one from the TTL\n{through}"
    );
    assert!(
        itself.contains(" 0% packet loss"),
        "the gateway's own address:\n{itself}\ndrops: {drops:?}"
    );
    // IPv6: neighbor discovery both ways instead of ARP.
    assert!(
        through6.contains(" 0% packet loss") && through6.contains("ttl=63"),
        "IPv6 through the gateway:\n{through6}\ndrops: {drops:?}"
    );
    assert!(
        itself6.contains(" 0% packet loss"),
        "the gateway's own IPv6 address:\n{itself6}\ndrops: {drops:?}"
    );
}
