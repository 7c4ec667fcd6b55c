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
#   REF_IMPL  what the solo scenarios compare IMPL_A with (default wireguard-go)
#   SCENARIO_TIMEOUT  seconds one scenario may take (default 300)
#
# Any implementation that runs as `IMPL -f IFACE` and serves the UAPI socket
# at /var/run/wireguard/IFACE.sock can be IMPL_A or IMPL_B. Most scenarios run
# once per peer in IMPL_B; the solo ones test IMPL_A alone (or side by side
# with REF_IMPL) and run once. Each scenario runs in its own process with its
# own namespaces, removed when it ends. Prints a table and, last,
# "N passed, M failed"; exits non-zero if any failed.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=tests/net/lib.sh
. tests/net/lib.sh

IMPL_A=${IMPL_A:-target/release/linerate}
IMPL_B=${IMPL_B:-wireguard-go boringtun-cli}
REF_IMPL=${REF_IMPL:-wireguard-go}
SCENARIO_TIMEOUT=${SCENARIO_TIMEOUT:-300}

# Run once per peer in IMPL_B, with that peer as side b.
SCENARIOS=(a_initiates_v4 a_initiates_v6 b_initiates_v4 b_initiates_v6 tcp
  tcp_v6 roaming restart syncconf peer_remove wg_quick lifecycle handshake_flood
  control_churn jumbo)
# Run once: IMPL_A alone, or beside REF_IMPL (which they get as $IMPL_B).
SOLO_SCENARIOS=(uapi_errno uapi_concurrent cli mtu_too_big counters_add_up memory_returns one_flow_busy)

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

# As tcp, over an IPv6 underlay: with the inner MTU at 1420 on both sides, a full
# inner packet makes an outer IPv6 packet of exactly 1500 bytes, the veth's MTU,
# so any padding past the inner MTU loses every full-sized packet.
scenario_tcp_v6() {
  pair_up "$IMPL_A" "$IMPL_B" 6 a
  assert_eq "a: inner MTU" 1420 "$(if_mtu "$NS_A" "$IF_A")"
  assert_eq "b: inner MTU" 1420 "$(if_mtu "$NS_B" "$IF_B")"
  assert "tunnel up over outer IPv6" ping_ok "$NS_A" "$I4_B"
  # 1392 + 28 and 1372 + 48: inner packets of exactly 1420 bytes, DF set.
  assert "full-MTU ping a -> b (inner IPv4, 1420 bytes)" full_ping "$NS_A" "$I4_B" 1392
  assert "full-MTU ping a -> b (inner IPv6, 1420 bytes)" full_ping "$NS_A" "$I6_B" 1372
  assert "full-MTU ping b -> a (inner IPv4, 1420 bytes)" full_ping "$NS_B" "$I4_A" 1392
  assert "full-MTU ping b -> a (inner IPv6, 1420 bytes)" full_ping "$NS_B" "$I6_A" 1372
  make_payload 100
  # A tunnel that drops full-sized packets stalls TCP for good; fail in a minute.
  XFER_TIMEOUT=60
  assert "100 MiB a -> b over inner IPv4, outer IPv6, sha256 matches" xfer "$NS_A" "$NS_B" "$I4_B"
  assert "100 MiB b -> a over inner IPv6, outer IPv6, sha256 matches" xfer "$NS_B" "$NS_A" "$I6_A"
  local side ns iface impl n
  for side in a b; do
    if [ "$side" = a ]; then ns=$NS_A iface=$IF_A impl=$IMPL_A; else ns=$NS_B iface=$IF_B impl=$IMPL_B; fi
    is_linerate "$impl" || continue
    n=$(lr_counter "$ns" "$iface" 'udp[.]send_failed')
    log "    $side: udp.send_failed=$n"
    assert_eq "$side: no outer sends failed" 0 "$n"
  done
}

if_mtu() { ip -n "$1" -o link show "$2" | sed -n 's/.* mtu \([0-9]*\) .*/\1/p'; }

# full_ping NS ADDR SIZE: three pings of SIZE payload bytes, never fragmented.
full_ping() {
  in_ns "$1" ping -n -q -M "do" -s "$3" -c 3 -i 0.2 -W 1 -w 5 "$2" >/dev/null 2>&1
}

