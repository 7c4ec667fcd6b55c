//! The node graph. A node takes a frame (up to [`FRAME_LEN`] handles), does one job to
//! every packet, and writes each packet's next edge into a small array; the graph then
//! moves each packet to the node behind that edge. Edges are numbered by each node's
//! own typed `Next` enum and bound to node names once, when the graph is built.

use crate::arena::{Arena, Handle};
use crate::counters::{ErrorInfo, NodeCounters, clocks};

pub use crypto::FRAME_LEN;
/// The edge that frees a packet: the node has counted why (a drop reason) or
/// finished with it on purpose.
pub const FREE: u16 = u16::MAX;
/// The edge that leaves a packet alone: the node handed it on outside the graph (an
/// output queue), which frees it later.
pub const KEEP: u16 = u16::MAX - 1;

pub type NodeId = usize;

/// What a node's context must give the graph: the arena, to free packets.
pub trait HasArena {
    fn arena(&mut self) -> &mut Arena;
}

/// What a node is, fixed when it is made: its name, the nodes behind its edges 0, 1,
/// ... (the order of its `Next` enum), and why it drops packets (the order of its drop
/// counters: a table made by [`node_errors!`](crate::node_errors)).
#[derive(Clone, Copy, Debug)]
pub struct NodeInfo {
    pub name: &'static str,
    pub next: &'static [&'static str],
    pub errors: &'static [ErrorInfo],
}

/// `Send`: a graph is built on one thread and moved to the worker that runs it.
pub trait Node<C>: Send {
    fn info(&self) -> &NodeInfo;
    /// Processes `packets`, writing `next[i]` (an edge number, [`FREE`] or [`KEEP`])
    /// for each; every packet freed is counted, as a drop under one of the node's
    /// reasons or as consumed.
    fn process(
        &mut self,
        cx: &mut C,
        packets: &[Handle],
        next: &mut [u16],
        counters: &mut NodeCounters,
    );
}

/// A node with its edges, the packets waiting for it and its counters.
struct NodeSlot<C> {
    node: Box<dyn Node<C>>,
    edges: Vec<NodeId>,
    pending: Vec<Handle>,
    counters: NodeCounters,
}

/// One edge of a node bound to another node than the one the node names: how one node
/// serves several graphs (wg-encrypt's exit is the UDP socket's queue in host mode and
/// the outer IP header's node in a gateway).
#[derive(Clone, Copy, Debug)]
pub struct Rebind {
    /// The node whose edge is bound elsewhere.
    pub node: &'static str,
    /// The edge, by the name of the node it names.
    pub edge: &'static str,
    /// The node it leads to in this graph.
    pub to: &'static str,
}

pub struct Graph<C> {
    slots: Vec<NodeSlot<C>>,
    next: Vec<u16>,
    frame: Vec<Handle>,
}

impl<C: HasArena> Graph<C> {
    /// Builds the graph from nodes in processing order (edges should point forward;
    /// backward edges work but cost another pass). Panics on an edge to a node that
    /// is not there: that is a wiring bug, found at start-up.
    pub fn new(nodes: Vec<Box<dyn Node<C>>>) -> Graph<C> {
        Graph::with_rebinds(nodes, &[])
    }

    /// Builds the graph with some edges bound to other nodes than the ones their
    /// nodes name. Panics, as [`Graph::new`] does, on a rebind of an edge that is not
    /// there.
    pub fn with_rebinds(nodes: Vec<Box<dyn Node<C>>>, rebinds: &[Rebind]) -> Graph<C> {
        let names: Vec<&'static str> = nodes.iter().map(|n| n.info().name).collect();
        for r in rebinds {
            let found = nodes
                .iter()
                .any(|n| n.info().name == r.node && n.info().next.contains(&r.edge));
            assert!(found, "rebind of a missing edge {} -> {}", r.node, r.edge);
        }
        let slots = nodes
            .into_iter()
            .map(|node| {
                let info = *node.info();
                let edges = info
                    .next
                    .iter()
                    .map(|&edge| {
                        let target = rebinds
                            .iter()
                            .find(|r| r.node == info.name && r.edge == edge)
                            .map_or(edge, |r| r.to);
                        names.iter().position(|n| *n == target).unwrap_or_else(|| {
                            panic!("node {} has an edge to missing node {target}", info.name)
                        })
                    })
                    .collect();
                let counters = NodeCounters::new(info.errors);
                NodeSlot {
                    node,
                    edges,
                    pending: Vec::with_capacity(FRAME_LEN),
                    counters,
                }
            })
            .collect();
        Graph {
            slots,
            next: vec![0; FRAME_LEN],
            frame: Vec::with_capacity(FRAME_LEN),
        }
    }

