//! An OpenVPN server's data channel on a gateway, in memory, against the
//! `openvpn` crate's reference seal and open (which a stock client's packets
//! match, see that crate's tests): a client's packets are opened and routed to
//! the LAN, the LAN's packets to the client are sealed and sent from the server's
//! port; control packets reach the control thread's inbox; replays, forgeries,
//! unknown peer-ids and key ids, a wrong inner source, keepalives and a client
//! that moves are each handled as the node's reasons say. Every cipher, and
//! every engine this build has.

use crypto::{EngineSet, KeyRegistry};
use dataplane::Arena;
use dataplane::context::{OutputId, ovpn_tunnel};
use dataplane::fib::{PortId, RouteTarget};
use dataplane::gateway::GatewayGraph;
use dataplane::interfaces::Interface;
use dataplane::ovpn::{
    INBOX_LEN, OvpnChange, OvpnInbox, OvpnInput, OvpnKey, OvpnServer, OvpnServerId,
};
use openvpn::data::{self, DataHeader, PING};
use openvpn::data_keys::DataKeys;
use openvpn::static_key::Key2;
use openvpn::{DataCipher, KeyId, Role};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::time::{Instant, SystemTime};
use wire::{ipv4, udp};

mod ports;
use ports::{UnderTest, arp_answer, ether};

const GW_WAN_MAC: [u8; 6] = [0x02, 0, 0, 0, 1, 1];
const GW_LAN_MAC: [u8; 6] = [0x02, 0, 0, 0, 1, 2];
const CLIENT_MAC: [u8; 6] = [0x02, 0, 0, 0, 2, 1];
const HOST_MAC: [u8; 6] = [0x02, 0, 0, 0, 3, 1];
const CLIENT_TUNNEL: [u8; 4] = [198, 19, 50, 2];
const LAN_HOST: [u8; 4] = [198, 18, 3, 9];

struct Gw {
    gw: GatewayGraph,
    now: Instant,
    wan: PortId,
    lan: PortId,
    server: OvpnServerId,
    rx: Receiver<OvpnInput>,
    registry: Arc<KeyRegistry>,
    /// The client's side of the current key.
    client: DataKeys,
    /// The server's side of the newest key installed, as every worker shares it.
    key: Option<Arc<OvpnKey>>,
    next_id: u32,
}

impl UnderTest for Gw {
    fn graph(&mut self) -> (&mut GatewayGraph, Instant) {
        (&mut self.gw, self.now)
    }
}

fn material(seed: u8) -> Key2 {
    Key2::from_bytes(std::array::from_fn(|i| {
        (i as u8).wrapping_mul(seed).wrapping_add(seed)
    }))
}

fn interface(name: &str, mac: [u8; 6], addr: &str) -> Interface {
    Interface {
        name: name.into(),
        mac,
        mtu: 1500,
        addrs: vec![addr.parse().unwrap()],
        output: OutputId(0),
    }
}

impl Gw {
    fn new(cipher: DataCipher, engine: Box<dyn crypto::Engine>) -> Gw {
        let now = Instant::now();
        let registry = Arc::new(KeyRegistry::new(64));
        let device = wireguard::Device::new(registry.clone(), now, SystemTime::now());
        let mut gw = GatewayGraph::new(Arena::new(128), EngineSet::new(vec![engine]), device, now);
        let wan = gw
            .add_port(interface("wan", GW_WAN_MAC, "198.18.2.1/24"))
            .unwrap();
        let lan = gw
            .add_port(interface("lan", GW_LAN_MAC, "198.18.3.1/24"))
            .unwrap();
        let server = gw
            .add_ovpn(OvpnServer::new("remote-access", 1194, 1500))
            .unwrap();
        gw.add_route(
            "198.19.50.0/24".parse().unwrap(),
            RouteTarget::Tunnel(ovpn_tunnel(server)),
        )
        .unwrap();
        let (inbox, rx) = OvpnInbox::bounded(INBOX_LEN);
        gw.set_ovpn_inbox(inbox);
        let remote: SocketAddr = "198.18.2.2:40000".parse().unwrap();
        gw.ovpn_mut()
            .apply(&OvpnChange::AddClient {
                server,
                peer_id: 5,
                remote,
                addrs: vec![std::net::IpAddr::from(CLIENT_TUNNEL)],
            })
            .unwrap();
        let mut t = Gw {
            gw,
            now,
            wan,
            lan,
            server,
            rx,
            registry,
            client: DataKeys::new(&material(3), cipher, Role::Client),
            key: None,
            next_id: 1,
        };
        t.install(0, 3, cipher);
        t
    }

