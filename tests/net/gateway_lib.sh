# shellcheck shell=bash
# The gateway topology in namespaces, for tests/net/gateway.sh and
# scripts/gateway-bench.sh (source tests/net/lib.sh first):
#
#   host-a ── lan [gw-a] wan ──── wan [gw-b] lan ── host-b
#   198.19.1.10    198.18.2.1    198.18.2.2     198.19.3.10
#
# topology makes the namespaces, links and keys; gw_config and gw_start make
# and start a linerate gateway on each side. Set LINERATE (the binary),
# GW_DRIVER (af_xdp or af_packet) and GW_WORKERS (workers per gateway, pinned
# to cores 0 up; every link gets that many queues each way) first.

H4_A=198.19.1.10 H4_B=198.19.3.10
H6_A=2001:2:0:1::10 H6_B=2001:2:0:3::10
G4_A=198.19.1.1 G4_B=198.19.3.1
G6_A=2001:2:0:1::1 G6_B=2001:2:0:3::1
W4_A=198.18.2.1 W4_B=198.18.2.2
TUNNEL_MTU=1420

# ---------------------------------------------------------------------------
# Topology

# sites TAG LAN: host-a, gw-a, gw-b and host-b's namespaces ($NS_HA, $NS_GA,
# $NS_GB, $NS_HB, named from TAG and this process) joined by three links with
# $GW_WORKERS queues each way (host-a's eth0 to gw-a's LAN, WAN to WAN, gw-b's
# LAN to host-b's eth0; the gateways' LAN ports named LAN); the cleanup trap;
# $LR_TMP; a WireGuard key pair per gateway ($LR_TMP/a.key, $PUB_A; b likewise);
# $WG_A and $WG_B, names for their WireGuard interfaces.
sites() {
  local tag=$1 lan=$2 id=$BASHPID ns s
  WG_A="${tag}a$id" WG_B="${tag}b$id"
  NS_HA="lr-${tag}ha-$id" NS_GA="lr-${tag}ga-$id" NS_GB="lr-${tag}gb-$id" NS_HB="lr-${tag}hb-$id"
  trap net_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  LR_TMP=$(mktemp -d "/tmp/linerate-$tag.XXXXXX")
  for ns in "$NS_HA" "$NS_GA" "$NS_GB" "$NS_HB"; do
    ns_add "$ns"
  done
  local q=(numtxqueues "${GW_WORKERS:-1}" numrxqueues "${GW_WORKERS:-1}")
  ip link add eth0 netns "$NS_HA" "${q[@]}" type veth peer name "$lan" netns "$NS_GA" "${q[@]}"
  ip link add wan netns "$NS_GA" "${q[@]}" type veth peer name wan netns "$NS_GB" "${q[@]}"
  ip link add "$lan" netns "$NS_GB" "${q[@]}" type veth peer name eth0 netns "$NS_HB" "${q[@]}"
  for s in a b; do (umask 077; wg genkey >"$LR_TMP/$s.key"); done
  PUB_A=$(wg pubkey <"$LR_TMP/a.key")
  PUB_B=$(wg pubkey <"$LR_TMP/b.key")
}

# topology: the gateway sites, hosts routed through their gateways.
topology() {
  local ns
  sites gw lan
  host_side "$NS_HA" "$H4_A" "$H6_A" "$G4_A" "$G6_A"
  host_side "$NS_HB" "$H4_B" "$H6_B" "$G4_B" "$G6_B"
  for ns in "$NS_GA" "$NS_GB"; do gateway_side "$ns" lan wan; done
}

# jumbo_topology: the topology with every link at 9216 bytes.
jumbo_topology() {
  local ns
  topology
  for ns in "$NS_HA" "$NS_HB"; do ip -n "$ns" link set eth0 mtu 9216; done
  for ns in "$NS_GA" "$NS_GB"; do ip -n "$ns" link set lan mtu 9216; ip -n "$ns" link set wan mtu 9216; done
}

