//! The server's control channel against a client made of this crate's pieces
//! and rustls (`client/`): the handshake under each protection, TLS version and
//! key derivation, loss, renegotiations from either end, the refusals, and the
//! deadlines.

mod client;

use std::time::{Duration, Instant};

use client::{Pki, TestClient, client_tls, converse, server_config};
use openvpn::data::{DataHeader, open, seal};
use openvpn::server::{Event, ServerSession};
use openvpn::static_key::{Direction, Key2};
use openvpn::tls::TlsVersions;
use openvpn::tls_auth::AuthDigest;
use openvpn::wrap::ControlWrap;
use openvpn::{DataCipher, KeyId, Refusal, Role, TlsAuth, TlsCrypt};

const PEER_INFO_26: &str = "IV_VER=2.6.14\nIV_PLAT=linux\nIV_PROTO=990\nIV_CIPHERS=AES-256-GCM:AES-128-GCM:CHACHA20-POLY1305\nIV_NCP=2\n";

fn key() -> Key2 {
    Key2::from_bytes(std::array::from_fn(|i| (i * 31 + 5) as u8))
}

fn crypt(role: Role) -> ControlWrap {
    ControlWrap::Crypt(TlsCrypt::new(&key(), role))
}

fn random(buf: &mut [u8]) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = 0x5a ^ i as u8;
    }
}

/// A server session for the client's hard reset, and the server's answer.
fn open_session(
    pki: &Pki,
    server_wrap: ControlWrap,
    client: &mut TestClient,
    now: Instant,
) -> (ServerSession, Vec<Vec<u8>>) {
    let config = server_config(pki, server_wrap, None, TlsVersions::Both);
    let reset = client.start(now);
    let (session, out) = ServerSession::accept(config, &reset[0], now, 1_000, &mut random).unwrap();
    let mut to_server = Vec::new();
    for d in out.datagrams {
        to_server.extend(client.receive(&d, now));
    }
    (session, to_server)
}

fn keys_of(events: &[Event]) -> Vec<(KeyId, openvpn::data_keys::DataKeys)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Keys { key_id, keys } => Some((*key_id, keys.clone())),
            _ => None,
        })
        .collect()
}

/// The server's newest keys and the client's for the same key id carry
/// packets both ways.
fn assert_data_flows(
    server_keys: &openvpn::data_keys::DataKeys,
    client: &TestClient,
    key_id: KeyId,
) {
    let (_, client_keys) = client
        .data_keys
        .iter()
        .find(|(k, _)| *k == key_id)
        .expect("the client has the key");
    assert_eq!(client_keys.cipher, server_keys.cipher);
    let h = DataHeader {
        key_id,
        peer_id: 0,
        packet_id: 1,
    };
    let down = seal(server_keys.cipher, &server_keys.send, h, b"to the client");
    assert_eq!(
        open(client_keys.cipher, &client_keys.recv, &down)
            .unwrap()
            .1,
        b"to the client"
    );
    let up = seal(client_keys.cipher, &client_keys.send, h, b"to the server");
    assert_eq!(
        open(server_keys.cipher, &server_keys.recv, &up).unwrap().1,
        b"to the server"
    );
}

#[test]
fn a_26_client_connects_over_tls13_with_tls_crypt_and_exported_keys() {
    let pki = Pki::new("ca");
    let mut client = TestClient::new(
        crypt(Role::Client),
        client_tls(&pki, &pki.ca_der, Some(&rustls::version::TLS13)),
        PEER_INFO_26,
    );
    let mut now = Instant::now();
    let (mut server, to_server) = open_session(&pki, crypt(Role::Server), &mut client, now);
    let events = converse(&mut server, &mut client, to_server, &mut now, &mut |_| {
        false
    });
    let Some(Event::Authenticated {
        common_name,
        cipher,
        ..
    }) = events.first()
    else {
        panic!("not authenticated first")
    };
    assert_eq!(common_name, "client-7");
    assert_eq!(*cipher, DataCipher::Aes256Gcm);
    assert!(events.iter().any(|e| matches!(e, Event::PushRequested)));
    assert!(server.uses_ekm());
    let push = client.push_reply.clone().expect("a push reply");
    assert!(
        push.contains(",cipher AES-256-GCM,protocol-flags cc-exit tls-ekm"),
        "{push}"
    );
    let keys = keys_of(&events);
    assert_eq!(keys.len(), 1);
    assert_data_flows(&keys[0].1, &client, KeyId::default());
    // The client leaves.
    let exit = client.exit(now);
    let events = converse(&mut server, &mut client, exit, &mut now, &mut |_| false);
    assert!(events.iter().any(|e| matches!(e, Event::Exit)));
}

