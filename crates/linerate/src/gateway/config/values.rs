//! Values as the file writes them: names, addresses with a prefix length, prefixes,
//! socket addresses.

use super::Prefix;
use std::net::{IpAddr, SocketAddr};

/// A name of a port or a WireGuard interface: `[a-z0-9_-]{1,15}`.
pub(super) fn name_ok(s: &str) -> bool {
    (1..=15).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// An interface name the kernel accepts: 1 to 15 bytes, no '/', no whitespace.
pub(super) fn interface_ok(s: &str) -> bool {
    (1..=15).contains(&s.len())
        && !s.contains('/')
        && !s.chars().any(|c| c.is_whitespace() || c.is_control())
        && s != "."
        && s != ".."
}

/// `ADDR/LEN`, the length within the family's width; `what` names it in errors.
pub(super) fn addr_len(s: &str, what: &str) -> Result<(IpAddr, u8), String> {
    let bad = |why: String| Err(format!("{s:?} is not {what} ({why})"));
    let Some((a, l)) = s.split_once('/') else {
        return bad("no /LENGTH".to_string());
    };
    let Ok(addr) = a.parse::<IpAddr>() else {
        return bad(format!("{a:?} is not an IP address"));
    };
    let Ok(len) = l.parse::<u8>() else {
        return bad(format!("{l:?} is not a prefix length"));
    };
    let (max, fam) = if addr.is_ipv4() {
        (32, "IPv4")
    } else {
        (128, "IPv6")
    };
    if len > max {
        return bad(format!("{fam} prefix lengths go up to {max}"));
    }
    Ok((addr, len))
}

/// A prefix with its host bits zero.
pub(super) fn prefix(s: &str) -> Result<Prefix, String> {
    let (addr, len) = addr_len(s, "a prefix")?;
    let p = Prefix { addr, len };
    let net = p.network();
    if net != p {
        return Err(format!("{s:?} has host bits set (the prefix is {net})"));
    }
    Ok(p)
}

/// `ip:port` or `[v6]:port`, no host names, port not 0.
pub(super) fn socket_addr(s: &str) -> Result<SocketAddr, String> {
    match s.parse::<SocketAddr>() {
        Ok(a) if a.port() == 0 => Err(format!("{s:?}: port 0")),
        Ok(a) => Ok(a),
        Err(_) => Err(format!(
            "{s:?} is not ip:port or [ipv6]:port (host names are not resolved)"
        )),
    }
}
