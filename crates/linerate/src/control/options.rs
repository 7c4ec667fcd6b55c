//! The options of the requests an operator sends a gateway's control socket by
//! hand (`linerate esp`), and of the socket itself, as the command line takes them.

use clap::{Args, Subcommand};
use std::path::PathBuf;

/// A gateway's control socket.
#[derive(Args, Debug)]
pub struct GatewaySocket {
    /// The control socket (the file's `control`)
    #[arg(long, value_name = "PATH", default_value = super::socket::DEFAULT_CONTROL)]
    pub socket: PathBuf,
}

#[derive(Subcommand, Debug)]
pub enum EspAction {
    /// Add an SA: inbound, it takes packets at once beside the tunnel's others;
    /// outbound, it seals the tunnel's next packet in place of the one there
    Add(EspAdd),
    /// Remove an SA: inbound by SPI (its packets are unknown from then on);
    /// outbound, the tunnel's (its packets are dropped until another is added)
    Remove(EspRemove),
}

/// Which of a tunnel's SAs an `esp` command is about: its tunnel and direction.
#[derive(Args, Debug)]
pub struct EspSide {
    /// The tunnel (its `name` in the file)
    #[arg(long)]
    pub tunnel: String,
    /// in or out
    #[arg(long, value_parser = ["in", "out"])]
    pub direction: String,
}

#[derive(Args, Debug)]
pub struct EspAdd {
    #[command(flatten)]
    pub gateway: GatewaySocket,
    #[command(flatten)]
    pub side: EspSide,
    /// The SPI, decimal or 0x hex (256 and up)
    #[arg(long)]
    pub spi: String,
    /// aes128gcm16, aes256gcm16 or chacha20poly1305
    #[arg(long)]
    pub algorithm: String,
    /// The key material in hex, key then salt (as in the file's key_file)
    #[arg(long, value_name = "FILE")]
    pub key_file: PathBuf,
    /// 64-bit extended sequence numbers
    #[arg(long)]
    pub esn: bool,
    /// Inbound: the anti-replay window (32 to 16384; 0: off, not with --esn)
    #[arg(long)]
    pub replay_window: Option<u32>,
    /// Hard lifetime in bytes
    #[arg(long)]
    pub lifetime_bytes: Option<u64>,
    /// Hard lifetime in packets
    #[arg(long)]
    pub lifetime_packets: Option<u64>,
}

#[derive(Args, Debug)]
pub struct EspRemove {
    #[command(flatten)]
    pub gateway: GatewaySocket,
    #[command(flatten)]
    pub side: EspSide,
    /// Inbound: the SPI of the SA to remove
    #[arg(long)]
    pub spi: Option<String>,
}
