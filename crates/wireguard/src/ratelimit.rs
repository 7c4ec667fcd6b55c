//! Per-source token buckets for handshake messages under load, in a bounded table.

use crate::constants::{
    RATELIMIT_BURST, RATELIMIT_IDLE, RATELIMIT_MAX_ENTRIES, RATELIMIT_PACKETS_PER_SECOND,
};
use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

const NANOS_PER_PACKET: u64 = 1_000_000_000 / RATELIMIT_PACKETS_PER_SECOND;
const BUCKET_NANOS: u64 = NANOS_PER_PACKET * RATELIMIT_BURST;

#[derive(Default)]
pub struct RateLimiter {
    buckets: HashMap<u128, (Instant, u64)>,
    last_sweep: Option<Instant>,
}

/// IPv4 sources count one by one; IPv6 sources by /64, since one host owns a /64.
fn source_key(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(a) => u32::from(a) as u128,
        IpAddr::V6(a) => (u128::from(a) & (u128::MAX << 64)) | 1,
    }
}

impl RateLimiter {
    pub fn allow(&mut self, src: IpAddr, now: Instant) -> bool {
        if self
            .last_sweep
            .is_none_or(|t| now.saturating_duration_since(t) >= RATELIMIT_IDLE)
        {
            self.buckets
                .retain(|_, (seen, _)| now.saturating_duration_since(*seen) < RATELIMIT_IDLE);
            self.last_sweep = Some(now);
        }
        let key = source_key(src);
        if let Some((seen, tokens)) = self.buckets.get_mut(&key) {
            let refill = now
                .saturating_duration_since(*seen)
                .as_nanos()
                .min(BUCKET_NANOS as u128) as u64;
            *tokens = (*tokens + refill).min(BUCKET_NANOS);
            *seen = now;
            if *tokens >= NANOS_PER_PACKET {
                *tokens -= NANOS_PER_PACKET;
                return true;
            }
            return false;
        }
        if self.buckets.len() >= RATELIMIT_MAX_ENTRIES {
            return false;
        }
        self.buckets
            .insert(key, (now, BUCKET_NANOS - NANOS_PER_PACKET));
        true
    }

    pub fn tracked(&self) -> usize {
        self.buckets.len()
    }
}

/// Counts handshake messages per second and says whether the device is under load.
pub struct LoadMonitor {
    threshold: u32,
    window_start: Option<Instant>,
    count: u32,
    loaded_until: Option<Instant>,
}

impl LoadMonitor {
    pub fn new(threshold_per_second: u32) -> LoadMonitor {
        LoadMonitor {
            threshold: threshold_per_second,
            window_start: None,
            count: 0,
            loaded_until: None,
        }
    }

    pub fn set_threshold(&mut self, per_second: u32) {
        self.threshold = per_second;
    }

    /// Notes one handshake message and answers whether to demand cookies for it.
    pub fn note_handshake(&mut self, now: Instant) -> bool {
        if self
            .window_start
            .is_none_or(|s| now.saturating_duration_since(s) >= Duration::from_secs(1))
        {
            self.window_start = Some(now);
            self.count = 0;
        }
        self.count = self.count.saturating_add(1);
        if self.count > self.threshold {
            self.loaded_until = Some(now + crate::constants::UNDER_LOAD_HOLD);
        }
        self.loaded_until.is_some_and(|until| now < until)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_rate() {
        let mut r = RateLimiter::default();
        let t = Instant::now();
        let a: IpAddr = "198.18.0.1".parse().unwrap();
        let allowed = (0..10).filter(|_| r.allow(a, t)).count();
        assert_eq!(allowed as u64, RATELIMIT_BURST);
        assert!(r.allow(a, t + Duration::from_millis(50)));
        assert!(!r.allow(a, t + Duration::from_millis(51)));
        assert!(r.allow("198.18.0.2".parse().unwrap(), t));
        let v6a: IpAddr = "2001:2::1".parse().unwrap();
        let v6b: IpAddr = "2001:2::2".parse().unwrap();
        for _ in 0..RATELIMIT_BURST {
            assert!(r.allow(v6a, t));
        }
        assert!(!r.allow(v6b, t), "same /64 shares a bucket");
    }

    #[test]
    fn table_is_bounded() {
        let mut r = RateLimiter::default();
        let t = Instant::now();
        for i in 0..(RATELIMIT_MAX_ENTRIES as u32 + 10) {
            r.allow(IpAddr::V4(i.into()), t);
        }
        assert_eq!(r.tracked(), RATELIMIT_MAX_ENTRIES);
        assert!(!r.allow("198.18.9.9".parse().unwrap(), t));
        assert!(r.allow("198.18.9.9".parse().unwrap(), t + Duration::from_secs(2)));
    }

    #[test]
    fn load_monitor_holds_for_a_second() {
        let mut m = LoadMonitor::new(3);
        let t = Instant::now();
        assert!(!(0..3).any(|_| m.note_handshake(t)));
        assert!(m.note_handshake(t));
        assert!(m.note_handshake(t + Duration::from_millis(900)));
        assert!(!m.note_handshake(t + Duration::from_millis(2100)));
    }
}
