//! What a graph with WireGuard nodes does between its runs, the same in host mode and
//! in a gateway: frames back from an asynchronous engine go to their post nodes, and
//! the device's actions are carried out (staged packets of a peer whose session is
//! ready go through `wg-encrypt`; packets it gave up on are freed and counted;
//! handshake messages are sent). Only where a handshake message goes differs: host
//! mode queues it for its UDP socket, a gateway puts it in a buffer for the node that
//! adds the outer headers.
//!
//! With one tunnel on several workers (`wg_follow`), this is also where an owner takes
//! its followers' reports in and publishes the device's view, and where a follower
//! picks the view up and sends its report.

use crate::context::Context;
use crate::graph::{Graph, NodeId};
use crate::nodes::EncryptError;
use crate::nodes::parked::resume_all;
use crate::resume::Resume;
use std::net::SocketAddr;
use wireguard::{Action, Staged};

/// Where the device's own messages (handshakes, cookie replies) go.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ControlTo {
    /// The context's control queue, for a socket that sends them as they are.
    Queue,
    /// Into a buffer each, addressed in its metadata, to this node.
    Node(NodeId),
}

/// The WireGuard nodes of a graph that actions feed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WgNodes {
    pub(crate) input: NodeId,
    pub(crate) encrypt: NodeId,
    pub(crate) encrypt_post: NodeId,
    pub(crate) decrypt_post: NodeId,
    pub(crate) control: ControlTo,
}

/// Carries out a WireGuard device's actions for a graph; keeps its scratch space.
#[derive(Default)]
pub(crate) struct WgActions {
    /// What one flush hands back, reused.
    flushed: Vec<Staged>,
}

impl WgActions {
    /// The start of a run: a follower picks up the device's newest view.
    pub(crate) fn begin(cx: &mut Context) {
        if let Some(f) = cx.tunnels.wg.follower.as_mut() {
            f.begin_run();
        }
        // What the drivers took at the end of the last run is sent by now.
        cx.forget_marks_if_idle();
    }

    /// Moves finished asynchronous frames to their post nodes, takes followers'
    /// reports in and carries out every pending action (an owner), or sends this
    /// run's report (a follower); true when packets went into the graph (run it
    /// again).
    pub(crate) fn run(&mut self, cx: &mut Context, graph: &mut Graph<Context>, n: WgNodes) -> bool {
        // The nodes tell their runs after each frame; should one have been left, it is
        // told here, before the device acts and before a follower's report goes.
        cx.tunnels.wg.end_frame(cx.now);
        let mut more = resume_all(cx, |h, resume| {
            let post = match resume {
                Resume::WgEncrypt(_) => n.encrypt_post,
                Resume::WgDecrypt(_) => n.decrypt_post,
                // ESP's and OpenVPN's frames never park (their stages say so):
                // one here would be a bug, which the post node counts
                // (not-parked) as it frees it.
                Resume::EspEncrypt(_)
                | Resume::EspDecrypt(_)
                | Resume::OvpnEncrypt(_)
                | Resume::OvpnDecrypt(_) => n.encrypt_post,
            };
            graph.enqueue(post, &[h]);
        });
        if let Some(f) = cx.tunnels.wg.follower.as_mut() {
            f.end_run();
            return more;
        }
        more |= take_reports(cx, graph, n);
        while let Some(action) = cx.tunnels.wg.device.poll_action() {
            more |= self.act(cx, graph, n, action);
        }
        cx.tunnels.wg.device.end_run();
        cx.tunnels.wg.device.publish();
        more
    }

    fn act(&mut self, cx: &mut Context, graph: &mut Graph<Context>, n: WgNodes, a: Action) -> bool {
        let wg = &mut cx.tunnels.wg;
        match a {
            Action::Send { to, packet } => send_control(cx, graph, n, to, packet),
            Action::Flush(peer) => {
                self.flushed.clear();
                wg.device.take_staged(peer, &mut self.flushed);
                for &s in &self.flushed {
                    let h = match s {
                        Staged::Packet(h) => {
                            wg.staged -= 1;
                            h
                        }
                        // An empty packet for the peer is a keepalive to wg-encrypt.
                        Staged::Keepalive => match cx.arena.alloc() {
                            Some(h) => {
                                cx.arena.meta_mut(h).peer = peer.0;
                                h
                            }
                            None => {
                                graph.counters_of(n.encrypt).drop(EncryptError::NoBuffer);
                                continue;
                            }
                        },
                    };
                    graph.enqueue(n.encrypt, &[h]);
                }
                !self.flushed.is_empty()
            }
            Action::Discard { packet, reason, .. } => {
                wg.staged -= 1;
                cx.arena.free(packet);
                graph
                    .counters_of(n.encrypt)
                    .drop(EncryptError::from(reason));
                false
            }
        }
    }
}

/// An owner takes in what its followers reported: the device learns from their
/// traffic, and the packets they handed over go into this graph (handshake messages to
/// wg-input, packets waiting for a session to wg-encrypt). True when packets went in.
fn take_reports(cx: &mut Context, graph: &mut Graph<Context>, n: WgNodes) -> bool {
    let mut more = false;
    let mut i = 0;
    while i < cx.tunnels.wg.inboxes.len() {
        let Some(report) = cx.tunnels.wg.inboxes[i].next() else {
            i += 1;
            continue;
        };
        cx.tunnels
            .wg
            .device
            .apply_activity(&report.activity, cx.now);
        let handshakes = report.handshakes.iter().map(|(src, p)| (n.input, *src, p));
        let waiting = report
            .waiting
            .iter()
            .map(|(_, p)| (n.encrypt, SocketAddr::from(([0, 0, 0, 0], 0)), p));
        for (node, src, packet) in handshakes.chain(waiting) {
            match cx.arena.alloc_with(packet) {
                Some(h) => {
                    cx.arena.meta_mut(h).addr = src;
                    graph.enqueue(node, &[h]);
                    more = true;
                }
                None => graph.counters_of(n.encrypt).drop(EncryptError::NoBuffer),
            }
        }
    }
    more
}

/// A message of the device's own, sent where the graph sends them; true when it went
/// into the graph.
fn send_control(
    cx: &mut Context,
    graph: &mut Graph<Context>,
    n: WgNodes,
    to: SocketAddr,
    packet: Vec<u8>,
) -> bool {
    match n.control {
        ControlTo::Queue => {
            cx.outputs.control.push((to, packet));
            false
        }
        ControlTo::Node(node) => match cx.arena.alloc_with(&packet) {
            Some(h) => {
                cx.arena.meta_mut(h).addr = to;
                graph.enqueue(node, &[h]);
                true
            }
            None => {
                graph.counters_of(n.encrypt).drop(EncryptError::NoBuffer);
                false
            }
        },
    }
}
