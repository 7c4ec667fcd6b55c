//! Network namespaces for tests: throwaway hosts made with `ip netns`, removed on drop.
//!
//! Namespaces belong to threads, not processes. [`NetNs::run`] runs a closure on a fresh
//! thread that has entered the namespace, so sockets and TUN devices it creates live
//! there, and so do child processes it starts (a child inherits its thread's namespace).
//!
//! Project rule: tests only use addresses from 198.18.0.0/15 and 2001:2::/48
//! ([`is_test_addr`]); the helpers here refuse any other.

use std::fs::File;
use std::io;
use std::net::IpAddr;
use std::ops::{Deref, DerefMut};
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::{context, cvt};

/// Whether `ip` is in a benchmarking range set aside for tests: 198.18.0.0/15 (RFC 2544)
/// or 2001:2::/48 (RFC 5180).
pub fn is_test_addr(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            o[0] == 198 && (o[1] & 0xfe) == 18
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            s[0] == 0x2001 && s[1] == 0x0002 && s[2] == 0
        }
    }
}

/// Set (to 1) where every test that needs privileges must run: `make test` sets it
/// when run as root, so that a test skipping for a missing piece (no `/dev/net/tun`,
/// no `wg`) fails instead of passing without having run.
pub const REQUIRE_PRIVILEGED_TESTS: &str = "LINERATE_REQUIRE_PRIVILEGED_TESTS";

/// Says that `test` cannot run here and why (`SKIPPED test: why` on stderr), for the
/// caller to return early; panics instead where [`REQUIRE_PRIVILEGED_TESTS`] is set.
pub fn skip_test(test: &str, why: &str) {
    if std::env::var(REQUIRE_PRIVILEGED_TESTS).is_ok_and(|v| v == "1") {
        panic!("{test} cannot run here ({why}), but {REQUIRE_PRIVILEGED_TESTS}=1 requires it to");
    }
    eprintln!("SKIPPED {test}: {why}");
}

