//! The Noise_IKpsk2 handshake (whitepaper section 5.4.2 to 5.4.5), as pure functions
//! over messages and state structs. Nothing here looks up peers, reads clocks or
//! touches indices; [`crate::device`] does that around these calls. Every function
//! either returns a complete result or an error with no output written, so a bad
//! message changes no state.
//!
//! Messages are read and written through the `wire` crate's views, which own the
//! layout and the lengths: this file names fields, never offsets.

use crate::constants::{CONSTRUCTION, IDENTIFIER};
use crate::tai64n::Tai64N;
use crypto::blake2s::{hash, kdf};
use crypto::seal::{open, seal};
use crypto::x25519::{PrivateKey, PublicKey};
use std::sync::OnceLock;
use wire::wireguard::{
    ENCRYPTED_NOTHING_LEN, ENCRYPTED_STATIC_LEN, ENCRYPTED_TIMESTAMP_LEN, HANDSHAKE_INITIATION_LEN,
    HANDSHAKE_RESPONSE_LEN, HandshakeInitiation, HandshakeResponse, KEY_LEN, TIMESTAMP_LEN,
};
use zeroize::{Zeroize, ZeroizeOnDrop};

/// Why a handshake message was refused. Each has its own drop counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandshakeError {
    /// An AEAD field did not open: wrong keys, or a corrupt body behind a good MAC1.
    DecryptFailed,
    /// A Diffie-Hellman result was all zeros (a low-order point).
    ZeroSharedSecret,
}

/// `Ci` and `Hi` before any key is mixed in: constants of the construction.
fn initial_chain() -> &'static ([u8; 32], [u8; 32]) {
    static INIT: OnceLock<([u8; 32], [u8; 32])> = OnceLock::new();
    INIT.get_or_init(|| {
        let ck = hash(&[CONSTRUCTION]);
        let h = hash(&[&ck, IDENTIFIER]);
        (ck, h)
    })
}

fn mix_hash(h: &mut [u8; 32], data: &[u8]) {
    *h = hash(&[&h[..], data]);
}

fn mix_dh(
    ck: &mut [u8; 32],
    secret: &PrivateKey,
    public: &PublicKey,
) -> Result<[u8; 32], HandshakeError> {
    let shared = secret
        .dh(public)
        .map_err(|_| HandshakeError::ZeroSharedSecret)?;
    let [c, k] = kdf::<2>(ck, shared.as_bytes());
    *ck = c;
    Ok(k)
}

/// Our static key pair.
pub struct Identity {
    pub private: PrivateKey,
    pub public: PublicKey,
}

impl Identity {
    pub fn new(private: PrivateKey) -> Identity {
        let public = private.public_key();
        Identity { private, public }
    }
}

/// The initiator's state between sending an initiation and receiving the response.
#[derive(Zeroize, ZeroizeOnDrop)]
pub struct InitiatorState {
    #[zeroize(skip)]
    pub local_index: u32,
    ephemeral: PrivateKey,
    hash: [u8; 32],
    chaining_key: [u8; 32],
}

/// What the responder learned from a valid initiation.
#[derive(Zeroize, ZeroizeOnDrop)]
pub struct ConsumedInitiation {
    #[zeroize(skip)]
    pub peer_public: PublicKey,
    #[zeroize(skip)]
    pub remote_index: u32,
    #[zeroize(skip)]
    pub timestamp: Tai64N,
    remote_ephemeral: [u8; KEY_LEN],
    hash: [u8; 32],
    chaining_key: [u8; 32],
}

/// The two transport keys a handshake ends with.
#[derive(Zeroize, ZeroizeOnDrop)]
pub struct SessionKeys {
    pub send: [u8; 32],
    pub recv: [u8; 32],
}

/// Writes an initiation into `out` (MACs left zero for the cookie jar to stamp).
pub fn create_initiation(
    me: &Identity,
    peer_public: &PublicKey,
    local_index: u32,
    timestamp: Tai64N,
    out: &mut [u8; HANDSHAKE_INITIATION_LEN],
) -> Result<InitiatorState, HandshakeError> {
    let (ck0, h0) = initial_chain();
    let mut ck = *ck0;
    let mut h = *h0;
    mix_hash(&mut h, peer_public.as_bytes());
    let ephemeral = PrivateKey::generate();
    let e_pub = ephemeral.public_key();
    [ck] = kdf::<1>(&ck, e_pub.as_bytes());
    mix_hash(&mut h, e_pub.as_bytes());
    let mut k = mix_dh(&mut ck, &ephemeral, peer_public)?;
    let mut encrypted_static = [0u8; ENCRYPTED_STATIC_LEN];
    seal(&k, 0, &h, me.public.as_bytes(), &mut encrypted_static);
    mix_hash(&mut h, &encrypted_static);
    k = mix_dh(&mut ck, &me.private, peer_public)?;
    let mut encrypted_timestamp = [0u8; ENCRYPTED_TIMESTAMP_LEN];
    seal(&k, 0, &h, &timestamp.0, &mut encrypted_timestamp);
    mix_hash(&mut h, &encrypted_timestamp);
    k.zeroize();

    out.fill(0);
    let mut m = HandshakeInitiation::emit(&mut out[..], local_index)
        .expect("the buffer is exactly an initiation");
    m.set_unencrypted_ephemeral(e_pub.as_bytes());
    m.set_encrypted_static(&encrypted_static);
    m.set_encrypted_timestamp(&encrypted_timestamp);
    Ok(InitiatorState {
        local_index,
        ephemeral,
        hash: h,
        chaining_key: ck,
    })
}

