//! A gateway's ESP tunnels (RFC 4303 tunnel mode): each is a tunnel interface that
//! routes lead into, between one of the gateway's addresses (`local`) and a peer
//! (`remote`), over IP (protocol 50) or in UDP (RFC 3948). Packets routed into it are
//! checked against its traffic selectors and sealed with its outbound SA; packets
//! from the peer are found by SPI and destination, opened with that inbound SA and
//! checked against the selectors the other way.
//!
//! SAs are shared by every worker (an `Arc` in each worker's table): the outbound
//! sequence number, the replay window and the lifetime usage are atomics in the
//! `ipsec` crate, so any worker seals and opens for any SA without a lock. The keys
//! live in the registry every worker's engines read; an SA takes its key out of it
//! when the last worker lets go of the SA.
//!
//! `esp-encrypt` and `esp-decrypt` are the nodes; this module holds their tables.

mod selectors;
mod spi_index;

use crate::outer_header::OuterHeader;
use crate::tally::Tally;
use crypto::{KeyHandle, KeyRegistry};
use ipsec::{EspAlgorithm, Expired, Lifetime, ReplayWindow, SendSequence, Usage};
use lpm::Prefix;
use selectors::PrefixSet;
use spi_index::SpiIndex;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// An ESP tunnel's number in its worker, in the order tunnels were added (the same
/// on every worker).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EspTunnelId(pub u16);

/// How the tunnel's packets travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encapsulation {
    /// Straight on IP, protocol 50.
    None,
    /// In UDP (RFC 3948), from and to these ports (4500 both unless configured).
    Udp { local_port: u16, remote_port: u16 },
}

/// An SA as the control plane gives it: the SPI, the algorithm and its key material
/// (key then salt), and the receive and lifetime settings.
pub struct SaSpec {
    pub spi: u32,
    pub alg: EspAlgorithm,
    /// `alg.keymat_len()` bytes: the cipher key, then the salt.
    pub keymat: zeroize::Zeroizing<Vec<u8>>,
    /// 64-bit extended sequence numbers (RFC 4303 section 2.2.1).
    pub esn: bool,
    /// Inbound only: the anti-replay window (0: off).
    pub replay_window: u32,
    pub lifetime: Lifetime,
}

/// What happened on one SA, summed over every worker.
#[derive(Default)]
pub struct SaCounters {
    /// Inbound: sequence numbers seen before.
    pub replayed: AtomicU64,
    /// Inbound: sequence numbers behind the window.
    pub too_old: AtomicU64,
    /// Inbound: packets whose ICV did not verify.
    pub icv_failed: AtomicU64,
    /// Packets refused because the SA's lifetime ran out.
    pub expired: AtomicU64,
    /// Outbound: packets refused because the sequence numbers ran out.
    pub seq_exhausted: AtomicU64,
}

