//! The push reply: the options a server sends a client that asked with
//! `PUSH_REQUEST`, as one comma-separated control message. A client applies
//! them as if they were in its configuration: its tunnel address, routes, the
//! keepalive timers, its peer-id and the data cipher.

use std::fmt::Write;
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::DataCipher;

/// The request a client sends for its options.
pub const PUSH_REQUEST: &str = "PUSH_REQUEST";
/// The message a client sends on the control channel when it leaves
/// (`explicit-exit-notify` with the `cc-exit` protocol flag).
pub const EXIT: &str = "EXIT";
/// The longest push reply a 2.6 client reads in one message.
pub const MAX_LEN: usize = 1700;

/// What a server pushes to one client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushReply {
    /// The client's address and the tunnel subnet's prefix length
    /// (`topology subnet`).
    pub ifconfig: Option<(Ipv4Addr, u8)>,
    /// The server's address on the tunnel subnet: the client's next hop.
    pub route_gateway: Option<Ipv4Addr>,
    /// The client's IPv6 address, prefix length, and the server's address.
    pub ifconfig_ipv6: Option<(Ipv6Addr, u8, Ipv6Addr)>,
    pub routes: Vec<(Ipv4Addr, u8)>,
    pub routes_ipv6: Vec<(Ipv6Addr, u8)>,
    pub peer_id: u32,
    /// Seconds between keepalive pings, and without traffic before the client
    /// restarts.
    pub ping: u32,
    pub ping_restart: u32,
    pub cipher: DataCipher,
    /// Data keys from the TLS exporter rather than OpenVPN's PRF.
    pub ekm: bool,
    /// The client announces its exit on the control channel.
    pub cc_exit: bool,
    /// The tunnel MTU, for clients that take it pushed (`IV_MTU`).
    pub tun_mtu: Option<u16>,
}

fn netmask(prefix: u8) -> Ipv4Addr {
    Ipv4Addr::from(
        u32::MAX
            .checked_shl(32 - u32::from(prefix.min(32)))
            .unwrap_or(0),
    )
}

impl PushReply {
    /// The message's text, without the final NUL.
    pub fn text(&self) -> String {
        let mut s = String::from("PUSH_REPLY");
        for (net, prefix) in &self.routes {
            let _ = write!(s, ",route {net} {}", netmask(*prefix));
        }
        for (net, prefix) in &self.routes_ipv6 {
            let _ = write!(s, ",route-ipv6 {net}/{prefix}");
        }
        if let Some(gw) = self.route_gateway {
            let _ = write!(s, ",route-gateway {gw}");
        }
        s.push_str(",topology subnet");
        let _ = write!(s, ",ping {},ping-restart {}", self.ping, self.ping_restart);
        if let Some((addr, bits, server)) = self.ifconfig_ipv6 {
            let _ = write!(s, ",ifconfig-ipv6 {addr}/{bits} {server}");
        }
        if let Some((addr, prefix)) = self.ifconfig {
            let _ = write!(s, ",ifconfig {addr} {}", netmask(prefix));
        }
        let _ = write!(s, ",peer-id {},cipher {}", self.peer_id, self.cipher.name());
        match (self.cc_exit, self.ekm) {
            (true, true) => s.push_str(",protocol-flags cc-exit tls-ekm"),
            (true, false) => s.push_str(",protocol-flags cc-exit"),
            (false, true) => s.push_str(",key-derivation tls-ekm"),
            (false, false) => {}
        }
        if let Some(mtu) = self.tun_mtu {
            let _ = write!(s, ",tun-mtu {mtu}");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_reads_as_openvpn_writes_one() {
        let reply = PushReply {
            ifconfig: Some((Ipv4Addr::new(198, 19, 50, 2), 24)),
            route_gateway: Some(Ipv4Addr::new(198, 19, 50, 1)),
            ifconfig_ipv6: Some((
                "2001:2:50::1000".parse().unwrap(),
                64,
                "2001:2:50::1".parse().unwrap(),
            )),
            routes: vec![(Ipv4Addr::new(198, 18, 60, 0), 24)],
            routes_ipv6: vec![("2001:2:60::".parse().unwrap(), 64)],
            peer_id: 3,
            ping: 10,
            ping_restart: 60,
            cipher: DataCipher::Aes256Gcm,
            ekm: true,
            cc_exit: true,
            tun_mtu: None,
        };
        assert_eq!(
            reply.text(),
            "PUSH_REPLY,route 198.18.60.0 255.255.255.0,route-ipv6 2001:2:60::/64,\
route-gateway 198.19.50.1,topology subnet,ping 10,ping-restart 60,\
ifconfig-ipv6 2001:2:50::1000/64 2001:2:50::1,ifconfig 198.19.50.2 255.255.255.0,\
peer-id 3,cipher AES-256-GCM,protocol-flags cc-exit tls-ekm"
        );
        assert_eq!(netmask(0), Ipv4Addr::UNSPECIFIED);
        assert_eq!(netmask(32), Ipv4Addr::BROADCAST);
    }
}