# jumbo_ports SIDE [DRIVER]: that gateway's file (gw_config's or another made
# with gw_head) with both ports at MTU 9216 on DRIVER (af_packet unless given).
jumbo_ports() {
  sed -i -e "s/^driver = \"af_xdp\"\$/driver = \"${2:-af_packet}\"/" \
    -e '/^interface = "\(lan\|wan\)"$/a mtu = 9216' "$LR_TMP/gw-$1.toml"
}

# xdp_jumbo_ports SIDE: on AF_XDP, that gateway's ports run multi-buffer (they
# did not fall back to AF_PACKET), as its log says.
xdp_jumbo_ports() {
  [ "$GW_DRIVER" != af_xdp ] && return 0
  [ "$(grep -c 'AF_XDP on .* multi-buffer' "$LR_TMP/gw-$1.log")" -gt 0 ] &&
    ! grep -q 'falling back to AF_PACKET' "$LR_TMP/gw-$1.log"
}

# jumbo_through MTU: over the jumbo topology, whose tunnel carries MTU: a DF
# packet of the links' 9216 bytes is answered with fragmentation needed (IPv4)
# or Packet Too Big (IPv6) quoting MTU, before any other large packet has
# taught host a the path's; full-size DF pings cross both ways and over IPv6;
# TCP carries 20 MiB each way, sha256 compared.
jumbo_through() {
  local mtu=$1 out
  out=$(in_ns "$NS_HA" ping -n -c 1 -W 2 -M do -s $((9216 - 28)) "$H4_B" 2>&1 || true)
  log "    ping -M do -s 9188: $(head -2 <<<"$out" | tail -1)"
  assert "a 9216-byte DF packet: fragmentation needed, mtu = $mtu" grep -q "mtu = $mtu" <<<"$out"
  out=$(in_ns "$NS_HA" ping -6 -n -c 1 -W 2 -M do -s $((9216 - 48)) "$H6_B" 2>&1 || true)
  log "    ping -6 -M do -s 9168: $(head -2 <<<"$out" | tail -1)"
  assert "IPv6: a 9216-byte packet: packet too big, mtu = $mtu" grep -qiE "mtu ?= ?$mtu" <<<"$out"
  assert "$mtu-byte DF pings a -> b cross whole" full_size_pings "$NS_HA" "$H4_B" $((mtu - 28))
  assert "$mtu-byte DF pings b -> a cross whole" full_size_pings "$NS_HB" "$H4_A" $((mtu - 28))
  assert "$mtu-byte IPv6 pings a -> b cross whole" full_size_pings "$NS_HA" "$H6_B" $((mtu - 48))
  make_payload 20
  assert "20 MiB host a -> host b at MTU $mtu, sha256 matches" xfer "$NS_HA" "$NS_HB" "$H4_B"
  assert "20 MiB host b -> host a, sha256 matches" xfer "$NS_HB" "$NS_HA" "$H4_A"
}

# full_size_pings NS ADDR SIZE: three DF pings of SIZE payload bytes, none lost.
full_size_pings() {
  in_ns "$1" ping -n -q -c 3 -i 0.2 -W 2 -M do -s "$3" "$2" 2>&1 | grep -q ' 0% packet loss'
}

# host_side NS ADDR4 ADDR6 GW4 GW6: a LAN host behind a gateway. The kernel's
# TX checksum offload is off: on veth it would hand the gateway TCP segments
# with their checksums not yet computed, which a router passes on as they are.
host_side() {
  ip -n "$1" addr add "$2/24" dev eth0
  ip -n "$1" addr add "$3/64" dev eth0 nodad
  ip -n "$1" link set eth0 up
  in_ns "$1" ethtool -K eth0 tx off >/dev/null
  ip -n "$1" route add default via "$4"
  ip -n "$1" -6 route add default via "$5"
}

