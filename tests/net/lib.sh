# shellcheck shell=bash
# Shared helpers for the network-namespace tests and the demo.
#
# Source this file, then call net_setup: it makes two namespaces joined by a
# veth pair, a temp dir, and an EXIT trap that kills every process in those
# namespaces and deletes them, even on failure or Ctrl-C. Call net_setup once
# per process (run each scenario in its own subshell).
#
# Every address used is in 198.18.0.0/15 or 2001:2::/48, the benchmarking
# ranges; nothing here sends a packet anywhere else. Every wait is bounded.
#
# Implementations are named by command or path (target/release/linerate,
# wireguard-go, boringtun-cli): anything that serves the cross-platform
# UAPI socket at /var/run/wireguard/IFACE.sock works.

LR_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

# Underlay (veth) and inner (tunnel) addresses of side a and side b.
# shellcheck disable=SC2034  # used by the scripts that source this file
U4_A=198.18.0.1 U4_B=198.18.0.2 U4_A_ROAM=198.18.0.3
U6_A=2001:2::1 U6_B=2001:2::2
I4_A=198.19.0.1 I4_B=198.19.0.2
I6_A=2001:2:1::1 I6_B=2001:2:1::2
PORT_A=51820 PORT_B=51821
WG_SOCK_DIR=/var/run/wireguard

