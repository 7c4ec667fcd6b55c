//! CREATE_CHILD_SA (RFC 7296 sections 1.3 and 2.8): rekeying the child SA and the
//! IKE SA, from either end.
//!
//! A child SA is replaced by a new one with new SPIs and keys (from new nonces, and
//! a new shared secret when the ESP proposal names a group); the new one is
//! installed beside the old, and the end that started the rekey deletes the old one
//! once it has the answer, so no packet in flight finds no SA. An IKE SA is
//! replaced by a successor with new SPIs, keys from SKEYSEED = prf(SK_d (old),
//! g^ir (new) | Ni | Nr), fresh message IDs, and the children; the starter deletes
//! the old one, which then ends quietly. A rekey that meets one of the peer's
//! (both ends started at once) is answered TEMPORARY_FAILURE, and the peer tries
//! again later.

use super::authenticate::KeyExchangeInput;
use super::responder::narrow;
use super::*;
use crate::wire::Proposal;

/// A refused rekey is tried again after this long (TEMPORARY_FAILURE: soon), and
/// up to as long again at random, so that two ends that collided do not again.
const RETRY_SOON: Duration = Duration::from_secs(2);
const RETRY_LATER: Duration = Duration::from_secs(60);

fn with_jitter(d: Duration) -> Duration {
    d + d * u32::from(random_bytes(1)[0]) / 255
}

/// Our child rekey in flight.
pub(super) struct ChildRekey {
    old: ChildSpis,
    spi_in: u32,
    ni: Vec<u8>,
    dh: Option<KeyPair>,
}

/// Our IKE rekey in flight.
pub(super) struct IkeRekey {
    spi: u64,
    ni: Vec<u8>,
    dh: KeyPair,
}

impl IkeSa {
    fn answer_notify(&mut self, id: u32, kind: u16) -> Output {
        self.answer_notify_with(id, kind, Vec::new())
    }

    /// Refuses a CREATE_CHILD_SA request with a notify carrying `data`.
    fn answer_notify_with(&mut self, id: u32, kind: u16, data: Vec<u8>) -> Output {
        let n = [Payload::Notify(Notify::new(kind, data))];
        let m = self.sealed_message(self.header(exchange::CREATE_CHILD_SA, true, id), &n);
        let d = self.answer(id, m);
        Output {
            datagrams: d,
            dropped: Some("create-child-refused"),
            ..Output::default()
        }
    }

    fn rekey_in_flight(&self) -> bool {
        matches!(
            self.outstanding.as_ref().map(|o| &o.purpose),
            Some(Purpose::RekeyChild(_) | Purpose::RekeyIke(_))
        )
    }

    // ----- Child SA, as the end that starts it -----

    pub(super) fn start_child_rekey(&mut self, now: Instant) -> Option<Vec<Datagram>> {
        self.child_rekey_at = None;
        let old = *self.children.last()?;
        let spi_in = random_esp_spi();
        let ni = random_bytes(NONCE_LEN);
        let dh = self.conn.esp[0]
            .groups
            .first()
            .copied()
            .map(KeyPair::generate);
        let spi = spi_in.to_be_bytes().to_vec();
        let proposals = self
            .conn
            .esp
            .iter()
            .enumerate()
            .map(|(i, o)| o.to_proposal(i as u8 + 1, spi.clone(), dh.is_some()))
            .collect();
        let mut payloads = vec![
            Payload::Notify(Notify {
                protocol: protocol::ESP,
                spi: old.inbound.to_be_bytes().to_vec(),
                kind: notify::REKEY_SA,
                data: Vec::new(),
            }),
            Payload::Sa(proposals),
            Payload::Nonce(ni.clone()),
        ];
        if let Some(k) = &dh {
            payloads.push(Payload::Ke(KeyExchange {
                group: k.group().id(),
                data: k.public().to_vec(),
            }));
        }
        payloads.push(Payload::TsI(self.conn.local_ts.clone()));
        payloads.push(Payload::TsR(self.conn.remote_ts.clone()));
        let id = self.next_request_id;
        let m = self.sealed_message(self.header(exchange::CREATE_CHILD_SA, false, id), &payloads);
        let rekey = ChildRekey {
            old,
            spi_in,
            ni,
            dh,
        };
        Some(self.send_request(m, Purpose::RekeyChild(Box::new(rekey)), now))
    }

