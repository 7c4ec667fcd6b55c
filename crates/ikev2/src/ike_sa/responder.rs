//! The responder's side of IKE_SA_INIT and IKE_AUTH: choosing from the peer's
//! proposals, answering, and narrowing its traffic selectors.

use super::*;

impl IkeSa {
    /// Answers an IKE_SA_INIT request for `conn`. `Err` carries a stateless answer
    /// (NO_PROPOSAL_CHOSEN, INVALID_KE_PAYLOAD) or the reason the request was
    /// dropped; no SA exists then.
    pub fn respond(
        conn: Arc<Connection>,
        h: &Header,
        msg: &[u8],
        local: SocketAddr,
        remote: SocketAddr,
        now: Instant,
    ) -> Result<(IkeSa, Output), Output> {
        let mut sa = IkeSa::new(conn, Role::Responder, local, remote, now);
        sa.spi_i = h.spi_i;
        let payloads = match parse_chain(h.next_payload, &msg[HEADER_LEN..]) {
            Ok(p) => p,
            Err(crate::wire::Error::UnsupportedCritical(kind)) => {
                let n = Notify::new(notify::UNSUPPORTED_CRITICAL_PAYLOAD, vec![kind]);
                let m = sa.plain_message(
                    sa.header(exchange::IKE_SA_INIT, true, 0),
                    &[Payload::Notify(n)],
                );
                let mut out = Output::dropped("unsupported-critical");
                out.datagrams.push(sa.datagram(m));
                return Err(out);
            }
            Err(_) => return Err(Output::dropped("malformed")),
        };
        let stateless = |sa: &IkeSa, n: Notify| {
            let m = sa.plain_message(
                sa.header(exchange::IKE_SA_INIT, true, 0),
                &[Payload::Notify(n)],
            );
            let mut out = Output::dropped("refused");
            out.datagrams.push(sa.datagram(m));
            out
        };
        let (Some(proposals), Some(ke), Some(ni)) =
            (payloads.sa(), payloads.ke(), payloads.nonce())
        else {
            return Err(Output::dropped("missing-payload"));
        };
        let choice = proposals.iter().find_map(|p| {
            sa.conn
                .ike
                .iter()
                .find_map(|o| o.choose(p, true))
                .map(|c| (p.number, c))
        });
        let Some((number, chosen)) = choice else {
            return Err(stateless(
                &sa,
                Notify::new(notify::NO_PROPOSAL_CHOSEN, Vec::new()),
            ));
        };
        let group = chosen.group.expect("IKE choices have a group");
        if ke.group != group.id() {
            let want = group.id().to_be_bytes().to_vec();
            return Err(stateless(
                &sa,
                Notify::new(notify::INVALID_KE_PAYLOAD, want),
            ));
        }
        let dh = KeyPair::generate(group);
        let Ok(shared) = dh.agree(&ke.data) else {
            return Err(Output::dropped("bad-ke"));
        };
        sa.spi_r = random_spi64();
        sa.ni = ni.clone();
        sa.nr = random_bytes(NONCE_LEN);
        (sa.behind_nat, sa.nat_ours) = sa.detect_nat(&payloads, 0);
        let ke_out = KeyExchange {
            group: group.id(),
            data: dh.public().to_vec(),
        };
        sa.install_ike_keys(chosen, &shared);
        let (src, dst) = sa.nat_hashes(sa.spi_r);
        let mut reply = vec![
            Payload::Sa(vec![chosen.to_proposal(Kind::Ike, number, Vec::new())]),
            Payload::Ke(ke_out),
            Payload::Nonce(sa.nr.clone()),
            Payload::Notify(src),
            Payload::Notify(dst),
        ];
        reply.extend(sa.signature_payloads_in_init());
        sa.fragmentation = notify_of(&payloads, notify::IKEV2_FRAGMENTATION_SUPPORTED).is_some();
        if sa.fragmentation {
            reply.push(Payload::Notify(Notify::new(
                notify::IKEV2_FRAGMENTATION_SUPPORTED,
                Vec::new(),
            )));
        }
        let m = sa.plain_message(sa.header(exchange::IKE_SA_INIT, true, 0), &reply);
        sa.init_request = msg.to_vec();
        sa.init_response = m.clone();
        sa.state = State::InitReplied;
        let d = sa.answer(0, vec![m]);
        Ok((
            sa,
            Output {
                datagrams: d,
                ..Output::default()
            },
        ))
    }

