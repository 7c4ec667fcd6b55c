//! OpenVPN packets as a server receives them: the first byte chooses the
//! protection (none, tls-auth, tls-crypt) and the rest is the packet. Nothing
//! panics; a control packet that unwraps has a body that parses and writes back
//! to the same bytes; a data packet's header round-trips; key-method 2 messages
//! parse or refuse; a tls-crypt-v2 reset's wrapped key splits off and unwraps or
//! is refused.
#![no_main]

use libfuzzer_sys::fuzz_target;
use openvpn::control::Body;
use openvpn::data::DataHeader;
use openvpn::key_method::KeyMethod2;
use openvpn::static_key::{Direction, Key2};
use openvpn::tls_auth::AuthDigest;
use openvpn::wrap::ControlWrap;
use openvpn::{Role, TlsAuth, TlsCrypt};

fuzz_target!(|data: &[u8]| {
    let Some((&choice, packet)) = data.split_first() else { return };
    let key = Key2::from_bytes([7; 256]);
    let wrap = match choice % 3 {
        0 => ControlWrap::None,
        1 => ControlWrap::Auth(TlsAuth::new(&key, Direction::Normal, AuthDigest::Sha1)),
        _ => ControlWrap::Crypt(TlsCrypt::new(&key, Role::Server)),
    };
    if let Ok(u) = wrap.unwrap(packet) {
        if let Ok(body) = Body::parse(u.opcode, &u.body) {
            assert_eq!(body.emit(u.opcode), u.body);
        }
    }
    if let Ok(h) = DataHeader::parse(packet) {
        assert_eq!(h.to_bytes()[..], packet[..8]);
    }
    let _ = KeyMethod2::parse(packet, choice & 4 == 0);
    if let Ok((_, wkc)) = openvpn::tls_crypt_v2::split_reset(packet) {
        let server = openvpn::tls_crypt_v2::ServerKey::from_bytes(&[9; 128]);
        let _ = server.unwrap_client_key(wkc);
    }
});
