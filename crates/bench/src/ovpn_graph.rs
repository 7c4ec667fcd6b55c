//! The OpenVPN graph for `linerate bench --tunnel openvpn`, as `esp_graph` has
//! ESP's: per worker a [`TunnelGraph`] of `ovpn-encrypt` and `ovpn-decrypt`
//! with one server and one client whose key opens what it seals (both
//! directions cut from the same key material), so that what the graph sends the
//! client comes straight back as if from it. The harness does what ip-lookup and
//! ip-local would around the nodes: it names the server of each inner packet,
//! and hands each sealed packet back with the client's address.
//!
//! Workers that share a client share its key: one packet-id counter out, one
//! replay window in, as on a gateway whose workers all carry one client.

use crate::measure::{self, Loopback};
use crate::wg_graph;
use dataplane::ovpn::{OvpnChange, OvpnKey, OvpnServer, OvpnServerId};
use dataplane::tunnel_graph::{INNER_OUT, TunnelGraph, TunnelKind};
use dataplane::{Arena, Context, Handle, NodeCounters};
use openvpn::DataCipher;
use runtime::engines;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// The client's address outside, and its tunnel addresses: the bench's inner
/// packets go from one to the other (`measure::inner_packet`).
const REMOTE: &str = "198.18.0.9:40000";
const INNER: [[u8; 4]; 2] = [[198, 19, 0, 2], [198, 19, 0, 3]];
const PEER_ID: u32 = 0;

pub(crate) struct OvpnLoopback {
    graph: TunnelGraph,
    cipher: DataCipher,
    server: OvpnServerId,
    remote: SocketAddr,
}

/// One client's key: made once, shared by the workers on it.
struct Client {
    keys: Arc<crypto::KeyRegistry>,
    key: Arc<OvpnKey>,
}

fn client(cipher: DataCipher) -> Result<Client, String> {
    let keys = Arc::new(crypto::KeyRegistry::new(64));
    // Fixed key material, both halves alike so that the server's send key is
    // its receive key: both ends of an in-memory bench, no secret to keep.
    let material = openvpn::static_key::Key2::from_bytes([0x5a; 256]);
    let data = openvpn::data_keys::DataKeys::new(&material, cipher, openvpn::Role::Server);
    let key = OvpnKey::new(&keys, 0, &data)?;
    Ok(Client {
        keys,
        key: Arc::new(key),
    })
}

fn worker(
    engine: Option<&str>,
    cipher: DataCipher,
    c: &Client,
    buffer: usize,
) -> Result<OvpnLoopback, String> {
    let now = Instant::now();
    let device = wireguard::Device::new(c.keys.clone(), now, SystemTime::now());
    let alg = alg_of(cipher);
    let (engines, _) =
        engines::configured_set(&c.keys, engine, Duration::from_millis(6), &[alg], buffer)?;
    let mut graph = TunnelGraph::new(
        TunnelKind::OpenVpn,
        Arena::with_buffers(4 * dataplane::graph::FRAME_LEN + 64, buffer),
        device,
        engines,
        now,
    );
    let remote: SocketAddr = REMOTE.parse().expect("literal");
    let table = graph.ovpn_mut();
    let server = table
        .add(OvpnServer::new(
            "bench",
            1194,
            dataplane::wg::max_mtu(buffer),
        ))
        .map_err(|e| e.to_string())?;
    for change in [
        OvpnChange::AddClient {
            server,
            peer_id: PEER_ID,
            remote,
            addrs: INNER.iter().map(|a| IpAddr::from(*a)).collect(),
        },
        OvpnChange::InstallKey {
            server,
            peer_id: PEER_ID,
            key: c.key.clone(),
        },
    ] {
        table.apply(&change).map_err(|e| e.to_string())?;
    }
    Ok(OvpnLoopback {
        graph,
        cipher,
        server,
        remote,
    })
}

/// The engines' name for a data cipher.
pub(crate) fn alg_of(cipher: DataCipher) -> crypto::Algorithm {
    match cipher {
        DataCipher::Aes128Gcm => crypto::Algorithm::Aes128Gcm,
        DataCipher::Aes256Gcm => crypto::Algorithm::Aes256Gcm,
        DataCipher::Chacha20Poly1305 => crypto::Algorithm::ChaCha20Poly1305,
    }
}

/// The graphs of `workers` workers on `peers` clients: worker i on client i % peers.
pub(crate) fn graphs(
    engine: Option<&str>,
    cipher: DataCipher,
    workers: usize,
    peers: usize,
    buffer: usize,
) -> Result<Vec<OvpnLoopback>, String> {
    wg_graph::on_shared(
        workers,
        peers,
        || client(cipher),
        |c| worker(engine, cipher, c, buffer),
    )
}

impl Loopback for OvpnLoopback {
    fn alg(&self) -> crypto::Algorithm {
        alg_of(self.cipher)
    }

    /// The opcode and key id, peer-id and packet id.
    fn aad_len(&self) -> usize {
        openvpn::data::HEADER_LEN
    }

    /// The packet as it is: the data channel pads nothing.
    fn text_len(&self, inner: usize) -> usize {
        inner
    }

    fn context(&self) -> &Context {
        self.graph.context()
    }

    fn context_mut(&mut self) -> &mut Context {
        self.graph.context_mut()
    }

    fn seal(&mut self, inner: &[Handle], back: &mut Vec<Handle>, now: Instant) {
        self.graph.seal(u32::from(self.server.0), inner, back, now);
        let cx = self.graph.context_mut();
        // As ip-local hands a data packet on: the server, and where it came from.
        for &h in back.iter() {
            let m = cx.arena_mut().meta_mut(h);
            m.peer = u32::from(self.server.0);
            m.addr = self.remote;
        }
    }

    fn open(&mut self, back: &[Handle], now: Instant) -> u64 {
        self.graph.open(back, now);
        wg_graph::delivered(self.graph.context_mut(), INNER_OUT)
    }

    fn node_counters(&self) -> Vec<(&'static str, &NodeCounters)> {
        self.graph.counters().collect()
    }

    fn is_late(reason: &str) -> bool {
        reason == "too-old"
    }
}

/// The OpenVPN graph and the ESP graph of the same AEAD on the same workers, in
/// turns.
pub(crate) fn turns(
    opts: &measure::Options,
    cipher: DataCipher,
    esp: ipsec::EspAlgorithm,
) -> Result<(Vec<measure::Row>, Vec<measure::Row>), String> {
    let ovpn = |workers: usize, peers: usize| {
        graphs(
            opts.engine.as_deref(),
            cipher,
            workers,
            peers,
            opts.buffer(),
        )
    };
    let esp = |workers: usize, peers: usize| {
        crate::esp_graph::graphs(opts.engine.as_deref(), esp, workers, peers, opts.buffer())
    };
    wg_graph::in_turns(opts, &ovpn, &esp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::Size;

    #[test]
    fn a_short_run_delivers_everything_on_every_cipher() {
        for cipher in DataCipher::ALL {
            let g = graphs(None, cipher, 1, 1, dataplane::STANDARD_BUFFER)
                .unwrap()
                .remove(0);
            let m = crate::driver::drive(g, Size::Fixed(200), 0.02).unwrap();
            assert!(
                m.packets >= 64 * dataplane::graph::FRAME_LEN as u64 / 2,
                "{cipher:?}"
            );
            assert_eq!(m.late, 0);
        }
    }
}
