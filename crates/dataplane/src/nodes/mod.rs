//! The graph's nodes, one file each: the WireGuard nodes, the gateway's IP nodes,
//! the exits; `aead` is the shape the crypto nodes share.

mod aead;
mod ethernet_input;
mod ip4_input;
mod ip6_input;
mod output;
mod wg_decrypt;
mod wg_encrypt;
mod wg_input;

pub use aead::{AeadNode, AeadStage, PostNode};
pub use ethernet_input::{EthernetInput, EthernetInputError};
pub use ip4_input::{Ip4Input, Ip4InputError};
pub use ip6_input::{Ip6Input, Ip6InputError};
pub use output::Output;
pub use wg_decrypt::{DecryptError, WgDecrypt};
pub use wg_encrypt::{EncryptError, WgEncrypt};
pub use wg_input::{InputError, WgInput};
