//! What every mode serves to its operator, and the client side of it: the control
//! socket (`socket`) and the requests it hands to a worker (`request`): the
//! WireGuard UAPI (`uapi`, what `wg` speaks), ESP SA changes (`esp_request`, what
//! `linerate esp` and a key exchange send), and counters (`counter_report`), which
//! `linerate show` prints (`show`).

pub mod client;
pub mod counter_report;
pub mod esp_request;
pub mod options;
pub mod request;
pub mod show;
pub mod socket;
pub mod uapi;
