//! A gateway's IKE ports, in memory: datagrams to UDP 500, and to 4500 behind the
//! non-ESP marker, reach the key exchange's inbox (and nothing else does); a full
//! inbox drops and counts; the key exchange's own datagrams leave from the port it
//! names, resolved and framed like every other.

use crypto::{EngineSet, KeyRegistry};
use dataplane::Arena;
use dataplane::context::OutputId;
use dataplane::esp::{Encapsulation, EspTunnel};
use dataplane::fib::PortId;
use dataplane::gateway::GatewayGraph;
use dataplane::ike::{INBOX_LEN, IkeDatagram, IkeInbox, IkeInput, datagram_in};
use dataplane::interfaces::Interface;
use std::sync::Arc;
use std::time::{Instant, SystemTime};
use wire::ipv4;

mod ports;
use ports::{arp_answer, drops, ether, send, sent};

const GW_MAC: [u8; 6] = [0x02, 0, 0, 0, 1, 1];
const PEER_MAC: [u8; 6] = [0x02, 0, 0, 0, 2, 1];

fn gateway(now: Instant) -> (GatewayGraph, PortId) {
    let keys = Arc::new(KeyRegistry::new(16));
    let device = wireguard::Device::new(keys, now, SystemTime::now());
    let engines = EngineSet::new(vec![Box::new(crypto_awslc::AwsLcEngine::new())]);
    let mut gw = GatewayGraph::new(Arena::new(64), engines, device, now);
    let wan = gw
        .add_port(Interface {
            name: "wan".into(),
            mac: GW_MAC,
            mtu: 1500,
            addrs: vec!["198.18.2.1/24".parse().unwrap()],
            output: OutputId(0),
        })
        .unwrap();
    (gw, wan)
}

fn datagram(input: IkeInput) -> IkeDatagram {
    match input {
        IkeInput::Datagram(d) => d,
        _ => panic!("not a datagram"),
    }
}

fn udp4_frame(src_port: u16, dst_port: u16, payload: &[u8]) -> Vec<u8> {
    ether(
        GW_MAC,
        PEER_MAC,
        0x0800,
        &udp4_packet(src_port, dst_port, payload),
    )
}

/// `packet` (IPv4, no options) cut into fragments carrying `each` bytes of its
/// payload, as frames.
fn fragment_frames(packet: &[u8], each: usize) -> Vec<Vec<u8>> {
    ports::ipv4_fragments(packet, each)
        .iter()
        .map(|f| ether(GW_MAC, PEER_MAC, 0x0800, f))
        .collect()
}

/// A datagram from the peer to the gateway, identification 0x1234 (its
/// fragments share it).
fn udp4_packet(src_port: u16, dst_port: u16, payload: &[u8]) -> Vec<u8> {
    let mut p = ports::udp4_packet(
        [198, 18, 2, 2],
        [198, 18, 2, 1],
        src_port,
        dst_port,
        payload,
    );
    p[4..6].copy_from_slice(&0x1234u16.to_be_bytes());
    ipv4::Packet::new_unchecked(&mut p[..]).fill_checksum();
    p
}

#[test]
fn ike_ports_reach_the_inbox() {
    let now = Instant::now();
    let (mut gw, wan) = gateway(now);
    // Without IKE on, port 500 is not served.
    send(&mut gw, wan, &udp4_frame(500, 500, b"ike"), now);
    assert_eq!(drops(&gw, "ip-local", "unserved"), 1);

    let (inbox, rx) = IkeInbox::bounded(INBOX_LEN);
    gw.set_ike(inbox);
    send(&mut gw, wan, &udp4_frame(500, 500, b"to port 500"), now);
    let mut marked = vec![0u8; 4];
    marked.extend_from_slice(b"behind the marker");
    send(&mut gw, wan, &udp4_frame(4500, 4500, &marked), now);
    let got: Vec<IkeDatagram> = rx.try_iter().map(datagram).collect();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].payload, b"to port 500");
    assert_eq!(got[0].local, "198.18.2.1:500".parse().unwrap());
    assert_eq!(got[0].remote, "198.18.2.2:500".parse().unwrap());
    assert_eq!(
        got[1].payload, marked,
        "the marker stays: the key exchange strips it"
    );
    assert_eq!(got[1].local.port(), 4500);

    // ESP on 4500 goes to esp-decrypt even to a tunnel not (yet) in UDP (no SA
    // here), a keepalive is taken, other ports are not the key exchange's.
    let any = |s: &str| vec![s.parse().unwrap()];
    gw.add_esp(EspTunnel::new(
        "site".into(),
        "198.18.2.1".parse().unwrap(),
        "198.18.2.2".parse().unwrap(),
        Encapsulation::None,
        any("0.0.0.0/0"),
        any("0.0.0.0/0"),
        1400,
    ))
    .unwrap();
    let mut esp = vec![0, 0, 1, 0, 0, 0, 0, 1];
    esp.extend_from_slice(&[9; 56]);
    send(&mut gw, wan, &udp4_frame(4500, 4500, &esp), now);
    send(&mut gw, wan, &udp4_frame(4500, 4500, &[0xff]), now);
    send(&mut gw, wan, &udp4_frame(500, 501, b"not ike"), now);
    // The keepalive goes to the key exchange as where it came from.
    let got: Vec<IkeInput> = rx.try_iter().collect();
    assert_eq!(got.len(), 1);
    let IkeInput::Keepalive { local, remote } = got[0] else {
        panic!("a keepalive")
    };
    assert_eq!(local, "198.18.2.1:4500".parse().unwrap());
    assert_eq!(remote, "198.18.2.2:4500".parse().unwrap());
    assert_eq!(drops(&gw, "esp-decrypt", "unknown-spi"), 1);
    assert_eq!(drops(&gw, "ip-local", "unserved"), 2);
    assert!(sent(&mut gw, wan).is_empty());
}

