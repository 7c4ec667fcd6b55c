//! IPv6 view: whatever `new_checked` accepts, every accessor must answer
//! without panicking, and the lengths it reports must agree.
#![no_main]

use std::hint::black_box;

use libfuzzer_sys::fuzz_target;
use wire::{IpPacket, ip, ipv6};

fuzz_target!(|data: &[u8]| {
    let Ok(packet) = ipv6::Packet::new_checked(data) else {
        return;
    };
    black_box((
        packet.version(),
        packet.traffic_class(),
        packet.flow_label(),
    ));
    black_box((packet.next_header(), packet.hop_limit()));
    black_box((packet.src_addr(), packet.dst_addr()));

    let total_len = packet.total_len();
    assert!(total_len <= data.len());
    assert_eq!(
        total_len,
        ipv6::HEADER_LEN + usize::from(packet.payload_len())
    );
    assert_eq!(packet.payload().len(), usize::from(packet.payload_len()));

    let Ok(IpPacket::V6(_)) = IpPacket::parse(data) else {
        panic!("IpPacket disagrees with ipv6::Packet");
    };
    assert_eq!(ip::claimed_len(data), Ok(total_len));
    assert!(ip::addrs(data).is_ok());
});
