//! The shape every crypto node shares, written once: per packet, a stage prepares
//! one AEAD op (or stages or drops the packet); the frame's ops run as one batch on
//! the synchronous engine, or go to an asynchronous one with their packets parked;
//! then the stage finishes the frame's packets (one at a time, unless it has work to
//! do once per frame). The post node finishes parked packets when their frame is
//! back, with the same functions, so both paths end alike.
//!
//! A stage (wg-encrypt, wg-decrypt, esp-encrypt, esp-decrypt) is a type with two
//! functions, its own record for finishing a packet, and its node descriptions;
//! [`AeadNode`] and [`PostNode`] are the nodes made of it. A stage says why a
//! packet goes no further ([`Skip`]); the nodes count it, in one place.

use crate::arena::Handle;
use crate::context::Context;
use crate::counters::{ErrorSlot, NodeCounters};
use crate::graph::{FRAME_LEN, FREE, KEEP, Node, NodeInfo};
use crate::nodes::parked::park_frame;
use crate::resume::Resume;
use crypto::{AeadOp, OpStatus};

/// What a stage's two nodes declare: their names, the nodes after them and their
/// drop reasons. Written by `aead_stage!` for every stage.
pub trait AeadStageNodes {
    /// The node that prepares and runs the ops.
    const INFO: NodeInfo;
    /// The node that finishes packets back from an asynchronous engine.
    const POST_INFO: NodeInfo;
    /// Counted at the post node for a packet no returned frame holds, or one
    /// whose record is another stage's (a wiring bug).
    fn not_parked() -> ErrorSlot;
}

/// Declares a stage's nodes, once for every stage: the stage's name and its post
/// node's, the constructors of both nodes, and their [`AeadStageNodes`], from the
/// next nodes of the stage's edges and its `node_errors!` enum (which has a
/// `NotParked` reason).
macro_rules! aead_stage {
    ($stage:ident, name: $name:literal, post: $post:literal, next: [$($next:expr),*], errors: $errors:ident) => {
        impl $stage {
            pub const NAME: &'static str = $name;
            /// The post node's name.
            pub const POST: &'static str = $post;

            /// The node that prepares and runs the ops.
            pub fn node() -> $crate::nodes::AeadNode<$stage> {
                $crate::nodes::AeadNode::default()
            }

            /// The node that finishes frames an asynchronous engine ran.
            pub fn post() -> $crate::nodes::PostNode<$stage> {
                $crate::nodes::PostNode::default()
            }
        }

        impl $crate::nodes::aead::AeadStageNodes for $stage {
            const INFO: $crate::graph::NodeInfo = $crate::graph::NodeInfo {
                name: $name,
                next: &[$($next),*],
                errors: $errors::TABLE,
            };
            const POST_INFO: $crate::graph::NodeInfo = $crate::graph::NodeInfo {
                name: $post,
                ..Self::INFO
            };

            fn not_parked() -> $crate::counters::ErrorSlot {
                $errors::NotParked.into()
            }
        }
    };
}

pub trait AeadStage: AeadStageNodes + Send + 'static {
    /// Why the stage drops a packet: its `node_errors!` enum.
    type Error: Into<ErrorSlot>;
    /// What the stage needs to finish a packet after its op: its own record
    /// (see `resume`), kept beside the op or, for a parked frame, in the worker's
    /// in-flight table.
    type Resume: Copy + Send + Into<Resume> + TryFrom<Resume>;
    /// What the stage keeps between frames for `finish_frame` (its node owns it).
    type Scratch: Default + Send + 'static;
    /// What the stage remembers from one packet to the next while it prepares a
    /// frame (a session found for the frame's first packet on it); made fresh for
    /// every frame and dropped once its packets are prepared, so nothing it holds
    /// outlives the preparation.
    type Memo: Default;
    /// Whether the stage's frames may go to an asynchronous engine. Those are
    /// resumed by ChaCha20-Poly1305's engine alone (see `inflight`); a stage whose
    /// ops may be of any algorithm runs every frame on the synchronous path.
    const PARKS: bool = true;
    /// The op for packet `h` and how to finish it, or why it has none.
    fn prepare(
        cx: &mut Context,
        memo: &mut Self::Memo,
        h: Handle,
    ) -> Result<(AeadOp, Self::Resume), Skip<Self::Error>>;
    /// After the op: the packet's next edge, or why it has none.
    fn finish(
        cx: &mut Context,
        h: Handle,
        status: OpStatus,
        resume: Self::Resume,
    ) -> Result<u16, Skip<Self::Error>>;
    /// After the ops of a frame: each finished packet's next edge. One packet at a
    /// time ([`AeadStage::finish`]) unless the stage has work it does once for the
    /// frame (wg-decrypt commits its counters in batches).
    fn finish_frame(
        cx: &mut Context,
        _scratch: &mut Self::Scratch,
        packets: &[Handle],
        done: &[Done<Self::Resume>],
        next: &mut [u16],
        c: &mut NodeCounters,
    ) {
        for d in done {
            next[d.index] = settle(Self::finish(cx, packets[d.index], d.status, d.resume), c);
        }
    }
    /// After a frame: what the stage tallied per frame goes where it is kept.
    fn end_frame(_cx: &mut Context) {}
}