    fn install(&mut self, key_id: u8, seed: u8, cipher: DataCipher) {
        let server_keys = DataKeys::new(&material(seed), cipher, Role::Server);
        self.use_key(Arc::new(
            OvpnKey::new(&self.registry, key_id, &server_keys).unwrap(),
        ));
        self.client = DataKeys::new(&material(seed), cipher, Role::Client);
    }

    /// Installs `key` for client 5 and seals with it.
    fn use_key(&mut self, key: Arc<OvpnKey>) {
        let (server, key_id) = (self.server, key.key_id);
        self.key = Some(key.clone());
        for change in [
            OvpnChange::InstallKey {
                server,
                peer_id: 5,
                key,
            },
            OvpnChange::SendWith {
                server,
                peer_id: 5,
                key_id,
            },
        ] {
            self.gw.ovpn_mut().apply(&change).unwrap();
        }
    }

    /// A data packet from the client, as the client seals it.
    fn client_sends(&mut self, key_id: u8, plain: &[u8]) -> Vec<u8> {
        let h = DataHeader {
            key_id: KeyId::new(key_id).unwrap(),
            peer_id: 5,
            packet_id: self.next_id,
        };
        self.next_id += 1;
        data::seal(self.client.cipher, &self.client.send, h, plain)
    }

    /// `payload` in UDP from the client's `port` to the server's, framed for the WAN.
    fn wan_frame(&self, port: u16, payload: &[u8]) -> Vec<u8> {
        let p = ports::udp4_packet([198, 18, 2, 2], [198, 18, 2, 1], port, 1194, payload);
        ether(GW_WAN_MAC, CLIENT_MAC, 0x0800, &p)
    }

    /// Frames sent on `port`, answering the gateway's ARP requests on the way.
    fn out(&mut self, port: PortId, mac: [u8; 6]) -> Vec<Vec<u8>> {
        let mut frames = Vec::new();
        for _ in 0..3 {
            let mut asked = false;
            for f in self.sent(port) {
                if let Some(answer) = arp_answer(&f, mac) {
                    self.send(port, &answer);
                    asked = true;
                } else {
                    frames.push(f);
                }
            }
            if !asked {
                break;
            }
        }
        frames
    }
}

/// An ICMP echo request from `src` to `dst`.
fn echo(src: [u8; 4], dst: [u8; 4], seq: u16) -> Vec<u8> {
    let mut p = vec![0u8; 20 + 8 + 16];
    p[0] = 0x45;
    let total = p.len() as u16;
    p[2..4].copy_from_slice(&total.to_be_bytes());
    p[8] = 64;
    p[9] = 1;
    p[12..16].copy_from_slice(&src);
    p[16..20].copy_from_slice(&dst);
    p[20] = 8;
    p[26..28].copy_from_slice(&seq.to_be_bytes());
    let mut icmp = wire::icmp::Packet::new_unchecked(&mut p[20..]);
    icmp.fill_checksum();
    ipv4::Packet::new_unchecked(&mut p[..]).fill_checksum();
    p
}

type MakeEngine = fn() -> Box<dyn crypto::Engine>;

/// The engines that serve `cipher`: ours (ChaCha20-Poly1305 only),
/// intel-ipsec-mb, AWS-LC and the reference.
fn engines(cipher: DataCipher) -> Vec<(&'static str, MakeEngine)> {
    let mut list: Vec<(&'static str, MakeEngine)> = vec![
        ("aws-lc", || Box::new(crypto_awslc::AwsLcEngine::new())),
        ("reference", || {
            Box::new(crypto::reference::ReferenceEngine::new())
        }),
        ("ipsecmb", || {
            Box::new(crypto_ipsecmb::IpsecMbEngine::new().expect("intel-ipsec-mb loads"))
        }),
    ];
    if cipher == DataCipher::Chacha20Poly1305 {
        list.push(("mb", || Box::new(crypto_mb::MbEngine::new())));
    }
    list
}

