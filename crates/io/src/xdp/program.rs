//! The XDP program that steers the gateway's frames to the port's socket
//! (`redirect.bpf.c`, compiled by `build.rs` and embedded here), attached through
//! libxdp and detached again on drop.
//!
//! Attaching tries native mode first and falls back to generic (SKB) mode. With a
//! bpffs at `/sys/fs/bpf`, libxdp runs the program from its multi-program dispatcher,
//! so other libxdp programs on the interface stay; without one it attaches the
//! program alone (and says so on stderr).

use std::ffi::{CStr, c_int, c_uint};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::ptr::NonNull;

use super::XdpMode;
use super::ffi::{self, BpfObject, XdpProgram};
use crate::context;

/// The object file, 8-byte aligned for libbpf's ELF reader.
#[repr(C, align(8))]
struct Aligned<T: ?Sized>(T);

static OBJECT: &Aligned<[u8]> =
    &Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/redirect.bpf.o")));
/// The same program that also puts back a VLAN tag the driver took out of a frame
/// (loaded bound to the device: it reads the device's receive metadata).
static OBJECT_VLAN: &Aligned<[u8]> = &Aligned(*include_bytes!(concat!(
    env!("OUT_DIR"),
    "/redirect_vlan.bpf.o"
)));

/// The program's section and its map, as named in `redirect.bpf.c`.
const SECTION: &CStr = c"xdp";
const MAP: &CStr = c"xsks";
const SETTINGS: &CStr = c"settings";
/// The object's name inside libbpf (and in `bpftool prog` listings).
const OBJECT_NAME: &CStr = c"linerate_xsk";
/// The program's function.
const PROGRAM_NAME: &CStr = c"linerate_xsk";

/// The program, loaded and attached to one interface.
#[derive(Debug)]
pub(super) struct Program {
    obj: NonNull<BpfObject>,
    prog: NonNull<XdpProgram>,
    ifindex: c_int,
    /// `None` until attached; the mode it was attached in after.
    mode: Option<XdpMode>,
    /// The network namespace the interface lives in, for detaching from the right one.
    netns: File,
    /// Whether it puts back the VLAN tags the driver takes out of frames.
    restores_vlan_tags: bool,
    /// Whether it was loaded to take frames in parts (`BPF_F_XDP_HAS_FRAGS`).
    fragments: bool,
}

// SAFETY: the libbpf and libxdp objects belong to this value alone and are only used
// from `Drop` and `&self` reads of a map fd; neither library ties them to a thread.
unsafe impl Send for Program {}
// SAFETY: `&self` methods only read the map's fd.
unsafe impl Sync for Program {}

impl Program {
    /// Loads the program and attaches it to `ifindex` (named `ifname`, in the calling
    /// thread's namespace): native mode unless `skb_only`, generic mode when native is
    /// refused.
    /// In native mode the program that puts VLAN tags back is tried first (it needs
    /// a kernel and driver that give XDP the receive metadata, Linux 6.8 on).
    /// With `fragments` it is loaded to take frames in parts (multi-buffer XDP).
    pub(super) fn attach(
        ifname: &str,
        ifindex: c_int,
        skb_only: bool,
        fragments: bool,
    ) -> io::Result<Program> {
        let step = |what: String| move |e: io::Error| context(e, format_args!("{ifname}: {what}"));
        let native_err = if skb_only {
            None
        } else {
            if let Ok(p) = Program::attach_in(ifindex, XdpMode::Native, true, fragments) {
                return Ok(p);
            }
            match Program::attach_in(ifindex, XdpMode::Native, false, fragments) {
                Ok(p) => return Ok(p),
                Err(e) => Some(e),
            }
        };
        Program::attach_in(ifindex, XdpMode::Skb, false, fragments).map_err(match native_err {
            Some(n) => step(format!(
                "attaching the XDP program (native mode: {n}; generic mode)"
            )),
            None => step("attaching the XDP program (generic mode)".to_owned()),
        })
    }

