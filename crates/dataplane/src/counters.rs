//! Per-node counters: calls, packets, clocks, packets consumed on purpose, and drops
//! by reason. Each node declares its own reasons (the way a VPP node declares its
//! error strings): a table of [`ErrorInfo`] made by
//! [`node_errors!`](crate::node_errors), whose order is the order of the node's
//! drop counters. A node that passes on what a protocol refuses
//! appends the protocol's own reasons to its table (see [`ProtocolReasons`]), so the
//! protocol crate keeps naming what the protocol refuses while buffer and engine
//! failures stay with the data path's nodes.

/// One reason a node drops packets: the name counters are printed under, and a line
/// that says what it means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorInfo {
    pub name: &'static str,
    pub doc: &'static str,
}

impl ErrorInfo {
    const NONE: ErrorInfo = ErrorInfo { name: "", doc: "" };
}

/// A drop counter's place in its node's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorSlot(pub usize);

/// A protocol crate's set of refusal reasons, as the data path counts them.
pub trait ProtocolReasons: Copy {
    const INFO: &'static [ErrorInfo];
    fn index(self) -> usize;
}

impl ProtocolReasons for wireguard::DropReason {
    const INFO: &'static [ErrorInfo] = &wireguard_reasons();
    fn index(self) -> usize {
        wireguard::DropReason::index(self)
    }
}

const fn wireguard_reasons() -> [ErrorInfo; wireguard::DropReason::COUNT] {
    let mut out = [ErrorInfo::NONE; wireguard::DropReason::COUNT];
    let mut i = 0;
    while i < out.len() {
        let r = wireguard::DropReason::ALL[i];
        out[i] = ErrorInfo {
            name: r.name(),
            doc: r.doc(),
        };
        i += 1;
    }
    out
}

/// `a` followed by `b`, in a constant: a node's own reasons and then a protocol's.
pub const fn concat_errors<const N: usize>(a: &[ErrorInfo], b: &[ErrorInfo]) -> [ErrorInfo; N] {
    assert!(a.len() + b.len() == N, "table length");
    let mut out = [ErrorInfo::NONE; N];
    let mut i = 0;
    while i < a.len() {
        out[i] = a[i];
        i += 1;
    }
    let mut j = 0;
    while j < b.len() {
        out[a.len() + j] = b[j];
        j += 1;
    }
    out
}

/// Declares a node's drop reasons as an enum with a table of names and docs:
///
/// ```ignore
/// node_errors! {
///     /// Why wg-encrypt drops a packet.
///     pub enum EncryptError {
///         TooBig => "too-big", "Too large for a buffer after encapsulation.";
///     }
///     protocol wireguard::DropReason; // optional: Protocol(reason) for the rest
/// }
/// ```
///
/// `EncryptError::TABLE` lists the reasons in counter order; `NodeCounters::drop`
/// takes any variant.
#[macro_export]
macro_rules! node_errors {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $($variant:ident => $text:literal, $doc:literal;)*
        }
        protocol $proto:ty;
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        $vis enum $name {
            $(#[doc = $doc] $variant,)*
            /// Refused by the protocol, for its own reason.
            Protocol($proto),
        }

        impl $name {
            const OWN: &'static [$crate::counters::ErrorInfo] =
                &[$($crate::counters::ErrorInfo { name: $text, doc: $doc },)*];
            const OWN_COUNT: usize = Self::OWN.len();
            pub const TABLE: &'static [$crate::counters::ErrorInfo] =
                &$crate::counters::concat_errors::<
                    { Self::OWN_COUNT
                        + <$proto as $crate::counters::ProtocolReasons>::INFO.len() },
                >(
                    Self::OWN,
                    <$proto as $crate::counters::ProtocolReasons>::INFO,
                );
        }

        // The own reasons' positions, as discriminants of a private enum.
        const _: () = {
            #[allow(dead_code)]
            enum Own {
                $($variant,)*
            }
            impl From<$name> for $crate::counters::ErrorSlot {
                fn from(e: $name) -> $crate::counters::ErrorSlot {
                    $crate::counters::ErrorSlot(match e {
                        $($name::$variant => Own::$variant as usize,)*
                        $name::Protocol(r) => {
                            $name::OWN_COUNT + $crate::counters::ProtocolReasons::index(r)
                        }
                    })
                }
            }
        };

        impl From<$proto> for $name {
            fn from(r: $proto) -> $name {
                $name::Protocol(r)
            }
        }
    };
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $($variant:ident => $text:literal, $doc:literal;)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(usize)]
        $vis enum $name {
            $(#[doc = $doc] $variant,)*
        }

        impl $name {
            pub const TABLE: &'static [$crate::counters::ErrorInfo] =
                &[$($crate::counters::ErrorInfo { name: $text, doc: $doc },)*];
        }

        impl From<$name> for $crate::counters::ErrorSlot {
            fn from(e: $name) -> $crate::counters::ErrorSlot {
                $crate::counters::ErrorSlot(e as usize)
            }
        }
    };
}