#[test]
fn a_clients_packets_reach_the_lan_and_the_lans_reach_the_client() {
    for cipher in DataCipher::ALL {
        for (engine, make) in engines(cipher) {
            let mut t = Gw::new(cipher, make());
            let what = format!("{cipher:?} on {engine}");
            // In: the client's echo request comes out on the LAN, whole.
            let inner = echo(CLIENT_TUNNEL, LAN_HOST, 1);
            let packet = t.client_sends(0, &inner);
            let frame = t.wan_frame(40000, &packet);
            t.send(t.wan, &frame);
            let lan = t.out(t.lan, HOST_MAC);
            assert_eq!(lan.len(), 1, "{what}");
            // The key's shared usage has it once the frame is done.
            let usage = &t.key.as_ref().unwrap().usage;
            let load = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
            assert_eq!(
                (load(&usage.packets_in), load(&usage.bytes_in)),
                (1, packet.len() as u64),
                "{what}"
            );
            let mut expected = inner.clone();
            expected[8] -= 1; // forwarded: one hop less
            ipv4::Packet::new_unchecked(&mut expected[..]).fill_checksum();
            assert_eq!(lan[0][14..], expected[..], "{what}");

            // Out: the LAN host's packet to the client leaves the WAN port for the
            // client's address, from the server's port, and opens with the
            // client's key.
            let reply = echo(LAN_HOST, CLIENT_TUNNEL, 2);
            let frame = ether(GW_LAN_MAC, HOST_MAC, 0x0800, &reply);
            t.send(t.lan, &frame);
            let wan = t.out(t.wan, CLIENT_MAC);
            assert_eq!(wan.len(), 1, "{what}");
            let ip = ipv4::Packet::new_checked(&wan[0][14..]).unwrap();
            assert_eq!(ip.dst_addr(), std::net::Ipv4Addr::new(198, 18, 2, 2));
            let u = udp::Packet::new_checked(ip.payload()).unwrap();
            assert_eq!((u.src_port(), u.dst_port()), (1194, 40000), "{what}");
            let (h, plain) = data::open(cipher, &t.client.recv, u.payload()).unwrap();
            assert_eq!(
                (h.peer_id, h.key_id.get(), h.packet_id),
                (5, 0, 1),
                "{what}"
            );
            let mut expected = reply.clone();
            expected[8] -= 1;
            ipv4::Packet::new_unchecked(&mut expected[..]).fill_checksum();
            assert_eq!(plain, expected, "{what}");
            let usage = &t.key.as_ref().unwrap().usage;
            assert_eq!(
                (load(&usage.packets_out), load(&usage.bytes_out)),
                (1, u.payload().len() as u64),
                "{what}"
            );
        }
    }
}

#[test]
fn a_clients_packet_cut_into_ip_fragments_on_its_way_is_made_whole() {
    let cipher = DataCipher::Aes256Gcm;
    let (_, make) = engines(cipher).remove(0);
    let mut t = Gw::new(cipher, make());
    // A full-size inner packet (tun-mtu 1500) over a path narrower than its
    // datagram: the client's kernel cuts it.
    let mut inner = echo(CLIENT_TUNNEL, LAN_HOST, 1);
    inner.resize(1500, 0x5a);
    inner[2..4].copy_from_slice(&1500u16.to_be_bytes());
    ipv4::Packet::new_unchecked(&mut inner[..]).fill_checksum();
    let packet = t.client_sends(0, &inner);
    let mut ip = ports::udp4_packet([198, 18, 2, 2], [198, 18, 2, 1], 40000, 1194, &packet);
    ip[4..6].copy_from_slice(&7u16.to_be_bytes());
    ipv4::Packet::new_unchecked(&mut ip[..]).fill_checksum();
    let fragments = ports::ipv4_fragments(&ip, 1256);
    assert_eq!(fragments.len(), 2);
    for f in fragments.iter().rev() {
        let frame = ether(GW_WAN_MAC, CLIENT_MAC, 0x0800, f);
        t.send(t.wan, &frame);
    }
    let lan = t.out(t.lan, HOST_MAC);
    assert_eq!(lan.len(), 1);
    assert_eq!(lan[0].len(), 14 + 1500);
    assert_eq!(lan[0][14 + 28..], inner[28..]);
    assert_eq!(
        t.gw.context().arena().available(),
        t.gw.context().arena().capacity() - t.gw.context().arena().lent()
    );
}

