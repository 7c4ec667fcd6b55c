#!/usr/bin/env bash
# Gateway benchmark: the published topology in namespaces, a generator feeding
# gw-a's LAN port, gw-a encrypting, gw-b decrypting, a sink behind gw-b:
#
#   gen (host-a) ── lan [gw-a] wan ──── wan [gw-b] lan ── sink (host-b)
#
# measured for three data planes in the same run and topology:
#   gateway               linerate gateway on both sides (AF_XDP ports)
#   kernel+wireguard-go   Linux forwarding through wireguard-go (what users run)
#   host                  Linux forwarding through linerate in host mode
# at 64 and 1420 bytes (IP packet size) and IMIX (7:4:1 of 64, 570, 1420: the
# classic mix with its largest size at the tunnel MTU). The generator and the
# sink are `linerate bench traffic` (AF_XDP, copy mode on veth). Everything runs
# where the scheduler puts it; with --pin (two cores or more), the generator and
# the sink run on core 0 and the data planes' processes on core 1 (GEN_CORE,
# PLANE_CORE), so that a generator running flat out cannot take the data plane's
# core; the kernel's own work (veth, softirq forwarding) runs where the kernel
# puts it either way.
#
#   scripts/gateway-bench.sh [--seconds S] [--repeat N] [--json FILE]
#                            [--impls "gateway host ..."] [--sizes "64 1420 imix"]
#                            [--memory-seconds S] [--pin] [--workers N]
#
# --workers N (default 1): every link gets N queues each way, the generator
# sends from (and the sink counts on) all of them, a linerate gateway runs N
# workers (cores 0 to N-1) and linerate in host mode --workers N; wireguard-go
# uses what cores it finds either way. (--pin applies to one worker only.)
#
# With --repeat N (default 1) the implementations take turns N times and each
# figure is the median of its N runs (this machine is shared: runs spread).
# Prints one table; with --json writes
#   {"machine": ..., "results": [{"impl", "size", "mpps", "gbps", "loss", ...}]}
# --memory-seconds S (default 0: off) adds a run of S seconds at 64 bytes through
# the gateway, sampling gw-a's resident memory every second.
# Every process and namespace it makes is removed when it ends. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tests/net/lib.sh
. tests/net/lib.sh
# shellcheck source=tests/net/gateway_lib.sh
. tests/net/gateway_lib.sh

SECONDS_PER_RUN=5
JSON=
IMPLS="gateway kernel+wireguard-go host"
SIZES="64 1420 imix"
MEMORY_SECONDS=0
REPEAT=1
PIN=0
WORKERS=1
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) SECONDS_PER_RUN=$2; shift 2 ;;
    --json) JSON=$2; shift 2 ;;
    --impls) IMPLS=$2; shift 2 ;;
    --sizes) SIZES=$2; shift 2 ;;
    --memory-seconds) MEMORY_SECONDS=$2; shift 2 ;;
    --repeat) REPEAT=$2; shift 2 ;;
    --pin) PIN=1; shift ;;
    --workers) WORKERS=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
[ "$(id -u)" -eq 0 ] || die "the benchmark needs root (namespaces, XDP)"
case $WORKERS in '' | *[!0-9]* | 0) die "--workers $WORKERS: a number of workers, 1 or more" ;; esac
[ "$WORKERS" -le "$(nproc)" ] || die "--workers $WORKERS: this machine has $(nproc) cores"
[ "$WORKERS" -eq 1 ] || PIN=0
export GW_WORKERS=$WORKERS
LINERATE=${LINERATE:-target/release/linerate}
[ -x "$LINERATE" ] || die "$LINERATE is not built (make build)"
LINERATE=$(cd "$(dirname "$LINERATE")" && pwd)/$(basename "$LINERATE")
GW_DRIVER=${GW_DRIVER:-af_xdp}
UDP_PORT=9
GEN_CORE=${GEN_CORE:-0}
PLANE_CORE=${PLANE_CORE:-1}
if [ "$PIN" -eq 0 ] || [ "$(nproc)" -lt 2 ]; then
  ALL_CORES="0-$(($(nproc) - 1))"
  GEN_CORE=$ALL_CORES PLANE_CORE=$ALL_CORES
