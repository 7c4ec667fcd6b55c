//! The handshake entry point: one handshake-class message from a fixed source goes
//! through `Device::handle_handshake` of a device with a private key and one peer,
//! classified first as `wg-input` classifies it.
//! It must never panic, and every answer must be consistent with the message:
//!
//! - a refused message changes nothing (no new receiver index, nothing to send),
//!   except under load, where a message with a good MAC1 earns exactly one cookie
//!   reply to its sender;
//! - anything refused after the MAC check, or accepted, had a good MAC1;
//! - an accepted initiation adds one receiver index and answers with one response
//!   to the sender, and the same bytes again are refused as a replay;
//! - an accepted response keeps the index count (the initiation's index now names
//!   the session) and flushes the peer; the same bytes again name no session.
//!
//! Random bytes almost never pass MAC1, so the input is not only a raw message: its
//! first byte can pick a genuine message made by a second device (the peer) for the
//! fuzzer to mutate by XOR. The keys are fixed, so a genuine initiation made once
//! stays valid for every fresh device; responses and cookie replies answer the fresh
//! device's own initiation and are made again for each input. The genuine messages
//! are built here rather than stored as corpus files because the corpus directory
//! is not kept in git.
//!
//! Input: `control, mask...` where `control` is
//!   bits 0-1  base message: 0 none (the mask is the message), 1 initiation,
//!             2 response to our initiation, 3 cookie reply to our initiation
//!   bit 2     keep the base's length (else the message is as long as the mask)
//!   bit 3     re-stamp MAC1 (and MAC2 when a cookie is held) after mutating, to
//!             reach the checks behind the MACs with a corrupt body
//!   bit 4     the device is under load: initiations and responses need MAC2
//!   bit 5     with bit 4: fetch a cookie first, so genuine messages carry MAC2
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::{Instant, SystemTime};
use wire::wireguard::{Message, MessageType};
use wireguard::cookie::{CookieChecker, CookieJar, MacCheck};
use wireguard::{Action, Device, DropReason, PeerId};

use crypto::KeyRegistry;
use crypto::x25519::{PrivateKey, PublicKey};

/// Our device's static key and the peer's. Fixed, so that a message built once
/// (and any corpus entry that mutates it) stays meaningful across runs.
const OUR_KEY: [u8; 32] = [0x11; 32];
const PEER_KEY: [u8; 32] = [0x22; 32];
/// Where the peer's messages come from, and where our device sends to the peer.
const PEER_ADDR: &str = "198.18.0.2:51820";
const OUR_ADDR: &str = "198.18.0.1:51820";

fn addr(s: &str) -> SocketAddr {
    s.parse().expect("a literal address")
}

/// The public keys, derived once: a scalar multiplication costs a good part of
/// a run under the sanitizers.
fn public(key: [u8; 32]) -> PublicKey {
    static KEYS: OnceLock<[PublicKey; 2]> = OnceLock::new();
    let [ours, peers] = KEYS.get_or_init(|| {
        [
            PrivateKey::from_bytes(OUR_KEY).public_key(),
            PrivateKey::from_bytes(PEER_KEY).public_key(),
        ]
    });
    if key == OUR_KEY { *ours } else { *peers }
}

/// A device with `me` as its key and `them` as its one peer (endpoint `endpoint`).
fn device(me: [u8; 32], them: [u8; 32], endpoint: &str, now: Instant) -> (Device, PeerId) {
    let keys = Arc::new(KeyRegistry::new(64));
    let mut d = Device::new(keys, now, SystemTime::now());
    d.set_private_key(Some(PrivateKey::from_bytes(me)));
    let peer = d
        .add_peer(public(them))
        .expect("the peer's key is not ours");
    d.set_endpoint(peer, addr(endpoint));
    (d, peer)
}

/// The one `Send` action a device queued, or `None`; anything else is a bug here.
fn sent(d: &mut Device) -> Option<(SocketAddr, Vec<u8>)> {
    let mut out = None;
    while let Some(a) = d.poll_action() {
        if let Action::Send { to, packet } = a {
            out = Some((to, packet));
        }
    }
    out
}

