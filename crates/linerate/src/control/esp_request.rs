//! Run-time changes to a gateway's ESP SAs through its control socket: what a key
//! exchange daemon, or an operator with `linerate esp`, sends to add an SA to a
//! tunnel or take one away. The request is text, one `key=value` per line after its
//! first, ended by a blank line, as the socket's other requests:
//!
//! ```text
//! linerate-esp=add            linerate-esp=remove
//! tunnel=site                 tunnel=site
//! direction=in                direction=in
//! spi=0xb0a2                  spi=0xb0a2
//! algorithm=aes128gcm16
//! key=<hex: key then salt>
//! esn=true                    (optional; default false)
//! replay_window=4096          (optional, inbound; default 1024)
//! lifetime_bytes=N            (optional)
//! lifetime_packets=N          (optional)
//! ```
//!
//! Removing the outbound SA needs no SPI (a tunnel has one). An SA added inbound
//! takes packets at once, beside the ones there (so a new key can be put in place
//! before the peer uses it); one added outbound replaces the one there for the next
//! packet. The request is parsed here, off the packet path; the key never appears
//! in a message.

use dataplane::esp::SaSpec;
use ipsec::{EspAlgorithm, Lifetime};
use zeroize::Zeroizing;

/// The first line of an ESP request, before the verb.
pub const PREFIX: &str = "linerate-esp=";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaDirection {
    In,
    Out,
}

impl SaDirection {
    fn parse(s: &str) -> Result<SaDirection, String> {
        match s {
            "in" => Ok(SaDirection::In),
            "out" => Ok(SaDirection::Out),
            other => Err(format!("direction {other:?}: in or out")),
        }
    }
}

pub enum EspRequest {
    Add {
        tunnel: String,
        direction: SaDirection,
        sa: SaSpec,
    },
    Remove {
        tunnel: String,
        direction: SaDirection,
        /// Required inbound; ignored outbound.
        spi: Option<u32>,
    },
}

/// A number in decimal or with `0x`.
fn number(key: &str, v: &str) -> Result<u64, String> {
    let parsed = match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => v.parse(),
    };
    parsed.map_err(|_| format!("{key}: {v:?} is not a number"))
}

fn spi(v: &str) -> Result<u32, String> {
    let n = number("spi", v)?;
    if !(u64::from(wire::esp::MIN_SPI)..=u64::from(u32::MAX)).contains(&n) {
        return Err(format!("spi: {v} is not an SPI (256 to 0xffffffff)"));
    }
    Ok(n as u32)
}