fi

# kernel_gateway SIDE IMPL: gw-SIDE as a Linux router whose tunnel is IMPL
# (wireguard-go, or linerate in host mode) on an interface of the gateway's name.
kernel_gateway() {
  local side=$1 impl=$2 ns lan wan net peer key ep="" ifname
  if [ "$side" = a ]; then
    ns=$NS_GA lan=$G4_A wan=$W4_A net=198.19.3.0/24 peer=$PUB_B key=a ifname=$WG_A ep="$W4_B:51820"
  else
    ns=$NS_GB lan=$G4_B wan=$W4_B net=198.19.1.0/24 peer=$PUB_A key=b ifname=$WG_B
  fi
  ip -n "$ns" addr add "$lan/24" dev lan
  ip -n "$ns" addr add "$wan/24" dev wan
  in_ns "$ns" sysctl -qw net.ipv4.ip_forward=1
  LR_SOCKETS+=("$ifname")
  case $impl in
    wireguard-go) WG_PROCESS_FOREGROUND=1 ip netns exec "$ns" taskset -c "$PLANE_CORE" wireguard-go -f "$ifname" >>"$LR_TMP/$ifname.log" 2>&1 & ;;
    host) ip netns exec "$ns" taskset -c "$PLANE_CORE" "$LINERATE" -f --workers "$WORKERS" "$ifname" >>"$LR_TMP/$ifname.log" 2>&1 & ;;
  esac
  wait_until 15 "$impl's socket on gw-$side" test -S "$WG_SOCK_DIR/$ifname.sock"
  wait_until 5 "$impl's interface on gw-$side" ip -n "$ns" link show "$ifname"
  local args=(set "$ifname" listen-port 51820 private-key "$LR_TMP/$key.key" peer "$peer" allowed-ips "$net")
  [ -z "$ep" ] || args+=(endpoint "$ep")
  wg_ns "$ns" "${args[@]}"
  ip -n "$ns" link set "$ifname" mtu "$TUNNEL_MTU" up
  ip -n "$ns" route add "$net" dev "$ifname"
}

# pid_of_gateway SIDE: the data plane's pid in that gateway's namespace (the
# first process there).
pid_in() { ip netns pids "$1" | head -1; }

# one_run IMPL SIZE: generator for SECONDS_PER_RUN, sink a little longer; sets
# RUN_SENT RUN_GOT RUN_BYTES RUN_SECS.
one_run() {
  local size=$1 mac out
  # Refresh the neighbors (the sink's kernel cannot answer ARP while it counts).
  ping_ok "$NS_HA" "$H4_B" 2 10 || log "    (ping before the run failed)"
  mac=$(ip -n "$NS_GA" -o link show lan | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
  ip netns exec "$NS_HB" taskset -c "$GEN_CORE" "$LINERATE" bench traffic count --interface eth0 --queues "$WORKERS" --port "$UDP_PORT" \
    --seconds "$(awk -v s="$SECONDS_PER_RUN" 'BEGIN { print s + 2 }')" >"$LR_TMP/count.out" 2>"$LR_TMP/count.err" &
  local cpid=$!
  sleep 0.5
  out=$(ip netns exec "$NS_HA" taskset -c "$GEN_CORE" "$LINERATE" bench traffic send --interface eth0 --queues "$WORKERS" --dst-mac "$mac" \
    --src "$H4_A" --dst "$H4_B" --port "$UDP_PORT" --size "$size" --seconds "$SECONDS_PER_RUN" 2>"$LR_TMP/send.err") ||
    { cat "$LR_TMP/send.err" >&2; return 1; }
  wait "$cpid" || { cat "$LR_TMP/count.err" >&2; return 1; }
  RUN_SENT=$(sed -n 's/.*sent packets=\([0-9]*\).*/\1/p' <<<"$out")
  RUN_SECS=$(sed -n 's/.*seconds=\([0-9.]*\).*/\1/p' <<<"$out")
  RUN_GOT=$(sed -n 's/.*received packets=\([0-9]*\).*/\1/p' "$LR_TMP/count.out")
  RUN_BYTES=$(sed -n 's/.*bytes=\([0-9]*\).*/\1/p' "$LR_TMP/count.out")
}

# bench_impl IMPL: the topology with IMPL as both gateways, every size; rows
# appended to $LR_TMP/rows as "impl size mpps gbps loss sent_mpps".
bench_impl() {
  local impl=$1 size
  topology
  case $impl in
    gateway)
      gw_config a "$W4_B:51820"
      gw_config b
      [ "$PIN" -eq 0 ] || sed -i "s/^\[gateway\]$/[gateway]\ncores = [$PLANE_CORE]/" "$LR_TMP/gw-a.toml" "$LR_TMP/gw-b.toml"
      gw_start a
      gw_start b
      ;;
    kernel+wireguard-go | host)
      local kind=host
      [ "$impl" = host ] || kind=wireguard-go
      for s in a b; do
        kernel_gateway "$s" "$kind"
      done
      ;;
  esac
  wait_until 15 "the tunnel ($impl)" ping_ok "$NS_HA" "$H4_B" 1 3
  for size in $SIZES; do
    one_run "$size"
    awk -v impl="$impl" -v size="$size" -v sent="$RUN_SENT" -v got="$RUN_GOT" -v bytes="$RUN_BYTES" -v secs="$RUN_SECS" 'BEGIN {
      mpps = got / secs / 1e6; gbps = bytes * 8 / secs / 1e9; loss = sent > 0 ? 1 - got / sent : 0
      if (loss < 0) loss = 0
      printf "%s %s %.4f %.4f %.4f %.4f\n", impl, size, mpps, gbps, loss, sent / secs / 1e6 }' >>"$ROWS"
    log "    $impl $size: $(tail -1 "$ROWS")"
  done
  if [ "$impl" = gateway ] && [ "$MEMORY_SECONDS" -gt 0 ] && [ ! -s "$MEMORY" ]; then
    memory_run
  fi
}

