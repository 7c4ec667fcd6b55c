//! The chained (AES-CBC with HMAC) part of the suite: known answers made by an
//! independent implementation, and the ranges a chained op may not have.
//!
//! The known answers are `tests/data/cbc_hmac.txt`, written by
//! `tests/crypto/cbc_hmac_vectors.py` with Python's `cryptography` package: ESP
//! packets' worth of key, IV, ESP header, optional ESN bytes, plaintext, ciphertext
//! and ICV for each chained algorithm.

use super::MakeEngine;
use crate::aead::{CBC_IV_LEN, MAX_KEY_LEN};
use crate::{AeadOp, Algorithm, Direction, KeyRegistry, OpStatus, Span};
use std::sync::Arc;

const VECTORS: &str = include_str!("../../tests/data/cbc_hmac.txt");

/// One known answer: what ESP sends for one packet.
#[derive(Clone, Debug)]
pub struct Vector {
    pub alg: Algorithm,
    pub key: Vec<u8>,
    pub iv: Vec<u8>,
    /// The 8-byte ESP header (SPI and sequence number), under the MAC only.
    pub header: Vec<u8>,
    /// The high 32 bits of an extended sequence number, under the MAC after the
    /// ciphertext; empty without ESN.
    pub esn: Vec<u8>,
    pub plain: Vec<u8>,
    pub cipher: Vec<u8>,
    pub icv: Vec<u8>,
}

/// Every known answer in the data file.
pub fn vectors() -> Result<Vec<Vector>, String> {
    let mut out = Vec::new();
    for (n, line) in VECTORS.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        let bad = |what: &str| format!("cbc_hmac.txt line {}: {what}", n + 1);
        if f.len() != 8 {
            return Err(bad("want 8 fields"));
        }
        let alg = Algorithm::from_name(f[0]).ok_or_else(|| bad("unknown algorithm"))?;
        let hex = |s: &str| match s {
            "-" => Ok(Vec::new()),
            s => hex::decode(s).map_err(|e| bad(&e.to_string())),
        };
        out.push(Vector {
            alg,
            key: hex(f[1])?,
            iv: hex(f[2])?,
            header: hex(f[3])?,
            esn: hex(f[4])?,
            plain: hex(f[5])?,
            cipher: hex(f[6])?,
            icv: hex(f[7])?,
        });
    }
    Ok(out)
}

/// Where one packet lies in a batch's memory: header | IV | text | ESN, then the ICV.
struct Packet {
    at: usize,
    mac: Span,
    text: Span,
    tag: u32,
}

impl Packet {
    /// Appends `v`'s packet with `text` as its text and `icv` as its tag.
    fn push(mem: &mut Vec<u8>, v: &Vector, text: &[u8], icv: &[u8]) -> Packet {
        let at = mem.len();
        mem.extend_from_slice(&v.header);
        mem.extend_from_slice(&v.iv);
        let text_at = mem.len();
        mem.extend_from_slice(text);
        mem.extend_from_slice(&v.esn);
        let tag = mem.len();
        mem.extend_from_slice(icv);
        Packet {
            at,
            mac: Span::new(at as u32, (tag - at) as u32),
            text: Span::new(text_at as u32, text.len() as u32),
            tag: tag as u32,
        }
    }

    fn end(&self, v: &Vector) -> usize {
        self.tag as usize + v.alg.tag_len()
    }
}

