//! Builds the AF_XDP pieces written in C: the ring shim (`src/xdp/shim.c`, linked in,
//! with libxdp and libbpf found through pkg-config) and the XDP program
//! (`src/xdp/redirect.bpf.c`, compiled for the BPF target into `OUT_DIR`, where
//! `src/xdp/program.rs` embeds it).
//!
//! Needs the Debian packages `libxdp-dev`, `libbpf-dev` and `clang` (see
//! `scripts/setup.sh`). `BPF_CLANG` names another clang for the BPF program.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=src/xdp/shim.c");
    println!("cargo:rerun-if-changed=src/xdp/redirect.bpf.c");
    println!("cargo:rerun-if-env-changed=BPF_CLANG");

    // Found first without printing link lines, so that these come after the shim's
    // own (the shim refers to the libraries, not the other way round).
    let libs: Vec<pkg_config::Library> = ["libxdp", "libbpf"]
        .iter()
        .map(|name| {
            pkg_config::Config::new()
                .cargo_metadata(false)
                .probe(name)
                .unwrap_or_else(|e| {
                    panic!("{name} not found (install libxdp-dev and libbpf-dev): {e}")
                })
        })
        .collect();

    let mut shim = cc::Build::new();
    shim.file("src/xdp/shim.c")
        .warnings(true)
        .extra_warnings(true);
    for lib in &libs {
        for dir in &lib.include_paths {
            shim.include(dir);
        }
    }
    shim.compile("linerate_xsk_shim");

    for lib in &libs {
        for dir in &lib.link_paths {
            println!("cargo:rustc-link-search=native={}", dir.display());
        }
        for name in &lib.libs {
            println!("cargo:rustc-link-lib={name}");
        }
    }

    bpf_program();
}

/// `clang -O2 -g -target bpf` on the XDP program, plain and with the VLAN tag
/// restored (see `redirect.bpf.c`); `-g` keeps the BTF that libbpf and libxdp read.
fn bpf_program() {
    bpf_object("redirect.bpf.o", &[]);
    bpf_object("redirect_vlan.bpf.o", &["-DRESTORE_VLAN"]);
}

/// The XDP program into `OUT_DIR/name`, with `defines`.
fn bpf_object(name: &str, defines: &[&str]) {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR")).join(name);
    let clang = env::var("BPF_CLANG").unwrap_or_else(|_| "clang".to_owned());
    let mut cmd = Command::new(&clang);
    cmd.args(["-O2", "-g", "-target", "bpf", "-Wall", "-Werror"]);
    // <linux/types.h> includes <asm/types.h>, which Debian keeps in the multiarch
    // directory: searched for the host target, not for the BPF one.
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let multiarch = format!("/usr/include/{arch}-linux-gnu");
    if Path::new(&multiarch).is_dir() {
        cmd.arg("-I").arg(&multiarch);
    }
    cmd.args(defines);
    cmd.args(["-c", "src/xdp/redirect.bpf.c", "-o"]).arg(&out);
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("running {clang} for the XDP program (install clang): {e}"));
    assert!(
        status.success(),
        "{clang} failed on src/xdp/redirect.bpf.c ({status})"
    );
}