#[test]
fn replays_forgeries_strangers_and_wrong_sources_are_dropped_by_reason() {
    let mut t = Gw::new(
        DataCipher::Aes256Gcm,
        Box::new(crypto_awslc::AwsLcEngine::new()),
    );
    let good = t.client_sends(0, &echo(CLIENT_TUNNEL, LAN_HOST, 1));
    let frame = t.wan_frame(40000, &good);
    t.send(t.wan, &frame);
    assert_eq!(t.out(t.lan, HOST_MAC).len(), 1);
    // The same packet again.
    t.send(t.wan, &frame);
    assert_eq!(t.drops("ovpn-decrypt", "replayed"), 1);
    // A flipped bit in the tag, and in the packet id (associated data).
    for at in [9, 6] {
        let mut forged = t.client_sends(0, &echo(CLIENT_TUNNEL, LAN_HOST, 3));
        forged[at] ^= 1;
        let f = t.wan_frame(40000, &forged);
        t.send(t.wan, &f);
    }
    assert_eq!(t.drops("ovpn-decrypt", "bad-tag"), 2);
    // An unknown peer-id, an unknown key id, a short packet.
    let mut stranger = t.client_sends(0, &echo(CLIENT_TUNNEL, LAN_HOST, 4));
    stranger[3] = 9;
    let f = t.wan_frame(40000, &stranger);
    t.send(t.wan, &f);
    let other_key = t.client_sends(1, &echo(CLIENT_TUNNEL, LAN_HOST, 5));
    let f = t.wan_frame(40000, &other_key);
    t.send(t.wan, &f);
    let f = t.wan_frame(40000, &good[..20]);
    t.send(t.wan, &f);
    // An inner source that is not the client's.
    let spoofed = t.client_sends(0, &echo([198, 19, 50, 3], LAN_HOST, 6));
    let f = t.wan_frame(40000, &spoofed);
    t.send(t.wan, &f);
    assert_eq!(t.drops("ovpn-decrypt", "unknown-peer-id"), 1);
    assert_eq!(t.drops("ovpn-decrypt", "unknown-key-id"), 1);
    assert_eq!(t.drops("ovpn-decrypt", "truncated"), 1);
    assert_eq!(t.drops("ovpn-decrypt", "policy"), 1);
    assert!(t.out(t.lan, HOST_MAC).is_empty());
    // None of them moved the window: the next genuine packet passes.
    let next = t.client_sends(0, &echo(CLIENT_TUNNEL, LAN_HOST, 7));
    let f = t.wan_frame(40000, &next);
    t.send(t.wan, &f);
    assert_eq!(t.out(t.lan, HOST_MAC).len(), 1);
    assert!(
        t.rx.try_iter().next().is_none(),
        "nothing for the control thread"
    );
}

#[test]
fn control_packets_go_to_the_inbox_keepalives_are_taken_and_a_moved_client_is_followed() {
    let mut t = Gw::new(
        DataCipher::Chacha20Poly1305,
        Box::new(crypto_awslc::AwsLcEngine::new()),
    );
    // A control packet (a client's hard reset) goes to the control thread as is.
    let reset = [7 << 3, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0];
    let f = t.wan_frame(40000, &reset);
    t.send(t.wan, &f);
    let Some(OvpnInput::Control {
        local,
        remote,
        payload,
        ..
    }) = t.rx.try_iter().next()
    else {
        panic!("a control packet")
    };
    assert_eq!(local, "198.18.2.1:1194".parse().unwrap());
    assert_eq!(remote, "198.18.2.2:40000".parse().unwrap());
    assert_eq!(payload, reset);
    // A keepalive is taken, not forwarded.
    let ping = t.client_sends(0, &PING);
    let f = t.wan_frame(40000, &ping);
    t.send(t.wan, &f);
    assert!(t.out(t.lan, HOST_MAC).is_empty());
    assert!(
        t.gw.counters()
            .any(|(n, c)| n == "ovpn-decrypt" && c.consumed == 1)
    );
    // The client moves to port 40001: its packet is opened, the control thread
    // hears of it, and packets to it go there.
    let moved = t.client_sends(0, &echo(CLIENT_TUNNEL, LAN_HOST, 1));
    let f = t.wan_frame(40001, &moved);
    t.send(t.wan, &f);
    assert_eq!(t.out(t.lan, HOST_MAC).len(), 1);
    let Some(OvpnInput::Float {
        peer_id: 5, remote, ..
    }) = t.rx.try_iter().next()
    else {
        panic!("a float")
    };
    assert_eq!(remote.port(), 40001);
    let f = ether(
        GW_LAN_MAC,
        HOST_MAC,
        0x0800,
        &echo(LAN_HOST, CLIENT_TUNNEL, 2),
    );
    t.send(t.lan, &f);
    let wan = t.out(t.wan, CLIENT_MAC);
    let ip = ipv4::Packet::new_checked(&wan[0][14..]).unwrap();
    assert_eq!(
        udp::Packet::new_checked(ip.payload()).unwrap().dst_port(),
        40001
    );
    // A forged packet from yet another port moves nothing.
    let mut forged = t.client_sends(0, &echo(CLIENT_TUNNEL, LAN_HOST, 3));
    forged[30] ^= 1;
    let f = t.wan_frame(40002, &forged);
    t.send(t.wan, &f);
    assert!(t.rx.try_iter().next().is_none());
}

