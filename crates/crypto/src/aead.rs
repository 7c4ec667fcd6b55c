//! The unit of work of every engine: one operation over ranges of packet memory, of
//! one of two kinds:
//! - an **AEAD** (ChaCha20-Poly1305, AES-GCM): one pass that encrypts and
//!   authenticates, with a nonce and associated data;
//! - a **chained** cipher and MAC as ESP uses them (AES-CBC with HMAC-SHA1-96 or
//!   HMAC-SHA-256-128): encrypt-then-MAC on the way out, verify-then-decrypt on the
//!   way in.
//!
//! Both are an [`AeadOp`]: its fields mean slightly different things per kind (see
//! there). Ops name memory by offset into one byte slice (the buffer arena in the data
//! path), so that a vector of ops needs no borrows and an engine can work on many
//! packets at once. Offsets are `u32`: the arena is at most 4 GiB.

/// Length of every tag linerate's AEADs produce (ChaCha20-Poly1305, AES-GCM), and the
/// longest tag of any algorithm: room for [`Algorithm::tag_len`] of every one.
pub const TAG_LEN: usize = 16;
/// Length of the nonce every data-path AEAD takes (RFC 8439 section 2.8, RFC 4106).
pub const NONCE_LEN: usize = 12;
/// AES's block: a chained op's text is whole blocks (RFC 3602 section 2.4: the
/// sender pads, ESP's own padding), and its IV is one block (RFC 3602 section 3).
pub const CBC_BLOCK_LEN: usize = 16;
/// Length of the IV of a chained op, which lies right in front of its input.
pub const CBC_IV_LEN: usize = CBC_BLOCK_LEN;
/// The longest key of any algorithm: AES-256 and HMAC-SHA-256 keys together.
pub const MAX_KEY_LEN: usize = 64;

/// The algorithms the engine API knows: AEADs, and chained cipher+MAC pairs.
///
/// The order is the order of [`Algorithm::ALL`] and of [`Algorithm::index`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Algorithm {
    ChaCha20Poly1305,
    Aes128Gcm,
    Aes256Gcm,
    /// AES-128-CBC (RFC 3602) with HMAC-SHA1-96 (RFC 2404).
    Aes128CbcHmacSha1,
    /// AES-256-CBC (RFC 3602) with HMAC-SHA1-96 (RFC 2404).
    Aes256CbcHmacSha1,
    /// AES-128-CBC (RFC 3602) with HMAC-SHA-256-128 (RFC 4868).
    Aes128CbcHmacSha256,
    /// AES-256-CBC (RFC 3602) with HMAC-SHA-256-128 (RFC 4868).
    Aes256CbcHmacSha256,
}

impl Algorithm {
    pub const ALL: [Algorithm; 7] = [
        Algorithm::ChaCha20Poly1305,
        Algorithm::Aes128Gcm,
        Algorithm::Aes256Gcm,
        Algorithm::Aes128CbcHmacSha1,
        Algorithm::Aes256CbcHmacSha1,
        Algorithm::Aes128CbcHmacSha256,
        Algorithm::Aes256CbcHmacSha256,
    ];

    /// Whether ops of this algorithm are chained cipher+MAC ops rather than AEADs:
    /// their fields mean what [`AeadOp`] says for chained ops.
    pub const fn is_chained(self) -> bool {
        match self {
            Algorithm::ChaCha20Poly1305 | Algorithm::Aes128Gcm | Algorithm::Aes256Gcm => false,
            Algorithm::Aes128CbcHmacSha1
            | Algorithm::Aes256CbcHmacSha1
            | Algorithm::Aes128CbcHmacSha256
            | Algorithm::Aes256CbcHmacSha256 => true,
        }
    }

    /// Length of the whole key as it is registered: for a chained algorithm, the
    /// cipher key followed by the MAC key.
    pub const fn key_len(self) -> usize {
        self.cipher_key_len() + self.auth_key_len()
    }

