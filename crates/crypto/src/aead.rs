//! The unit of work of every engine: one AEAD operation over ranges of packet memory.
//!
//! Ops name memory by offset into one byte slice (the buffer arena in the data path),
//! so that a vector of ops needs no borrows and an engine can work on many packets
//! at once. Offsets are `u32`: the arena is at most 4 GiB.

/// Length of every tag linerate's AEADs produce (ChaCha20-Poly1305, AES-GCM).
pub const TAG_LEN: usize = 16;
/// Length of the nonce every data-path AEAD takes (RFC 8439 section 2.8, RFC 4106).
pub const NONCE_LEN: usize = 12;

/// The AEAD algorithms the engine API knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Algorithm {
    ChaCha20Poly1305,
    Aes128Gcm,
    Aes256Gcm,
}

impl Algorithm {
    pub const ALL: [Algorithm; 3] = [
        Algorithm::ChaCha20Poly1305,
        Algorithm::Aes128Gcm,
        Algorithm::Aes256Gcm,
    ];

    pub const fn key_len(self) -> usize {
        match self {
            Algorithm::ChaCha20Poly1305 | Algorithm::Aes256Gcm => 32,
            Algorithm::Aes128Gcm => 16,
        }
    }

    pub const fn index(self) -> usize {
        self as usize
    }

    pub const fn name(self) -> &'static str {
        match self {
            Algorithm::ChaCha20Poly1305 => "chacha20-poly1305",
            Algorithm::Aes128Gcm => "aes-128-gcm",
            Algorithm::Aes256Gcm => "aes-256-gcm",
        }
    }

    pub fn from_name(name: &str) -> Option<Algorithm> {
        Algorithm::ALL.into_iter().find(|a| a.name() == name)
    }
}

impl core::fmt::Display for Algorithm {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Encrypt,
    Decrypt,
}

/// What became of one op. Engines set it; callers send anything but `Ok` to drop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpStatus {
    /// Not processed yet.
    Pending,
    Ok,
    /// Decryption: the tag did not verify. The output range holds no plaintext.
    BadTag,
    /// The key handle names no live key, or a key of another algorithm.
    BadKey,
    /// A range lies outside the memory, or ranges overlap where they must not.
    BadRange,
    /// The engine does not serve this op's algorithm.
    Unsupported,
}

/// A byte range of the memory an op works on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Span {
    pub offset: u32,
    pub len: u32,
}

impl Span {
    pub const EMPTY: Span = Span { offset: 0, len: 0 };

    pub const fn new(offset: u32, len: u32) -> Span {
        Span { offset, len }
    }

    pub fn range(self) -> core::ops::Range<usize> {
        let start = self.offset as usize;
        start..start + self.len as usize
    }

    fn end(self) -> u64 {
        self.offset as u64 + self.len as u64
    }

    fn overlaps(self, other: Span) -> bool {
        self.len != 0
            && other.len != 0
            && (self.offset as u64) < other.end()
            && (other.offset as u64) < self.end()
    }
}

/// One AEAD operation.
///
/// Encrypt reads `len` bytes at `src`, writes the ciphertext at `dst` and the tag at
/// `tag`. Decrypt reads the ciphertext at `src` and the tag at `tag`, and writes the
/// plaintext at `dst` only if the tag verifies. `src == dst` is in place; otherwise
/// the two ranges must not overlap. `aad` must overlap neither output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AeadOp {
    pub alg: Algorithm,
    pub key: crate::KeyHandle,
    pub direction: Direction,
    pub nonce: [u8; NONCE_LEN],
    pub aad: Span,
    pub src: u32,
    pub dst: u32,
    pub len: u32,
    pub tag: u32,
    pub status: OpStatus,
}

impl AeadOp {
    /// An in-place op: text at `text`, tag right behind it (WireGuard's and ESP's layout).
    pub fn in_place(
        alg: Algorithm,
        key: crate::KeyHandle,
        direction: Direction,
        nonce: [u8; NONCE_LEN],
        aad: Span,
        text: Span,
    ) -> AeadOp {
        AeadOp {
            alg,
            key,
            direction,
            nonce,
            aad,
            src: text.offset,
            dst: text.offset,
            len: text.len,
            tag: text.offset.wrapping_add(text.len),
            status: OpStatus::Pending,
        }
    }

    pub fn src_span(&self) -> Span {
        Span::new(self.src, self.len)
    }

    pub fn dst_span(&self) -> Span {
        Span::new(self.dst, self.len)
    }

    pub fn tag_span(&self) -> Span {
        Span::new(self.tag, TAG_LEN as u32)
    }

