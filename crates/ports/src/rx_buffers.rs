//! The buffers of one batch a copying driver (AF_PACKET, TUN, UDP) reads into:
//! taken from the arena before the read, the ones the read filled handed on, the
//! rest given back at once.

use dataplane::{Arena, Handle, RxStarts};

pub(crate) struct RxBuffers {
    handles: Vec<Handle>,
}

impl RxBuffers {
    pub(crate) fn new() -> RxBuffers {
        RxBuffers {
            handles: Vec::with_capacity(crate::RX_BATCH),
        }
    }

    /// Takes up to `want` free buffers (at most a frame of the graph), leaving at
    /// least `reserve` in the arena; how many it got.
    pub(crate) fn take(&mut self, arena: &mut Arena, want: usize, reserve: usize) -> usize {
        self.handles.clear();
        let want = want
            .min(crate::RX_BATCH)
            .min(arena.available().saturating_sub(reserve));
        for _ in 0..want {
            match arena.alloc() {
                Some(h) => self.handles.push(h),
                None => break,
            }
        }
        self.handles.len()
    }

    /// Lends the buffers taken to `read`, each from its start in `starts`; `read`
    /// returns how many it filled, in order. Those are returned (their lengths are
    /// the caller's to set); the others go back to the arena, all of them when
    /// `read` fails.
    pub(crate) fn read<E>(
        &mut self,
        arena: &mut Arena,
        starts: RxStarts,
        read: impl FnOnce(&mut [&mut [u8]]) -> Result<usize, E>,
    ) -> Result<&[Handle], E> {
        let result = arena.with_rx_slices(&self.handles, starts, read);
        let n = match &result {
            Ok(n) => (*n).min(self.handles.len()),
            Err(_) => 0,
        };
        for &h in &self.handles[n..] {
            arena.free(h);
        }
        self.handles.truncate(n);
        result.map(|_| &self.handles[..])
    }
}

/// Buffers host mode's ports leave in the arena when they read, so that the
/// packets the graph makes from what they read (decrypted, staged for a
/// handshake) always find one.
pub(crate) const HOST_RESERVE: usize = 64;
