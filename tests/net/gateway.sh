#!/usr/bin/env bash
# Gateway mode in the published topology, in network namespaces:
#
#   host-a ── lan [gw-a] wan ──── wan [gw-b] lan ── host-b
#   198.19.1.10    198.18.2.1    198.18.2.2     198.19.3.10
#   2001:2:0:1::10                              2001:2:0:3::10
#
# gw-a and gw-b are `linerate gateway -c FILE`, each owning its two ports
# (the veth ends in its namespace carry no kernel addresses); a WireGuard
# tunnel joins them over the WAN link.
#
#   tests/net/gateway.sh                 every scenario
#   tests/net/gateway.sh ping tcp        only those
#   tests/net/gateway.sh -l              list the scenarios
#
#   LINERATE           the binary (default target/release/linerate)
#   GW_DRIVER          the ports' driver (default af_xdp; af_packet)
#   GW_WORKERS         workers per gateway (default 1), one per core from 0
#   SCENARIO_TIMEOUT   seconds one scenario may take (default 240)
#
# Prints a table and, last, "N passed, M failed"; exits non-zero if any failed.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=tests/net/lib.sh
. tests/net/lib.sh

LINERATE=${LINERATE:-target/release/linerate}
GW_DRIVER=${GW_DRIVER:-af_xdp}
GW_WORKERS=${GW_WORKERS:-1}
SCENARIO_TIMEOUT=${SCENARIO_TIMEOUT:-240}

SCENARIOS=(ping tcp one_flow one_flow_busy ttl_and_pmtu small_wan neighbors bad_input reload interop_a_initiates
  interop_b_initiates metrics workers crash_restart jumbo service)

# shellcheck source=tests/net/gateway_lib.sh
. tests/net/gateway_lib.sh

# ---------------------------------------------------------------------------
# Scenarios

# runtime_packets SIDE WORKER NODE: packets NODE handled on that worker of that
# gateway, from `show runtime` (0 when the node has not run there).
runtime_packets() {
  gw_show "$1" runtime | awk -v w="$2" -v n="$3" '
    /^worker / { cur = $2; sub(/:$/, "", cur) }
    cur == w && $1 == n { print $3; found = 1 }
    END { if (!found) print 0 }'
}

