//! The graph's exits: packets leave for a driver's output queue.

use crate::arena::Handle;
use crate::counters::NodeCounters;
use crate::graph::{KEEP, Node};
use crate::wg::WgContext;

pub struct Output {
    name: &'static str,
    to_tun: bool,
}

impl Output {
    pub const TUN: &'static str = "tun-output";
    pub const UDP: &'static str = "udp-output";

    pub fn tun() -> Output {
        Output {
            name: Self::TUN,
            to_tun: true,
        }
    }

    pub fn udp() -> Output {
        Output {
            name: Self::UDP,
            to_tun: false,
        }
    }
}

impl Node<WgContext> for Output {
    fn name(&self) -> &'static str {
        self.name
    }

    fn next_nodes(&self) -> &'static [&'static str] {
        &[]
    }

    fn process(
        &mut self,
        cx: &mut WgContext,
        packets: &[Handle],
        next: &mut [u16],
        _c: &mut NodeCounters,
    ) {
        let queue = if self.to_tun {
            &mut cx.tx_tun
        } else {
            &mut cx.tx_udp
        };
        queue.extend_from_slice(packets);
        next.fill(KEEP);
    }
}
