//! Handshakes (whitepaper section 5.4): sending initiations, answering them, taking
//! responses and cookie replies, and the MAC and rate checks in front of all three.
//! The cryptography is in [`crate::noise`] and [`crate::cookie`]; this part decides
//! which peer a message is for, whether to believe it, and what changes when it is
//! believed. Messages arrive as the `wire` crate's views, already classified by the
//! caller, so no type is parsed twice.

use super::{Action, Device};
use crate::constants::{MIN_INITIATION_INTERVAL, REKEY_TIMEOUT};
use crate::cookie::MacCheck;
use crate::drop::DropReason;
use crate::keypair::Keypair;
use crate::noise::{self, HandshakeError};
use crate::peer::PeerId;
use crate::tai64n::Tai64N;
use rand::RngCore;
use std::net::SocketAddr;
use std::time::Instant;
use wire::wireguard::{
    CookieReply, HANDSHAKE_INITIATION_LEN, HANDSHAKE_RESPONSE_LEN, HandshakeInitiation,
    HandshakeResponse, Message,
};

impl Device {
    /// Sends an initiation to `id` unless one went out less than REKEY_TIMEOUT ago.
    /// `retry` keeps the attempt count (the retransmit timer); anything else resets it.
    pub(super) fn initiate(&mut self, id: PeerId, retry: bool, now: Instant) {
        let wall = self.wall(now);
        if self.identity.is_none() {
            return;
        }
        let Some(p) = self.peer(id) else {
            return;
        };
        if p.timers
            .last_sent_handshake
            .is_some_and(|t| now.saturating_duration_since(t) < REKEY_TIMEOUT)
        {
            return;
        }
        let Some(endpoint) = p.endpoint else { return };
        let public = p.public_key;
        let index = self.alloc_index(id);
        let identity = self.identity.as_ref().expect("checked above");
        let mut packet = [0u8; HANDSHAKE_INITIATION_LEN];
        let Ok(state) =
            noise::create_initiation(identity, &public, index, Tai64N::at(wall), &mut packet)
        else {
            // Our static and theirs make a zero DH: this peer can never work.
            self.release_index(index);
            return;
        };
        let p = self.peer_mut(id).expect("checked above");
        let replaced = p.initiation.replace(state).map(|s| s.local_index);
        if !retry {
            p.timers.handshake_attempts = 0;
        }
        p.cookies.stamp(&mut packet, now);
        p.handshake_initiated(now);
        p.any_authenticated_packet_sent();
        p.any_authenticated_packet_traversal(now);
        if let Some(old) = replaced {
            self.release_index(old);
        }
        self.actions.push_back(Action::Send {
            to: endpoint,
            packet: packet.to_vec(),
        });
    }

    /// Handles one handshake-class message (initiation, response, cookie reply) from
    /// `src`, as the caller classified it ([`Message::parse`]). Transport data goes to
    /// [`SessionPath::recv_ticket`](crate::SessionPath::recv_ticket) instead, and is
    /// refused here.
    pub fn handle_handshake(
        &mut self,
        message: Message<&[u8]>,
        src: SocketAddr,
        now: Instant,
    ) -> Result<(), DropReason> {
        match message {
            Message::HandshakeInitiation(m) => self.handle_initiation(m, src, now),
            Message::HandshakeResponse(m) => self.handle_response(m, src, now),
            Message::CookieReply(m) => self.handle_cookie_reply(m, now),
            Message::TransportData(_) => Err(DropReason::UnknownType),
        }
    }

    /// MAC1, then (under load) MAC2 or a cookie reply, then the rate limit.
    fn check_macs(
        &mut self,
        packet: &[u8],
        sender_index: u32,
        src: SocketAddr,
        now: Instant,
    ) -> Result<(), DropReason> {
        let checker = self.checker.as_mut().ok_or(DropReason::NoPrivateKey)?;
        let load = &mut self.load;
        let mut under_load = false;
        let verdict = checker.check(
            packet,
            src,
            || {
                under_load = load.note_handshake(now);
                under_load
            },
            now,
        );
        match verdict {
            MacCheck::BadMac1 => Err(DropReason::BadMac1),
            MacCheck::NeedCookie => {
                let reply = checker.reply(packet, sender_index, src, now);
                self.actions.push_back(Action::Send {
                    to: src,
                    packet: reply.to_vec(),
                });
                Err(DropReason::CookieSent)
            }
            MacCheck::Ok if under_load && !self.ratelimiter.allow(src.ip(), now) => {
                Err(DropReason::RateLimited)
            }
            MacCheck::Ok => Ok(()),
        }
    }