/// Whether this process runs as root, which namespace, TUN and SO_MARK tests need.
/// Tests that need it call [`skip_test`] and return early when it is false.
pub fn is_root() -> bool {
    // SAFETY: geteuid takes no arguments and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// For a test that needs root: true when it may go on; otherwise it says why it
/// cannot run ([`skip_test`]) and the test returns early.
pub fn root_or_skip(test: &str) -> bool {
    if is_root() {
        return true;
    }
    skip_test(test, "needs root");
    false
}

/// A named network namespace (`ip netns add`), deleted when dropped. It starts with only
/// `lo`, which is brought up.
#[derive(Debug)]
pub struct NetNs {
    name: String,
}

impl NetNs {
    /// Creates a namespace called `<prefix>-<pid>-<n>`, unique within this process and
    /// among live processes. `prefix` is limited to ASCII letters, digits, `-` and `_`.
    pub fn new(prefix: &str) -> io::Result<NetNs> {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        if prefix.is_empty()
            || !prefix
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bad netns prefix {prefix:?}"),
            ));
        }
        let name = format!(
            "{prefix}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let added = ip(&["netns", "add", &name]);
        if added.is_err() {
            // A namespace left by a crashed process that had our pid: stale, so replace it.
            let _ = ip(&["netns", "del", &name]);
            ip(&["netns", "add", &name])?;
        }
        // From here on, Drop removes it even if setting it up fails.
        let ns = NetNs { name };
        ns.exec_checked(&["ip", "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// The namespace's name, as `ip netns` knows it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A `Command` for `ip netns exec NAME args...`, to adjust (stdio, env) before running.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.name]).args(args);
        cmd
    }

    /// Runs `args` inside the namespace and returns its output, whatever its exit status.
    pub fn exec(&self, args: &[&str]) -> io::Result<Output> {
        self.command(args).stdin(Stdio::null()).output()
    }

    /// Runs `args` inside the namespace and returns its stdout; a non-zero exit status
    /// is an error carrying stderr.
    pub fn exec_checked(&self, args: &[&str]) -> io::Result<String> {
        let out = self.exec(args)?;
        checked(out, || {
            format!("in netns {}: {}", self.name, args.join(" "))
        })
    }

    /// Starts `args` inside the namespace in the background. The child is killed when
    /// the returned guard drops. Its stdout is discarded and stderr inherited.
    pub fn spawn(&self, args: &[&str]) -> io::Result<NsChild> {
        let child = self
            .command(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| context(e, format_args!("spawning {args:?} in {}", self.name)))?;
        Ok(NsChild::new(child))
    }

    /// Runs `f` on a new thread that has entered this namespace, and returns its result.
    /// A panic in `f` is passed on to the caller.
    pub fn run<T, F>(&self, f: F) -> io::Result<T>
    where
        T: Send,
        F: FnOnce() -> T + Send,
    {
        let ns_file = File::open(format!("/run/netns/{}", self.name))
            .map_err(|e| context(e, format_args!("opening netns {}", self.name)))?;
        std::thread::scope(|s| {
            let handle = s.spawn(move || {
                // SAFETY: setns takes an fd we hold open; CLONE_NEWNET only switches the
                // network namespace of this (fresh, soon finished) thread.
                cvt(unsafe { libc::setns(ns_file.as_raw_fd(), libc::CLONE_NEWNET) })
                    .map_err(|e| context(e, "setns"))?;
                drop(ns_file);
                Ok(f())
            });
            match handle.join() {
                Ok(res) => res,
                Err(panic) => std::panic::resume_unwind(panic),
            }
        })
    }

    /// Adds `addr` (CIDR, e.g. `"198.18.0.1/24"`) to `ifname` inside the namespace.
    /// IPv6 addresses skip duplicate address detection, so they work at once.
    pub fn add_addr(&self, ifname: &str, addr: &str) -> io::Result<()> {
        let ip_part = addr.split('/').next().unwrap_or(addr);
        let parsed: IpAddr = ip_part.parse().map_err(|_| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("bad address {addr:?}"))
        })?;
        if !is_test_addr(parsed) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{addr} is outside 198.18.0.0/15 and 2001:2::/48, the test ranges"),
            ));
        }
        let mut args = vec!["ip", "addr", "add", addr, "dev", ifname];
        if parsed.is_ipv6() {
            args.push("nodad");
        }
        self.exec_checked(&args).map(drop)
    }

    /// Brings `ifname` up inside the namespace.
    pub fn link_up(&self, ifname: &str) -> io::Result<()> {
        self.exec_checked(&["ip", "link", "set", ifname, "up"])
            .map(drop)
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        // Interfaces inside (veths, TUNs whose fd is closed) go with the namespace.
        if let Err(e) = ip(&["netns", "del", &self.name]) {
            eprintln!("warning: could not delete netns {}: {e}", self.name);
        }
    }
}

/// One end of a veth pair made by [`veth_pair`].
#[derive(Clone, Copy, Debug)]
pub struct VethEnd<'a> {
    /// The namespace this end lives in.
    pub ns: &'a NetNs,
    /// Its interface name there (at most 15 bytes).
    pub ifname: &'a str,
    /// Addresses in CIDR form, from the test ranges only.
    pub addrs: &'a [&'a str],
}

/// Connects two namespaces with a veth pair, adds the addresses and brings both ends up.
/// The pair is created directly inside the namespaces, so it never shows in the host's,
/// and it disappears with them.
pub fn veth_pair(a: &VethEnd<'_>, b: &VethEnd<'_>) -> io::Result<()> {
    ip(&[
        "link",
        "add",
        a.ifname,
        "netns",
        a.ns.name(),
        "type",
        "veth",
        "peer",
        "name",
        b.ifname,
        "netns",
        b.ns.name(),
    ])?;
    for end in [a, b] {
        for addr in end.addrs {
            end.ns.add_addr(end.ifname, addr)?;
        }
        end.ns.link_up(end.ifname)?;
    }
    Ok(())
}

