//! The WireGuard protocol without I/O (whitepaper: Donenfeld, NDSS 2017).
//!
//! Time is an argument (`now: Instant`), never read here; packets go in as bytes and
//! come out as [`device::Action`]s; transport keys live in the crypto crate's key
//! registry so the data path's engines can use them by handle. Layout follows the
//! protocol's concerns, one per file.
#![forbid(unsafe_code)]

pub mod action;
pub mod allowed_ips;
pub mod constants;
pub mod cookie;
pub mod datapath;
pub mod device;
pub mod drop;
mod index_hash;
pub mod keypair;
pub mod noise;
pub mod peer;
pub mod peer_id;
mod peer_timers;
pub mod ratelimit;
pub mod replay;
pub mod runs;
pub mod session;
pub mod staged;
pub mod tai64n;
mod tickets;

pub use allowed_ips::{AllowedIps, Prefix};
pub use datapath::{Activity, Follower, ViewCell};
pub use device::{Action, Device, PeerInfo, RecvRun, RecvTicket, SendError, SendTicket};
pub use drop::DropReason;
pub use keypair::{Keypair, RESEAL_BEHIND};
pub use peer::PeerId;
pub use runs::{ReceivedRun, RunTally, SentRun};
pub use session::SessionPath;
pub use staged::Staged;
