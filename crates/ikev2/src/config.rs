//! One connection's configuration: who the two ends are, how they authenticate,
//! what they may propose, what traffic the child SA carries, and the timers.

use crate::proposal::Offer;
use crate::wire::{Identification, TrafficSelector, id_type};
use std::net::IpAddr;
use std::time::Duration;
use zeroize::Zeroizing;

#[derive(Clone, Debug)]
pub struct Timers {
    /// The first retransmission of a request waits this long; each next one
    /// twice as long.
    pub retransmit_base: Duration,
    /// Sends of one request before the peer is declared dead (the first included).
    pub retransmit_tries: u32,
    /// Dead peer detection: with no message from the peer for this long, an empty
    /// INFORMATIONAL request asks whether it is alive. None turns it off.
    pub dpd: Option<Duration>,
    /// Our side rekeys the child SA this long after it was made (up to a tenth
    /// earlier, at random); None leaves it to the peer.
    pub child_rekey: Option<Duration>,
    /// The same for the IKE SA.
    pub ike_rekey: Option<Duration>,
    /// With a NAT in front of us, a NAT keepalive (RFC 3948 section 2.3) this
    /// often, so that the NAT's mapping outlives a quiet tunnel. None: none.
    pub nat_keepalive: Option<Duration>,
}

impl Default for Timers {
    fn default() -> Timers {
        Timers {
            retransmit_base: Duration::from_secs(2),
            retransmit_tries: 5,
            dpd: Some(Duration::from_secs(30)),
            child_rekey: Some(Duration::from_secs(3600)),
            ike_rekey: Some(Duration::from_secs(4 * 3600)),
            nat_keepalive: Some(Duration::from_secs(20)),
        }
    }
}

/// Authentication with a certificate and its key (RFC 7427 signatures), the peer's
/// certificate issued by `ca`.
pub struct PubkeyAuth {
    pub cert: crate::cert::Certificate,
    /// The intermediate CAs between `cert` and the peer's trusted CA, sent with
    /// it.
    pub intermediates: Vec<crate::cert::Certificate>,
    pub key: crate::cert::PrivateKey,
    pub ca: crate::cert::Certificate,
    /// The peer's subject, as strongSwan writes a DN ("C=CH, O=linerate,
    /// CN=gw-b"); None: any certificate the CA issued.
    pub remote_dn: Option<String>,
}

pub struct Connection {
    pub name: String,
    pub local_addr: IpAddr,
    /// Unspecified (0.0.0.0 or ::): a responder that takes its peer from any
    /// address.
    pub remote_addr: IpAddr,
    pub local_id: Identification,
    /// None accepts any identity the pre-shared key authenticates.
    pub remote_id: Option<Identification>,
    /// The pre-shared key, when `pubkey` is None.
    pub psk: Zeroizing<Vec<u8>>,
    /// Certificates instead of the pre-shared key; `local_id` is then the
    /// certificate's subject (ID_DER_ASN1_DN).
    pub pubkey: Option<PubkeyAuth>,
    /// IKE proposals, in order of preference.
    pub ike: Vec<Offer>,
    /// ESP proposals for the child SA, in order of preference.
    pub esp: Vec<Offer>,
    pub local_ts: Vec<TrafficSelector>,
    pub remote_ts: Vec<TrafficSelector>,
    /// Start the IKE SA ourselves, and start it again whenever it closes (strongSwan's
    /// `start_action = start` with `dpd_action = restart`); false waits for the peer.
    pub start: bool,
    /// Claim to be behind a NAT so ESP goes in UDP even without one (strongSwan's
    /// `encap = yes`).
    pub encap: bool,
    pub timers: Timers,
}

/// Parses an identity the way strongSwan's configuration writes it: an IP address,
/// `user@domain` (RFC 822), or a host name with or without a leading `@` (FQDN).
pub fn parse_identity(text: &str) -> Result<Identification, String> {
    if text.is_empty() {
        return Err("empty identity".into());
    }
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Ok(match ip {
            IpAddr::V4(a) => Identification {
                kind: id_type::IPV4_ADDR,
                data: a.octets().to_vec(),
            },
            IpAddr::V6(a) => Identification {
                kind: id_type::IPV6_ADDR,
                data: a.octets().to_vec(),
            },
        });
    }
    if let Some(fqdn) = text.strip_prefix('@') {
        if fqdn.is_empty() {
            return Err("empty identity after '@'".into());
        }
        return Ok(Identification {
            kind: id_type::FQDN,
            data: fqdn.as_bytes().to_vec(),
        });
    }
    let kind = if text.contains('@') {
        id_type::RFC822_ADDR
    } else {
        id_type::FQDN
    };
    Ok(Identification {
        kind,
        data: text.as_bytes().to_vec(),
    })
}

/// An identity as text, for logs and `show ike`.
pub fn describe_identity(id: &Identification) -> String {
    match (id.kind, id.data.len()) {
        (id_type::IPV4_ADDR, 4) => {
            IpAddr::from(<[u8; 4]>::try_from(id.data.as_slice()).expect("4 bytes")).to_string()
        }
        (id_type::IPV6_ADDR, 16) => {
            IpAddr::from(<[u8; 16]>::try_from(id.data.as_slice()).expect("16 bytes")).to_string()
        }
        (id_type::FQDN | id_type::RFC822_ADDR, _) => String::from_utf8_lossy(&id.data).into_owned(),
        (kind, _) => format!("type {kind}: {} bytes", id.data.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_parse_like_strongswan() {
        assert_eq!(
            parse_identity("198.18.0.1").unwrap().kind,
            id_type::IPV4_ADDR
        );
        assert_eq!(parse_identity("2001:2::1").unwrap().data.len(), 16);
        let f = parse_identity("@gw.example").unwrap();
        assert_eq!(
            (f.kind, f.data.as_slice()),
            (id_type::FQDN, b"gw.example".as_slice())
        );
        assert_eq!(parse_identity("gw.example").unwrap(), f);
        assert_eq!(
            parse_identity("ops@example").unwrap().kind,
            id_type::RFC822_ADDR
        );
        assert!(parse_identity("").is_err() && parse_identity("@").is_err());
        for t in ["198.18.0.1", "2001:2::1", "gw.example", "ops@example"] {
            assert_eq!(describe_identity(&parse_identity(t).unwrap()), t);
        }
    }
}