# gateway_side NS PORT...: the ports a gateway takes over: up, no kernel
# addresses (no IPv6 either, so the kernel sends nothing of its own on them),
# TX checksum offload off for the same reason as the hosts'.
gateway_side() {
  local ns=$1 p; shift
  for p in "$@"; do
    in_ns "$ns" sysctl -qw "net.ipv6.conf.$p.disable_ipv6=1"
    ip -n "$ns" link set "$p" up
    in_ns "$ns" ethtool -K "$p" tx off >/dev/null
    # Transmit queue q for core q (XPS), as NIC drivers set it up: a worker's
    # AF_PACKET frames leave on its own queue (an AF_XDP socket's do anyway), so
    # the far gateway's workers share the tunnel's traffic as the near one's do.
    # (A single-queue device takes no XPS map.)
    local q
    for ((q = 0; ${GW_WORKERS:-1} > 1 && q < GW_WORKERS; q++)); do
      in_ns "$ns" sh -c "printf '%x' $((1 << q)) >/sys/class/net/$p/queues/tx-$q/xps_cpus"
    done
  done
}

# gw_head SIDE LAN4 LAN6 WAN...: the [gateway] table (its control socket, a
# worker per core from 0) and the LAN and WAN ports of that gateway's file, on
# stdout; WAN... are the WAN port's addresses with their prefix lengths.
gw_head() {
  local side=$1 lan4=$2 lan6=$3 cores="" c wan="" a
  shift 3
  if [ "${GW_WORKERS:-1}" -gt 1 ]; then
    cores="cores = [0"
    for ((c = 1; c < GW_WORKERS; c++)); do cores+=", $c"; done
    cores+="]"
  fi
  for a in "$@"; do wan+="${wan:+, }\"$a\""; done
  cat <<EOF
[gateway]
control = "$LR_TMP/gw-$side.sock"
buffers = 8192
$cores

[[port]]
name = "lan"
interface = "lan"
driver = "$GW_DRIVER"
addresses = ["$lan4/24", "$lan6/64"]

[[port]]
name = "wan"
interface = "wan"
driver = "$GW_DRIVER"
addresses = [$wan]

EOF
}

