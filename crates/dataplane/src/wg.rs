//! The WireGuard graph: its context (arena, protocol device, engines, output queues)
//! and the glue that turns the device's actions into packets.
//!
//! ```text
//!   udp rx ─▶ wg-input ─▶ wg-decrypt ─▶ tun-output ─▶ (TUN)
//!                │ handshakes: consumed by the device, replies queued
//!   tun rx ─▶ wg-encrypt ─▶ udp-output ─▶ (UDP socket)
//! ```
//!
//! With an asynchronous engine, `wg-decrypt` and `wg-encrypt` hand each frame over
//! and park its packets; when the frame is back (in order), `wg-decrypt-post` and
//! `wg-encrypt-post` finish them exactly as the synchronous path does.

use crate::arena::{Arena, FRAME_SIZE, HEADROOM, Handle, TAILROOM};
use crate::graph::{Graph, HasArena, NodeId};
use crate::nodes::{Output, WgDecrypt, WgDecryptPost, WgEncrypt, WgEncryptPost, WgInput};
use crypto::EngineSet;
use crypto::{Algorithm, OpStatus};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Instant;
use wireguard::{Action, Device, DropReason, PeerId, RecvTicket};

/// The largest inner MTU this data path carries both ways: a received datagram
/// (transport header, the inner packet padded to at most the MTU, the tag) must fit
/// the part of a buffer a receive may fill (all but headroom and tail room). An
/// interface asking for more is refused.
pub const MAX_MTU: usize =
    FRAME_SIZE - HEADROOM - TAILROOM - wire::wireguard::TRANSPORT_HEADER_LEN - crypto::TAG_LEN;

/// What a post node needs to finish one packet after an asynchronous engine.
#[derive(Clone, Copy, Debug)]
pub enum Resume {
    Encrypt { peer: PeerId, inner_len: usize },
    Decrypt { ticket: RecvTicket, counter: u64 },
}

/// A frame handed to an asynchronous engine: its packets, in op order.
pub struct Parked {
    pub seq: u64,
    pub packets: Vec<Handle>,
    pub resume: Vec<Resume>,
}

/// Hands a frame's ops to the asynchronous engine serving ChaCha20-Poly1305, if the
/// chosen engine is one: the packets (index in the frame, handle, how to resume) are
/// parked and their next edge is KEEP. Returns false, touching nothing, when the
/// engine is synchronous and the caller runs the ops itself.
pub(crate) fn park_frame(
    cx: &mut WgContext,
    ops: &mut Vec<crypto::AeadOp>,
    packets: impl Iterator<Item = (usize, Handle, Resume)>,
    next: &mut [u16],
) -> bool {
    let Some(engine) = cx.engines.async_for(Algorithm::ChaCha20Poly1305) else {
        return false;
    };
    let (mem, len) = cx.arena.lend();
    // SAFETY: every op covers its own packet's buffer; those packets are parked
    // (KEEP) and touched by no one until the frame returns, and WgGraph::run waits
    // for every frame before it returns, so the arena outlives them all.
    #[allow(unsafe_code)]
    let seq = unsafe { engine.submit(mem, len, std::mem::take(ops)) };
    let mut parked = Parked::new(seq);
    for (i, h, resume) in packets {
        parked.packets.push(h);
        parked.resume.push(resume);
        next[i] = crate::graph::KEEP;
    }
    cx.parked.push_back(parked);
    true
}

impl Parked {
    pub fn new(seq: u64) -> Parked {
        Parked {
            seq,
            packets: Vec::new(),
            resume: Vec::new(),
        }
    }
}