    pub(super) fn on_auth_request(&mut self, id: u32, inner: &[Payload], now: Instant) -> Output {
        let mut out = Output::default();
        let name = self.conn.name.clone();
        let (Some(idi), Some(a)) = (inner.id_i(), inner.auth()) else {
            return Output::dropped("missing-payload");
        };
        if let Err(why) = self.verify_peer(idi, a, inner) {
            let n = [Payload::Notify(Notify::new(
                notify::AUTHENTICATION_FAILED,
                Vec::new(),
            ))];
            let m = self.sealed_message(self.header(exchange::IKE_AUTH, true, id), &n);
            out.datagrams.extend(self.answer(id, m));
            self.close(format!("{name}: {why}"), &mut out);
            return out;
        }
        let mut reply = vec![Payload::IdR(self.conn.local_id.clone())];
        reply.extend(self.our_certificates());
        reply.push(Payload::Auth(self.our_auth()));
        self.peer_started_afresh = notify_of(inner, notify::INITIAL_CONTACT).is_some();
        self.peer_id = Some(idi.clone());
        self.established(now, &mut out);
        let child = self.child_from_request(inner);
        match child {
            Ok((child, number, chosen)) => {
                reply.push(Payload::Sa(vec![chosen.to_proposal(
                    Kind::Esp,
                    number,
                    child.inbound_spi.to_be_bytes().to_vec(),
                )]));
                reply.push(Payload::TsI(child.remote_ts.clone()));
                reply.push(Payload::TsR(child.local_ts.clone()));
                self.children.push(ChildSpis {
                    inbound: child.inbound_spi,
                    outbound: child.outbound_spi,
                });
                self.child_rekey_at = Self::rekey_time(now, self.conn.timers.child_rekey);
                out.events.push(Event::ChildUp(child));
            }
            Err((kind, why)) => {
                reply.push(Payload::Notify(Notify::new(kind, Vec::new())));
                out.events.push(Event::Closed {
                    reason: format!("{name}: refused the peer's child SA: {why}"),
                });
            }
        }
        let m = self.sealed_message(self.header(exchange::IKE_AUTH, true, id), &reply);
        out.datagrams.extend(self.answer(id, m));
        out
    }

    /// The child SA an IKE_AUTH request asks for, narrowed to what the connection
    /// allows; or the notify that refuses it, with why.
    pub(super) fn child_from_request(
        &self,
        inner: &[Payload],
    ) -> Result<(ChildSa, u8, Chosen), (u16, String)> {
        let proposals = inner
            .sa()
            .ok_or((notify::NO_PROPOSAL_CHOSEN, "no SA payload".to_string()))?;
        let (tsi, tsr) = traffic_selectors(inner)
            .ok_or((notify::TS_UNACCEPTABLE, "no traffic selectors".to_string()))?;
        if notify_of(inner, notify::USE_TRANSPORT_MODE).is_some() {
            return Err((
                notify::NO_PROPOSAL_CHOSEN,
                "transport mode asked; only tunnel mode is served".into(),
            ));
        }
        let (p, chosen) = proposals
            .iter()
            .filter(|p| p.spi.len() == 4)
            .find_map(|p| {
                self.conn
                    .esp
                    .iter()
                    .find_map(|o| o.choose(p, false))
                    .map(|c| (p, c))
            })
            .ok_or((
                notify::NO_PROPOSAL_CHOSEN,
                "no ESP proposal in common".to_string(),
            ))?;
        // TSi is the initiator's side: our remote; TSr ours.
        let remote_ts = narrow(tsi, &self.conn.remote_ts);
        let local_ts = narrow(tsr, &self.conn.local_ts);
        if remote_ts.is_empty() || local_ts.is_empty() {
            return Err((
                notify::TS_UNACCEPTABLE,
                "traffic selectors do not overlap the connection's".into(),
            ));
        }
        let outbound = spi32(&p.spi).expect("filtered to 4 bytes");
        let child = self.make_child(chosen, random_esp_spi(), outbound, local_ts, remote_ts);
        Ok((child, p.number, chosen))
    }
}

/// The parts of the peer's traffic selectors that the connection's also cover
/// (RFC 7296 section 2.9).
pub(super) fn narrow(theirs: &[TrafficSelector], ours: &[TrafficSelector]) -> Vec<TrafficSelector> {
    let mut v: Vec<TrafficSelector> = theirs
        .iter()
        .flat_map(|t| ours.iter().filter_map(|o| o.intersect(t)))
        .collect();
    v.dedup();
    v
}
