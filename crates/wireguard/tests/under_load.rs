//! The under-load state (cookies demanded) follows handshake work that passed MAC1
//! only: junk anyone can send without our public key never delays a real peer.

use crypto::KeyRegistry;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use wire::wireguard::Message;
use wireguard::{Action, Device, DropReason, PeerId};

const THRESHOLD: u32 = 10;

struct Pair {
    a: Device,
    b: Device,
    b_in_a: PeerId,
    a_addr: SocketAddr,
}

fn pair(now: Instant) -> Pair {
    let keys = Arc::new(KeyRegistry::new(64));
    let mut a = Device::new(keys.clone(), now, SystemTime::now());
    let mut b = Device::new(keys, now, SystemTime::now());
    a.set_private_key(Some(crypto::x25519::PrivateKey::generate()));
    b.set_private_key(Some(crypto::x25519::PrivateKey::generate()));
    b.set_under_load_threshold(THRESHOLD);
    let b_in_a = a.add_peer(b.public_key().unwrap()).unwrap();
    b.add_peer(a.public_key().unwrap()).unwrap();
    a.set_endpoint(b_in_a, "198.18.0.2:51820".parse().unwrap());
    Pair {
        a,
        b,
        b_in_a,
        a_addr: "198.18.0.1:51820".parse().unwrap(),
    }
}

/// The initiation `a` sends when it has a packet for `b` and no session.
fn initiation(p: &mut Pair, now: Instant) -> Vec<u8> {
    p.a.stage(p.b_in_a, 20, now);
    loop {
        match p.a.poll_action().expect("a sends an initiation") {
            Action::Send { packet, .. } if packet[0] == 1 => return packet,
            _ => continue,
        }
    }
}

/// The type of the first message `b` sends back (2: response, 3: cookie reply).
fn b_answer(p: &mut Pair) -> Option<u8> {
    while let Some(action) = p.b.poll_action() {
        if let Action::Send { packet, .. } = action {
            return Some(packet[0]);
        }
    }
    None
}

/// A datagram as the data path hands it over: classified first.
fn handle(d: &mut Device, bytes: &[u8], src: SocketAddr, now: Instant) -> Result<(), DropReason> {
    let message = Message::parse(bytes).map_err(DropReason::from)?;
    d.handle_handshake(message, src, now)
}

fn junk_initiation(i: u32) -> Vec<u8> {
    let mut msg = vec![0u8; 148];
    msg[0] = 1;
    for (j, byte) in msg[4..].iter_mut().enumerate() {
        *byte = (i as usize * 31 + j * 7) as u8;
    }
    msg
}

#[test]
fn junk_with_a_bad_mac1_never_puts_the_device_under_load() {
    let now = Instant::now();
    let mut p = pair(now);
    for i in 0..50 * THRESHOLD {
        let src: SocketAddr = format!("198.18.{}.{}:9", 128 + (i >> 8) % 64, i & 0xff)
            .parse()
            .unwrap();
        assert_eq!(
            handle(&mut p.b, &junk_initiation(i), src, now),
            Err(DropReason::BadMac1)
        );
    }
    assert_eq!(b_answer(&mut p), None, "junk is never answered");
    let msg = initiation(&mut p, now);
    let t = now + Duration::from_millis(1);
    handle(&mut p.b, &msg, p.a_addr, t).unwrap();
    assert_eq!(
        b_answer(&mut p),
        Some(2),
        "a real initiation is answered at once"
    );
}

#[test]
fn handshakes_that_pass_mac1_still_count_towards_load() {
    let now = Instant::now();
    let mut p = pair(now);
    let msg = initiation(&mut p, now);
    // Replays of a message with a good MAC1 are work the responder must do.
    let mut cookies = 0;
    for _ in 0..2 * THRESHOLD {
        let _ = handle(&mut p.b, &msg, p.a_addr, now);
        while let Some(action) = p.b.poll_action() {
            if let Action::Send { packet, .. } = action
                && packet[0] == 3
            {
                cookies += 1;
            }
        }
    }
    assert_eq!(
        cookies, THRESHOLD,
        "past the threshold every message gets a cookie"
    );
}
