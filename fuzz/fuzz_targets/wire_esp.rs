//! ESP views: whatever `Packet::new_checked` accepts has an SPI of 256 or more and a
//! header that writes back the same; whatever `parse_trailer` accepts has padding
//! that `emit_trailer` writes back the same; `classify_udp` answers for any
//! datagram.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::esp;

fuzz_target!(|data: &[u8]| {
    let _ = esp::classify_udp(data);
    if let Ok(p) = esp::Packet::new_checked(data) {
        assert!(p.spi() >= esp::MIN_SPI);
        let mut copy = data.to_vec();
        esp::emit_header(&mut copy, p.spi(), u64::from(p.seq())).unwrap();
        assert_eq!(copy, data, "a valid header writes back the same");
        assert_eq!(p.payload(), &data[esp::HEADER_LEN..]);
    }
    if let Ok((len, next)) = esp::parse_trailer(data) {
        assert!(len + esp::TRAILER_LEN <= data.len());
        let mut copy = data.to_vec();
        esp::emit_trailer(&mut copy, len, next).unwrap();
        assert_eq!(copy, data, "a valid trailer writes back the same");
    }
});
