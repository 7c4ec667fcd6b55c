//! The reliability layer under any sequence of sends, acknowledgements,
//! arrivals and clock steps: nothing panics, the send window never holds more
//! than its bound, and the receiver hands each message id on at most once, in
//! order.
#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use openvpn::reliable::{ReceiveWindow, SendWindow, SEND_WINDOW};
use openvpn::Opcode;

fuzz_target!(|data: &[u8]| {
    let t0 = Instant::now();
    let mut now = t0;
    let mut send = SendWindow::new();
    let mut recv = ReceiveWindow::new();
    let mut in_flight = 0usize;
    let mut delivered: Vec<u8> = Vec::new();
    for op in data.chunks(3) {
        let [kind, a, b] = *op else { return };
        let id = u32::from(a) << 8 | u32::from(b);
        match kind % 4 {
            0 => {
                if send.push(Opcode::ControlV1, vec![a], now).is_some() {
                    in_flight += 1;
                }
            }
            1 => {
                if send.ack(id) {
                    in_flight -= 1;
                }
            }
            2 => {
                let _ = recv.receive(u32::from(a) % 40, Opcode::ControlV1, &[a]);
                while let Some((_, p)) = recv.deliver() {
                    delivered.push(p[0]);
                }
            }
            _ => now += Duration::from_millis(u64::from(id)),
        }
        assert!(in_flight <= SEND_WINDOW);
        let _ = send.due(now);
    }
    // Delivered payloads are the message ids in order (each payload is its id).
    for (i, p) in delivered.iter().enumerate() {
        assert_eq!(usize::from(*p) % 40, i);
    }
});