/// Opens an initiation addressed to `me`: who sent it, their index and timestamp.
/// The caller still has to find the peer, check the timestamp and the flood limit.
pub fn consume_initiation<T: AsRef<[u8]>>(
    me: &Identity,
    msg: &HandshakeInitiation<T>,
) -> Result<ConsumedInitiation, HandshakeError> {
    let (ck0, h0) = initial_chain();
    let mut ck = *ck0;
    let mut h = *h0;
    mix_hash(&mut h, me.public.as_bytes());
    let remote_index = msg.sender_index();
    let e_remote = *msg.unencrypted_ephemeral();
    [ck] = kdf::<1>(&ck, &e_remote);
    mix_hash(&mut h, &e_remote);
    let mut k = mix_dh(&mut ck, &me.private, &PublicKey(e_remote))?;
    let mut peer_public = [0u8; KEY_LEN];
    open(&k, 0, &h, msg.encrypted_static(), &mut peer_public)
        .map_err(|_| HandshakeError::DecryptFailed)?;
    mix_hash(&mut h, msg.encrypted_static());
    let peer_public = PublicKey(peer_public);
    k = mix_dh(&mut ck, &me.private, &peer_public)?;
    let mut timestamp = [0u8; TIMESTAMP_LEN];
    open(&k, 0, &h, msg.encrypted_timestamp(), &mut timestamp)
        .map_err(|_| HandshakeError::DecryptFailed)?;
    mix_hash(&mut h, msg.encrypted_timestamp());
    k.zeroize();
    Ok(ConsumedInitiation {
        peer_public,
        remote_index,
        timestamp: Tai64N(timestamp),
        remote_ephemeral: e_remote,
        hash: h,
        chaining_key: ck,
    })
}

/// Writes the response to a consumed initiation and derives the session (responder
/// side: it sends with the second key).
pub fn create_response(
    init: &ConsumedInitiation,
    psk: &[u8; 32],
    local_index: u32,
    out: &mut [u8; HANDSHAKE_RESPONSE_LEN],
) -> Result<SessionKeys, HandshakeError> {
    let mut ck = init.chaining_key;
    let mut h = init.hash;
    let ephemeral = PrivateKey::generate();
    let e_pub = ephemeral.public_key();
    [ck] = kdf::<1>(&ck, e_pub.as_bytes());
    mix_hash(&mut h, e_pub.as_bytes());
    let mut scratch = mix_dh(&mut ck, &ephemeral, &PublicKey(init.remote_ephemeral))?;
    scratch.zeroize();
    let mut scratch = mix_dh(&mut ck, &ephemeral, &init.peer_public)?;
    scratch.zeroize();
    let [c, mut tau, mut k] = kdf::<3>(&ck, psk);
    ck = c;
    mix_hash(&mut h, &tau);
    let mut empty = [0u8; ENCRYPTED_NOTHING_LEN];
    seal(&k, 0, &h, &[], &mut empty);
    mix_hash(&mut h, &empty);
    let [t1, t2] = kdf::<2>(&ck, &[]);
    tau.zeroize();
    k.zeroize();
    ck.zeroize();
    h.zeroize();

    out.fill(0);
    let mut m = HandshakeResponse::emit(&mut out[..], local_index, init.remote_index)
        .expect("the buffer is exactly a response");
    m.set_unencrypted_ephemeral(e_pub.as_bytes());
    m.set_encrypted_nothing(&empty);
    Ok(SessionKeys { send: t2, recv: t1 })
}

