//! UDP view: whatever `new_checked` accepts, every accessor must answer
//! without panicking, and a filled checksum must verify.
#![no_main]

use std::hint::black_box;
use std::net::{Ipv4Addr, Ipv6Addr};

use libfuzzer_sys::fuzz_target;
use wire::udp;

const V4_SRC: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const V4_DST: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const V6_SRC: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1);
const V6_DST: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 2);

fuzz_target!(|data: &[u8]| {
    let Ok(packet) = udp::Packet::new_checked(data) else {
        return;
    };
    black_box((packet.src_port(), packet.dst_port(), packet.checksum()));
    black_box(packet.verify_checksum_v4(V4_SRC, V4_DST));
    black_box(packet.verify_checksum_v6(&V6_SRC, &V6_DST));

    let length = usize::from(packet.length());
    assert!(length >= udp::HEADER_LEN && length <= data.len());
    assert_eq!(packet.payload().len(), length - udp::HEADER_LEN);

    let mut copy = data.to_vec();
    let mut packet = udp::Packet::new_unchecked(&mut copy[..]);
    packet.fill_checksum_v4(V4_SRC, V4_DST);
    assert!(packet.verify_checksum_v4(V4_SRC, V4_DST));
    assert_ne!(packet.checksum(), 0);
    packet.fill_checksum_v6(&V6_SRC, &V6_DST);
    assert!(packet.verify_checksum_v6(&V6_SRC, &V6_DST));
});
