//! `[esp.ike]` tables: the key exchange (IKEv2) that negotiates an `[[esp]]`
//! tunnel's SAs, with strongSwan's names for what a connection says: identities,
//! `auth = "psk"` with the secret in a file, `proposals` and `esp_proposals`,
//! `start_action`, `encap`, `dpd_delay`, `rekey_time` (the child SA's; the IKE
//! SA's is `ike_rekey_time`), and the retransmission settings of its
//! strongswan.conf. The tunnel's addresses and traffic selectors are the
//! connection's.

use super::IkeConfig;
use super::keyfile::read_psk_file;
use super::raw::RawIke;
use super::validate::Ctx;
use ikev2::config::parse_identity;
use ikev2::proposal::{Kind, Offer};
use std::net::IpAddr;
use toml::Spanned;

/// What a connection proposes when the file says nothing: every cipher and group
/// served, the strongest first, in one proposal each.
pub const DEFAULT_PROPOSAL: &str =
    "aes256gcm16-aes128gcm16-chacha20poly1305-prfsha384-prfsha256-x25519-ecp256-ecp384";
pub const DEFAULT_ESP_PROPOSAL: &str = "aes256gcm16-aes128gcm16-chacha20poly1305";
const DPD_DELAY: std::ops::RangeInclusive<i64> = 0..=86_400;
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

fn identity(
    cx: &mut Ctx<'_, '_>,
    id: Option<&Spanned<String>>,
    default: Option<IpAddr>,
    key: &str,
) -> Option<Option<String>> {
    match id {
        None => Some(default.map(|a| a.to_string())),
        Some(t) if t.get_ref() == "%any" => Some(None),
        Some(t) => match parse_identity(t.get_ref()) {
            Ok(_) => Some(Some(t.get_ref().clone())),
            Err(e) => {
                cx.err(
                    t.span(),
                    key,
                    format!("{e} (an IP address, a host name, user@domain, or %any)"),
                );
                None
            }
        },
    }
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
    let mut ok = true;
    if let Some(a) = &raw.auth
        && a.get_ref() != "psk"
    {
        cx.err(
            a.span(),
            &format!("{path}.auth"),
            format!(
                "{:?}: only \"psk\" (a pre-shared key) is served",
                a.get_ref()
            ),
        );
        ok = false;
    }
    let local_id = identity(
        cx,
        raw.local_id.as_ref(),
        local,
        &format!("{path}.local_id"),
    );
    let remote_id = identity(
        cx,
        raw.remote_id.as_ref(),
        remote,
        &format!("{path}.remote_id"),
    );
    let local_id = match local_id {
        Some(Some(id)) => Some(id),
        Some(None) => {
            cx.err(
                raw.local_id.as_ref().map_or(0..0, |s| s.span()),
                &format!("{path}.local_id"),
                "%any names a peer, not this gateway",
            );
            None
        }
        None => None,
    };
    let psk_key = format!("{path}.psk_file");
    let mut psk = None;
    if raw.psk_file.get_ref().is_empty() {
        cx.err(raw.psk_file.span(), &psk_key, "empty path");
    } else {
        let file = cx.base.join(raw.psk_file.get_ref());
        match read_psk_file(&file) {
            Ok(k) => psk = Some((file, k)),
            Err(e) => cx.err(raw.psk_file.span(), &psk_key, e),
        }
    }
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
    let (local_id, remote_id, (psk_file, psk)) = (local_id?, remote_id?, psk?);
    let (rekey_time, ike_rekey_time) = (rekey_time?, ike_rekey_time?);
    let (proposals, esp_proposals, start) = (ike?, esp?, start?);
    let (dpd_delay, retransmit_timeout, retransmit_tries) =
        (dpd_delay?, retransmit_timeout?, retransmit_tries?);
    ok.then_some(IkeConfig {
        local_id,
        remote_id,
        psk_file,
        psk,
        proposals,
        esp_proposals,
        start,
        encap: raw.encap.as_ref().is_some_and(|e| *e.get_ref()),
        dpd_delay,
        retransmit_timeout,
        retransmit_tries,
        rekey_time,
        ike_rekey_time,
    })
}
