//! Ethernet view: whatever `new_checked` accepts, every accessor must
//! answer without panicking, the header and payload must split the buffer,
//! and a MAC address must survive printing and parsing.
#![no_main]

use std::hint::black_box;

use libfuzzer_sys::fuzz_target;
use wire::ethernet::{self, EthernetRepr, MacAddr};

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        if let Ok(mac) = s.parse::<MacAddr>() {
            assert_eq!(mac.to_string().parse::<MacAddr>(), Ok(mac));
        }
    }

    let Ok(frame) = ethernet::Frame::new_checked(data) else {
        return;
    };
    black_box((frame.dst_addr(), frame.src_addr(), frame.outer_ethertype()));
    black_box((frame.vlan_tci(), frame.vlan_pcp()));
    let ethertype = frame.ethertype();
    assert_ne!(ethertype, ethernet::ethertype::QINQ);

    let header_len = frame.header_len();
    assert!(header_len == ethernet::HEADER_LEN || header_len == ethernet::MAX_HEADER_LEN);
    assert_eq!(frame.is_tagged(), header_len == ethernet::MAX_HEADER_LEN);
    assert_eq!(frame.header().len(), header_len);
    assert_eq!(frame.payload().len(), data.len() - header_len);

    let repr = EthernetRepr {
        dst_addr: frame.dst_addr(),
        src_addr: frame.src_addr(),
        ethertype,
        vlan_id: frame.vlan_id(),
    };
    let mut buf = [0u8; ethernet::MAX_HEADER_LEN];
    assert_eq!(repr.emit(&mut buf), Ok(header_len));
    let again = ethernet::Frame::new_checked(&buf[..header_len]).unwrap();
    assert_eq!(again.ethertype(), ethertype);
    assert_eq!(again.vlan_id(), frame.vlan_id());
});