impl SaCounters {
    pub(crate) fn add(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// The keyed part of an SA: its engine key (by handle) and the salt of its nonces.
/// Dropping it takes the key out of the registry; the salt is zeroed.
pub struct SaKey {
    pub alg: EspAlgorithm,
    pub(crate) key: KeyHandle,
    pub(crate) salt: [u8; 4],
    registry: Arc<KeyRegistry>,
}

impl SaKey {
    fn new(registry: &Arc<KeyRegistry>, spec: &SaSpec) -> Result<SaKey, EspError> {
        let alg = spec.alg;
        if spec.keymat.len() != alg.keymat_len() {
            return Err(EspError::KeyLength {
                spi: spec.spi,
                alg,
                got: spec.keymat.len(),
            });
        }
        let (key, salt_bytes) = spec.keymat.split_at(alg.key_len());
        let key = registry
            .insert(alg.aead(), key)
            .map_err(|e| EspError::Key(format!("SPI {:#x}: {e}", spec.spi)))?;
        // The AEADs' salt (CBC has none).
        let mut salt = [0u8; 4];
        salt[..salt_bytes.len()].copy_from_slice(salt_bytes);
        Ok(SaKey {
            alg,
            key,
            salt,
            registry: registry.clone(),
        })
    }

    /// The 12-byte AEAD nonce: salt, then the packet's explicit IV (RFC 4106 section
    /// 4, RFC 7634 section 2).
    pub(crate) fn nonce(&self, iv: [u8; 8]) -> [u8; 12] {
        let mut n = [0u8; 12];
        n[..4].copy_from_slice(&self.salt);
        n[4..].copy_from_slice(&iv);
        n
    }
}

impl Drop for SaKey {
    fn drop(&mut self) {
        self.registry.remove(self.key);
        zeroize::Zeroize::zeroize(&mut self.salt);
    }
}

/// The SA packets into the tunnel are sealed with.
pub struct OutboundSa {
    pub spi: u32,
    pub esn: bool,
    pub(crate) key: SaKey,
    pub(crate) seq: SendSequence,
    pub lifetime: Lifetime,
    pub usage: Usage,
    pub counters: SaCounters,
    /// The one worker that seals on it (see `esp_handoff`); `u32::MAX` until one
    /// does.
    sender: AtomicU32,
}

/// An SA packets from the peer are opened with.
pub struct InboundSa {
    pub spi: u32,
    pub esn: bool,
    pub(crate) key: SaKey,
    pub(crate) replay: ReplayWindow,
    pub lifetime: Lifetime,
    pub usage: Usage,
    pub counters: SaCounters,
}

impl OutboundSa {
    pub fn new(registry: &Arc<KeyRegistry>, spec: &SaSpec) -> Result<OutboundSa, EspError> {
        check_spi(spec.spi)?;
        Ok(OutboundSa {
            spi: spec.spi,
            esn: spec.esn,
            key: SaKey::new(registry, spec)?,
            seq: SendSequence::new(spec.esn),
            lifetime: spec.lifetime,
            usage: Usage::new(),
            counters: SaCounters::default(),
            sender: AtomicU32::new(u32::MAX),
        })
    }

    /// The worker that seals on this SA, made `worker` if none is yet: the first
    /// to ask.
    pub(crate) fn sender_for(&self, worker: u32) -> u32 {
        match self.sender.load(Ordering::Relaxed) {
            u32::MAX => match self.sender.compare_exchange(
                u32::MAX,
                worker,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => worker,
                Err(first) => first,
            },
            sender => sender,
        }
    }

    /// The same SA, its sequence numbers starting at `next` (tests that cross 2^32,
    /// and an SA taken over mid-life).
    pub fn starting_at(mut self, next: u64) -> OutboundSa {
        self.seq = SendSequence::starting_at(self.esn, next);
        self
    }

    pub fn alg(&self) -> EspAlgorithm {
        self.key.alg
    }

    /// The sequence number the next packet gets.
    pub fn next_seq(&self) -> u64 {
        self.seq.next()
    }
}

impl InboundSa {
    pub fn new(registry: &Arc<KeyRegistry>, spec: &SaSpec) -> Result<InboundSa, EspError> {
        check_spi(spec.spi)?;
        let replay = ReplayWindow::new(spec.replay_window, spec.esn)
            .map_err(|e| EspError::Replay(format!("SPI {:#x}: {e}", spec.spi)))?;
        Ok(InboundSa {
            spi: spec.spi,
            esn: spec.esn,
            key: SaKey::new(registry, spec)?,
            replay,
            lifetime: spec.lifetime,
            usage: Usage::new(),
            counters: SaCounters::default(),
        })
    }

    pub fn alg(&self) -> EspAlgorithm {
        self.key.alg
    }

    pub fn replay_window(&self) -> u32 {
        self.replay.size()
    }

    /// Records `seq` as received, as if a packet had carried it: an SA taken over
    /// mid-life starts its window where the old one was (and tests start near 2^32).
    pub fn assume_received(&self, seq: u64) -> Result<(), ipsec::ReplayError> {
        self.replay.commit(seq)
    }
}

fn check_spi(spi: u32) -> Result<(), EspError> {
    if spi < wire::esp::MIN_SPI {
        return Err(EspError::ReservedSpi(spi));
    }
    Ok(())
}

/// Takes one packet of `bytes` into a worker's tally on an SA if the SA's
/// lifetime has room for it beside what is counted already; a refusal is counted
/// on the SA. True when the tally was empty before (the caller marks it for
/// flushing).
fn charge(
    tally: &mut Tally,
    usage: &Usage,
    lifetime: &Lifetime,
    counters: &SaCounters,
    bytes: usize,
) -> Result<bool, Expired> {
    let bytes = bytes as u64;
    if let Some(e) = usage.would_pass(lifetime, tally.packets + 1, tally.bytes + bytes) {
        SaCounters::add(&counters.expired);
        return Err(e);
    }
    Ok(tally.add(bytes))
}

/// Adds a worker's tally on an SA to the SA's shared usage.
fn flush_tally(tally: &mut Tally, usage: &Usage) {
    if let Some((packets, bytes)) = tally.take() {
        usage.add(packets, bytes);
    }
}

/// One ESP tunnel interface.
pub struct EspTunnel {
    pub name: String,
    /// The outer source: one of the gateway's own addresses.
    pub local: IpAddr,
    /// The outer destination.
    pub remote: IpAddr,
    pub encap: Encapsulation,
    /// Inner sources this side may send and the peer's packets may be addressed to.
    pub local_ts: Vec<Prefix>,
    /// Inner destinations this side may send to and the peer's packets may come from.
    pub remote_ts: Vec<Prefix>,
    /// The largest inner packet; larger ones are answered as for any too-small link.
    pub mtu: usize,
    pub(crate) outbound: Option<Arc<OutboundSa>>,
    /// Outbound SAs installed but not sealing: a rekeyed child whose peer may not
    /// hold its inbound half yet (it seals once the peer shows it does), or an
    /// older child still alive at the peer. Each keeps its sequence number, so one
    /// that seals again never repeats a number the peer has seen.
    pub(crate) standby: Vec<Arc<OutboundSa>>,
    /// This worker's packets on `outbound` not yet in its usage.
    out_tally: Tally,
    /// `local_ts` and `remote_ts` as the packet path checks them.
    local_set: PrefixSet,
    remote_set: PrefixSet,
    /// The outer headers `encap` calls for, from `local` to `remote`.
    pub(crate) outer: OuterHeader,
}

impl EspTunnel {
    /// A tunnel with no SA yet: what is routed into it is dropped (`no-sa`) until
    /// one is installed.
    pub fn new(
        name: String,
        local: IpAddr,
        remote: IpAddr,
        encap: Encapsulation,
        local_ts: Vec<Prefix>,
        remote_ts: Vec<Prefix>,
        mtu: usize,
    ) -> EspTunnel {
        EspTunnel {
            name,
            local,
            remote,
            encap,
            mtu,
            outbound: None,
            standby: Vec::new(),
            out_tally: Tally::default(),
            outer: outer_header(local, remote, encap),
            local_set: PrefixSet::new(&local_ts),
            remote_set: PrefixSet::new(&remote_ts),
            local_ts,
            remote_ts,
        }
    }

    /// The outer headers before the ESP header: IP, and UDP when encapsulated.
    pub fn outer_len(&self) -> usize {
        self.outer.len()
    }

    /// Whether the inner IP packet `ip` (its header parsed already) may travel
    /// this way: out (`outbound`) or in, by the tunnel's selectors (RFC 4301
    /// section 5.2 step 4 for the inbound check).
    pub(crate) fn selects(&self, ip: &[u8], outbound: bool) -> bool {
        selectors::admits(&self.local_set, &self.remote_set, ip, outbound)
    }

    pub fn outbound(&self) -> Option<&Arc<OutboundSa>> {
        self.outbound.as_ref()
    }

    /// The outbound SAs installed but not sealing.
    pub fn standby(&self) -> &[Arc<OutboundSa>] {
        &self.standby
    }

    fn take_standby(&mut self, spi: u32) -> Result<Arc<OutboundSa>, EspError> {
        let i = self
            .standby
            .iter()
            .position(|sa| sa.spi == spi)
            .ok_or(EspError::NoOutSa { spi })?;
        Ok(self.standby.remove(i))
    }

    fn has_outbound_spi(&self, spi: u32) -> bool {
        self.outbound
            .iter()
            .chain(&self.standby)
            .any(|sa| sa.spi == spi)
    }
}

/// The outer headers of a tunnel's packets: IP with protocol 50, or IP and UDP
/// (RFC 3948).
fn outer_header(local: IpAddr, remote: IpAddr, encap: Encapsulation) -> OuterHeader {
    let ports = match encap {
        Encapsulation::None => None,
        Encapsulation::Udp {
            local_port,
            remote_port,
        } => Some((local_port, remote_port)),
    };
    OuterHeader::new(local, remote, wire::ip::protocol::ESP, ports)
}

/// Where an inbound SA is in a worker's table: fixed for the SA's life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InboundSlot(pub(crate) u32);

/// A worker's ESP tunnels and inbound SAs.
#[derive(Default)]
pub struct EspTunnels {
    tunnels: Vec<EspTunnel>,
    /// Inbound SAs and the tunnel each belongs to; `None`: removed (slots are not
    /// reused while a frame could still name them: only between runs).
    inbound: Vec<Option<(EspTunnelId, Arc<InboundSa>)>>,
    /// Per inbound slot: this worker's packets not yet in the SA's usage.
    in_tally: Vec<Tally>,
    /// The tallies that hold packets: tunnels' (outbound) and slots' (inbound).
    dirty_out: Vec<EspTunnelId>,
    dirty_in: Vec<InboundSlot>,
    by_spi: SpiIndex,
    /// Whether any tunnel takes ESP in UDP on this port.
    udp_ports: Vec<u16>,
    /// This worker's generator of CBC IVs, made at the first one.
    iv_rng: Option<rand::rngs::StdRng>,
}

impl EspTunnels {
    pub fn add(&mut self, tunnel: EspTunnel) -> Result<EspTunnelId, EspError> {
        if tunnel.local.is_ipv4() != tunnel.remote.is_ipv4() {
            return Err(EspError::MixedFamilies { name: tunnel.name });
        }
        if self.tunnels.iter().any(|t| t.name == tunnel.name) {
            return Err(EspError::Duplicate { name: tunnel.name });
        }
        let id = u16::try_from(self.tunnels.len()).map_err(|_| EspError::TooMany)?;
        if let Encapsulation::Udp { local_port, .. } = tunnel.encap
            && !self.udp_ports.contains(&local_port)
        {
            self.udp_ports.push(local_port);
        }
        self.tunnels.push(tunnel);
        Ok(EspTunnelId(id))
    }

    pub fn get(&self, id: EspTunnelId) -> Option<&EspTunnel> {
        self.tunnels.get(usize::from(id.0))
    }

    pub fn iter(&self) -> impl Iterator<Item = (EspTunnelId, &EspTunnel)> {
        self.tunnels
            .iter()
            .enumerate()
            .map(|(i, t)| (EspTunnelId(i as u16), t))
    }

    pub fn is_empty(&self) -> bool {
        self.tunnels.is_empty()
    }

    /// Sets how a tunnel's packets travel (the key exchange decides it by NAT
    /// detection); ESP in UDP is taken on the new port from then on.
    pub fn set_encapsulation(
        &mut self,
        id: EspTunnelId,
        encap: Encapsulation,
    ) -> Result<(), EspError> {
        let t = self
            .tunnels
            .get_mut(usize::from(id.0))
            .ok_or(EspError::NoTunnel)?;
        t.encap = encap;
        t.outer = outer_header(t.local, t.remote, encap);
        if let Encapsulation::Udp { local_port, .. } = encap
            && !self.udp_ports.contains(&local_port)
        {
            self.udp_ports.push(local_port);
        }
        Ok(())
    }

    /// Sends the tunnel's packets to `remote` from now on, as `encap` says: a peer
    /// behind a NAT whose mapping changed. Inbound SAs are found by SPI and our
    /// address, so they need no change.
    pub fn set_peer(
        &mut self,
        id: EspTunnelId,
        remote: IpAddr,
        encap: Encapsulation,
    ) -> Result<(), EspError> {
        let t = self.tunnel_mut(id)?;
        if t.local.is_ipv4() != remote.is_ipv4() {
            return Err(EspError::MixedFamilies {
                name: t.name.clone(),
            });
        }
        t.remote = remote;
        self.set_encapsulation(id, encap)
    }

    /// Whether ESP in UDP arrives on `port` for some tunnel.
    pub(crate) fn listens_on(&self, port: u16) -> bool {
        self.udp_ports.contains(&port)
    }

    /// Seals the tunnel's packets with `sa` from now on (the one before, if any, is
    /// let go: it ends when no frame holds it).
    pub fn set_outbound(&mut self, id: EspTunnelId, sa: Arc<OutboundSa>) -> Result<(), EspError> {
        self.flush();
        let t = self
            .tunnels
            .get_mut(usize::from(id.0))
            .ok_or(EspError::NoTunnel)?;
        t.outbound = Some(sa);
        Ok(())
    }

    /// Stops sealing the tunnel's packets: they are dropped (`no-sa`) until an SA is
    /// set again. Whether there was one.
    pub fn clear_outbound(&mut self, id: EspTunnelId) -> Result<bool, EspError> {
        self.flush();
        let t = self
            .tunnels
            .get_mut(usize::from(id.0))
            .ok_or(EspError::NoTunnel)?;
        Ok(t.outbound.take().is_some())
    }

    /// Installs `sa` beside the sealing one without sealing with it yet.
    pub fn add_standby_outbound(
        &mut self,
        id: EspTunnelId,
        sa: Arc<OutboundSa>,
    ) -> Result<(), EspError> {
        let t = self.tunnel_mut(id)?;
        if t.has_outbound_spi(sa.spi) {
            return Err(EspError::DuplicateOutSpi { spi: sa.spi });
        }
        t.standby.push(sa);
        Ok(())
    }

    /// Seals the tunnel's packets with its standby SA `spi` from now on; the one
    /// sealing before stays installed, standing by. Sealing already: nothing to do.
    pub fn seal_with(&mut self, id: EspTunnelId, spi: u32) -> Result<(), EspError> {
        self.flush();
        let t = self.tunnel_mut(id)?;
        if t.outbound.as_ref().is_some_and(|sa| sa.spi == spi) {
            return Ok(());
        }
        let sa = t.take_standby(spi)?;
        if let Some(old) = t.outbound.replace(sa) {
            t.standby.push(old);
        }
        Ok(())
    }

    /// Takes the outbound SA `spi` out, sealing or standing by; when it was
    /// sealing, packets are dropped (`no-sa`) until another seals.
    pub fn remove_outbound(&mut self, id: EspTunnelId, spi: u32) -> Result<(), EspError> {
        self.flush();
        let t = self.tunnel_mut(id)?;
        if t.outbound.as_ref().is_some_and(|sa| sa.spi == spi) {
            t.outbound = None;
        } else {
            t.take_standby(spi)?;
        }
        Ok(())
    }

    fn tunnel_mut(&mut self, id: EspTunnelId) -> Result<&mut EspTunnel, EspError> {
        self.tunnels
            .get_mut(usize::from(id.0))
            .ok_or(EspError::NoTunnel)
    }

    /// Stops taking packets for `spi` to the tunnel's local address (they are
    /// counted as `unknown-spi` from now on). The slot stays empty: a slot is never
    /// given to another SA.
    pub fn remove_inbound(&mut self, id: EspTunnelId, spi: u32) -> Result<(), EspError> {
        self.flush();
        let local = self.get(id).ok_or(EspError::NoTunnel)?.local;
        let slot = self
            .by_spi
            .get(spi, local)
            .filter(|s| matches!(self.inbound(*s), Some((t, _)) if *t == id))
            .ok_or(EspError::NoSa { spi })?;
        self.by_spi.remove(spi, local);
        self.inbound[slot.0 as usize] = None;
        Ok(())
    }

    /// The tunnel called `name`.
    pub fn find(&self, name: &str) -> Option<EspTunnelId> {
        self.iter().find(|(_, t)| t.name == name).map(|(id, _)| id)
    }

    /// Takes packets for `sa`'s SPI to the tunnel's local address from now on.
    pub fn add_inbound(&mut self, id: EspTunnelId, sa: Arc<InboundSa>) -> Result<(), EspError> {
        let local = self.get(id).ok_or(EspError::NoTunnel)?.local;
        if self.by_spi.contains(sa.spi, local) {
            return Err(EspError::DuplicateSpi { spi: sa.spi, local });
        }
        let slot = InboundSlot(u32::try_from(self.inbound.len()).map_err(|_| EspError::TooMany)?);
        self.by_spi.insert(sa.spi, local, slot);
        self.inbound.push(Some((id, sa)));
        self.in_tally.push(Tally::default());
        Ok(())
    }

    /// Charges a packet of `bytes` sealed on tunnel `id`'s outbound SA to this
    /// worker's tally, if the SA's lifetime has room.
    pub(crate) fn charge_out(&mut self, id: EspTunnelId, bytes: usize) -> Result<(), Expired> {
        let Some(t) = self.tunnels.get_mut(usize::from(id.0)) else {
            return Ok(());
        };
        let Some(sa) = t.outbound.as_ref() else {
            return Ok(());
        };
        if charge(
            &mut t.out_tally,
            &sa.usage,
            &sa.lifetime,
            &sa.counters,
            bytes,
        )? {
            self.dirty_out.push(id);
        }
        Ok(())
    }

    /// Charges a packet of `bytes` opened on the inbound SA in `slot`.
    pub(crate) fn charge_in(&mut self, slot: InboundSlot, bytes: usize) -> Result<(), Expired> {
        let i = slot.0 as usize;
        let (Some(Some((_, sa))), Some(tally)) = (self.inbound.get(i), self.in_tally.get_mut(i))
        else {
            return Ok(());
        };
        if charge(tally, &sa.usage, &sa.lifetime, &sa.counters, bytes)? {
            self.dirty_in.push(slot);
        }
        Ok(())
    }

    /// A fresh IV for a CBC packet: 16 bytes of this worker's CSPRNG (ChaCha,
    /// seeded from the system's), as RFC 3602 section 3 asks (unpredictable).
    pub(crate) fn random_iv(&mut self) -> [u8; 16] {
        use rand::{RngCore, SeedableRng};
        let rng = self
            .iv_rng
            .get_or_insert_with(rand::rngs::StdRng::from_entropy);
        let mut iv = [0u8; 16];
        rng.fill_bytes(&mut iv);
        iv
    }

    /// Adds this worker's tallies to the SAs' shared usage (at each frame's end).
    pub(crate) fn flush(&mut self) {
        for id in self.dirty_out.drain(..) {
            if let Some(t) = self.tunnels.get_mut(usize::from(id.0))
                && let Some(sa) = t.outbound.as_ref()
            {
                flush_tally(&mut t.out_tally, &sa.usage);
            }
        }
        for slot in self.dirty_in.drain(..) {
            let i = slot.0 as usize;
            if let (Some(Some((_, sa))), Some(tally)) =
                (self.inbound.get(i), self.in_tally.get_mut(i))
            {
                flush_tally(tally, &sa.usage);
            }
        }
    }

    /// The inbound SA for `spi` at `dst`, and its slot.
    pub(crate) fn inbound_for(&mut self, spi: u32, dst: IpAddr) -> Option<InboundSlot> {
        self.by_spi.get(spi, dst)
    }

    pub(crate) fn inbound(&self, slot: InboundSlot) -> Option<&(EspTunnelId, Arc<InboundSa>)> {
        self.inbound.get(slot.0 as usize)?.as_ref()
    }

    /// Every inbound SA, with its tunnel.
    pub fn inbound_sas(&self) -> impl Iterator<Item = &(EspTunnelId, Arc<InboundSa>)> {
        self.inbound.iter().flatten()
    }

    /// The tunnel's inner MTU.
    pub fn mtu(&self, id: EspTunnelId) -> Option<usize> {
        self.get(id).map(|t| t.mtu)
    }

    /// Lowers the MTU of the tunnel from `local` to `remote` so that what its
    /// outbound SA seals fits an outer packet of `room` bytes (header, IV, padding
    /// to the algorithm's alignment, trailer, ICV and the outer headers counted);
    /// whether it changed. For an outer packet of ours a port could not carry.
    pub(crate) fn fit_mtu_to(&mut self, local: IpAddr, remote: IpAddr, room: usize) -> bool {
        let Some(t) = self
            .tunnels
            .iter_mut()
            .find(|t| t.local == local && t.remote == remote)
        else {
            return false;
        };
        let Some(alg) = t.outbound.as_ref().map(|sa| sa.alg()) else {
            return false;
        };
        let sealed = t.outer_len() + wire::esp::HEADER_LEN + alg.iv_len() + alg.icv_len();
        let align = alg.pad_align();
        let fits =
            (room.saturating_sub(sealed) / align * align).saturating_sub(wire::esp::TRAILER_LEN);
        if fits == 0 || (t.mtu != 0 && fits >= t.mtu) {
            return false;
        }
        t.mtu = fits;
        true
    }
}

/// A change to every worker's ESP table, made once by the control plane (the SAs
/// it carries are shared) and applied on each worker between runs.
#[derive(Clone)]
pub enum EspChange {
    SetEncapsulation(EspTunnelId, Encapsulation),
    /// The peer's address and the encapsulation together (`EspTunnels::set_peer`).
    SetPeer(EspTunnelId, IpAddr, Encapsulation),
    SetOutbound(EspTunnelId, Arc<OutboundSa>),
    ClearOutbound(EspTunnelId),
    AddInbound(EspTunnelId, Arc<InboundSa>),
    RemoveInbound(EspTunnelId, u32),
    /// An outbound SA installed without sealing (`EspTunnels::add_standby_outbound`).
    AddStandbyOutbound(EspTunnelId, Arc<OutboundSa>),
    SealWith(EspTunnelId, u32),
    RemoveOutbound(EspTunnelId, u32),
}

impl EspChange {
    /// Applies the change; what was done, in words, or why nothing was.
    pub fn apply(&self, table: &mut EspTunnels) -> Result<String, EspError> {
        let name = |table: &EspTunnels, id: EspTunnelId| {
            table.get(id).map_or_else(String::new, |t| t.name.clone())
        };
        match self {
            EspChange::SetEncapsulation(id, encap) => {
                table.set_encapsulation(*id, *encap)?;
                Ok(format!("esp {}: {}", name(table, *id), encap_words(*encap)))
            }
            EspChange::SetPeer(id, remote, encap) => {
                table.set_peer(*id, *remote, *encap)?;
                Ok(format!(
                    "esp {}: to {remote}, {}",
                    name(table, *id),
                    encap_words(*encap)
                ))
            }
            EspChange::SetOutbound(id, sa) => {
                table.set_outbound(*id, sa.clone())?;
                Ok(added(&name(table, *id), "out", sa.spi, sa.alg(), ""))
            }
            EspChange::ClearOutbound(id) => {
                let had = table.clear_outbound(*id)?;
                Ok(format!(
                    "esp {}: {}",
                    name(table, *id),
                    if had {
                        "out SA removed"
                    } else {
                        "had no out SA"
                    }
                ))
            }
            EspChange::AddInbound(id, sa) => {
                table.add_inbound(*id, sa.clone())?;
                Ok(added(&name(table, *id), "in", sa.spi, sa.alg(), ""))
            }
            EspChange::RemoveInbound(id, spi) => {
                table.remove_inbound(*id, *spi)?;
                Ok(format!("esp {}: in SA {spi:#x} removed", name(table, *id)))
            }
            EspChange::AddStandbyOutbound(id, sa) => {
                table.add_standby_outbound(*id, sa.clone())?;
                Ok(added(
                    &name(table, *id),
                    "out",
                    sa.spi,
                    sa.alg(),
                    " standing by",
                ))
            }
            EspChange::SealWith(id, spi) => {
                table.seal_with(*id, *spi)?;
                Ok(format!("esp {}: out SA {spi:#x} seals", name(table, *id)))
            }
            EspChange::RemoveOutbound(id, spi) => {
                table.remove_outbound(*id, *spi)?;
                Ok(format!("esp {}: out SA {spi:#x} removed", name(table, *id)))
            }
        }
    }
}

/// How a tunnel's ESP travels, in the log's words.
fn encap_words(encap: Encapsulation) -> String {
    match encap {
        Encapsulation::None => "ESP on IP".to_string(),
        Encapsulation::Udp {
            local_port,
            remote_port,
        } => format!("ESP in UDP {local_port} -> {remote_port}"),
    }
}

/// What an SA installed says in the log.
fn added(tunnel: &str, direction: &str, spi: u32, alg: EspAlgorithm, how: &str) -> String {
    format!("esp {tunnel}: {direction} SA {spi:#x} {alg}{how}")
}

/// Why a tunnel or an SA was refused; nothing changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EspError {
    MixedFamilies {
        name: String,
    },
    Duplicate {
        name: String,
    },
    DuplicateSpi {
        spi: u32,
        local: IpAddr,
    },
    ReservedSpi(u32),
    /// No outbound SA of the tunnel, sealing or standing by, has this SPI.
    NoOutSa {
        spi: u32,
    },
    /// An outbound SA of the tunnel has this SPI already.
    DuplicateOutSpi {
        spi: u32,
    },
    /// No inbound SA of the tunnel has this SPI.
    NoSa {
        spi: u32,
    },
    KeyLength {
        spi: u32,
        alg: EspAlgorithm,
        got: usize,
    },
    Key(String),
    Replay(String),
    NoTunnel,
    TooMany,
}

impl fmt::Display for EspError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EspError::MixedFamilies { name } => {
                write!(f, "esp {name}: local and remote of different families")
            }
            EspError::Duplicate { name } => write!(f, "esp {name}: a tunnel of that name exists"),
            EspError::DuplicateSpi { spi, local } => {
                write!(f, "inbound SPI {spi:#x} to {local} is taken")
            }
            EspError::NoOutSa { spi } => {
                write!(f, "the tunnel has no outbound SA with SPI {spi:#x}")
            }
            EspError::DuplicateOutSpi { spi } => {
                write!(f, "the tunnel has an outbound SA with SPI {spi:#x}")
            }
            EspError::ReservedSpi(spi) => {
                write!(f, "SPI {spi:#x} is reserved (RFC 4303: 256 and up)")
            }
            EspError::KeyLength { spi, alg, got } => write!(
                f,
                "SPI {spi:#x}: {alg} takes {} bytes of key material (key and salt), got {got}",
                alg.keymat_len()
            ),
            EspError::Key(e) | EspError::Replay(e) => f.write_str(e),
            EspError::NoTunnel => f.write_str("no such ESP tunnel"),
            EspError::NoSa { spi } => write!(f, "the tunnel has no inbound SA with SPI {spi:#x}"),
            EspError::TooMany => f.write_str("too many ESP tunnels or SAs"),
        }
    }
}

impl std::error::Error for EspError {}