    pub fn id(&self, name: &str) -> Option<NodeId> {
        self.slots.iter().position(|s| s.node.info().name == name)
    }

    /// A node's counters, for what is counted on its behalf outside `process` (a
    /// packet dropped before it reached the node).
    pub fn counters_of(&mut self, node: NodeId) -> &mut NodeCounters {
        &mut self.slots[node].counters
    }

    /// Hands packets to a node; they run at the next [`Graph::run`].
    pub fn enqueue(&mut self, node: NodeId, packets: &[Handle]) {
        self.slots[node].pending.extend_from_slice(packets);
    }

    pub fn pending(&self) -> usize {
        self.slots.iter().map(|s| s.pending.len()).sum()
    }

    /// Runs nodes in order until no packet is pending anywhere.
    pub fn run(&mut self, cx: &mut C) {
        loop {
            let mut ran = false;
            for i in 0..self.slots.len() {
                while !self.slots[i].pending.is_empty() {
                    ran = true;
                    self.run_frame(i, cx);
                }
            }
            if !ran {
                return;
            }
        }
    }

    fn run_frame(&mut self, i: NodeId, cx: &mut C) {
        let slot = &mut self.slots[i];
        let n = slot.pending.len().min(FRAME_LEN);
        self.frame.clear();
        self.frame.extend(slot.pending.drain(..n));
        let next = &mut self.next[..n];
        next.fill(FREE);
        let start = clocks();
        slot.node.process(cx, &self.frame, next, &mut slot.counters);
        let spent = clocks().wrapping_sub(start);
        slot.counters.calls += 1;
        slot.counters.packets += n as u64;
        slot.counters.clocks += spent;
        // Packets leave in runs of one edge: a frame usually goes one way whole, and
        // a run moves to its node in one copy rather than a push per packet.
        let mut k = 0;
        while k < n {
            let e = self.next[k];
            let end = k + same_run(&self.next[k..n], e);
            let run = &self.frame[k..end];
            match e {
                FREE => run.iter().for_each(|&h| cx.arena().free(h)),
                KEEP => {}
                e => {
                    let target = self.slots[i].edges[e as usize];
                    self.slots[target].pending.extend_from_slice(run);
                }
            }
            k = end;
        }
    }

    /// Every node's name and counters, in graph order.
    pub fn counters(&self) -> impl Iterator<Item = (&'static str, &NodeCounters)> {
        self.slots.iter().map(|s| (s.node.info().name, &s.counters))
    }
}