log() { printf '%s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# pass/fail print one clear line each; assert runs a command and does either.
pass() { printf '    PASS  %s\n' "$*" >&2; }
fail() { printf '    FAIL  %s\n' "$*" >&2; LR_FAILED=1; return 1; }
assert() { # assert DESCRIPTION COMMAND...
  local desc=$1; shift
  if "$@"; then pass "$desc"; else fail "$desc"; fi
}
not() { ! "$@"; } # not COMMAND...: COMMAND fails (for assert)
assert_eq() { # assert_eq DESCRIPTION EXPECTED ACTUAL
  if [ "$2" = "$3" ]; then pass "$1"; else fail "$1 (expected '$2', got '$3')"; fi
}

# report_errors: any other command that fails (and so ends the script under
# set -e) prints one FAIL line naming it, unless a FAIL line came already.
report_errors() {
  set -E
  trap 'on_error $?' ERR
}
on_error() {
  [ -z "${LR_FAILED:-}" ] || return 0
  local i where=
  for ((i = 1; i < ${#FUNCNAME[@]} - 1; i++)); do
    where+=" ${FUNCNAME[i]}:${BASH_LINENO[i - 1]}"
  done
  fail "exit $1 from: $BASH_COMMAND (at$where)"
}

# wait_until SECONDS DESCRIPTION COMMAND...: polls every 0.1 s, at most
# SECONDS*10 times; fails with DESCRIPTION if COMMAND never succeeds.
wait_until() {
  local secs=$1 desc=$2 i; shift 2
  for ((i = 0; i < secs * 10; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  fail "timed out after ${secs}s waiting for $desc"
}

# resolve_impl NAME: prints an absolute path to the implementation's binary.
resolve_impl() {
  local impl=$1 path
  case $impl in
    */*) path=$(cd "$LR_ROOT" && realpath -e -- "$impl" 2>/dev/null) || path= ;;
    *) path=$(command -v -- "$impl" 2>/dev/null) || path= ;;
  esac
  if [ -z "$path" ] || [ ! -x "$path" ]; then
    die "implementation '$impl' not found (for linerate: make build)"
  fi
  printf '%s\n' "$path"
}

# impl_name PATH: short name for tables (linerate, wireguard-go, boringtun-cli).
impl_name() { basename -- "$1"; }

# Real python, not a version-manager shim (it runs under ip netns exec).
PYTHON=$(python3 -c 'import sys; print(sys.executable)')

in_ns() { local ns=$1; shift; ip netns exec "$ns" "$@"; }
wg_ns() { local ns=$1; shift; timeout 10 ip netns exec "$ns" wg "$@"; }

# ---------------------------------------------------------------------------
# Namespaces

LR_NAMESPACES=()
LR_SOCKETS=()
LR_TMP=

# ns_add NAME: a namespace of this test (removed by net_cleanup), loopback up.
# The test listeners' ports (XFER_PORT and the few above it) are kept out of
# its ephemeral range, so that a connection's own source port can never hold
# the port a later listener binds in the same namespace.
ns_add() {
  ip netns add "$1"; LR_NAMESPACES+=("$1")
  ip -n "$1" link set lo up
  in_ns "$1" sysctl -qw net.ipv4.ip_local_reserved_ports="$XFER_PORT-$((XFER_PORT + 9))"
}

net_cleanup() {
  local rc=$? ns sock i
  local -a pids
  trap - EXIT INT TERM ERR
  set +e
  # Everything in our namespaces is ours: TERM, up to 3 s, then KILL.
  for ((i = 0; i < 31; i++)); do
    pids=()
    for ns in "${LR_NAMESPACES[@]}"; do mapfile -t -O "${#pids[@]}" pids < <(ip netns pids "$ns" 2>/dev/null); done
    [ ${#pids[@]} -gt 0 ] || break
    if [ "$i" -eq 0 ]; then kill -TERM "${pids[@]}" 2>/dev/null
    elif [ "$i" -eq 30 ]; then kill -KILL "${pids[@]}" 2>/dev/null
    else sleep 0.1
    fi
  done
  wait 2>/dev/null
  for ns in "${LR_NAMESPACES[@]}"; do ip netns del "$ns" 2>/dev/null; done
  for sock in "${LR_SOCKETS[@]}"; do rm -f -- "$WG_SOCK_DIR/$sock.sock"; done
  [ -z "$LR_TMP" ] || rm -rf -- "$LR_TMP"
  exit "$rc"
}

# net_setup: namespaces $NS_A and $NS_B joined by a veth pair ($VETH_A, $VETH_B)
# with the underlay addresses; $LR_TMP a private temp dir; interface names
# $IF_A and $IF_B for the tunnels. Names are unique per process.
net_setup() {
  local id=$BASHPID
  NS_A="lr-a-$id" NS_B="lr-b-$id"
  VETH_A="ua$id" VETH_B="ub$id"
  IF_A="wa$id" IF_B="wb$id"
  LR_SOCKETS+=("$IF_A" "$IF_B")
  trap net_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  LR_TMP=$(mktemp -d /tmp/linerate-net.XXXXXX)
  ns_add "$NS_A"
  ns_add "$NS_B"
  ip link add "$VETH_A" netns "$NS_A" type veth peer name "$VETH_B" netns "$NS_B"
  local ns veth u4 u6
  for ns in "$NS_A" "$NS_B"; do
    if [ "$ns" = "$NS_A" ]; then veth=$VETH_A u4=$U4_A u6=$U6_A; else veth=$VETH_B u4=$U4_B u6=$U6_B; fi
    # Keep secondary addresses when the primary goes (the roaming test).
    in_ns "$ns" sysctl -q -w net.ipv4.conf.all.promote_secondaries=1
    ip -n "$ns" addr add "$u4/24" dev "$veth"
    ip -n "$ns" addr add "$u6/64" dev "$veth" nodad
    ip -n "$ns" link set "$veth" up
  done
  wait_until 5 "underlay ping" in_ns "$NS_A" ping -n -q -c 1 -W 1 "$U4_B"
}

# ---------------------------------------------------------------------------
# Implementations

# impl_argv PATH IFACE: the foreground command line for an implementation.
impl_argv() {
  local impl=$1 iface=$2
  case $(impl_name "$impl") in
    boringtun*) printf '%s\n' "$impl" -f --disable-drop-privileges "$iface" ;;
    *) printf '%s\n' "$impl" -f "$iface" ;;
  esac
}

# impl_start NS PATH IFACE: starts the implementation in the foreground in
# the background, waits for its UAPI socket, and sets IMPL_PID. Its output
# goes to $LR_TMP/IFACE.log.
impl_start() {
  local ns=$1 impl=$2 iface=$3 argv
  mapfile -t argv < <(impl_argv "$impl" "$iface")
  # WG_PROCESS_FOREGROUND=1 silences wireguard-go's "use the kernel module" banner.
  WG_PROCESS_FOREGROUND=1 ip netns exec "$ns" "${argv[@]}" >>"$LR_TMP/$iface.log" 2>&1 &
  IMPL_PID=$!
  if ! wait_until 10 "$(impl_name "$impl") UAPI socket for $iface" impl_ready "$ns" "$iface" "$IMPL_PID"; then
    impl_log "$iface"
    return 1
  fi
}

impl_ready() { # impl_ready NS IFACE PID
  kill -0 "$3" 2>/dev/null || return 2
  [ -S "$WG_SOCK_DIR/$2.sock" ] && wg_ns "$1" show "$2" >/dev/null 2>&1 && ip -n "$1" link show "$2" >/dev/null 2>&1
}

# impl_log IFACE: prints the last lines an implementation logged.
impl_log() {
  [ -s "$LR_TMP/$1.log" ] || return 0
  log "    --- last lines of $1's log ---"
  tail -n 20 -- "$LR_TMP/$1.log" | sed 's/^/    | /' >&2
}

# Keys for side a and b: $LR_TMP/{a,b}.key, public keys in PUB_A and PUB_B.
make_keys() {
  local s
  for s in a b; do
    (umask 077; wg genkey >"$LR_TMP/$s.key")
  done
  PUB_A=$(wg pubkey <"$LR_TMP/a.key")
  PUB_B=$(wg pubkey <"$LR_TMP/b.key")
}

# side_configure SIDE(a|b) [ENDPOINT] [EXTRA wg set PEER ARGS...]: keys, the
# listen port and the one peer with `wg set`, then inner addresses with `ip`.
side_configure() {
  local side=$1 endpoint=${2:-}; shift; [ $# -eq 0 ] || shift
  local ns iface port peer i4 i6 p4 p6
  if [ "$side" = a ]; then
    ns=$NS_A iface=$IF_A port=$PORT_A peer=$PUB_B i4=$I4_A i6=$I6_A p4=$I4_B p6=$I6_B
  else
    ns=$NS_B iface=$IF_B port=$PORT_B peer=$PUB_A i4=$I4_B i6=$I6_B p4=$I4_A p6=$I6_A
  fi
  local args=(set "$iface" listen-port "$port" private-key "$LR_TMP/$side.key"
    peer "$peer" allowed-ips "$p4/32,$p6/128")
  [ -z "$endpoint" ] || args+=(endpoint "$endpoint")
  wg_ns "$ns" "${args[@]}" "$@"
  ip -n "$ns" addr add "$i4/24" dev "$iface"
  ip -n "$ns" addr add "$i6/64" dev "$iface" nodad
  ip -n "$ns" link set "$iface" mtu 1420 up
}

# endpoint_of SIDE OUTER(4|6): the underlay endpoint of a side's socket.
endpoint_of() {
  case $1$2 in
    a4) echo "$U4_A:$PORT_A" ;; b4) echo "$U4_B:$PORT_B" ;;
    a6) echo "[$U6_A]:$PORT_A" ;; b6) echo "[$U6_B]:$PORT_B" ;;
  esac
}

# pair_up IMPL_A IMPL_B OUTER(4|6) WHO(a|b|both): namespaces, both
# implementations started (pids in PID_A and PID_B) and configured. WHO names the side(s) that get the
# other's endpoint; a side without one must learn it from the handshake.
pair_up() {
  local impl_a=$1 impl_b=$2 outer=$3 who=$4 ep_a='' ep_b=''
  net_setup
  make_keys
  case $who in a | both) ep_a=$(endpoint_of b "$outer") ;; esac
  case $who in b | both) ep_b=$(endpoint_of a "$outer") ;; esac
  impl_start "$NS_A" "$impl_a" "$IF_A"
  # shellcheck disable=SC2034  # read by the scenarios
  PID_A=$IMPL_PID
  impl_start "$NS_B" "$impl_b" "$IF_B"
  # shellcheck disable=SC2034
  PID_B=$IMPL_PID
  side_configure a "$ep_a"
  side_configure b "$ep_b"
}

# ping_ok NS ADDR [COUNT] [DEADLINE]: COUNT replies within DEADLINE seconds.
ping_ok() {
  local ns=$1 addr=$2 count=${3:-3} deadline=${4:-10}
  in_ns "$ns" ping -n -q -c "$count" -i 0.2 -W 1 -w "$deadline" "$addr" >/dev/null 2>&1
}

# tcp_through_tunnel SECONDS PORT [IPERF3 ARGS...]: iperf3 from NS_A to I4_B
# through the tunnel pair_up made, and the two daemons' CPU time over the same
# interval; prints key=value lines: tcp_mbps, tcp_retransmits, cpu_s_sender,
# cpu_s_receiver.
tcp_through_tunnel() {
  local seconds=$1 port=$2 hz ta0 tb0 ta1 tb1
  shift 2
  timeout $((seconds + 30)) ip netns exec "$NS_B" iperf3 -s -1 -B "$I4_B" -p "$port" \
    >"$LR_TMP/iperf-server.log" 2>&1 &
  wait_until 5 "iperf3 server" eval "[ -n \"\$(ip netns exec '$NS_B' ss -Hltn 'sport = :$port')\" ]"
  hz=$(getconf CLK_TCK)
  ta0=$(cpu_ticks "$PID_A") tb0=$(cpu_ticks "$PID_B")
  timeout $((seconds + 30)) ip netns exec "$NS_A" \
    iperf3 -c "$I4_B" -p "$port" -t "$seconds" -J "$@" >"$LR_TMP/iperf.json"
  ta1=$(cpu_ticks "$PID_A") tb1=$(cpu_ticks "$PID_B")
  "$PYTHON" - "$LR_TMP/iperf.json" <<'PY'
import json, sys
end = json.load(open(sys.argv[1]))["end"]
print("tcp_mbps=%.1f" % (end["sum_received"]["bits_per_second"] / 1e6))
print("tcp_retransmits=%d" % end["sum_sent"].get("retransmits", 0))
PY
  echo "cpu_s_sender=$(awk -v t=$((ta1 - ta0)) -v hz="$hz" 'BEGIN { printf "%.2f", t / hz }')"
  echo "cpu_s_receiver=$(awk -v t=$((tb1 - tb0)) -v hz="$hz" 'BEGIN { printf "%.2f", t / hz }')"
}

# cpu_ticks PID...: utime+stime of the processes, all threads, in clock ticks.
cpu_ticks() {
  local pid total=0 stat rest f
  for pid in "$@"; do
    stat=$(cat "/proc/$pid/stat" 2>/dev/null) || continue
    rest=${stat##*) }          # fields from 3 on; comm may hold spaces
    read -r -a f <<<"$rest"
    total=$((total + f[11] + f[12]))   # fields 14 and 15
  done
  echo "$total"
}

# ---------------------------------------------------------------------------
# TCP transfers through the tunnel (tests/net/xfer.py on both ends)

XFER_PORT=45000
# Seconds either end of one transfer may take; a scenario may lower it so that a
# stalled tunnel fails in good time.
XFER_TIMEOUT=120

# make_payload MIB: $LR_TMP/payload of MIB mebibytes of random bytes, its
# sha256 in PAYLOAD_SHA.
make_payload() {
  head -c "$1M" /dev/urandom >"$LR_TMP/payload"
  PAYLOAD_SHA=$(sha256sum "$LR_TMP/payload" | cut -d' ' -f1)
  PAYLOAD_BYTES=$(stat -c %s "$LR_TMP/payload")
}

# xfer_start FROM_NS TO_NS TO_ADDR [MBPS]: starts sending the payload over TCP
# (paced to MBPS megabytes/s if given); sets XFER_SEND_PID and XFER_RECV_PID.
xfer_start() {
  local from=$1 to=$2 addr=$3 mbps=${4:-}
  rm -f "$LR_TMP/xfer.out"
  timeout "$XFER_TIMEOUT" ip netns exec "$to" "$PYTHON" "$LR_ROOT/tests/net/xfer.py" recv "$addr" "$XFER_PORT" \
    >"$LR_TMP/xfer.out" 2>"$LR_TMP/xfer-recv.err" &
  XFER_RECV_PID=$!
  wait_until 15 "the receiver to listen" xfer_listening_or_gone "$to" "$XFER_RECV_PID" || true
  if ! xfer_listening "$to"; then
    xfer_receiver_failed "$to"
    return 1
  fi
  XFER_T0=$EPOCHREALTIME
  timeout "$XFER_TIMEOUT" ip netns exec "$from" "$PYTHON" "$LR_ROOT/tests/net/xfer.py" send "$addr" "$XFER_PORT" \
    "$LR_TMP/payload" ${mbps:+"$mbps"} 2>"$LR_TMP/xfer-send.err" &
  XFER_SEND_PID=$!
}

xfer_listening() { [ -n "$(ip netns exec "$1" ss -Hltn "sport = :$XFER_PORT")" ]; }

# xfer_listening_or_gone NS PID: the receiver listens, or has exited (then
# there is nothing to wait for).
xfer_listening_or_gone() { xfer_listening "$1" || ! kill -0 "$2" 2>/dev/null; }

# xfer_receiver_failed NS: why no receiver listens. Its exit status and error
# output, and what holds the port in its namespace.
xfer_receiver_failed() {
  local rc=running
  if ! kill -0 "$XFER_RECV_PID" 2>/dev/null; then rc=0; wait "$XFER_RECV_PID" || rc=$?; fi
  log "    receiver: $rc; $(tr '\n' ' ' <"$LR_TMP/xfer-recv.err" 2>/dev/null | tail -c 400)"
  log "    port $XFER_PORT in $1: $(ip netns exec "$1" ss -Htan "sport = :$XFER_PORT" | tr '\n' ';')"
  kill "$XFER_RECV_PID" 2>/dev/null || true
}

# xfer_finish: waits (bounded by the timeouts above) for both ends, then
# checks the byte count and sha256 the receiver saw.
xfer_finish() {
  local send_rc=0 recv_rc=0 got secs
  wait "$XFER_SEND_PID" || send_rc=$?
  wait "$XFER_RECV_PID" || recv_rc=$?
  secs=$(awk -v a="$XFER_T0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  got=$(cat "$LR_TMP/xfer.out" 2>/dev/null || true)
  if [ "$send_rc" -ne 0 ] || [ "$recv_rc" -ne 0 ]; then
    log "    sender exit $send_rc, receiver exit $recv_rc (124: timed out)"
    cat "$LR_TMP/xfer-send.err" "$LR_TMP/xfer-recv.err" >&2 || true
    return 1
  fi
  if [ "$got" != "$PAYLOAD_SHA $PAYLOAD_BYTES" ]; then
    log "    sent '$PAYLOAD_SHA $PAYLOAD_BYTES', received '$got'"
    return 1
  fi
  log "    $PAYLOAD_BYTES bytes in ${secs}s"
}

# xfer FROM_NS TO_NS TO_ADDR [MBPS]: one whole transfer.
xfer() { xfer_start "$@" && xfer_finish; }

# dgram_ok FROM_NS TO_NS TO_ADDR BYTES: one UDP datagram of BYTES random bytes
# from FROM_NS to TO_ADDR arrives whole (same sha256 and length).
dgram_ok() {
  local from=$1 to=$2 addr=$3 bytes=$4 port=$((XFER_PORT + 1)) rpid sent got
  timeout 10 ip netns exec "$to" "$PYTHON" "$LR_ROOT/tests/net/xfer.py" dgram-recv "$addr" "$port" 5 \
    >"$LR_TMP/dgram.out" 2>"$LR_TMP/dgram.err" &
  rpid=$!
  wait_until 5 "the datagram receiver to bind" udp_bound "$to" "$port" || return 1
  sent=$(timeout 10 ip netns exec "$from" "$PYTHON" "$LR_ROOT/tests/net/xfer.py" dgram-send "$addr" "$port" "$bytes")
  if ! wait "$rpid"; then
    log "    receiver: $(cat "$LR_TMP/dgram.err")"
    return 1
  fi
  got=$(cat "$LR_TMP/dgram.out")
  [ "$got" = "$sent" ] || { log "    sent '$sent', received '$got'"; return 1; }
}

udp_bound() { [ -n "$(ip netns exec "$1" ss -Hlun "sport = :$2")" ]; }

# dgram_whole FROM_NS TO_NS TO_ADDR BYTES TO_IFACE: a datagram of BYTES sent with
# fragmenting forbidden (IPv4: DF) arrives intact, in one IP packet of BYTES and
# its headers as TO_IFACE (the far tunnel interface) saw it, with no IP fragment
# of UDP seen there meanwhile.
dgram_whole() {
  local from=$1 to=$2 addr=$3 bytes=$4 iface=$5 port=$((XFER_PORT + 2)) rpid sent got want
  want=$((bytes + 28))
  case $addr in *:*) want=$((bytes + 48)) ;; esac
  timeout 10 ip netns exec "$to" "$PYTHON" "$LR_ROOT/tests/net/xfer.py" dgram-recv "$addr" "$port" 5 "$iface" \
    >"$LR_TMP/dgram.out" 2>"$LR_TMP/dgram.err" &
  rpid=$!
  wait_until 5 "the datagram receiver to bind" udp_bound "$to" "$port" || return 1
  sent=$(timeout 10 ip netns exec "$from" "$PYTHON" "$LR_ROOT/tests/net/xfer.py" dgram-send "$addr" "$port" "$bytes" df) || {
    log "    the sender refused it (EMSGSIZE: its route's MTU is too small)"
    wait "$rpid" || true
    return 1
  }
  if ! wait "$rpid"; then
    log "    receiver: $(cat "$LR_TMP/dgram.err")"
    return 1
  fi
  got=$(cat "$LR_TMP/dgram.out")
  log "    $addr: sent '$sent', received '$got' (sha256, bytes, IP packet length on $iface, fragments seen)"
  [ "$got" = "$sent $want 0" ]
}

# ---------------------------------------------------------------------------
# UAPI and linerate's own counters

# is_linerate PATH: whether the implementation is linerate (its extra counters).
is_linerate() { [ "$(impl_name "$1")" = linerate ]; }

# uapi_ask NS IFACE < REQUEST: the raw reply to one request (tests/net/uapi.py).
uapi_ask() {
  ip netns exec "$1" "$PYTHON" "$LR_ROOT/tests/net/uapi.py" ask "$WG_SOCK_DIR/$2.sock"
}

# lr_counters NS IFACE: linerate's raw "name=value" counter lines.
lr_counters() { printf 'linerate-counters=1\n\n' | uapi_ask "$1" "$2"; }

# lr_counter NS IFACE REGEX: the sum of the counters whose name matches REGEX
# (awk ERE, anchored), or "none" if none does. Drop counters are only listed
# once non-zero, so a caller may read "none" as 0 for those.
lr_counter() {
  lr_counters "$1" "$2" | awk -F= -v re="^($3)\$" '$1 ~ re { s += $2; n++ } END { print (n ? s : "none") }'
}
