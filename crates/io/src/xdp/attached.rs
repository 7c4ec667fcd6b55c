//! What an interface has attached already, as libxdp finds it: the one program of
//! a legacy attachment, or each program a libxdp dispatcher runs. A gateway killed
//! without a clean stop (kill -9, the OOM killer) leaves its program attached, and
//! every later attach would find the interface busy: [`detach_ours`] takes such a
//! program off, and [`attached_programs`] names what else holds an interface.

use std::ffi::{CStr, c_int};
use std::io;
use std::ptr::NonNull;

use super::ffi::{self, XdpMultiprog, XdpProgram};

/// The name the kernel knows the gateway's program by (its function in
/// `redirect.bpf.c`).
const OUR_NAME: &str = "linerate_xsk";

/// One XDP program attached to an interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttachedProgram {
    /// The kernel's id of the program (`bpftool prog show id N`).
    pub id: u32,
    /// Its name, as the kernel holds it.
    pub name: String,
}

impl AttachedProgram {
    /// Whether it is the program this crate attaches.
    pub fn is_ours(&self) -> bool {
        self.name == OUR_NAME
    }
}

/// The programs attached to `ifname` (in the calling thread's network namespace);
/// none when nothing is.
pub fn attached_programs(ifname: &str) -> io::Result<Vec<AttachedProgram>> {
    with_multiprog(ifname, |mp, _| {
        Ok(mp
            .map(|mp| programs(mp).into_iter().map(|(_, p)| p).collect())
            .unwrap_or_default())
    })
}

/// Takes every program of ours off `ifname`, leaving others attached; the ones
/// taken off. The caller must know no live process of ours uses them (see
/// `port_lock`).
pub fn detach_ours(ifname: &str) -> io::Result<Vec<AttachedProgram>> {
    with_multiprog(ifname, |mp, ifindex| {
        let Some(mp) = mp else {
            return Ok(Vec::new());
        };
        let ours: Vec<(NonNull<XdpProgram>, AttachedProgram)> = programs(mp)
            .into_iter()
            .filter(|(_, p)| p.is_ours())
            .collect();
        if ours.is_empty() {
            return Ok(Vec::new());
        }
        // SAFETY: `mp` is live (closed by with_multiprog after this closure).
        let legacy = unsafe { ffi::xdp_multiprog__is_legacy(mp.as_ptr()) };
        if legacy {
            // SAFETY: as above; a legacy attachment is its one program, ours.
            let ret = unsafe { ffi::xdp_multiprog__detach(mp.as_ptr()) };
            if ret != 0 {
                return Err(ffi::neg_errno(ret));
            }
        } else {
            // SAFETY: as above.
            let mode = unsafe { ffi::xdp_multiprog__attach_mode(mp.as_ptr()) };
            for (prog, _) in &ours {
                // SAFETY: `prog` belongs to `mp`, live; libxdp takes it out of the
                // dispatcher attached to `ifindex`.
                let ret = unsafe { ffi::xdp_program__detach(prog.as_ptr(), ifindex, mode, 0) };
                if ret != 0 {
                    return Err(ffi::neg_errno(ret));
                }
            }
        }
        Ok(ours.into_iter().map(|(_, p)| p).collect())
    })
}

/// Runs `f` with what `ifname` has attached (`None`: nothing) and its index.
fn with_multiprog<T>(
    ifname: &str,
    f: impl FnOnce(Option<NonNull<XdpMultiprog>>, c_int) -> io::Result<T>,
) -> io::Result<T> {
    let ifindex = crate::packet::if_index(ifname)?;
    // SAFETY: a plain query of the interface; the result is an object, NULL or an
    // error pointer, told apart by libxdp_get_error.
    let mp = unsafe { ffi::xdp_multiprog__get_from_ifindex(ifindex) };
    // SAFETY: libxdp_get_error only inspects the pointer value.
    let err = unsafe { ffi::libxdp_get_error(mp.cast()) };
    let Some(mp) = NonNull::new(mp).filter(|_| err == 0) else {
        if err == 0 || err == -c_long_of(libc::ENOENT) {
            return f(None, ifindex);
        }
        return Err(io::Error::from_raw_os_error(
            i32::try_from(-err).unwrap_or(libc::EINVAL),
        ));
    };
    let out = f(Some(mp), ifindex);
    // SAFETY: `mp` is live and closed only here; the programs `f` saw belong to it
    // and are not used after.
    unsafe { ffi::xdp_multiprog__close(mp.as_ptr()) };
    out
}

fn c_long_of(errno: i32) -> std::ffi::c_long {
    std::ffi::c_long::from(errno)
}

/// The programs of `mp`: a legacy attachment's one, or a dispatcher's each.
fn programs(mp: NonNull<XdpMultiprog>) -> Vec<(NonNull<XdpProgram>, AttachedProgram)> {
    let describe = |p: NonNull<XdpProgram>| {
        // SAFETY: `p` belongs to the live `mp`; the name is a NUL-terminated string
        // the program owns (or NULL).
        let (id, name) = unsafe {
            let name = ffi::xdp_program__name(p.as_ptr());
            let name = if name.is_null() {
                String::new()
            } else {
                CStr::from_ptr(name).to_string_lossy().into_owned()
            };
            (ffi::xdp_program__id(p.as_ptr()), name)
        };
        (p, AttachedProgram { id, name })
    };
    // SAFETY: `mp` is live for the whole call.
    unsafe {
        if ffi::xdp_multiprog__is_legacy(mp.as_ptr()) {
            return NonNull::new(ffi::xdp_multiprog__main_prog(mp.as_ptr()))
                .map(describe)
                .into_iter()
                .collect();
        }
        let mut out = Vec::new();
        let mut p = ffi::xdp_multiprog__next_prog(std::ptr::null(), mp.as_ptr());
        while let Some(prog) = NonNull::new(p) {
            out.push(describe(prog));
            p = ffi::xdp_multiprog__next_prog(prog.as_ptr(), mp.as_ptr());
        }
        out
    }
}
