//! IPv4 view: whatever `new_checked` accepts, every accessor must answer
//! without panicking, and the lengths it reports must agree.
#![no_main]

use std::hint::black_box;

use libfuzzer_sys::fuzz_target;
use wire::{IpPacket, ip, ipv4};

fuzz_target!(|data: &[u8]| {
    let Ok(packet) = ipv4::Packet::new_checked(data) else {
        return;
    };
    black_box((
        packet.version(),
        packet.dscp(),
        packet.ecn(),
        packet.ident(),
    ));
    black_box((
        packet.dont_frag(),
        packet.more_frags(),
        packet.frag_offset(),
    ));
    black_box((packet.is_fragment(), packet.ttl(), packet.protocol()));
    black_box((packet.checksum(), packet.src_addr(), packet.dst_addr()));
    black_box((packet.header(), packet.options(), packet.verify_checksum()));

    let header_len = packet.header_len();
    let total_len = usize::from(packet.total_len());
    assert!(header_len >= ipv4::HEADER_LEN && header_len <= total_len);
    assert!(total_len <= data.len());
    assert_eq!(packet.payload().len(), total_len - header_len);
    assert_eq!(packet.options().len(), header_len - ipv4::HEADER_LEN);

    let Ok(IpPacket::V4(_)) = IpPacket::parse(data) else {
        panic!("IpPacket disagrees with ipv4::Packet");
    };
    assert_eq!(ip::claimed_len(data), Ok(total_len));

    let mut copy = data.to_vec();
    let mut packet = ipv4::Packet::new_unchecked(&mut copy[..]);
    packet.fill_checksum();
    assert!(packet.verify_checksum());
    packet.set_ttl(packet.ttl().wrapping_sub(1));
    packet.fill_checksum();
    assert!(packet.verify_checksum());
});