# A bounded flood of junk handshake initiations (MAC1 invalid) from many spoofed
# sources at a's port: b, which has never handshaken, must still get through
# at once. Junk must not count towards the under-load threshold, or a demands
# a cookie and b's first handshake waits for its retry, about 5 s.
scenario_handshake_flood() {
  pair_up "$IMPL_A" "$IMPL_B" 4 b
  local spoof=198.18.128.0/17 k hs
  # The spoofed sources must pass a's reverse-path check.
  for k in all default "$VETH_A"; do in_ns "$NS_A" sysctl -q -w "net.ipv4.conf.$k.rp_filter=0"; done
  ip -n "$NS_A" route add "$spoof" dev "$VETH_A"
  read -r _ hs < <(wg_ns "$NS_B" show "$IF_B" latest-handshakes)
  assert_eq "b has never handshaken with a" 0 "$hs"
  timeout 20 ip netns exec "$NS_B" "$PYTHON" "$LR_ROOT/tests/net/flood.py" \
    "$U4_A" "$PORT_A" 20000 10 "$spoof" >"$LR_TMP/flood.out" 2>"$LR_TMP/flood.err" &
  local flood=$!
  if is_linerate "$IMPL_A"; then
    wait_until 5 "the flood to reach a (MAC1 drops counted)" mac1_drops_seen "$NS_A" "$IF_A"
  fi
  # A second of flood, so that any rate a measures sees it.
  sleep 1
  local t0=$EPOCHREALTIME rc=0 secs
  in_ns "$NS_B" ping -n -q -c 1 -i 0.2 -W 8 -w 8 "$I4_A" >/dev/null 2>&1 || rc=$?
  secs=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }')
  local flooding=yes
  kill -0 "$flood" 2>/dev/null || flooding=no
  if [ "$rc" -eq 0 ]; then
    log "    b's first handshake: first reply after ${secs}s (flood still running: $flooding)"
  else
    log "    b's first handshake: no reply within ${secs}s (ping exit $rc; flood still running: $flooding)"
  fi
  assert_eq "the flood was still running when the reply came" yes "$flooding"
  assert "b's first ping through the tunnel is answered" test "$rc" -eq 0
  assert "b's first handshake completes in under 1 s during the flood (took ${secs}s)" \
    awk -v s="$secs" 'BEGIN { exit !(s < 1) }'
  local sent elapsed
  if ! wait "$flood"; then
    fail "the flood sender failed: $(cat "$LR_TMP/flood.err")"
  fi
  read -r sent elapsed <"$LR_TMP/flood.out"
  log "    flood: $sent junk initiations from $spoof in ${elapsed}s"
  if is_linerate "$IMPL_A"; then
    local drops
    drops=$(mac1_drops "$NS_A" "$IF_A")
    log "    a: MAC1 failures counted: $drops"
    assert "a counted the junk as MAC1 failures" test "$drops" -gt 0
  fi
  assert "tunnel still up after the flood" ping_ok "$NS_B" "$I4_A"
}

# linerate counts each message whose MAC1 fails as drop reason bad-mac1.
mac1_drops() {
  local n
  n=$(lr_counter "$1" "$2" '[^=]*[.]drop[.]bad-mac1')
  [ "$n" != none ] || n=0
  echo "$n"
}
mac1_drops_seen() { [ "$(mac1_drops "$1" "$2")" -gt 0 ]; }