/// What one node did: made once per node when the graph is built, its drop counters
/// sized by the node's table.
#[derive(Clone, Debug)]
pub struct NodeCounters {
    /// Times the node ran (once per frame it was handed).
    pub calls: u64,
    pub packets: u64,
    /// Time-stamp-counter ticks spent inside the node.
    pub clocks: u64,
    /// Packets the node finished with on purpose without passing them on (a
    /// handshake consumed, a packet staged for a handshake, a keepalive received).
    pub consumed: u64,
    errors: &'static [ErrorInfo],
    drops: Box<[u64]>,
}

impl NodeCounters {
    pub fn new(errors: &'static [ErrorInfo]) -> NodeCounters {
        NodeCounters {
            calls: 0,
            packets: 0,
            clocks: 0,
            consumed: 0,
            errors,
            drops: vec![0; errors.len()].into_boxed_slice(),
        }
    }

    /// Counts one packet dropped for `reason`, one of the node's declared reasons.
    #[inline]
    pub fn drop(&mut self, reason: impl Into<ErrorSlot>) {
        self.drops[reason.into().0] += 1;
    }

    /// Counts `n` packets dropped for `reason`.
    pub fn drop_n(&mut self, reason: impl Into<ErrorSlot>, n: u64) {
        self.drops[reason.into().0] += n;
    }

    /// Packets dropped for every reason together.
    pub fn dropped(&self) -> u64 {
        self.drops.iter().sum()
    }

    /// The count under one reason's name (0 for a name the node does not declare).
    pub fn drops_named(&self, name: &str) -> u64 {
        self.drops()
            .find(|(e, _)| e.name == name)
            .map_or(0, |(_, n)| n)
    }

    /// Every declared reason with its count, in the node's order.
    pub fn drops(&self) -> impl Iterator<Item = (&'static ErrorInfo, u64)> + '_ {
        self.errors.iter().zip(self.drops.iter().copied())
    }

    /// Adds another run of the same node (same table) into this one.
    pub fn add(&mut self, other: &NodeCounters) {
        assert!(
            std::ptr::eq(self.errors, other.errors) || self.errors == other.errors,
            "adding counters of different nodes"
        );
        self.calls += other.calls;
        self.packets += other.packets;
        self.clocks += other.clocks;
        self.consumed += other.consumed;
        for (a, b) in self.drops.iter_mut().zip(other.drops.iter()) {
            *a += b;
        }
    }
}

/// The CPU's time-stamp counter: cheap enough to read twice per frame.
#[inline]
pub fn clocks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    {
        // SAFETY: RDTSC reads a counter; it has no memory effects and exists on every
        // x86_64 CPU.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        use std::sync::OnceLock;
        use std::time::Instant;
        static START: OnceLock<Instant> = OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// What drop reason `reason` of node `node` means, from a graph's table of its
/// nodes' reasons (what `show errors` explains counters with).
pub fn explain(
    table: &[(&str, &'static [ErrorInfo])],
    node: &str,
    reason: &str,
) -> Option<&'static str> {
    table
        .iter()
        .filter(|(n, _)| *n == node)
        .flat_map(|(_, t)| t.iter())
        .find(|e| e.name == reason)
        .map(|e| e.doc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wireguard::DropReason;

    node_errors! {
        enum Plain {
            First => "first", "The first reason.";
            Second => "second", "The second reason.";
        }
    }

    node_errors! {
        enum WithProtocol {
            Mine => "mine", "The node's own reason.";
        }
        protocol DropReason;
    }

    #[test]
    fn each_reason_counts_under_its_own_name() {
        let mut c = NodeCounters::new(Plain::TABLE);
        c.drop(Plain::Second);
        c.drop(Plain::Second);
        c.drop(Plain::First);
        assert_eq!(c.drops_named("first"), 1);
        assert_eq!(c.drops_named("second"), 2);
        assert_eq!(c.drops_named("nothing"), 0);
        assert_eq!(c.dropped(), 3);
    }

    #[test]
    fn protocol_reasons_follow_the_nodes_own() {
        let t = WithProtocol::TABLE;
        assert_eq!(t.len(), 1 + DropReason::COUNT);
        assert_eq!(t[0].name, "mine");
        for r in DropReason::ALL {
            assert_eq!(t[1 + r.index()].name, r.name());
        }
        let mut c = NodeCounters::new(t);
        c.drop(WithProtocol::Protocol(DropReason::Replay));
        c.drop(WithProtocol::from(DropReason::BadTag));
        c.drop(WithProtocol::Mine);
        assert_eq!(c.drops_named("replay"), 1);
        assert_eq!(c.drops_named("bad-tag"), 1);
        assert_eq!(c.drops_named("mine"), 1);
    }

    #[test]
    fn runs_of_one_node_add_up() {
        let mut a = NodeCounters::new(Plain::TABLE);
        let mut b = NodeCounters::new(Plain::TABLE);
        a.drop(Plain::First);
        b.drop(Plain::First);
        b.calls = 2;
        a.add(&b);
        assert_eq!(a.drops_named("first"), 2);
        assert_eq!(a.calls, 2);
    }
}
