//! Which code runs: the paths, what each needs from the CPU, runtime detection, and
//! the table of kernels a vector path uses.

use crate::lanes::{ChachaLanes, MAX_LANES, PolyLanes, Radix};

/// One implementation of the engine. Every path gives the same bytes; they differ in
/// speed and in what the CPU must have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Path {
    /// Plain Rust, one op at a time. Runs anywhere.
    Scalar,
    /// 8 lanes: ChaCha20 on 32-bit lanes of ymm registers, Poly1305 in 26-bit limbs.
    Avx2,
    /// 16 lanes on zmm registers (32 for ChaCha20, two interleaved groups),
    /// Poly1305 in 26-bit limbs (AVX-512 F, BW and VL).
    Avx512,
    /// As `Avx512`, with Poly1305 in 44-bit limbs on the 52-bit multiply-add (IFMA).
    Avx512Ifma,
}

impl Path {
    pub const ALL: [Path; 4] = [Path::Scalar, Path::Avx2, Path::Avx512, Path::Avx512Ifma];

    /// The name `LINERATE_MB_PATH` takes.
    pub const fn name(self) -> &'static str {
        match self {
            Path::Scalar => "scalar",
            Path::Avx2 => "avx2",
            Path::Avx512 => "avx512",
            Path::Avx512Ifma => "avx512ifma",
        }
    }

    pub fn from_name(name: &str) -> Option<Path> {
        Path::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Whether this CPU can run the path.
    pub fn available(self) -> bool {
        match self {
            Path::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Path::Avx2 => std::is_x86_feature_detected!("avx2"),
            #[cfg(target_arch = "x86_64")]
            Path::Avx512 => {
                std::is_x86_feature_detected!("avx512f")
                    && std::is_x86_feature_detected!("avx512bw")
                    && std::is_x86_feature_detected!("avx512vl")
            }
            #[cfg(target_arch = "x86_64")]
            Path::Avx512Ifma => {
                Path::Avx512.available() && std::is_x86_feature_detected!("avx512ifma")
            }
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// Every path this CPU runs, slowest first.
    pub fn available_paths() -> Vec<Path> {
        Path::ALL.into_iter().filter(|p| p.available()).collect()
    }

    /// The fastest path this CPU runs.
    pub fn best() -> Path {
        Path::ALL
            .into_iter()
            .rev()
            .find(|p| p.available())
            .unwrap_or(Path::Scalar)
    }

    /// The path `LINERATE_MB_PATH` names, if it names one this CPU runs; otherwise
    /// the fastest available path below the one named (or the best, when unset or
    /// unknown).
    pub fn from_env() -> Path {
        Path::resolve(std::env::var("LINERATE_MB_PATH").ok().as_deref())
    }

    /// What `from_env` makes of the variable's value.
    pub fn resolve(wanted: Option<&str>) -> Path {
        match wanted.and_then(|v| Path::from_name(v.trim())) {
            Some(w) => Path::ALL
                .into_iter()
                .rev()
                .find(|p| *p <= w && p.available())
                .unwrap_or(Path::Scalar),
            None => Path::best(),
        }
    }
}

impl core::fmt::Display for Path {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// The kernels of one vector path.
///
/// Calling `chacha` or `poly` is sound only on a CPU that has the path's features
/// (which [`Kernels::for_path`] checks before it hands out a table) and with every
/// busy lane's pointers valid as [`ChachaLanes`] and [`PolyLanes`] describe.
#[derive(Clone, Copy)]
pub(crate) struct Kernels {
    /// Lanes of the ChaCha20 kernel.
    pub chacha_lanes: usize,
    /// Lanes of the Poly1305 kernel.
    pub lanes: usize,
    pub radix: Radix,
    /// `n` steps of the ChaCha20 lanes, their rows unchanged in between.
    pub chacha: unsafe fn(&mut ChachaLanes, usize),
    pub poly: unsafe fn(&mut PolyLanes, usize),
    /// Vector code to start and finish a whole group of lanes at once (see
    /// `lane_path::poly_groups`).
    pub poly_group: PolyGroup,
}

/// The start and the end of Poly1305 for `lanes` packets of one shape, in vector
/// code: what the lane path otherwise does lane by lane in scalar code.
///
/// `start(st, otk)` gives each lane `r` clamped from the one-time key at `otk[lane]`,
/// `h` = 0, the 2^128 bit and stride 16; `tags(st, otk, mac)` writes each lane's tag,
/// with `s` from the same key, to `mac[lane]`. Sound under the same conditions as the
/// other kernels, with 32 readable bytes at every `otk[lane]` and 16 writable at every
/// `mac[lane]`.
#[derive(Clone, Copy)]
pub(crate) struct PolyGroup {
    pub start: unsafe fn(&mut PolyLanes, &[*const u8; MAX_LANES]),
    pub tags: unsafe fn(&PolyLanes, &[*const u8; MAX_LANES], &[*mut u8; MAX_LANES]),
}

impl Kernels {
    /// The table for `path`, or `None` for the scalar path or a path this CPU lacks.
    pub fn for_path(path: Path) -> Option<Kernels> {
        if !path.available() {
            return None;
        }
        #[cfg(target_arch = "x86_64")]
        {
            use crate::kernels::*;
            match path {
                Path::Scalar => None,
                Path::Avx2 => Some(Kernels {
                    chacha_lanes: 8,
                    lanes: 8,
                    radix: Radix::R26,
                    chacha: chacha_avx2::steps,
                    poly: poly_avx2::steps,
                    poly_group: PolyGroup {
                        start: poly_avx2::start,
                        tags: poly_avx2::tags,
                    },
                }),
                Path::Avx512 => Some(Kernels {
                    chacha_lanes: 32,
                    lanes: 16,
                    radix: Radix::R26,
                    chacha: chacha_avx512::steps,
                    poly: poly_avx512::steps,
                    poly_group: PolyGroup {
                        start: poly_group_avx512::start_r26,
                        tags: poly_group_avx512::tags_r26,
                    },
                }),
                Path::Avx512Ifma => Some(Kernels {
                    chacha_lanes: 32,
                    lanes: 16,
                    radix: Radix::R44,
                    chacha: chacha_avx512::steps,
                    poly: poly_ifma::steps,
                    poly_group: PolyGroup {
                        start: poly_group_avx512::start_r44,
                        tags: poly_group_avx512::tags_r44,
                    },
                }),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_forcing_falls_back_to_what_runs() {
        for p in Path::ALL {
            assert_eq!(Path::from_name(p.name()), Some(p));
            let got = Path::resolve(Some(p.name()));
            assert!(got <= p && got.available());
            if p.available() {
                assert_eq!(got, p);
            }
        }
        assert_eq!(Path::resolve(None), Path::best());
        assert_eq!(Path::resolve(Some("no-such-path")), Path::best());
        assert_eq!(Path::resolve(Some(" scalar ")), Path::Scalar);
        assert!(Kernels::for_path(Path::Scalar).is_none());
    }
}