    pub(super) fn on_child_rekey_response(
        &mut self,
        r: ChildRekey,
        inner: &[Payload],
        now: Instant,
    ) -> Output {
        match self.child_rekey_answer(&r, inner) {
            Ok((child, new)) => {
                self.children.push(new);
                self.child_rekey_at = Self::rekey_time(now, self.conn.timers.child_rekey);
                let mut out = Output::default();
                out.events.push(Event::ChildUp(child));
                // The new SA carries traffic from now on: the old one goes.
                let id = self.next_request_id;
                let d = [Payload::Delete(Delete {
                    protocol: protocol::ESP,
                    spis: vec![r.old.inbound.to_be_bytes().to_vec()],
                })];
                let m = self.sealed_message(self.header(exchange::INFORMATIONAL, false, id), &d);
                out.datagrams
                    .extend(self.send_request(m, Purpose::DeleteChild(r.old), now));
                out
            }
            Err(retry) => {
                self.child_rekey_at = Some(now + with_jitter(retry));
                Output::dropped("rekey-refused")
            }
        }
    }

    /// The new child SA from the peer's answer, or when to try again.
    fn child_rekey_answer(
        &self,
        r: &ChildRekey,
        inner: &[Payload],
    ) -> Result<(ChildSa, ChildSpis), Duration> {
        let (p, nr) = answer_proposal(inner)?;
        let (tsi, tsr) = traffic_selectors(inner).ok_or(RETRY_LATER)?;
        let chosen = self
            .conn
            .esp
            .iter()
            .find_map(|o| o.accept_reply(p, r.dh.is_some()))
            .ok_or(RETRY_LATER)?;
        let outbound = spi32(&p.spi).ok_or(RETRY_LATER)?;
        let shared = match &r.dh {
            Some(k) => {
                let ke = inner.ke().ok_or(RETRY_LATER)?;
                if ke.group != k.group().id() {
                    return Err(RETRY_LATER);
                }
                Some(k.agree(&ke.data).map_err(|_| RETRY_LATER)?)
            }
            None => None,
        };
        let within = |got: &[TrafficSelector], ours: &[TrafficSelector]| {
            !got.is_empty() && got.iter().all(|g| ours.iter().any(|o| o.covers(g)))
        };
        if !within(tsi, &self.conn.local_ts) || !within(tsr, &self.conn.remote_ts) {
            return Err(RETRY_LATER);
        }
        let exchange = KeyExchangeInput {
            ni: &r.ni,
            nr,
            shared: shared.as_deref().map(|s| s.as_slice()),
            we_initiated: true,
        };
        let mut child = self.make_child_with(
            chosen,
            r.spi_in,
            outbound,
            tsi.to_vec(),
            tsr.to_vec(),
            exchange,
        );
        child.replaces = Some((r.old.inbound, r.old.outbound));
        let new = ChildSpis {
            inbound: r.spi_in,
            outbound,
        };
        Ok((child, new))
    }

    // ----- Either rekey, or a child SA afresh, as the end that answers -----

    pub(super) fn on_create_child_sa_request(
        &mut self,
        id: u32,
        inner: &[Payload],
        now: Instant,
    ) -> Output {
        let Some(proposals) = inner.sa() else {
            return self.answer_notify(id, notify::INVALID_SYNTAX);
        };
        if self.rekey_in_flight() {
            return self.answer_notify(id, notify::TEMPORARY_FAILURE);
        }
        if proposals.iter().any(|p| p.protocol == protocol::IKE) {
            return self.on_ike_rekey_request(id, inner, now);
        }
        // A rekey names the child it replaces. Without one, the request makes a
        // child SA afresh: taken when the IKE SA has none (the peer deleted it,
        // or let it expire, and starts again), refused beside one (one child SA
        // per tunnel).
        let old = match notify_of(inner, notify::REKEY_SA) {
            Some(rekey) => match self
                .children
                .iter()
                .copied()
                .find(|c| spi32(&rekey.spi) == Some(c.outbound))
            {
                Some(old) => Some(old),
                None => return self.answer_notify(id, notify::CHILD_SA_NOT_FOUND),
            },
            None if self.children.is_empty() => None,
            None => return self.answer_notify(id, notify::NO_ADDITIONAL_SAS),
        };
        let ke = inner.ke();
        let (Some(ni), Some((tsi, tsr))) = (inner.nonce(), traffic_selectors(inner)) else {
            return self.answer_notify(id, notify::INVALID_SYNTAX);
        };
        let choice = proposals.iter().filter(|p| p.spi.len() == 4).find_map(|p| {
            self.conn
                .esp
                .iter()
                .find_map(|o| o.choose(p, ke.is_some()))
                .map(|c| (p, c))
        });
        let Some((p, chosen)) = choice else {
            return self.answer_notify(id, notify::NO_PROPOSAL_CHOSEN);
        };
        let dh = match chosen.group {
            Some(g) if ke.is_some_and(|k| k.group == g.id()) => Some(KeyPair::generate(g)),
            Some(g) => {
                let want = g.id().to_be_bytes().to_vec();
                return self.answer_notify_with(id, notify::INVALID_KE_PAYLOAD, want);
            }
            None => None,
        };
        let shared = match (&dh, ke) {
            (Some(k), Some(ke)) => match k.agree(&ke.data) {
                Ok(s) => Some(s),
                Err(_) => return self.answer_notify(id, notify::INVALID_SYNTAX),
            },
            _ => None,
        };
        let remote_ts = narrow(tsi, &self.conn.remote_ts);
        let local_ts = narrow(tsr, &self.conn.local_ts);
        if remote_ts.is_empty() || local_ts.is_empty() {
            return self.answer_notify(id, notify::TS_UNACCEPTABLE);
        }
        let nr = random_bytes(NONCE_LEN);
        let spi_in = random_esp_spi();
        let outbound = spi32(&p.spi).expect("filtered to 4 bytes");
        let exchange = KeyExchangeInput {
            ni,
            nr: &nr,
            shared: shared.as_deref().map(|s| s.as_slice()),
            we_initiated: false,
        };
        let mut child = self.make_child_with(
            chosen,
            spi_in,
            outbound,
            local_ts.clone(),
            remote_ts.clone(),
            exchange,
        );
        child.replaces = old.map(|o| (o.inbound, o.outbound));
        child.seal_after_replaced_goes = old.is_some();
        let mut reply = vec![
            Payload::Sa(vec![chosen.to_proposal(
                Kind::Esp,
                p.number,
                spi_in.to_be_bytes().to_vec(),
            )]),
            Payload::Nonce(nr),
        ];
        if let Some(k) = &dh {
            reply.push(Payload::Ke(KeyExchange {
                group: k.group().id(),
                data: k.public().to_vec(),
            }));
        }
        reply.push(Payload::TsI(remote_ts));
        reply.push(Payload::TsR(local_ts));
        let m = self.sealed_message(self.header(exchange::CREATE_CHILD_SA, true, id), &reply);
        let d = self.answer(id, m);
        self.children.push(ChildSpis {
            inbound: spi_in,
            outbound,
        });
        self.child_rekey_at = Self::rekey_time(now, self.conn.timers.child_rekey);
        Output {
            datagrams: d,
            events: vec![Event::ChildUp(child)],
            dropped: None,
        }
    }

