//! The nodes of the WireGuard graph, one file each.

mod output;
mod wg_decrypt;
mod wg_encrypt;
mod wg_input;

pub use output::Output;
pub use wg_decrypt::{WgDecrypt, WgDecryptPost};
pub use wg_encrypt::{WgEncrypt, WgEncryptPost};
pub use wg_input::WgInput;