    /// Length of the cipher key: the whole key of an AEAD; the AES key, first in the
    /// registered key, of a chained algorithm.
    pub const fn cipher_key_len(self) -> usize {
        match self {
            Algorithm::Aes128Gcm
            | Algorithm::Aes128CbcHmacSha1
            | Algorithm::Aes128CbcHmacSha256 => 16,
            Algorithm::ChaCha20Poly1305
            | Algorithm::Aes256Gcm
            | Algorithm::Aes256CbcHmacSha1
            | Algorithm::Aes256CbcHmacSha256 => 32,
        }
    }

    /// Length of the MAC key, after the cipher key: the hash's output length, as
    /// RFC 2404 section 3 and RFC 4868 section 2.1.1 set it. 0 for an AEAD.
    pub const fn auth_key_len(self) -> usize {
        match self {
            Algorithm::ChaCha20Poly1305 | Algorithm::Aes128Gcm | Algorithm::Aes256Gcm => 0,
            Algorithm::Aes128CbcHmacSha1 | Algorithm::Aes256CbcHmacSha1 => 20,
            Algorithm::Aes128CbcHmacSha256 | Algorithm::Aes256CbcHmacSha256 => 32,
        }
    }

    /// Length of the tag (ESP's ICV): the AEADs' 16 bytes; HMAC-SHA1 truncated to 96
    /// bits (RFC 2404 section 2); HMAC-SHA-256 truncated to 128 bits (RFC 4868
    /// section 2.3). Never more than [`TAG_LEN`].
    pub const fn tag_len(self) -> usize {
        match self {
            Algorithm::Aes128CbcHmacSha1 | Algorithm::Aes256CbcHmacSha1 => 12,
            Algorithm::ChaCha20Poly1305
            | Algorithm::Aes128Gcm
            | Algorithm::Aes256Gcm
            | Algorithm::Aes128CbcHmacSha256
            | Algorithm::Aes256CbcHmacSha256 => 16,
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
            Algorithm::Aes128CbcHmacSha1 => "aes-128-cbc-hmac-sha1",
            Algorithm::Aes256CbcHmacSha1 => "aes-256-cbc-hmac-sha1",
            Algorithm::Aes128CbcHmacSha256 => "aes-128-cbc-hmac-sha256",
            Algorithm::Aes256CbcHmacSha256 => "aes-256-cbc-hmac-sha256",
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

    /// Whether every byte of `inner` lies in `self`.
    fn contains(self, inner: Span) -> bool {
        self.offset <= inner.offset && inner.end() <= self.end()
    }
}

/// One operation: an AEAD's or a chained cipher+MAC's (see [`Algorithm::is_chained`]).
///
/// What the fields mean for an **AEAD** (ChaCha20-Poly1305, AES-GCM):
/// - `nonce`: the 12-byte nonce;
/// - `aad`: the associated data, authenticated, not encrypted; it must overlap
///   neither output;
/// - `src`, `dst`, `len`: the text, `len` bytes of any length; `src == dst` is in
///   place, otherwise the two ranges must not overlap;
/// - `tag`: the 16 bytes of the tag, overlapping neither text.
///
/// Encrypt reads `len` bytes at `src`, writes the ciphertext at `dst` and the tag at
/// `tag`. Decrypt reads the ciphertext at `src` and the tag at `tag`, and writes the
/// plaintext at `dst` only if the tag verifies; on a failed tag the engine leaves no
/// plaintext at `dst` (it may have zeroed it).
///
/// What the fields mean for a **chained** op (AES-CBC with HMAC, as ESP runs it:
/// RFC 4303, RFC 3602, RFC 2404, RFC 4868):
/// - `nonce`: unused; callers leave it zero and engines ignore it;
/// - the IV: the [`CBC_IV_LEN`] bytes right in front of `src` in memory, where ESP
///   carries its explicit IV, in front of the ciphertext (so `src` is at least 16);
///   the IV must overlap neither `dst` nor the tag;
/// - `src`, `dst`, `len`: the text, in place or not overlapping as for an AEAD; `len`
///   is a whole number of AES blocks ([`CBC_BLOCK_LEN`]), at least one. Nothing is
///   padded or unpadded: the caller pads (ESP's own padding);
/// - `aad`: the one contiguous span the MAC covers. It must contain the text the MAC
///   is over, which is the ciphertext: `dst` when encrypting (the MAC is over the
///   ciphertext written), `src` when decrypting. It may reach before the text (ESP's
///   SPI, sequence number and IV) and after it (the high 32 bits of an extended
///   sequence number, which the caller puts right after the ciphertext while the
///   op runs, RFC 4303 section 3.3.2.1). Decrypting out of place, `dst` must not
///   overlap it;
/// - `tag`: [`Algorithm::tag_len`] bytes (ESP's ICV: 12 for HMAC-SHA1-96, 16 for
///   HMAC-SHA-256-128), overlapping none of the MAC span, the texts and the IV (so a
///   caller that puts the ESN bytes after the ciphertext keeps the ICV elsewhere
///   meanwhile).
///
/// Encrypt CBC-encrypts `src` into `dst` with the IV, then writes the HMAC of the
/// MAC span, truncated to the tag length, at `tag`. Decrypt computes the HMAC of the
/// MAC span and compares it in constant time with the bytes at `tag`; on a mismatch
/// the status is [`OpStatus::BadTag`] and `dst` is left as it was (nothing is
/// decrypted); otherwise it CBC-decrypts `src` into `dst`.
///
/// [`AeadOp::validate`] checks every rule above for the op's kind; ops that break
/// one get [`OpStatus::BadRange`].
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
    /// An in-place AEAD op: text at `text`, tag right behind it (WireGuard's and ESP's
    /// layout).
    pub const fn in_place(
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

    /// An in-place AEAD op with the tag at `tag`, away from the text (OpenVPN's
    /// layout: the tag between the header and the ciphertext).
    pub const fn in_place_tag_at(
        alg: Algorithm,
        key: crate::KeyHandle,
        direction: Direction,
        nonce: [u8; NONCE_LEN],
        aad: Span,
        text: Span,
        tag: u32,
    ) -> AeadOp {
        let mut op = AeadOp::in_place(alg, key, direction, nonce, aad, text);
        op.tag = tag;
        op
    }

    /// An in-place chained op: the IV right in front of `text`, the MAC over `mac`
    /// (which holds the text, and in ESP also the header and IV before it and the
    /// ESN bytes after it), the tag at `tag` (right behind `mac` when nothing follows
    /// the ciphertext there, as without ESN).
    pub fn chained_in_place(
        alg: Algorithm,
        key: crate::KeyHandle,
        direction: Direction,
        mac: Span,
        text: Span,
        tag: u32,
    ) -> AeadOp {
        AeadOp {
            alg,
            key,
            direction,
            nonce: [0; NONCE_LEN],
            aad: mac,
            src: text.offset,
            dst: text.offset,
            len: text.len,
            tag,
            status: OpStatus::Pending,
        }
    }

    pub fn src_span(&self) -> Span {
        Span::new(self.src, self.len)
    }

    pub fn dst_span(&self) -> Span {
        Span::new(self.dst, self.len)
    }

    /// The tag: [`Algorithm::tag_len`] bytes at `tag`.
    pub fn tag_span(&self) -> Span {
        Span::new(self.tag, self.alg.tag_len() as u32)
    }

    /// The IV of a chained op, right in front of `src`; `None` for an AEAD op or
    /// when `src` is too close to the start of memory to have one.
    pub fn iv_span(&self) -> Option<Span> {
        let offset = self.src.checked_sub(CBC_IV_LEN as u32)?;
        self.alg
            .is_chained()
            .then_some(Span::new(offset, CBC_IV_LEN as u32))
    }

    /// The ciphertext the MAC of a chained op covers: `dst` when encrypting, `src`
    /// when decrypting.
    pub fn ciphertext_span(&self) -> Span {
        match self.direction {
            Direction::Encrypt => self.dst_span(),
            Direction::Decrypt => self.src_span(),
        }
    }

    /// Checks that every range fits in `mem_len` bytes and that the op keeps the
    /// rules of its kind (see [`AeadOp`]). Engines call this before touching memory.
    #[inline]
    pub fn validate(&self, mem_len: usize) -> Result<(), OpStatus> {
        // WireGuard's ops (an AEAD, in place, no AAD) are most of a tunnel's, and
        // for them the rules come down to three ranges fitting and two of them
        // apart: checked alone, in half the instructions of every rule in turn.
        if self.src == self.dst && self.aad.len == 0 && !self.alg.is_chained() {
            let mem = mem_len as u64;
            let (text, tag) = (self.dst_span(), self.tag_span());
            let fits = u64::from(self.aad.offset) <= mem && text.end() <= mem && tag.end() <= mem;
            return match fits && !tag.overlaps(text) {
                true => Ok(()),
                false => Err(OpStatus::BadRange),
            };
        }
        self.validate_rules(mem_len)
    }

    /// [`AeadOp::validate`], every rule in turn.
    fn validate_rules(&self, mem_len: usize) -> Result<(), OpStatus> {
        let fits = |s: Span| s.end() <= mem_len as u64;
        let (src, dst, tag) = (self.src_span(), self.dst_span(), self.tag_span());
        if !(fits(self.aad) && fits(src) && fits(dst) && fits(tag)) {
            return Err(OpStatus::BadRange);
        }
        if self.src != self.dst && src.overlaps(dst) {
            return Err(OpStatus::BadRange);
        }
        if tag.overlaps(src) || tag.overlaps(dst) || self.aad.overlaps(tag) {
            return Err(OpStatus::BadRange);
        }
        if !self.alg.is_chained() {
            return match self.aad.overlaps(dst) {
                true => Err(OpStatus::BadRange),
                false => Ok(()),
            };
        }
        if self.len == 0 || !(self.len as usize).is_multiple_of(CBC_BLOCK_LEN) {
            return Err(OpStatus::BadRange);
        }
        let Some(iv) = self.iv_span() else {
            return Err(OpStatus::BadRange);
        };
        if iv.overlaps(dst) || iv.overlaps(tag) {
            return Err(OpStatus::BadRange);
        }
        if !self.aad.contains(self.ciphertext_span()) {
            return Err(OpStatus::BadRange);
        }
        if self.direction == Direction::Decrypt && self.src != self.dst && self.aad.overlaps(dst) {
            return Err(OpStatus::BadRange);
        }
        Ok(())
    }
}

/// Borrows the parts of `mem` one validated AEAD op needs: aad (read), text (the
/// output range, holding a copy of the input when the op is out of place), and tag.
/// (A chained op's MAC span holds its text: see [`crate::chained::run`].)
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

    /// The check for in-place ops without AAD decides every such op as all the
    /// rules do: every placement of text, tag and empty AAD in and around memories
    /// of a few sizes, at lengths from none to past a tag, for each AEAD.
    #[test]
    fn in_place_ops_without_aad_are_judged_as_by_every_rule() {
        let mut judged = 0;
        for alg in [Algorithm::ChaCha20Poly1305, Algorithm::Aes256Gcm] {
            for mem_len in [0usize, 16, 17, 31, 32, 33, 48] {
                for text in 0..40u32 {
                    for len in [0u32, 1, 15, 16, 17, 32] {
                        for tag in 0..52u32 {
                            for aad in [0u32, 16, 47, 48, 49, u32::MAX] {
                                let mut o = op(text, text, len, tag, Span::new(aad, 0));
                                o.alg = alg;
                                assert_eq!(
                                    o.validate(mem_len),
                                    o.validate_rules(mem_len),
                                    "{o:?} in {mem_len}"
                                );
                                judged += 1;
                            }
                        }
                    }
                }
            }
        }
        assert!(judged > 100_000);
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
    fn algorithm_lengths_and_names() {
        use Algorithm::*;
        let want = [
            // (algorithm, chained, cipher key, MAC key, tag)
            (ChaCha20Poly1305, false, 32, 0, 16),
            (Aes128Gcm, false, 16, 0, 16),
            (Aes256Gcm, false, 32, 0, 16),
            (Aes128CbcHmacSha1, true, 16, 20, 12),
            (Aes256CbcHmacSha1, true, 32, 20, 12),
            (Aes128CbcHmacSha256, true, 16, 32, 16),
            (Aes256CbcHmacSha256, true, 32, 32, 16),
        ];
        assert_eq!(want.len(), Algorithm::ALL.len());
        for (i, (alg, chained, cipher, mac, tag)) in want.into_iter().enumerate() {
            assert_eq!(Algorithm::ALL[i], alg);
            assert_eq!(alg.index(), i);
            assert_eq!(alg.is_chained(), chained, "{alg}");
            assert_eq!(
                (alg.cipher_key_len(), alg.auth_key_len()),
                (cipher, mac),
                "{alg}"
            );
            assert_eq!(alg.key_len(), cipher + mac, "{alg}");
            assert!(alg.key_len() <= MAX_KEY_LEN && alg.tag_len() <= TAG_LEN);
            assert_eq!(alg.tag_len(), tag, "{alg}");
            assert_eq!(Algorithm::from_name(alg.name()), Some(alg));
        }
        assert_eq!(Aes256CbcHmacSha256.name(), "aes-256-cbc-hmac-sha256");
    }

    fn chained(direction: Direction, mac: Span, text: Span, tag: u32) -> AeadOp {
        AeadOp::chained_in_place(
            Algorithm::Aes128CbcHmacSha1,
            KeyHandle::INVALID,
            direction,
            mac,
            text,
            tag,
        )
    }

    /// The rules of a chained op, one at a time, on an ESP-like packet: header at
    /// 0..8, IV 8..24, text 24..56, ESN 56..60, room after.
    #[test]
    fn validate_checks_chained_ops() {
        use Direction::{Decrypt, Encrypt};
        let (mac, text) = (Span::new(0, 60), Span::new(24, 32));
        let bad = Err(OpStatus::BadRange);
        for d in [Encrypt, Decrypt] {
            let op = chained(d, mac, text, 60);
            assert_eq!(op.validate(72), Ok(()));
            assert_eq!(op.iv_span(), Some(Span::new(8, 16)));
            assert_eq!(op.tag_span(), Span::new(60, 12));
            assert_eq!(op.validate(71), bad, "tag past the end");
            assert_eq!(AeadOp { len: 0, ..op }.validate(72), bad, "no text");
            assert_eq!(
                AeadOp { len: 31, ..op }.validate(72),
                bad,
                "not whole blocks"
            );
            assert_eq!(
                AeadOp { tag: 59, ..op }.validate(72),
                bad,
                "tag over the ESN"
            );
            assert_eq!(
                AeadOp { tag: 0, ..op }.validate(72),
                bad,
                "tag over the header"
            );
            let short = AeadOp {
                aad: Span::new(0, 55),
                ..op
            };
            assert_eq!(short.validate(72), bad, "MAC short of the text");
            let text_only = AeadOp {
                aad: text,
                tag: 0,
                ..op
            };
            assert_eq!(text_only.validate(72), bad, "tag over the IV");
            let text_only = AeadOp {
                tag: 56,
                ..text_only
            };
            assert_eq!(
                text_only.validate(72),
                Ok(()),
                "the MAC may be the text alone"
            );
            let front = chained(d, Span::new(10, 32), Span::new(10, 32), 60);
            assert_eq!(front.iv_span(), None);
            assert_eq!(front.validate(72), bad, "IV before memory");
        }
        // Out of place: IV 100..116, input 116..148; the packet above is the output.
        let enc = AeadOp {
            src: 116,
            ..chained(Encrypt, mac, text, 60)
        };
        assert_eq!(enc.validate(148), Ok(()));
        let over_iv = AeadOp {
            dst: 90,
            aad: Span::new(90, 32),
            ..enc
        };
        assert_eq!(over_iv.validate(148), bad, "output over the IV");
        let dec = AeadOp {
            direction: Decrypt,
            ..enc
        };
        assert_eq!(
            dec.validate(148),
            bad,
            "decrypting: the MAC covers the output"
        );
        let dec = AeadOp {
            src: 24,
            dst: 116,
            ..dec
        };
        assert_eq!(dec.validate(148), Ok(()));
        let into_mac = AeadOp {
            dst: 60,
            aad: Span::new(0, 100),
            tag: 120,
            ..dec
        };
        assert_eq!(into_mac.validate(148), bad, "decrypting into the MAC span");
        // An AEAD op keeps its own rules: its aad may not hold the text.
        let aead = AeadOp {
            alg: Algorithm::Aes128Gcm,
            ..chained(Encrypt, mac, text, 60)
        };
        assert_eq!(aead.validate(100), bad);
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
