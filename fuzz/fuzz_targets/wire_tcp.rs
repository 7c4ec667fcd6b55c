//! TCP view: whatever `new_checked` accepts, every accessor must answer
//! without panicking, the lengths it reports must agree, and a filled
//! checksum must verify.
#![no_main]

use std::hint::black_box;
use std::net::{Ipv4Addr, Ipv6Addr};

use libfuzzer_sys::fuzz_target;
use wire::tcp;

const V4_SRC: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const V4_DST: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const V6_SRC: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1);
const V6_DST: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 2);

fuzz_target!(|data: &[u8]| {
    let Ok(packet) = tcp::Packet::new_checked(data) else {
        return;
    };
    black_box((packet.src_port(), packet.dst_port(), packet.flags()));
    black_box((packet.seq_number(), packet.ack_number(), packet.window()));
    black_box((packet.checksum(), packet.urgent_ptr()));
    black_box(packet.verify_checksum_v4(V4_SRC, V4_DST));
    black_box(packet.verify_checksum_v6(&V6_SRC, &V6_DST));

    let header_len = packet.header_len();
    assert!(header_len >= tcp::HEADER_LEN && header_len <= tcp::MAX_HEADER_LEN);
    assert!(header_len <= data.len());
    assert_eq!(packet.header().len(), header_len);
    assert_eq!(packet.options().len(), header_len - tcp::HEADER_LEN);
    assert_eq!(packet.payload().len(), data.len() - header_len);

    let mut copy = data.to_vec();
    let mut packet = tcp::Packet::new_unchecked(&mut copy[..]);
    packet.fill_checksum_v4(V4_SRC, V4_DST);
    assert!(packet.verify_checksum_v4(V4_SRC, V4_DST));
    packet.fill_checksum_v6(&V6_SRC, &V6_DST);
    assert!(packet.verify_checksum_v6(&V6_SRC, &V6_DST));
});