/// Parses the text after `linerate-esp=` (the verb line and its key=value lines).
pub fn parse(text: &str) -> Result<EspRequest, String> {
    let mut lines = text.lines();
    let verb = lines.next().unwrap_or("").trim();
    let (mut tunnel, mut direction, mut spi_v) = (None, None, None);
    let (mut alg, mut key, mut esn) = (None, None::<Zeroizing<Vec<u8>>>, false);
    let mut replay = None;
    let mut lifetime = Lifetime::default();
    for (n, line) in lines.enumerate() {
        // (The line is not quoted back: it may hold the key.)
        let Some((k, v)) = line.split_once('=') else {
            return Err(format!("line {} is not key=value", n + 2));
        };
        match k {
            "tunnel" => tunnel = Some(v.to_string()),
            "direction" => direction = Some(SaDirection::parse(v)?),
            "spi" => spi_v = Some(spi(v)?),
            "algorithm" => {
                alg = Some(EspAlgorithm::from_name(v).ok_or_else(|| {
                    let names: Vec<&str> = EspAlgorithm::ALL.iter().map(|a| a.name()).collect();
                    format!("algorithm {v:?}: one of {}", names.join(", "))
                })?)
            }
            "key" => {
                key = Some(Zeroizing::new(
                    hex::decode(v).map_err(|_| "key: not hex digits".to_string())?,
                ))
            }
            "esn" => {
                esn = match v {
                    "true" => true,
                    "false" => false,
                    _ => return Err(format!("esn: {v:?} is not true or false")),
                }
            }
            "replay_window" => {
                let n = number(k, v)?;
                replay =
                    Some(u32::try_from(n).map_err(|_| format!("replay_window: {n} too large"))?)
            }
            "lifetime_bytes" => lifetime.bytes = Some(number(k, v)?),
            "lifetime_packets" => lifetime.packets = Some(number(k, v)?),
            other => return Err(format!("unknown key {other:?}")),
        }
    }
    let tunnel = tunnel.ok_or("tunnel= is missing")?;
    let direction = direction.ok_or("direction= is missing")?;
    match verb {
        "add" => {
            let spi = spi_v.ok_or("spi= is missing")?;
            let alg = alg.ok_or("algorithm= is missing")?;
            let keymat = key.ok_or("key= is missing")?;
            if keymat.len() != alg.keymat_len() {
                return Err(format!(
                    "key: {alg} takes {} bytes (key and salt), got {}",
                    alg.keymat_len(),
                    keymat.len()
                ));
            }
            if replay.is_some() && direction == SaDirection::Out {
                return Err("replay_window: the replay window is an inbound SA's".into());
            }
            Ok(EspRequest::Add {
                tunnel,
                direction,
                sa: SaSpec {
                    spi,
                    alg,
                    keymat,
                    esn,
                    replay_window: replay.unwrap_or(ipsec::DEFAULT_WINDOW),
                    lifetime,
                },
            })
        }
        "remove" => {
            if direction == SaDirection::In && spi_v.is_none() {
                return Err("spi= is missing (which inbound SA)".into());
            }
            Ok(EspRequest::Remove {
                tunnel,
                direction,
                spi: spi_v,
            })
        }
        other => Err(format!("{other:?}: add or remove")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse_and_bad_ones_say_why() {
        let key = "11".repeat(20);
        let add = format!(
            "add\ntunnel=site\ndirection=in\nspi=0xb0a2\nalgorithm=aes128gcm16\nkey={key}\nesn=true\nreplay_window=4096\nlifetime_packets=10"
        );
        let Ok(EspRequest::Add {
            tunnel,
            direction,
            sa,
        }) = parse(&add)
        else {
            panic!("refused");
        };
        assert_eq!((tunnel.as_str(), direction), ("site", SaDirection::In));
        assert_eq!((sa.spi, sa.esn, sa.replay_window), (0xb0a2, true, 4096));
        assert_eq!(sa.lifetime.packets, Some(10));
        assert!(matches!(
            parse("remove\ntunnel=site\ndirection=out"),
            Ok(EspRequest::Remove { spi: None, .. })
        ));
        for (text, why) in [
            (
                "remove\ntunnel=site\ndirection=in",
                "spi= is missing (which inbound SA)",
            ),
            (
                "add\ntunnel=site\ndirection=in\nspi=255",
                "spi: 255 is not an SPI (256 to 0xffffffff)",
            ),
            ("drop\ntunnel=site\ndirection=in", "\"drop\": add or remove"),
            (
                "add\ntunnel=site\ndirection=up",
                "direction \"up\": in or out",
            ),
            (
                "add\ntunnel=site\ndirection=in\nspi=300\nalgorithm=aes128gcm16\nkey=1122",
                "key: aes128gcm16 takes 20 bytes (key and salt), got 2",
            ),
            ("add\ntunnel=site\nmtu=1", "unknown key \"mtu\""),
            ("add\ndirection=in", "tunnel= is missing"),
        ] {
            assert_eq!(parse(text).err().as_deref(), Some(why), "{text:?}");
        }
        let bad_key = parse("add\ntunnel=t\ndirection=in\nspi=300\nalgorithm=aes128gcm16\nkey=zz");
        assert_eq!(bad_key.err().as_deref(), Some("key: not hex digits"));
    }
}
