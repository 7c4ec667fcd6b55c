//! The nodes of the WireGuard graph, one file each.

mod output;
mod resume;
mod wg_decrypt;
mod wg_encrypt;
mod wg_input;

pub use output::Output;
pub use resume::{Finish, Resumed};
pub use wg_decrypt::{DecryptError, WgDecrypt};
pub use wg_encrypt::{EncryptError, WgEncrypt};
pub use wg_input::{InputError, WgInput};
