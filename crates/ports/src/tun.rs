//! Host mode's TUN port: inner packets between a TUN queue and the host graph.

use crate::rx_buffers::{HOST_RESERVE, RxBuffers};
use dataplane::graph::FRAME_LEN;
use dataplane::wg::{TUN_OUT, WgGraph, tun_rx_starts};
use io::TunDevice;

pub struct TunPort {
    pub device: TunDevice,
    buffers: RxBuffers,
    lens: Vec<usize>,
}

impl TunPort {
    pub fn new(device: TunDevice) -> TunPort {
        TunPort {
            device,
            buffers: RxBuffers::new(),
            lens: vec![0; io::MAX_BATCH],
        }
    }

    /// Reads one batch of packets into the graph (not run); how many came, or
    /// `None` when the arena has no buffer to spare (the packets wait in the queue).
    pub fn receive(&mut self, wg: &mut WgGraph) -> std::io::Result<Option<usize>> {
        let starts = tun_rx_starts(wg.context().arena().buffer_size(), wg.context().wg_mtu());
        let arena = wg.context_mut().arena_mut();
        if self.buffers.take(arena, io::MAX_BATCH, HOST_RESERVE) == 0 {
            return Ok(None);
        }
        let (device, lens) = (&self.device, &mut self.lens);
        let packets = self
            .buffers
            .read(arena, starts, |bufs| device.read_batch(bufs, lens))?;
        for (&h, &len) in packets.iter().zip(&self.lens) {
            arena.meta_mut(h).len = len as u16;
        }
        wg.from_tun(packets);
        Ok(Some(packets.len()))
    }

    /// Writes the inner packets the graph queued. The slices for a batch live on
    /// the stack, so writing allocates nothing; what the TUN refuses it counts.
    pub fn transmit(&mut self, wg: &mut WgGraph) {
        let device = &self.device;
        wg.context_mut().send_output(TUN_OUT, |arena, queue| {
            let mut pkts: [&[u8]; FRAME_LEN] = [&[]; FRAME_LEN];
            for chunk in queue.chunks(FRAME_LEN) {
                for (p, &h) in pkts.iter_mut().zip(chunk) {
                    *p = arena.data(h);
                }
                device.write_batch(&pkts[..chunk.len()]);
            }
        });
    }
}