/// Makes the peer's device start a handshake and returns its initiation.
fn initiation_from_peer(peer: &mut Device, id: PeerId, now: Instant) -> Vec<u8> {
    peer.stage(id, 0, now);
    sent(peer).expect("a device with an endpoint initiates").1
}

/// An initiation from the peer, made once: every fresh device accepts it.
fn static_initiation() -> &'static [u8] {
    static INIT: OnceLock<Vec<u8>> = OnceLock::new();
    INIT.get_or_init(|| {
        let now = Instant::now();
        let (mut peer, id) = device(PEER_KEY, OUR_KEY, OUR_ADDR, now);
        initiation_from_peer(&mut peer, id, now)
    })
}

/// One datagram as `wg-input` hands it over: parsed once, the view to the device.
fn handle(d: &mut Device, bytes: &[u8], src: SocketAddr, now: Instant) -> Result<(), DropReason> {
    let message = Message::parse(bytes).map_err(DropReason::from)?;
    d.handle_handshake(message, src, now)
}

fn sender_index(msg: &[u8]) -> u32 {
    u32::from_le_bytes(msg[4..8].try_into().expect("4 bytes"))
}

fuzz_target!(|data: &[u8]| {
    let Some((&control, mask)) = data.split_first() else {
        return;
    };
    let base_kind = control & 0b11;
    let keep_len = control & 0x04 != 0;
    let restamp = control & 0x08 != 0;
    let under_load = control & 0x10 != 0;
    let with_cookie = under_load && control & 0x20 != 0;

    let now = Instant::now();
    let src = addr(PEER_ADDR);
    let (mut dev, peer_id) = device(OUR_KEY, PEER_KEY, PEER_ADDR, now);
    if under_load {
        // Every handshake message counts as over the threshold.
        dev.set_under_load_threshold(0);
    }

    // The peer's MAC state as the harness keeps it: it stamps messages "from the
    // peer" after they were mutated, and holds the cookie our device hands out.
    let mut stamper = CookieJar::new(&public(OUR_KEY));
    if with_cookie {
        let mut init = static_initiation().to_vec();
        assert_eq!(
            handle(&mut dev, &init, src, now),
            Err(DropReason::CookieSent)
        );
        let (to, reply) = sent(&mut dev).expect("a cookie reply");
        assert_eq!(to, src);
        let r = wire::wireguard::CookieReply::new_checked(&reply[..]).expect("64 bytes");
        // The reply is bound to the MAC1 it answered; stamping the same bytes again
        // makes that MAC1 the jar's last one.
        stamper.stamp(&mut init, now);
        stamper
            .consume_reply(r.nonce(), r.encrypted_cookie(), now)
            .expect("our own device's cookie reply opens");
    }

    let mut base: Vec<u8> = match base_kind {
        0 => Vec::new(),
        1 => static_initiation().to_vec(),
        _ => {
            // Our device initiates; the peer answers it.
            let (mut peer, _) = device(PEER_KEY, OUR_KEY, OUR_ADDR, now);
            dev.stage(peer_id, 0, now);
            let (to, init) = sent(&mut dev).expect("our device initiates");
            assert_eq!(to, src);
            if base_kind == 3 {
                peer.set_under_load_threshold(0);
            }
            let r = handle(&mut peer, &init, addr(OUR_ADDR), now);
            assert_eq!(
                r,
                if base_kind == 3 {
                    Err(DropReason::CookieSent)
                } else {
                    Ok(())
                }
            );
            sent(&mut peer).expect("a response or cookie reply").1
        }
    };
    if with_cookie && matches!(base_kind, 1 | 2) {
        stamper.stamp(&mut base, now);
    }

    let len = if keep_len { base.len() } else { mask.len() };
    let mut msg: Vec<u8> = (0..len)
        .map(|i| base.get(i).copied().unwrap_or(0) ^ mask.get(i).copied().unwrap_or(0))
        .collect();
    if restamp && msg.len() >= 32 {
        stamper.stamp(&mut msg, now);
    }

    let indices_before = dev.index_count();
    let result = handle(&mut dev, &msg, src, now);
    let actions: Vec<Action> = std::iter::from_fn(|| dev.poll_action()).collect();

    let classified = Message::classify(&msg);
    let kind = match classified {
        Err(e) => {
            let want = match e {
                wire::Error::Truncated => DropReason::Truncated,
                wire::Error::WrongLength { .. } => DropReason::WrongLength,
                _ => DropReason::UnknownType,
            };
            assert_eq!(result, Err(want), "classify said {e:?}");
            None
        }
        Ok(MessageType::TransportData) => {
            assert_eq!(result, Err(DropReason::UnknownType));
            None
        }
        Ok(k) => Some(k),
    };
    let mac1_ok = matches!(
        kind,
        Some(MessageType::HandshakeInitiation | MessageType::HandshakeResponse)
    ) && CookieChecker::new(&public(OUR_KEY)).check(&msg, src, || false, now)
        == MacCheck::Ok;

    match result {
        Err(DropReason::CookieSent) => {
            assert!(under_load, "a cookie reply while not under load");
            assert!(mac1_ok, "a cookie reply to a bad MAC1");
            assert_eq!(dev.index_count(), indices_before);
            let [Action::Send { to, packet }] = &actions[..] else {
                panic!("cookie-sent must send one reply, got {actions:?}");
            };
            assert_eq!(*to, src);
            let reply = wire::wireguard::CookieReply::new_checked(&packet[..])
                .expect("a cookie reply is 64 bytes");
            assert_eq!(Message::classify(packet), Ok(MessageType::CookieReply));
            assert_eq!(reply.receiver_index(), sender_index(&msg));
        }
        Err(reason) => {
            assert!(actions.is_empty(), "{reason:?} but queued {actions:?}");
            assert_eq!(
                dev.index_count(),
                indices_before,
                "{reason:?} left a receiver index behind"
            );
            match reason {
                DropReason::BadMac1 => assert!(!mac1_ok, "bad-mac1 on a good MAC1"),
                DropReason::RateLimited
                | DropReason::HandshakeDecrypt
                | DropReason::ZeroSharedSecret
                | DropReason::UnknownPeer
                | DropReason::StaleTimestamp
                | DropReason::InitiationFlood => assert!(mac1_ok, "{reason:?} on a bad MAC1"),
                DropReason::UnknownIndex if kind == Some(MessageType::HandshakeResponse) => {
                    assert!(mac1_ok, "{reason:?} on a bad MAC1")
                }
                _ => {}
            }
        }
        Ok(()) => match kind {
            Some(MessageType::HandshakeInitiation) => {
                assert!(mac1_ok, "accepted an initiation with a bad MAC1");
                assert_eq!(dev.index_count(), indices_before + 1);
                let [Action::Send { to, packet }] = &actions[..] else {
                    panic!("an accepted initiation must send one response, got {actions:?}");
                };
                assert_eq!(*to, src);
                assert_eq!(
                    Message::classify(packet),
                    Ok(MessageType::HandshakeResponse)
                );
                let response = wire::wireguard::HandshakeResponse::new_checked(&packet[..])
                    .expect("a response is 92 bytes");
                assert_eq!(response.receiver_index(), sender_index(&msg));
                // The same initiation again is a replay: same timestamp.
                let indices = dev.index_count();
                assert_eq!(
                    handle(&mut dev, &msg, src, now),
                    Err(DropReason::StaleTimestamp)
                );
                assert!(dev.poll_action().is_none());
                assert_eq!(dev.index_count(), indices);
            }
            Some(MessageType::HandshakeResponse) => {
                assert!(mac1_ok, "accepted a response with a bad MAC1");
                assert_eq!(dev.index_count(), indices_before);
                assert_eq!(actions, [Action::Flush(peer_id)]);
                let indices = dev.index_count();
                assert_eq!(
                    handle(&mut dev, &msg, src, now),
                    Err(DropReason::UnknownIndex),
                    "a response completed the handshake twice"
                );
                assert!(dev.poll_action().is_none());
                assert_eq!(dev.index_count(), indices);
            }
            Some(MessageType::CookieReply) => {
                assert!(actions.is_empty());
                assert_eq!(dev.index_count(), indices_before);
            }
            other => panic!("accepted {other:?}"),
        },
    }
});