# memory_run: 64-byte traffic through the gateway for MEMORY_SECONDS, gw-a's
# resident memory sampled every second.
memory_run() {
  local pid mac i rss hwm
  pid=$(pid_in "$NS_GA")
  mac=$(ip -n "$NS_GA" -o link show lan | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
  ping_ok "$NS_HA" "$H4_B" 2 10 || true
  ip netns exec "$NS_HA" taskset -c "$GEN_CORE" "$LINERATE" bench traffic send --interface eth0 --queues "$WORKERS" --dst-mac "$mac" \
    --src "$H4_A" --dst "$H4_B" --size 64 --seconds "$MEMORY_SECONDS" >/dev/null 2>&1 &
  local spid=$!
  : >"$MEMORY"
  for ((i = 0; i <= MEMORY_SECONDS; i++)); do
    rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status")
    echo "$i $rss" >>"$MEMORY"
    sleep 1
  done
  wait "$spid" || true
  hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status")
  echo "hwm $hwm" >>"$MEMORY"
}

RESULTS=$(mktemp -d /tmp/linerate-gwbench.XXXXXX)
ROWS=$RESULTS/rows MEMORY=$RESULTS/memory
: >"$ROWS"
trap 'rm -rf -- "$RESULTS"' EXIT
MACHINE="$(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores"
log "gateway-bench: $MACHINE; $SECONDS_PER_RUN s per size; impls: $IMPLS"
for ((round = 1; round <= REPEAT; round++)); do
  for impl in $IMPLS; do
    log ""
    log "== $impl (round $round of $REPEAT)"
    # Each implementation in its own process: its own namespaces, removed at its end.
    ( bench_impl "$impl" ) || log "    $impl: FAILED (see above)"
  done
done
# The median of each implementation and size over the rounds.
ALL=$RESULTS/all
mv "$ROWS" "$ALL"
awk '{ k = $1 " " $2; n[k]++; v[k, n[k]] = $0; order[k] = order[k] ? order[k] : ++seen; key[seen] = k }
  END {
    for (i = 1; i <= seen; i++) {
      k = key[i]; m = n[k]
      # sort the runs of k by Mpps (field 3), take the middle one
      for (a = 1; a <= m; a++) { split(v[k, a], f, " "); mp[a] = f[3]; idx[a] = a }
      for (a = 1; a <= m; a++) for (b = a + 1; b <= m; b++) if (mp[idx[b]] < mp[idx[a]]) { t = idx[a]; idx[a] = idx[b]; idx[b] = t }
      print v[k, idx[int((m + 1) / 2)]]
    }
  }' "$ALL" >"$ROWS"

printf '\ngateway-bench on %s, %s s per size, median of %s round(s), veth (AF_XDP copy mode), %s worker(s) per gateway\n' "$MACHINE" "$SECONDS_PER_RUN" "$REPEAT" "$WORKERS"
printf 'generator and sink on cores %s, the data planes on cores %s\n\n' "$GEN_CORE" "$PLANE_CORE"
printf '%-22s %-6s %10s %10s %8s %12s\n' impl size Mpps Gbit/s loss "offered Mpps"
while read -r impl size mpps gbps loss offered; do
  printf '%-22s %-6s %10.3f %10.3f %7.1f%% %12.3f\n' "$impl" "$size" "$mpps" "$gbps" "$(awk -v l="$loss" 'BEGIN { print l * 100 }')" "$offered"
done <"$ROWS"
printf '\nratios, gateway against the others (same run):\n'
for size in $SIZES; do
  g=$(awk -v s="$size" '$1 == "gateway" && $2 == s { print $3, $4 }' "$ROWS")
  for other in kernel+wireguard-go host; do
    o=$(awk -v s="$size" -v i="$other" '$1 == i && $2 == s { print $3, $4 }' "$ROWS")
    [ -n "$g" ] && [ -n "$o" ] || continue
    read -r gm gg <<<"$g"; read -r om og <<<"$o"
    awk -v s="$size" -v o="$other" -v gm="$gm" -v gg="$gg" -v om="$om" -v og="$og" \
      'BEGIN { printf "  %-6s vs %-20s %6.2fx Mpps  %6.2fx Gbit/s\n", s, o, (om > 0 ? gm / om : 0), (og > 0 ? gg / og : 0) }'
  done
done
if [ -s "$MEMORY" ]; then
  awk '$1 != "hwm" { if (NR == 1) first = $2; last = $2; if ($2 > max) max = $2 } $1 == "hwm" { hwm = $2 }
    END { printf "\ngw-a resident memory over the 64-byte run: %d KiB at start, %d KiB at the end, %d KiB at most (VmHWM %d KiB)\n", first, last, max, hwm }' "$MEMORY"
fi
if [ -n "$JSON" ]; then
  python3 - "$ROWS" "$MEMORY" "$MACHINE" "$SECONDS_PER_RUN" "$ALL" "$REPEAT" "$GEN_CORE" "$PLANE_CORE" "$WORKERS" >"$JSON" <<'EOF'
import json, sys
workers = int(sys.argv[9])
rows, memory, machine, secs, every, repeat = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5], int(sys.argv[6])

