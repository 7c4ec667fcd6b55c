//! Declarations for the C side: the ring shim built from `shim.c` (see `build.rs`) and
//! the few libxdp and libbpf calls made directly. Every type the C side owns is opaque
//! here; only `struct xdp_desc` (kernel ABI, from `libc`) crosses by value.

use std::ffi::{c_char, c_int, c_long, c_uint, c_void};
use std::marker::{PhantomData, PhantomPinned};

pub(super) use libc::xdp_desc as XdpDesc;

macro_rules! opaque {
    ($($(#[$doc:meta])* $name:ident;)*) => {$(
        $(#[$doc])*
        #[repr(C)]
        pub(super) struct $name {
            _private: [u8; 0],
            _not_send_or_unpin: PhantomData<(*mut u8, PhantomPinned)>,
        }
    )*};
}

opaque! {
    /// The shim's `struct lr_xsk_rings`: fill, completion, RX and TX ring state.
    Rings;
    /// libxdp's `struct xsk_umem`.
    XskUmem;
    /// libxdp's `struct xsk_socket`.
    XskSocket;
    /// libbpf's `struct bpf_object`.
    BpfObject;
    /// libxdp's `struct xdp_program`.
    XdpProgram;
    /// libxdp's `struct xdp_multiprog`: what is attached to an interface.
    XdpMultiprog;
    /// libbpf's `struct bpf_program`.
    BpfProgram;
}

/// `BPF_F_XDP_DEV_BOUND_ONLY` (linux/bpf.h, Linux 6.3): a program loaded for one
/// device, which may then read that device's receive metadata.
pub(super) const BPF_F_XDP_DEV_BOUND_ONLY: u32 = 1 << 6;

/// `enum xdp_attach_mode` (xdp/libxdp.h).
pub(super) const XDP_MODE_NATIVE: c_uint = 1;
/// `enum xdp_attach_mode` (xdp/libxdp.h).
pub(super) const XDP_MODE_SKB: c_uint = 2;

unsafe extern "C" {
    // The shim (shim.c).
    pub(super) fn lr_xsk_rings_new() -> *mut Rings;
    pub(super) fn lr_xsk_rings_free(r: *mut Rings);
    pub(super) fn lr_xsk_umem_create(
        umem: *mut *mut XskUmem,
        r: *mut Rings,
        area: *mut c_void,
        size: u64,
        fill_size: u32,
        comp_size: u32,
        frame_size: u32,
        headroom: u32,
    ) -> c_int;
    pub(super) fn lr_xsk_socket_create(
        xsk: *mut *mut XskSocket,
        r: *mut Rings,
        umem: *mut XskUmem,
        ifname: *const c_char,
        queue: u32,
        rx_size: u32,
        tx_size: u32,
        bind_flags: u16,
    ) -> c_int;
    pub(super) fn lr_xsk_fill(r: *mut Rings, bufs: *const u32, n: u32, shift: u32) -> u32;
    pub(super) fn lr_xsk_complete(r: *mut Rings, bufs: *mut u32, n: u32, shift: u32) -> u32;
    pub(super) fn lr_xsk_recv(r: *mut Rings, descs: *mut XdpDesc, n: u32) -> u32;
    pub(super) fn lr_xsk_send(r: *mut Rings, descs: *const XdpDesc, n: u32) -> u32;
    pub(super) fn lr_xsk_tx_free(r: *mut Rings, n: u32) -> u32;
    pub(super) fn lr_xsk_tx_needs_wakeup(r: *const Rings) -> c_int;
    pub(super) fn lr_xsk_fill_needs_wakeup(r: *const Rings) -> c_int;
    pub(super) fn lr_bpf_object_open_mem(
        buf: *const c_void,
        size: usize,
        name: *const c_char,
    ) -> *mut BpfObject;

    // libxdp: AF_XDP sockets.
    pub(super) fn xsk_socket__fd(xsk: *const XskSocket) -> c_int;
    pub(super) fn xsk_socket__update_xskmap(xsk: *mut XskSocket, map_fd: c_int) -> c_int;
    pub(super) fn xsk_socket__delete(xsk: *mut XskSocket);
    pub(super) fn xsk_umem__delete(umem: *mut XskUmem) -> c_int;

    // libxdp: XDP programs.
    pub(super) fn xdp_program__from_bpf_obj(
        obj: *mut BpfObject,
        section_name: *const c_char,
    ) -> *mut XdpProgram;
    pub(super) fn xdp_program__attach(
        prog: *mut XdpProgram,
        ifindex: c_int,
        mode: c_uint,
        flags: c_uint,
    ) -> c_int;
    pub(super) fn xdp_program__detach(
        prog: *mut XdpProgram,
        ifindex: c_int,
        mode: c_uint,
        flags: c_uint,
    ) -> c_int;
    pub(super) fn xdp_program__close(prog: *mut XdpProgram);
    pub(super) fn xdp_program__set_xdp_frags_support(prog: *mut XdpProgram, frags: bool) -> c_int;
    pub(super) fn xdp_program__name(prog: *const XdpProgram) -> *const c_char;
    pub(super) fn xdp_program__id(prog: *const XdpProgram) -> u32;

    // libxdp: what an interface has attached.
    pub(super) fn xdp_multiprog__get_from_ifindex(ifindex: c_int) -> *mut XdpMultiprog;
    pub(super) fn xdp_multiprog__close(mp: *mut XdpMultiprog);
    pub(super) fn xdp_multiprog__detach(mp: *mut XdpMultiprog) -> c_int;
    pub(super) fn xdp_multiprog__attach_mode(mp: *const XdpMultiprog) -> c_uint;
    pub(super) fn xdp_multiprog__main_prog(mp: *const XdpMultiprog) -> *mut XdpProgram;
    pub(super) fn xdp_multiprog__next_prog(
        prog: *const XdpProgram,
        mp: *const XdpMultiprog,
    ) -> *mut XdpProgram;
    pub(super) fn xdp_multiprog__is_legacy(mp: *const XdpMultiprog) -> bool;
    pub(super) fn libxdp_get_error(ptr: *const c_void) -> c_long;

    // libbpf.
    pub(super) fn bpf_object__find_map_fd_by_name(
        obj: *const BpfObject,
        name: *const c_char,
    ) -> c_int;
    pub(super) fn bpf_object__close(obj: *mut BpfObject);
    pub(super) fn bpf_object__find_program_by_name(
        obj: *const BpfObject,
        name: *const c_char,
    ) -> *mut BpfProgram;
    pub(super) fn bpf_program__set_ifindex(prog: *mut BpfProgram, ifindex: c_uint);
    pub(super) fn bpf_program__flags(prog: *const BpfProgram) -> u32;
    pub(super) fn bpf_program__set_flags(prog: *mut BpfProgram, flags: u32) -> c_int;
    pub(super) fn bpf_map_update_elem(
        fd: c_int,
        key: *const c_void,
        value: *const c_void,
        flags: u64,
    ) -> c_int;
}

/// The error behind a libxdp/libbpf return value that is a negative errno.
pub(super) fn neg_errno(ret: c_int) -> std::io::Error {
    std::io::Error::from_raw_os_error(ret.checked_neg().unwrap_or(libc::EINVAL))
}