# While a's control plane adds 2,000 peers, lists them and removes them again,
# round after round through a paced TCP transfer via its live peer, the transfer
# completes intact and in time and every wg command exits 0: control work never
# stops the packets for long.
scenario_control_churn() {
  pair_up "$IMPL_A" "$IMPL_B" 4 a
  assert "tunnel up" ping_ok "$NS_A" "$I4_B"
  wg_ns "$NS_A" showconf "$IF_A" >"$LR_TMP/base.conf"
  "$PYTHON" "$LR_ROOT/tests/net/peers.py" 2000 "$LR_TMP/base.conf" >"$LR_TMP/full.conf"
  make_payload 100
  # A stalled tunnel fails the transfer in a minute rather than two.
  XFER_TIMEOUT=60
  xfer_start "$NS_A" "$NS_B" "$I4_B" 12 # 100 MiB at 12 MB/s: about 9 s
  local rounds=0 failed=0 lines t_round took add show del rest secs
  # At most 8 rounds, each started a second after the last, so that they
  # spread over the transfer's 9 s instead of bunching at its start; the loop
  # also ends when the transfer does (bounded by its own timeout).
  while [ "$rounds" -lt 8 ] && kill -0 "$XFER_SEND_PID" 2>/dev/null; do
    rounds=$((rounds + 1))
    t_round=$EPOCHREALTIME
    churn_wg "$LR_TMP/out" syncconf "$IF_A" "$LR_TMP/full.conf"; add=$took
    churn_wg "$LR_TMP/dump" show "$IF_A" dump; show=$took
    # The interface's line, the live peer's and the 2,000 added.
    lines=$(wc -l <"$LR_TMP/dump")
    if [ "$lines" -ne 2002 ]; then
      log "    round $rounds: wg show dump listed $lines lines, not 2002"
      failed=$((failed + 1))
    fi
    churn_wg "$LR_TMP/out" syncconf "$IF_A" "$LR_TMP/base.conf"; del=$took
    log "    round $rounds: add 2,000 ${add}s, show dump ${show}s, remove ${del}s"
    rest=$(awk -v a="$t_round" -v b="$EPOCHREALTIME" 'BEGIN { r = 1 - (b - a); printf "%.3f", (r > 0 ? r : 0) }')
    sleep "$rest"
  done
  log "    $rounds rounds of 2,000 peers added, listed and removed during the transfer"
  assert "100 MiB a -> b during the churn, sha256 matches" xfer_finish
  secs=$(awk -v a="$XFER_T0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  # Paced, it needs about 9 s; a tunnel stalled by control work for seconds
  # at a time would take far longer.
  assert "the transfer was not held up: ${secs}s, under 20 s" awk -v s="$secs" 'BEGIN { exit !(s < 20) }'
  assert_eq "wg commands that failed or listed the wrong peers" 0 "$failed"
  assert "at least two rounds ran during the transfer ($rounds)" test "$rounds" -ge 2
  assert_eq "only the live peer is left" "$PUB_B" "$(wg_ns "$NS_A" show "$IF_A" peers)"
  assert "tunnel still up" ping_ok "$NS_A" "$I4_B"
}

# churn_wg OUT ARGS...: wg ARGS in a's namespace, its output to OUT; sets
# took (its seconds) and, if it exits non-zero, logs that and adds one to
# failed (both the caller's locals).
churn_wg() {
  local out=$1 t0=$EPOCHREALTIME rc=0; shift
  wg_ns "$NS_A" "$@" >"$out" 2>"$LR_TMP/wg.err" || rc=$?
  took=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }')
  if [ "$rc" -ne 0 ]; then
    log "    wg $1 exited $rc after ${took}s: $(cat "$LR_TMP/wg.err")"
    failed=$((failed + 1))
  fi
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
# Solo scenarios: IMPL_A alone, or beside REF_IMPL ($IMPL_B here).

# The same malformed requests to REF_IMPL's socket and IMPL_A's: wherever the
# reference answers with an errno, IMPL_A answers the same one; wherever it
# just closes, IMPL_A must not hang. First, wg(8) reads IMPL_A's busy-port errno.
scenario_uapi_errno() {
  net_setup
  local busy=$((PORT_A + 100)) holder rc=0
  impl_start "$NS_A" "$IMPL_A" "$IF_A"
  impl_start "$NS_A" "$IMPL_B" "$IF_B"
  # The reference (wireguard-go) binds its port only while the interface is
  # up, and only then can it find the port busy.
  ip -n "$NS_A" link set "$IF_A" up
  ip -n "$NS_A" link set "$IF_B" up

  timeout 20 ip netns exec "$NS_A" "$PYTHON" "$LR_ROOT/tests/net/uapi.py" hold-udp "$busy" 15 \
    >"$LR_TMP/hold.out" &
  holder=$!
  wait_until 5 "UDP port $busy to be held" grep -q bound "$LR_TMP/hold.out"
  wg_ns "$NS_A" set "$IF_A" listen-port "$busy" 2>"$LR_TMP/wg.err" || rc=$?
  log "    wg set $IF_A listen-port $busy: exit $rc: $(cat "$LR_TMP/wg.err")"
  assert "wg set listen-port on a busy port fails" test "$rc" -ne 0
  assert "wg says 'Address already in use'" grep -q "Address already in use" "$LR_TMP/wg.err"
  kill "$holder"
  wait "$holder" 2>/dev/null || true
  assert "the daemon still answers wg show" eval "wg_ns '$NS_A' show '$IF_A' >/dev/null"

  log "    $(impl_name "$IMPL_B") ($IF_B) and $(impl_name "$IMPL_A") ($IF_A); UDP port $busy held busy"
  assert "$(impl_name "$IMPL_A") answers every request with $(impl_name "$IMPL_B")'s errno" \
    errno_table "$IF_B" "$IF_A" "$busy"
}

errno_table() { # errno_table REF_IFACE TEST_IFACE BUSY_PORT
  in_ns "$NS_A" "$PYTHON" "$LR_ROOT/tests/net/uapi.py" errno-compare \
    "$WG_SOCK_DIR/$1.sock" "$WG_SOCK_DIR/$2.sock" "$3" "$(impl_name "$IMPL_B")" "$(impl_name "$IMPL_A")" >&2
}

# One client connects to the UAPI socket and says nothing; another's get=1 must
# not wait behind it.
scenario_uapi_concurrent() {
  net_setup
  impl_start "$NS_A" "$IMPL_A" "$IF_A"
  local sock="$WG_SOCK_DIR/$IF_A.sock" idle secs e t0
  timeout 20 ip netns exec "$NS_A" "$PYTHON" "$LR_ROOT/tests/net/uapi.py" idle "$sock" 8 \
    >"$LR_TMP/idle.out" &
  idle=$!
  wait_until 5 "the idle client to connect" grep -q connected "$LR_TMP/idle.out"
  sleep 0.5 # a server taking connections one at a time is now stuck on it
  read -r secs e < <(in_ns "$NS_A" "$PYTHON" "$LR_ROOT/tests/net/uapi.py" timed-get "$sock")
  log "    raw get=1 answered in ${secs}s ($e) while another client sat idle"
  assert "get=1 answered in under 1 s beside an idle client (took ${secs}s)" \
    awk -v s="$secs" 'BEGIN { exit !(s < 1) }'
  assert_eq "get=1 reply ends with errno=0" errno=0 "$e"
  t0=$EPOCHREALTIME
  wg_ns "$NS_A" show "$IF_A" >/dev/null
  secs=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }')
  log "    wg show answered in ${secs}s"
  assert "wg show answered in under 1 s beside an idle client (took ${secs}s)" \
    awk -v s="$secs" 'BEGIN { exit !(s < 1) }'
  assert "the idle client was still there throughout (its connection open)" kill -0 "$idle"
  kill "$idle"
  wait "$idle" 2>/dev/null || true
}

