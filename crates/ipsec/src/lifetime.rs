//! Hard lifetimes in bytes and packets (RFC 4301 section 4.4.2.1), and the usage that
//! every worker using an SA charges against them.
//!
//! When a hard lifetime runs out the SA must not be used any more: the data path
//! refuses the packet that would pass the limit, and the control plane, told by that
//! refusal, rekeys or deletes the SA. Lifetimes in time are the control plane's: it
//! holds the clock.
//!
//! A charge is one `fetch_add` per counter, undone when it passes a limit, rather
//! than a compare-and-swap loop: workers charging one SA at once never retry, and
//! what the undo costs is confined to the limit's edge. Every charge let through saw
//! the counter, with all the charges before it, still within the limit, so together
//! they never pass it. The price is that, while a refused charge is counted and not
//! yet undone, another charge racing it may be refused although it would have fit:
//! near the end of an SA that is about to be replaced anyway, a packet dropped early
//! rather than one let past the limit.

use std::sync::atomic::{AtomicU64, Ordering};

/// The hard limits of an SA; `None`: no limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lifetime {
    /// Bytes the SA may protect (the lengths charged, as the caller counts them).
    pub bytes: Option<u64>,
    pub packets: Option<u64>,
}

/// Which hard lifetime a packet would have passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expired {
    Bytes,
    Packets,
}

impl Expired {
    pub const fn name(self) -> &'static str {
        match self {
            Expired::Bytes => "bytes",
            Expired::Packets => "packets",
        }
    }
}

/// What an SA has protected so far: the packets and bytes let through.
#[derive(Debug, Default)]
pub struct Usage {
    bytes: AtomicU64,
    packets: AtomicU64,
}

impl Usage {
    pub fn new() -> Usage {
        Usage::default()
    }

    /// Counts one packet of `bytes` against `limit`. A packet that would take either
    /// count past its limit is refused and counts nothing; a later, smaller one that
    /// still fits is let through, the limit being what is guaranteed.
    pub fn charge(&self, limit: &Lifetime, bytes: u64) -> Result<(), Expired> {
        // Relaxed: the counts order nothing else, and each counter's own order of
        // changes is all the limit needs.
        let packets_before = self.packets.fetch_add(1, Ordering::Relaxed);
        if limit.packets.is_some_and(|max| packets_before >= max) {
            self.packets.fetch_sub(1, Ordering::Relaxed);
            return Err(Expired::Packets);
        }
        let bytes_before = self.bytes.fetch_add(bytes, Ordering::Relaxed);
        if limit
            .bytes
            .is_some_and(|max| bytes_before.saturating_add(bytes) > max)
        {
            self.bytes.fetch_sub(bytes, Ordering::Relaxed);
            self.packets.fetch_sub(1, Ordering::Relaxed);
            return Err(Expired::Bytes);
        }
        Ok(())
    }

    /// Which limit `packets` more packets of `bytes` more bytes would pass, given
    /// what is counted now; `None` when they fit. Changes nothing: a worker that
    /// tallies a frame's packets itself checks each one here (against its tally so
    /// far) and counts them all at once with [`Usage::add`]. Workers doing so at
    /// once may pass a limit by what their frames in flight hold together.
    pub fn would_pass(&self, limit: &Lifetime, packets: u64, bytes: u64) -> Option<Expired> {
        let over = |max: Option<u64>, now: u64, more: u64| {
            max.is_some_and(|m| now.saturating_add(more) > m)
        };
        if over(limit.packets, self.packets(), packets) {
            Some(Expired::Packets)
        } else if over(limit.bytes, self.bytes(), bytes) {
            Some(Expired::Bytes)
        } else {
            None
        }
    }

