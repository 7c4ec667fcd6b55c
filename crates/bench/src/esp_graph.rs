//! The ESP graph for `linerate bench --tunnel esp`, as `linerate bench` has the
//! WireGuard one: per worker an [`TunnelGraph`] whose tunnel leads to itself (local
//! and remote address the same, the inbound SA the outbound one's twin), so that
//! what `esp-encrypt` seals goes straight back into `esp-decrypt`. The harness does
//! what ip-lookup and ip-local would around the nodes: it names the tunnel of each
//! inner packet, and strips the outer header of each sealed one.
//!
//! Workers that share a tunnel share its SAs: one sequence counter out, one replay
//! window in (`ipsec`'s concurrent ones), as on a gateway whose workers all carry
//! one tunnel.

use crate::measure::{self, Loopback};
use crate::wg_graph;
use dataplane::esp::{Encapsulation, EspTunnel, EspTunnelId, InboundSa, OutboundSa, SaSpec};
use dataplane::tunnel_graph::{INNER_OUT, TunnelGraph, TunnelKind};
use dataplane::{Arena, Context, Handle, NodeCounters};
use runtime::engines;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// The tunnel's one address, both ends.
const ADDRESS: [u8; 4] = [198, 18, 0, 1];
const SPI: u32 = 0x1000;
/// Extended sequence numbers, as IKEv2 peers mostly negotiate for fast links.
const ESN: bool = true;

pub(crate) struct EspLoopback {
    graph: TunnelGraph,
    alg: ipsec::EspAlgorithm,
    tunnel: EspTunnelId,
    outer_len: u16,
}

/// One tunnel's SAs: made once, shared by the workers on it.
struct Sas {
    keys: Arc<crypto::KeyRegistry>,
    out: Arc<OutboundSa>,
    inb: Arc<InboundSa>,
}

fn sas(alg: ipsec::EspAlgorithm) -> Result<Sas, String> {
    let keys = Arc::new(crypto::KeyRegistry::new(64));
    // Fixed key material: both ends of an in-memory bench, no secret to keep.
    let spec = SaSpec {
        spi: SPI,
        alg,
        keymat: zeroize::Zeroizing::new(vec![0x5a; alg.keymat_len()]),
        esn: ESN,
        replay_window: ipsec::MAX_WINDOW,
        lifetime: Default::default(),
    };
    let out = OutboundSa::new(&keys, &spec).map_err(|e| e.to_string())?;
    let inb = InboundSa::new(&keys, &spec).map_err(|e| e.to_string())?;
    Ok(Sas {
        keys,
        out: Arc::new(out),
        inb: Arc::new(inb),
    })
}

fn worker(
    engine: Option<&str>,
    alg: ipsec::EspAlgorithm,
    sas: &Sas,
    buffer: usize,
) -> Result<EspLoopback, String> {
    let now = Instant::now();
    let device = wireguard::Device::new(sas.keys.clone(), now, SystemTime::now());
    let (engines, _) = engines::configured_set(
        &sas.keys,
        engine,
        Duration::from_millis(6),
        &[alg.aead()],
        buffer,
    )?;
    let mut graph = TunnelGraph::new(
        TunnelKind::Esp,
        Arena::with_buffers(4 * dataplane::graph::FRAME_LEN + 64, buffer),
        device,
        engines,
        now,
    );
    let all: Vec<lpm::Prefix> = vec!["0.0.0.0/0".parse().expect("literal")];
    let address = IpAddr::from(ADDRESS);
    let t = EspTunnel::new(
        "esp0".into(),
        address,
        address,
        Encapsulation::None,
        all.clone(),
        all,
        // The largest packet `linerate bench` sends fits.
        dataplane::wg::max_mtu(buffer),
    );
    let outer_len = t.outer_len() as u16;
    let table = graph.esp_mut();
    let tunnel = table.add(t).map_err(|e| e.to_string())?;
    table
        .set_outbound(tunnel, sas.out.clone())
        .map_err(|e| e.to_string())?;
    table
        .add_inbound(tunnel, sas.inb.clone())
        .map_err(|e| e.to_string())?;
    Ok(EspLoopback {
        graph,
        alg,
        tunnel,
        outer_len,
    })
}

/// The graphs of `workers` workers on `peers` tunnels: worker i on tunnel i % peers.
pub(crate) fn graphs(
    engine: Option<&str>,
    alg: ipsec::EspAlgorithm,
    workers: usize,
    peers: usize,
    buffer: usize,
) -> Result<Vec<EspLoopback>, String> {
    wg_graph::on_shared(
        workers,
        peers,
        || sas(alg),
        |t| worker(engine, alg, t, buffer),
    )
}

