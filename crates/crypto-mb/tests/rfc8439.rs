//! RFC 8439's known answers (tests/data/rfc8439.txt) on every path this CPU runs:
//! ChaCha20 (sections 2.4.2, A.1, A.2, A.4) and Poly1305 (2.5.2, A.3) through each
//! kernel in both layouts, and the AEAD (2.8.2, A.5) through the engine.

use crypto::{AeadOp, Algorithm, Direction, Engine, KeyRegistry, OpStatus, Span};
use crypto_mb::raw::{self, Layout};
use crypto_mb::{MbEngine, Path};
use std::collections::HashMap;

struct Record {
    name: String,
    fields: HashMap<String, String>,
}

impl Record {
    fn hex(&self, k: &str) -> Vec<u8> {
        hex::decode(&self.fields[k]).unwrap_or_else(|e| panic!("{}: {k}: {e}", self.name))
    }

    fn array<const N: usize>(&self, k: &str) -> [u8; N] {
        self.hex(k)
            .try_into()
            .unwrap_or_else(|_| panic!("{}: {k} length", self.name))
    }
}

fn records() -> Vec<Record> {
    let text = include_str!("data/rfc8439.txt");
    let mut out = Vec::new();
    for chunk in text.split("\n\n") {
        let mut fields = HashMap::new();
        for line in chunk
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
        {
            let (k, v) = line.split_once(" = ").expect("key = value");
            fields.insert(k.to_string(), v.to_string());
        }
        if let Some(name) = fields.remove("name") {
            out.push(Record { name, fields });
        }
    }
    out
}

fn of_kind(kind: &str) -> Vec<Record> {
    let v: Vec<_> = records()
        .into_iter()
        .filter(|r| r.fields["kind"] == kind)
        .collect();
    assert!(!v.is_empty(), "no {kind} records");
    v
}

const LAYOUTS: [Layout; 2] = [Layout::OneLane, Layout::AcrossLanes];

#[test]
fn chacha20_vectors_on_every_path() {
    let recs = of_kind("chacha20");
    assert_eq!(recs.len(), 12);
    for path in Path::available_paths() {
        for layout in LAYOUTS {
            for r in &recs {
                let counter: u32 = r.fields["counter"].parse().unwrap();
                let mut data = r.hex("input");
                raw::chacha20(
                    path,
                    layout,
                    &r.array("key"),
                    &r.array("nonce"),
                    counter,
                    &mut data,
                );
                assert_eq!(
                    hex::encode(&data),
                    r.fields["output"],
                    "{path} {layout:?} {}",
                    r.name
                );
            }
        }
    }
}

#[test]
fn poly1305_vectors_on_every_path() {
    let recs = of_kind("poly1305");
    assert_eq!(recs.len(), 12);
    for path in Path::available_paths() {
        for layout in LAYOUTS {
            for r in &recs {
                let tag = raw::poly1305(path, layout, &r.array("key"), &r.hex("input"));
                assert_eq!(
                    hex::encode(tag),
                    r.fields["tag"],
                    "{path} {layout:?} {}",
                    r.name
                );
            }
        }
    }
}

/// Engines on `path` with the default split, all lanes and all block path.
fn engines(path: Path) -> [MbEngine; 3] {
    [
        MbEngine::with_path(path),
        MbEngine::with_path(path).with_block_threshold(usize::MAX),
        MbEngine::with_path(path).with_block_threshold(0),
    ]
}

#[test]
fn aead_vectors_on_every_path() {
    let recs = of_kind("aead");
    // One registry for the whole test: an engine caches keys by handle and serves
    // one registry in its life.
    let keys = KeyRegistry::new(4);
    let handles: Vec<_> = recs
        .iter()
        .map(|r| {
            keys.insert(Algorithm::ChaCha20Poly1305, &r.hex("key"))
                .unwrap()
        })
        .collect();
    for path in Path::available_paths() {
        for mut engine in engines(path) {
            for (r, &key) in recs.iter().zip(&handles) {
                let (aad, pt, ct, tag) = (
                    r.hex("aad"),
                    r.hex("plaintext"),
                    r.hex("ciphertext"),
                    r.hex("tag"),
                );
                let what = format!("{path} threshold {:?} {}", engine.block_threshold(), r.name);
                let (a, n) = (aad.len() as u32, pt.len() as u32);
                // memory: aad | text | tag | second text (out-of-place output)
                let mut mem = [aad.clone(), pt.clone(), vec![0; 16], vec![0; pt.len()]].concat();
                let mut op = AeadOp::in_place(
                    Algorithm::ChaCha20Poly1305,
                    key,
                    Direction::Encrypt,
                    r.array("nonce"),
                    Span::new(0, a),
                    Span::new(a, n),
                );
                engine.process(&keys, &mut mem, std::slice::from_mut(&mut op));
                assert_eq!(op.status, OpStatus::Ok, "{what}");
                assert_eq!(
                    &mem[a as usize..(a + n) as usize],
                    &ct[..],
                    "{what}: ciphertext"
                );
                assert_eq!(
                    &mem[(a + n) as usize..(a + n + 16) as usize],
                    &tag[..],
                    "{what}: tag"
                );

                // Decrypt out of place into the second text range.
                op.direction = Direction::Decrypt;
                op.status = OpStatus::Pending;
                op.dst = a + n + 16;
                engine.process(&keys, &mut mem, std::slice::from_mut(&mut op));
                assert_eq!(op.status, OpStatus::Ok, "{what}: decrypt");
                assert_eq!(&mem[op.dst as usize..], &pt[..], "{what}: plaintext");

                // A flipped tag bit: BadTag, and the output holds zeros, not plaintext.
                mem[(a + n) as usize] ^= 0x80;
                mem[op.dst as usize..].fill(0xee);
                op.status = OpStatus::Pending;
                engine.process(&keys, &mut mem, std::slice::from_mut(&mut op));
                assert_eq!(op.status, OpStatus::BadTag, "{what}: forged");
                assert!(
                    mem[op.dst as usize..].iter().all(|&b| b == 0),
                    "{what}: wiped"
                );
            }
        }
    }
}
