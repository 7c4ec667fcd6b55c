#!/usr/bin/env bash
# Interoperability tests: IMPL_A against each IMPL_B, in two network
# namespaces joined by a veth pair.
#
#   tests/net/interop.sh                  every scenario
#   tests/net/interop.sh roaming restart  only those
#   tests/net/interop.sh -l               list the scenarios
#
#   IMPL_A  the implementation under test (default target/release/linerate)
#   IMPL_B  the peers, space-separated (default "wireguard-go boringtun-cli")
#   SCENARIO_TIMEOUT  seconds one scenario may take (default 300)
#
# Any implementation that runs as `IMPL -f IFACE` and serves the UAPI socket
# at /var/run/wireguard/IFACE.sock can be IMPL_A or IMPL_B. Each scenario runs
# in its own process with its own namespaces, removed when it ends. Prints a
# table and, last, "N passed, M failed"; exits non-zero if any failed.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=tests/net/lib.sh
. tests/net/lib.sh

IMPL_A=${IMPL_A:-target/release/linerate}
IMPL_B=${IMPL_B:-wireguard-go boringtun-cli}
SCENARIO_TIMEOUT=${SCENARIO_TIMEOUT:-300}

SCENARIOS=(a_initiates_v4 a_initiates_v6 b_initiates_v4 b_initiates_v6 tcp
  roaming restart syncconf peer_remove wg_quick lifecycle)

# ---------------------------------------------------------------------------
# Scenarios. Each runs in a fresh process: $IMPL_A and $IMPL_B are resolved
# paths, and any failing command ends it (set -e), the trap cleans up.

# initiation SIDE OUTER: SIDE pings first; only it knows the other's endpoint.
initiation() {
  local who=$1 outer=$2 ns_i ns_r if_r pub_i to4 to6 back4 back6
  pair_up "$IMPL_A" "$IMPL_B" "$outer" "$who"
  if [ "$who" = a ]; then
    ns_i=$NS_A ns_r=$NS_B if_r=$IF_B pub_i=$PUB_A to4=$I4_B to6=$I6_B back4=$I4_A back6=$I6_A
  else
    ns_i=$NS_B ns_r=$NS_A if_r=$IF_A pub_i=$PUB_B to4=$I4_A to6=$I6_A back4=$I4_B back6=$I6_B
  fi
  assert "$who pings first: inner IPv4 over outer IPv$outer" ping_ok "$ns_i" "$to4"
  assert "$who pings: inner IPv6 over outer IPv$outer" ping_ok "$ns_i" "$to6"
  assert_eq "the responder learned the initiator's endpoint" \
    "$pub_i	$(endpoint_of "$who" "$outer")" "$(wg_ns "$ns_r" show "$if_r" endpoints)"
  assert "the responder pings back: inner IPv4" ping_ok "$ns_r" "$back4"
  assert "the responder pings back: inner IPv6" ping_ok "$ns_r" "$back6"
}
scenario_a_initiates_v4() { initiation a 4; }
scenario_a_initiates_v6() { initiation a 6; }
scenario_b_initiates_v4() { initiation b 4; }
scenario_b_initiates_v6() { initiation b 6; }

# 100 MiB each way through the tunnel, then the counters on side a.
scenario_tcp() {
  pair_up "$IMPL_A" "$IMPL_B" 4 a
  assert "tunnel up" ping_ok "$NS_A" "$I4_B"
  make_payload 100
  assert "100 MiB a -> b over inner IPv4, sha256 matches" xfer "$NS_A" "$NS_B" "$I4_B"
  assert "100 MiB b -> a over inner IPv6, sha256 matches" xfer "$NS_B" "$NS_A" "$I6_A"

  local peer rx tx hs now
  read -r peer rx tx < <(wg_ns "$NS_A" show "$IF_A" transfer)
  log "    a: wg show transfer: rx $rx, tx $tx"
  assert "a: transfer counts both 100 MiB payloads" \
    test "$peer" = "$PUB_B" -a "${rx:-0}" -ge "$PAYLOAD_BYTES" -a "${tx:-0}" -ge "$PAYLOAD_BYTES"
  read -r peer hs < <(wg_ns "$NS_A" show "$IF_A" latest-handshakes)
  now=$(date +%s)
  log "    a: wg show latest-handshakes: $hs ($((now - ${hs:-0})) s ago)"
  assert "a: latest handshake is recent" test "${hs:-0}" -gt $((now - 180)) -a "${hs:-0}" -le $((now + 5))
}