/// Every known answer of `alg`, sealed and opened, in place and out of place; then
/// one batch per answer in which each byte of the MAC span and of the ICV has a bit
/// flipped in an op of its own: every such op must fail with `BadTag` and leave its
/// memory as it was, while an unflipped copy in the same batch opens.
pub fn known_answers(make: MakeEngine, alg: Algorithm) -> Result<(), String> {
    let keys = Arc::new(KeyRegistry::new(4));
    let mut engine = make(&keys);
    let mut ran = 0;
    for (n, v) in vectors()?.iter().filter(|v| v.alg == alg).enumerate() {
        let h = keys.insert(alg, &v.key).map_err(|e| e.to_string())?;
        let what = format!(
            "{alg} known answer {n} ({} bytes{})",
            v.plain.len(),
            if v.esn.is_empty() { "" } else { ", ESN" }
        );

        // Seal: in place, and out of place from a plaintext with its own IV in front.
        let mut mem = Vec::new();
        let zeros = vec![0; v.icv.len()];
        let inplace = Packet::push(&mut mem, v, &v.plain, &zeros);
        mem.extend_from_slice(&v.iv);
        let src = mem.len() as u32;
        mem.extend_from_slice(&v.plain);
        let apart = Packet::push(&mut mem, v, &vec![0; v.plain.len()], &zeros);
        let mut ops = [
            AeadOp::chained_in_place(
                alg,
                h,
                Direction::Encrypt,
                inplace.mac,
                inplace.text,
                inplace.tag,
            ),
            AeadOp {
                src,
                ..AeadOp::chained_in_place(
                    alg,
                    h,
                    Direction::Encrypt,
                    apart.mac,
                    apart.text,
                    apart.tag,
                )
            },
        ];
        engine.process(&keys, &mut mem, &mut ops);
        let mut want = Vec::new();
        Packet::push(&mut want, v, &v.cipher, &v.icv);
        want.extend_from_slice(&v.iv);
        want.extend_from_slice(&v.plain);
        Packet::push(&mut want, v, &v.cipher, &v.icv);
        if ops.iter().any(|o| o.status != OpStatus::Ok) || mem != want {
            return Err(format!(
                "{what}: sealing gave {:?} and {}",
                [ops[0].status, ops[1].status],
                if mem == want {
                    "the right bytes"
                } else {
                    "other bytes"
                }
            ));
        }

        // Open: in place, and out of place into a zeroed buffer.
        let mut mem = Vec::new();
        let inplace = Packet::push(&mut mem, v, &v.cipher, &v.icv);
        let apart = Packet::push(&mut mem, v, &v.cipher, &v.icv);
        let dst = mem.len() as u32;
        mem.extend_from_slice(&vec![0; v.plain.len()]);
        let mut ops = [
            AeadOp::chained_in_place(
                alg,
                h,
                Direction::Decrypt,
                inplace.mac,
                inplace.text,
                inplace.tag,
            ),
            AeadOp {
                dst,
                ..AeadOp::chained_in_place(
                    alg,
                    h,
                    Direction::Decrypt,
                    apart.mac,
                    apart.text,
                    apart.tag,
                )
            },
        ];
        engine.process(&keys, &mut mem, &mut ops);
        let mut want = Vec::new();
        Packet::push(&mut want, v, &v.plain, &v.icv);
        Packet::push(&mut want, v, &v.cipher, &v.icv);
        want.extend_from_slice(&v.plain);
        if ops.iter().any(|o| o.status != OpStatus::Ok) || mem != want {
            return Err(format!(
                "{what}: opening gave {:?} and {}",
                [ops[0].status, ops[1].status],
                if mem == want {
                    "the right bytes"
                } else {
                    "other bytes"
                }
            ));
        }

        // Flipped bits: one op per byte of MAC span and ICV, then an intact one.
        let mut mem = Vec::new();
        let mut ops = Vec::new();
        let flips = v.header.len() + CBC_IV_LEN + v.cipher.len() + v.esn.len() + v.icv.len();
        for k in 0..=flips {
            let p = Packet::push(&mut mem, v, &v.cipher, &v.icv);
            if k < flips {
                mem[p.at + k] ^= 1 << (k % 8);
            }
            ops.push(AeadOp::chained_in_place(
                alg,
                h,
                Direction::Decrypt,
                p.mac,
                p.text,
                p.tag,
            ));
            debug_assert_eq!(p.end(v), mem.len());
        }
        let before = mem.clone();
        engine.process(&keys, &mut mem, &mut ops);
        for (k, o) in ops.iter().enumerate() {
            let want = if k < flips {
                OpStatus::BadTag
            } else {
                OpStatus::Ok
            };
            if o.status != want {
                return Err(format!(
                    "{what}: a bit flipped at byte {k} of the packet gave {:?}",
                    o.status
                ));
            }
            let out = o.dst_span().range();
            if k < flips && mem[out.clone()] != before[out] {
                return Err(format!(
                    "{what}: a bit flipped at byte {k} of the packet, and the output was written"
                ));
            }
        }
        let last = ops[flips].dst_span().range();
        if mem[last] != v.plain[..] {
            return Err(format!(
                "{what}: the intact packet among flipped ones did not open"
            ));
        }
        keys.remove(h);
        ran += 1;
    }
    if ran < 4 {
        return Err(format!("only {ran} known answers ran for {alg}"));
    }
    Ok(())
}