impl Loopback for EspLoopback {
    fn alg(&self) -> crypto::Algorithm {
        self.alg.aead()
    }

    /// SPI, and the sequence number's 32 bits or (ESN, as these SAs have) 64.
    fn aad_len(&self) -> usize {
        if ESN { 12 } else { 8 }
    }

    /// The packet, padding to the algorithm's alignment and ESP's two-byte trailer.
    fn text_len(&self, inner: usize) -> usize {
        wire::esp::padded_len(inner, self.alg.pad_align())
    }

    fn context(&self) -> &Context {
        self.graph.context()
    }

    fn context_mut(&mut self) -> &mut Context {
        self.graph.context_mut()
    }

    fn seal(&mut self, inner: &[Handle], back: &mut Vec<Handle>, now: Instant) {
        self.graph.seal(u32::from(self.tunnel.0), inner, back, now);
        let cx = self.graph.context_mut();
        let to = SocketAddr::new(IpAddr::from(ADDRESS), 0);
        for &h in back.iter() {
            let m = cx.arena_mut().meta_mut(h);
            m.offset += self.outer_len;
            m.len -= self.outer_len;
            m.addr = to;
        }
    }

    fn open(&mut self, back: &[Handle], now: Instant) -> u64 {
        self.graph.open(back, now);
        wg_graph::delivered(self.graph.context_mut(), INNER_OUT)
    }

    fn node_counters(&self) -> Vec<(&'static str, &NodeCounters)> {
        self.graph.counters().collect()
    }

    /// Behind the window: `too-old`, or, with extended sequence numbers, `bad-icv`
    /// (a number further behind than the window is taken for one 2^32 ahead, whose
    /// ICV does not verify: RFC 4303 Appendix A). With the right keys on both ends,
    /// as here, lateness is the only way to fail an ICV.
    fn is_late(reason: &str) -> bool {
        use dataplane::counters::ErrorSlot;
        use dataplane::nodes::EspDecryptError;
        let named = |e: EspDecryptError| {
            EspDecryptError::TABLE
                .get(ErrorSlot::from(e).0)
                .is_some_and(|e| e.name == reason)
        };
        named(EspDecryptError::TooOld) || (ESN && named(EspDecryptError::BadIcv))
    }
}

/// The ESP graph and the WireGuard graph on the same workers, in turns.
pub(crate) fn turns(
    opts: &measure::Options,
    alg: ipsec::EspAlgorithm,
) -> Result<(Vec<measure::Row>, Vec<measure::Row>), String> {
    let build = |workers: usize, peers: usize| {
        graphs(opts.engine.as_deref(), alg, workers, peers, opts.buffer())
    };
    wg_graph::beside_wireguard(opts, &build)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::Size;

    #[test]
    fn a_short_run_delivers_everything_on_every_algorithm() {
        for alg in [
            ipsec::EspAlgorithm::Aes128Gcm,
            ipsec::EspAlgorithm::ChaCha20Poly1305,
            ipsec::EspAlgorithm::Aes128CbcSha1,
        ] {
            let g = graphs(None, alg, 1, 1, dataplane::STANDARD_BUFFER)
                .unwrap()
                .remove(0);
            let m = crate::driver::drive(g, Size::Fixed(200), 0.02).unwrap();
            assert!(
                m.packets >= 64 * dataplane::graph::FRAME_LEN as u64 / 2,
                "{alg}"
            );
            assert_eq!(m.late, 0);
        }
    }

    #[test]
    fn workers_on_one_tunnel_share_its_sas() {
        let opts = crate::wg_graph::tests::two_workers_one_tunnel(100);
        let (esp, wg) = turns(&opts, ipsec::EspAlgorithm::Aes128Gcm).unwrap();
        assert_eq!((esp[0].workers, esp[0].peers), (2, 1));
        assert!(esp[0].mpps > 0.0 && wg[0].mpps > 0.0);
        let g = graphs(
            None,
            ipsec::EspAlgorithm::Aes128Gcm,
            2,
            1,
            dataplane::STANDARD_BUFFER,
        )
        .unwrap();
        let (a, b) = (g[0].graph.context(), g[1].graph.context());
        assert!(Arc::ptr_eq(a.keys(), b.keys()), "one key registry, one SA");
    }
}