# The command line: subcommand words are never interface names, every --help
# answers, a bad engine is refused before anything is created, and a
# background start that fails says why.
scenario_cli() {
  net_setup
  local lr=$IMPL_A out rc args ns where want
  local -a argv
  # A daemon wrongly started as "show" would leave this behind; remove it then,
  # unless it was there before this test.
  [ -e "$WG_SOCK_DIR/show.sock" ] || LR_SOCKETS+=(show)

  cli_run show
  assert "linerate show: exits non-zero (exit $rc)" test "$rc" -ne 0 -a "$rc" -ne 124
  assert "linerate show: prints usage" grep -qi usage <<<"$out"
  assert "linerate show: no interface named show" no_link "$NS_A" show
  assert "linerate show: no $WG_SOCK_DIR/show.sock" test ! -e "$WG_SOCK_DIR/show.sock"

  for args in "--help" "show --help" "show counters --help" "show crypto --help" \
    "bench --help" "bench crypto --help"; do
    read -r -a argv <<<"$args"
    cli_run "${argv[@]}"
    assert "linerate $args: exit 0 (got $rc)" test "$rc" -eq 0
    assert "linerate $args: prints usage" grep -qi usage <<<"$out"
  done

  for args in "--engine bogus $IF_A" "-f --engine bogus $IF_A"; do
    read -r -a argv <<<"$args"
    cli_run "${argv[@]}"
    assert "linerate $args: fails (exit $rc)" test "$rc" -ne 0 -a "$rc" -ne 124
    assert "linerate $args: the message names 'bogus'" grep -q bogus <<<"$out"
    assert "linerate $args: no interface left" no_link "$NS_A" "$IF_A"
    assert "linerate $args: no socket file left" test ! -e "$WG_SOCK_DIR/$IF_A.sock"
  done

  # A background start whose interface is already served fails in the child;
  # the parent must pass on why. In the same namespace the TUN itself is taken,
  # so either "busy" or "in use" is a reason; in the other namespace only the
  # socket file (shared by all namespaces) is, and that must be named.
  impl_start "$NS_A" "$lr" "$IF_A"
  for ns in "$NS_A" "$NS_B"; do
    if [ "$ns" = "$NS_A" ]; then where="same namespace" want="in use|busy"; else where="other namespace" want="in use"; fi
    cli_run_in "$ns" "$IF_A"
    assert "$where: a background start of a served interface fails (exit $rc)" \
      test "$rc" -ne 0 -a "$rc" -ne 124
    assert "$where: the failed background start says why ('$want')" grep -Eq "$want" <<<"$out"
    assert "$where: ... not just a pointer to --foreground" \
      lacks "$out" "run with --foreground"
  done
  assert "other namespace: no interface left behind" no_link "$NS_B" "$IF_A"
  assert "the running daemon still answers wg show" eval "wg_ns '$NS_A' show '$IF_A' >/dev/null"
}

