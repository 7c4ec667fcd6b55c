//! Lays ops out in one growing block of memory the way the engine API addresses them
//! (aad, input, output when out of place, tag, one op after another): what tests,
//! conformance checks and fuzz targets build their batches with, whatever chooses
//! the sizes and contents.

use crate::aead::{AeadOp, Algorithm, Direction, OpStatus, Span, TAG_LEN};
use crate::key::KeyHandle;

/// One op's shape: which key, how much aad and text, and where the output goes.
#[derive(Clone, Copy, Debug)]
pub struct OpShape {
    pub alg: Algorithm,
    pub key: KeyHandle,
    pub nonce: [u8; 12],
    pub aad_len: usize,
    pub len: usize,
    pub in_place: bool,
}

/// Memory and the ops that address it.
#[derive(Clone, Debug, Default)]
pub struct OpLayout {
    pub mem: Vec<u8>,
    pub ops: Vec<AeadOp>,
}

impl OpLayout {
    pub fn new() -> OpLayout {
        OpLayout::default()
    }

    /// Appends `len` zero bytes and returns their span.
    pub fn grow(&mut self, len: usize) -> Span {
        let s = Span::new(self.mem.len() as u32, len as u32);
        self.mem.resize(self.mem.len() + len, 0);
        s
    }

    /// Lays out one encryption op of `shape` after the others.
    pub fn push(&mut self, shape: OpShape) -> &mut AeadOp {
        let aad = self.grow(shape.aad_len);
        let src = self.grow(shape.len).offset;
        let dst = if shape.in_place {
            src
        } else {
            self.grow(shape.len).offset
        };
        let tag = self.grow(TAG_LEN).offset;
        self.ops.push(AeadOp {
            alg: shape.alg,
            key: shape.key,
            direction: Direction::Encrypt,
            nonce: shape.nonce,
            aad,
            src,
            dst,
            len: shape.len as u32,
            tag,
            status: OpStatus::Pending,
        });
        self.ops.last_mut().expect("pushed")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_lie_one_after_another_without_overlap() {
        let key = KeyHandle {
            index: 0,
            generation: 0,
        };
        let shape = |len, in_place| OpShape {
            alg: Algorithm::ChaCha20Poly1305,
            key,
            nonce: [0; 12],
            aad_len: 3,
            len,
            in_place,
        };
        let mut l = OpLayout::new();
        l.push(shape(10, true));
        l.push(shape(5, false));
        let (a, b) = (l.ops[0], l.ops[1]);
        assert_eq!((a.aad.offset, a.src, a.dst, a.tag), (0, 3, 3, 13));
        assert_eq!((b.aad.offset, b.src, b.dst, b.tag), (29, 32, 37, 42));
        assert_eq!(l.mem.len(), 42 + TAG_LEN);
    }
}