# gw_config SIDE(a|b) [ENDPOINT] [EXTRA TOML]: the config file of a gateway.
gw_config() {
  local side=$1 endpoint=${2:-} extra=${3:-} lan4 lan6 wan4 net4 net6 peer wgname
  if [ "$side" = a ]; then
    lan4=$G4_A lan6=$G6_A wan4=$W4_A net4=198.19.3.0/24 net6=2001:2:0:3::/64 peer=$PUB_B wgname=$WG_A
  else
    lan4=$G4_B lan6=$G6_B wan4=$W4_B net4=198.19.1.0/24 net6=2001:2:0:1::/64 peer=$PUB_A wgname=$WG_B
  fi
  {
    gw_head "$side" "$lan4" "$lan6" "$wan4/24"
    cat <<EOF
[[wireguard]]
name = "$wgname"
private_key_file = "$side.key"
listen_port = 51820
mtu = $TUNNEL_MTU

[[wireguard.peer]]
public_key = "$peer"
${endpoint:+endpoint = \"$endpoint\"}
allowed_ips = ["$net4", "$net6"]

[[route]]
prefix = "$net4"
tunnel = "$wgname"

[[route]]
prefix = "$net6"
tunnel = "$wgname"
$extra
EOF
  } >"$LR_TMP/gw-$side.toml"
}

# gw_start SIDE: starts that gateway in its namespace and waits for its
# control socket; GW_PID_<SIDE> is its pid, its log $LR_TMP/gw-SIDE.log. The
# command in the array GW_WRAP, if any, runs it (and must exec it, keeping the
# pid): a service manager's environment, fewer capabilities.
GW_WRAP=()
gw_start() {
  local side=$1 ns pid
  if [ "$side" = a ]; then ns=$NS_GA; else ns=$NS_GB; fi
  ip netns exec "$ns" ${GW_WRAP[@]+"${GW_WRAP[@]}"} "$LINERATE" gateway -c "$LR_TMP/gw-$side.toml" >>"$LR_TMP/gw-$side.log" 2>&1 &
  pid=$!
  printf -v "GW_PID_${side^^}" '%s' "$pid"
  if [ "$side" = a ]; then LR_SOCKETS+=("$WG_A"); else LR_SOCKETS+=("$WG_B"); fi
  if ! wait_until 20 "gateway $side to answer on its control socket" gw_ready "$side" "$pid"; then
    gw_log "$side"
    return 1
  fi
}

gw_ready() { kill -0 "$2" 2>/dev/null || return 2; gw_show "$1" interfaces >/dev/null 2>&1; }

# gw_show SIDE WHAT: `linerate show WHAT` of that gateway.
gw_show() { timeout 10 "$LINERATE" show "$2" --socket "$LR_TMP/gw-$1.sock"; }

# gw_counter SIDE REGEX: the sum of that gateway's counters whose name
# matches REGEX (anchored), 0 if none (drop counters are listed once non-zero).
gw_counter() {
  printf 'linerate-counters=1\n\n' | "$PYTHON" tests/net/uapi.py ask "$LR_TMP/gw-$1.sock" |
    awk -F= -v re="^($2)\$" '$1 ~ re { s += $2 } END { print s + 0 }'
}

# counter_at_least SIDE REGEX N: whether those counters add up to N or more
# (for wait_until, which runs it again each time).
counter_at_least() { [ "$(gw_counter "$1" "$2")" -ge "$3" ]; }

# peers_a: the public keys of gateway a's WireGuard peers.
peers_a() { timeout 5 ip netns exec "$NS_GA" wg show "$WG_A" peers; }
has_peer_a() { peers_a | grep -q "$1"; }
peer_count_a() { [ "$(peers_a | wc -l)" -eq "$1" ]; }

not_in_fib_a() { ! gw_show a fib | grep -q "$1"; }

gw_log() {
  [ -s "$LR_TMP/gw-$1.log" ] || return 0
  log "    --- last lines of gateway $1's log ---"
  tail -n 20 -- "$LR_TMP/gw-$1.log" | sed 's/^/    | /' >&2
}

# both_up: the topology with both gateways running; a knows b's endpoint.
both_up() {
  topology
  gw_config a "$W4_B:51820"
  gw_config b
  gw_start a
  gw_start b
}

# buffers_all_back SIDE: once idle, every packet buffer of the gateway is free
# or lent to its drivers (none leaked).
buffers_all_back() {
  local total free driver
  total=$(gw_counter "$1" 'buffers\.total')
  free=$(gw_counter "$1" 'buffers\.free')
  driver=$(gw_counter "$1" 'buffers\.driver')
  log "    gateway $1: $total buffers, $free free, $driver with the drivers"
  [ "$total" -gt 0 ] && [ $((free + driver)) -eq "$total" ]
}


# ---------------------------------------------------------------------------
# The scenario driver of gateway.sh and l2.sh

# run_scenarios NAME DETAIL TITLE [SCENARIO...]: with "__run S" as arguments
# (how it calls itself), runs scenario_S in this process; else runs each named
# scenario (all of $SCENARIOS by default) in its own process, bounded by
# $SCENARIO_TIMEOUT, and prints a table under TITLE and "N passed, M failed";
# returns non-zero if any failed. -l lists the scenarios, -h prints the usage.
run_scenarios() {
  local name=$1 detail=$2 title=$3
  shift 3
  if [ "${1:-}" = __run ]; then
    report_errors
    "scenario_$2"
    exit 0
  fi
  [ "$(id -u)" -eq 0 ] || die "the $name tests need root (namespaces, XDP)"
  case ${1:-} in
    -h | --help) scenario_usage ;;
    -l | --list) printf '%s\n' "${SCENARIOS[@]}"; exit 0 ;;
  esac
  local selected=("$@") s rc t0
  [ ${#selected[@]} -gt 0 ] || selected=("${SCENARIOS[@]}")
  for s in "${selected[@]}"; do
    declare -F "scenario_$s" >/dev/null || { log "unknown scenario '$s'"; scenario_usage; }
  done
  [ -x "$LINERATE" ] || die "$LINERATE is not built (make build)"
  LINERATE=$(cd "$(dirname "$LINERATE")" && pwd)/$(basename "$LINERATE")
  export LINERATE
  SCENARIO_CHILD=
  trap 'log "interrupted"; [ -z "$SCENARIO_CHILD" ] || { kill -TERM "$SCENARIO_CHILD" 2>/dev/null; wait "$SCENARIO_CHILD" || true; }; exit 130' INT TERM
  local -A result
  local passed=0 failed=0
  for s in "${selected[@]}"; do
    rc=0 t0=$SECONDS
    log ""
    log "== $name $s ($detail)"
    timeout -k 10 "$SCENARIO_TIMEOUT" "$BASH" "$0" __run "$s" &
    SCENARIO_CHILD=$!
    wait "$SCENARIO_CHILD" || rc=$?
    SCENARIO_CHILD=
    if [ "$rc" -eq 0 ]; then
      result[$s]="PASS $((SECONDS - t0))s"; passed=$((passed + 1))
    else
      [ "$rc" -ne 124 ] || log "    FAIL  scenario timed out after ${SCENARIO_TIMEOUT}s"
      result[$s]="FAIL $((SECONDS - t0))s"; failed=$((failed + 1))
    fi
    log "== $name $s: ${result[$s]}"
  done
  printf '\n%s\n\n' "$title"
  for s in "${selected[@]}"; do printf '%-22s  %s\n' "$s" "${result[$s]}"; done
  printf '\n%d passed, %d failed\n' "$passed" "$failed"
  [ "$failed" -eq 0 ]
}

scenario_usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

# cpu_steal_ms: the CPU time the hypervisor took from this machine since boot, in
# whole ms, all CPUs together (a worker held back by it is not the gateway's doing).
cpu_steal_ms() {
  awk '$1 == "cpu" { printf "%d\n", $9 * 1000 / '"$(getconf CLK_TCK)"' }' /proc/stat
}

# one_tcp_flow SECONDS: one iperf3 TCP flow from host a to host b for SECONDS
# while host a pings host b 100 times a second; prints the flow's retransmits,
# its Mbit/s and the pings lost ("R MBPS LOSS%").
one_tcp_flow() {
  local secs=$1 port=5201 ping
  timeout $((secs + 30)) ip netns exec "$NS_HB" iperf3 -s -1 -B "$H4_B" -p $port \
    >"$LR_TMP/iperf-server.log" 2>&1 &
  wait_until 5 "iperf3 server" eval "[ -n \"\$(ip netns exec '$NS_HB' ss -Hltn 'sport = :$port')\" ]"
  in_ns "$NS_HA" ping -n -q -i 0.01 -c $((secs * 100)) -W 1 "$H4_B" >"$LR_TMP/ping.log" 2>&1 &
  ping=$!
  timeout $((secs + 30)) ip netns exec "$NS_HA" iperf3 -c "$H4_B" -p $port -t "$secs" -J \
    >"$LR_TMP/iperf.json" || true
  wait "$ping" || true
  "$PYTHON" - "$LR_TMP/iperf.json" "$LR_TMP/ping.log" <<'PY'
import json, re, sys
end = json.load(open(sys.argv[1]))["end"]
loss = re.search(r"([0-9.]+)% packet loss", open(sys.argv[2]).read())
print(end["sum_sent"].get("retransmits", 0), "%.0f" % (end["sum_received"]["bits_per_second"] / 1e6),
      (loss.group(1) if loss else "100") + "%")
PY
}