    /// Counts `packets` packets of `bytes` bytes, checked already.
    pub fn add(&self, packets: u64, bytes: u64) {
        self.packets.fetch_add(packets, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Bytes let through. A charge being refused may show in it for a moment.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Packets let through. A charge being refused may show in it for a moment.
    pub fn packets(&self) -> u64 {
        self.packets.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tally_is_checked_then_added() {
        let limit = Lifetime {
            bytes: Some(3000),
            packets: Some(5),
        };
        let usage = Usage::new();
        assert_eq!(usage.would_pass(&limit, 2, 3000), None);
        usage.add(2, 3000);
        assert_eq!(usage.would_pass(&limit, 1, 1), Some(Expired::Bytes));
        assert_eq!(usage.would_pass(&limit, 4, 0), Some(Expired::Packets));
        assert_eq!(usage.would_pass(&limit, 3, 0), None);
        assert_eq!((usage.packets(), usage.bytes()), (2, 3000));
        assert_eq!(
            usage.would_pass(&Lifetime::default(), u64::MAX, u64::MAX),
            None
        );
    }

    #[test]
    fn packets_limit_is_exact() {
        let limit = Lifetime {
            bytes: None,
            packets: Some(3),
        };
        let usage = Usage::new();
        for _ in 0..3 {
            assert_eq!(usage.charge(&limit, 1500), Ok(()));
        }
        assert_eq!(usage.charge(&limit, 1500), Err(Expired::Packets));
        assert_eq!(usage.charge(&limit, 0), Err(Expired::Packets));
        assert_eq!((usage.packets(), usage.bytes()), (3, 4500));
    }

    #[test]
    fn bytes_limit_is_exact() {
        let limit = Lifetime {
            bytes: Some(1000),
            packets: None,
        };
        let usage = Usage::new();
        assert_eq!(usage.charge(&limit, 600), Ok(()));
        assert_eq!(usage.charge(&limit, 401), Err(Expired::Bytes));
        assert_eq!((usage.packets(), usage.bytes()), (1, 600));
        assert_eq!(usage.charge(&limit, 400), Ok(()));
        assert_eq!(usage.charge(&limit, 1), Err(Expired::Bytes));
        assert_eq!((usage.packets(), usage.bytes()), (2, 1000));
    }

    #[test]
    fn no_limit() {
        let usage = Usage::new();
        for _ in 0..1000 {
            assert_eq!(usage.charge(&Lifetime::default(), 9000), Ok(()));
        }
        assert_eq!((usage.packets(), usage.bytes()), (1000, 9_000_000));
    }

    #[test]
    fn names() {
        assert_eq!(Expired::Bytes.name(), "bytes");
        assert_eq!(Expired::Packets.name(), "packets");
    }

    /// Four threads charge at once, well past the limits: what they let through never
    /// passes a limit, and the usage is exactly what they let through.
    #[test]
    fn concurrent_charges_never_pass_the_limits() {
        use rand::{Rng, SeedableRng};
        use std::sync::Arc;
        const THREADS: u64 = 4;
        let limits = [
            Lifetime {
                bytes: None,
                packets: Some(30_000),
            },
            Lifetime {
                bytes: Some(20_000_000),
                packets: None,
            },
            Lifetime {
                bytes: Some(20_000_000),
                packets: Some(30_000),
            },
        ];
        for limit in limits {
            let usage = Arc::new(Usage::new());
            let threads: Vec<_> = (0..THREADS)
                .map(|t| {
                    let usage = usage.clone();
                    std::thread::spawn(move || {
                        let mut rng = rand::rngs::StdRng::seed_from_u64(t);
                        let (mut packets, mut bytes) = (0u64, 0u64);
                        for _ in 0..20_000 {
                            let size = rng.gen_range(40..1500);
                            if usage.charge(&limit, size).is_ok() {
                                packets += 1;
                                bytes += size;
                            }
                        }
                        (packets, bytes)
                    })
                })
                .collect();
            let (packets, bytes) = threads
                .into_iter()
                .map(|t| t.join().expect("a charging thread"))
                .fold((0, 0), |(p, b), (tp, tb)| (p + tp, b + tb));
            assert_eq!(
                (usage.packets(), usage.bytes()),
                (packets, bytes),
                "{limit:?}"
            );
            assert!(packets <= limit.packets.unwrap_or(u64::MAX), "{limit:?}");
            assert!(bytes <= limit.bytes.unwrap_or(u64::MAX), "{limit:?}");
            // A packet limit alone is reached exactly: a charge is refused only when
            // the charges counted before it, all let through, already reach it.
            if limit.bytes.is_none() {
                assert_eq!(Some(packets), limit.packets, "{limit:?}");
            }
        }
    }
}