scenario_ping() {
  both_up
  # The gateway's clock: a handshake's time is never ahead of the wall clock (the
  # engines' calibration at start takes a good part of a second). To the
  # nanosecond, from the UAPI socket.
  local hs_time now
  in_ns "$NS_HA" ping -n -q -c 1 -W 5 "$H4_B" >/dev/null 2>&1 || true
  hs_time=$(printf 'get=1\n\n' | "$PYTHON" tests/net/uapi.py ask "$WG_SOCK_DIR/$WG_A.sock" |
    awk -F= '/^last_handshake_time_sec=/ { s = $2 } /^last_handshake_time_nsec=/ { n = $2 }
      END { printf "%d.%09d", s, n }')
  now=$(date +%s.%N)
  log "    last handshake at $hs_time, now $now"
  assert "the last handshake is not in the future" \
    awk -v h="$hs_time" -v n="$now" 'BEGIN { exit !(h > 0 && h <= n) }'
  assert "host a pings host b over IPv4 (handshake first)" ping_ok "$NS_HA" "$H4_B" 3 15
  assert "host a pings host b over IPv6" ping_ok "$NS_HA" "$H6_B"
  assert "host b pings host a over IPv4" ping_ok "$NS_HB" "$H4_A"
  assert "host a pings its gateway's LAN address" ping_ok "$NS_HA" "$G4_A"
  assert "host a pings its gateway's LAN address over IPv6" ping_ok "$NS_HA" "$G6_A"
  assert "host a pings the far gateway's LAN address through the tunnel" ping_ok "$NS_HA" "$G4_B"
  local out
  out=$(in_ns "$NS_HA" ping -n -c 1 -W 2 "$H4_B" 2>&1 || true)
  assert "two routers on the way: the reply arrives with TTL 62" grep -q 'ttl=62' <<<"$out"
  assert "gateway a lists the tunnel's routes" grep -q "198.19.3.0/24 *tunnel gwa" <<<"$(gw_show a fib)"
  assert "gateway a knows host a as a neighbor" grep -q "$H4_A" <<<"$(gw_show a neighbors)"
  assert "wg show works on the gateway's WireGuard interface" \
    grep -q "$PUB_B" <<<"$(timeout 10 ip netns exec "$NS_GA" wg show "$WG_A" peers)"
  assert_eq "wg show: the gateway's listen port" 51820 "$(wg_ns "$NS_GA" show "$WG_A" listen-port)"
  assert "wg set: a keepalive for the peer" wg_ns "$NS_GA" set "$WG_A" peer "$PUB_B" persistent-keepalive 25
  assert_eq "wg show: the keepalive" "$PUB_B	25" "$(wg_ns "$NS_GA" show "$WG_A" persistent-keepalive)"
  wg_ns "$NS_GA" showconf "$WG_A" >"$LR_TMP/showconf"
  assert "wg showconf | wg syncconf round-trips" wg_ns "$NS_GA" syncconf "$WG_A" "$LR_TMP/showconf"
  assert "the tunnel still works after syncconf" ping_ok "$NS_HA" "$H4_B"
  sleep 0.5
  assert "no buffer leaked on gateway a" buffers_all_back a
  assert "no buffer leaked on gateway b" buffers_all_back b
}

scenario_tcp() {
  both_up
  assert "tunnel up" ping_ok "$NS_HA" "$H4_B" 3 15
  make_payload 100
  # Hosts send 1500-byte packets: the first ones meet the tunnel MTU and are
  # answered with fragmentation needed, so the transfers exercise PMTU too.
  assert "100 MiB host a -> host b over IPv4, sha256 matches" xfer "$NS_HA" "$NS_HB" "$H4_B"
  assert "100 MiB host b -> host a over IPv6, sha256 matches" xfer "$NS_HB" "$NS_HA" "$H6_A"
  local rx tx
  read -r _ rx tx < <(timeout 10 ip netns exec "$NS_GA" wg show "$WG_A" transfer)
  log "    gateway a: wg show transfer: rx $rx, tx $tx"
  assert "gateway a counted both payloads" test "${rx:-0}" -ge "$PAYLOAD_BYTES" -a "${tx:-0}" -ge "$PAYLOAD_BYTES"
  sleep 0.5
  assert "no buffer leaked on gateway a" buffers_all_back a
}

# udp_in NS: the UDP datagrams the kernel of NS took in, to a socket or none.
udp_in() {
  in_ns "$1" nstat -az -j 2>/dev/null | "$PYTHON" -c 'import json,sys; d=json.load(sys.stdin); print(sum(v.get("UdpInDatagrams",0)+v.get("UdpNoPorts",0) for v in d.values()))'
}

not_a_neighbor() { ! gw_show "$1" neighbors | grep -qw "$2"; }

# One TCP flow as fast as it goes, and pings beside it: no port of either
# gateway loses a frame (an AF_XDP port's buffers lent to the kernel must not
# run out under one flow), and no ping is lost.
scenario_one_flow() {
  both_up
  assert "tunnel up" ping_ok "$NS_HA" "$H4_B" 3 15
  local retransmits mbps loss steal
  steal=$(cpu_steal_ms)
  read -r retransmits mbps loss < <(one_tcp_flow 8)
  log "    one TCP flow for 8 s ($GW_DRIVER): $mbps Mbit/s, $retransmits retransmits; 100 pings a second beside it: $loss lost"
  log "    CPU time the hypervisor took meanwhile: $(($(cpu_steal_ms) - steal)) ms"
  log "    frames the ports lost: gateway a $(gw_counter a 'port-.*\.drop\..*'), gateway b $(gw_counter b 'port-.*\.drop\..*')"
  log "    sealed again before leaving (a worker held back): gateway a $(gw_counter a 'wg\.resealed'), gateway b $(gw_counter b 'wg\.resealed')"
  gw_show a errors | sed 's/^/    a| /' >&2
  gw_show b errors | sed 's/^/    b| /' >&2
  assert "gateway a's ports lost no frame" test "$(gw_counter a 'port-.*\.drop\..*')" -eq 0
  assert "gateway b's ports lost no frame" test "$(gw_counter b 'port-.*\.drop\..*')" -eq 0
  assert_eq "no ping lost beside the flow" "0%" "$loss"
}

# The same with a busy loop on every core beside the gateways' workers, which
# then lose the CPU for whole time slices: a worker held back with sealed
# packets seals them again before they leave, and a session's packets waiting in
# a held-back worker's queue are still inside the window when it comes back, so
# neither gateway refuses a packet as a replay.
scenario_one_flow_busy() {
  both_up
  assert "tunnel up" ping_ok "$NS_HA" "$H4_B" 3 15
  local retransmits mbps loss busy=() c
  for c in $(seq 0 $(($(nproc) - 1))); do
    taskset -c "$c" timeout 30 sh -c 'while :; do :; done' &
    busy+=($!)
  done
  read -r retransmits mbps loss < <(one_tcp_flow 8)
  kill "${busy[@]}" 2>/dev/null || true
  wait "${busy[@]}" 2>/dev/null || true
  log "    one TCP flow for 8 s beside a busy loop on each core ($GW_DRIVER): $mbps Mbit/s, $retransmits retransmits; pings lost: $loss"
  log "    sealed again before leaving: gateway a $(gw_counter a 'wg\.resealed'), gateway b $(gw_counter b 'wg\.resealed')"
  assert_eq "gateway a refused no packet as a replay" 0 "$(gw_counter a 'wg-decrypt\.drop\.replay')"
  assert_eq "gateway b refused no packet as a replay" 0 "$(gw_counter b 'wg-decrypt\.drop\.replay')"
}

scenario_ttl_and_pmtu() {
  both_up
  assert "tunnel up" ping_ok "$NS_HA" "$H4_B" 3 15
  local out
  # Before any DF packet teaches host a the path MTU: 2000 bytes without DF leave
  # host a as a 1500-byte fragment and the rest; the gateways cut the large one
  # to the tunnel MTU and host b puts it all back together.
  out=$(in_ns "$NS_HA" ping -n -c 2 -W 2 -M dont -s 2000 "$H4_B" 2>&1 || true)
  assert "2000 bytes without DF cross, fragmented to the tunnel MTU on the way" grep -q ' 0% packet loss' <<<"$out"
  assert "gateway a cut packets to fit the tunnel" counter_at_least a 'ip4-fragment\.packets' 2
  out=$(in_ns "$NS_HA" ping -n -c 1 -W 2 -t 1 "$H4_B" 2>&1 || true)
  assert "TTL 1 is answered by gateway a: time exceeded from $G4_A" \
    grep -q "From $G4_A .*Time to live exceeded" <<<"$out"
  out=$(in_ns "$NS_HA" ping -n -c 1 -W 2 -t 2 "$H4_B" 2>&1 || true)
  assert "TTL 2 is answered by gateway b" grep -q "From $G4_B .*Time to live exceeded" <<<"$out"
  out=$(in_ns "$NS_HA" ping -n -c 1 -W 2 -M do -s 1450 "$H4_B" 2>&1 || true)
  assert "a DF packet over the tunnel MTU: fragmentation needed, mtu = $TUNNEL_MTU" \
    grep -q "mtu = $TUNNEL_MTU" <<<"$out"
  out=$(in_ns "$NS_HA" ping -n -c 1 -W 2 -M do -s 1400 "$H4_B" 2>&1 || true)
  log "    then: $(head -2 <<<"$out" | tr '\n' ' ')"
  assert "the host now knows the path MTU and refuses larger DF packets itself" \
    grep -q "mtu=$TUNNEL_MTU\|mtu = $TUNNEL_MTU" <<<"$out"
  out=$(in_ns "$NS_HA" ping -6 -n -c 1 -W 2 -s 1450 -M do "$H6_B" 2>&1 || true)
  assert "IPv6 over the tunnel MTU: packet too big, mtu = $TUNNEL_MTU" \
    grep -qi "mtu = $TUNNEL_MTU\|Packet too big" <<<"$out"
  log "    IPv6: $(head -2 <<<"$out" | tr '\n' ' ')"
  assert "ip-lookup counted them" test "$(gw_counter a 'ip-lookup\.drop\.tunnel-too-big')" -ge 2
  assert "a ping of exactly the tunnel MTU passes" ping_ok "$NS_HA" "$H4_B" 1 5
  out=$(in_ns "$NS_HA" ping -n -c 2 -W 2 -M do -s $((TUNNEL_MTU - 28)) "$H4_B" 2>&1 || true)
  assert "1420-byte DF packets cross" grep -q ' 0% packet loss' <<<"$out"
}

# stop_gateways: both gateways stopped (SIGTERM), their processes gone.
stop_gateways() {
  kill "$GW_PID_A" "$GW_PID_B" 2>/dev/null || true
  wait "$GW_PID_A" "$GW_PID_B" 2>/dev/null || true
}

# A WAN smaller than the tunnel needs: the gateways lower the tunnel's MTU to
# what fits (gateway a at start, from its peer's endpoint; gateway b, which
# learns the endpoint, on its first outer packet too big), and the LAN hosts
# hear that MTU in fragmentation-needed. Then an interface MTU smaller than its
# port's configuration: read, said and used.
scenario_small_wan() {
  topology
  local ns s out
  for ns in "$NS_GA" "$NS_GB"; do ip -n "$ns" link set wan mtu 1400; done
  gw_config a "$W4_B:51820"
  gw_config b
  for s in a b; do sed -i '/^interface = "wan"$/a mtu = 1400' "$LR_TMP/gw-$s.toml"; done
  gw_start a
  gw_start b
  assert "gateway a said the tunnel runs at the MTU the WAN leaves (1400 - 60)" \
    grep -q "the tunnel runs at mtu 1340" "$LR_TMP/gw-a.log"
  assert "tunnel up" ping_ok "$NS_HA" "$H4_B" 3 15
  out=$(in_ns "$NS_HA" ping -n -c 1 -W 2 -M do -s 1392 "$H4_B" 2>&1 || true)
  log "    ping -M do -s 1392: $(head -2 <<<"$out" | tail -1)"
  assert "a 1420-byte DF packet: fragmentation needed, mtu = 1340" grep -q "mtu = 1340" <<<"$out"
  # Gateway b learns its peer's endpoint from the handshake: its first reply too
  # large for its WAN is dropped (the MTU lowered then), the later ones fit.
  out=$(in_ns "$NS_HA" ping -n -c 3 -i 0.3 -W 2 -M do -s 1312 "$H4_B" 2>&1 || true)
  log "    ping -M do -s 1312: $(grep -o '[0-9]* received' <<<"$out") of 3"
  assert "1340-byte DF packets cross (the first reply may be the one that taught gateway b)" \
    grep -Eq ' 3 received| 2 received' <<<"$out"
  make_payload 20
  assert "20 MiB host a -> host b over a 1400-byte WAN, sha256 matches" xfer "$NS_HA" "$NS_HB" "$H4_B"
  assert "20 MiB host b -> host a, sha256 matches" xfer "$NS_HB" "$NS_HA" "$H4_A"
  log "    gateway b: $(gw_show b interfaces | grep '(wireguard)')"
  # (Each worker lowers its own copy of the tunnel's MTU; the owner's is shown.)
  assert "gateway b lowered its tunnel's MTU on its own outer packet, counted" \
    counter_at_least b 'ip-rewrite\.drop\.own-too-big' 1
  assert "no error addressed to gateway b itself" test "$(gw_counter b 'ip-local\.drop\.unserved')" -eq 0
  stop_gateways
  for ns in "$NS_GA" "$NS_GB"; do ip -n "$ns" link set wan mtu 1460; done
  gw_config a "$W4_B:51820"
  gw_config b
  gw_start a
  gw_start b
  assert "gateway a said its WAN interface's MTU is less than the configuration's" \
    grep -q "interface wan has MTU 1460, less than the configured 1500" "$LR_TMP/gw-a.log"
  assert "and runs its WAN port at 1460" grep -q "^wan (wan, .* mtu 1460" <<<"$(gw_show a interfaces)"
  assert "tunnel up" ping_ok "$NS_HA" "$H4_B" 3 15
  assert "20 MiB host a -> host b over a 1460-byte WAN, sha256 matches" xfer "$NS_HA" "$NS_HB" "$H4_B"
  assert "20 MiB host b -> host a, sha256 matches" xfer "$NS_HB" "$NS_HA" "$H4_A"
}

# Jumbo frames, as a data centre runs them: 9216-byte LANs and WAN, a tunnel
# MTU of 9000, the ports on the run's driver (AF_XDP ports of a jumbo gateway
# take frames in parts and join them in its jumbo buffers). Full-size DF pings
# cross both ways; a larger DF packet is answered with fragmentation needed
# quoting 9000 (Packet Too Big for IPv6); TCP carries 20 MiB each way. The
# Makefile runs it in the AF_XDP pass only: the ESP and OpenVPN scenarios run
# jumbo gateways on AF_PACKET (and the L2 one on both drivers).
scenario_jumbo() {
  jumbo_topology
  local s out
  gw_config a "$W4_B:51820"
  gw_config b
  for s in a b; do
    jumbo_ports "$s" "$GW_DRIVER"
    sed -i "s/^mtu = $TUNNEL_MTU\$/mtu = 9000/" "$LR_TMP/gw-$s.toml"
  done
  gw_start a
  gw_start b
  for s in a b; do
    assert "gateway $s: $GW_DRIVER ports on jumbo buffers" xdp_jumbo_ports "$s"
  done
  assert "tunnel up" ping_ok "$NS_HA" "$H4_B" 3 15
  jumbo_through 9000
  for s in a b; do
    out=$(gw_show "$s" errors | awk '$2 ~ /^port-/ { printf "%s %s %s; ", $1, $2, $3 }')
    log "    gateway $s: port drops: ${out:-none}"
    assert "gateway $s: no port dropped a frame as too big or for want of a buffer" \
      not grep -qE 'rx-truncated|rx-no-buffer' <<<"$out"
  done
  # A crash and a restart: the ports come back as they were, multi-buffer on
  # AF_XDP (the program left behind is taken off), and full-size pings cross.
  kill -KILL "$GW_PID_A"
  wait "$GW_PID_A" 2>/dev/null || true
  : >"$LR_TMP/gw-a.log"
  gw_start a
  assert "after kill -9 and a restart: $GW_DRIVER ports on jumbo buffers again" xdp_jumbo_ports a
  assert "no fallback to AF_PACKET" not grep -q "falling back" "$LR_TMP/gw-a.log"
  assert "the tunnel works after the restart" ping_ok "$NS_HA" "$H4_B" 3 15
  assert "9000-byte DF pings a -> b cross again" full_size_pings "$NS_HA" "$H4_B" 8972
}

# The gateway as its systemd unit runs it (dist/systemd): the unit passes
# `systemd-analyze verify`; gateway a runs with the unit's capability bounding
# set alone, told a NOTIFY_SOCKET and a 1 s WatchdogSec. The service manager
# hears READY=1 once the ports are open, WATCHDOG=1 while the workers' loops
# turn, RELOADING=1 then READY=1 around a SIGHUP, no ping while a worker is
# stopped (the log names it) and pings again once it runs, STOPPING=1 at the
# end. The Makefile runs it in the AF_XDP pass.
# unit_verifies FILE: systemd-analyze verify passes FILE and says nothing of it
# (what it says of the machine's own units is left out).
unit_verifies() {
  local out rc=0
  out=$(systemd-analyze verify --man=no "$1" 2>&1) || rc=$?
  grep -F "$(basename "$1")" <<<"$out" >&2 && return 1
  return "$rc"
}

scenario_service() {
  local unit="$LR_TMP/linerate-gateway@test.service" caps want=0 cap n listener thread worker c1 c2 have
  sed "s|/usr/bin/linerate|$LINERATE|g" dist/systemd/linerate-gateway@.service >"$unit"
  assert "the gateway unit passes systemd-analyze verify" unit_verifies "$unit"
  caps=$(sed -n 's/^CapabilityBoundingSet=//p' "$unit")
  for cap in $caps; do
    case $cap in
      CAP_NET_BIND_SERVICE) n=10 ;; CAP_NET_ADMIN) n=12 ;; CAP_NET_RAW) n=13 ;;
      CAP_IPC_LOCK) n=14 ;; CAP_SYS_ADMIN) n=21 ;; CAP_BPF) n=39 ;;
      *) fail "the test knows no number for $cap"; return 1 ;;
    esac
    want=$((want | (1 << n)))
  done
  topology
  gw_config a "$W4_B:51820"
  gw_config b
  "$PYTHON" tests/net/service_manager.py listen "$LR_TMP/notify.sock" "$LR_TMP/notify.log" 45 &
  listener=$!
  wait_until 5 "the service manager's socket" test -S "$LR_TMP/notify.sock"
  GW_WRAP=(env NOTIFY_SOCKET="$LR_TMP/notify.sock" WATCHDOG_USEC=1000000
    setpriv --bounding-set="-all,$(tr ' ' '\n' <<<"$caps" | sed 's/^CAP_/+/' | tr 'A-Z' 'a-z' | paste -sd, -)")
  gw_start a
  GW_WRAP=()
  gw_start b
  have=$(awk '/^CapBnd:/ { print $2 }' "/proc/$GW_PID_A/status")
  log "    gateway a's bounding set: $have (the unit's: $(printf '%016x' "$want"))"
  assert "gateway a runs with the unit's capabilities alone" test "$((16#$have))" -eq "$want"
  assert "its ports run on AF_XDP under them (no fallback)" \
    eval "grep -q 'port lan: AF_XDP on lan' '$LR_TMP/gw-a.log' && ! grep -q 'falling back' '$LR_TMP/gw-a.log'"
  assert "the service manager heard READY=1, with how the gateway runs" \
    wait_until 10 "READY=1" grep -q 'READY=1;STATUS=gateway up (2 ports' "$LR_TMP/notify.log"
  assert "the tunnel works under the unit's capabilities" ping_ok "$NS_HA" "$H4_B" 3 15
  assert "WATCHDOG=1 while the workers turn" \
    wait_until 5 "two pings" eval "[ \"\$(grep -c WATCHDOG=1 '$LR_TMP/notify.log')\" -ge 2 ]"
  kill -HUP "$GW_PID_A"
  assert "SIGHUP: RELOADING=1, then READY=1 again" wait_until 5 "READY=1 after RELOADING=1" \
    awk '/RELOADING=1;MONOTONIC_USEC=[0-9]+/ { r = NR } /READY=1;STATUS=gateway up, configuration reloaded/ && r { ok = 1 } END { exit !ok }' "$LR_TMP/notify.log"
  # A worker stopped on its own (the last; with one worker, the owner, which is
  # the main thread): the pings stop, at most one already under way.
  worker=$((GW_WORKERS - 1)) thread="worker-$worker"
  [ "$GW_WORKERS" -gt 1 ] || thread=linerate
  "$PYTHON" tests/net/service_manager.py stall "$GW_PID_A" "$thread" 5 >"$LR_TMP/stall.out" &
  local staller=$!
  wait_until 5 "the worker stopped" grep -q stopped "$LR_TMP/stall.out"
  sleep 1.2
  c1=$(grep -c WATCHDOG=1 "$LR_TMP/notify.log")
  sleep 1.2
  c2=$(grep -c WATCHDOG=1 "$LR_TMP/notify.log")
  log "    pings while worker $worker was stopped: $c1, then $c2"
  assert "no WATCHDOG=1 while worker $worker is stopped" test "$c2" -eq "$c1"
  assert "the log names the stalled worker" grep -q "watchdog: worker $worker has not turned its loop" "$LR_TMP/gw-a.log"
  wait "$staller"
  assert "the pings resume once it runs" \
    wait_until 5 "a ping" eval "[ \"\$(grep -c WATCHDOG=1 '$LR_TMP/notify.log')\" -gt $c2 ]"
  kill "$GW_PID_A"
  wait "$GW_PID_A" 2>/dev/null || true
  assert "STOPPING=1 at the end" wait_until 5 "STOPPING=1" grep -q STOPPING=1 "$LR_TMP/notify.log"
  kill "$listener" 2>/dev/null || true
  wait "$listener" 2>/dev/null || true
}

