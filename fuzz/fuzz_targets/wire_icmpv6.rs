//! ICMPv6 views: whatever `new_checked` accepts, every accessor must answer
//! without panicking and a filled checksum must verify; a neighbor message
//! the view accepts must pass the checks of RFC 4861 §7.1.1; an error
//! message built about any input must fit the minimum MTU, or be refused.
#![no_main]

use std::hint::black_box;
use std::net::Ipv6Addr;

use libfuzzer_sys::fuzz_target;
use wire::ethernet::MacAddr;
use wire::{icmpv6, ipv6};

const SRC: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1);
const DST: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 2);
const OUR_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x01]);

fuzz_target!(|data: &[u8]| {
    if let Ok(ip) = ipv6::Packet::new_checked(data) {
        black_box(icmpv6::is_icmpv6_error(&ip));
        let repr = icmpv6::ErrorRepr::PacketTooBig { mtu: 1280 };
        let mut buf = [0u8; icmpv6::MIN_MTU];
        let len = repr.emit(&mut buf, &SRC, &DST, data).unwrap();
        assert_eq!(icmpv6::ErrorRepr::message_len(data), Ok(len));
        assert!(ipv6::HEADER_LEN + len <= icmpv6::MIN_MTU);
        let quoted = len - icmpv6::HEADER_LEN;
        assert_eq!(quoted, ip.total_len().min(icmpv6::MAX_QUOTE_LEN));
        assert_eq!(&buf[icmpv6::HEADER_LEN..len], &data[..quoted]);
        let message = icmpv6::Packet::new_checked(&buf[..len]).unwrap();
        assert!(message.verify_checksum(&SRC, &DST));
        assert!(message.is_error());
        assert_eq!(message.mtu(), 1280);
    } else {
        let repr = icmpv6::ErrorRepr::TimeExceeded { code: 0 };
        assert!(repr.emit(&mut [0u8; 64], &SRC, &DST, data).is_err());
    }

    if let Ok(message) = icmpv6::NeighborMessage::new_checked(data) {
        assert!(data.len() >= icmpv6::NEIGHBOR_LEN);
        assert!(message.is_solicit() != message.is_advert());
        assert_eq!(message.code(), 0);
        assert!(!message.target_addr().is_multicast());
        assert!(message.options().all(|option| option.is_ok()));
        black_box((message.router_flag(), message.solicited_flag()));
        black_box((message.override_flag(), message.checksum()));
        black_box((message.source_link_addr(), message.target_link_addr()));
        black_box(message.verify_checksum(&SRC, &DST));

        let answer = icmpv6::NeighborAdvertRepr::answer(&message, &DST, OUR_MAC, false);
        let mut buf = [0u8; 64];
        let len = answer.emit(&mut buf, &SRC, &DST).unwrap();
        let advert = icmpv6::NeighborMessage::new_checked(&buf[..len]).unwrap();
        assert!(advert.is_advert());
        assert_eq!(advert.target_addr(), message.target_addr());
        assert_eq!(advert.target_link_addr(), Some(OUR_MAC));
        assert!(advert.verify_checksum(&SRC, &DST));
    }
    for option in icmpv6::NeighborMessage::new_unchecked(data).options() {
        if let Ok(option) = option {
            black_box(option.link_addr());
        }
    }

    let Ok(packet) = icmpv6::Packet::new_checked(data) else {
        return;
    };
    black_box((packet.msg_type(), packet.code(), packet.checksum()));
    black_box((packet.identifier(), packet.sequence(), packet.mtu()));
    black_box((packet.pointer(), packet.is_error()));
    black_box(packet.verify_checksum(&SRC, &DST));
    assert_eq!(packet.payload().len(), data.len() - icmpv6::HEADER_LEN);

    let mut copy = data.to_vec();
    let mut packet = icmpv6::Packet::new_unchecked(&mut copy[..]);
    packet.fill_checksum(&SRC, &DST);
    assert!(packet.verify_checksum(&SRC, &DST));
});