    /// Checks that every range fits in `mem_len` bytes and that outputs overlap
    /// nothing they must not. Engines call this before touching memory.
    pub fn validate(&self, mem_len: usize) -> Result<(), OpStatus> {
        let fits = |s: Span| s.end() <= mem_len as u64;
        let (src, dst, tag) = (self.src_span(), self.dst_span(), self.tag_span());
        if !(fits(self.aad) && fits(src) && fits(dst) && fits(tag)) {
            return Err(OpStatus::BadRange);
        }
        if self.src != self.dst && src.overlaps(dst) {
            return Err(OpStatus::BadRange);
        }
        if tag.overlaps(src)
            || tag.overlaps(dst)
            || self.aad.overlaps(dst)
            || self.aad.overlaps(tag)
        {
            return Err(OpStatus::BadRange);
        }
        Ok(())
    }
}

/// Borrows the parts of `mem` one validated op needs: aad (read), text (the output
/// range, holding a copy of the input when the op is out of place), and tag.
/// Out-of-place ops are turned into in-place ones by copying the input first; on a
/// failed decryption the caller must wipe `text` again (see [`wipe_failed_output`]).
pub fn split_op<'m>(mem: &'m mut [u8], op: &AeadOp) -> (&'m [u8], &'m mut [u8], &'m mut [u8]) {
    if op.src != op.dst {
        let (s, d) = (op.src_span().range(), op.dst as usize);
        mem.copy_within(s, d);
    }
    let spans = [op.aad, op.dst_span(), op.tag_span()];
    let mut parts = disjoint_mut(mem, spans);
    let tag = core::mem::take(&mut parts[2]);
    let text = core::mem::take(&mut parts[1]);
    let aad = core::mem::take(&mut parts[0]);
    (aad, text, tag)
}

/// Zeroes the output of a failed decryption so that no unauthenticated plaintext
/// (or, out of place, a copy of the ciphertext) is left for the caller.
pub fn wipe_failed_output(mem: &mut [u8], op: &AeadOp) {
    mem[op.dst_span().range()].fill(0);
}

/// Splits `mem` into mutable slices for three pairwise disjoint spans.
fn disjoint_mut(mem: &mut [u8], spans: [Span; 3]) -> [&mut [u8]; 3] {
    let mut order = [0usize, 1, 2];
    order.sort_by_key(|&i| spans[i].offset);
    let mut out: [&mut [u8]; 3] = [&mut [], &mut [], &mut []];
    let mut rest = mem;
    let mut base = 0usize;
    for &i in &order {
        let r = spans[i].range();
        if r.is_empty() {
            continue;
        }
        let tail = core::mem::take(&mut rest);
        let (_, from_start) = tail.split_at_mut(r.start - base);
        let (part, after) = from_start.split_at_mut(r.len());
        out[i] = part;
        rest = after;
        base = r.end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::KeyHandle;

    fn op(src: u32, dst: u32, len: u32, tag: u32, aad: Span) -> AeadOp {
        AeadOp {
            alg: Algorithm::ChaCha20Poly1305,
            key: KeyHandle::INVALID,
            direction: Direction::Encrypt,
            nonce: [0; 12],
            aad,
            src,
            dst,
            len,
            tag,
            status: OpStatus::Pending,
        }
    }

    #[test]
    fn validate_catches_bad_ranges() {
        assert_eq!(op(0, 0, 10, 10, Span::EMPTY).validate(26), Ok(()));
        assert_eq!(
            op(0, 0, 10, 10, Span::EMPTY).validate(25),
            Err(OpStatus::BadRange)
        );
        assert_eq!(
            op(0, 0, 10, 5, Span::EMPTY).validate(100),
            Err(OpStatus::BadRange)
        );
        assert_eq!(
            op(0, 5, 10, 40, Span::EMPTY).validate(100),
            Err(OpStatus::BadRange)
        );
        assert_eq!(
            op(0, 20, 10, 40, Span::new(25, 2)).validate(100),
            Err(OpStatus::BadRange)
        );
        assert_eq!(op(0, 20, 10, 40, Span::new(0, 10)).validate(100), Ok(()));
        assert_eq!(
            op(u32::MAX, u32::MAX, 10, 3, Span::EMPTY).validate(100),
            Err(OpStatus::BadRange)
        );
    }

    #[test]
    fn split_copies_out_of_place_input() {
        let mut mem: Vec<u8> = (0..64).collect();
        let o = op(0, 32, 8, 48, Span::new(16, 4));
        let (aad, text, tag) = split_op(&mut mem, &o);
        assert_eq!(aad, &[16, 17, 18, 19]);
        assert_eq!(text, &[0, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(tag.len(), 16);
        assert_eq!(tag[0], 48);
    }
}
