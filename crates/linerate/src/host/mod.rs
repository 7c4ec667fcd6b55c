//! Host mode: `linerate [-f] IFNAME`, a drop-in for wireguard-go. The daemon
//! (`daemon`) makes the TUN and the UAPI socket and runs the workers until a
//! signal, the TUN's removal or the socket file's deletion ends it; without `-f` it
//! starts itself in the background first (`background`). The first worker
//! (`worker`) owns the WireGuard device and answers the control socket; the others
//! follow it (`follower`); each moves packets between its TUN queue, its UDP socket
//! and its graph (`path`).

pub mod background;
pub mod daemon;
pub mod follower;
pub mod path;
pub mod worker;
