//! What the kernel knows about a network interface that a gateway port takes over:
//! its Ethernet address and its MTU, asked with the classic interface ioctls on a
//! throwaway datagram socket (in the calling thread's network namespace).

use crate::{context, cvt};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// An `ifreq` for `ifname`, checked to fit the kernel's 16 bytes with its NUL.
fn ifreq(ifname: &str) -> io::Result<libc::ifreq> {
    let bytes = ifname.as_bytes();
    if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{ifname:?} is not an interface name"),
        ));
    }
    // SAFETY: ifreq is plain old data; all zeros is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, &s) in req.ifr_name.iter_mut().zip(bytes) {
        *d = s as libc::c_char;
    }
    Ok(req)
}

fn ioctl_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the fd is owned from here on.
    let fd = cvt(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: fd was just returned by socket(2) and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn ask(ifname: &str, request: libc::c_ulong, what: &str) -> io::Result<libc::ifreq> {
    let mut req = ifreq(ifname)?;
    let sock = ioctl_socket()?;
    // SAFETY: `req` is a valid ifreq the ioctl reads the name from and writes into.
    cvt(unsafe { libc::ioctl(sock.as_raw_fd(), request as _, &mut req) })
        .map_err(|e| context(e, format!("{ifname}: reading its {what}")))?;
    Ok(req)
}

/// The interface's Ethernet address.
pub fn mac_address(ifname: &str) -> io::Result<[u8; 6]> {
    let req = ask(ifname, libc::SIOCGIFHWADDR, "Ethernet address")?;
    // SAFETY: SIOCGIFHWADDR fills the ifru_hwaddr member of the union.
    let sa = unsafe { req.ifr_ifru.ifru_hwaddr };
    if sa.sa_family != libc::ARPHRD_ETHER {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{ifname} is not an Ethernet interface"),
        ));
    }
    let mut mac = [0u8; 6];
    for (m, &b) in mac.iter_mut().zip(&sa.sa_data[..6]) {
        *m = b as u8;
    }
    Ok(mac)
}

/// The interface's MTU.
pub fn mtu(ifname: &str) -> io::Result<u32> {
    let req = ask(ifname, libc::SIOCGIFMTU, "MTU")?;
    // SAFETY: SIOCGIFMTU fills the ifru_mtu member of the union.
    Ok(unsafe { req.ifr_ifru.ifru_mtu } as u32)
}

/// The interface's receive queues, as sysfs counts them (`/sys/class/net/IF/queues`,
/// which shows the calling process's network namespace as of its sysfs mount).
pub fn rx_queues(ifname: &str) -> io::Result<u32> {
    if ifname.is_empty() || ifname.contains('/') || ifname == "." || ifname == ".." {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{ifname:?} is not an interface name"),
        ));
    }
    let dir = std::fs::read_dir(format!("/sys/class/net/{ifname}/queues"))
        .map_err(|e| crate::context(e, format_args!("{ifname}: reading its queues")))?;
    let mut n = 0;
    for entry in dir {
        if entry?.file_name().to_string_lossy().starts_with("rx-") {
            n += 1;
        }
    }
    Ok(n)
}

/// Promiscuous mode on an interface for as long as this value lives: a packet
/// socket that receives nothing (protocol 0) holding the kernel's promiscuous
/// membership, which the kernel counts with everyone else's and drops when the
/// socket closes, even if the process dies. For an interface taken whole (a
/// cross-connected port) whose frames reach the gateway without a socket that
/// asks for them all (AF_XDP).
#[derive(Debug)]
pub struct Promiscuous {
    _fd: OwnedFd,
}

impl Promiscuous {
    /// Turns it on for `ifname` (in the calling thread's network namespace); `ip -d
    /// link` counts it under `promiscuity`.
    pub fn on(ifname: &str) -> io::Result<Promiscuous> {
        let ifindex = crate::packet::if_index(ifname)?;
        // SAFETY: plain socket(2); the fd is owned from here on.
        let fd =
            cvt(unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })
                .map_err(|e| {
                context(
                    e,
                    format_args!("{ifname}: a packet socket for promiscuous mode"),
                )
            })?;
        // SAFETY: fd was just returned by socket(2) and is owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mreq = libc::packet_mreq {
            mr_ifindex: ifindex,
            mr_type: libc::PACKET_MR_PROMISC as u16,
            mr_alen: 0,
            mr_address: [0; 8],
        };
        // SAFETY: `mreq` is a packet_mreq and the length passed is its size.
        let ret = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_ADD_MEMBERSHIP,
                (&raw const mreq).cast(),
                std::mem::size_of::<libc::packet_mreq>() as libc::socklen_t,
            )
        };
        cvt(ret).map_err(|e| context(e, format_args!("{ifname}: promiscuous mode")))?;
        Ok(Promiscuous { _fd: fd })
    }
}

/// The IP addresses the kernel holds on `ifname` (in the calling thread's network
/// namespace), from `getifaddrs`.
pub fn kernel_addresses(ifname: &str) -> io::Result<Vec<std::net::IpAddr>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head we free below with freeifaddrs.
    cvt(unsafe { libc::getifaddrs(&mut head) }).map_err(|e| context(e, "listing addresses"))?;
    let mut out = Vec::new();
    let mut p = head;
    while !p.is_null() {
        // SAFETY: `p` is an entry of the live list; its name is a NUL-terminated
        // string and its address, when not NULL, a sockaddr of the family it says
        // (sockaddr_in for AF_INET, sockaddr_in6 for AF_INET6).
        unsafe {
            let ifa = &*p;
            let name = std::ffi::CStr::from_ptr(ifa.ifa_name);
            if name.to_bytes() == ifname.as_bytes() && !ifa.ifa_addr.is_null() {
                match i32::from((*ifa.ifa_addr).sa_family) {
                    libc::AF_INET => {
                        let sin = &*ifa.ifa_addr.cast::<libc::sockaddr_in>();
                        out.push(
                            std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)).into(),
                        );
                    }
                    libc::AF_INET6 => {
                        let sin6 = &*ifa.ifa_addr.cast::<libc::sockaddr_in6>();
                        out.push(std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr).into());
                    }
                    _ => {}
                }
            }
            p = ifa.ifa_next;
        }
    }
    // SAFETY: `head` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_not_ethernet_and_names_are_checked() {
        assert!(mtu("lo").unwrap() >= 1280);
        let e = mac_address("lo").unwrap_err();
        assert!(e.to_string().contains("not an Ethernet"), "{e}");
        assert!(mac_address("").is_err());
        assert!(mac_address("sixteen-bytes-xx").is_err());
        let gone = mtu("lr-no-such-if").unwrap_err();
        assert!(
            gone.to_string()
                .starts_with("lr-no-such-if: reading its MTU"),
            "{gone}"
        );
        assert!(rx_queues("lo").unwrap() >= 1);
        assert!(rx_queues("../lo").is_err());
        let gone = rx_queues("lr-no-such-if").unwrap_err();
        assert!(
            gone.to_string()
                .starts_with("lr-no-such-if: reading its queues"),
            "{gone}"
        );
    }
}
