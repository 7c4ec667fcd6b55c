//! The cross-platform userspace API (wireguard.com/xplatform): `get=1` and `set=1`
//! requests of `key=value` lines ended by a blank line, answered with `errno=N`, where
//! N is 0 or a negated errno value (`errno=-22` for EINVAL), as the protocol and
//! wireguard-go write it and wg(8) reads it.
//!
//! A request is parsed whole where it arrives, off the packet path ([`parse`]); the
//! worker then carries it out as a [`Job`], a bounded step at a time between its
//! batches of packets, so no packet waits long behind a request, however many peers
//! or allowed IPs it reads or writes.

mod get;
mod set;

pub use get::GetJob;
pub use set::{SetJob, SetOp};
use std::time::Instant;
use wireguard::Device;

/// errno values the protocol answers with.
pub const EINVAL: i32 = libc::EINVAL;
pub const EPROTO: i32 = libc::EPROTO;
pub const EADDRINUSE: i32 = libc::EADDRINUSE;
pub const EIO: i32 = libc::EIO;

/// What the UAPI can change on the outer socket.
pub trait SocketSettings {
    fn listen_port(&self) -> u16;
    fn set_listen_port(&mut self, port: u16) -> Result<(), i32>;
    fn fwmark(&self) -> u32;
    fn set_fwmark(&mut self, mark: u32) -> Result<(), i32>;
}

/// A request, checked and typed.
pub enum Request {
    Get,
    Set(Vec<SetOp>),
}

/// Parses a request's text (without its final blank line). Every syntax error is
/// found here, before anything changes.
pub fn parse(text: &str) -> Result<Request, i32> {
    let mut lines = text.lines();
    match lines.next() {
        Some("get=1") => match lines.any(|l| !l.is_empty()) {
            true => Err(EINVAL),
            false => Ok(Request::Get),
        },
        Some("set=1") => set::parse(lines).map(Request::Set),
        _ => Err(EINVAL),
    }
}

/// A request being carried out.
pub enum Job {
    Get(GetJob),
    Set(SetJob),
}

impl Job {
    pub fn new(request: Request, device: &Device) -> Job {
        match request {
            Request::Get => Job::Get(GetJob::new(device)),
            Request::Set(ops) => Job::Set(SetJob::new(ops)),
        }
    }

    /// Works until done, returning the whole reply, or until `deadline` (`None`:
    /// call again later).
    pub fn step(
        &mut self,
        device: &mut Device,
        socket: &mut dyn SocketSettings,
        now: Instant,
        deadline: Instant,
    ) -> Option<String> {
        match self {
            Job::Get(job) => job.step(device, socket, deadline),
            Job::Set(job) => job
                .step(device, socket, now, deadline)
                .map(|res| errno(res.err().unwrap_or(0))),
        }
    }
}

/// The reply that ends every answer: `errno=0`, or the negated error number.
pub fn errno(e: i32) -> String {
    format!("errno={}\n\n", -e.abs())
}

