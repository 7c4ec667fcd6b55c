#!/usr/bin/env bash
# OpenVPN server benchmark: stock OpenVPN 2.6 clients send through a server to
# a host behind it, in the OpenVPN test topology (tests/net/openvpn_lib.sh):
#
#   client-N ── [switch] ── wan [server] lan ── host
#
# measured for two servers in the same run and topology:
#   linerate   a linerate gateway with an [[openvpn]] server (AF_XDP ports)
#   openvpn    the stock OpenVPN 2.6 server, userspace data channel
#              (--disable-dco), the kernel forwarding between its TUN and ports
# Each with --clients N clients (default 2), the same stock client, tls-crypt,
# AES-256-GCM, for:
#   tcp        one iperf3 TCP flow per client to the host
#   udp64      iperf3 UDP, 64-byte IP packets, as fast as each client sends
#   udp1420    the same, 1420-byte IP packets
#
#   scripts/openvpn-bench.sh [--seconds S] [--clients N] [--json FILE]
#
# Prints one table: per server and test, what the host received (Mpps or
# Gbit/s), the server's CPU time over the run (its process; for the stock
# server that leaves out the kernel's forwarding and TUN work, which favours
# it), and packets per server CPU-second. The clients are stock OpenVPN too:
# on a machine with few cores they, not the server, set the offered load, so a
# ratio of delivered rates is a ratio only where the baseline lost packets
# (the table says when it did not); packets per server CPU-second is the
# measure that holds either way. Every process and namespace it makes is
# removed when it ends. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tests/net/lib.sh
. tests/net/lib.sh
LINERATE=${LINERATE:-target/release/linerate}
GW_DRIVER=${GW_DRIVER:-af_xdp}
GW_WORKERS=1
# shellcheck source=tests/net/gateway_lib.sh
. tests/net/gateway_lib.sh
# shellcheck source=tests/net/openvpn_lib.sh
. tests/net/openvpn_lib.sh

SECONDS_PER=5 CLIENTS=2 JSON=
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) SECONDS_PER=$2; shift 2 ;;
    --clients) CLIENTS=$2; shift 2 ;;
    --json) JSON=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
[ "$(id -u)" -eq 0 ] || die "needs root (namespaces, XDP)"
[ -x "$LINERATE" ] || die "$LINERATE is not built (make build)"
LINERATE=$(cd "$(dirname "$LINERATE")" && pwd)/$(basename "$LINERATE")
RESULTS=()

# cpu_of PID: the process's user and system time so far, in clock ticks.
cpu_of() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# stock_server: the stock OpenVPN server in the server's namespace, on kernel
# addresses, the kernel forwarding; prints its pid.
stock_server() {
  ip -n "$NS_GA" addr add "$GW_WAN/24" dev wan
  ip -n "$NS_GA" addr add "$GW_LAN/24" dev lan
  in_ns "$NS_GA" sysctl -qw net.ipv4.ip_forward=1
  (cd "$LR_TMP" && exec ip netns exec "$NS_GA" openvpn --mode server --tls-server --dev tun --proto udp \
    --port 1194 --disable-dco --topology subnet --server 198.19.62.0 255.255.255.0 \
    --push "route 198.19.61.0 255.255.255.0" --ca ca.crt --cert server.crt --key server.key \
    --dh none --tls-crypt crypt.key --data-ciphers AES-256-GCM --keepalive 10 60 \
    --verb 1 --log "$LR_TMP/stock-server.log" >/dev/null 2>&1) &
  echo $!
}

