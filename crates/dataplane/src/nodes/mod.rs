//! The nodes of the WireGuard graph, one file each; `aead` is the shape the crypto
//! nodes share.

mod aead;
mod output;
mod wg_decrypt;
mod wg_encrypt;
mod wg_input;

pub use aead::{AeadNode, AeadStage, PostNode};
pub use output::Output;
pub use wg_decrypt::{DecryptError, WgDecrypt};
pub use wg_encrypt::{EncryptError, WgEncrypt};
pub use wg_input::{InputError, WgInput};