/// Opens a response to our initiation and derives the session (initiator side).
pub fn consume_response<T: AsRef<[u8]>>(
    me: &Identity,
    state: &InitiatorState,
    psk: &[u8; 32],
    msg: &HandshakeResponse<T>,
) -> Result<SessionKeys, HandshakeError> {
    let mut ck = state.chaining_key;
    let mut h = state.hash;
    let e_remote = *msg.unencrypted_ephemeral();
    [ck] = kdf::<1>(&ck, &e_remote);
    mix_hash(&mut h, &e_remote);
    let mut scratch = mix_dh(&mut ck, &state.ephemeral, &PublicKey(e_remote))?;
    scratch.zeroize();
    let mut scratch = mix_dh(&mut ck, &me.private, &PublicKey(e_remote))?;
    scratch.zeroize();
    let [c, mut tau, mut k] = kdf::<3>(&ck, psk);
    ck = c;
    mix_hash(&mut h, &tau);
    let mut nothing = [0u8; 0];
    let opened = open(&k, 0, &h, msg.encrypted_nothing(), &mut nothing);
    tau.zeroize();
    k.zeroize();
    opened.map_err(|_| HandshakeError::DecryptFailed)?;
    let [t1, t2] = kdf::<2>(&ck, &[]);
    ck.zeroize();
    h.zeroize();
    Ok(SessionKeys { send: t1, recv: t2 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;
    use wire::wireguard::{MAC_LEN, Message, MessageType};

    fn initiation(msg: &[u8]) -> HandshakeInitiation<&[u8]> {
        HandshakeInitiation::new_checked(msg).unwrap()
    }

    fn response(msg: &[u8]) -> HandshakeResponse<&[u8]> {
        HandshakeResponse::new_checked(msg).unwrap()
    }

    #[test]
    fn both_sides_derive_mirrored_keys() {
        let i = Identity::new(PrivateKey::generate());
        let r = Identity::new(PrivateKey::generate());
        let psk = [9u8; 32];
        let mut init = [0u8; HANDSHAKE_INITIATION_LEN];
        let st =
            create_initiation(&i, &r.public, 77, Tai64N::at(SystemTime::now()), &mut init).unwrap();
        let consumed = consume_initiation(&r, &initiation(&init)).unwrap();
        assert_eq!(consumed.peer_public, i.public);
        assert_eq!(consumed.remote_index, 77);
        let mut resp = [0u8; HANDSHAKE_RESPONSE_LEN];
        let rk = create_response(&consumed, &psk, 88, &mut resp).unwrap();
        let ik = consume_response(&i, &st, &psk, &response(&resp)).unwrap();
        assert_eq!(ik.send, rk.recv);
        assert_eq!(ik.recv, rk.send);
        assert_ne!(ik.send, ik.recv);
        // A different pre-shared key makes the response fail to open.
        assert_eq!(
            consume_response(&i, &st, &[0; 32], &response(&resp)).err(),
            Some(HandshakeError::DecryptFailed)
        );
        // Any flipped bit in the initiation body (after the sender index, before
        // the MACs) is refused.
        for byte in 8..HANDSHAKE_INITIATION_LEN - 2 * MAC_LEN {
            let mut bad = init;
            bad[byte] ^= 0x10;
            assert!(
                consume_initiation(&r, &initiation(&bad)).is_err(),
                "byte {byte}"
            );
        }
    }

    #[test]
    fn messages_are_laid_out_as_the_wire_views_read_them() {
        let i = Identity::new(PrivateKey::generate());
        let r = Identity::new(PrivateKey::generate());
        let mut init = [0xffu8; HANDSHAKE_INITIATION_LEN];
        create_initiation(&i, &r.public, 77, Tai64N::at(SystemTime::now()), &mut init).unwrap();
        let Ok(Message::HandshakeInitiation(m)) = Message::parse(&init[..]) else {
            panic!("not an initiation: {:?}", Message::classify(&init));
        };
        assert_eq!(m.sender_index(), 77);
        // The MACs are left zero for the cookie jar.
        assert_eq!((m.mac1(), m.mac2()), (&[0; MAC_LEN], &[0; MAC_LEN]));

        let consumed = consume_initiation(&r, &m).unwrap();
        let mut resp = [0xffu8; HANDSHAKE_RESPONSE_LEN];
        create_response(&consumed, &[0; 32], 88, &mut resp).unwrap();
        assert_eq!(Message::classify(&resp), Ok(MessageType::HandshakeResponse));
        let m = response(&resp);
        assert_eq!((m.sender_index(), m.receiver_index()), (88, 77));
        assert_eq!((m.mac1(), m.mac2()), (&[0; MAC_LEN], &[0; MAC_LEN]));
    }

    #[test]
    fn a_failed_initiation_writes_nothing() {
        let i = Identity::new(PrivateKey::generate());
        let mut out = [0xa5u8; HANDSHAKE_INITIATION_LEN];
        // The all-zero point is of low order: every DH with it is zero.
        let r = create_initiation(&i, &PublicKey([0; 32]), 1, Tai64N::default(), &mut out);
        assert_eq!(r.err(), Some(HandshakeError::ZeroSharedSecret));
        assert_eq!(out, [0xa5; HANDSHAKE_INITIATION_LEN]);
    }

    #[test]
    fn low_order_ephemeral_is_refused() {
        let r = Identity::new(PrivateKey::generate());
        let mut init = [0u8; HANDSHAKE_INITIATION_LEN];
        HandshakeInitiation::emit(&mut init[..], 1).unwrap();
        // The all-zero point makes every DH result zero.
        assert_eq!(
            consume_initiation(&r, &initiation(&init)).err(),
            Some(HandshakeError::ZeroSharedSecret)
        );
    }
}