    /// We are the responder: a valid initiation makes a session (in the `next` slot
    /// until the initiator's first packet confirms it) and a response.
    fn handle_initiation(
        &mut self,
        m: HandshakeInitiation<&[u8]>,
        src: SocketAddr,
        now: Instant,
    ) -> Result<(), DropReason> {
        // A view made without a length check must not reach the MAC offsets.
        let m = HandshakeInitiation::new_checked(m.into_inner())
            .map_err(|_| DropReason::WrongLength)?;
        self.check_macs(m.into_inner(), m.sender_index(), src, now)?;
        let identity = self.identity.as_ref().ok_or(DropReason::NoPrivateKey)?;
        let consumed = noise::consume_initiation(identity, &m).map_err(handshake_drop)?;
        let id = self
            .peer_id(&consumed.peer_public)
            .ok_or(DropReason::UnknownPeer)?;
        let p = self.peer(id).ok_or(DropReason::UnknownPeer)?;
        if p.last_timestamp
            .is_some_and(|last| !consumed.timestamp.is_after(&last))
        {
            return Err(DropReason::StaleTimestamp);
        }
        if p.last_initiation_consumed
            .is_some_and(|t| now.saturating_duration_since(t) < MIN_INITIATION_INTERVAL)
        {
            return Err(DropReason::InitiationFlood);
        }
        // Valid: from here on the peer's state changes.
        let index = self.alloc_index(id);
        let mut response = [0u8; HANDSHAKE_RESPONSE_LEN];
        let psk = &self.peer(id).expect("found above").preshared_key;
        let keypair = noise::create_response(&consumed, psk, index, &mut response)
            .map_err(handshake_drop)
            .and_then(|session| {
                Keypair::new(
                    &self.keys,
                    &session,
                    index,
                    consumed.remote_index,
                    false,
                    now,
                )
                .map_err(|_| DropReason::CryptoFailed)
            });
        let keypair = match keypair {
            Ok(k) => k,
            Err(e) => {
                self.release_index(index);
                return Err(e);
            }
        };
        let p = self.peer_mut(id).expect("found above");
        p.last_timestamp = Some(consumed.timestamp);
        p.last_initiation_consumed = Some(now);
        p.endpoint = Some(src);
        let stale_init = p.initiation.take().map(|s| s.local_index);
        let pushed_out = p.keypairs.install(keypair);
        p.cookies.stamp(&mut response, now);
        p.handshake_sent(now);
        p.any_authenticated_packet_received();
        p.any_authenticated_packet_sent();
        p.session_derived(now);
        p.any_authenticated_packet_traversal(now);
        self.release_keypairs(pushed_out);
        if let Some(i) = stale_init {
            self.release_index(i);
        }
        self.actions.push_back(Action::Send {
            to: src,
            packet: response.to_vec(),
        });
        Ok(())
    }

    /// We are the initiator: a valid response to our initiation in flight makes the
    /// session, used at once; a keepalive (or the staged data) confirms it.
    fn handle_response(
        &mut self,
        m: HandshakeResponse<&[u8]>,
        src: SocketAddr,
        now: Instant,
    ) -> Result<(), DropReason> {
        let m =
            HandshakeResponse::new_checked(m.into_inner()).map_err(|_| DropReason::WrongLength)?;
        let (sender, receiver) = (m.sender_index(), m.receiver_index());
        self.check_macs(m.into_inner(), sender, src, now)?;
        let id = self.index_owner(receiver).ok_or(DropReason::UnknownIndex)?;
        let identity = self.identity.as_ref().ok_or(DropReason::NoPrivateKey)?;
        let p = self.peer(id).ok_or(DropReason::UnknownIndex)?;
        let state = p
            .initiation
            .as_ref()
            .filter(|s| s.local_index == receiver)
            .ok_or(DropReason::UnknownIndex)?;
        let session = noise::consume_response(identity, state, &p.preshared_key, &m)
            .map_err(handshake_drop)?;
        let keypair = Keypair::new(&self.keys, &session, receiver, sender, true, now)
            .map_err(|_| DropReason::CryptoFailed)?;
        let wall = self.wall(now);
        let p = self.peer_mut(id).expect("found above");
        p.initiation = None; // its index now names the keypair
        let pushed_out = p.keypairs.install(keypair);
        p.endpoint = Some(src);
        p.handshake_complete(wall);
        p.any_authenticated_packet_received();
        p.session_derived(now);
        p.any_authenticated_packet_traversal(now);
        self.release_keypairs(pushed_out);
        // The initiator confirms the session at once: staged data, or a keepalive.
        self.send_keepalive(id, now);
        Ok(())
    }

