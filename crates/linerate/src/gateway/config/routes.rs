//! `[[route]]` tables: the prefix, exactly one target, the port or tunnel (WireGuard
//! or ESP) it names,
//! and the next hop inside that port's networks.

use super::checks::Ctx;
use super::raw::{Item, RawEsp, RawFile, RawPort, RawRoute, RawWireguardItem};
use super::values::{addr_len, prefix};
use super::{Prefix, RouteConfig, RouteTarget};
use std::collections::HashMap;
use std::net::IpAddr;
use std::ops::Range;
use toml::Spanned;

/// The index of the deserialized item named `name`, or, when only a broken item has
/// that name, `Err(true)` (it has been reported already); `Err(false)`: no such name.
fn find<T>(items: &[Item<T>], name: &str, name_of: impl Fn(&T) -> &str) -> Result<usize, bool> {
    let mut broken = false;
    for (i, it) in items.iter().enumerate() {
        match it {
            Item::Ok { value, .. } if name_of(value) == name => return Ok(i),
            Item::Broken(b) if b.name.as_deref() == Some(name) => broken = true,
            _ => {}
        }
    }
    Err(broken)
}

fn names_of<T>(items: &[Item<T>], name_of: impl Fn(&T) -> &str) -> String {
    let names: Vec<&str> = items
        .iter()
        .filter_map(|it| match it {
            Item::Ok { value, .. } => Some(name_of(value)),
            Item::Broken(b) => b.name.as_deref(),
        })
        .collect();
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}

pub(super) fn route(
    cx: &mut Ctx<'_, '_>,
    r: &RawRoute,
    span: Range<usize>,
    i: usize,
    raw: &RawFile,
    seen: &mut HashMap<Prefix, usize>,
) -> Option<RouteConfig> {
    let path = format!("route[{i}]");
    let mut ok = true;
    let pfx = match prefix(r.prefix.get_ref()) {
        Ok(p) => {
            // A connected network or an own address is routed by its port; a
            // [[route]] for the same prefix would replace that route, whatever its
            // target, and cut the port's network off.
            if let Some(why) = raw.ports.iter().find_map(|port| match port {
                Item::Ok { value, .. } => own_route(p, value),
                Item::Broken(_) => None,
            }) {
                cx.err(r.prefix.span(), &format!("{path}.prefix"), why);
                ok = false;
            } else if let Some(first) = seen.get(&p) {
                cx.err(
                    r.prefix.span(),
                    &format!("{path}.prefix"),
                    format!("route[{first}] is a route to {p} already"),
                );
                ok = false;
            } else {
                seen.insert(p, i);
            }
            Some(p)
        }
        Err(m) => {
            cx.err(r.prefix.span(), &format!("{path}.prefix"), m);
            None
        }
    };

    // The targets given, in file order.
    let mut targets: Vec<(Range<usize>, &str)> = Vec::new();
    if let Some(p) = &r.port {
        targets.push((p.span(), "port"));
    }
    if let Some(t) = &r.tunnel {
        targets.push((t.span(), "tunnel"));
    }
    if let Some(b) = r.blackhole.as_ref().filter(|b| *b.get_ref()) {
        targets.push((b.span(), "blackhole"));
    }
    targets.sort_by_key(|(s, _)| s.start);
    const ONE_OF: &str = "port (with an optional via), tunnel, or blackhole = true";
    match targets.as_slice() {
        [] => {
            cx.err(span, &path, format!("no target: give one of {ONE_OF}"));
            return None;
        }
        [_] => {}
        [.., (last, _)] => {
            let given: Vec<&str> = targets.iter().map(|(_, n)| *n).collect();
            cx.err(
                last.clone(),
                &path,
                format!(
                    "more than one target ({}): give one of {ONE_OF}",
                    given.join(", ")
                ),
            );
            return None;
        }
    }
    if let (Some(v), None) = (&r.via, &r.port) {
        cx.err(
            v.span(),
            &format!("{path}.via"),
            "a next hop is for a route out of a port",
        );
        return None;
    }

    let target = if let Some(p) = &r.port {
        let name = p.get_ref();
        let key = format!("{path}.port");
        match find(&raw.ports, name, |p: &RawPort| p.name.get_ref()) {
            Err(broken) => {
                if !broken {
                    let msg = if find(&raw.wireguard, name, |w: &RawWireguardItem| {
                        w.wg.name.get_ref()
                    })
                    .is_ok()
                    {
                        format!("{name:?} is a wireguard interface: write tunnel = {name:?}")
                    } else {
                        format!(
                            "no port named {name:?} (ports: {})",
                            names_of(&raw.ports, |p: &RawPort| p.name.get_ref())
                        )
                    };
                    cx.err(p.span(), &key, msg);
                }
                return None;
            }
            Ok(port) => {
                let via = match &r.via {
                    None => None,
                    Some(v) => Some(via(cx, v, &format!("{path}.via"), pfx, &raw.ports, port)?),
                };
                RouteTarget::Port { port, via }
            }
        }
    } else if let Some(t) = &r.tunnel {
        let name = t.get_ref();
        let esp = find(&raw.esps, name, |e: &RawEsp| e.name.get_ref());
        match find(&raw.wireguard, name, |w: &RawWireguardItem| {
            w.wg.name.get_ref()
        }) {
            Ok(tunnel) => RouteTarget::Tunnel { tunnel },
            Err(_) if esp.is_ok() => RouteTarget::Esp {
                tunnel: esp.expect("checked"),
            },
            Err(broken) => {
                if !broken && esp != Err(true) {
                    let msg = if find(&raw.ports, name, |p: &RawPort| p.name.get_ref()).is_ok() {
                        format!("{name:?} is a port: write port = {name:?}")
                    } else {
                        format!(
                            "no tunnel named {name:?} (wireguard interfaces: {}; esp tunnels: {})",
                            names_of(&raw.wireguard, |w: &RawWireguardItem| w.wg.name.get_ref()),
                            names_of(&raw.esps, |e: &RawEsp| e.name.get_ref())
                        )
                    };
                    cx.err(t.span(), &format!("{path}.tunnel"), msg);
                }
                return None;
            }
        }
    } else {
        RouteTarget::Blackhole
    };
    let prefix = pfx?;
    ok.then_some(RouteConfig { prefix, target })
}