scenario_neighbors() {
  topology
  # A route to a next hop on the LAN that never answers ARP.
  gw_config a "$W4_B:51820" $'\n[[route]]\nprefix = "198.19.50.0/24"\nvia = "198.19.1.99"\nport = "lan"'
  gw_config b
  gw_start a
  gw_start b
  assert "tunnel up" ping_ok "$NS_HA" "$H4_B" 3 15
  assert "host a (IPv4) is a neighbor of gateway a" grep -q "lan .*$H4_A .*reachable" <<<"$(gw_show a neighbors)"
  assert "host b (IPv6) is a neighbor of gateway b" ping_ok "$NS_HA" "$H6_B"
  assert "host b's IPv6 address is in gateway b's table" grep -q "$H6_B" <<<"$(gw_show b neighbors)"
  # Packets for the silent next hop wait, then are dropped when it never answers.
  in_ns "$NS_HA" ping -n -q -c 6 -i 0.2 -W 1 198.19.50.1 >/dev/null 2>&1 || true
  wait_until 10 "the silent next hop to be given up" \
    counter_at_least a 'ip-rewrite\.drop\.neighbor-unresolved|ip-rewrite\.drop\.neighbor-queue-full' 6 ||
    printf 'linerate-counters=1\n\n' | "$PYTHON" tests/net/uapi.py ask "$LR_TMP/gw-a.sock" | grep -v '=0$' >&2
  assert "packets for a silent next hop dropped and counted" \
    test "$(gw_counter a 'ip-rewrite\.drop\.neighbor-unresolved|ip-rewrite\.drop\.neighbor-queue-full')" -ge 6
  sleep 0.5
  assert "no buffer leaked" buffers_all_back a
  assert "the tunnel still works" ping_ok "$NS_HA" "$H4_B"
}