#[test]
fn an_older_client_connects_over_tls12_with_tls_auth_and_openvpns_prf() {
    let pki = Pki::new("ca");
    let auth = |d| ControlWrap::Auth(TlsAuth::new(&key(), d, AuthDigest::Sha256));
    // No TLS key export in IV_PROTO (2 | 4): keys come from the PRF.
    let info =
        "IV_VER=2.5.0\nIV_PLAT=linux\nIV_PROTO=6\nIV_CIPHERS=CHACHA20-POLY1305:AES-128-GCM\n";
    let mut client = TestClient::new(
        auth(Direction::Inverse),
        client_tls(&pki, &pki.ca_der, Some(&rustls::version::TLS12)),
        info,
    );
    let mut now = Instant::now();
    let (mut server, to_server) = open_session(&pki, auth(Direction::Normal), &mut client, now);
    let events = converse(&mut server, &mut client, to_server, &mut now, &mut |_| {
        false
    });
    assert!(!server.uses_ekm());
    assert_eq!(server.cipher(), Some(DataCipher::Chacha20Poly1305));
    let push = client.push_reply.clone().unwrap();
    assert!(
        push.contains(",cipher CHACHA20-POLY1305,protocol-flags cc-exit"),
        "{push}"
    );
    assert!(!push.contains("tls-ekm"));
    assert_data_flows(&keys_of(&events)[0].1, &client, KeyId::default());
}

#[test]
fn the_handshake_survives_losing_every_third_datagram() {
    let pki = Pki::new("ca");
    let mut client = TestClient::new(
        crypt(Role::Client),
        client_tls(&pki, &pki.ca_der, None),
        PEER_INFO_26,
    );
    let mut now = Instant::now();
    let t0 = now;
    let (mut server, to_server) = open_session(&pki, crypt(Role::Server), &mut client, now);
    let events = converse(&mut server, &mut client, to_server, &mut now, &mut |n| {
        n % 3 == 0
    });
    assert_data_flows(&keys_of(&events)[0].1, &client, KeyId::default());
    assert!(now - t0 < Duration::from_secs(60), "took {:?}", now - t0);
}

#[test]
fn renegotiations_from_either_end_give_new_keys_and_retire_old_ones() {
    let pki = Pki::new("ca");
    let mut client = TestClient::new(
        crypt(Role::Client),
        client_tls(&pki, &pki.ca_der, None),
        PEER_INFO_26,
    );
    let mut now = Instant::now();
    let (mut server, to_server) = open_session(&pki, crypt(Role::Server), &mut client, now);
    converse(&mut server, &mut client, to_server, &mut now, &mut |_| {
        false
    });

    // The server starts one.
    let out = server.renegotiate(now);
    let mut to_server = Vec::new();
    for d in out.datagrams {
        to_server.extend(client.receive(&d, now));
    }
    let events = converse(&mut server, &mut client, to_server, &mut now, &mut |_| {
        false
    });
    let keys = keys_of(&events);
    assert_eq!(keys.iter().map(|k| k.0.get()).collect::<Vec<_>>(), [1]);
    assert_data_flows(&keys[0].1, &client, KeyId::new(1).unwrap());
    let states: Vec<_> = server
        .key_summaries(now)
        .iter()
        .map(|k| (k.key_id.get(), k.state))
        .collect();
    assert_eq!(states, [(0, "lame-duck"), (1, "active")]);

    // The client starts the next: key 2 active, key 1 the lame duck, and key 0,
    // a second lame duck, retired at once (OpenVPN keeps one).
    let to_server = client.rekey(now);
    let events = converse(&mut server, &mut client, to_server, &mut now, &mut |_| {
        false
    });
    let keys = keys_of(&events);
    assert_eq!(keys.iter().map(|k| k.0.get()).collect::<Vec<_>>(), [2]);
    assert_data_flows(&keys[0].1, &client, KeyId::new(2).unwrap());
    assert_eq!(retired_of(&events), [0]);
    let states: Vec<_> = server
        .key_summaries(now)
        .iter()
        .map(|k| (k.key_id.get(), k.state))
        .collect();
    assert_eq!(states, [(1, "lame-duck"), (2, "active")]);

    // The transition window ends for key 1.
    let out = server.tick(now + Duration::from_secs(61));
    assert_eq!(retired_of(&out.events), [1]);
}