    // ----- IKE SA -----

    pub(super) fn start_ike_rekey(&mut self, now: Instant) -> Vec<Datagram> {
        self.ike_rekey_at = None;
        let spi = random_spi64();
        let ni = random_bytes(NONCE_LEN);
        // The group in use: the peer took it once.
        let group = self
            .chosen
            .and_then(|c| c.group)
            .expect("an IKE SA has a group");
        let dh = KeyPair::generate(group);
        let proposals = self
            .conn
            .ike
            .iter()
            .enumerate()
            .map(|(i, o)| o.to_proposal(i as u8 + 1, spi.to_be_bytes().to_vec(), true))
            .collect();
        let payloads = [
            Payload::Sa(proposals),
            Payload::Nonce(ni.clone()),
            Payload::Ke(KeyExchange {
                group: group.id(),
                data: dh.public().to_vec(),
            }),
        ];
        let id = self.next_request_id;
        let m = self.sealed_message(self.header(exchange::CREATE_CHILD_SA, false, id), &payloads);
        self.send_request(
            m,
            Purpose::RekeyIke(Box::new(IkeRekey { spi, ni, dh })),
            now,
        )
    }

    pub(super) fn on_ike_rekey_response(
        &mut self,
        r: IkeRekey,
        inner: &[Payload],
        now: Instant,
    ) -> Output {
        let answer = (|| {
            let (p, nr) = answer_proposal(inner)?;
            let ke = inner.ke().ok_or(RETRY_LATER)?;
            let chosen = self
                .conn
                .ike
                .iter()
                .find_map(|o| o.accept_reply(p, true))
                .ok_or(RETRY_LATER)?;
            let peer_spi =
                u64::from_be_bytes(p.spi.as_slice().try_into().map_err(|_| RETRY_LATER)?);
            if peer_spi == 0 || ke.group != r.dh.group().id() || chosen.group != Some(r.dh.group())
            {
                return Err(RETRY_LATER);
            }
            let shared = r.dh.agree(&ke.data).map_err(|_| RETRY_LATER)?;
            Ok((chosen, peer_spi, nr.clone(), shared))
        })();
        let (chosen, peer_spi, nr, shared) = match answer {
            Ok(a) => a,
            Err(retry) => {
                self.ike_rekey_at = Some(now + with_jitter(retry));
                return Output::dropped("rekey-refused");
            }
        };
        let mut out = Output::default();
        self.make_successor(
            chosen,
            r.spi,
            peer_spi,
            Role::Initiator,
            r.ni,
            nr,
            &shared,
            now,
            &mut out,
        );
        // The old SA goes: its delete, then it ends quietly.
        let d = self.send_delete_ike(now);
        self.state = State::Rekeyed;
        out.datagrams.extend(d);
        out
    }

