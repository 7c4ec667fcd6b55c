//! Host mode's UDP port: WireGuard datagrams between a UDP socket and the host
//! graph, read and sent in batches (GSO where the kernel has it).

use crate::rx_buffers::{HOST_RESERVE, RxBuffers};
use dataplane::Handle;
use dataplane::graph::FRAME_LEN;
use dataplane::wg::{UDP_OUT, WgGraph, udp_rx_starts};
use io::{GsoSendBatch, RecvBatch, RecvMeta, SendBatch, UdpSocket};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

/// A placeholder for the unused entries of a batch array.
const NO_ADDR: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));

pub struct UdpPort {
    pub socket: UdpSocket,
    rx: RecvBatch,
    tx: SendBatch,
    tx_gso: GsoSendBatch,
    metas: Vec<RecvMeta>,
    buffers: RxBuffers,
    /// The datagrams of a batch that go on to the graph.
    good: Vec<Handle>,
    truncated: u64,
    send_failed: u64,
}

impl UdpPort {
    pub fn new(socket: UdpSocket) -> UdpPort {
        UdpPort {
            socket,
            rx: RecvBatch::new(),
            tx: SendBatch::new(),
            tx_gso: GsoSendBatch::new(),
            metas: vec![RecvMeta::default(); io::MAX_BATCH],
            buffers: RxBuffers::new(),
            good: Vec::with_capacity(io::MAX_BATCH),
            truncated: 0,
            send_failed: 0,
        }
    }

    /// Datagrams longer than a buffer, dropped before the graph saw them.
    pub fn truncated(&self) -> u64 {
        self.truncated
    }

    /// Datagrams the kernel refused or the full socket buffer turned away.
    pub fn send_failed(&self) -> u64 {
        self.send_failed
    }

    /// Reads one batch of datagrams into the graph (not run), each with its
    /// sender's address; how many were read, or `None` when the arena has no buffer
    /// to spare (the datagrams wait in the socket).
    pub fn receive(&mut self, wg: &mut WgGraph) -> Option<usize> {
        let arena = wg.context_mut().arena_mut();
        if self.buffers.take(arena, io::MAX_BATCH, HOST_RESERVE) == 0 {
            return None;
        }
        let (socket, rx, metas) = (&self.socket, &mut self.rx, &mut self.metas);
        let Ok(datagrams) = self
            .buffers
            .read(arena, udp_rx_starts(arena.buffer_size()), |bufs| {
                Ok::<_, std::convert::Infallible>(
                    socket.recv_batch_with(rx, bufs, metas).unwrap_or(0),
                )
            });
        self.good.clear();
        for (&h, m) in datagrams.iter().zip(&self.metas) {
            if m.truncated {
                // No WireGuard message is this long; the graph never sees it.
                self.truncated += 1;
                arena.free(h);
                continue;
            }
            let meta = arena.meta_mut(h);
            meta.len = m.len as u16;
            meta.addr = m.src;
            self.good.push(h);
        }
        wg.from_udp(&self.good);
        Some(datagrams.len())
    }

    /// Sends what the graph queued: control messages one by one, datagrams in
    /// batches of up to a frame. The slices for a batch live on the stack, so
    /// sending allocates nothing.
    pub fn transmit(&mut self, wg: &mut WgGraph) {
        let cx = wg.context_mut();
        let socket = &self.socket;
        let failed = &mut self.send_failed;
        cx.send_control(|to, msg| {
            if socket.send_to(msg, to).is_err() {
                *failed += 1;
            }
        });
        let (gso, tx) = (&mut self.tx_gso, &mut self.tx);
        cx.send_output(UDP_OUT, |arena, queue| {
            let mut pkts: [(&[u8], SocketAddr); FRAME_LEN] = [(&[], NO_ADDR); FRAME_LEN];
            for chunk in queue.chunks(FRAME_LEN) {
                for (p, &h) in pkts.iter_mut().zip(chunk) {
                    *p = (arena.data(h), arena.meta(h).addr);
                }
                let res = socket.send_gso_batch_with(gso, tx, &pkts[..chunk.len()]);
                *failed += res.failed as u64;
            }
        });
    }
}
