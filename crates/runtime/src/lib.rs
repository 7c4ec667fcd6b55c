//! What runs linerate's workers, shared by host mode, the gateway and the
//! benchmarks: the crypto engines this build has and the set a worker is given
//! (`engines`), and the thread that runs beside a tunnel's owner (`follower_thread`).
//! Core pinning is a system call and lives with the other drivers, in `io::affinity`.

#![forbid(unsafe_code)]

pub mod engines;
pub mod follower_thread;