#[test]
fn a_new_key_takes_over_sending_and_the_old_one_opens_until_retired() {
    let mut t = Gw::new(
        DataCipher::Aes128Gcm,
        Box::new(crypto_awslc::AwsLcEngine::new()),
    );
    let old_client = t.client.clone();
    t.install(1, 9, DataCipher::Aes128Gcm);
    // Out: sealed with key 1.
    let f = ether(
        GW_LAN_MAC,
        HOST_MAC,
        0x0800,
        &echo(LAN_HOST, CLIENT_TUNNEL, 1),
    );
    t.send(t.lan, &f);
    let wan = t.out(t.wan, CLIENT_MAC);
    let ip = ipv4::Packet::new_checked(&wan[0][14..]).unwrap();
    let u = udp::Packet::new_checked(ip.payload()).unwrap();
    let (h, _) = data::open(DataCipher::Aes128Gcm, &t.client.recv, u.payload()).unwrap();
    assert_eq!(h.key_id.get(), 1);
    // In: the old key still opens.
    let h = DataHeader {
        key_id: KeyId::new(0).unwrap(),
        peer_id: 5,
        packet_id: 1,
    };
    let late = data::seal(
        DataCipher::Aes128Gcm,
        &old_client.send,
        h,
        &echo(CLIENT_TUNNEL, LAN_HOST, 2),
    );
    let f = t.wan_frame(40000, &late);
    t.send(t.wan, &f);
    assert_eq!(t.out(t.lan, HOST_MAC).len(), 1);
    // Retired, it no longer does.
    let server = t.server;
    t.gw.ovpn_mut()
        .apply(&OvpnChange::RetireKey {
            server,
            peer_id: 5,
            key_id: 0,
        })
        .unwrap();
    let h = DataHeader {
        key_id: KeyId::new(0).unwrap(),
        peer_id: 5,
        packet_id: 2,
    };
    let later = data::seal(
        DataCipher::Aes128Gcm,
        &old_client.send,
        h,
        &echo(CLIENT_TUNNEL, LAN_HOST, 3),
    );
    let f = t.wan_frame(40000, &later);
    t.send(t.wan, &f);
    assert_eq!(t.drops("ovpn-decrypt", "unknown-key-id"), 1);
    // A packet for a client with no address match is dropped as such.
    let f = ether(
        GW_LAN_MAC,
        HOST_MAC,
        0x0800,
        &echo(LAN_HOST, [198, 19, 50, 77], 4),
    );
    t.send(t.lan, &f);
    assert_eq!(t.drops("ovpn-encrypt", "no-client"), 1);
}

#[test]
fn a_key_near_the_end_of_its_packet_ids_asks_for_a_renegotiation_once() {
    let mut t = Gw::new(
        DataCipher::Aes256Gcm,
        Box::new(crypto_awslc::AwsLcEngine::new()),
    );
    let keys = DataKeys::new(&material(11), DataCipher::Aes256Gcm, Role::Server);
    let key = OvpnKey::new(&t.registry, 2, &keys)
        .unwrap()
        .starting_at(openvpn::data::REKEY_AT_PACKET_ID - 1);
    t.use_key(Arc::new(key));
    for seq in 0..3 {
        let f = ether(
            GW_LAN_MAC,
            HOST_MAC,
            0x0800,
            &echo(LAN_HOST, CLIENT_TUNNEL, seq),
        );
        t.send(t.lan, &f);
    }
    assert_eq!(t.out(t.wan, CLIENT_MAC).len(), 3, "the packets still go");
    let asked: Vec<_> =
        t.rx.try_iter()
            .filter_map(|i| match i {
                OvpnInput::KeyExhausted {
                    peer_id, key_id, ..
                } => Some((peer_id, key_id)),
                _ => None,
            })
            .collect();
    assert_eq!(asked, [(5, 2)]);
    // At the very end the key sends nothing more.
    let keys = DataKeys::new(&material(12), DataCipher::Aes256Gcm, Role::Server);
    let last = OvpnKey::new(&t.registry, 3, &keys)
        .unwrap()
        .starting_at(u32::MAX);
    t.use_key(Arc::new(last));
    let f = ether(
        GW_LAN_MAC,
        HOST_MAC,
        0x0800,
        &echo(LAN_HOST, CLIENT_TUNNEL, 9),
    );
    t.send(t.lan, &f);
    assert_eq!(t.drops("ovpn-encrypt", "ids-exhausted"), 1);
}
