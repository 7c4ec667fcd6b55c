//! `get=1`, carried out a bounded step at a time: the interface's lines first, then
//! the peers in the order they were when the request began, a chunk per step. A peer
//! removed meanwhile is skipped; each peer's lines are read at one moment, so they
//! agree with each other (as wireguard-go's per-peer locking gives).

use super::SocketSettings;
use std::fmt::Write;
use std::time::{Instant, UNIX_EPOCH};
use wireguard::{Device, PeerId};

/// Peers written between two looks at the clock.
const PEERS_PER_CHECK: usize = 32;

pub struct GetJob {
    peers: Vec<PeerId>,
    next: usize,
    out: String,
    started: bool,
}

impl GetJob {
    pub fn new(device: &Device) -> GetJob {
        GetJob {
            peers: device.peer_ids(),
            next: 0,
            out: String::new(),
            started: false,
        }
    }

    /// Writes until done (the whole reply) or `deadline` (`None`: call again).
    pub fn step(
        &mut self,
        device: &Device,
        socket: &dyn SocketSettings,
        deadline: Instant,
    ) -> Option<String> {
        if !self.started {
            self.started = true;
            interface(&mut self.out, device, socket);
        }
        while self.next < self.peers.len() {
            let end = (self.next + PEERS_PER_CHECK).min(self.peers.len());
            for &id in &self.peers[self.next..end] {
                peer(&mut self.out, device, id);
            }
            self.next = end;
            if Instant::now() >= deadline && self.next < self.peers.len() {
                return None;
            }
        }
        self.out.push_str("errno=0\n\n");
        Some(std::mem::take(&mut self.out))
    }
}

fn interface(out: &mut String, device: &Device, socket: &dyn SocketSettings) {
    if let Some(k) = device.private_key() {
        let _ = writeln!(out, "private_key={}", hex::encode(k.to_bytes()));
    }
    if socket.listen_port() != 0 {
        let _ = writeln!(out, "listen_port={}", socket.listen_port());
    }
    if socket.fwmark() != 0 {
        let _ = writeln!(out, "fwmark={}", socket.fwmark());
    }
}

fn peer(out: &mut String, device: &Device, id: PeerId) {
    let Some(p) = device.peer_info(id) else {
        return; // removed since the request began
    };
    let _ = writeln!(out, "public_key={}", hex::encode(p.public_key.0));
    if p.preshared_key != [0; 32] {
        let _ = writeln!(out, "preshared_key={}", hex::encode(p.preshared_key));
    }
    let _ = writeln!(out, "protocol_version=1");
    if let Some(e) = p.endpoint {
        let _ = writeln!(out, "endpoint={e}");
    }
    let (sec, nsec) = p
        .last_handshake
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| (d.as_secs(), d.subsec_nanos()))
        .unwrap_or((0, 0));
    let _ = writeln!(out, "last_handshake_time_sec={sec}");
    let _ = writeln!(out, "last_handshake_time_nsec={nsec}");
    let _ = writeln!(out, "tx_bytes={}", p.tx_bytes);
    let _ = writeln!(out, "rx_bytes={}", p.rx_bytes);
    let _ = writeln!(
        out,
        "persistent_keepalive_interval={}",
        p.persistent_keepalive
    );
    for a in p.allowed_ips {
        let _ = writeln!(out, "allowed_ip={a}");
    }
}