fn retired_of(events: &[Event]) -> Vec<u8> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::KeyRetired { key_id } => Some(key_id.get()),
            _ => None,
        })
        .collect()
}

#[test]
fn the_server_renegotiates_after_reneg_sec() {
    let pki = Pki::new("ca");
    let mut config = server_config(&pki, crypt(Role::Server), None, TlsVersions::Both);
    std::sync::Arc::get_mut(&mut config).unwrap().reneg = Some(Duration::from_secs(30));
    let mut client = TestClient::new(
        crypt(Role::Client),
        client_tls(&pki, &pki.ca_der, None),
        PEER_INFO_26,
    );
    let mut now = Instant::now();
    let reset = client.start(now);
    let (mut server, out) =
        ServerSession::accept(config, &reset[0], now, 1_000, &mut random).unwrap();
    let mut to_server = Vec::new();
    for d in out.datagrams {
        to_server.extend(client.receive(&d, now));
    }
    let mut events = converse(&mut server, &mut client, to_server, &mut now, &mut |_| {
        false
    });
    // converse lets 20 quiet seconds pass; 30 more bring the deadline.
    for _ in 0..15 {
        now += Duration::from_secs(1);
        let out = server.tick(now);
        events.extend(out.events);
        let mut to_server = Vec::new();
        for d in out.datagrams {
            to_server.extend(client.receive(&d, now));
        }
        events.extend(converse(
            &mut server,
            &mut client,
            to_server,
            &mut now,
            &mut |_| false,
        ));
    }
    let ids: Vec<u8> = keys_of(&events).iter().map(|k| k.0.get()).collect();
    assert!(ids.starts_with(&[0, 1]), "{ids:?}");
}

fn closed_reason(events: &[Event]) -> Option<&str> {
    events.iter().find_map(|e| match e {
        Event::Closed { reason } => Some(reason.as_str()),
        _ => None,
    })
}

#[test]
fn clients_the_ca_did_not_sign_or_that_it_revoked_are_refused_with_the_reason() {
    let pki = Pki::new("ca");
    let stranger = Pki::new("another-ca");
    // A client whose certificate comes from another CA.
    let mut client = TestClient::new(
        crypt(Role::Client),
        client_tls(&stranger, &pki.ca_der, None),
        PEER_INFO_26,
    );
    let mut now = Instant::now();
    let (mut server, to_server) = open_session(&pki, crypt(Role::Server), &mut client, now);
    let events = converse(&mut server, &mut client, to_server, &mut now, &mut |_| {
        false
    });
    let reason = closed_reason(&events).expect("closed");
    assert!(reason.contains("UnknownIssuer"), "{reason}");
    assert!(keys_of(&events).is_empty());

    // A revoked client.
    let config = server_config(
        &pki,
        crypt(Role::Server),
        Some(&pki.crl(&[7])),
        TlsVersions::Both,
    );
    let mut client = TestClient::new(
        crypt(Role::Client),
        client_tls(&pki, &pki.ca_der, None),
        PEER_INFO_26,
    );
    let reset = client.start(now);
    let (mut server, out) =
        ServerSession::accept(config, &reset[0], now, 1_000, &mut random).unwrap();
    let mut to_server = Vec::new();
    for d in out.datagrams {
        to_server.extend(client.receive(&d, now));
    }
    let events = converse(&mut server, &mut client, to_server, &mut now, &mut |_| {
        false
    });
    let reason = closed_reason(&events).expect("closed");
    assert!(reason.contains("Revoked"), "{reason}");

    // A client with no cipher in common.
    let mut client = TestClient::new(
        crypt(Role::Client),
        client_tls(&pki, &pki.ca_der, None),
        "IV_VER=2.6.14\nIV_PROTO=990\nIV_CIPHERS=AES-128-GCM\n",
    );
    let (mut server, to_server) = open_session(&pki, crypt(Role::Server), &mut client, now);
    let events = converse(&mut server, &mut client, to_server, &mut now, &mut |_| {
        false
    });
    let reason = closed_reason(&events).expect("closed");
    assert!(
        reason.contains("offers no cipher this server serves (it offers AES-128-GCM"),
        "{reason}"
    );
}

