//! `[esp.ike]` tables: the key exchange (IKEv2) that negotiates an `[[esp]]`
//! tunnel's SAs, with strongSwan's names for what a connection says: how it
//! authenticates (`ike_auth`), `proposals` and `esp_proposals`,
//! `start_action`, `encap`, `dpd_delay`, `nat_keepalive` (strongSwan's
//! `keep_alive`), `rekey_time` (the child SA's; the IKE
//! SA's is `ike_rekey_time`), and the retransmission settings of its
//! strongswan.conf. The tunnel's addresses and traffic selectors are the
//! connection's.

use super::IkeConfig;
use super::checks::Ctx;
use super::raw::RawIke;
use ikev2::proposal::{Kind, Offer};
use std::net::IpAddr;
use toml::Spanned;

/// What a connection proposes when the file says nothing: every cipher and group
/// served, the strongest first, in one proposal each.
pub const DEFAULT_PROPOSAL: &str =
    "aes256gcm16-aes128gcm16-chacha20poly1305-prfsha384-prfsha256-x25519-ecp256-ecp384";
pub const DEFAULT_ESP_PROPOSAL: &str = "aes256gcm16-aes128gcm16-chacha20poly1305";
const DPD_DELAY: std::ops::RangeInclusive<i64> = 0..=86_400;
/// NATs forget a UDP mapping after 30 s or more (RFC 4787 REQ-5 asks 2 min); an
/// hour between keepalives keeps none alive, so more is surely a mistake.
const NAT_KEEPALIVE: std::ops::RangeInclusive<i64> = 0..=3600;
const RETRANSMIT_TIMEOUT: std::ops::RangeInclusive<i64> = 1..=60;
const RETRANSMIT_TRIES: std::ops::RangeInclusive<i64> = 1..=20;
/// Rekey periods: 0 (never), or 10 s to a week.
const REKEY_TIME: std::ops::RangeInclusive<i64> = 0..=604_800;
const MIN_REKEY: u32 = 10;
/// strongSwan's defaults: the child SA hourly, the IKE SA every four hours.
const DEFAULT_REKEY: u32 = 3600;
const DEFAULT_IKE_REKEY: u32 = 4 * 3600;

fn proposals(
    cx: &mut Ctx<'_, '_>,
    list: Option<&Spanned<Vec<Spanned<String>>>>,
    kind: Kind,
    key: &str,
    default: &str,
) -> Option<Vec<String>> {
    let Some(list) = list else {
        return Some(vec![default.to_string()]);
    };
    if list.get_ref().is_empty() {
        cx.err(list.span(), key, "empty: leave it out for the default");
        return None;
    }
    let mut ok = true;
    for (k, p) in list.get_ref().iter().enumerate() {
        if let Err(e) = Offer::parse(kind, p.get_ref()) {
            cx.err(p.span(), &format!("{key}[{k}]"), e);
            ok = false;
        }
    }
    ok.then(|| list.get_ref().iter().map(|p| p.get_ref().clone()).collect())
}

/// Checks `[esp.ike]` of the tunnel at `path` between `local` and `remote`.
pub(super) fn ike(
    cx: &mut Ctx<'_, '_>,
    raw: &RawIke,
    path: &str,
    local: Option<IpAddr>,
    remote: Option<IpAddr>,
) -> Option<IkeConfig> {
    let path = format!("{path}.ike");
    let ok = true;
    let auth = super::ike_auth::auth(cx, raw, &path, local, remote);
    let ike = proposals(
        cx,
        raw.proposals.as_ref(),
        Kind::Ike,
        &format!("{path}.proposals"),
        DEFAULT_PROPOSAL,
    );
    let esp = proposals(
        cx,
        raw.esp_proposals.as_ref(),
        Kind::Esp,
        &format!("{path}.esp_proposals"),
        DEFAULT_ESP_PROPOSAL,
    );
    let start = match &raw.start_action {
        None => Some(false),
        Some(s) => match s.get_ref().as_str() {
            "start" => Some(true),
            "none" => Some(false),
            other => {
                cx.err(
                    s.span(),
                    &format!("{path}.start_action"),
                    format!("{other:?}: \"start\" (initiate, and again whenever the SA closes) or \"none\" (wait for the peer)"),
                );
                None
            }
        },
    };
    let mut int = |v: Option<&Spanned<i64>>, range, key: &str, default: u32| match v {
        None => Some(default),
        Some(v) => cx.int::<u32>(v, range, &format!("{path}.{key}")),
    };
    let dpd_delay = int(raw.dpd_delay.as_ref(), DPD_DELAY, "dpd_delay", 30);
    let nat_keepalive = int(
        raw.nat_keepalive.as_ref(),
        NAT_KEEPALIVE,
        "nat_keepalive",
        20,
    );
    let retransmit_timeout = int(
        raw.retransmit_timeout.as_ref(),
        RETRANSMIT_TIMEOUT,
        "retransmit_timeout",
        4,
    );
    let retransmit_tries = int(
        raw.retransmit_tries.as_ref(),
        RETRANSMIT_TRIES,
        "retransmit_tries",
        5,
    );
    let mut rekey = |v: Option<&Spanned<i64>>, key: &str, default: u32| match v {
        None => Some(default),
        Some(v) => match cx.int::<u32>(v, REKEY_TIME, &format!("{path}.{key}")) {
            Some(n) if n != 0 && n < MIN_REKEY => {
                cx.err(
                    v.span(),
                    &format!("{path}.{key}"),
                    format!("{n} s: at least {MIN_REKEY} s (0: this end never rekeys)"),
                );
                None
            }
            other => other,
        },
    };
    let rekey_time = rekey(raw.rekey_time.as_ref(), "rekey_time", DEFAULT_REKEY);
    let ike_rekey_time = rekey(
        raw.ike_rekey_time.as_ref(),
        "ike_rekey_time",
        DEFAULT_IKE_REKEY,
    );
    let auth = auth?;
    let (rekey_time, ike_rekey_time) = (rekey_time?, ike_rekey_time?);
    let (proposals, esp_proposals, start) = (ike?, esp?, start?);
    let (dpd_delay, nat_keepalive, retransmit_timeout, retransmit_tries) = (
        dpd_delay?,
        nat_keepalive?,
        retransmit_timeout?,
        retransmit_tries?,
    );
    ok.then_some(IkeConfig {
        auth,
        proposals,
        esp_proposals,
        start,
        encap: raw.encap.as_ref().is_some_and(|e| *e.get_ref()),
        dpd_delay,
        nat_keepalive,
        retransmit_timeout,
        retransmit_tries,
        rekey_time,
        ike_rekey_time,
    })
}