/// Why a route out of `port` to `p` is already there: `p` is one of the port's
/// networks (an attached route) or one of its addresses (a local route).
fn own_route(p: Prefix, port: &RawPort) -> Option<String> {
    let name = port.name.get_ref();
    for a in port.addresses.iter().flat_map(|a| a.get_ref().iter()) {
        let Ok((addr, len)) = addr_len(a.get_ref(), "") else {
            continue;
        };
        if (Prefix { addr, len }.network()) == p {
            return Some(format!(
                "{p} is a network of port {name:?}, routed without a [[route]]"
            ));
        }
        if p.addr == addr && p.len == if addr.is_ipv4() { 32 } else { 128 } {
            return Some(format!(
                "{addr} is the gateway's own address on port {name:?}"
            ));
        }
    }
    None
}

/// A route's next hop: an address of the prefix's family inside one of the port's
/// networks, not one of the gateway's own.
fn via(
    cx: &mut Ctx<'_, '_>,
    v: &Spanned<String>,
    key: &str,
    pfx: Option<Prefix>,
    ports: &[Item<RawPort>],
    port: usize,
) -> Option<IpAddr> {
    let Ok(addr) = v.get_ref().parse::<IpAddr>() else {
        cx.err(
            v.span(),
            key,
            format!("{:?} is not an IP address", v.get_ref()),
        );
        return None;
    };
    if let Some(p) = pfx
        && p.addr.is_ipv4() != addr.is_ipv4()
    {
        let fam = |a: IpAddr| if a.is_ipv4() { "IPv4" } else { "IPv6" };
        cx.err(
            v.span(),
            key,
            format!(
                "{addr} is {} but the prefix {p} is {}",
                fam(addr),
                fam(p.addr)
            ),
        );
        return None;
    }
    let Item::Ok { value: port, .. } = &ports[port] else {
        return None;
    };
    let own: Vec<(IpAddr, u8)> = port
        .addresses
        .iter()
        .flat_map(|a| a.get_ref().iter())
        .filter_map(|a| addr_len(a.get_ref(), "").ok())
        .collect();
    let name = port.name.get_ref();
    if own.iter().any(|&(a, _)| a == addr) {
        cx.err(
            v.span(),
            key,
            format!("{addr} is the gateway's own address on port {name:?}"),
        );
        return None;
    }
    let nets: Vec<Prefix> = own
        .iter()
        .map(|&(addr, len)| Prefix { addr, len }.network())
        .collect();
    if !nets
        .iter()
        .any(|n| Prefix { addr, len: n.len }.network() == *n)
    {
        let list: Vec<String> = nets.iter().map(|n| n.to_string()).collect();
        cx.err(
            v.span(),
            key,
            format!(
                "{addr} is not inside a network of port {name:?} ({})",
                list.join(", ")
            ),
        );
        return None;
    }
    Some(addr)
}