#[test]
fn forged_replayed_and_foreign_packets_are_refused_and_change_nothing() {
    let pki = Pki::new("ca");
    let mut client = TestClient::new(
        crypt(Role::Client),
        client_tls(&pki, &pki.ca_der, None),
        PEER_INFO_26,
    );
    let mut now = Instant::now();
    let (mut server, to_server) = open_session(&pki, crypt(Role::Server), &mut client, now);
    let first = to_server[0].clone();
    let out = server.receive(&first, now).unwrap();
    let mut to_server = Vec::new();
    for d in out.datagrams {
        to_server.extend(client.receive(&d, now));
    }
    // Replayed, forged, from another session, truncated, and a client reset
    // that is not the first packet.
    assert_eq!(server.receive(&first, now).err(), Some(Refusal::Replay));
    let mut forged = to_server[0].clone();
    *forged.last_mut().unwrap() ^= 1;
    assert_eq!(server.receive(&forged, now).err(), Some(Refusal::BadAuth));
    assert_eq!(
        server.receive(&forged[..20], now).err(),
        Some(Refusal::Truncated)
    );
    let mut other = TestClient::new(
        crypt(Role::Client),
        client_tls(&pki, &pki.ca_der, None),
        PEER_INFO_26,
    );
    other.sid = openvpn::control::SessionId([0xee; 8]);
    let foreign = other.start(now);
    assert_eq!(
        server.receive(&foreign[0], now).err(),
        Some(Refusal::WrongSession)
    );
    assert_eq!(
        ServerSession::accept(
            server_config(&pki, crypt(Role::Server), None, TlsVersions::Both),
            &to_server[0],
            now,
            1,
            &mut random
        )
        .err(),
        Some(Refusal::UnknownOpcode)
    );
    // The session goes on as if none of them had come.
    let events = converse(&mut server, &mut client, to_server, &mut now, &mut |_| {
        false
    });
    assert_data_flows(&keys_of(&events)[0].1, &client, KeyId::default());
}

#[test]
fn a_client_that_stops_after_its_reset_is_closed_after_the_hand_window() {
    let pki = Pki::new("ca");
    let mut client = TestClient::new(
        crypt(Role::Client),
        client_tls(&pki, &pki.ca_der, None),
        PEER_INFO_26,
    );
    let now = Instant::now();
    let (mut server, _) = open_session(&pki, crypt(Role::Server), &mut client, now);
    let mut sent = 0;
    let mut t = now;
    while let Some(next) = server.next_wakeup() {
        t = next;
        let out = server.tick(t);
        sent += out.datagrams.len();
        if let Some(reason) = closed_reason(&out.events) {
            assert!(reason.contains("hand-window"), "{reason}");
            break;
        }
    }
    assert!(server.is_closed());
    assert_eq!(t - now, Duration::from_secs(60));
    // The reset was sent again with the timeout doubling: at 2, 6, 14, 30, 46 s.
    assert_eq!(sent, 5);
}

#[test]
fn a_soft_reset_that_is_not_message_0_is_refused_and_changes_nothing() {
    let pki = Pki::new("ca");
    let mut client = TestClient::new(
        crypt(Role::Client),
        client_tls(&pki, &pki.ca_der, None),
        PEER_INFO_26,
    );
    let mut now = Instant::now();
    let (mut server, to_server) = open_session(&pki, crypt(Role::Server), &mut client, now);
    converse(&mut server, &mut client, to_server, &mut now, &mut |_| {
        false
    });
    // A soft reset for key 1 claiming message 500.
    let body = openvpn::control::Body {
        acks: openvpn::control::Acks::default(),
        remote_session_id: None,
        message_id: Some(500),
        payload: &[],
    };
    let pid = openvpn::packet_id::PacketId {
        id: 9_999,
        time: 1_000,
    };
    let packet = client.wrap.wrap(
        openvpn::Opcode::SoftResetV1,
        KeyId::new(1).unwrap(),
        client.sid,
        pid,
        &body.emit(openvpn::Opcode::SoftResetV1),
    );
    assert_eq!(
        server.receive(&packet, now).err(),
        Some(Refusal::OutOfWindow)
    );
    let states: Vec<_> = server
        .key_summaries(now)
        .iter()
        .map(|k| k.key_id.get())
        .collect();
    assert_eq!(states, [0], "no key state was made");
    // A proper renegotiation still works.
    let to_server = client.rekey(now);
    let events = converse(&mut server, &mut client, to_server, &mut now, &mut |_| {
        false
    });
    assert_eq!(keys_of(&events).len(), 1);
}

