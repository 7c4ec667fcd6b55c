//! ARP view: whatever `new_checked` accepts, every accessor must answer
//! without panicking, and what it reads must be written back the same.
#![no_main]

use std::hint::black_box;

use libfuzzer_sys::fuzz_target;
use wire::arp;
use wire::ethernet::MacAddr;

const OUR_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x01]);

fuzz_target!(|data: &[u8]| {
    let Ok(packet) = arp::Packet::new_checked(data) else {
        return;
    };
    black_box((packet.hardware_type(), packet.protocol_type()));
    black_box((packet.hardware_len(), packet.protocol_len()));
    let repr = packet.repr();

    let mut buf = [0u8; arp::PACKET_LEN];
    assert_eq!(repr.emit(&mut buf), Ok(arp::PACKET_LEN));
    assert_eq!(&buf[..], &data[..arp::PACKET_LEN]);

    assert_eq!(
        arp::emit_reply(&mut buf, &repr, OUR_MAC),
        Ok(arp::PACKET_LEN)
    );
    let reply = arp::Packet::new_checked(&buf[..]).unwrap();
    assert_eq!(reply.operation(), arp::operation::REPLY);
    assert_eq!(reply.target_ip(), repr.sender_ip);
    assert_eq!(reply.sender_ip(), repr.target_ip);
});
