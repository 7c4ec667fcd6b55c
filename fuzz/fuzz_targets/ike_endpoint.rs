//! An IKE endpoint answering for a configured peer: any datagram, on port 500 or
//! 4500, is answered, dropped with a reason, or starts an SA; it never panics, and
//! timers run after it.
#![no_main]

use ikev2::config::parse_identity;
use ikev2::proposal::{Kind, Offer};
use ikev2::wire::TrafficSelector;
use ikev2::{Connection, Endpoint, Timers};
use libfuzzer_sys::fuzz_target;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

fuzz_target!(|data: &[u8]| {
    let now = Instant::now();
    let conn = Arc::new(Connection {
        name: "fuzz".into(),
        local_addr: "198.18.1.2".parse().unwrap(),
        remote_addr: "198.18.1.1".parse().unwrap(),
        local_id: parse_identity("198.18.1.2").unwrap(),
        remote_id: None,
        psk: zeroize::Zeroizing::new(b"fuzzing secret".to_vec()),
        pubkey: None,
        ike: vec![Offer::parse(Kind::Ike, "aes128gcm16-prfsha256-ecp256-x25519").unwrap()],
        esp: vec![Offer::parse(Kind::Esp, "aes128gcm16").unwrap()],
        local_ts: vec![TrafficSelector::any(false)],
        remote_ts: vec![TrafficSelector::any(false)],
        start: false,
        encap: false,
        timers: Timers::default(),
    });
    let mut e = Endpoint::new(vec![conn], now);
    let port = if data.first().is_some_and(|b| b & 1 == 1) { 4500 } else { 500 };
    let local = SocketAddr::new("198.18.1.2".parse().unwrap(), port);
    let remote = SocketAddr::new("198.18.1.1".parse().unwrap(), port);
    let _ = e.receive(data, local, remote, now);
    let _ = e.receive(data, local, remote, now);
    let _ = e.tick(now + Duration::from_secs(120));
});