def read(path):
    out = []
    for line in open(path):
        impl, size, mpps, gbps, loss, offered = line.split()
        out.append({"impl": impl, "size": int(size) if size.isdigit() else size,
                    "mpps": float(mpps), "gbps": float(gbps), "loss": float(loss),
                    "offered_mpps": float(offered)})
    return out

results = read(rows)
out = {"machine": machine, "seconds_per_size": secs, "rounds": repeat,
       "pinning": {"generator_and_sink": sys.argv[7], "data_planes": sys.argv[8]}, "every_run": read(every),
       "workers": workers,
       "setup": f"veth pairs in network namespaces with {workers} queue(s) each way, AF_XDP copy mode, "
                f"{workers} worker(s) per linerate gateway and host mode; "
                "sizes are IP packet sizes; generator and sink are linerate bench traffic, "
                "pinned as the pinning field says",
       "results": results, "note": "results: the median run of each impl and size (by Mpps)"}
try:
    samples = [l.split() for l in open(memory)]
    rss = [int(v) for k, v in samples if k != "hwm"]
    if rss:
        out["memory_kib"] = {"start": rss[0], "end": rss[-1], "max": max(rss),
                             "hwm": next((int(v) for k, v in samples if k == "hwm"), None),
                             "seconds": len(rss) - 1}
except FileNotFoundError:
    pass
json.dump(out, sys.stdout, indent=1)
print()
EOF
  log "wrote $JSON"
fi
