//! ICMP view: whatever `new_checked` accepts, every accessor must answer
//! without panicking and a filled checksum must verify; an error message
//! built about any input must quote it as RFC 792 says, or be refused.
#![no_main]

use std::hint::black_box;

use libfuzzer_sys::fuzz_target;
use wire::{icmp, ipv4};

fuzz_target!(|data: &[u8]| {
    if let Ok(ip) = ipv4::Packet::new_checked(data) {
        black_box(icmp::is_icmp_error(&ip));
        let repr = icmp::ErrorRepr::FragNeeded { next_hop_mtu: 1280 };
        let mut buf = [0u8; 128];
        let len = repr.emit(&mut buf, data).unwrap();
        assert_eq!(icmp::ErrorRepr::message_len(data), Ok(len));
        let quoted = len - icmp::HEADER_LEN;
        assert_eq!(&buf[icmp::HEADER_LEN..len], &data[..quoted]);
        assert!(quoted >= ip.header_len());
        assert!(quoted - ip.header_len() <= icmp::QUOTED_PAYLOAD_LEN);
        let message = icmp::Packet::new_checked(&buf[..len]).unwrap();
        assert!(message.verify_checksum());
        assert!(message.is_error());
        assert_eq!(message.next_hop_mtu(), 1280);
    } else {
        let repr = icmp::ErrorRepr::TimeExceeded { code: 0 };
        assert!(repr.emit(&mut [0u8; 128], data).is_err());
    }

    let Ok(packet) = icmp::Packet::new_checked(data) else {
        return;
    };
    black_box((packet.msg_type(), packet.code(), packet.checksum()));
    black_box((
        packet.identifier(),
        packet.sequence(),
        packet.rest_of_header(),
    ));
    black_box((packet.next_hop_mtu(), packet.pointer(), packet.is_error()));
    black_box(packet.verify_checksum());
    assert_eq!(packet.payload().len(), data.len() - icmp::HEADER_LEN);

    let mut copy = data.to_vec();
    let mut packet = icmp::Packet::new_unchecked(&mut copy[..]);
    packet.fill_checksum();
    assert!(packet.verify_checksum());
});