    fn on_ike_rekey_request(&mut self, id: u32, inner: &[Payload], now: Instant) -> Output {
        let proposals = inner.sa().expect("checked");
        let (Some(ni), Some(ke)) = (inner.nonce(), inner.ke()) else {
            return self.answer_notify(id, notify::INVALID_SYNTAX);
        };
        let choice = proposals.iter().filter(|p| p.spi.len() == 8).find_map(|p| {
            self.conn
                .ike
                .iter()
                .find_map(|o| o.choose(p, true))
                .map(|c| (p, c))
        });
        let Some((p, chosen)) = choice else {
            return self.answer_notify(id, notify::NO_PROPOSAL_CHOSEN);
        };
        let group = chosen.group.expect("IKE choices have a group");
        if ke.group != group.id() {
            let want = group.id().to_be_bytes().to_vec();
            return self.answer_notify_with(id, notify::INVALID_KE_PAYLOAD, want);
        }
        let peer_spi =
            u64::from_be_bytes(p.spi.as_slice().try_into().expect("filtered to 8 bytes"));
        let dh = KeyPair::generate(group);
        let Ok(shared) = dh.agree(&ke.data) else {
            return self.answer_notify(id, notify::INVALID_SYNTAX);
        };
        let our_spi = random_spi64();
        let nr = random_bytes(NONCE_LEN);
        let reply = [
            Payload::Sa(vec![chosen.to_proposal(
                Kind::Ike,
                p.number,
                our_spi.to_be_bytes().to_vec(),
            )]),
            Payload::Nonce(nr.clone()),
            Payload::Ke(KeyExchange {
                group: group.id(),
                data: dh.public().to_vec(),
            }),
        ];
        let m = self.sealed_message(self.header(exchange::CREATE_CHILD_SA, true, id), &reply);
        let mut out = Output {
            datagrams: self.answer(id, m),
            ..Output::default()
        };
        // The peer started it: it is the new SA's initiator.
        self.make_successor(
            chosen,
            peer_spi,
            our_spi,
            Role::Responder,
            ni.clone(),
            nr,
            &shared,
            now,
            &mut out,
        );
        // The old SA waits for the peer's delete, then ends quietly.
        self.state = State::Rekeyed;
        self.last_heard = now;
        out
    }

    /// The IKE SA that replaces this one, with the children moved to it.
    #[allow(clippy::too_many_arguments)]
    fn make_successor(
        &mut self,
        chosen: Chosen,
        spi_i: u64,
        spi_r: u64,
        role: Role,
        ni: Vec<u8>,
        nr: Vec<u8>,
        shared: &[u8],
        now: Instant,
        out: &mut Output,
    ) {
        let old = self.keys.as_ref().expect("an established SA has keys");
        let seed = keys::rekey_skeyseed(old.prf, &old.sk_d, shared, &ni, &nr);
        let mut sa = IkeSa::new(self.conn.clone(), role, self.local, self.remote, now);
        sa.spi_i = spi_i;
        sa.spi_r = spi_r;
        sa.ni = ni;
        sa.nr = nr;
        sa.install_keys_from_seed(chosen, &seed);
        sa.state = State::Established;
        sa.behind_nat = self.behind_nat;
        sa.fragmentation = self.fragmentation;
        sa.nat_ours = self.nat_ours;
        sa.peer_id = self.peer_id.clone();
        sa.established_at = Some(now);
        sa.ike_rekey_at = Self::rekey_time(now, self.conn.timers.ike_rekey);
        sa.children = std::mem::take(&mut self.children);
        sa.child_rekey_at = self.child_rekey_at.take();
        out.events.push(Event::Rekeyed {
            detail: format!(
                "{}: IKE SA rekeyed to {:016x}_i {:016x}_r ({})",
                self.conn.name,
                spi_i,
                spi_r,
                chosen.describe()
            ),
        });
        self.successor = Some(Box::new(sa));
    }
}

/// What either rekey's answer gives first: its one proposal and the peer's
/// nonce; or, when it holds an error notify or lacks them, when to try again
/// (soon after TEMPORARY_FAILURE, RFC 7296 section 2.25).
fn answer_proposal(inner: &[Payload]) -> Result<(&Proposal, &Vec<u8>), Duration> {
    if let Some(e) = error_notify(inner) {
        return Err(if e == notify::TEMPORARY_FAILURE {
            RETRY_SOON
        } else {
            RETRY_LATER
        });
    }
    let sa = inner.sa().ok_or(RETRY_LATER)?;
    let nr = inner.nonce().ok_or(RETRY_LATER)?;
    let [p] = sa.as_slice() else {
        return Err(RETRY_LATER);
    };
    Ok((p, nr))
}
