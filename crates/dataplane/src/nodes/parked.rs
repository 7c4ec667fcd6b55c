//! A crypto node's frame at an asynchronous engine: handed over with its packets
//! parked in the worker's in-flight table, and every frame waited for and its
//! packets handed to their post nodes before the graph's run ends.

use crate::arena::Handle;
use crate::context::Context;
use crate::graph::KEEP;
use crate::resume::Resume;
use crypto::{AeadOp, Algorithm};

/// Hands a frame's ops to the asynchronous engine serving ChaCha20-Poly1305, if the
/// chosen engine is one: the packets (index in the frame, handle, how to resume) are
/// parked and their next edge is KEEP. Returns false, touching nothing, when the
/// engine is synchronous and the caller runs the ops itself.
pub(crate) fn park_frame(
    cx: &mut Context,
    ops: &[AeadOp],
    packets: impl Iterator<Item = (usize, Handle, Resume)>,
    next: &mut [u16],
) -> bool {
    let Some(engine) = cx.engines.async_for(Algorithm::ChaCha20Poly1305) else {
        return false;
    };
    let (mem, len) = cx.arena.lend();
    // Cleared here whatever the engine hands out: no op of an earlier frame rides
    // along.
    let mut frame = engine.frame();
    frame.clear();
    frame.extend_from_slice(ops);
    // SAFETY: every op covers its own packet's buffer; those packets are parked
    // (KEEP) and touched by no one until the frame returns, and the graph's run waits
    // for every frame before it returns, so the arena outlives them all.
    #[allow(unsafe_code)]
    let seq = unsafe { engine.submit(mem, len, frame) };
    cx.inflight.park(
        seq,
        packets.map(|(i, h, resume)| {
            next[i] = KEEP;
            (h, resume)
        }),
    );
    true
}

/// Waits for every frame out at the asynchronous engine and hands each packet to
/// `deliver`, for its post node. Frames come back in the order they left, so per-peer
/// packet order holds. Returns whether there was any.
pub(crate) fn resume_all(cx: &mut Context, mut deliver: impl FnMut(Handle, &Resume)) -> bool {
    if cx.inflight.is_empty() {
        return false;
    }
    let Some(engine) = cx.engines.async_for(Algorithm::ChaCha20Poly1305) else {
        // The engine is gone or changed: nobody holds the buffers any more.
        cx.inflight.abandon_all(&mut deliver);
        cx.arena.all_returned();
        return true;
    };
    while !cx.inflight.is_empty() {
        match engine.wait() {
            Some((seq, ops)) => {
                cx.arena.returned();
                cx.inflight.returned(seq, &ops, &mut deliver);
                engine.recycle(ops);
            }
            None => {
                // Nothing is in flight, so no one holds the buffers any more.
                cx.inflight.abandon_all(&mut deliver);
                cx.arena.all_returned();
            }
        }
    }
    true
}