# Side a moves to a new underlay address (and port) in the middle of a transfer.
scenario_roaming() {
  pair_up "$IMPL_A" "$IMPL_B" 4 a
  assert "tunnel up" ping_ok "$NS_A" "$I4_B"
  make_payload 100
  xfer_start "$NS_A" "$NS_B" "$I4_B" 20 # about 5 s at 20 MB/s
  sleep 1.5
  assert "transfer still running when a moves" kill -0 "$XFER_SEND_PID"
  ip -n "$NS_A" addr add "$U4_A_ROAM/24" dev "$VETH_A"
  ip -n "$NS_A" addr del "$U4_A/24" dev "$VETH_A"
  local port=$((PORT_A + 10))
  if ! wg_ns "$NS_A" set "$IF_A" listen-port "$port"; then
    log "    (a does not change listen-port; roaming by address only)"
    port=$PORT_A
  fi
  log "    a moved from $U4_A:$PORT_A to $U4_A_ROAM:$port"
  assert "transfer completes across the move, sha256 matches" xfer_finish
  assert_eq "b's endpoint for a is the new address" \
    "$PUB_A	$U4_A_ROAM:$port" "$(wg_ns "$NS_B" show "$IF_B" endpoints)"
  assert "ping a -> b after the move" ping_ok "$NS_A" "$I4_B"
  assert "ping b -> a after the move" ping_ok "$NS_B" "$I4_A"
}

# Side b dies (SIGKILL) and comes back with the same keys and configuration.
scenario_restart() {
  pair_up "$IMPL_A" "$IMPL_B" 4 both
  assert "tunnel up" ping_ok "$NS_A" "$I4_B"
  kill -KILL "$PID_B"
  wait "$PID_B" 2>/dev/null || true
  wait_until 5 "b's interface to go" eval "! ip -n '$NS_B' link show '$IF_B'"
  # Clear the dead instance's socket file as a supervisor would: wireguard-go's own
  # stale-socket cleanup now and then fails (it finds the file gone when it goes to
  # remove it, and exits). How b restarts is not under test; a's recovery is.
  rm -f -- "$WG_SOCK_DIR/$IF_B.sock"
  impl_start "$NS_B" "$IMPL_B" "$IF_B"
  PID_B=$IMPL_PID
  side_configure b "$(endpoint_of a 4)"
  local t0=$EPOCHREALTIME
  assert "b -> a ping answered within 5 s of the restart" ping_ok "$NS_B" "$I4_A" 1 5
  log "    first reply after $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }') s"
  assert "a -> b ping (inner IPv4)" ping_ok "$NS_A" "$I4_B" 3 5
  assert "a -> b ping (inner IPv6)" ping_ok "$NS_A" "$I6_B" 3 5
}

