//! Sessions between a stock OpenVPN 2.6 client and server, recorded by
//! `tests/stock/capture.sh`: every control packet either end sent must unwrap
//! with this crate's keys for that end, parse, obey the reliability layer's
//! rules, and wrap again to the same bytes; a flipped bit anywhere must fail.

use std::collections::HashSet;

use openvpn::control::{Body, SessionId};
use openvpn::packet_id::ReplayGuard;
use openvpn::reliable::{ReceiveWindow, Received};
use openvpn::static_key::{Direction, Key2};
use openvpn::tls_auth::AuthDigest;
use openvpn::wrap::ControlWrap;
use openvpn::{Opcode, Refusal, Role, TlsAuth, TlsCrypt};

struct Recorded {
    from_client: bool,
    bytes: Vec<u8>,
}

fn recording(name: &str) -> (Key2, Vec<Recorded>) {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/stock/");
    let key = std::fs::read_to_string(format!("{dir}{name}.key")).unwrap();
    let packets = std::fs::read_to_string(format!("{dir}{name}.packets")).unwrap();
    let packets = packets
        .lines()
        .map(|l| {
            let (dir, hex) = l.split_once(' ').unwrap();
            Recorded {
                from_client: dir == "c2s",
                bytes: hex::decode(hex).unwrap(),
            }
        })
        .collect();
    (Key2::parse_file(&key).unwrap(), packets)
}

/// Checks one recorded session with `server` and `client` as the two ends'
/// protections; returns how many data packets it held.
fn check_session(packets: &[Recorded], server: &ControlWrap, client: &ControlWrap) -> usize {
    let mut sids: [Option<SessionId>; 2] = [None, None];
    let mut guards = [ReplayGuard::default(), ReplayGuard::default()];
    let mut windows = [ReceiveWindow::new(), ReceiveWindow::new()];
    let mut sent_ids: [HashSet<u32>; 2] = [HashSet::new(), HashSet::new()];
    let mut data = 0;
    let mut resets = 0;
    for (n, p) in packets.iter().enumerate() {
        let opcode = Opcode::of(p.bytes[0]).unwrap();
        if opcode.is_data() {
            data += 1;
            continue;
        }
        let (sender, receiver) = if p.from_client {
            (client, server)
        } else {
            (server, client)
        };
        let side = usize::from(!p.from_client);
        let u = receiver
            .unwrap(&p.bytes)
            .unwrap_or_else(|e| panic!("packet {n}: {e}"));
        assert_eq!(u.opcode, opcode);
        // Each end keeps one session id for the whole session.
        assert_eq!(
            *sids[side].get_or_insert(u.session_id),
            u.session_id,
            "packet {n}"
        );
        // Packet ids pass the replay check once, and only once.
        let pid = u.packet_id.unwrap();
        guards[side]
            .accept(pid)
            .unwrap_or_else(|e| panic!("packet {n}: {e}"));
        assert_eq!(guards[side].check(pid), Err(Refusal::Replay));

        let body = Body::parse(u.opcode, &u.body).unwrap_or_else(|e| panic!("packet {n}: {e}"));
        // Acknowledgements name the other end's session and ids it sent.
        if !body.acks.is_empty() {
            assert_eq!(body.remote_session_id, sids[1 - side], "packet {n}");
            for id in body.acks.ids() {
                assert!(
                    sent_ids[1 - side].contains(id),
                    "packet {n} acknowledges {id}, never sent"
                );
            }
        }
        if let Some(id) = body.message_id {
            sent_ids[side].insert(id);
            let got = windows[side].receive(id, u.opcode, body.payload).unwrap();
            if matches!(
                u.opcode,
                Opcode::HardResetClientV2 | Opcode::HardResetServerV2
            ) {
                resets += 1;
                assert_eq!(id, 0);
                let _ = got;
            } else {
                assert_eq!(
                    got,
                    Received::New,
                    "packet {n}: a control message sent twice"
                );
            }
        }
        // The sender's wrapping of the same fields is the same bytes.
        let again = sender.wrap(u.opcode, u.key_id, u.session_id, pid, &u.body);
        assert_eq!(again, p.bytes, "packet {n} wraps differently");
        // A flipped bit anywhere fails.
        for at in [0, 5, 9, 20, p.bytes.len() - 1] {
            let mut forged = p.bytes.clone();
            forged[at] ^= 0x10;
            assert!(
                receiver.unwrap(&forged).is_err(),
                "packet {n} byte {at} forged"
            );
        }
        // So does the other end's key.
        assert_eq!(
            sender.unwrap(&p.bytes).err(),
            Some(Refusal::BadAuth),
            "packet {n}"
        );
    }
    // The TLS records arrived in order on both sides.
    for w in &mut windows {
        let mut delivered = 0;
        while w.deliver().is_some() {
            delivered += 1;
        }
        assert!(delivered > 3);
    }
    assert!(resets >= 2);
    data
}

#[test]
fn a_stock_tls_crypt_session_reads_and_writes_the_same() {
    let (key, packets) = recording("tls-crypt");
    let server = ControlWrap::Crypt(TlsCrypt::new(&key, Role::Server));
    let client = ControlWrap::Crypt(TlsCrypt::new(&key, Role::Client));
    assert!(check_session(&packets, &server, &client) >= 2);
}

#[test]
fn a_stock_tls_auth_session_reads_and_writes_the_same() {
    let (key, packets) = recording("tls-auth");
    let server = ControlWrap::Auth(TlsAuth::new(&key, Direction::Normal, AuthDigest::Sha256));
    let client = ControlWrap::Auth(TlsAuth::new(&key, Direction::Inverse, AuthDigest::Sha256));
    assert!(check_session(&packets, &server, &client) >= 2);
}

#[test]
fn the_wrong_protection_refuses_a_stock_session() {
    let (auth_key, _) = recording("tls-auth");
    let (_, packets) = recording("tls-crypt");
    let wrong = ControlWrap::Crypt(TlsCrypt::new(&auth_key, Role::Server));
    let sha1 = ControlWrap::Auth(TlsAuth::new(&auth_key, Direction::Normal, AuthDigest::Sha1));
    for p in packets
        .iter()
        .filter(|p| p.from_client && !Opcode::of(p.bytes[0]).unwrap().is_data())
    {
        assert_eq!(wrong.unwrap(&p.bytes).err(), Some(Refusal::BadAuth));
        assert_eq!(sha1.unwrap(&p.bytes).err(), Some(Refusal::BadAuth));
    }
}