# cli_run ARGS...: IMPL_A with ARGS in side a's namespace; sets out (stdout and
# stderr) and rc, and logs the first lines. cli_run_in NS ARGS...: in NS.
cli_run() { cli_run_in "$NS_A" "$@"; }
cli_run_in() {
  local ns=$1; shift
  rc=0
  out=$(timeout 10 ip netns exec "$ns" "$IMPL_A" "$@" 2>&1 </dev/null) || rc=$?
  log "    \$ linerate $*   (exit $rc)"
  head -n 3 <<<"$out" | sed 's/^/    | /' >&2
}

no_link() { ! ip -n "$1" link show "$2" >/dev/null 2>&1; }
lacks() { ! grep -qF -- "$2" <<<"$1"; } # lacks TEXT STRING

# Jumbo frames, as a data centre runs them: both tunnel interfaces at MTU 9000
# over a 9216-byte underlay. 8000-byte datagrams that may not be fragmented
# cross whole both ways (one 8,028-byte inner IPv4 packet on the far interface,
# no fragment), and TCP carries 50 MiB each way at that MTU, sha256 compared.
scenario_jumbo() {
  pair_up "$IMPL_A" "$IMPL_B" 4 a
  ip -n "$NS_A" link set "$VETH_A" mtu 9216
  ip -n "$NS_B" link set "$VETH_B" mtu 9216
  ip -n "$NS_A" link set "$IF_A" mtu 9000
  ip -n "$NS_B" link set "$IF_B" mtu 9000
  assert "tunnel up" ping_ok "$NS_A" "$I4_B"
  # A daemon notices its interface's new MTU within a second: the first try may
  # go before it has.
  assert "8000-byte DF datagram a -> b, inner IPv4: one whole 8028-byte packet at b" \
    twice dgram_whole "$NS_A" "$NS_B" "$I4_B" 8000 "$IF_B"
  assert "8000-byte DF datagram b -> a, inner IPv4: one whole 8028-byte packet at a" \
    twice dgram_whole "$NS_B" "$NS_A" "$I4_A" 8000 "$IF_A"
  assert "8000-byte datagram a -> b, inner IPv6: one whole 8048-byte packet at b" \
    dgram_whole "$NS_A" "$NS_B" "$I6_B" 8000 "$IF_B"
  assert "full-size pings (8972 bytes, DF) a -> b" full_ping "$NS_A" "$I4_B" 8972
  make_payload 50
  assert "50 MiB a -> b over inner IPv4 at MTU 9000, sha256 matches" xfer "$NS_A" "$NS_B" "$I4_B"
  assert "50 MiB b -> a over inner IPv4 at MTU 9000, sha256 matches" xfer "$NS_B" "$NS_A" "$I4_A"
  if is_linerate "$IMPL_A"; then
    local n
    n=$(lr_counter "$NS_A" "$IF_A" 'tun[.]too_big')
    assert "a: no inner packet was too big for its buffer (tun.too_big: $n)" test "${n/none/0}" -eq 0
  fi
}

twice() { "$@" || "$@"; } # twice COMMAND...: COMMAND succeeds at the first or second try

