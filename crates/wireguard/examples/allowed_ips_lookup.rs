//! Longest-prefix lookups per second against tables of 1 to 1,000,000 prefixes:
//! what a packet's peer lookup costs as an interface's allowed IPs grow.
//!
//!   cargo run --release -p wireguard --example allowed_ips_lookup
//!
//! Prefixes are /128s (one per peer, as `wg` sets them for hosts) and /64s, all
//! inside 2001:2::/48; lookups go to addresses the table holds. Two patterns:
//! "spread", every lookup a random one of all the table's addresses (the walk as
//! deep as the table makes it, the lookup cache of no help: the worst case), and
//! "flows", lookups cycling over 64 addresses (traffic to a few peers at a time:
//! what the data path sees).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::hint::black_box;
use std::net::{IpAddr, Ipv6Addr};
use std::time::Instant;
use wireguard::{AllowedIps, Prefix};

const LOOKUPS: usize = 2_000_000;

fn addr(rng: &mut StdRng) -> Ipv6Addr {
    // 2001:2:0:xxxx:xxxx:xxxx:xxxx:xxxx
    Ipv6Addr::from((0x2001_0002_0000u128 << 80) | (rng.r#gen::<u128>() & ((1 << 80) - 1)))
}

fn main() {
    println!(
        "{:>10} {:>16} {:>16}",
        "prefixes", "spread ns/lookup", "flows ns/lookup"
    );
    for n in [1usize, 1_000, 100_000, 1_000_000] {
        let mut rng = StdRng::seed_from_u64(n as u64);
        let mut table = AllowedIps::new();
        let mut held = Vec::with_capacity(n);
        for i in 0..n {
            let a = addr(&mut rng);
            let len = if i % 4 == 0 { 64 } else { 128 };
            table.insert(Prefix::new(IpAddr::V6(a), len).expect("valid"), i as u32);
            held.push(IpAddr::V6(a));
        }
        let spread: Vec<IpAddr> = (0..LOOKUPS)
            .map(|_| held[rng.gen_range(0..held.len())])
            .collect();
        let few: Vec<IpAddr> = (0..64)
            .map(|_| held[rng.gen_range(0..held.len())])
            .collect();
        let flows: Vec<IpAddr> = (0..LOOKUPS).map(|i| few[i % few.len()]).collect();
        let time = |probes: &[IpAddr]| {
            let t = Instant::now();
            let mut found = 0u64;
            for &a in probes {
                found += black_box(table.lookup(a)).is_some() as u64;
            }
            assert_eq!(found, probes.len() as u64, "every probe is in the table");
            t.elapsed().as_secs_f64() * 1e9 / probes.len() as f64
        };
        println!("{n:>10} {:>16.1} {:>16.1}", time(&spread), time(&flows));
    }
}