    /// The responder was under load and sent a cookie for our last message: the next
    /// one carries MAC2 made with it.
    fn handle_cookie_reply(
        &mut self,
        m: CookieReply<&[u8]>,
        now: Instant,
    ) -> Result<(), DropReason> {
        let m = CookieReply::new_checked(m.into_inner()).map_err(|_| DropReason::WrongLength)?;
        let id = self
            .index_owner(m.receiver_index())
            .ok_or(DropReason::UnknownIndex)?;
        let p = self.peer_mut(id).ok_or(DropReason::UnknownIndex)?;
        p.cookies
            .consume_reply(m.nonce(), m.encrypted_cookie(), now)
            .map_err(|_| DropReason::BadCookieReply)
    }

    /// Gives `id` a session that talks to itself: one key both ways and our own
    /// receiver index as the remote one, so that what this device encrypts to the peer
    /// it decrypts again. For benchmarks that push the whole data path through one
    /// worker without a second party; never reachable from the network or the UAPI.
    pub fn install_loopback_session(&mut self, id: PeerId, now: Instant) -> Result<(), DropReason> {
        self.peer(id).ok_or(DropReason::UnknownPeer)?;
        let mut key = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut key);
        let keys = noise::SessionKeys {
            send: key,
            recv: key,
        };
        zeroize::Zeroize::zeroize(&mut key);
        let index = self.alloc_index(id);
        let keypair = match Keypair::new(&self.keys, &keys, index, index, true, now) {
            Ok(k) => k,
            Err(_) => {
                self.release_index(index);
                return Err(DropReason::CryptoFailed);
            }
        };
        let p = self.peer_mut(id).expect("checked above");
        let pushed_out = p.keypairs.install(keypair);
        self.release_keypairs(pushed_out);
        Ok(())
    }
}

fn handshake_drop(e: HandshakeError) -> DropReason {
    match e {
        HandshakeError::DecryptFailed => DropReason::HandshakeDecrypt,
        HandshakeError::ZeroSharedSecret => DropReason::ZeroSharedSecret,
    }
}

#[cfg(test)]
mod tests {
    use super::super::Action;
    use super::super::testing::*;
    use crate::DropReason;
    use crate::Staged;
    use crate::constants::{REKEY_TIMEOUT, REKEY_TIMEOUT_JITTER_MAX};
    use crypto::KeyRegistry;
    use std::sync::Arc;
    use std::time::{Duration, Instant};
    use wire::wireguard::{
        HandshakeInitiation, MESSAGE_COOKIE_REPLY, MESSAGE_HANDSHAKE_INITIATION,
        MESSAGE_HANDSHAKE_RESPONSE, Message, TransportData,
    };

    /// `a` has a packet for `b` and no session: the initiation it sends.
    fn initiation(p: &mut Pair, now: Instant) -> Vec<u8> {
        p.a.stage(p.b_in_a, 20, now);
        let mut s = sent(&mut p.a);
        assert_eq!(s.len(), 1);
        let (to, packet) = s.pop().unwrap();
        assert_eq!(to, addr(B_ADDR));
        assert_eq!(packet[0] as u32, MESSAGE_HANDSHAKE_INITIATION);
        packet
    }

