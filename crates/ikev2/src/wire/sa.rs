//! The SA payload's body (RFC 7296 section 3.3): proposals, each a protocol, an SPI
//! and transforms, each transform with attributes (only Key Length is defined).

use super::{Error, be16};

/// Attribute type of the Key Length attribute, the only one RFC 7296 defines.
pub const KEY_LENGTH: u16 = 14;
/// Attribute format bit: the value is the two bytes after the type (TV).
const SHORT_FORM: u16 = 0x8000;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attribute {
    pub kind: u16,
    pub value: Vec<u8>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transform {
    pub kind: u8,
    pub id: u16,
    pub attributes: Vec<Attribute>,
}

impl Transform {
    pub fn new(kind: u8, id: u16, key_bits: Option<u16>) -> Transform {
        let attributes = key_bits
            .map(|bits| {
                vec![Attribute {
                    kind: KEY_LENGTH,
                    value: bits.to_be_bytes().to_vec(),
                }]
            })
            .into_iter()
            .flatten()
            .collect();
        Transform {
            kind,
            id,
            attributes,
        }
    }

    /// The Key Length attribute in bits, if present and well formed.
    pub fn key_bits(&self) -> Option<u16> {
        self.attributes
            .iter()
            .find(|a| a.kind == KEY_LENGTH)
            .and_then(|a| Some(u16::from_be_bytes(a.value.as_slice().try_into().ok()?)))
    }

    /// Whether every attribute is one this implementation understands: a transform
    /// with any other must not be chosen (RFC 7296 section 3.3.6).
    pub fn attributes_understood(&self) -> bool {
        self.attributes
            .iter()
            .all(|a| a.kind == KEY_LENGTH && a.value.len() == 2)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proposal {
    /// Numbered from 1 in the sender's order; a reply echoes the chosen number.
    pub number: u8,
    pub protocol: u8,
    /// Empty for an IKE SA's first proposal; 4 bytes for ESP; 8 for IKE rekeying.
    pub spi: Vec<u8>,
    pub transforms: Vec<Transform>,
}

/// Parses an SA payload's body into its proposals.
pub fn parse(mut body: &[u8]) -> Result<Vec<Proposal>, Error> {
    let mut proposals = Vec::new();
    loop {
        if body.len() < 8 {
            return Err(Error::Truncated);
        }
        let last = match body[0] {
            0 => true,
            2 => false,
            _ => return Err(Error::Malformed("proposal last-substructure field")),
        };
        let len = usize::from(be16(body, 2));
        if len < 8 || len > body.len() {
            return Err(Error::BadLength);
        }
        let (number, protocol, spi_len, count) = (body[4], body[5], usize::from(body[6]), body[7]);
        let p = &body[..len];
        if 8 + spi_len > len {
            return Err(Error::BadLength);
        }
        let spi = p[8..8 + spi_len].to_vec();
        let transforms = parse_transforms(&p[8 + spi_len..], count)?;
        proposals.push(Proposal {
            number,
            protocol,
            spi,
            transforms,
        });
        body = &body[len..];
        if last {
            return if body.is_empty() {
                Ok(proposals)
            } else {
                Err(Error::BadLength)
            };
        }
    }
}

fn parse_transforms(mut body: &[u8], count: u8) -> Result<Vec<Transform>, Error> {
    let mut out = Vec::with_capacity(usize::from(count));
    for i in 0..count {
        if body.len() < 8 {
            return Err(Error::Truncated);
        }
        let last = i + 1 == count;
        match (body[0], last) {
            (0, true) | (3, false) => {}
            _ => return Err(Error::Malformed("transform last-substructure field")),
        }
        let len = usize::from(be16(body, 2));
        if len < 8 || len > body.len() {
            return Err(Error::BadLength);
        }
        let t = &body[..len];
        out.push(Transform {
            kind: t[4],
            id: be16(t, 6),
            attributes: parse_attributes(&t[8..])?,
        });
        body = &body[len..];
    }
    if body.is_empty() {
        Ok(out)
    } else {
        Err(Error::BadLength)
    }
}

fn parse_attributes(mut body: &[u8]) -> Result<Vec<Attribute>, Error> {
    let mut out = Vec::new();
    while !body.is_empty() {
        if body.len() < 4 {
            return Err(Error::Truncated);
        }
        let kind = be16(body, 0);
        if kind & SHORT_FORM != 0 {
            out.push(Attribute {
                kind: kind & !SHORT_FORM,
                value: body[2..4].to_vec(),
            });
            body = &body[4..];
        } else {
            let len = usize::from(be16(body, 2));
            if 4 + len > body.len() {
                return Err(Error::BadLength);
            }
            out.push(Attribute {
                kind,
                value: body[4..4 + len].to_vec(),
            });
            body = &body[4 + len..];
        }
    }
    Ok(out)
}

/// Appends the SA payload body for `proposals`.
pub fn emit(proposals: &[Proposal], out: &mut Vec<u8>) {
    for (i, p) in proposals.iter().enumerate() {
        let start = out.len();
        out.push(if i + 1 == proposals.len() { 0 } else { 2 });
        out.push(0);
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&[
            p.number,
            p.protocol,
            p.spi.len() as u8,
            p.transforms.len() as u8,
        ]);
        out.extend_from_slice(&p.spi);
        for (j, t) in p.transforms.iter().enumerate() {
            let t_start = out.len();
            out.push(if j + 1 == p.transforms.len() { 0 } else { 3 });
            out.push(0);
            out.extend_from_slice(&[0, 0]);
            out.push(t.kind);
            out.push(0);
            out.extend_from_slice(&t.id.to_be_bytes());
            for a in &t.attributes {
                if a.value.len() == 2 && a.kind == KEY_LENGTH {
                    out.extend_from_slice(&(a.kind | SHORT_FORM).to_be_bytes());
                    out.extend_from_slice(&a.value);
                } else {
                    out.extend_from_slice(&a.kind.to_be_bytes());
                    out.extend_from_slice(&(a.value.len() as u16).to_be_bytes());
                    out.extend_from_slice(&a.value);
                }
            }
            let t_len = (out.len() - t_start) as u16;
            out[t_start + 2..t_start + 4].copy_from_slice(&t_len.to_be_bytes());
        }
        let len = (out.len() - start) as u16;
        out[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Proposal> {
        vec![
            Proposal {
                number: 1,
                protocol: 3,
                spi: vec![1, 2, 3, 4],
                transforms: vec![Transform::new(1, 20, Some(256)), Transform::new(5, 0, None)],
            },
            Proposal {
                number: 2,
                protocol: 3,
                spi: vec![1, 2, 3, 4],
                transforms: vec![Transform::new(1, 28, None)],
            },
        ]
    }

    #[test]
    fn round_trips() {
        let mut b = Vec::new();
        emit(&sample(), &mut b);
        let parsed = parse(&b).unwrap();
        assert_eq!(parsed, sample());
        assert_eq!(parsed[0].transforms[0].key_bits(), Some(256));
        assert!(parsed[0].transforms[0].attributes_understood());
    }

    #[test]
    fn refuses_every_truncation_and_bad_counts() {
        let mut b = Vec::new();
        emit(&sample(), &mut b);
        for cut in 0..b.len() {
            assert!(parse(&b[..cut]).is_err(), "cut at {cut}");
        }
        let mut more = b.clone();
        more[7] = 3; // three transforms claimed, two present
        assert!(parse(&more).is_err());
        let mut trailing = b.clone();
        trailing.push(0);
        assert!(parse(&trailing).is_err());
    }
}