pub struct WgContext {
    pub arena: Arena,
    pub device: Device,
    pub engines: EngineSet,
    /// The time of the batch being processed.
    pub now: Instant,
    /// The inner interface's MTU, which bounds the padding (0: not known).
    pub mtu: usize,
    /// Encrypted datagrams to send; each buffer's meta.addr is its destination.
    pub tx_udp: Vec<Handle>,
    /// Decrypted inner packets for the TUN.
    pub tx_tun: Vec<Handle>,
    /// Handshake messages and cookie replies to send.
    pub tx_control: Vec<(SocketAddr, Vec<u8>)>,
    /// Packets dropped outside any node (pool empty while re-injecting staged packets).
    pub glue_drops: [u64; DropReason::COUNT],
    /// Frames out at an asynchronous engine, oldest first.
    pub parked: VecDeque<Parked>,
    /// Packets back from it, for the post nodes, in order.
    pub resumed_encrypt: VecDeque<(Handle, OpStatus, Resume)>,
    pub resumed_decrypt: VecDeque<(Handle, OpStatus, Resume)>,
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
    encrypt_post: NodeId,
    decrypt_post: NodeId,
}

impl WgGraph {
    pub fn new(arena: Arena, device: Device, engines: EngineSet, now: Instant) -> WgGraph {
        let graph: Graph<WgContext> = Graph::new(vec![
            Box::new(WgInput),
            Box::new(WgDecrypt::default()),
            Box::new(WgDecryptPost),
            Box::new(Output::tun()),
            Box::new(WgEncrypt::default()),
            Box::new(WgEncryptPost),
            Box::new(Output::udp()),
        ]);
        let input = graph.id(WgInput::NAME).expect("built above");
        let encrypt = graph.id(WgEncrypt::NAME).expect("built above");
        let encrypt_post = graph.id(WgEncryptPost::NAME).expect("built above");
        let decrypt_post = graph.id(WgDecryptPost::NAME).expect("built above");
        WgGraph {
            graph,
            cx: WgContext {
                arena,
                device,
                engines,
                now,
                mtu: 0,
                tx_udp: Vec::new(),
                tx_tun: Vec::new(),
                tx_control: Vec::new(),
                glue_drops: [0; DropReason::COUNT],
                parked: VecDeque::new(),
                resumed_encrypt: VecDeque::new(),
                resumed_decrypt: VecDeque::new(),
            },
            input,
            encrypt,
            encrypt_post,
            decrypt_post,
        }
    }

    /// The inner interface's MTU: no encrypted packet is padded past it. At most
    /// [`MAX_MTU`]; larger values are clamped (the caller refuses them first).
    pub fn set_mtu(&mut self, mtu: usize) {
        self.cx.mtu = mtu.min(MAX_MTU);
    }

    /// Datagrams from the UDP socket (meta.addr = source).
    pub fn from_udp(&mut self, packets: &[Handle]) {
        self.graph.enqueue(self.input, packets);
    }

    /// Inner IP packets from the TUN.
    pub fn from_tun(&mut self, packets: &[Handle]) {
        self.graph.enqueue(self.encrypt, packets);
    }

    /// Waits for every frame out at an asynchronous engine and queues its packets for
    /// the post nodes. Frames come back in the order they left, so per-peer packet
    /// order holds. Returns whether there was any.
    fn resume_parked(&mut self) -> bool {
        let cx = &mut self.cx;
        if cx.parked.is_empty() {
            return false;
        }
        let Some(engine) = cx.engines.async_for(Algorithm::ChaCha20Poly1305) else {
            unreachable!("frames are parked only with an asynchronous engine");
        };
        while let Some(parked) = cx.parked.pop_front() {
            let (seq, ops) = engine.wait().expect("a parked frame is in flight");
            assert_eq!(
                seq, parked.seq,
                "an asynchronous engine must return frames in order"
            );
            cx.arena.returned();
            for ((&h, resume), op) in parked.packets.iter().zip(parked.resume).zip(&ops) {
                let (queue, post) = match resume {
                    Resume::Encrypt { .. } => (&mut cx.resumed_encrypt, self.encrypt_post),
                    Resume::Decrypt { .. } => (&mut cx.resumed_decrypt, self.decrypt_post),
                };
                queue.push_back((h, op.status, resume));
                self.graph.enqueue(post, &[h]);
            }
        }
        true
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
            let mut more = self.resume_parked();
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