    #[test]
    fn two_devices_make_a_session_in_memory() {
        let now = Instant::now();
        let mut p = pair(now);
        let init = initiation(&mut p, now);
        assert_eq!(p.a.index_count(), 1);
        p.b.handle_handshake(parse(&init), addr(A_ADDR), now)
            .unwrap();
        let mut s = sent(&mut p.b);
        let (to, resp) = s.pop().unwrap();
        assert!(s.is_empty());
        assert_eq!(to, addr(A_ADDR));
        assert_eq!(resp[0] as u32, MESSAGE_HANDSHAKE_RESPONSE);
        // The responder may not send before the initiator confirms the session.
        assert!(p.b.send_ticket(p.a_in_b, now).is_err());

        p.a.handle_handshake(parse(&resp), addr(B_ADDR), now)
            .unwrap();
        assert_eq!(actions(&mut p.a), [Action::Flush(p.b_in_a)]);
        assert_eq!(staged(&mut p.a, p.b_in_a), [Staged::Packet(20)]);
        assert!(p.a.peer_info(p.b_in_a).unwrap().last_handshake.is_some());
        // The initiation's index now names the keypair.
        assert_eq!(p.a.index_count(), 1);

        let t = p.a.send_ticket(p.b_in_a, now).unwrap();
        assert_eq!((t.counter, t.endpoint), (0, addr(B_ADDR)));
        let r = p.b.recv_ticket(t.receiver_index, t.counter, now).unwrap();
        assert_eq!(r.peer, p.a_in_b);
        // What one sends with, the other receives with.
        assert_eq!(
            p.keys.get(t.key).unwrap().bytes(),
            p.keys.get(r.key).unwrap().bytes()
        );
        p.b.recv_commit(&r, t.counter, None, 32, addr(A_ADDR), now)
            .unwrap();
        assert!(p.b.peer_info(p.a_in_b).unwrap().last_handshake.is_some());
        let back = p.b.send_ticket(p.a_in_b, now).unwrap();
        let r = p.a.recv_ticket(back.receiver_index, 0, now).unwrap();
        assert_eq!(
            p.keys.get(back.key).unwrap().bytes(),
            p.keys.get(r.key).unwrap().bytes()
        );
        assert_ne!(
            p.keys.get(back.key).unwrap().bytes(),
            p.keys.get(t.key).unwrap().bytes()
        );
    }

    #[test]
    fn a_replayed_initiation_is_refused() {
        let now = Instant::now();
        let mut p = pair(now);
        let init = initiation(&mut p, now);
        p.b.handle_handshake(parse(&init), addr(A_ADDR), now)
            .unwrap();
        sent(&mut p.b);
        let later = now + Duration::from_secs(1);
        assert_eq!(
            p.b.handle_handshake(parse(&init), addr(A_ADDR), later),
            Err(DropReason::StaleTimestamp)
        );
        assert!(actions(&mut p.b).is_empty());
    }

    #[test]
    fn a_second_initiation_within_20_ms_is_a_flood() {
        let now = Instant::now();
        let mut p = pair(now);
        let first = initiation(&mut p, now);
        p.b.handle_handshake(parse(&first), addr(A_ADDR), now)
            .unwrap();
        // A newer initiation (a's clock moved on) too soon after the first.
        let later = now + REKEY_TIMEOUT;
        p.a.stage(p.b_in_a, 0, later);
        let second = one_sent(&mut p.a);
        assert_eq!(
            p.b.handle_handshake(
                parse(&second),
                addr(A_ADDR),
                now + Duration::from_millis(19)
            ),
            Err(DropReason::InitiationFlood)
        );
        p.b.handle_handshake(
            parse(&second),
            addr(A_ADDR),
            now + Duration::from_millis(20),
        )
        .unwrap();
    }

    #[test]
    fn a_response_is_taken_once() {
        let now = Instant::now();
        let mut p = pair(now);
        let init = initiation(&mut p, now);
        p.b.handle_handshake(parse(&init), addr(A_ADDR), now)
            .unwrap();
        let resp = one_sent(&mut p.b);
        p.a.handle_handshake(parse(&resp), addr(B_ADDR), now)
            .unwrap();
        actions(&mut p.a);
        assert_eq!(
            p.a.handle_handshake(parse(&resp), addr(B_ADDR), now),
            Err(DropReason::UnknownIndex)
        );
        assert!(actions(&mut p.a).is_empty());
    }

    #[test]
    fn strangers_and_forgeries_are_refused() {
        let now = Instant::now();
        let mut p = pair(now);
        let init = initiation(&mut p, now);
        // A flipped MAC1 bit.
        let mut bad = init.clone();
        bad[HandshakeInitiation::new_checked(&init[..])
            .unwrap()
            .mac1_covered()
            .len()] ^= 1;
        assert_eq!(
            p.b.handle_handshake(parse(&bad), addr(A_ADDR), now),
            Err(DropReason::BadMac1)
        );
        // A good MAC1 on a device that does not know `a`.
        p.b.remove_peer(p.a_in_b);
        assert_eq!(
            p.b.handle_handshake(parse(&init), addr(A_ADDR), now),
            Err(DropReason::UnknownPeer)
        );
        // A device without a private key takes no handshake.
        p.b.set_private_key(None);
        assert_eq!(
            p.b.handle_handshake(parse(&init), addr(A_ADDR), now),
            Err(DropReason::NoPrivateKey)
        );
        assert!(actions(&mut p.b).is_empty());
        assert_eq!(p.b.index_count(), 0);
    }

