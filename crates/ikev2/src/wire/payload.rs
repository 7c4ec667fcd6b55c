//! The chain of generic payloads (RFC 7296 section 3.2) and the bodies of the
//! payloads IKE_SA_INIT, IKE_AUTH, CREATE_CHILD_SA and INFORMATIONAL carry.

use super::{Error, Proposal, TrafficSelector, be16, payload_type as pt, sa, ts};

/// Critical bit of the generic payload header.
const CRITICAL: u8 = 0x80;
const GENERIC_LEN: usize = 4;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyExchange {
    pub group: u16,
    pub data: Vec<u8>,
}

/// An IDi or IDr payload: the type and the identity's bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identification {
    pub kind: u8,
    pub data: Vec<u8>,
}

impl Identification {
    /// The payload's body (type, three reserved bytes, data): what the AUTH payload
    /// MACs or signs (RFC 7296 section 2.15, RestOfInitIDPayload).
    pub fn body(&self) -> Vec<u8> {
        let mut b = vec![self.kind, 0, 0, 0];
        b.extend_from_slice(&self.data);
        b
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Auth {
    pub method: u8,
    pub data: Vec<u8>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notify {
    pub protocol: u8,
    pub spi: Vec<u8>,
    pub kind: u16,
    pub data: Vec<u8>,
}

impl Notify {
    /// A notify about the IKE SA (no protocol, no SPI).
    pub fn new(kind: u16, data: Vec<u8>) -> Notify {
        Notify {
            protocol: 0,
            spi: Vec::new(),
            kind,
            data,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delete {
    pub protocol: u8,
    /// Each SPI, all the same size (none for the IKE SA itself).
    pub spis: Vec<Vec<u8>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Payload {
    Sa(Vec<Proposal>),
    Ke(KeyExchange),
    IdI(Identification),
    IdR(Identification),
    Cert {
        encoding: u8,
        data: Vec<u8>,
    },
    CertReq {
        encoding: u8,
        data: Vec<u8>,
    },
    Auth(Auth),
    Nonce(Vec<u8>),
    Notify(Notify),
    Delete(Delete),
    Vendor(Vec<u8>),
    TsI(Vec<TrafficSelector>),
    TsR(Vec<TrafficSelector>),
    /// The encrypted payload: always the last of its chain. `first_inner` is the
    /// type of the first payload inside; `start` is where its generic header begins
    /// in the bytes given to [`parse_chain`].
    Encrypted {
        first_inner: u8,
        start: usize,
    },
    /// An encrypted fragment (RFC 7383): the same, for one piece of a message;
    /// `first_inner` is zero but in the first.
    EncryptedFragment {
        first_inner: u8,
        start: usize,
    },
    /// A payload this implementation does not interpret and that is not critical
    /// (configuration, EAP, fragments, private use): kept so it can be ignored.
    Other {
        kind: u8,
        body: Vec<u8>,
    },
}

impl Payload {
    pub fn kind(&self) -> u8 {
        match self {
            Payload::Sa(_) => pt::SA,
            Payload::Ke(_) => pt::KE,
            Payload::IdI(_) => pt::IDI,
            Payload::IdR(_) => pt::IDR,
            Payload::Cert { .. } => pt::CERT,
            Payload::CertReq { .. } => pt::CERTREQ,
            Payload::Auth(_) => pt::AUTH,
            Payload::Nonce(_) => pt::NONCE,
            Payload::Notify(_) => pt::NOTIFY,
            Payload::Delete(_) => pt::DELETE,
            Payload::Vendor(_) => pt::VENDOR,
            Payload::TsI(_) => pt::TSI,
            Payload::TsR(_) => pt::TSR,
            Payload::Encrypted { .. } => pt::SK,
            Payload::EncryptedFragment { .. } => pt::SKF,
            Payload::Other { kind, .. } => *kind,
        }
    }

    fn emit_body(&self, out: &mut Vec<u8>) {
        match self {
            Payload::Sa(p) => sa::emit(p, out),
            Payload::Ke(ke) => {
                out.extend_from_slice(&ke.group.to_be_bytes());
                out.extend_from_slice(&[0, 0]);
                out.extend_from_slice(&ke.data);
            }
            Payload::IdI(id) | Payload::IdR(id) => out.extend_from_slice(&id.body()),
            Payload::Cert { encoding, data } | Payload::CertReq { encoding, data } => {
                out.push(*encoding);
                out.extend_from_slice(data);
            }
            Payload::Auth(a) => {
                out.extend_from_slice(&[a.method, 0, 0, 0]);
                out.extend_from_slice(&a.data);
            }
            Payload::Nonce(n) | Payload::Vendor(n) => out.extend_from_slice(n),
            Payload::Notify(n) => {
                out.extend_from_slice(&[n.protocol, n.spi.len() as u8]);
                out.extend_from_slice(&n.kind.to_be_bytes());
                out.extend_from_slice(&n.spi);
                out.extend_from_slice(&n.data);
            }
            Payload::Delete(d) => {
                let spi_size = d.spis.first().map_or(0, Vec::len);
                out.extend_from_slice(&[d.protocol, spi_size as u8]);
                out.extend_from_slice(&(d.spis.len() as u16).to_be_bytes());
                for s in &d.spis {
                    out.extend_from_slice(s);
                }
            }
            Payload::TsI(t) | Payload::TsR(t) => ts::emit(t, out),
            Payload::Encrypted { .. } | Payload::EncryptedFragment { .. } => {}
            Payload::Other { body, .. } => out.extend_from_slice(body),
        }
    }
}

/// The first payload of each kind in a chain, by name: what every exchange looks
/// for in what it received.
pub trait Find {
    fn sa(&self) -> Option<&Vec<Proposal>>;
    fn ke(&self) -> Option<&KeyExchange>;
    fn nonce(&self) -> Option<&Vec<u8>>;
    fn auth(&self) -> Option<&Auth>;
    fn id_i(&self) -> Option<&Identification>;
    fn id_r(&self) -> Option<&Identification>;
    fn ts_i(&self) -> Option<&Vec<TrafficSelector>>;
    fn ts_r(&self) -> Option<&Vec<TrafficSelector>>;
}

macro_rules! first_of {
    ($self:ident, $variant:ident) => {
        $self.iter().find_map(|p| match p {
            Payload::$variant(x) => Some(x),
            _ => None,
        })
    };
}

impl Find for [Payload] {
    fn sa(&self) -> Option<&Vec<Proposal>> {
        first_of!(self, Sa)
    }
    fn ke(&self) -> Option<&KeyExchange> {
        first_of!(self, Ke)
    }
    fn nonce(&self) -> Option<&Vec<u8>> {
        first_of!(self, Nonce)
    }
    fn auth(&self) -> Option<&Auth> {
        first_of!(self, Auth)
    }
    fn id_i(&self) -> Option<&Identification> {
        first_of!(self, IdI)
    }
    fn id_r(&self) -> Option<&Identification> {
        first_of!(self, IdR)
    }
    fn ts_i(&self) -> Option<&Vec<TrafficSelector>> {
        first_of!(self, TsI)
    }
    fn ts_r(&self) -> Option<&Vec<TrafficSelector>> {
        first_of!(self, TsR)
    }
}

/// Nonces are 16 to 256 bytes (RFC 7296 section 3.9).
const NONCE_LEN: core::ops::RangeInclusive<usize> = 16..=256;

fn parse_body(kind: u8, critical: bool, body: &[u8]) -> Result<Payload, Error> {
    Ok(match kind {
        pt::SA => Payload::Sa(sa::parse(body)?),
        pt::KE => {
            if body.len() < 4 {
                return Err(Error::Truncated);
            }
            Payload::Ke(KeyExchange {
                group: be16(body, 0),
                data: body[4..].to_vec(),
            })
        }
        pt::IDI | pt::IDR => {
            if body.len() < 4 {
                return Err(Error::Truncated);
            }
            let id = Identification {
                kind: body[0],
                data: body[4..].to_vec(),
            };
            if kind == pt::IDI {
                Payload::IdI(id)
            } else {
                Payload::IdR(id)
            }
        }
        pt::CERT | pt::CERTREQ => {
            let (&encoding, data) = body.split_first().ok_or(Error::Truncated)?;
            let data = data.to_vec();
            if kind == pt::CERT {
                Payload::Cert { encoding, data }
            } else {
                Payload::CertReq { encoding, data }
            }
        }
        pt::AUTH => {
            if body.len() < 4 {
                return Err(Error::Truncated);
            }
            Payload::Auth(Auth {
                method: body[0],
                data: body[4..].to_vec(),
            })
        }
        pt::NONCE => {
            if !NONCE_LEN.contains(&body.len()) {
                return Err(Error::Malformed("nonce length"));
            }
            Payload::Nonce(body.to_vec())
        }
        pt::NOTIFY => {
            if body.len() < 4 {
                return Err(Error::Truncated);
            }
            let spi_len = usize::from(body[1]);
            if 4 + spi_len > body.len() {
                return Err(Error::BadLength);
            }
            Payload::Notify(Notify {
                protocol: body[0],
                spi: body[4..4 + spi_len].to_vec(),
                kind: be16(body, 2),
                data: body[4 + spi_len..].to_vec(),
            })
        }
        pt::DELETE => {
            if body.len() < 4 {
                return Err(Error::Truncated);
            }
            let (spi_len, count) = (usize::from(body[1]), usize::from(be16(body, 2)));
            let spis = &body[4..];
            if spi_len * count != spis.len() || (spi_len == 0 && count != 0) {
                return Err(Error::BadLength);
            }
            Payload::Delete(Delete {
                protocol: body[0],
                spis: spis.chunks(spi_len.max(1)).map(<[u8]>::to_vec).collect(),
            })
        }
        pt::VENDOR => Payload::Vendor(body.to_vec()),
        pt::TSI => Payload::TsI(ts::parse(body)?),
        pt::TSR => Payload::TsR(ts::parse(body)?),
        pt::CP | pt::EAP | pt::SKF => Payload::Other {
            kind,
            body: body.to_vec(),
        },
        _ if critical => return Err(Error::UnsupportedCritical(kind)),
        _ => Payload::Other {
            kind,
            body: body.to_vec(),
        },
    })
}

/// Parses a chain of payloads starting with type `first`, to the end of `bytes`.
/// The encrypted payload ends the chain: it must be last, and its body is left to
/// [`crate::sk`].
pub fn parse_chain(first: u8, bytes: &[u8]) -> Result<Vec<Payload>, Error> {
    let mut out = Vec::new();
    let (mut kind, mut at) = (first, 0usize);
    while kind != pt::NONE {
        let rest = &bytes[at..];
        if rest.len() < GENERIC_LEN {
            return Err(Error::Truncated);
        }
        let next = rest[0];
        let critical = rest[1] & CRITICAL != 0;
        let len = usize::from(be16(rest, 2));
        if len < GENERIC_LEN || len > rest.len() {
            return Err(Error::BadLength);
        }
        if kind == pt::SK || kind == pt::SKF {
            if at + len != bytes.len() {
                return Err(Error::Malformed("encrypted payload not last"));
            }
            out.push(if kind == pt::SK {
                Payload::Encrypted {
                    first_inner: next,
                    start: at,
                }
            } else {
                Payload::EncryptedFragment {
                    first_inner: next,
                    start: at,
                }
            });
            return Ok(out);
        }
        out.push(parse_body(kind, critical, &rest[GENERIC_LEN..len])?);
        at += len;
        kind = next;
    }
    if at != bytes.len() {
        return Err(Error::BadLength);
    }
    Ok(out)
}

/// Writes `payloads` as a chain; returns the first payload's type (for the header
/// or the encrypted payload) and the bytes.
pub fn emit_chain(payloads: &[Payload]) -> (u8, Vec<u8>) {
    let mut out = Vec::new();
    for (i, p) in payloads.iter().enumerate() {
        let next = payloads.get(i + 1).map_or(pt::NONE, Payload::kind);
        let start = out.len();
        out.extend_from_slice(&[next, 0, 0, 0]);
        p.emit_body(&mut out);
        let len = (out.len() - start) as u16;
        out[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
    }
    (payloads.first().map_or(pt::NONE, Payload::kind), out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Transform, notify};

    fn sample() -> Vec<Payload> {
        vec![
            Payload::Sa(vec![Proposal {
                number: 1,
                protocol: 1,
                spi: vec![],
                transforms: vec![Transform::new(1, 20, Some(256)), Transform::new(2, 5, None)],
            }]),
            Payload::Ke(KeyExchange {
                group: 31,
                data: vec![7; 32],
            }),
            Payload::Nonce(vec![9; 32]),
            Payload::Notify(Notify::new(notify::NAT_DETECTION_SOURCE_IP, vec![1; 20])),
            Payload::Delete(Delete {
                protocol: 3,
                spis: vec![vec![1, 2, 3, 4], vec![5, 6, 7, 8]],
            }),
            Payload::IdI(Identification {
                kind: 2,
                data: b"a.example".to_vec(),
            }),
            Payload::Auth(Auth {
                method: 2,
                data: vec![3; 32],
            }),
            Payload::TsI(vec![TrafficSelector::any(false)]),
            Payload::Vendor(b"vendor".to_vec()),
        ]
    }

    #[test]
    fn chains_round_trip() {
        let (first, bytes) = emit_chain(&sample());
        assert_eq!(first, pt::SA);
        assert_eq!(parse_chain(first, &bytes).unwrap(), sample());
        for cut in 0..bytes.len() {
            assert!(parse_chain(first, &bytes[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn unknown_payloads_are_skipped_unless_critical() {
        let mut chain = vec![0, 0, 0, 6, 0xaa, 0xbb];
        assert_eq!(
            parse_chain(200, &chain).unwrap(),
            vec![Payload::Other {
                kind: 200,
                body: vec![0xaa, 0xbb]
            }]
        );
        chain[1] = CRITICAL;
        assert_eq!(
            parse_chain(200, &chain),
            Err(Error::UnsupportedCritical(200))
        );
    }

    #[test]
    fn encrypted_payload_must_be_last() {
        let nonce = emit_chain(&[Payload::Nonce(vec![1; 16])]).1;
        let mut bytes = vec![pt::NONCE, 0, 0, 8, 1, 2, 3, 4];
        bytes.extend_from_slice(&nonce);
        assert!(parse_chain(pt::SK, &bytes).is_err());
        let ok = vec![pt::IDI, 0, 0, 8, 1, 2, 3, 4];
        assert_eq!(
            parse_chain(pt::SK, &ok).unwrap(),
            vec![Payload::Encrypted {
                first_inner: pt::IDI,
                start: 0
            }]
        );
    }

    #[test]
    fn short_nonces_and_bad_deletes_are_refused() {
        let (f, b) = emit_chain(&[Payload::Nonce(vec![1; 15])]);
        assert!(parse_chain(f, &b).is_err());
        let bad_delete = vec![0, 0, 0, 11, 3, 4, 0, 2, 1, 2, 3];
        assert!(parse_chain(pt::DELETE, &bad_delete).is_err());
    }
}
