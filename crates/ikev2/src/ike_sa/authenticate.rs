//! IKE_AUTH as initiator, and the AUTH payload either end computes and checks.

use super::*;

/// CERT and CERTREQ encoding of an X.509 certificate (RFC 7296 section 3.6).
const CERT_X509_SIGNATURE: u8 = 4;

/// What a child SA's keys come from (see `make_child_with`).
pub(super) struct KeyExchangeInput<'a> {
    pub ni: &'a [u8],
    pub nr: &'a [u8],
    pub shared: Option<&'a [u8]>,
    pub we_initiated: bool,
}

impl IkeSa {
    /// The AUTH payload for our side.
    pub(super) fn our_auth(&self) -> Auth {
        let k = self.keys.as_ref().expect("keys");
        let (first, peer_nonce, sk_p) = match self.role {
            Role::Initiator => (&self.init_request, &self.nr, &k.sk_pi),
            Role::Responder => (&self.init_response, &self.ni, &k.sk_pr),
        };
        let octets = auth::signed_octets(k.prf, first, peer_nonce, sk_p, &self.conn.local_id);
        match &self.conn.pubkey {
            Some(p) => Auth {
                method: auth_method::DIGITAL_SIGNATURE,
                data: p.key.sign_auth(&octets),
            },
            None => Auth {
                method: auth_method::SHARED_KEY_MIC,
                data: auth::psk_auth(k.prf, &self.conn.psk, &octets).to_vec(),
            },
        }
    }

    /// What goes beside our identity in IKE_AUTH with certificates: our
    /// certificate, and (from the initiator) which CA we trust.
    pub(super) fn our_certificates(&self) -> Vec<Payload> {
        let Some(p) = &self.conn.pubkey else {
            return Vec::new();
        };
        let mut v: Vec<Payload> = std::iter::once(&p.cert)
            .chain(&p.intermediates)
            .map(|c| Payload::Cert {
                encoding: CERT_X509_SIGNATURE,
                data: c.der().to_vec(),
            })
            .collect();
        if self.role == Role::Initiator
            && let Ok(hash) = p.ca.spki_sha1()
        {
            v.push(Payload::CertReq {
                encoding: CERT_X509_SIGNATURE,
                data: hash,
            });
        }
        v
    }

    /// The peer's certificate from its IKE_AUTH, checked against our CA, the time
    /// and its identity.
    fn peer_certificate(
        &self,
        p: &crate::config::PubkeyAuth,
        id: &Identification,
        inner: &[Payload],
    ) -> Result<crate::cert::Certificate, String> {
        // Its own certificate first (RFC 7296 section 3.6), then the CAs between.
        let mut ders = inner.iter().filter_map(|x| match x {
            Payload::Cert { encoding, data } if *encoding == CERT_X509_SIGNATURE => Some(data),
            _ => None,
        });
        let der = ders.next().ok_or("the peer sent no X.509 certificate")?;
        let cert = crate::cert::Certificate::from_der(der)?;
        let intermediates = ders
            .take(crate::cert::MAX_INTERMEDIATES)
            .map(|d| crate::cert::Certificate::from_der(d))
            .collect::<Result<Vec<_>, _>>()?;
        // The one read of the wall clock: certificates are valid in calendar time.
        cert.verify_chain(&intermediates, &p.ca, std::time::SystemTime::now())?;
        if id.kind != crate::wire::id_type::DER_ASN1_DN || !cert.subject_is_der(&id.data) {
            return Err(format!(
                "peer identity '{}' is not its certificate's subject '{}'",
                describe_identity(id),
                cert.subject_text()
            ));
        }
        if let Some(dn) = &p.remote_dn
            && !cert.subject_is(dn)
        {
            return Err(format!(
                "peer certificate '{}' is not the configured '{dn}'",
                cert.subject_text()
            ));
        }
        Ok(cert)
    }

    /// What the peer's AUTH covers: its first message, our nonce, and its
    /// identity MACed with its SK_p.
    fn peer_signed_octets(&self, id: &Identification) -> Vec<u8> {
        let k = self.keys.as_ref().expect("keys");
        let (first, our_nonce, sk_p) = match self.role {
            Role::Initiator => (&self.init_response, &self.ni, &k.sk_pr),
            Role::Responder => (&self.init_request, &self.nr, &k.sk_pi),
        };
        auth::signed_octets(k.prf, first, our_nonce, sk_p, id)
    }

