//! WireGuard messages: whatever `classify` accepts, the matching view must
//! accept too, every accessor must answer without panicking, and emitting
//! the header fields read back must reproduce the message.
#![no_main]

use std::hint::black_box;

use libfuzzer_sys::fuzz_target;
use wire::wireguard::{
    CookieReply, HandshakeInitiation, HandshakeResponse, Message, MessageType, TransportData,
};

fuzz_target!(|data: &[u8]| {
    let classified = Message::classify(data);
    assert_eq!(
        Message::parse(data).map(|m| m.message_type()),
        classified,
        "parse and classify disagree"
    );
    let Ok(message_type) = classified else {
        return;
    };
    let mut copy = data.to_vec();
    match message_type {
        MessageType::HandshakeInitiation => {
            let m = HandshakeInitiation::new_checked(data).expect("classified initiation");
            black_box((m.unencrypted_ephemeral(), m.encrypted_static()));
            black_box((m.encrypted_timestamp(), m.mac1(), m.mac2()));
            assert_eq!(m.mac1_covered().len() + 16, m.mac2_covered().len());
            HandshakeInitiation::emit(&mut copy[..], m.sender_index()).unwrap();
        }
        MessageType::HandshakeResponse => {
            let m = HandshakeResponse::new_checked(data).expect("classified response");
            black_box((m.unencrypted_ephemeral(), m.encrypted_nothing()));
            black_box((m.mac1(), m.mac2(), m.mac1_covered(), m.mac2_covered()));
            HandshakeResponse::emit(&mut copy[..], m.sender_index(), m.receiver_index()).unwrap();
        }
        MessageType::CookieReply => {
            let m = CookieReply::new_checked(data).expect("classified cookie reply");
            black_box((m.nonce(), m.encrypted_cookie()));
            CookieReply::emit(&mut copy[..], m.receiver_index()).unwrap();
        }
        MessageType::TransportData => {
            let m = TransportData::new_checked(data).expect("classified transport data");
            assert!(m.payload().len() >= 16);
            black_box(m.is_keepalive());
            TransportData::emit(&mut copy[..], m.receiver_index(), m.counter()).unwrap();
        }
    }
    assert_eq!(copy, data, "emit did not reproduce the header");
});
