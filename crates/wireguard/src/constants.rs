//! Every protocol constant, once, with the place in the WireGuard whitepaper
//! (Donenfeld, "WireGuard: Next Generation Kernel Network Tunnel", rev. e2da747)
//! it comes from.

use std::time::Duration;

// Section 5.4: the Noise construction and the labels.
pub const CONSTRUCTION: &[u8] = b"Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s";
pub const IDENTIFIER: &[u8] = b"WireGuard v1 zx2c4 Jason@zx2c4.com";
pub const LABEL_MAC1: &[u8] = b"mac1----";
pub const LABEL_COOKIE: &[u8] = b"cookie--";

// Section 6.1 (table of timer constants).
pub const REKEY_AFTER_MESSAGES: u64 = 1 << 60;
pub const REJECT_AFTER_MESSAGES: u64 = u64::MAX - (1 << 13);
pub const REKEY_AFTER_TIME: Duration = Duration::from_secs(120);
pub const REJECT_AFTER_TIME: Duration = Duration::from_secs(180);
pub const REKEY_ATTEMPT_TIME: Duration = Duration::from_secs(90);
pub const REKEY_TIMEOUT: Duration = Duration::from_secs(5);
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// Section 6.2: a retried initiation waits REKEY_TIMEOUT plus up to this much jitter.
pub const REKEY_TIMEOUT_JITTER_MAX: Duration = Duration::from_millis(333);

/// Section 6.5: an initiator whose current session is this old when data arrives on it
/// starts a new handshake (REJECT_AFTER_TIME - KEEPALIVE_TIMEOUT - REKEY_TIMEOUT).
pub const REKEY_ON_RECEIVE_AFTER: Duration = Duration::from_secs(165);

/// Section 6.3: with no new handshake, every key is zeroed after 3 x REJECT_AFTER_TIME.
pub const ZERO_KEYS_AFTER: Duration = Duration::from_secs(540);

/// Handshake retries before giving up: REKEY_ATTEMPT_TIME / REKEY_TIMEOUT (section 6.4).
pub const MAX_HANDSHAKE_ATTEMPTS: u32 = 18;

/// Section 5.1 (DoS mitigation): a peer's initiations are consumed at most 50 per
/// second, i.e. one per 20 ms; and TAI64N timestamps are rounded down to a power of
/// two below that so they leak less about the sender's clock.
pub const INITIATIONS_PER_SECOND: u32 = 50;
pub const MIN_INITIATION_INTERVAL: Duration = Duration::from_millis(20);
pub const TIMESTAMP_WHITENER_MASK: u32 = (1 << 24) - 1;

/// Section 5.4.7: the responder's cookie secret changes every two minutes, and an
/// initiator stops using a cookie after the same time, less a latency margin.
pub const COOKIE_SECRET_MAX_AGE: Duration = Duration::from_secs(120);
pub const COOKIE_SECRET_LATENCY: Duration = Duration::from_secs(5);

/// Section 5.4.6: transport plaintext is padded to a multiple of 16 bytes.
pub const PADDING_MULTIPLE: usize = 16;

/// Replay window size in bits (RFC 6479 style). Four times the Linux
/// implementation's: a session shared by several workers can reach them through
/// several receive queues (a NIC's RSS keeps one outer flow on one queue, but veth
/// and AF_PACKET's queue fanout follow the sender's queue), and a worker held back
/// with packets still in its queue must find them inside the window when it comes
/// back. 8 KiB per session.
pub const REPLAY_WINDOW_BITS: u64 = 32768;

/// The receive window of the Linux and Go implementations (8192 bits less a
/// 64-bit word): what a far end may keep, and so what the send side must stay
/// inside (see `keypair::RESEAL_BEHIND`).
pub const PEER_WINDOW: u64 = 8128;

/// Packets held per peer while its handshake completes (the Linux implementation's
/// MAX_STAGED_PACKETS); the oldest is dropped when more arrive.
pub const MAX_STAGED_PACKETS: usize = 128;

/// Per-source handshake rate limit when under load: a token bucket of this rate and
/// burst (the Linux implementation's ratelimiter), IPv6 sources grouped by /64.
pub const RATELIMIT_PACKETS_PER_SECOND: u64 = 20;
pub const RATELIMIT_BURST: u64 = 5;
/// Bound on sources tracked by the rate limiter; new sources are refused when full.
pub const RATELIMIT_MAX_ENTRIES: usize = 8192;
/// Entries idle this long are forgotten.
pub const RATELIMIT_IDLE: Duration = Duration::from_secs(1);

/// Once under load, the device stays so for this long (the Linux implementation).
pub const UNDER_LOAD_HOLD: Duration = Duration::from_secs(1);
/// Default threshold: more handshake messages than this in one second puts the device
/// under load (and so asks for cookies). Configurable per device.
pub const DEFAULT_HANDSHAKES_PER_SECOND_UNDER_LOAD: u32 = 1000;