    /// Checks the peer's identity against the configuration and its AUTH payload.
    pub(super) fn verify_peer(
        &self,
        id: &Identification,
        a: &Auth,
        inner: &[Payload],
    ) -> Result<(), String> {
        if let Some(p) = &self.conn.pubkey {
            let cert = self.peer_certificate(p, id, inner)?;
            if a.method != auth_method::DIGITAL_SIGNATURE {
                return Err(format!(
                    "peer authenticates with method {}, not a digital signature (RFC 7427)",
                    a.method
                ));
            }
            return cert.verify_auth(&a.data, &self.peer_signed_octets(id));
        }
        if let Some(want) = &self.conn.remote_id
            && want != id
        {
            return Err(format!(
                "peer identity '{}' is not the configured '{}'",
                describe_identity(id),
                describe_identity(want)
            ));
        }
        if a.method != auth_method::SHARED_KEY_MIC {
            return Err(format!(
                "peer authenticates with method {}, not a pre-shared key",
                a.method
            ));
        }
        let prf = self.keys.as_ref().expect("keys").prf;
        let octets = self.peer_signed_octets(id);
        if auth::verify_psk(prf, &self.conn.psk, &octets, &a.data) {
            Ok(())
        } else {
            Err(format!(
                "AUTH from '{}' does not verify with the pre-shared key",
                describe_identity(id)
            ))
        }
    }

    pub(super) fn send_auth_request(&mut self, now: Instant) -> Vec<Datagram> {
        self.child_spi_in = random_esp_spi();
        let mut inner = vec![Payload::IdI(self.conn.local_id.clone())];
        inner.extend(self.our_certificates());
        if let Some(r) = &self.conn.remote_id {
            inner.push(Payload::IdR(r.clone()));
        }
        inner.push(Payload::Auth(self.our_auth()));
        if self.initial_contact {
            inner.push(Payload::Notify(Notify::new(
                notify::INITIAL_CONTACT,
                Vec::new(),
            )));
        }
        let spi = self.child_spi_in.to_be_bytes().to_vec();
        let proposals = self
            .conn
            .esp
            .iter()
            .enumerate()
            .map(|(i, o)| o.to_proposal(i as u8 + 1, spi.clone(), false))
            .collect();
        inner.push(Payload::Sa(proposals));
        inner.push(Payload::TsI(self.conn.local_ts.clone()));
        inner.push(Payload::TsR(self.conn.remote_ts.clone()));
        let id = self.next_request_id;
        let msg = self.sealed_message(self.header(exchange::IKE_AUTH, false, id), &inner);
        self.state = State::AuthSent;
        self.send_request(msg, Purpose::Plain, now)
    }

    pub(super) fn on_auth_response(&mut self, inner: &[Payload], now: Instant) -> Output {
        let mut out = Output::default();
        let name = self.conn.name.clone();
        let (Some(id), Some(a)) = (inner.id_r(), inner.auth()) else {
            let why = error_notify(inner).map_or("no identity or AUTH".to_string(), notify_name);
            self.close(format!("{name}: peer refused IKE_AUTH: {why}"), &mut out);
            return out;
        };
        if let Err(why) = self.verify_peer(id, a, inner) {
            self.close(format!("{name}: {why}"), &mut out);
            return out;
        }
        self.peer_id = Some(id.clone());
        self.outstanding = None;
        self.established(now, &mut out);
        if let Some(e) = error_notify(inner) {
            let why = format!("{name}: peer refused the child SA: {}", notify_name(e));
            self.delete_after_failure(why, now, &mut out);
            return out;
        }
        match self.child_from_reply(inner) {
            Ok(child) => {
                self.children.push(ChildSpis {
                    inbound: child.inbound_spi,
                    outbound: child.outbound_spi,
                });
                self.child_rekey_at = Self::rekey_time(now, self.conn.timers.child_rekey);
                out.events.push(Event::ChildUp(child));
            }
            Err(why) => self.delete_after_failure(format!("{name}: {why}"), now, &mut out),
        }
        out
    }