scenario_bad_input() {
  both_up
  assert "tunnel up" ping_ok "$NS_HA" "$H4_B" 3 15
  local mac
  mac=$(ip -n "$NS_GA" -o link show lan | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
  assert "bad frames sent from host a" ip netns exec "$NS_HA" "$PYTHON" tests/net/bad_frames.py eth0 "$mac" "$G4_A" "$H4_A"
  sleep 0.5
  local name
  if [ "$GW_DRIVER" = af_xdp ]; then
    assert "an unknown EtherType passed to the kernel by the XDP program" \
      test "$(gw_counter a 'ethernet-input\.drop\.unknown-ethertype')" -eq 0
  else
    assert "counted: unknown EtherType" test "$(gw_counter a 'ethernet-input\.drop\.unknown-ethertype')" -ge 1
  fi
  for name in 'ip4-input\.drop\.truncated' 'ip4-input\.drop\.bad-checksum' \
    'ip4-input\.drop\.bad-length' 'ip4-input\.drop\.bad-header-length' 'ip-lookup\.drop\.ttl-expired' 'icmp-error\.drop\.for-an-error'; do
    assert "counted: $name" test "$(gw_counter a "$name")" -ge 1
  done
  # Unicast IP inside Ethernet broadcast frames is never routed (RFC 1812 5.3.4),
  # and the LAN's broadcast address is no host to ask ARP for.
  local udp_b0 udp_b1
  udp_b0=$(udp_in "$NS_HB")
  assert "tagged and broadcast frames and directed broadcasts sent from host a" ip netns exec "$NS_HA" /usr/bin/python3 -c '
import sys
from scapy.all import ARP, Dot1Q, Ether, IP, UDP, sendp
mac, src, dst, bcast = sys.argv[1:5]
sendp(Ether(dst="ff:ff:ff:ff:ff:ff") / ARP(op=2, psrc=sys.argv[5], pdst=sys.argv[5], hwdst="ff:ff:ff:ff:ff:ff"), iface="eth0", count=5, verbose=False)
sendp(Ether(dst=mac) / Dot1Q(vlan=100) / IP(src=src, dst=dst) / UDP(sport=9, dport=9) / b"x", iface="eth0", count=50, verbose=False)
sendp(Ether(dst="ff:ff:ff:ff:ff:ff") / IP(src=src, dst=dst) / UDP(sport=9, dport=9) / b"x", iface="eth0", count=200, verbose=False)
sendp(Ether(dst=mac) / IP(src=src, dst=bcast) / UDP(sport=9, dport=9) / b"x", iface="eth0", count=10, verbose=False)
' "$mac" "$H4_A" "$H4_B" 198.19.1.255 "$G4_A"
  wait_until 5 "the broadcast frames to be counted" \
    counter_at_least a 'ethernet-input\.drop\.unicast-in-broadcast' 200 || true
  assert "a gratuitous ARP claiming the gateway's address is counted as a conflict" \
    counter_at_least a 'arp-input\.drop\.address-conflict' 5
  assert "and not learned" not_a_neighbor a "$G4_A"
  assert "and said in the log" grep -q "port lan: the station at .* claims $G4_A, an address of the gateway's own" "$LR_TMP/gw-a.log"
  assert "50 VLAN-tagged frames counted (the port has no VLANs), on either driver" \
    counter_at_least a 'ethernet-input\.drop\.tagged' 50
  assert "200 unicast packets in broadcast frames counted, not routed" \
    counter_at_least a 'ethernet-input\.drop\.unicast-in-broadcast' 200
  assert "10 packets to the LAN's broadcast address counted, not forwarded" \
    counter_at_least a 'ip-lookup\.drop\.directed-broadcast' 10
  udp_b1=$(udp_in "$NS_HB")
  assert_eq "host b received none of them" "$udp_b0" "$udp_b1"
  assert "no neighbor entry for the broadcast address" not_a_neighbor a 198.19.1.255
  log "    ARP requests for 198.19.1.200 counted by arp-input: $(gw_counter a 'arp-input\.drop\.not-for-us') of 2000"
  assert "ARP requests for other addresses counted, not answered" test "$(gw_counter a 'arp-input\.drop\.not-for-us')" -ge 1000
  assert "the gateway still runs" kill -0 "$GW_PID_A"
  assert "the tunnel still works" ping_ok "$NS_HA" "$H4_B"
  sleep 0.5
  assert "no buffer leaked" buffers_all_back a
}

scenario_reload() {
  both_up
  assert "tunnel up" ping_ok "$NS_HA" "$H4_B" 3 15
  make_payload 60
  XFER_TIMEOUT=90
  local hs0
  hs0=$(timeout 5 ip netns exec "$NS_GA" wg show "$WG_A" latest-handshakes | grep "$PUB_B")
  xfer_start "$NS_HA" "$NS_HB" "$H4_B" 4
  sleep 2
  # A second peer and a route to it, added while the transfer runs.
  local extra_pub
  extra_pub=$(wg genkey | wg pubkey)
  cat >>"$LR_TMP/gw-a.toml" <<EOF

[[wireguard.peer]]
public_key = "$extra_pub"
allowed_ips = ["198.19.77.0/24"]
EOF
  # The TOML array of peers belongs to the last [[wireguard]]: appended there.
  printf '\n[[route]]\nprefix = "198.19.77.0/24"\ntunnel = "%s"\n' "$WG_A" >>"$LR_TMP/gw-a.toml"
  kill -HUP "$GW_PID_A"
  wait_until 5 "the new peer to show" has_peer_a "$extra_pub" || gw_log a
  assert "reload added the peer" grep -q "$extra_pub" <<<"$(timeout 5 ip netns exec "$NS_GA" wg show "$WG_A" peers)"
  assert "reload added the route" grep -q "198.19.77.0/24" <<<"$(gw_show a fib)"
  sleep 2
  # Now remove them again.
  gw_config a "$W4_B:51820"
  kill -HUP "$GW_PID_A"
  wait_until 5 "the peer to go" peer_count_a 1 || gw_log a
  assert "reload removed the peer" test "$(timeout 5 ip netns exec "$NS_GA" wg show "$WG_A" peers | wc -l)" -eq 1
  assert "reload removed the route" not_in_fib_a 198.19.77.0/24
  assert "the transfer across both reloads completed, sha256 matches" xfer_finish
  assert_eq "the session was kept: no new handshake" "$hs0" \
    "$(timeout 5 ip netns exec "$NS_GA" wg show "$WG_A" latest-handshakes | grep "$PUB_B")"
  # A bad file is refused and changes nothing.
  echo 'nonsense = [' >>"$LR_TMP/gw-a.toml"
  kill -HUP "$GW_PID_A"
  sleep 1
  assert "a bad file on reload is refused, the gateway keeps running" kill -0 "$GW_PID_A"
  assert "and it said why" grep -q "gw-a.toml:" "$LR_TMP/gw-a.log"
  assert "the tunnel still works" ping_ok "$NS_HA" "$H4_B"
}

# interop WHO: gateway a against wireguard-go in gw-b's place (host mode,
# its wg0 holding gw-b's LAN address); WHO pings first.
interop() {
  local who=$1 ifb
  topology
  ifb=$WG_B
  ip netns del "$NS_HB"
  ip -n "$NS_GB" addr add "$W4_B/24" dev wan
  ip -n "$NS_GB" link set wan up
  in_ns "$NS_GB" sysctl -qw net.ipv6.conf.wan.disable_ipv6=1
  in_ns "$NS_GB" ethtool -K wan tx off >/dev/null
  if [ "$who" = a ]; then gw_config a "$W4_B:51820"; else gw_config a; fi
  gw_start a
  LR_SOCKETS+=("$ifb")
  WG_PROCESS_FOREGROUND=1 ip netns exec "$NS_GB" wireguard-go -f "$ifb" >>"$LR_TMP/wggo.log" 2>&1 &
  wait_until 10 "wireguard-go's socket" test -S "$WG_SOCK_DIR/$ifb.sock"
  local args=(set "$ifb" listen-port 51820 private-key "$LR_TMP/b.key"
    peer "$PUB_A" allowed-ips "198.19.1.0/24,2001:2:0:1::/64")
  [ "$who" = a ] || args+=(endpoint "$W4_A:51820")
  wg_ns "$NS_GB" "${args[@]}"
  ip -n "$NS_GB" addr add "$G4_B/24" dev "$ifb"
  ip -n "$NS_GB" addr add "$G6_B/64" dev "$ifb" nodad
  ip -n "$NS_GB" link set "$ifb" mtu "$TUNNEL_MTU" up
  ip -n "$NS_GB" route add 198.19.1.0/24 dev "$ifb"
  ip -n "$NS_GB" -6 route add 2001:2:0:1::/64 dev "$ifb"
  if [ "$who" = a ]; then
    assert "host a pings wireguard-go's side first (IPv4)" ping_ok "$NS_HA" "$G4_B" 3 15
  else
    assert "wireguard-go pings host a first (IPv4)" ping_ok "$NS_GB" "$H4_A" 3 15
  fi
  assert "IPv6 both ways" ping_ok "$NS_HA" "$G6_B"
  assert "wireguard-go pings back" ping_ok "$NS_GB" "$H6_A"
  make_payload 20
  assert "20 MiB wireguard-go -> host a, sha256 matches" xfer "$NS_GB" "$NS_HA" "$H4_A"
}
# Every worker of each gateway carries part of one tunnel: 64 UDP flows from host
# a (each from its own port) hash over gateway a's LAN queues, and every worker
# encrypts some; gateway a's workers send on their own WAN queues, so gateway b's
# workers each decrypt some. (64 flows all on one of two queues: 1 in 2^63.)
# control_threads_off_worker_cores PID: the gateway's control thread may run on
# every core of ours that no worker is pinned to (all of them when the workers
# take every one), not on worker 0's alone.
control_threads_off_worker_cores() {
  "$PYTHON" - "$1" "$GW_WORKERS" <<'PY'
import glob, os, sys
pid, workers = sys.argv[1], int(sys.argv[2])
def cores(text):
    out = set()
    for part in text.strip().split(","):
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out
pinned = set(range(workers)) if workers > 1 else set()
allowed = os.sched_getaffinity(0)
want = (allowed - pinned) or allowed
for t in glob.glob(f"/proc/{pid}/task/*"):
    if open(f"{t}/comm").read().strip() == "control":
        line = next(l for l in open(f"{t}/status") if l.startswith("Cpus_allowed_list"))
        got = cores(line.split(":")[1])
        print(f"    control thread on cores {sorted(got)}, workers pinned to {sorted(pinned)}", file=sys.stderr)
        sys.exit(0 if got == want else 1)
sys.exit(1)
PY
}

scenario_workers() {
  both_up
  assert "tunnel up" ping_ok "$NS_HA" "$H4_B" 3 15
  assert "the control threads run off the workers' cores" control_threads_off_worker_cores "$GW_PID_A"
  assert "gateway a runs $GW_WORKERS worker(s)" \
    grep -q ", $GW_WORKERS worker" <<<"$(gw_show a interfaces)"
  local i w
  for ((i = 0; i < 64; i++)); do
    in_ns "$NS_HA" bash -c "echo flow-$i >/dev/udp/$H4_B/9" 2>/dev/null || true
  done
  sleep 0.5
  for ((w = 0; w < GW_WORKERS; w++)); do
    assert "gateway a's worker $w encrypted part of the flows" \
      test "$(runtime_packets a "$w" wg-encrypt)" -gt 0
    assert "gateway b's worker $w decrypted part of them" \
      test "$(runtime_packets b "$w" wg-decrypt)" -gt 0
  done
  log "    gateway a, wg-encrypt per worker: $(for ((w = 0; w < GW_WORKERS; w++)); do printf '%s ' "$(runtime_packets a "$w" wg-encrypt)"; done)"
  assert "host b received the flows (counted by the kernel)" \
    test "$(in_ns "$NS_HB" nstat -az -j 2>/dev/null | "$PYTHON" -c 'import json,sys; d=json.load(sys.stdin); print(sum(v.get("UdpInDatagrams",0)+v.get("UdpNoPorts",0) for v in d.values()))')" -ge 64
  sleep 0.5
  assert "no buffer leaked on gateway a" buffers_all_back a
  assert "no buffer leaked on gateway b" buffers_all_back b
}

# kill -9 leaves the XDP program attached: the next start takes it off and runs
# on AF_XDP again. A second gateway on the same interfaces (another control
# socket) is refused before it opens anything; so is an AF_XDP port whose
# interface holds a program that is not ours.
scenario_crash_restart() {
  both_up
  assert "tunnel up" ping_ok "$NS_HA" "$H4_B" 3 15
  kill -KILL "$GW_PID_A"
  wait "$GW_PID_A" 2>/dev/null || true
  if [ "$GW_DRIVER" = af_xdp ]; then
    assert "kill -9 left the XDP program on the LAN port" \
      grep -q 'prog/xdp' <<<"$(ip -n "$NS_GA" -d link show lan)"
  fi
  : >"$LR_TMP/gw-a.log"
  gw_start a
  if [ "$GW_DRIVER" = af_xdp ]; then
    assert "the restart took the left-over programs off" \
      grep -q "took off the XDP program .* left on lan" "$LR_TMP/gw-a.log"
    assert "and runs on AF_XDP again" grep -q "port lan on lan (af_xdp" "$LR_TMP/gw-a.log"
    assert "no fallback to AF_PACKET" not grep -q "falling back" "$LR_TMP/gw-a.log"
  fi
  assert "the tunnel works after the restart" ping_ok "$NS_HA" "$H4_B" 3 15
  # A second gateway, with a control socket of its own, on the same interfaces.
  sed "s|gw-a.sock|gw-c.sock|" "$LR_TMP/gw-a.toml" >"$LR_TMP/gw-c.toml"
  local rc=0
  timeout 20 ip netns exec "$NS_GA" "$LINERATE" gateway -c "$LR_TMP/gw-c.toml" >"$LR_TMP/gw-c.log" 2>&1 || rc=$?
  log "    second gateway: exit $rc: $(tail -1 "$LR_TMP/gw-c.log")"
  assert "a second gateway on the same interfaces is refused" test "$rc" -ne 0 -a "$rc" -ne 124
  assert "naming the first" grep -q "interface lan is in use by another process (linerate gateway, pid $GW_PID_A" "$LR_TMP/gw-c.log"
  assert "before it opened a port" not grep -q "^linerate: port lan on" "$LR_TMP/gw-c.log"
  assert "the first gateway still carries the tunnel" ping_ok "$NS_HA" "$H4_B"
  # Another program on the port's interface.
  if [ "$GW_DRIVER" = af_xdp ]; then
    kill "$GW_PID_A"
    wait "$GW_PID_A" 2>/dev/null || true
    assert "a clean stop takes the program off" not grep -q 'prog/xdp' <<<"$(ip -n "$NS_GA" -d link show lan)"
    clang -O2 -g -target bpf -I "/usr/include/$(uname -m)-linux-gnu" -c tests/net/xdp_pass.c -o "$LR_TMP/xdp_pass.o"
    ip -n "$NS_GA" link set dev lan xdpgeneric obj "$LR_TMP/xdp_pass.o" sec xdp
    rc=0
    timeout 20 ip netns exec "$NS_GA" "$LINERATE" gateway -c "$LR_TMP/gw-a.toml" >"$LR_TMP/gw-d.log" 2>&1 || rc=$?
    log "    with another program on lan: exit $rc: $(tail -1 "$LR_TMP/gw-d.log")"
    assert "an AF_XDP port whose interface holds another program is refused, naming it" \
      grep -q 'interface lan has another XDP program attached ("other_xdp_prog"' "$LR_TMP/gw-d.log"
    assert "and that program is left alone" grep -q 'prog/xdp' <<<"$(ip -n "$NS_GA" -d link show lan)"
    ip -n "$NS_GA" link set dev lan xdpgeneric off
  else
    kill "$GW_PID_A"
    wait "$GW_PID_A" 2>/dev/null || true
  fi
  # A kernel address left on a port.
  ip -n "$NS_GA" addr add 198.19.1.254/24 dev lan
  rc=0
  timeout 20 ip netns exec "$NS_GA" "$LINERATE" gateway -c "$LR_TMP/gw-a.toml" >"$LR_TMP/gw-e.log" 2>&1 || rc=$?
  log "    with a kernel address on lan: exit $rc: $(tail -1 "$LR_TMP/gw-e.log")"
  assert "a port whose interface holds a kernel address is refused, naming it" \
    grep -q "interface lan has the kernel address 198.19.1.254" "$LR_TMP/gw-e.log"
  ip -n "$NS_GA" addr flush dev lan
  # A key file others may read: the gateway says so, as wg does.
  chmod 644 "$LR_TMP/a.key"
  assert "a private key others may read is warned of" \
    grep -q "holds a secret and may be read by others" <<<"$("$LINERATE" gateway --check -c "$LR_TMP/gw-a.toml" 2>&1)"
  chmod 600 "$LR_TMP/a.key"
}


scenario_interop_a_initiates() { interop a; }
scenario_interop_b_initiates() { interop b; }

scenario_metrics() {
  topology
  gw_config a "$W4_B:51820" ''
  # The metrics listen on an address of the gateway host's own (the kernel's).
  ip -n "$NS_GA" addr add 198.18.99.1/32 dev lo
  sed -i "s|^buffers = 8192|buffers = 8192\nmetrics = \"198.18.99.1:9586\"|" "$LR_TMP/gw-a.toml"
  gw_config b
  gw_start a
  gw_start b
  assert "tunnel up" ping_ok "$NS_HA" "$H4_B" 3 15
  local text
  text=$(ip netns exec "$NS_GA" "$PYTHON" -c '
import urllib.request; print(urllib.request.urlopen("http://198.18.99.1:9586/metrics", timeout=5).read().decode())')
  assert "per-peer bytes under the exporters' names" grep -q "^wireguard_peer_sent_bytes_total{interface=\"$WG_A\",public_key=\"$PUB_B\"} [1-9]" <<<"$text"
  assert "last handshake" grep -q '^wireguard_peer_last_handshake_seconds{.*} [1-9]' <<<"$text"
  assert "port counters" grep -q '^linerate_port_rx_packets_total{port="lan"} [1-9]' <<<"$text"
  assert "node drops by reason" grep -q '^linerate_node_drops_total{node="ip4-input",reason="bad-checksum"} 0' <<<"$text"
  assert "port drops, each frame under one reason" grep -q '^linerate_port_drops_total{port="lan",reason="tx-ring-full"} 0' <<<"$text"
  # Five clients that connect and say nothing, and one that sends a byte a second:
  # a scrape beside them is answered at once.
  local idle=() i
  for ((i = 0; i < 5; i++)); do
    ip netns exec "$NS_GA" "$PYTHON" -c '
import socket, time; s = socket.create_connection(("198.18.99.1", 9586)); time.sleep(30)' &
    idle+=($!)
  done
  ip netns exec "$NS_GA" "$PYTHON" -c '
import socket, time
s = socket.create_connection(("198.18.99.1", 9586))
for b in b"GET /metrics HTTP/1.1\r\n" * 2:
    s.send(bytes([b])); time.sleep(1)' &
  idle+=($!)
  wait_until 5 "six idle connections" eval \
    "[ \"\$(ip netns exec '$NS_GA' ss -Htn state established '( dport = :9586 )' | wc -l)\" -ge 6 ]"
  local took
  took=$(ip netns exec "$NS_GA" "$PYTHON" -c '
import time, urllib.request
t = time.monotonic()
body = urllib.request.urlopen("http://198.18.99.1:9586/metrics", timeout=10).read()
assert b"linerate_port_rx_packets_total" in body
print("%.2f" % (time.monotonic() - t))' || echo failed)
  log "    a scrape beside five idle clients and a slow one took $took s"
  assert "a scrape beside idle and slow clients is answered within a second" \
    awk -v t="$took" 'BEGIN { exit !(t + 0 < 1 && t != "failed") }'
  local head
  head=$(ip netns exec "$NS_GA" "$PYTHON" -c '
import urllib.request
r = urllib.request.urlopen(urllib.request.Request("http://198.18.99.1:9586/metrics", method="HEAD"), timeout=5)
print(r.status, r.headers["Content-Length"], len(r.read()))' || true)
  log "    HEAD /metrics: status, length, body bytes: $head"
  assert "HEAD /metrics: 200, the length, no body" grep -Eq '^200 [1-9][0-9]* 0$' <<<"$head"
  kill "${idle[@]}" 2>/dev/null || true
  wait "${idle[@]}" 2>/dev/null || true
}

# ---------------------------------------------------------------------------
# Driver

run_scenarios "gateway" "$GW_DRIVER, $GW_WORKERS worker(s)" \
  "gateway mode ($GW_DRIVER ports, $GW_WORKERS worker(s) each)" "$@"