    #[test]
    fn transport_data_and_unchecked_views_are_refused_without_panic() {
        let keys = Arc::new(KeyRegistry::new(8));
        let now = Instant::now();
        let mut d = device(&keys, now);
        let mut data = [0u8; 32];
        TransportData::emit(&mut data[..], 1, 0).unwrap();
        let m = Message::TransportData(TransportData::new_checked(&data[..]).unwrap());
        assert_eq!(
            d.handle_handshake(m, addr(A_ADDR), now),
            Err(DropReason::UnknownType)
        );
        // Views made without a length check, as a careless caller might.
        let short = [1u8, 0, 0, 0];
        for m in [
            Message::HandshakeInitiation(HandshakeInitiation::new_unchecked(&short[..])),
            Message::HandshakeResponse(wire::wireguard::HandshakeResponse::new_unchecked(
                &short[..],
            )),
            Message::CookieReply(wire::wireguard::CookieReply::new_unchecked(&short[..])),
        ] {
            assert_eq!(
                d.handle_handshake(m, addr(A_ADDR), now),
                Err(DropReason::WrongLength)
            );
        }
    }

    #[test]
    fn under_load_a_cookie_reply_lets_the_retry_through() {
        let now = Instant::now();
        let mut p = pair(now);
        p.b.set_under_load_threshold(0);
        let init = initiation(&mut p, now);
        assert_eq!(
            p.b.handle_handshake(parse(&init), addr(A_ADDR), now),
            Err(DropReason::CookieSent)
        );
        let reply = one_sent(&mut p.b);
        assert_eq!(reply[0] as u32, MESSAGE_COOKIE_REPLY);
        assert_eq!(p.b.index_count(), 0);
        p.a.handle_handshake(parse(&reply), addr(B_ADDR), now)
            .unwrap();
        // A reply that does not open (a bit flipped in the sealed cookie).
        let mut bad = reply.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert_eq!(
            p.a.handle_handshake(parse(&bad), addr(B_ADDR), now),
            Err(DropReason::BadCookieReply)
        );
        // The retransmission carries MAC2 and is answered.
        let retry_at = now + REKEY_TIMEOUT + REKEY_TIMEOUT_JITTER_MAX;
        p.a.tick(retry_at);
        let retry = one_sent(&mut p.a);
        p.b.handle_handshake(parse(&retry), addr(A_ADDR), retry_at)
            .unwrap();
        assert_eq!(one_sent(&mut p.b)[0] as u32, MESSAGE_HANDSHAKE_RESPONSE);
    }

    #[test]
    fn initiations_are_spaced_by_rekey_timeout() {
        let now = Instant::now();
        let mut p = pair(now);
        initiation(&mut p, now);
        p.a.stage(p.b_in_a, 0, now + REKEY_TIMEOUT - Duration::from_millis(1));
        assert!(sent(&mut p.a).is_empty());
        p.a.stage(p.b_in_a, 0, now + REKEY_TIMEOUT);
        assert_eq!(sent(&mut p.a).len(), 1);
    }

    #[test]
    fn a_loopback_session_decrypts_what_it_encrypts() {
        let keys = Arc::new(KeyRegistry::new(8));
        let now = Instant::now();
        let mut d = device(&keys, now);
        let id = peer(&mut d);
        d.install_loopback_session(id, now).unwrap();
        let t = d.send_ticket(id, now).unwrap();
        let r = d.recv_ticket(t.receiver_index, t.counter, now).unwrap();
        assert_eq!(r.peer, id);
        assert_eq!(
            keys.get(t.key).unwrap().bytes(),
            keys.get(r.key).unwrap().bytes()
        );
        d.remove_peer(id);
        assert_eq!(
            d.install_loopback_session(id, now),
            Err(DropReason::UnknownPeer)
        );
        assert_eq!((d.index_count(), keys.live_keys()), (0, 0));
    }
}