/// One batch of ops that break each rule of a chained op, beside one good op: each
/// bad one gets its status (`BadRange`, or `BadKey` for a key of another algorithm)
/// and no byte of memory changes but the good op's output.
pub fn bad_ranges(make: MakeEngine, alg: Algorithm) -> Result<(), String> {
    let keys = Arc::new(KeyRegistry::new(4));
    let mut engine = make(&keys);
    let h = keys
        .insert(alg, &[0x33; MAX_KEY_LEN][..alg.key_len()])
        .map_err(|e| e.to_string())?;
    let other = Algorithm::ALL
        .into_iter()
        .find(|&a| a != alg)
        .expect("more than one algorithm");
    let wrong_alg = keys
        .insert(other, &[0x44; MAX_KEY_LEN][..other.key_len()])
        .map_err(|e| e.to_string())?;
    let tag_len = alg.tag_len() as u32;
    // A packet at 100: header 100..108, IV 108..124, text 124..188, ESN 188..192;
    // spare room at 200..400 for tags and outputs.
    let mac = Span::new(100, 92);
    let text = Span::new(124, 64);
    let good = |direction| AeadOp::chained_in_place(alg, h, direction, mac, text, 200);
    let enc = good(Direction::Encrypt);
    let dec = good(Direction::Decrypt);
    let cases: Vec<(&str, AeadOp, OpStatus)> = vec![
        ("no text", AeadOp { len: 0, ..enc }, OpStatus::BadRange),
        (
            "half a block",
            AeadOp { len: 24, ..enc },
            OpStatus::BadRange,
        ),
        (
            "a block and a byte",
            AeadOp { len: 17, ..dec },
            OpStatus::BadRange,
        ),
        (
            "IV before memory",
            AeadOp::chained_in_place(
                alg,
                h,
                Direction::Encrypt,
                Span::new(8, 32),
                Span::new(8, 32),
                200,
            ),
            OpStatus::BadRange,
        ),
        (
            "MAC span short of the text's end",
            AeadOp {
                aad: Span::new(100, 80),
                ..enc
            },
            OpStatus::BadRange,
        ),
        (
            "MAC span starting inside the text",
            AeadOp {
                aad: Span::new(140, 52),
                ..dec
            },
            OpStatus::BadRange,
        ),
        (
            "encrypting out of place, MAC over the input",
            AeadOp { dst: 300, ..enc },
            OpStatus::BadRange,
        ),
        (
            "decrypting out of place, MAC over the output",
            AeadOp { src: 300, ..dec },
            OpStatus::BadRange,
        ),
        (
            "decrypting out of place into the MAC span",
            AeadOp {
                dst: 100,
                aad: Span::new(100, 200),
                src: 236,
                tag: 400,
                ..dec
            },
            OpStatus::BadRange,
        ),
        (
            "output over the IV",
            AeadOp {
                src: 300,
                dst: 221,
                aad: Span::new(221, 64),
                ..enc
            },
            OpStatus::BadRange,
        ),
        (
            "tag inside the MAC span",
            AeadOp { tag: 188, ..enc },
            OpStatus::BadRange,
        ),
        (
            "tag overlapping the MAC span's end",
            AeadOp {
                tag: 192 - tag_len + 1,
                ..dec
            },
            OpStatus::BadRange,
        ),
        (
            "tag over the IV",
            AeadOp {
                aad: Span::new(124, 64),
                tag: 124 - tag_len,
                ..dec
            },
            OpStatus::BadRange,
        ),
        (
            "tag past the end",
            AeadOp {
                tag: 512 - tag_len + 1,
                ..enc
            },
            OpStatus::BadRange,
        ),
        (
            "key of another algorithm",
            AeadOp {
                key: wrong_alg,
                ..enc
            },
            OpStatus::BadKey,
        ),
        ("the good one", enc, OpStatus::Ok),
    ];
    let mut ops: Vec<AeadOp> = cases.iter().map(|c| c.1).collect();
    let mut mem: Vec<u8> = (0..512).map(|i| (i * 7 + 3) as u8).collect();
    let before = mem.clone();
    engine.process(&keys, &mut mem, &mut ops);
    for ((what, _, want), o) in cases.iter().zip(&ops) {
        if o.status != *want {
            return Err(format!("{alg} {what}: {:?}, want {want:?}", o.status));
        }
    }
    let written = [text.range(), 200..200 + tag_len as usize];
    for (i, (a, b)) in mem.iter().zip(&before).enumerate() {
        if a != b && !written.iter().any(|r| r.contains(&i)) {
            return Err(format!("{alg}: an op that was refused wrote byte {i}"));
        }
    }
    Ok(())
}