# wg showconf | wg syncconf leaves a's configuration as it was.
scenario_syncconf() {
  pair_up "$IMPL_A" "$IMPL_B" 4 both
  assert "tunnel up" ping_ok "$NS_A" "$I4_B"
  local c="$LR_TMP/conf"
  wg_ns "$NS_A" showconf "$IF_A" >"$c.1"
  wg_ns "$NS_A" syncconf "$IF_A" "$c.1"
  wg_ns "$NS_A" showconf "$IF_A" >"$c.2"
  assert "showconf -> syncconf -> showconf is unchanged" diff -u "$c.1" "$c.2"
  # syncconf also adds and removes peers.
  local extra
  extra=$(wg genkey | wg pubkey)
  { cat "$c.1"; printf '\n[Peer]\nPublicKey = %s\nAllowedIPs = 198.19.0.99/32\n' "$extra"; } >"$c.3"
  wg_ns "$NS_A" syncconf "$IF_A" "$c.3"
  assert_eq "syncconf added a peer" 2 "$(wg_ns "$NS_A" show "$IF_A" peers | wc -l)"
  wg_ns "$NS_A" syncconf "$IF_A" "$c.1"
  wg_ns "$NS_A" showconf "$IF_A" >"$c.4"
  assert "syncconf removed it again, configuration as before" diff -u "$c.1" "$c.4"
  assert "tunnel still up" ping_ok "$NS_A" "$I4_B"
}

# wg set ... peer X remove, and adding it back.
scenario_peer_remove() {
  pair_up "$IMPL_A" "$IMPL_B" 4 both
  assert "tunnel up" ping_ok "$NS_A" "$I4_B"
  wg_ns "$NS_A" set "$IF_A" peer "$PUB_B" remove
  assert_eq "peer gone from wg show peers" "" "$(wg_ns "$NS_A" show "$IF_A" peers)"
  assert "no traffic to the removed peer" eval "! ping_ok '$NS_A' '$I4_B' 1 2"
  wg_ns "$NS_A" set "$IF_A" peer "$PUB_B" allowed-ips "$I4_B/32,$I6_B/128" endpoint "$(endpoint_of b 4)"
  assert "peer added back, traffic again" ping_ok "$NS_A" "$I4_B"
}

# wg-quick up/down in side a's namespace, with IMPL_A as the userspace daemon.
scenario_wg_quick() {
  net_setup
  make_keys
  local iface="wq$BASHPID" conf pids
  LR_SOCKETS+=("$iface")
  impl_start "$NS_B" "$IMPL_B" "$IF_B"
  side_configure b
  conf="$LR_TMP/$iface.conf"
  (umask 077; cat >"$conf" <<CONF
[Interface]
PrivateKey = $(cat "$LR_TMP/a.key")
ListenPort = $PORT_A
Address = $I4_A/24, $I6_A/64

[Peer]
PublicKey = $PUB_B
AllowedIPs = $I4_B/32, $I6_B/128
Endpoint = $(endpoint_of b 4)
CONF
  )
  local up_rc=0
  WG_QUICK_USERSPACE_IMPLEMENTATION=$IMPL_A timeout 30 ip netns exec "$NS_A" wg-quick up "$conf" \
    >"$LR_TMP/wg-quick.log" 2>&1 || up_rc=$?
  sed 's/^/    | /' "$LR_TMP/wg-quick.log" >&2
  assert_eq "wg-quick up" 0 "$up_rc"
  pids=$(ip netns pids "$NS_A")
  assert "the daemon runs in the background" test -n "$pids"
  assert "wg show $iface answers" eval "wg_ns '$NS_A' show '$iface' >/dev/null"
  assert "ping through the wg-quick interface (inner IPv4)" ping_ok "$NS_A" "$I4_B"
  assert "ping through the wg-quick interface (inner IPv6)" ping_ok "$NS_A" "$I6_B"
  local down_rc=0
  timeout 30 ip netns exec "$NS_A" wg-quick down "$conf" >"$LR_TMP/wg-quick.log" 2>&1 || down_rc=$?
  sed 's/^/    | /' "$LR_TMP/wg-quick.log" >&2
  assert_eq "wg-quick down" 0 "$down_rc"
  assert "the interface is gone" eval "! ip -n '$NS_A' link show '$iface' 2>/dev/null"
  wait_until 5 "the daemon to exit" eval "[ -z \"\$(ip netns pids '$NS_A')\" ]"
  pass "the daemon exited"
  wait_until 5 "the UAPI socket to go" eval "[ ! -e '$WG_SOCK_DIR/$iface.sock' ]"
  pass "the UAPI socket is gone"
}

