//! IKE_SA_INIT as initiator: the request, and the answer that gives the IKE SA its
//! keys (or asks for another group, or a cookie).

use super::*;

/// Hash algorithms for RFC 7427 signatures: SHA2-256, SHA2-384, SHA2-512.
const SIGNATURE_HASHES: [u8; 6] = [0, 2, 0, 3, 0, 4];

impl IkeSa {
    /// With certificates: the hashes we sign and verify with (RFC 7427
    /// SIGNATURE_HASH_ALGORITHMS), and from the responder the CA it trusts
    /// (CERTREQ); strongSwan sends its certificate only when asked.
    pub(super) fn signature_payloads_in_init(&self) -> Vec<Payload> {
        let Some(p) = &self.conn.pubkey else {
            return Vec::new();
        };
        let mut v = vec![Payload::Notify(Notify::new(
            notify::SIGNATURE_HASH_ALGORITHMS,
            SIGNATURE_HASHES.to_vec(),
        ))];
        if self.role == Role::Responder
            && let Ok(hash) = p.ca.spki_sha1()
        {
            v.push(Payload::CertReq {
                encoding: 4,
                data: hash,
            });
        }
        v
    }

    pub(super) fn send_init_request(&mut self, now: Instant) -> Output {
        let dh = self.dh.as_ref().expect("a key pair before IKE_SA_INIT");
        let mut payloads = Vec::new();
        if let Some(c) = &self.cookie {
            payloads.push(Payload::Notify(Notify::new(notify::COOKIE, c.clone())));
        }
        let proposals = self
            .conn
            .ike
            .iter()
            .enumerate()
            .map(|(i, o)| o.to_proposal(i as u8 + 1, Vec::new(), true))
            .collect();
        payloads.push(Payload::Sa(proposals));
        payloads.push(Payload::Ke(KeyExchange {
            group: dh.group().id(),
            data: dh.public().to_vec(),
        }));
        payloads.push(Payload::Nonce(self.ni.clone()));
        let (src, dst) = self.nat_hashes(0);
        payloads.push(Payload::Notify(src));
        payloads.push(Payload::Notify(dst));
        payloads.extend(self.signature_payloads_in_init());
        payloads.push(Payload::Notify(Notify::new(
            notify::IKEV2_FRAGMENTATION_SUPPORTED,
            Vec::new(),
        )));
        self.next_request_id = 0;
        let msg = self.plain_message(self.header(exchange::IKE_SA_INIT, false, 0), &payloads);
        self.init_request = msg.clone();
        let d = self.send_request(vec![msg], Purpose::Plain, now);
        Output {
            datagrams: d,
            ..Output::default()
        }
    }

    pub(super) fn on_init_response(
        &mut self,
        h: &Header,
        payloads: &[Payload],
        msg: &[u8],
        now: Instant,
    ) -> Output {
        let mut out = Output::default();
        if let Some(n) = notify_of(payloads, notify::INVALID_KE_PAYLOAD) {
            let wanted = (n.data.len() == 2)
                .then(|| u16::from_be_bytes([n.data[0], n.data[1]]))
                .and_then(crate::dh::DhGroup::from_id)
                .filter(|g| self.conn.ike.iter().any(|o| o.groups.contains(g)));
            return match wanted {
                Some(g) if self.init_retries < INIT_RETRIES => {
                    self.init_retries += 1;
                    self.dh = Some(KeyPair::generate(g));
                    self.send_init_request(now)
                }
                _ => {
                    self.close(
                        format!(
                            "{}: peer wants a key exchange group not offered",
                            self.conn.name
                        ),
                        &mut out,
                    );
                    out
                }
            };
        }
        if let Some(n) = notify_of(payloads, notify::COOKIE) {
            if self.init_retries >= INIT_RETRIES || n.data.is_empty() || n.data.len() > 64 {
                return Output::dropped("bad-cookie");
            }
            self.init_retries += 1;
            self.cookie = Some(n.data.clone());
            return self.send_init_request(now);
        }
        if let Some(e) = error_notify(payloads) {
            self.close(
                format!(
                    "{}: peer refused IKE_SA_INIT: {}",
                    self.conn.name,
                    notify_name(e)
                ),
                &mut out,
            );
            return out;
        }
        let (Some(sa), Some(ke), Some(nr)) = (payloads.sa(), payloads.ke(), payloads.nonce())
        else {
            return Output::dropped("missing-payload");
        };
        if h.spi_r == 0 || sa.len() != 1 {
            return Output::dropped("malformed");
        }
        let Some(chosen) = self
            .conn
            .ike
            .iter()
            .find_map(|o| o.accept_reply(&sa[0], true))
        else {
            self.close(
                format!(
                    "{}: peer chose an IKE proposal we did not offer",
                    self.conn.name
                ),
                &mut out,
            );
            return out;
        };
        let dh = self.dh.as_ref().expect("key pair");
        if chosen.group != Some(dh.group()) || ke.group != dh.group().id() {
            return Output::dropped("ke-group-mismatch");
        }
        let Ok(shared) = dh.agree(&ke.data) else {
            return Output::dropped("bad-ke");
        };
        self.spi_r = h.spi_r;
        self.nr = nr.clone();
        self.install_ike_keys(chosen, &shared);
        (self.behind_nat, self.nat_ours) = self.detect_nat(payloads, self.spi_r);
        self.fragmentation = notify_of(payloads, notify::IKEV2_FRAGMENTATION_SUPPORTED).is_some();
        self.init_response = msg.to_vec();
        self.outstanding = None;
        if self.behind_nat {
            self.local.set_port(NAT_T_PORT);
            self.remote.set_port(NAT_T_PORT);
        }
        out.datagrams.extend(self.send_auth_request(now));
        out
    }

    pub(super) fn install_ike_keys(&mut self, chosen: Chosen, shared: &[u8]) {
        let prf = chosen.prf.expect("IKE choices have a PRF");
        let seed = keys::skeyseed(prf, &self.ni, &self.nr, shared);
        self.install_keys_from_seed(chosen, &seed);
    }

    /// The IKE SA's keys from SKEYSEED, its nonces and SPIs, each direction's
    /// cipher by this end's role.
    pub(super) fn install_keys_from_seed(&mut self, chosen: Chosen, seed: &[u8]) {
        let prf = chosen.prf.expect("IKE choices have a PRF");
        let k = IkeKeys::derive(
            prf,
            chosen.cipher,
            seed,
            &self.ni,
            &self.nr,
            self.spi_i,
            self.spi_r,
        );
        let (tx_key, rx_key) = match self.role {
            Role::Initiator => (&k.sk_ei, &k.sk_er),
            Role::Responder => (&k.sk_er, &k.sk_ei),
        };
        self.tx = Some(SkCipher::new(chosen.cipher, tx_key));
        self.rx = Some(SkCipher::new(chosen.cipher, rx_key));
        self.keys = Some(k);
        self.chosen = Some(chosen);
        // The key pair has done its work.
        self.dh = None;
    }
}