# run_test SERVER TEST SERVER_PID: one measurement; appends a result line.
run_test() {
  local server=$1 test=$2 pid=$3 i port len before after ticks recv=0 unit value
  local -a senders=() receivers=()
  before=$(cpu_of "$pid")
  for ((i = 1; i <= CLIENTS; i++)); do
    port=$((5300 + i))
    timeout $((SECONDS_PER + 20)) ip netns exec "$NS_H" iperf3 -s -1 -B "$HOST4" -p $port -J \
      >"$LR_TMP/srv-$i.json" 2>/dev/null &
    receivers+=($!)
  done
  for ((i = 1; i <= CLIENTS; i++)); do
    wait_until 5 "iperf3 server $i" eval "[ -n \"\$(ip netns exec '$NS_H' ss -Hln 'sport = :$((5300 + i))')\" ]"
  done
  for ((i = 1; i <= CLIENTS; i++)); do
    port=$((5300 + i))
    case $test in
      tcp) timeout $((SECONDS_PER + 20)) ip netns exec "$(client_var "$i")" iperf3 -c "$HOST4" -p $port \
             -t "$SECONDS_PER" -J >"$LR_TMP/cli-$i.json" 2>/dev/null & ;;
      udp*) len=$(( ${test#udp} - 28 ))
            timeout $((SECONDS_PER + 20)) ip netns exec "$(client_var "$i")" iperf3 -u -b 0 -l "$len" \
             -c "$HOST4" -p $port -t "$SECONDS_PER" -J >"$LR_TMP/cli-$i.json" 2>/dev/null & ;;
    esac
    senders+=($!)
  done
  for i in "${senders[@]}" "${receivers[@]}"; do wait "$i" || true; done
  after=$(cpu_of "$pid")
  ticks=$((after - before))
  "$PYTHON" - "$server" "$test" "$ticks" "$(getconf CLK_TCK)" "$SECONDS_PER" "$LR_TMP" "$CLIENTS" <<'PY' >>"$LR_TMP/results"
import json, sys
server, test, ticks, hz, secs, tmp, clients = sys.argv[1:]
ticks, hz, secs, clients = int(ticks), int(hz), float(secs), int(clients)
packets = bits = sent = 0
for i in range(1, clients + 1):
    try:
        end = json.load(open(f"{tmp}/srv-{i}.json"))["end"]
    except Exception:
        continue
    if test == "tcp":
        s = end.get("sum_received", {})
        bits += s.get("bits_per_second", 0) * secs
        # Full-sized segments: the MSS inside the tunnel.
        packets += s.get("bytes", 0) / 1448
    else:
        s = end.get("sum", {})
        got = s.get("packets", 0) - s.get("lost_packets", 0)
        packets += got
        sent += s.get("packets", 0)
        bits += got * int(test[3:]) * 8
cpu = ticks / hz
print(json.dumps({"server": server, "test": test, "seconds": secs, "gbps": bits / secs / 1e9,
                  "mpps": packets / secs / 1e6, "lost": max(sent - packets, 0),
                  "server_cpu_s": cpu, "packets_per_cpu_s": packets / cpu if cpu > 0 else None}))
PY
}

measure() {
  local server=$1 pid i t
  ovpn_topology "$CLIENTS"
  if [ "$server" = linerate ]; then
    gw_start a
    pid=$GW_PID_A
  else
    pid=$(stock_server)
  fi
  for ((i = 1; i <= CLIENTS; i++)); do up "$i" crypt AES-256-GCM; done
  for t in tcp udp64 udp1420; do
    log "  $server $t"
    run_test "$server" "$t" "$pid"
  done
  cat "$LR_TMP/results" >>"$ALL"
}

ALL=$(mktemp /tmp/linerate-ovpn-bench.XXXXXX)
trap 'rm -f "$ALL"' EXIT
for server in linerate openvpn; do
  log "== $server"
  # Each server in its own topology, torn down after.
  ( measure "$server" ) || die "the $server run failed"
done
"$PYTHON" - "$ALL" "$JSON" "$(lscpu | awk -F: '/^Model name/ { m = $2 } /^CPU family/ { f = $2 } /^Model:/ { n = $2 } END { gsub(/^ +/, "", m); gsub(/ /, "", f); gsub(/ /, "", n); printf "%s (family %s model %s)", m, f, n }'), $(nproc) cores" "$CLIENTS" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
json_path, machine, clients = sys.argv[2], sys.argv[3], sys.argv[4]
print(f"OpenVPN servers, {clients} stock client(s), AES-256-GCM, tls-crypt, on {machine}")
print("Mpps and Gbit/s: what the host received (TCP packets: bytes over the tunnel's MSS); lost: sent by the clients' iperf3, never received (anywhere on the path, the clients' own TUN included)")
print(f"{'server':<10} {'test':<8} {'Mpps':>8} {'Gbit/s':>8} {'lost':>9} {'server CPU s':>12} {'pkts/CPU s':>12}")
for r in rows:
    ppc = r["packets_per_cpu_s"]
    print(f"{r['server']:<10} {r['test']:<8} {r['mpps']:8.4f} {r['gbps']:8.3f} {r['lost']:9d} {r['server_cpu_s']:12.2f} {ppc if ppc is None else round(ppc):>12}")
by = {(r["server"], r["test"]): r for r in rows}
print()
for t in ("tcp", "udp64", "udp1420"):
    a, b = by.get(("linerate", t)), by.get(("openvpn", t))
    if not a or not b:
        continue
    key = "gbps" if t != "udp64" else "mpps"
    ratio = a[key] / b[key] if b[key] else float("nan")
    eff = (a["packets_per_cpu_s"] or 0) / b["packets_per_cpu_s"] if b["packets_per_cpu_s"] else float("nan")
    print(f"{t}: packets per server CPU-second {eff:.2f}x; delivered {ratio:.2f}x ({key})")
print()
print("The clients (stock OpenVPN, userspace) set the offered load on both servers: the delivered ratio is "
      "bounded by them and is not a ratio of the servers' limits. Packets per server CPU-second compare the "
      "servers' own work; the stock server's figure leaves out the kernel's forwarding and TUN work.")
if json_path:
    json.dump({"machine": machine, "clients": int(clients), "results": rows}, open(json_path, "w"), indent=2)
    print(f"wrote {json_path}")
PY