/// Why a stage gives a packet no op, or no next edge after it.
#[derive(Clone, Copy, Debug)]
pub enum Skip<E> {
    /// Dropped for this reason, which the node counts; the graph frees it.
    Drop(E),
    /// Done with here and counted as consumed: handed to another worker, or a
    /// message that ends at this node (a dummy packet). The graph frees it.
    Consumed,
    /// Set aside in its own buffer (staged until a session is ready): the node's
    /// next edge for it is KEEP, and nothing is counted.
    Kept,
    /// Set aside as `Kept`, in the place of an older packet set aside before,
    /// which the stage freed: dropped for this reason, which the node counts.
    Replaced(E),
}

impl<E> Skip<E> {
    /// Dropped for `reason`, given in any form the stage's reasons take in (the
    /// protocol crate's own reasons, for the WireGuard stages).
    pub fn drop(reason: impl Into<E>) -> Skip<E> {
        Skip::Drop(reason.into())
    }
}

impl<E> From<E> for Skip<E> {
    fn from(reason: E) -> Skip<E> {
        Skip::Drop(reason)
    }
}

/// A stage's verdict on one packet, counted: its next edge.
#[inline(always)]
pub fn settle<E: Into<ErrorSlot>>(verdict: Result<u16, Skip<E>>, c: &mut NodeCounters) -> u16 {
    match verdict {
        Ok(next) => next,
        Err(Skip::Drop(reason)) => {
            c.drop(reason);
            FREE
        }
        Err(Skip::Consumed) => {
            c.consumed += 1;
            FREE
        }
        Err(Skip::Kept) => KEEP,
        Err(Skip::Replaced(older)) => {
            c.drop(older);
            KEEP
        }
    }
}

/// A packet whose op ran: its place in the frame, the op's status, and how to
/// finish it.
#[derive(Clone, Copy)]
pub struct Done<R> {
    pub index: usize,
    pub status: OpStatus,
    pub resume: R,
}

/// A crypto node: one batch of ops per frame.
pub struct AeadNode<S: AeadStage> {
    /// A frame's ops, written from the front into slots kept for a whole frame:
    /// making an op is a store, not a push that reloads and stores the length.
    ops: Vec<AeadOp>,
    /// Per op: the packet's place in the frame and how to finish it, written when
    /// the op is made; the op's status is copied in once the batch has run, so a
    /// frame's records are built once and not copied again. Slots, as `ops`, made
    /// by the first record of the first frame that needs them (a stage's record
    /// has no empty value to make them with earlier), so making a record costs a
    /// compare with their number besides the store.
    done: Vec<Done<S::Resume>>,
    scratch: S::Scratch,
}

/// What an unused slot holds.
const NO_OP: AeadOp = AeadOp::in_place(
    crypto::Algorithm::ChaCha20Poly1305,
    crypto::KeyHandle::INVALID,
    crypto::Direction::Encrypt,
    [0; crypto::aead::NONCE_LEN],
    crypto::Span::EMPTY,
    crypto::Span::EMPTY,
);

impl<S: AeadStage> Default for AeadNode<S> {
    fn default() -> Self {
        AeadNode {
            ops: vec![NO_OP; FRAME_LEN],
            done: Vec::with_capacity(FRAME_LEN),
            scratch: S::Scratch::default(),
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
        if self.ops.len() < packets.len() {
            // Frames are at most FRAME_LEN packets; a longer one still finds slots.
            self.ops.resize(packets.len(), NO_OP);
        }
        let mut n = 0;
        let mut memo = S::Memo::default();
        for (index, &h) in packets.iter().enumerate() {
            match S::prepare(cx, &mut memo, h) {
                Ok((op, resume)) => {
                    self.ops[n] = op;
                    let d = Done {
                        index,
                        status: op.status,
                        resume,
                    };
                    if self.done.len() < packets.len() {
                        // The first record made fills the slots, once.
                        self.done.resize(packets.len().max(FRAME_LEN), d);
                    }
                    self.done[n] = d;
                    n += 1;
                }
                Err(skip) => next[index] = settle(Err(skip), c),
            }
        }
        // What the memo holds (a session the frame's own commits may retire) is let
        // go before the ops run and the packets are finished.
        drop(memo);
        if n == 0 {
            return;
        }
        let (ops, done) = (&mut self.ops[..n], &mut self.done[..n]);
        let parked = done
            .iter()
            .map(|d| (d.index, packets[d.index], d.resume.into()));
        if S::PARKS && park_frame(cx, ops, parked, next) {
            return;
        }
        cx.run_ops(ops);
        for (d, op) in done.iter_mut().zip(ops.iter()) {
            d.status = op.status;
        }
        S::finish_frame(cx, &mut self.scratch, packets, done, next, c);
    }
}

/// A post node: finishes packets whose frame an asynchronous engine processed,
/// fetching each one's op status and record (see `inflight`).
pub struct PostNode<S: AeadStage> {
    done: Vec<Done<S::Resume>>,
    scratch: S::Scratch,
}

impl<S: AeadStage> Default for PostNode<S> {
    fn default() -> Self {
        PostNode {
            done: Vec::new(),
            scratch: S::Scratch::default(),
        }
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
        self.done.clear();
        for (index, &h) in packets.iter().enumerate() {
            let taken = cx.inflight.take(h);
            match taken.and_then(|(status, r)| Some((status, S::Resume::try_from(r).ok()?))) {
                Some((status, resume)) => self.done.push(Done {
                    index,
                    status,
                    resume,
                }),
                // No returned frame holds it, or another stage's does (a bug).
                None => {
                    c.drop(S::not_parked());
                    next[index] = FREE;
                }
            }
        }
        S::finish_frame(cx, &mut self.scratch, packets, &self.done, next, c);
        S::end_frame(cx);
    }
}
