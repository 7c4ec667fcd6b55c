//! The WireGuard graph: its context (arena, protocol device, engines, output queues)
//! and the glue that turns the device's actions into packets.
//!
//! ```text
//!   udp rx ─▶ wg-input ─▶ wg-decrypt ─▶ tun-output ─▶ (TUN)
//!                │ handshakes: consumed by the device, replies queued
//!   tun rx ─▶ wg-encrypt ─▶ udp-output ─▶ (UDP socket)
//! ```

use crate::arena::{Arena, Handle};
use crate::graph::{Graph, HasArena, NodeId};
use crate::nodes::{Output, WgDecrypt, WgEncrypt, WgInput};
use crypto::EngineSet;
use std::net::SocketAddr;
use std::time::Instant;
use wireguard::{Action, Device, DropReason};

pub struct WgContext {
    pub arena: Arena,
    pub device: Device,
    pub engines: EngineSet,
    /// The time of the batch being processed.
    pub now: Instant,
    /// Encrypted datagrams to send; each buffer's meta.addr is its destination.
    pub tx_udp: Vec<Handle>,
    /// Decrypted inner packets for the TUN.
    pub tx_tun: Vec<Handle>,
    /// Handshake messages and cookie replies to send.
    pub tx_control: Vec<(SocketAddr, Vec<u8>)>,
    /// Packets dropped outside any node (pool empty while re-injecting staged packets).
    pub glue_drops: [u64; DropReason::COUNT],
}

impl HasArena for WgContext {
    fn arena(&mut self) -> &mut Arena {
        &mut self.arena
    }
}

pub struct WgGraph {
    pub graph: Graph<WgContext>,
    pub cx: WgContext,
    input: NodeId,
    encrypt: NodeId,
}

impl WgGraph {
    pub fn new(arena: Arena, device: Device, engines: EngineSet, now: Instant) -> WgGraph {
        let graph: Graph<WgContext> = Graph::new(vec![
            Box::new(WgInput),
            Box::new(WgDecrypt::default()),
            Box::new(Output::tun()),
            Box::new(WgEncrypt::default()),
            Box::new(Output::udp()),
        ]);
        let input = graph.id(WgInput::NAME).expect("built above");
        let encrypt = graph.id(WgEncrypt::NAME).expect("built above");
        WgGraph {
            graph,
            cx: WgContext {
                arena,
                device,
                engines,
                now,
                tx_udp: Vec::new(),
                tx_tun: Vec::new(),
                tx_control: Vec::new(),
                glue_drops: [0; DropReason::COUNT],
            },
            input,
            encrypt,
        }
    }

    /// Datagrams from the UDP socket (meta.addr = source).
    pub fn from_udp(&mut self, packets: &[Handle]) {
        self.graph.enqueue(self.input, packets);
    }

    /// Inner IP packets from the TUN.
    pub fn from_tun(&mut self, packets: &[Handle]) {
        self.graph.enqueue(self.encrypt, packets);
    }

    /// Runs the timers due at `now`.
    pub fn tick(&mut self, now: Instant) {
        self.cx.now = now;
        self.cx.device.tick(now);
    }

    /// Runs the graph and then the device's actions until nothing is left: staged
    /// packets of a peer whose session is ready go through `wg-encrypt`; handshake
    /// messages land in `tx_control`.
    pub fn run(&mut self, now: Instant) {
        self.cx.now = now;
        loop {
            self.graph.run(&mut self.cx);
            let mut more = false;
            while let Some(action) = self.cx.device.poll_action() {
                match action {
                    Action::Send { to, packet } => self.cx.tx_control.push((to, packet)),
                    Action::Flush(peer) => {
                        for packet in self.cx.device.take_staged(peer) {
                            match self.cx.arena.alloc_with(&packet) {
                                Some(h) => {
                                    self.cx.arena.meta_mut(h).peer = peer.0;
                                    self.graph.enqueue(self.encrypt, &[h]);
                                    more = true;
                                }
                                None => self.cx.glue_drops[DropReason::NoBuffer.index()] += 1,
                            }
                        }
                    }
                }
            }
            if !more {
                return;
            }
        }
    }
}
