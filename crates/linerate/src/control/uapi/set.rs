//! `set=1`: parsed whole (off the packet path; a syntax error changes nothing), then
//! carried out a bounded step at a time by the worker. A peer section's semantics
//! follow the protocol: a new peer is created at its first key other than
//! `update_only` (or at the section's end), so `update_only=true` can still say "only
//! if it exists"; `remove=true` ends the peer and ignores its other keys.

use super::{EINVAL, EPROTO, SocketSettings};
use crypto::x25519::{PrivateKey, PublicKey};
use std::net::SocketAddr;
use std::time::Instant;
use wireguard::{Device, PeerId, Prefix};
use zeroize::Zeroizing;

/// Operations applied between two looks at the clock.
const OPS_PER_CHECK: usize = 64;

/// One line of a set request, checked and typed.
pub enum SetOp {
    /// All zeros clears the key.
    PrivateKey(Zeroizing<[u8; 32]>),
    ListenPort(u16),
    Fwmark(u32),
    ReplacePeers,
    /// `public_key=`: the start of a peer's section.
    Peer(PublicKey),
    UpdateOnly,
    Remove,
    PresharedKey(Zeroizing<[u8; 32]>),
    Endpoint(SocketAddr),
    PersistentKeepalive(u16),
    ReplaceAllowedIps,
    AllowedIp {
        remove: bool,
        prefix: Prefix,
    },
    ProtocolVersion,
}

fn key32(v: &str) -> Result<Zeroizing<[u8; 32]>, i32> {
    let mut k = Zeroizing::new([0u8; 32]);
    hex::decode_to_slice(v, &mut k[..]).map_err(|_| EINVAL)?;
    Ok(k)
}

fn boolean(v: &str) -> Result<bool, i32> {
    match v {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(EINVAL),
    }
}

/// Checks every line of a set request and types it. `key=false` lines are kept out:
/// they change nothing.
pub fn parse<'a>(lines: impl Iterator<Item = &'a str>) -> Result<Vec<SetOp>, i32> {
    let mut ops = Vec::new();
    let mut in_peer = false;
    for line in lines {
        if line.is_empty() {
            continue;
        }
        // As wireguard-go answers: a line that is not key=value is a protocol error.
        let (key, value) = line.split_once('=').ok_or(EPROTO)?;
        let op = match key {
            "private_key" if !in_peer => SetOp::PrivateKey(key32(value)?),
            "listen_port" if !in_peer => SetOp::ListenPort(value.parse().map_err(|_| EINVAL)?),
            "fwmark" if !in_peer => SetOp::Fwmark(if value.is_empty() {
                0
            } else {
                value.parse().map_err(|_| EINVAL)?
            }),
            "replace_peers" if !in_peer => match boolean(value)? {
                true => SetOp::ReplacePeers,
                false => continue,
            },
            "public_key" => {
                in_peer = true;
                SetOp::Peer(PublicKey(*key32(value)?))
            }
            "update_only" if in_peer => match boolean(value)? {
                true => SetOp::UpdateOnly,
                false => continue,
            },
            "remove" if in_peer => match boolean(value)? {
                true => SetOp::Remove,
                false => continue,
            },
            "preshared_key" if in_peer => SetOp::PresharedKey(key32(value)?),
            "endpoint" if in_peer => {
                SetOp::Endpoint(value.parse::<SocketAddr>().map_err(|_| EINVAL)?)
            }
            "persistent_keepalive_interval" if in_peer => {
                SetOp::PersistentKeepalive(value.parse().map_err(|_| EINVAL)?)
            }
            "replace_allowed_ips" if in_peer => match boolean(value)? {
                true => SetOp::ReplaceAllowedIps,
                false => continue,
            },
            "allowed_ip" if in_peer => {
                let (remove, cidr) = match value.strip_prefix('-') {
                    Some(rest) => (true, rest),
                    None => (false, value),
                };
                SetOp::AllowedIp {
                    remove,
                    prefix: cidr.parse().map_err(|_| EINVAL)?,
                }
            }
            "protocol_version" if in_peer => match value {
                "1" => SetOp::ProtocolVersion,
                _ => return Err(EINVAL),
            },
            _ => return Err(EINVAL),
        };
        ops.push(op);
    }
    Ok(ops)
}