#[test]
fn the_server_seals_with_a_new_key_once_the_client_has_it() {
    let pki = Pki::new("ca");
    let mut client = TestClient::new(
        crypt(Role::Client),
        client_tls(&pki, &pki.ca_der, None),
        PEER_INFO_26,
    );
    let mut now = Instant::now();
    let (mut server, to_server) = open_session(&pki, crypt(Role::Server), &mut client, now);
    let events = converse(&mut server, &mut client, to_server, &mut now, &mut |_| {
        false
    });
    let order: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::Keys { .. } => Some("keys"),
            Event::SendWith { .. } => Some("send-with"),
            _ => None,
        })
        .collect();
    assert_eq!(order, ["keys", "send-with"]);
    // Client-initiated: the server's key-method reply must be acknowledged
    // first, so the two events come in separate steps.
    let to_server = client.rekey(now);
    let mut keys_at = None;
    let mut send_at = None;
    let mut pending = to_server;
    for step in 0..50 {
        let mut next = Vec::new();
        for d in pending.drain(..) {
            let out = server.receive(&d, now).unwrap();
            for e in &out.events {
                match e {
                    Event::Keys { .. } => keys_at = Some(step),
                    Event::SendWith { .. } => send_at = Some(step),
                    _ => {}
                }
            }
            for d in out.datagrams {
                next.extend(client.receive(&d, now));
            }
        }
        if next.is_empty() {
            now += Duration::from_secs(1);
            next.extend(client.flush(now));
            if next.is_empty() {
                break;
            }
        }
        pending = next;
    }
    let (k, s) = (keys_at.expect("keys"), send_at.expect("send-with"));
    assert!(s > k, "send-with at step {s}, keys at step {k}");
}

#[test]
fn a_client_that_leaves_control_messages_unacknowledged_is_let_go() {
    let pki = Pki::new("ca");
    let mut client = TestClient::new(
        crypt(Role::Client),
        client_tls(&pki, &pki.ca_der, None),
        PEER_INFO_26,
    );
    let mut now = Instant::now();
    let (mut server, to_server) = open_session(&pki, crypt(Role::Server), &mut client, now);
    converse(&mut server, &mut client, to_server, &mut now, &mut |_| {
        false
    });
    let reply = client::reply(DataCipher::Aes256Gcm, true);
    let mut closed = None;
    for _ in 0..2000 {
        let out = server.push(&reply, now);
        if let Some(Event::Closed { reason }) = out
            .events
            .iter()
            .find(|e| matches!(e, Event::Closed { .. }))
        {
            closed = Some(reason.clone());
            break;
        }
    }
    let reason = closed.expect("closed");
    assert!(reason.contains("unacknowledged"), "{reason}");
    assert!(server.is_closed());
}