# An MTU past what the data path's buffers carry is refused and set back to the
# largest it carries, and the kernel then fragments large packets to fit
# instead of the daemon dropping them. Linerate on both sides, so both its send
# and its receive path carry full-sized packets.
scenario_mtu_too_big() {
  pair_up "$IMPL_A" "$IMPL_A" 4 both
  # An underlay past the largest MTU asked for: the outer packets then need no
  # fragmenting, and only the tunnel's own limit is under test.
  ip -n "$NS_A" link set "$VETH_A" mtu 16100
  ip -n "$NS_B" link set "$VETH_B" mtu 16100
  assert "tunnel up" ping_ok "$NS_A" "$I4_B"
  local side ns iface mtu n
  for side in a b; do
    if [ "$side" = a ]; then ns=$NS_A iface=$IF_A; else ns=$NS_B iface=$IF_B; fi
    ip -n "$ns" link set "$iface" mtu 16000
    wait_until 2 "$side: MTU 16000 to be set back" mtu_below "$ns" "$iface" 16000
    mtu=$(if_mtu "$ns" "$iface")
    log "    $side: asked for MTU 16000, reads back $mtu"
    assert "$side: MTU set back to a size it carries (9000 <= $mtu < 16000)" \
      test "$mtu" -ge 9000 -a "$mtu" -lt 16000
    assert "$side: the log says MTU 16000 was refused" grep -q "MTU 16000" "$LR_TMP/$iface.log"
    grep -h "MTU 16000" "$LR_TMP/$iface.log" | head -n 1 | sed 's/^/    | /' >&2
    n=$(lr_counter "$ns" "$iface" 'tun[.]mtu_refused')
    assert "$side: tun.mtu_refused >= 1 (got $n)" test "${n/none/0}" -ge 1
  done
  assert "12000-byte datagram a -> b, inner IPv4, arrives intact" dgram_ok "$NS_A" "$NS_B" "$I4_B" 12000
  assert "12000-byte datagram a -> b, inner IPv6, arrives intact" dgram_ok "$NS_A" "$NS_B" "$I6_B" 12000
  assert "12000-byte datagram b -> a, inner IPv4, arrives intact" dgram_ok "$NS_B" "$NS_A" "$I4_A" 12000
  assert "12000-byte datagram b -> a, inner IPv6, arrives intact" dgram_ok "$NS_B" "$NS_A" "$I6_A" 12000
}

mtu_below() { [ "$(if_mtu "$1" "$2")" -lt "$3" ]; }

# Counters read while traffic runs add up: none goes backwards between two
# reads of a's, a's encryptions never run ahead of the datagrams sent, and in
# the end a counted the K datagrams sent and b received every one. Linerate on
# both sides, so that b's counters also show where any lost datagram went.
# One TCP flow a -> b for 8 s through IMPL_A at both ends (its workers as
# LINERATE_WORKERS says) beside a busy loop on every core, which takes whole time
# slices from the workers: neither end refuses a packet as a replay (a worker
# held back seals its packets again before they leave; a session's packets
# waiting in a held-back worker's queue are still inside the window). The far
# end is linerate because wireguard-go counts no replays a test could read.
scenario_one_flow_busy() {
  pair_up "$IMPL_A" "$IMPL_A" 4 a
  assert "tunnel up" ping_ok "$NS_A" "$I4_B"
  local busy=() c out
  for c in $(seq 0 $(($(nproc) - 1))); do
    taskset -c "$c" timeout 40 sh -c 'while :; do :; done' &
    busy+=($!)
  done
  out=$(tcp_through_tunnel 8 $((XFER_PORT + 3)))
  kill "${busy[@]}" 2>/dev/null || true
  wait "${busy[@]}" 2>/dev/null || true
  log "    beside a busy loop on each core: $(tr '\n' ' ' <<<"$out")"
  log "    sealed again before leaving: a $(lr_counter "$NS_A" "$IF_A" 'wg[.]resealed'), b $(lr_counter "$NS_B" "$IF_B" 'wg[.]resealed')"
  # Drops are listed once non-zero: "none" is none.
  assert_eq "b refused no packet as a replay" none "$(lr_counter "$NS_B" "$IF_B" 'wg-decrypt[.]drop[.]replay')"
  assert_eq "a refused none either" none "$(lr_counter "$NS_A" "$IF_A" 'wg-decrypt[.]drop[.]replay')"
}

