//! The AF_PACKET driver: memory-mapped rings, frames copied between them and arena
//! buffers.

use crate::copied_starts::copied_rx_starts;
use crate::rx_buffers::RxBuffers;
use crate::{PortCounters, PortGraph, RX_BATCH};
use dataplane::fib::PortId;
use dataplane::{OutputId, RxStarts};
use io::{Fanout, PacketPort};

/// Ring slots of an AF_PACKET port with standard frames, each way.
const PACKET_RING_FRAMES: usize = 2048;

/// Ring slots of an AF_PACKET port whose frames are up to `max_frame` bytes: as many
/// bytes as a standard port's ring holds (a burst is bytes, not frames: a TCP
/// window of jumbo frames is a fifth as many frames), and at least 512 slots.
fn ring_frames(max_frame: usize) -> usize {
    (PACKET_RING_FRAMES * io::packet::MIN_FRAME / max_frame.max(1)).clamp(512, PACKET_RING_FRAMES)
}

/// An AF_PACKET socket and where it copies frames in.
pub(crate) struct PacketDriver {
    socket: PacketPort,
    starts: RxStarts,
    /// The buffers of the batch being received.
    buffers: RxBuffers,
    lens: [usize; RX_BATCH],
}

impl PacketDriver {
    /// A socket on `ifname`, promiscuous (the port routes for every address); with
    /// `fanout`, one socket of that fanout group (one per worker).
    pub(crate) fn open(
        name: &str,
        ifname: &str,
        mtu: u16,
        buffer: usize,
        fanout: Option<(u16, Fanout)>,
    ) -> Result<PacketDriver, String> {
        let max_frame = usize::from(mtu) + wire::ethernet::QINQ_HEADER_LEN;
        let socket = PacketPort::open(ifname, ring_frames(max_frame), max_frame)
            .map_err(|e| format!("port {name}: opening {ifname} with AF_PACKET: {e}"))?;
        socket
            .set_promiscuous(true)
            .map_err(|e| format!("port {name}: promiscuous mode on {ifname}: {e}"))?;
        if let Some((group, how)) = fanout {
            socket
                .join_fanout(group, how)
                .map_err(|e| format!("port {name}: {e}"))?;
        }
        Ok(PacketDriver {
            socket,
            starts: copied_rx_starts(buffer, mtu),
            buffers: RxBuffers::new(),
            lens: [0; RX_BATCH],
        })
    }

    pub(crate) fn fd(&self) -> std::os::fd::RawFd {
        self.socket.as_raw_fd()
    }

    /// Copies one batch of frames into free buffers and hands them to the graph;
    /// how many came.
    pub(crate) fn receive(
        &mut self,
        id: PortId,
        c: &mut PortCounters,
        graph: &mut impl PortGraph,
    ) -> usize {
        let arena = graph.context_mut().arena_mut();
        if self.buffers.take(arena, RX_BATCH, 0) == 0 {
            c.rx_no_buffer_polls += 1;
            return 0;
        }
        let (socket, lens) = (&mut self.socket, &mut self.lens);
        let Ok(frames) = self.buffers.read(arena, self.starts, |bufs| {
            Ok::<_, std::convert::Infallible>(socket.recv_batch(bufs, lens))
        });
        for (&h, &len) in frames.iter().zip(self.lens.iter()) {
            arena.meta_mut(h).len = len as u16;
            c.rx_bytes += len as u64;
        }
        c.rx_packets += frames.len() as u64;
        graph.take_in(id, frames);
        frames.len()
    }

    /// Copies the frames of output queue `queue` to the ring and sends them; every
    /// buffer goes back to the arena.
    pub(crate) fn transmit(
        &mut self,
        queue: OutputId,
        c: &mut PortCounters,
        graph: &mut impl PortGraph,
    ) {
        let socket = &mut self.socket;
        graph.context_mut().send_output(queue, |arena, hs| {
            for chunk in hs.chunks(RX_BATCH) {
                let mut frames: [&[u8]; RX_BATCH] = [&[]; RX_BATCH];
                for (f, &h) in frames.iter_mut().zip(chunk) {
                    *f = arena.data(h);
                }
                let sent = socket.send_batch(&frames[..chunk.len()]);
                c.tx_packets += sent as u64;
                c.tx_bytes += frames[..sent].iter().map(|f| f.len() as u64).sum::<u64>();
                c.tx_dropped += (chunk.len() - sent) as u64;
            }
        });
    }

    /// The frames the driver lost, by reason (see `io::port_drops`).
    pub(crate) fn drops(&self) -> Vec<(&'static str, u64)> {
        let p = &self.socket;
        io::port_drops::packet(
            p.rx_truncated(),
            p.rx_dropped(),
            p.tx_too_big(),
            p.tx_ring_full(),
            p.tx_rejected(),
        )
    }

    /// What the socket counts, by name.
    pub(crate) fn driver_counters(&self) -> Vec<(&'static str, u64)> {
        let p = &self.socket;
        vec![
            ("rx_truncated", p.rx_truncated()),
            ("rx_dropped", p.rx_dropped()),
            ("tx_too_big", p.tx_too_big()),
            ("tx_ring_full", p.tx_ring_full()),
            ("tx_rejected", p.tx_rejected()),
            ("tx_flush_errors", p.tx_flush_errors()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A jumbo port's rings hold about the bytes a standard port's do.
    #[test]
    fn jumbo_rings_are_sized_by_bytes() {
        assert_eq!(ring_frames(1500 + 22), PACKET_RING_FRAMES);
        assert_eq!(ring_frames(9216 + 22), 512);
    }
}
