//! The shape every crypto node shares, written once: per packet, a stage prepares
//! one AEAD op (or stages or drops the packet); the frame's ops run as one batch on
//! the synchronous engine, or go to an asynchronous one with their packets parked;
//! then the stage finishes each packet. The post node finishes parked packets when
//! their frame is back, with the same function, so both paths end alike.
//!
//! A stage (wg-encrypt, wg-decrypt, esp-encrypt, esp-decrypt) is a type with two functions and its
//! node descriptions; [`AeadNode`] and [`PostNode`] are the nodes made of it.

use crate::arena::Handle;
use crate::context::Context;
use crate::counters::{ErrorSlot, NodeCounters};
use crate::graph::{FREE, Node, NodeInfo};
use crate::inflight::{Resume, park_frame};
use crypto::{AeadOp, OpStatus};
use std::marker::PhantomData;

pub trait AeadStage: Send + 'static {
    /// The node that prepares and runs the ops.
    const INFO: NodeInfo;
    /// The node that finishes packets back from an asynchronous engine.
    const POST_INFO: NodeInfo;
    /// Whether the stage's frames may go to an asynchronous engine. Those are
    /// resumed by ChaCha20-Poly1305's engine alone (see `inflight`); a stage whose
    /// ops may be of any algorithm runs every frame on the synchronous path.
    const PARKS: bool = true;
    /// Counted at the post node for a packet no returned frame holds (a wiring bug).
    fn not_parked() -> ErrorSlot;
    /// The op for packet `h` and how to finish it; `None` when the packet was
    /// dropped (counted) or set aside (its `next` set to KEEP).
    fn prepare(
        cx: &mut Context,
        h: Handle,
        next: &mut u16,
        c: &mut NodeCounters,
    ) -> Option<(AeadOp, Resume)>;
    /// After the op: the packet's next edge, or FREE after counting why.
    fn finish(
        cx: &mut Context,
        h: Handle,
        status: OpStatus,
        resume: Resume,
        c: &mut NodeCounters,
    ) -> u16;
    /// After a frame: what the stage tallied per frame goes where it is kept.
    fn end_frame(_cx: &mut Context) {}
}

/// A crypto node: one batch of ops per frame.
pub struct AeadNode<S> {
    ops: Vec<AeadOp>,
    /// Per op: the packet's place in the frame and how to finish it.
    pending: Vec<(usize, Resume)>,
    stage: PhantomData<S>,
}

impl<S> Default for AeadNode<S> {
    fn default() -> Self {
        AeadNode {
            ops: Vec::new(),
            pending: Vec::new(),
            stage: PhantomData,
        }
    }
}

impl<S: AeadStage> Node<Context> for AeadNode<S> {
    fn info(&self) -> &NodeInfo {
        &S::INFO
    }

    fn process(
        &mut self,
        cx: &mut Context,
        packets: &[Handle],
        next: &mut [u16],
        c: &mut NodeCounters,
    ) {
        self.run_frame(cx, packets, next, c);
        S::end_frame(cx);
    }
}

impl<S: AeadStage> AeadNode<S> {
    fn run_frame(
        &mut self,
        cx: &mut Context,
        packets: &[Handle],
        next: &mut [u16],
        c: &mut NodeCounters,
    ) {
        self.ops.clear();
        self.pending.clear();
        for (i, &h) in packets.iter().enumerate() {
            if let Some((op, resume)) = S::prepare(cx, h, &mut next[i], c) {
                self.ops.push(op);
                self.pending.push((i, resume));
            }
        }
        if self.ops.is_empty() {
            return;
        }
        let parked = self.pending.iter().map(|&(i, r)| (i, packets[i], r));
        if S::PARKS && park_frame(cx, &mut self.ops, parked, next) {
            return;
        }
        cx.run_ops(&mut self.ops);
        for (op, &(i, resume)) in self.ops.iter().zip(&self.pending) {
            next[i] = S::finish(cx, packets[i], op.status, resume, c);
        }
    }
}

/// A post node: finishes packets whose frame an asynchronous engine processed,
/// fetching each one's op status and record (see `inflight`).
pub struct PostNode<S>(PhantomData<S>);

impl<S> Default for PostNode<S> {
    fn default() -> Self {
        PostNode(PhantomData)
    }
}

impl<S: AeadStage> Node<Context> for PostNode<S> {
    fn info(&self) -> &NodeInfo {
        &S::POST_INFO
    }

    fn process(
        &mut self,
        cx: &mut Context,
        packets: &[Handle],
        next: &mut [u16],
        c: &mut NodeCounters,
    ) {
        for (i, &h) in packets.iter().enumerate() {
            next[i] = match cx.inflight.take(h) {
                Some((status, resume)) => S::finish(cx, h, status, resume, c),
                None => {
                    c.drop(S::not_parked());
                    FREE
                }
            };
        }
        S::end_frame(cx);
    }
}