scenario_counters_add_up() {
  pair_up "$IMPL_A" "$IMPL_A" 4 a
  assert "tunnel up" ping_ok "$NS_A" "$I4_B"
  local k=5000 port=$((XFER_PORT + 2)) recv got enc out dec tun
  local -A a0 b0
  # The tunnel is idle now: the starting values.
  a0[enc]=$(lr_counter "$NS_A" "$IF_A" 'wg-encrypt[.]packets')
  a0[out]=$(lr_counter "$NS_A" "$IF_A" 'udp-output[.]packets')
  b0[dec]=$(lr_counter "$NS_B" "$IF_B" 'wg-decrypt[.]packets')
  b0[tun]=$(lr_counter "$NS_B" "$IF_B" 'tun-output[.]packets')
  log "    a idle: wg-encrypt.packets=${a0[enc]} udp-output.packets=${a0[out]}"
  timeout 20 ip netns exec "$NS_B" "$PYTHON" "$LR_ROOT/tests/net/counters.py" recv "$I4_B" "$port" "$k" 15 \
    >"$LR_TMP/recv.out" &
  recv=$!
  wait_until 5 "the receiver to bind" udp_bound "$NS_B" "$port"
  # 5,000 at 2,500/s: 2 s of sending, about 40 reads of a's counters.
  assert "$k datagrams sent while a's counters are read every 50 ms: none goes backwards or runs ahead" \
    eval "timeout 20 ip netns exec '$NS_A' '$PYTHON' '$LR_ROOT/tests/net/counters.py' send-watch \
      '$WG_SOCK_DIR/$IF_A.sock' '$I4_B' $port $k 2500 >'$LR_TMP/send.out'"
  wait "$recv" || true
  got=$(cat "$LR_TMP/recv.out")
  enc=$(($(lr_counter "$NS_A" "$IF_A" 'wg-encrypt[.]packets') - a0[enc]))
  out=$(($(lr_counter "$NS_A" "$IF_A" 'udp-output[.]packets') - a0[out]))
  dec=$(($(lr_counter "$NS_B" "$IF_B" 'wg-decrypt[.]packets') - b0[dec]))
  tun=$(($(lr_counter "$NS_B" "$IF_B" 'tun-output[.]packets') - b0[tun]))
  log "    $(cat "$LR_TMP/send.out")"
  log "    a counted: wg-encrypt +$enc, udp-output +$out; b counted: wg-decrypt +$dec, tun-output +$tun; b's receiver got ${got:-nothing}"
  if [ "${got:-0}" != "$k" ]; then
    # The counters above say where they went: not sent by a (udp-output), lost
    # on the veth (b's wg-decrypt short of a's udp-output), or lost after b's
    # TUN (tun-output at K but the receiver short).
    log "    LOST: b's receiver got ${got:-0} of the $k datagrams a sent ($((k - ${got:-0})) lost)"
  fi
  # A keepalive or a handshake's staged packet may add one or two of a's own.
  assert "a: wg-encrypt counted the $k datagrams (and at most 3 more): $enc" \
    test "$enc" -ge "$k" -a "$enc" -le $((k + 3))
  assert "a: udp-output sent them (and at most 3 more): $out" \
    test "$out" -ge "$k" -a "$out" -le $((k + 3))
  assert_eq "b: wg-decrypt counted what a sent" "$out" "$dec"
  assert_eq "b: tun-output wrote exactly the $k datagrams" "$k" "$tun"
  assert_eq "b's receiver got every datagram a sent (no loss allowed)" "$k" "$got"
}

# Adding and removing 10,000 peers three times gives the memory back: the
# resident size ends within 8 MiB of where it started. 10,000 peers hold about
# 12-17 MiB; the 8 MiB margin is what the allocator may keep for reuse (free
# chunks it cannot trim from the middle of the heap, per-thread arenas), well
# short of a round's worth, so memory kept per round would still fail it.
scenario_memory_returns() {
  net_setup
  make_keys
  impl_start "$NS_A" "$IMPL_A" "$IF_A"
  local pid=$IMPL_PID rss0 rss now round limit settled waited
  wg_ns "$NS_A" set "$IF_A" private-key "$LR_TMP/a.key" listen-port "$PORT_A"
  # Only the interface: setting it removes every peer.
  wg_ns "$NS_A" showconf "$IF_A" >"$LR_TMP/base.conf"
  "$PYTHON" "$LR_ROOT/tests/net/peers.py" 10000 "$LR_TMP/base.conf" >"$LR_TMP/full.conf"
  rss0=$(rss_kib "$pid")
  limit=$((rss0 + 8192))
  log "    resident at start: $rss0 KiB"
  for round in 1 2 3; do
    assert "round $round: 10,000 peers set" timeout 30 ip netns exec "$NS_A" wg setconf "$IF_A" "$LR_TMP/full.conf"
    assert_eq "round $round: peers listed" 10000 "$(wg_ns "$NS_A" show "$IF_A" peers | wc -l)"
    rss=$(rss_kib "$pid")
    assert "round $round: all removed" timeout 30 ip netns exec "$NS_A" wg setconf "$IF_A" "$LR_TMP/base.conf"
    now=$(rss_kib "$pid")
    # The daemon hands freed memory back just after it answers the request,
    # so the first read may come before that: wait for it, at most 3 s.
    rss_settle "$pid" "$limit"
    log "    round $round: $rss KiB with 10,000 peers; after removing them $now KiB at once, $settled KiB after ${waited}s"
  done
  assert_eq "no peers left" "" "$(wg_ns "$NS_A" show "$IF_A" peers)"
  rss=$(rss_kib "$pid")
  assert "resident memory back within 8 MiB of the start ($rss0 -> $rss KiB)" \
    test "$rss" -le "$limit"
}

