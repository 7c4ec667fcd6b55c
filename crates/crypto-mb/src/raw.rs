//! ChaCha20 and Poly1305 alone, on a chosen path: the known-answer tests run the
//! RFC 8439 vectors for the primitives through every kernel with these. The engine
//! itself only ever runs the AEAD.

use crate::dispatch::{Kernels, Path};
use crate::field::{self, Limbs};
use crate::lanes::{ChachaLanes, PolyLanes, Row};
use crate::{block_path, scalar};

/// How a vector path feeds its lanes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// The stream in one lane, the others idle (the lane-parallel path's kernels).
    OneLane,
    /// Consecutive blocks across all lanes (the block-parallel path).
    AcrossLanes,
}

fn kernels(path: Path) -> Option<Kernels> {
    assert!(path.available(), "this CPU cannot run the {path} path");
    Kernels::for_path(path)
}

/// XORs the ChaCha20 keystream (section 2.4) from block `counter` on into `data`.
pub fn chacha20(
    path: Path,
    layout: Layout,
    key: &[u8; 32],
    nonce: &[u8; 12],
    counter: u32,
    data: &mut [u8],
) {
    let Some(k) = kernels(path) else {
        return scalar::chacha20(key, nonce, counter, data);
    };
    let nonce = scalar::nonce_words(nonce);
    let row = Row::new(&scalar::key_words(key));
    let (p, len) = (data.as_mut_ptr(), data.len());
    match layout {
        Layout::AcrossLanes => {
            // SAFETY: `k` is for this CPU (checked); `p` is valid for `len` bytes.
            unsafe { block_path::chacha_run(&k, &row, &nonce, counter, p, len) }
        }
        Layout::OneLane => {
            let mut idle = [0u8; 64];
            let mut st = ChachaLanes::idle(idle.as_mut_ptr(), 64, 1);
            st.load(0, &row, &nonce, counter, p, len);
            // SAFETY: as above; lane 0's `rem` counts bytes of `data` from `ptr`.
            unsafe { (k.chacha)(&mut st, len.div_ceil(64)) };
        }
    }
}

/// Poly1305 of any message (section 2.5): whole blocks through the path's kernels,
/// a short last block in scalar code.
pub fn poly1305(path: Path, layout: Layout, key: &[u8; 32], msg: &[u8]) -> [u8; 16] {
    let Some(k) = kernels(path) else {
        return field::poly1305(key, msg);
    };
    let r = Limbs::clamped_r(key[..16].try_into().expect("16 bytes"));
    let blocks = msg.len() / 16;
    let mut h = Limbs::ZERO;
    if blocks > 0 {
        h = match layout {
            Layout::AcrossLanes => {
                let pw = block_path::powers(r, k.lanes);
                // SAFETY: `k` is for this CPU; `msg` holds `blocks` whole blocks.
                unsafe { block_path::horner(&k, h, msg.as_ptr(), blocks, &pw) }
            }
            Layout::OneLane => {
                let mut st = PolyLanes::idle(k.radix);
                st.set_r(0, r);
                st.set_hibit(0, true);
                st.ptr[0] = msg.as_ptr();
                st.stride[0] = 16;
                // SAFETY: as above; lane 0 reads `blocks` consecutive blocks of `msg`.
                unsafe { (k.poly)(&mut st, blocks) };
                st.get_h(0)
            }
        };
    }
    let rest = &msg[blocks * 16..];
    if !rest.is_empty() {
        let mut b = [0u8; 16];
        b[..rest.len()].copy_from_slice(rest);
        b[rest.len()] = 1;
        h = h.add(Limbs::block(&b, false)).mul(r);
    }
    h.tag(key[16..].try_into().expect("16 bytes"))
}