/// A new namespace (named from `prefix`) holding a veth pair `a` <-> `b`, both up,
/// with no addresses: a wire for drivers to send frames over.
pub fn bare_veth_ns(prefix: &str, a: &str, b: &str) -> io::Result<NetNs> {
    let ns = NetNs::new(prefix)?;
    veth_pair(
        &VethEnd {
            ns: &ns,
            ifname: a,
            addrs: &[],
        },
        &VethEnd {
            ns: &ns,
            ifname: b,
            addrs: &[],
        },
    )?;
    Ok(ns)
}

/// A background process started in a namespace; killed and reaped on drop.
#[derive(Debug)]
pub struct NsChild {
    child: Child,
}

impl NsChild {
    /// Guards an already started child.
    pub fn new(child: Child) -> NsChild {
        NsChild { child }
    }
}

impl Deref for NsChild {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.child
    }
}

impl DerefMut for NsChild {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.child
    }
}

impl Drop for NsChild {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Runs `ip args...` in the calling thread's namespace; non-zero status is an error.
fn ip(args: &[&str]) -> io::Result<String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| context(e, "running ip (is iproute2 installed?)"))?;
    checked(out, || format!("ip {}", args.join(" ")))
}

fn checked(out: Output, what: impl FnOnce() -> String) -> io::Result<String> {
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(io::Error::other(format!(
            "{} failed ({}): {}",
            what(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_ranges() {
        for ok in [
            "198.18.0.1",
            "198.19.255.255",
            "2001:2::1",
            "2001:2:0:ffff::1",
        ] {
            assert!(is_test_addr(ok.parse().unwrap()), "{ok}");
        }
        for bad in [
            "198.17.255.255",
            "198.20.0.0",
            "10.0.0.1",
            "2001:2:1::1",
            "2001:db8::1",
        ] {
            assert!(!is_test_addr(bad.parse().unwrap()), "{bad}");
        }
    }

    #[test]
    fn bad_prefix_is_refused() {
        assert!(NetNs::new("").is_err());
        assert!(NetNs::new("a/b").is_err());
    }

    #[test]
    fn create_run_and_remove() {
        if !is_root() {
            skip_test("netns", "needs root");
            return;
        }
        let name;
        {
            let ns = NetNs::new("lr-io-t").unwrap();
            name = ns.name().to_owned();
            assert!(name.contains(&std::process::id().to_string()));
            let listed = ip(&["netns", "list"]).unwrap();
            assert!(listed.contains(&name));
            // The thread sees only the namespace's own loopback.
            let links = ns
                .run(|| {
                    let out = Command::new("ip").args(["-o", "link"]).output().unwrap();
                    String::from_utf8_lossy(&out.stdout).into_owned()
                })
                .unwrap();
            assert_eq!(links.lines().count(), 1, "{links}");
            assert!(links.contains("lo:"));
            assert!(ns.add_addr("lo", "10.1.2.3/8").is_err());
        }
        let listed = ip(&["netns", "list"]).unwrap();
        assert!(!listed.contains(&name));
    }

    #[test]
    fn veth_between_two_namespaces() {
        if !is_root() {
            skip_test("veth", "needs root");
            return;
        }
        let a = NetNs::new("lr-io-va").unwrap();
        let b = NetNs::new("lr-io-vb").unwrap();
        veth_pair(
            &VethEnd {
                ns: &a,
                ifname: "va",
                addrs: &["198.18.10.1/24", "2001:2:0:10::1/64"],
            },
            &VethEnd {
                ns: &b,
                ifname: "vb",
                addrs: &["198.18.10.2/24", "2001:2:0:10::2/64"],
            },
        )
        .unwrap();
        // Three tries each: a link just brought up may lose the first packet while
        // neighbour discovery settles (ping succeeds on any reply).
        a.exec_checked(&["ping", "-c3", "-i0.2", "-W2", "198.18.10.2"])
            .unwrap();
        a.exec_checked(&["ping", "-6", "-c3", "-i0.2", "-W2", "2001:2:0:10::2"])
            .unwrap();
        let mut child = a.spawn(&["sleep", "30"]).unwrap();
        assert!(child.try_wait().unwrap().is_none());
    }
}