    /// A fresh copy of the program (the one that puts VLAN tags back, bound to the
    /// device, with `vlan`), attached in `mode`. Each try starts from a new object,
    /// so a failed attach leaves nothing of it behind for the next.
    fn attach_in(
        ifindex: c_int,
        mode: XdpMode,
        vlan: bool,
        fragments: bool,
    ) -> io::Result<Program> {
        let object = if vlan { OBJECT_VLAN } else { OBJECT };
        let netns = File::open("/proc/thread-self/ns/net")
            .map_err(|e| context(e, "opening the thread's network namespace"))?;
        // SAFETY: the object is a static buffer libbpf only reads (and copies what it
        // keeps); the name is NUL-terminated and static.
        let obj = unsafe {
            ffi::lr_bpf_object_open_mem(
                object.0.as_ptr().cast(),
                object.0.len(),
                OBJECT_NAME.as_ptr(),
            )
        };
        let obj = NonNull::new(obj).ok_or_else(|| {
            context(
                io::Error::last_os_error(),
                "opening the embedded XDP program",
            )
        })?;
        // SAFETY: `obj` is a live object; SECTION is NUL-terminated and static. The result
        // is a program, NULL or an error pointer, told apart by libxdp_get_error.
        let prog = unsafe { ffi::xdp_program__from_bpf_obj(obj.as_ptr(), SECTION.as_ptr()) };
        // SAFETY: libxdp_get_error only inspects the pointer value.
        let err = unsafe { ffi::libxdp_get_error(prog.cast()) };
        let Some(prog) = NonNull::new(prog).filter(|_| err == 0) else {
            // SAFETY: `obj` is live and nothing else refers to it.
            unsafe { ffi::bpf_object__close(obj.as_ptr()) };
            let errno = i32::try_from(-err).unwrap_or(libc::EINVAL);
            return Err(context(
                io::Error::from_raw_os_error(errno),
                "finding the program in the embedded XDP object",
            ));
        };
        // From here Drop closes both (and detaches once `mode` is set).
        let mut program = Program {
            obj,
            prog,
            ifindex,
            mode: None,
            netns,
            restores_vlan_tags: vlan,
            fragments,
        };
        if fragments {
            // SAFETY: `prog` is live and not loaded yet; this only sets the flag the
            // load will ask the kernel for (and libxdp's dispatcher then takes it).
            let ret =
                unsafe { ffi::xdp_program__set_xdp_frags_support(program.prog.as_ptr(), true) };
            if ret != 0 {
                return Err(ffi::neg_errno(ret));
            }
        }
        if vlan {
            // SAFETY: `obj` is live and not loaded yet; the name is NUL-terminated
            // and static; the program it returns belongs to `obj`.
            let bpf_prog = unsafe {
                ffi::bpf_object__find_program_by_name(obj.as_ptr(), PROGRAM_NAME.as_ptr())
            };
            let bpf_prog = NonNull::new(bpf_prog).ok_or_else(|| {
                io::Error::new(io::ErrorKind::NotFound, "no program in the VLAN object")
            })?;
            let index = c_uint::try_from(ifindex)
                .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
            // SAFETY: as above; both only set what the load will ask the kernel for.
            let ret = unsafe {
                ffi::bpf_program__set_ifindex(bpf_prog.as_ptr(), index);
                let flags = ffi::bpf_program__flags(bpf_prog.as_ptr());
                ffi::bpf_program__set_flags(
                    bpf_prog.as_ptr(),
                    flags | ffi::BPF_F_XDP_DEV_BOUND_ONLY,
                )
            };
            if ret != 0 {
                return Err(ffi::neg_errno(ret));
            }
        }
        // SAFETY: `prog` is live; libxdp loads it (from `obj`) and attaches it.
        let ret = unsafe {
            ffi::xdp_program__attach(program.prog.as_ptr(), ifindex, attach_mode(mode), 0)
        };
        if ret != 0 {
            return Err(ffi::neg_errno(ret));
        }
        program.mode = Some(mode);
        Ok(program)
    }

    /// Whether frames reach the sockets with the VLAN tags a driver took out of
    /// them put back.
    pub(super) fn restores_vlan_tags(&self) -> bool {
        self.restores_vlan_tags
    }