#[test]
fn a_full_inbox_drops_and_counts() {
    let now = Instant::now();
    let (mut gw, wan) = gateway(now);
    let (inbox, rx) = IkeInbox::bounded(INBOX_LEN);
    gw.set_ike(inbox);
    let frame = udp4_frame(500, 500, b"flood");
    for _ in 0..INBOX_LEN + 5 {
        send(&mut gw, wan, &frame, now);
    }
    assert_eq!(rx.try_iter().count(), INBOX_LEN);
    assert_eq!(drops(&gw, "ip-local", "ike-backlog"), 5);
    // Every buffer came back.
    assert_eq!(
        gw.context().arena().available(),
        gw.context().arena().capacity()
    );
}

#[test]
fn the_key_exchange_sends_from_its_port() {
    let now = Instant::now();
    let (mut gw, wan) = gateway(now);
    assert!(gw.send_udp(4500, "198.18.2.2:4500".parse().unwrap(), b"\0\0\0\0answer"));
    gw.run(now);
    let out = sent(&mut gw, wan);
    assert_eq!(out.len(), 1, "the ARP request first");
    let reply = arp_answer(&out[0], PEER_MAC).unwrap();
    send(&mut gw, wan, &reply, now);
    let out = sent(&mut gw, wan);
    assert_eq!(out.len(), 1);
    let ip = &out[0][14..];
    assert_eq!(ip[9], 17);
    assert_eq!(&ip[12..16], &[198, 18, 2, 1]);
    assert_eq!(&ip[16..20], &[198, 18, 2, 2]);
    assert_eq!(u16::from_be_bytes([ip[20], ip[21]]), 4500);
    assert_eq!(u16::from_be_bytes([ip[22], ip[23]]), 4500);
    assert_eq!(&ip[28..], b"\0\0\0\0answer");
    // A payload no buffer holds is refused and counted.
    assert!(!gw.send_udp(500, "198.18.2.2:500".parse().unwrap(), &vec![0u8; 70_000]));
    assert_eq!(drops(&gw, "udp-encap", "no-buffer"), 1);
}

#[test]
fn fragments_for_the_gateway_are_made_whole_by_the_worker() {
    let now = Instant::now();
    let (mut gw, wan) = gateway(now);
    let mut message = vec![0u8; 4];
    message.extend((0..3000u32).map(|i| i as u8));
    let packet = udp4_packet(4500, 4500, &message);
    let frames = fragment_frames(&packet, 1480);
    assert_eq!(frames.len(), 3);
    // Without IKE on, a datagram longer than a buffer has no taker.
    for f in &frames {
        send(&mut gw, wan, f, now);
    }
    assert_eq!(drops(&gw, "ip-local", "reassembled-too-big"), 1);
    let (inbox, rx) = IkeInbox::bounded(INBOX_LEN);
    gw.set_ike(inbox);
    // Out of order, as a network may deliver them: the key exchange gets the
    // message whole.
    for f in frames.iter().rev() {
        send(&mut gw, wan, f, now);
    }
    let inputs: Vec<IkeInput> = rx.try_iter().collect();
    let [IkeInput::Datagram(d)] = &inputs[..] else {
        panic!("not one datagram")
    };
    assert_eq!(d.payload, message);
    assert_eq!(d.local, "198.18.2.1:4500".parse().unwrap());
    assert_eq!(d.remote, "198.18.2.2:4500".parse().unwrap());
    // One that fits a buffer goes through ip-local again, whole, as any other.
    let short = &message[..1200];
    let frames = fragment_frames(&udp4_packet(500, 500, short), 800);
    for f in &frames {
        send(&mut gw, wan, f, now);
    }
    let inputs: Vec<IkeInput> = rx.try_iter().collect();
    let [IkeInput::Datagram(d)] = &inputs[..] else {
        panic!("not one datagram")
    };
    assert_eq!(d.payload, short);
    // Overlapping pieces drop their datagram; one never finished is let go after
    // the table's timeout, counted once.
    let frames = fragment_frames(&udp4_packet(500, 500, short), 800);
    let overlapping = fragment_frames(&udp4_packet(500, 500, short), 400);
    send(&mut gw, wan, &frames[0], now);
    send(&mut gw, wan, &overlapping[1], now);
    assert_eq!(drops(&gw, "ip-local", "fragment-overlap"), 1);
    send(&mut gw, wan, &frames[0], now);
    gw.tick(now + std::time::Duration::from_secs(6));
    assert_eq!(drops(&gw, "ip-local", "fragment-timed-out"), 1);
    // Whole, but not IKE: not the key exchange's.
    let not_ike = udp4_packet(4500, 4501, &message);
    assert_eq!(datagram_in(&not_ike).err(), Some("not-ike"));
    assert!(rx.try_iter().next().is_none());
    assert_eq!(
        gw.context().arena().available(),
        gw.context().arena().capacity()
    );
}