#[test]
fn a_reconfigured_session_keeps_its_protection_and_renegotiates_under_the_new_crl() {
    let pki = Pki::new("ca");
    let mut client = TestClient::new(
        crypt(Role::Client),
        client_tls(&pki, &pki.ca_der, None),
        PEER_INFO_26,
    );
    let mut now = Instant::now();
    let (mut server, to_server) = open_session(&pki, crypt(Role::Server), &mut client, now);
    converse(&mut server, &mut client, to_server, &mut now, &mut |_| {
        false
    });

    // New settings under another tls-crypt key (for clients that connect from
    // now on): this client's renegotiation still goes through under its own.
    let other = ControlWrap::Crypt(TlsCrypt::new(&Key2::from_bytes([9; 256]), Role::Server));
    server.reconfigure(&server_config(&pki, other, None, TlsVersions::Both));
    let out = server.renegotiate(now);
    let mut to_server = Vec::new();
    for d in out.datagrams {
        to_server.extend(client.receive(&d, now));
    }
    let events = converse(&mut server, &mut client, to_server, &mut now, &mut |_| {
        false
    });
    assert_eq!(
        keys_of(&events)
            .iter()
            .map(|k| k.0.get())
            .collect::<Vec<_>>(),
        [1]
    );

    // A CRL that revokes the client: the renegotiation under it fails, and the
    // session ends saying why.
    let revoking = server_config(
        &pki,
        crypt(Role::Server),
        Some(&pki.crl(&[7])),
        TlsVersions::Both,
    );
    server.reconfigure(&revoking);
    let out = server.renegotiate(now);
    let mut to_server = Vec::new();
    for d in out.datagrams {
        to_server.extend(client.receive(&d, now));
    }
    let events = converse(&mut server, &mut client, to_server, &mut now, &mut |_| {
        false
    });
    let reason = closed_reason(&events).expect("closed");
    assert!(reason.contains("Revoked"), "{reason}");
}

#[test]
fn a_tls_crypt_v2_client_brings_its_own_key_and_a_v2_reset_or_a_foreign_key_is_refused() {
    use openvpn::tls_crypt_v2::ServerKey;
    use std::sync::Arc;
    let pki = Pki::new("ca");
    let server_key = Arc::new(ServerKey::from_bytes(&[0x42; 128]));
    let client_key = Key2::from_bytes([0x17; 256]);
    let wkc = server_key.wrap_client_key(&client_key, &[0x00, b'c', b'1']);
    let config = |server_key: &Arc<ServerKey>| {
        let base = server_config(&pki, ControlWrap::None, None, TlsVersions::Both);
        Arc::new(openvpn::server::ServerConfig {
            tls_crypt_v2: Some(server_key.clone()),
            ..(*base).clone()
        })
    };
    let v2_client = |wkc: &[u8]| {
        let mut c = TestClient::new(
            ControlWrap::Crypt(TlsCrypt::new(&client_key, Role::Client)),
            client_tls(&pki, &pki.ca_der, None),
            PEER_INFO_26,
        );
        c.wkc = Some(wkc.to_vec());
        c
    };
    let mut now = Instant::now();
    let mut client = v2_client(&wkc);
    let reset = client.start(now);
    assert_eq!(reset[0][0] >> 3, 10, "a V3 reset");
    let (mut server, out) =
        ServerSession::accept(config(&server_key), &reset[0], now, 1_000, &mut random).unwrap();
    let mut to_server = Vec::new();
    for d in out.datagrams {
        to_server.extend(client.receive(&d, now));
    }
    let events = converse(&mut server, &mut client, to_server, &mut now, &mut |_| {
        false
    });
    let keys = keys_of(&events);
    assert_eq!(keys.len(), 1, "connected under its own key");
    assert_data_flows(&keys[0].1, &client, KeyId::new(0).unwrap());

    // The same reset again is seen through its wrapped key: a replay of its
    // packet id, not a forgery; still so after a reload's settings without
    // tls-crypt-v2 (the session keeps the protection it began with).
    assert!(matches!(
        server.receive(&reset[0], now),
        Err(Refusal::Replay)
    ));
    server.reconfigure(&server_config(
        &pki,
        crypt(Role::Server),
        None,
        TlsVersions::Both,
    ));
    assert!(server.has_own_key());
    assert!(matches!(
        server.receive(&reset[0], now),
        Err(Refusal::Replay)
    ));

    // A client key wrapped under another server key, and a V2 reset, are refused
    // before any session exists.
    let other = Arc::new(ServerKey::from_bytes(&[0x43; 128]));
    let foreign = other.wrap_client_key(&client_key, &[]);
    let reset = v2_client(&foreign).start(now);
    assert!(matches!(
        ServerSession::accept(config(&server_key), &reset[0], now, 1_000, &mut random),
        Err(Refusal::BadAuth)
    ));
    let mut plain = TestClient::new(
        crypt(Role::Client),
        client_tls(&pki, &pki.ca_der, None),
        PEER_INFO_26,
    );
    let reset = plain.start(now);
    assert!(
        ServerSession::accept(config(&server_key), &reset[0], now, 1_000, &mut random).is_err()
    );
}