# The ways side a's daemon is told to stop: SIGTERM, SIGINT, and its UAPI socket
# file deleted. Each time it exits 0 within seconds, the interface goes, and the
# socket file is removed.
scenario_lifecycle() {
  net_setup
  local how rc
  for how in TERM INT unlink; do
    impl_start "$NS_A" "$IMPL_A" "$IF_A"
    case $how in
      unlink) rm -f -- "$WG_SOCK_DIR/$IF_A.sock" ;;
      *) kill -"$how" "$IMPL_PID" ;;
    esac
    rc=0
    timeout 5 tail --pid="$IMPL_PID" -f /dev/null || rc=$?
    assert_eq "$how: the daemon exits within 5 s" 0 "$rc"
    rc=0
    wait "$IMPL_PID" || rc=$?
    assert_eq "$how: exit status" 0 "$rc"
    assert "$how: the interface is gone" eval "! ip -n '$NS_A' link show '$IF_A' 2>/dev/null"
    assert "$how: the socket file is gone" test ! -e "$WG_SOCK_DIR/$IF_A.sock"
  done
}

# ---------------------------------------------------------------------------
# Driver

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

# One scenario, in this (child) process.
if [ "${1:-}" = __run ]; then
  report_errors
  IMPL_A=$(resolve_impl "$IMPL_A")
  IMPL_B=$(resolve_impl "$2")
  "scenario_$3"
  exit 0
fi

[ "$(id -u)" -eq 0 ] || die "the network tests need root (namespaces, TUN)"
case ${1:-} in
  -h | --help) usage ;;
  -l | --list) printf '%s\n' "${SCENARIOS[@]}"; exit 0 ;;
esac
selected=("$@")
[ ${#selected[@]} -gt 0 ] || selected=("${SCENARIOS[@]}")
for s in "${selected[@]}"; do
  declare -F "scenario_$s" >/dev/null || { log "unknown scenario '$s'"; usage; }
done
read -r -a peers <<<"$IMPL_B"

impl_ok=1
resolve_impl "$IMPL_A" >/dev/null || impl_ok=0
for p in "${peers[@]}"; do resolve_impl "$p" >/dev/null || impl_ok=0; done

child=
trap 'log "interrupted"; [ -z "$child" ] || { kill -TERM "$child" 2>/dev/null; wait "$child" || true; }; exit 130' INT TERM

declare -A result
passed=0 failed=0
for p in "${peers[@]}"; do
  for s in "${selected[@]}"; do
    log ""
    log "== $s: $(impl_name "$IMPL_A") (a) with $(impl_name "$p") (b)"
    rc=0 t0=$SECONDS
    if [ "$impl_ok" -eq 1 ]; then
      timeout -k 10 "$SCENARIO_TIMEOUT" "$BASH" "$0" __run "$p" "$s" &
      child=$!
      wait "$child" || rc=$?
      child=
    else
      rc=1
    fi
    if [ "$rc" -eq 0 ]; then
      result[$s,$p]="PASS $((SECONDS - t0))s"; passed=$((passed + 1))
    else
      [ "$rc" -ne 124 ] || log "    FAIL  scenario timed out after ${SCENARIO_TIMEOUT}s"
      result[$s,$p]="FAIL $((SECONDS - t0))s"; failed=$((failed + 1))
    fi
    log "== $s: ${result[$s,$p]}"
  done
done

printf '\ninterop: %s (a) against each peer (b)\n\n' "$(impl_name "$IMPL_A")"
printf '%-16s' scenario
for p in "${peers[@]}"; do printf '  %-14s' "$(impl_name "$p")"; done
printf '\n'
for s in "${selected[@]}"; do
  printf '%-16s' "$s"
  for p in "${peers[@]}"; do printf '  %-14s' "${result[$s,$p]}"; done
  printf '\n'
done
printf '\n%d passed, %d failed\n' "$passed" "$failed"
[ "$failed" -eq 0 ]