    /// Whether it takes frames in parts.
    pub(super) fn takes_fragments(&self) -> bool {
        self.fragments
    }

    /// The mode the program runs in.
    pub(super) fn mode(&self) -> XdpMode {
        self.mode.expect("a Program is returned only once attached")
    }

    /// The XSKMAP the program redirects through (owned by the object).
    pub(super) fn map_fd(&self) -> io::Result<RawFd> {
        self.map_fd_of(MAP)
    }

    fn map_fd_of(&self, name: &CStr) -> io::Result<RawFd> {
        // SAFETY: `obj` is live and loaded (attach loads it); `name` is NUL-terminated.
        let fd = unsafe { ffi::bpf_object__find_map_fd_by_name(self.obj.as_ptr(), name.as_ptr()) };
        if fd < 0 {
            return Err(ffi::neg_errno(fd));
        }
        Ok(fd)
    }

    /// Has the program redirect every frame (true) or only ARP, IPv4 and IPv6.
    pub(super) fn set_take_all(&self, on: bool) -> io::Result<()> {
        let fd = self.map_fd_of(SETTINGS)?;
        let (key, value) = (0u32, u32::from(on));
        // SAFETY: `fd` is the object's array map of u32 keys and values; both
        // pointers are to live u32s. BPF_ANY is 0.
        let ret = unsafe {
            ffi::bpf_map_update_elem(fd, (&raw const key).cast(), (&raw const value).cast(), 0)
        };
        if ret != 0 {
            return Err(ffi::neg_errno(ret));
        }
        Ok(())
    }

    /// Detaches the program, from the namespace it was attached in.
    fn detach(&mut self, mode: XdpMode) -> io::Result<()> {
        let run = || {
            // SAFETY: `prog` is live and attached to `ifindex` in `mode`.
            let ret = unsafe {
                ffi::xdp_program__detach(self.prog.as_ptr(), self.ifindex, attach_mode(mode), 0)
            };
            if ret != 0 {
                Err(ffi::neg_errno(ret))
            } else {
                Ok(())
            }
        };
        in_netns(&self.netns, run)?
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        if let Some(mode) = self.mode.take() {
            if let Err(e) = self.detach(mode) {
                eprintln!(
                    "warning: could not detach the XDP program from ifindex {}: {e}",
                    self.ifindex
                );
            }
        }
        // SAFETY: both are live and closed only here, the program first (it refers to
        // the object, which it does not own: it came from xdp_program__from_bpf_obj).
        unsafe {
            ffi::xdp_program__close(self.prog.as_ptr());
            ffi::bpf_object__close(self.obj.as_ptr());
        }
    }
}

fn attach_mode(mode: XdpMode) -> c_uint {
    match mode {
        XdpMode::Native => ffi::XDP_MODE_NATIVE,
        XdpMode::Skb => ffi::XDP_MODE_SKB,
    }
}

/// Runs `f` with the calling thread in network namespace `ns` (entering it and coming
/// back only when the thread is elsewhere: interface numbers are per namespace).
fn in_netns<T>(ns: &File, f: impl FnOnce() -> T) -> io::Result<T> {
    let here = File::open("/proc/thread-self/ns/net")
        .map_err(|e| context(e, "opening the thread's network namespace"))?;
    let (a, b) = (ns.metadata()?, here.metadata()?);
    if (a.dev(), a.ino()) == (b.dev(), b.ino()) {
        return Ok(f());
    }
    // SAFETY: setns takes an fd we hold open; CLONE_NEWNET switches only this thread's
    // network namespace, and it is switched back below.
    crate::cvt(unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) })
        .map_err(|e| context(e, "entering the interface's network namespace"))?;
    let out = f();
    // SAFETY: as above, back to the namespace the thread came from.
    let back = crate::cvt(unsafe { libc::setns(here.as_raw_fd(), libc::CLONE_NEWNET) });
    if let Err(e) = back {
        // The thread would go on in the wrong namespace: not something to continue from.
        panic!("could not return to the thread's network namespace: {e}");
    }
    Ok(out)
}