    /// A failed child in IKE_AUTH: the IKE SA has no use without it, so delete it
    /// and say why.
    pub(super) fn delete_after_failure(&mut self, why: String, now: Instant, out: &mut Output) {
        out.events.push(Event::Closed { reason: why });
        let d = self.send_delete_ike(now);
        out.datagrams.extend(d);
    }

    pub(super) fn established(&mut self, now: Instant, out: &mut Output) {
        self.state = State::Established;
        self.established_at = Some(now);
        self.ike_rekey_at = Self::rekey_time(now, self.conn.timers.ike_rekey);
        let chosen = self.chosen.expect("chosen");
        out.events.push(Event::Established {
            detail: format!(
                "{}: IKE SA {:016x}_i {:016x}_r with {} ({}){}",
                self.conn.name,
                self.spi_i,
                self.spi_r,
                self.remote,
                chosen.describe(),
                if self.behind_nat {
                    ", UDP-encapsulated"
                } else {
                    ""
                }
            ),
        });
    }

    pub(super) fn child_from_reply(&self, inner: &[Payload]) -> Result<ChildSa, String> {
        let sa = inner.sa().ok_or("no SA payload for the child")?;
        let (tsi, tsr) = traffic_selectors(inner).ok_or("no traffic selectors for the child")?;
        let [p] = sa.as_slice() else {
            return Err("the child SA reply has more than one proposal".into());
        };
        let chosen = self
            .conn
            .esp
            .iter()
            .find_map(|o| o.accept_reply(p, false))
            .ok_or("peer chose an ESP proposal we did not offer")?;
        let outbound = spi32(&p.spi).ok_or("the child SA reply's SPI is not 4 bytes")?;
        let within = |got: &[TrafficSelector], ours: &[TrafficSelector]| {
            !got.is_empty() && got.iter().all(|g| ours.iter().any(|o| o.covers(g)))
        };
        if !within(tsi, &self.conn.local_ts) || !within(tsr, &self.conn.remote_ts) {
            return Err("peer answered with traffic selectors wider than proposed".into());
        }
        Ok(self.make_child(
            chosen,
            self.child_spi_in,
            outbound,
            tsi.to_vec(),
            tsr.to_vec(),
        ))
    }

    /// The child SA of IKE_AUTH: its keys from the IKE SA's nonces.
    pub(super) fn make_child(
        &self,
        chosen: Chosen,
        inbound: u32,
        outbound: u32,
        local_ts: Vec<TrafficSelector>,
        remote_ts: Vec<TrafficSelector>,
    ) -> ChildSa {
        let exchange = KeyExchangeInput {
            ni: &self.ni,
            nr: &self.nr,
            shared: None,
            we_initiated: self.role == Role::Initiator,
        };
        self.make_child_with(chosen, inbound, outbound, local_ts, remote_ts, exchange)
    }

    /// A child SA whose keys come from `exchange`: the nonces of the exchange that
    /// made it, its new shared secret (PFS), and which end started it (the key
    /// material of the starter's direction comes first, RFC 7296 section 2.17).
    pub(super) fn make_child_with(
        &self,
        chosen: Chosen,
        inbound: u32,
        outbound: u32,
        local_ts: Vec<TrafficSelector>,
        remote_ts: Vec<TrafficSelector>,
        exchange: KeyExchangeInput<'_>,
    ) -> ChildSa {
        let algorithm = chosen
            .esp_algorithm()
            .expect("ESP choices map to algorithms");
        let k = self.keys.as_ref().expect("keys");
        let keymat = keys::child_keys(
            k.prf,
            &k.sk_d,
            exchange.shared,
            exchange.ni,
            exchange.nr,
            algorithm.keymat_len(),
        );
        let (inbound_keys, outbound_keys) = if exchange.we_initiated {
            (keymat.responder_to_initiator, keymat.initiator_to_responder)
        } else {
            (keymat.initiator_to_responder, keymat.responder_to_initiator)
        };
        ChildSa {
            connection: self.conn.name.clone(),
            algorithm,
            esn: chosen.esn,
            local: self.local.ip(),
            remote: self.remote.ip(),
            udp_encap: self
                .behind_nat
                .then_some((self.local.port(), self.remote.port())),
            inbound_spi: inbound,
            outbound_spi: outbound,
            inbound_keys,
            outbound_keys,
            local_ts,
            remote_ts,
            replaces: None,
            seal_after_replaced_goes: false,
        }
    }
}
