//! IKE messages: whatever the header and payload chain parsers accept writes back
//! to bytes that parse to the same payloads; nothing panics on any input.
#![no_main]

use ikev2::wire::{emit_chain, parse_chain, Header, Payload, HEADER_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = Header::parse(data);
    // The chain alone, with the first byte as its first payload type.
    let Some((&first, chain)) = data.split_first() else { return };
    if let Ok(payloads) = parse_chain(first, chain) {
        if payloads.iter().any(|p| matches!(p, Payload::Encrypted { .. })) {
            return;
        }
        let (f, bytes) = emit_chain(&payloads);
        assert_eq!(parse_chain(f, &bytes).as_ref(), Ok(&payloads));
    }
    if data.len() >= HEADER_LEN {
        if let Ok(h) = Header::parse(data) {
            let _ = parse_chain(h.next_payload, &data[HEADER_LEN..]);
        }
    }
});
