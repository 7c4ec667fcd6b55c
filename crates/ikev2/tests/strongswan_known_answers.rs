//! Known answers from strongSwan: exchanges charon started with a linerate gateway,
//! captured on the wire, with the keys charon derived taken from its log
//! (`tests/ike/capture_strongswan.sh` made the files in tests/data). From the
//! messages and the Diffie-Hellman secret alone this crate must derive charon's
//! SKEYSEED and every SK_*, parse every message, open the encrypted ones with
//! those keys, and verify both AUTH payloads with the pre-shared key.

use ikev2::auth;
use ikev2::keys::{IkeKeys, skeyseed};
use ikev2::proposal::{Kind, Offer};
use ikev2::sk::SkCipher;
use ikev2::wire::{HEADER_LEN, Header, Payload, exchange, parse_chain};
use std::collections::HashMap;

struct Case {
    values: HashMap<String, Vec<u8>>,
    text: HashMap<String, String>,
    /// (from the initiator, message) in wire order.
    messages: Vec<(bool, Vec<u8>)>,
}

fn load(name: &str) -> Case {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    let body = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut case = Case {
        values: HashMap::new(),
        text: HashMap::new(),
        messages: Vec::new(),
    };
    for line in body
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let (k, v) = line.split_once(" = ").expect("key = value");
        match k {
            "initiator" | "responder" => case
                .messages
                .push((k == "initiator", hex::decode(v).unwrap())),
            "ike" | "esp" => {
                case.text.insert(k.into(), v.into());
            }
            _ => {
                case.values.insert(k.into(), hex::decode(v).unwrap());
            }
        }
    }
    assert_eq!(
        case.messages.len(),
        4,
        "IKE_SA_INIT and IKE_AUTH, both ways"
    );
    case
}

fn payloads(msg: &[u8]) -> (Header, Vec<Payload>) {
    let h = Header::parse(msg).expect("charon's header parses");
    let p = parse_chain(h.next_payload, &msg[HEADER_LEN..]).expect("charon's payloads parse");
    (h, p)
}

fn nonce(p: &[Payload]) -> Vec<u8> {
    p.iter()
        .find_map(|p| {
            if let Payload::Nonce(n) = p {
                Some(n.clone())
            } else {
                None
            }
        })
        .expect("a nonce")
}

fn check(name: &str) {
    let c = load(name);
    let v = |k: &str| c.values[k].as_slice();
    let offer = Offer::parse(Kind::Ike, &c.text["ike"]).unwrap();
    let (cipher, prf) = (offer.ciphers[0], offer.prfs[0]);

    let (h1, p1) = payloads(&c.messages[0].1);
    let (h2, p2) = payloads(&c.messages[1].1);
    assert!(c.messages[0].0 && !c.messages[1].0);
    assert_eq!(
        (h1.exchange, h2.exchange),
        (exchange::IKE_SA_INIT, exchange::IKE_SA_INIT)
    );
    let (ni, nr) = (nonce(&p1), nonce(&p2));

    let seed = skeyseed(prf, &ni, &nr, v("g_ir"));
    assert_eq!(&seed[..], v("skeyseed"), "{name}: SKEYSEED");
    let k = IkeKeys::derive(prf, cipher, &seed, &ni, &nr, h2.spi_i, h2.spi_r);
    assert_eq!(&k.sk_d[..], v("sk_d"), "{name}: SK_d");
    assert_eq!(&k.sk_ei[..], v("sk_ei"), "{name}: SK_ei");
    assert_eq!(&k.sk_er[..], v("sk_er"), "{name}: SK_er");
    assert_eq!(&k.sk_pi[..], v("sk_pi"), "{name}: SK_pi");
    assert_eq!(&k.sk_pr[..], v("sk_pr"), "{name}: SK_pr");

    // IKE_AUTH, each way: open it, find the identity and AUTH, verify.
    for (i, (from_initiator, msg)) in c.messages.iter().enumerate().skip(2) {
        let (h, outer) = payloads(msg);
        assert_eq!(h.exchange, exchange::IKE_AUTH);
        let Some(Payload::Encrypted { first_inner, start }) = outer.last() else {
            panic!("{name}: message {i} is not encrypted")
        };
        let key = if *from_initiator { &k.sk_ei } else { &k.sk_er };
        let plain = SkCipher::new(cipher, key)
            .open(msg, HEADER_LEN + start)
            .unwrap_or_else(|e| panic!("{name}: message {i} does not open: {e}"));
        let inner = parse_chain(*first_inner, &plain).expect("the inner payloads parse");
        let id = inner
            .iter()
            .find_map(|p| match p {
                Payload::IdI(id) if *from_initiator => Some(id),
                Payload::IdR(id) if !*from_initiator => Some(id),
                _ => None,
            })
            .expect("an identity");
        let a = inner
            .iter()
            .find_map(|p| {
                if let Payload::Auth(a) = p {
                    Some(a)
                } else {
                    None
                }
            })
            .expect("AUTH");
        let (first, peer_nonce, sk_p) = if *from_initiator {
            (&c.messages[0].1, &nr, &k.sk_pi)
        } else {
            (&c.messages[1].1, &ni, &k.sk_pr)
        };
        let octets = auth::signed_octets(prf, first, peer_nonce, sk_p, id);
        assert!(
            auth::verify_psk(prf, v("psk"), &octets, &a.data),
            "{name}: message {i}'s AUTH"
        );
        assert!(!auth::verify_psk(prf, b"not the key", &octets, &a.data));
    }
}

#[test]
fn aes_gcm_with_ecp256_and_hmac_sha256() {
    check("strongswan_aes_ecp256.txt");
}

#[test]
fn chacha20_poly1305_with_x25519_and_hmac_sha384() {
    check("strongswan_chacha_x25519.txt");
}