/// How many edges at the start of `next` are `e`. Whole blocks of 16 are compared
/// at once, without a branch per edge (the compiler makes each block a few vector
/// instructions): a frame usually goes one way whole.
fn same_run(next: &[u16], e: u16) -> usize {
    const BLOCK: usize = 16;
    let mut len = 0;
    for block in next.chunks(BLOCK) {
        let differs = block.iter().fold(0u16, |acc, &x| acc | (x ^ e));
        if differs != 0 {
            return len + block.iter().take_while(|&&x| x == e).count();
        }
        len += block.len();
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The run of one edge at the start of a frame's edges, against counting one
    /// by one: every length up to past two blocks, with the first other edge at
    /// every place.
    #[test]
    fn same_run_counts_the_edges_before_the_first_other_one() {
        for n in 0..40 {
            for other in 0..=n {
                let mut next = vec![3u16; n];
                if other < n {
                    next[other] = 4;
                }
                let want = next.iter().take_while(|&&x| x == 3).count();
                assert_eq!(same_run(&next, 3), want, "{n} edges, other at {other}");
            }
        }
    }
    use crate::arena::Arena;

    crate::node_errors! {
        enum SplitError {
            Odd => "odd", "An odd first byte.";
        }
    }

    struct Cx {
        arena: Arena,
        seen: Vec<Handle>,
        other: Vec<Handle>,
    }
    impl Cx {
        fn new(buffers: usize) -> Cx {
            Cx {
                arena: Arena::new(buffers),
                seen: Vec::new(),
                other: Vec::new(),
            }
        }
    }
    impl HasArena for Cx {
        fn arena(&mut self) -> &mut Arena {
            &mut self.arena
        }
    }

    /// Sends even-numbered packets on, drops odd ones.
    struct Split;
    impl Node<Cx> for Split {
        fn info(&self) -> &NodeInfo {
            &NodeInfo {
                name: "split",
                next: &["sink"],
                errors: SplitError::TABLE,
            }
        }
        fn process(
            &mut self,
            cx: &mut Cx,
            packets: &[Handle],
            next: &mut [u16],
            c: &mut NodeCounters,
        ) {
            for (i, &h) in packets.iter().enumerate() {
                if cx.arena.data(h)[0].is_multiple_of(2) {
                    next[i] = 0;
                } else {
                    c.drop(SplitError::Odd);
                }
            }
        }
    }

    /// An exit that keeps what reaches it: `sink` in `Cx::seen`, `other-sink` (for
    /// rebinding an edge to it) in `Cx::other`.
    struct Sink {
        info: NodeInfo,
        keep: fn(&mut Cx) -> &mut Vec<Handle>,
    }
    impl Sink {
        fn seen() -> Box<Sink> {
            Sink::named("sink", |cx| &mut cx.seen)
        }
        fn other() -> Box<Sink> {
            Sink::named("other-sink", |cx| &mut cx.other)
        }
        fn named(name: &'static str, keep: fn(&mut Cx) -> &mut Vec<Handle>) -> Box<Sink> {
            let info = NodeInfo {
                name,
                next: &[],
                errors: &[],
            };
            Box::new(Sink { info, keep })
        }
    }
    impl Node<Cx> for Sink {
        fn info(&self) -> &NodeInfo {
            &self.info
        }
        fn process(
            &mut self,
            cx: &mut Cx,
            packets: &[Handle],
            _next: &mut [u16],
            c: &mut NodeCounters,
        ) {
            (self.keep)(cx).extend_from_slice(packets);
            c.consumed += packets.len() as u64;
        }
    }

    /// Across many frames, nothing is lost or duplicated, order is kept, counters add up
    /// and every buffer goes back to the pool.
    #[test]
    fn frames_keep_order_and_count() {
        let mut cx = Cx::new(2000);
        let mut g: Graph<Cx> = Graph::new(vec![Box::new(Split), Sink::seen()]);
        let handles: Vec<Handle> = (0..1000u32)
            .map(|i| cx.arena.alloc_with(&[(i % 256) as u8, 0]).unwrap())
            .collect();
        g.enqueue(0, &handles);
        g.run(&mut cx);
        let want: Vec<Handle> = handles
            .iter()
            .copied()
            .filter(|&h| cx.arena.data(h)[0].is_multiple_of(2))
            .collect();
        assert_eq!(cx.seen, want);
        let c: Vec<_> = g.counters().map(|(n, c)| (n, c.clone())).collect();
        assert_eq!(c[0].1.packets, 1000);
        assert_eq!(c[0].1.calls, 4, "1000 packets make 4 frames of up to 256");
        assert_eq!(c[0].1.drops_named("odd"), c[0].1.dropped());
        assert_eq!(c[0].1.dropped() + c[1].1.packets, 1000);
        assert_eq!(
            cx.arena.available(),
            2000 - 1000 + c[0].1.dropped() as usize + want.len()
        );
    }

    /// Sends a packet by its first byte: 0 to sink, 1 to other-sink, 2 is dropped, 3
    /// is kept (handed on outside the graph), 4 comes back to the router itself as a
    /// 1 (for other-sink).
    struct Router;
    impl Node<Cx> for Router {
        fn info(&self) -> &NodeInfo {
            &NodeInfo {
                name: "router",
                next: &["sink", "other-sink", "router"],
                errors: SplitError::TABLE,
            }
        }
        fn process(
            &mut self,
            cx: &mut Cx,
            packets: &[Handle],
            next: &mut [u16],
            c: &mut NodeCounters,
        ) {
            for (i, &h) in packets.iter().enumerate() {
                match cx.arena.data(h)[0] {
                    0 => next[i] = 0,
                    1 => next[i] = 1,
                    2 => c.drop(SplitError::Odd),
                    3 => next[i] = KEEP,
                    _ => {
                        cx.arena.data_mut(h)[0] = 1;
                        next[i] = 2;
                    }
                }
            }
        }
    }

    /// Runs of many lengths, to each edge (one of them back to the node itself), to
    /// FREE and to KEEP, across frame boundaries: each packet arrives where its node
    /// sent it, in order, once.
    #[test]
    fn runs_of_one_edge_arrive_whole_and_in_order() {
        let mut cx = Cx::new(4000);
        let nodes: Vec<Box<dyn Node<Cx>>> = vec![Box::new(Router), Sink::seen(), Sink::other()];
        let mut g = Graph::new(nodes);
        // Runs of 1 to 314 packets (some longer than a frame), the class turning
        // with each run.
        let (mut sent, mut class, mut run) = (Vec::new(), 0u8, 1);
        while sent.len() < 3000 {
            for _ in 0..run {
                sent.push((cx.arena.alloc_with(&[class, 0]).unwrap(), class));
            }
            class = (class + 1) % 5;
            run = run % 300 + 1 + (run / 7);
        }
        let handles: Vec<Handle> = sent.iter().map(|&(h, _)| h).collect();
        g.enqueue(0, &handles);
        g.run(&mut cx);
        let of = |class: u8| -> Vec<Handle> {
            sent.iter()
                .filter(|&&(_, c)| c == class)
                .map(|&(h, _)| h)
                .collect()
        };
        assert_eq!(cx.seen, of(0));
        // The router's own queue ran dry before other-sink's turn: its first-pass 1s,
        // then the 4s that came round again.
        assert_eq!(cx.other, [of(1), of(4)].concat());
        assert!(!of(2).is_empty() && !of(3).is_empty() && !of(4).is_empty());
        let c: Vec<_> = g.counters().map(|(_, c)| c.clone()).collect();
        assert_eq!(c[0].packets as usize, handles.len() + of(4).len());
        // Every dropped packet was freed once, every kept one not at all, and the
        // sinks' packets went back to the pool.
        assert_eq!(cx.arena.available(), 4000 - of(3).len());
    }

    #[test]
    fn a_rebound_edge_leads_to_the_node_it_is_bound_to() {
        let mut cx = Cx::new(16);
        let rebind = Rebind {
            node: "split",
            edge: "sink",
            to: "other-sink",
        };
        let nodes: Vec<Box<dyn Node<Cx>>> = vec![Box::new(Split), Sink::seen(), Sink::other()];
        let mut g = Graph::with_rebinds(nodes, &[rebind]);
        let h = cx.arena.alloc_with(&[2]).unwrap();
        g.enqueue(0, &[h]);
        g.run(&mut cx);
        assert!(cx.seen.is_empty(), "the named node got nothing");
        let got: Vec<_> = g.counters().map(|(n, c)| (n, c.consumed)).collect();
        assert_eq!(got, [("split", 0), ("sink", 0), ("other-sink", 1)]);
    }

    #[test]
    #[should_panic(expected = "rebind of a missing edge")]
    fn a_rebind_of_a_missing_edge_is_a_wiring_bug() {
        let rebind = Rebind {
            node: "sink",
            edge: "split",
            to: "split",
        };
        let nodes: Vec<Box<dyn Node<Cx>>> = vec![Box::new(Split), Sink::seen()];
        let _ = Graph::with_rebinds(nodes, &[rebind]);
    }
}