# rss_settle PID LIMIT_KIB: polls VmRSS every 0.1 s, at most 30 times, until it
# is at most LIMIT_KIB; sets settled (the last value) and waited (seconds).
rss_settle() {
  local i
  for ((i = 0; i < 30; i++)); do
    settled=$(rss_kib "$1")
    [ "$settled" -gt "$2" ] || break
    sleep 0.1
  done
  waited=$(awk -v i="$i" 'BEGIN { printf "%.1f", i / 10 }')
}

rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

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
  -l | --list) printf '%s\n' "${SCENARIOS[@]}" "${SOLO_SCENARIOS[@]}"; exit 0 ;;
esac
is_solo() { local x; for x in "${SOLO_SCENARIOS[@]}"; do [ "$x" != "$1" ] || return 0; done; return 1; }
selected=("$@")
[ ${#selected[@]} -gt 0 ] || selected=("${SCENARIOS[@]}" "${SOLO_SCENARIOS[@]}")
per_peer=() solo=()
for s in "${selected[@]}"; do
  declare -F "scenario_$s" >/dev/null || { log "unknown scenario '$s'"; usage; }
  if is_solo "$s"; then solo+=("$s"); else per_peer+=("$s"); fi
done
read -r -a peers <<<"$IMPL_B"

impl_ok=1
resolve_impl "$IMPL_A" >/dev/null || impl_ok=0
for p in "${peers[@]}"; do resolve_impl "$p" >/dev/null || impl_ok=0; done
[ ${#solo[@]} -eq 0 ] || resolve_impl "$REF_IMPL" >/dev/null || impl_ok=0

child=
trap 'log "interrupted"; [ -z "$child" ] || { kill -TERM "$child" 2>/dev/null; wait "$child" || true; }; exit 130' INT TERM

declare -A result
passed=0 failed=0

# run_one SCENARIO PEER KEY HEADING: one scenario in a child process, its
# result in result[KEY].
run_one() {
  local s=$1 p=$2 key=$3 rc=0 t0=$SECONDS
  log ""
  log "== $s: $4"
  if [ "$impl_ok" -eq 1 ]; then
    timeout -k 10 "$SCENARIO_TIMEOUT" "$BASH" "$0" __run "$p" "$s" &
    child=$!
    wait "$child" || rc=$?
    child=
  else
    rc=1
  fi
  if [ "$rc" -eq 0 ]; then
    result[$key]="PASS $((SECONDS - t0))s"; passed=$((passed + 1))
  else
    [ "$rc" -ne 124 ] || log "    FAIL  scenario timed out after ${SCENARIO_TIMEOUT}s"
    result[$key]="FAIL $((SECONDS - t0))s"; failed=$((failed + 1))
  fi
  log "== $s: ${result[$key]}"
}

for p in "${peers[@]}"; do
  for s in "${per_peer[@]}"; do
    run_one "$s" "$p" "$s,$p" "$(impl_name "$IMPL_A") (a) with $(impl_name "$p") (b)"
  done
done
for s in "${solo[@]}"; do
  run_one "$s" "$REF_IMPL" "$s" "$(impl_name "$IMPL_A") alone (reference: $(impl_name "$REF_IMPL"))"
done

printf '\ninterop: %s (a) against each peer (b)\n' "$(impl_name "$IMPL_A")"
if [ ${#per_peer[@]} -gt 0 ]; then
  printf '\n%-16s' scenario
  for p in "${peers[@]}"; do printf '  %-14s' "$(impl_name "$p")"; done
  printf '\n'
  for s in "${per_peer[@]}"; do
    printf '%-16s' "$s"
    for p in "${peers[@]}"; do printf '  %-14s' "${result[$s,$p]}"; done
    printf '\n'
  done
fi
if [ ${#solo[@]} -gt 0 ]; then
  printf '\nonce: %s alone or beside %s\n\n' "$(impl_name "$IMPL_A")" "$(impl_name "$REF_IMPL")"
  for s in "${solo[@]}"; do printf '%-16s  %-14s\n' "$s" "${result[$s]}"; done
fi
printf '\n%d passed, %d failed\n' "$passed" "$failed"
[ "$failed" -eq 0 ]