/// Parses and carries out a request in one go (tests, and callers with no packets to
/// keep moving).
#[cfg(test)]
pub fn handle(
    text: &str,
    device: &mut Device,
    socket: &mut dyn SocketSettings,
    now: Instant,
) -> String {
    let mut job = match parse(text) {
        Ok(request) => Job::new(request, device),
        Err(e) => return errno(e),
    };
    let deadline = Instant::now() + std::time::Duration::from_secs(3600);
    loop {
        if let Some(reply) = job.step(device, socket, now, deadline) {
            return reply;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crypto::KeyRegistry;
    use crypto::x25519::PrivateKey;
    use std::sync::Arc;
    use std::time::SystemTime;

    struct Sock {
        port: u16,
        mark: u32,
    }
    impl SocketSettings for Sock {
        fn listen_port(&self) -> u16 {
            self.port
        }
        fn set_listen_port(&mut self, port: u16) -> Result<(), i32> {
            if port == 1 {
                return Err(EADDRINUSE);
            }
            self.port = port;
            Ok(())
        }
        fn fwmark(&self) -> u32 {
            self.mark
        }
        fn set_fwmark(&mut self, mark: u32) -> Result<(), i32> {
            self.mark = mark;
            Ok(())
        }
    }

    fn setup() -> (Device, Sock, Instant) {
        let now = Instant::now();
        (
            Device::new(Arc::new(KeyRegistry::new(64)), now, SystemTime::now()),
            Sock { port: 0, mark: 0 },
            now,
        )
    }

    #[test]
    fn set_then_get_round_trips() {
        let (mut d, mut s, now) = setup();
        let sk = PrivateKey::generate();
        let peer = PrivateKey::generate().public_key();
        let req = format!(
            "set=1\nprivate_key={}\nlisten_port=51820\nfwmark=7\nreplace_peers=true\npublic_key={}\npreshared_key={}\nendpoint=[2001:2::2]:51820\npersistent_keepalive_interval=25\nreplace_allowed_ips=true\nallowed_ip=198.19.0.2/32\nallowed_ip=2001:2:1::/64\nallowed_ip=198.19.9.0/24\nallowed_ip=-198.19.9.0/24\nprotocol_version=1\n",
            hex::encode(sk.to_bytes()),
            hex::encode(peer.0),
            hex::encode([5u8; 32])
        );
        assert_eq!(handle(&req, &mut d, &mut s, now), "errno=0\n\n");
        let got = handle("get=1\n", &mut d, &mut s, now);
        for want in [
            format!("private_key={}\n", hex::encode(sk.to_bytes())),
            "listen_port=51820\n".into(),
            "fwmark=7\n".into(),
            format!("public_key={}\n", hex::encode(peer.0)),
            format!("preshared_key={}\n", hex::encode([5u8; 32])),
            "endpoint=[2001:2::2]:51820\n".into(),
            "persistent_keepalive_interval=25\n".into(),
            "allowed_ip=198.19.0.2/32\n".into(),
            "allowed_ip=2001:2:1::/64\n".into(),
            "last_handshake_time_sec=0\n".into(),
            "rx_bytes=0\n".into(),
        ] {
            assert!(got.contains(&want), "missing {want:?} in\n{got}");
        }
        assert!(!got.contains("198.19.9.0"), "removed with the - prefix");
        assert!(got.ends_with("errno=0\n\n"));
    }

    #[test]
    fn bad_input_answers_errno() {
        let (mut d, mut s, now) = setup();
        for (req, e) in [
            ("set=1\nprivate_key=zz\n", EINVAL),
            ("set=1\nlisten_port=99999\n", EINVAL),
            ("set=1\nlisten_port=1\n", EADDRINUSE),
            ("set=1\nendpoint=1.2.3.4:5\n", EINVAL),
            ("set=1\nbogus=1\n", EINVAL),
            ("set=1\nnoequals\n", EPROTO),
            ("frob=1\n", EINVAL),
            ("get=1\nextra=1\n", EINVAL),
            (
                &format!(
                    "set=1\npublic_key={}\nprotocol_version=2\n",
                    hex::encode([9u8; 32])
                ),
                EINVAL,
            ),
            (
                &format!(
                    "set=1\npublic_key={}\nallowed_ip=198.19.0.0/33\n",
                    hex::encode([9u8; 32])
                ),
                EINVAL,
            ),
            (
                &format!(
                    "set=1\npublic_key={}\nendpoint=nohost\n",
                    hex::encode([9u8; 32])
                ),
                EINVAL,
            ),
        ] {
            assert_eq!(
                handle(req, &mut d, &mut s, now),
                format!("errno=-{e}\n\n"),
                "{req:?}"
            );
        }
    }

    #[test]
    fn update_only_and_remove() {
        let (mut d, mut s, now) = setup();
        let pk = hex::encode([3u8; 32]);
        let r = handle(
            &format!("set=1\npublic_key={pk}\nupdate_only=true\nendpoint=198.18.0.9:1\n"),
            &mut d,
            &mut s,
            now,
        );
        assert_eq!(r, "errno=0\n\n");
        assert!(d.peer_ids().is_empty(), "update_only does not create");
        handle(
            &format!("set=1\npublic_key={pk}\nendpoint=198.18.0.9:1\n"),
            &mut d,
            &mut s,
            now,
        );
        assert_eq!(d.peer_ids().len(), 1);
        handle(
            &format!("set=1\npublic_key={pk}\nupdate_only=true\nendpoint=198.18.0.9:2\n"),
            &mut d,
            &mut s,
            now,
        );
        assert_eq!(
            d.peer_info(d.peer_ids()[0]).unwrap().endpoint,
            Some("198.18.0.9:2".parse().unwrap())
        );
        handle(
            &format!("set=1\npublic_key={pk}\nremove=true\n"),
            &mut d,
            &mut s,
            now,
        );
        assert!(d.peer_ids().is_empty());
    }

    /// Steps that stop at their deadline, resumed, give the same reply as one go, and
    /// a replace of many peers goes in steps too.
    #[test]
    fn requests_carried_out_in_steps_give_the_same_result() {
        let (mut d, mut s, now) = setup();
        let mut req = String::from("set=1\n");
        for i in 0..2000u32 {
            let mut k = [7u8; 32];
            k[..4].copy_from_slice(&i.to_be_bytes());
            req.push_str(&format!(
                "public_key={}\nallowed_ip=198.18.{}.{}/32\n",
                hex::encode(k),
                i >> 8,
                i & 0xff
            ));
        }
        let Ok(Request::Set(ops)) = parse(&req) else {
            panic!("parses")
        };
        let mut job = Job::new(Request::Set(ops), &d);
        let mut steps = 0;
        let reply = loop {
            steps += 1;
            // A deadline already past: every step does one bounded chunk.
            if let Some(r) = job.step(&mut d, &mut s, now, Instant::now()) {
                break r;
            }
        };
        assert_eq!(reply, "errno=0\n\n");
        assert!(steps > 10, "{steps} steps");
        assert_eq!(d.peer_ids().len(), 2000);

        let whole = handle("get=1\n", &mut d, &mut s, now);
        let mut job = Job::new(Request::Get, &d);
        let mut steps = 0;
        let stepped = loop {
            steps += 1;
            if let Some(r) = job.step(&mut d, &mut s, now, Instant::now()) {
                break r;
            }
        };
        assert!(steps > 10, "{steps} steps");
        assert!(stepped == whole, "a stepped get differs from one in one go");
        assert_eq!(stepped.matches("public_key=").count(), 2000);

        let Ok(req) = parse("set=1\nreplace_peers=true\n") else {
            panic!("parses")
        };
        let mut job = Job::new(req, &d);
        let mut steps = 0;
        while job.step(&mut d, &mut s, now, Instant::now()).is_none() {
            steps += 1;
        }
        assert!(steps > 10, "{steps} steps");
        assert!(d.peer_ids().is_empty());
    }

    #[test]
    fn a_syntax_error_anywhere_changes_nothing() {
        let (mut d, mut s, now) = setup();
        let req = format!(
            "set=1\nlisten_port=51820\npublic_key={}\nallowed_ip=198.19.0.0/33\n",
            hex::encode([9u8; 32])
        );
        assert_eq!(handle(&req, &mut d, &mut s, now), "errno=-22\n\n");
        assert_eq!(s.port, 0);
        assert!(d.peer_ids().is_empty());
    }
}