/// The peer section being applied.
enum Section {
    Interface,
    Peer {
        id: Option<PeerId>,
        key: PublicKey,
        create: bool,
    },
}

impl Section {
    fn peer(&mut self, device: &mut Device) -> Option<PeerId> {
        if let Section::Peer { id, key, create } = self
            && id.is_none()
            && *create
        {
            *create = false;
            // Our own key cannot be a peer: its keys are ignored, as the reference does.
            *id = device.add_peer(*key);
        }
        match self {
            Section::Peer { id, .. } => *id,
            Section::Interface => None,
        }
    }
}

pub struct SetJob {
    ops: Vec<SetOp>,
    next: usize,
    section: Section,
    /// Peers still to remove for a `replace_peers`, one per unit of work.
    removing: Vec<PeerId>,
}

impl SetJob {
    pub fn new(ops: Vec<SetOp>) -> SetJob {
        SetJob {
            ops,
            next: 0,
            section: Section::Interface,
            removing: Vec::new(),
        }
    }

    /// Applies operations until done (`Some(Ok)`), an error (`Some(Err(errno))`,
    /// what came before it stays applied, as with the reference implementations), or
    /// `deadline` (`None`: call again).
    pub fn step(
        &mut self,
        device: &mut Device,
        socket: &mut dyn SocketSettings,
        now: Instant,
        deadline: Instant,
    ) -> Option<Result<(), i32>> {
        let mut units = 0;
        loop {
            units += 1;
            if units % OPS_PER_CHECK == 0 && Instant::now() >= deadline {
                return None;
            }
            if let Some(id) = self.removing.pop() {
                device.remove_peer(id);
                continue;
            }
            let Some(op) = self.ops.get(self.next) else {
                self.section.peer(device);
                return Some(Ok(()));
            };
            self.next += 1;
            if let Err(e) = apply(
                op,
                &mut self.section,
                &mut self.removing,
                device,
                socket,
                now,
            ) {
                return Some(Err(e));
            }
        }
    }
}

fn apply(
    op: &SetOp,
    section: &mut Section,
    removing: &mut Vec<PeerId>,
    device: &mut Device,
    socket: &mut dyn SocketSettings,
    now: Instant,
) -> Result<(), i32> {
    match op {
        SetOp::PrivateKey(k) => {
            device.set_private_key((**k != [0; 32]).then(|| PrivateKey::from_bytes(**k)));
        }
        SetOp::ListenPort(port) => socket.set_listen_port(*port)?,
        SetOp::Fwmark(mark) => socket.set_fwmark(*mark)?,
        SetOp::ReplacePeers => *removing = device.peer_ids(),
        SetOp::Peer(key) => {
            section.peer(device); // a bare public_key= line creates its peer
            *section = Section::Peer {
                id: device.peer_id(key),
                key: *key,
                create: true,
            };
        }
        SetOp::UpdateOnly => {
            if let Section::Peer { create, .. } = section {
                *create = false;
            }
        }
        SetOp::Remove => {
            if let Section::Peer { id, create, .. } = section {
                *create = false;
                if let Some(peer) = id.take() {
                    device.remove_peer(peer);
                }
            }
        }
        SetOp::PresharedKey(k) => {
            if let Some(peer) = section.peer(device) {
                device.set_preshared_key(peer, **k);
            }
        }
        SetOp::Endpoint(addr) => {
            if let Some(peer) = section.peer(device) {
                device.set_endpoint(peer, *addr);
            }
        }
        SetOp::PersistentKeepalive(secs) => {
            if let Some(peer) = section.peer(device) {
                device.set_persistent_keepalive(peer, *secs, now);
            }
        }
        SetOp::ReplaceAllowedIps => {
            if let Some(peer) = section.peer(device) {
                device.clear_allowed_ips(peer);
            }
        }
        SetOp::AllowedIp { remove, prefix } => {
            if let Some(peer) = section.peer(device) {
                if *remove {
                    device.remove_allowed_ip(peer, *prefix);
                } else {
                    device.add_allowed_ip(peer, *prefix);
                }
            }
        }
        SetOp::ProtocolVersion => {
            section.peer(device);
        }
    }
    Ok(())
}
