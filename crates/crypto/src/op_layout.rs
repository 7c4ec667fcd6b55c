//! Lays ops out in one growing block of memory the way the engine API addresses them,
//! one op after another: what tests, conformance checks and fuzz targets build their
//! batches with, whatever chooses the sizes and contents.
//!
//! An AEAD op is aad, input, output when out of place, tag. A chained op is laid out
//! as ESP lays out a packet: a header (`aad_len` bytes), the IV, the text and, if
//! asked for, a suffix (ESN bytes), all under the MAC, then the tag. Out of place,
//! the input comes first with an IV of its own in front of it, then the header, a
//! second IV, the output and the suffix: so the op also runs backwards (decrypting
//! the output into the input) once the two IVs are equal ([`OpLayout::copy_ivs`]).

use crate::aead::{AeadOp, Algorithm, CBC_IV_LEN, Direction, OpStatus, Span};
use crate::key::KeyHandle;

/// One op's shape: which key, how much aad and text, and where the output goes. For
/// a chained op, `aad_len` is the header in front of the IV (the MAC span is
/// header, IV, text and suffix) and `nonce` is unused.
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

    /// Lays out one encryption op of `shape` after the others (a chained one with
    /// no suffix).
    pub fn push(&mut self, shape: OpShape) -> &mut AeadOp {
        if shape.alg.is_chained() {
            return self.push_chained(shape, 0);
        }
        let aad = self.grow(shape.aad_len);
        let src = self.grow(shape.len).offset;
        let dst = if shape.in_place {
            src
        } else {
            self.grow(shape.len).offset
        };
        let tag = self.grow(shape.alg.tag_len()).offset;
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

    /// Lays out one chained encryption op of `shape` after the others, with `suffix`
    /// bytes under the MAC after the ciphertext (4 for ESP's extended sequence
    /// numbers).
    pub fn push_chained(&mut self, shape: OpShape, suffix: usize) -> &mut AeadOp {
        let src = if shape.in_place {
            None
        } else {
            self.grow(CBC_IV_LEN);
            Some(self.grow(shape.len).offset)
        };
        let mac_start = self.mem.len() as u32;
        self.grow(shape.aad_len + CBC_IV_LEN);
        let dst = self.grow(shape.len).offset;
        self.grow(suffix);
        let mac = Span::new(mac_start, self.mem.len() as u32 - mac_start);
        let tag = self.grow(shape.alg.tag_len()).offset;
        let text = Span::new(dst, shape.len as u32);
        let mut op =
            AeadOp::chained_in_place(shape.alg, shape.key, Direction::Encrypt, mac, text, tag);
        op.src = src.unwrap_or(dst);
        self.ops.push(op);
        self.ops.last_mut().expect("pushed")
    }

    /// Makes the IV in front of each out-of-place chained op's output equal to the
    /// one in front of its input (after the memory was filled), so that the op run
    /// backwards finds the IV it was encrypted with.
    pub fn copy_ivs(&mut self) {
        for op in self
            .ops
            .iter()
            .filter(|o| o.alg.is_chained() && o.src != o.dst)
        {
            let (from, to) = (op.src as usize, op.dst as usize);
            self.mem
                .copy_within(from - CBC_IV_LEN..from, to - CBC_IV_LEN);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An op of `alg` with `aad_len` bytes of AAD and `len` of text, on key 0.
    fn shape(alg: Algorithm, aad_len: usize, len: usize, in_place: bool) -> OpShape {
        let key = KeyHandle {
            index: 0,
            generation: 0,
        };
        OpShape {
            alg,
            key,
            nonce: [0; 12],
            aad_len,
            len,
            in_place,
        }
    }

    #[test]
    fn ops_lie_one_after_another_without_overlap() {
        let shape = |len, in_place| shape(Algorithm::ChaCha20Poly1305, 3, len, in_place);
        let mut l = OpLayout::new();
        l.push(shape(10, true));
        l.push(shape(5, false));
        let (a, b) = (l.ops[0], l.ops[1]);
        assert_eq!((a.aad.offset, a.src, a.dst, a.tag), (0, 3, 3, 13));
        assert_eq!((b.aad.offset, b.src, b.dst, b.tag), (29, 32, 37, 42));
        assert_eq!(l.mem.len(), 42 + 16);
    }

    #[test]
    fn chained_ops_are_laid_out_as_esp_packets() {
        let shape = |len, in_place| shape(Algorithm::Aes128CbcHmacSha1, 8, len, in_place);
        let mut l = OpLayout::new();
        l.push(shape(32, true));
        l.push_chained(shape(16, false), 4);
        let (a, b) = (l.ops[0], l.ops[1]);
        // header 0..8, IV 8..24, text 24..56, tag 56..68
        assert_eq!((a.aad, a.src, a.dst, a.tag), (Span::new(0, 56), 24, 24, 56));
        // IV 68..84, src 84..100, header 100..108, IV 108..124, dst 124..140,
        // suffix 140..144, tag 144..156
        assert_eq!(
            (b.aad, b.src, b.dst, b.tag),
            (Span::new(100, 44), 84, 124, 144)
        );
        assert_eq!(l.mem.len(), 156);
        for o in &l.ops {
            assert_eq!(o.validate(l.mem.len()), Ok(()), "{o:?}");
        }
        l.mem.iter_mut().enumerate().for_each(|(i, m)| *m = i as u8);
        l.copy_ivs();
        assert_eq!(l.mem[108..124], l.mem[68..84]);
        assert_eq!(l.mem[8], 8, "in place: nothing to copy");
    }
}
