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
#                            [--memory-seconds S] [--pin] [--workers N] [--svg FILE]
#
# --workers N (default 1): every link gets N queues each way, the generator
# sends from (and the sink counts on) all of them, a linerate gateway runs N
# workers (cores 0 to N-1) and linerate in host mode --workers N; wireguard-go
# uses what cores it finds either way. (--pin applies to one worker only.)
#
# --l2 measures the L2 topology instead (tests/net/l2_lib.sh: each gateway's LAN
# port cross-connected to VXLAN), as the published VXLAN swing does, at frame
# sizes 64 (with its FCS: a 46-byte IP packet), imix (as above) and 1514 (a
# 1500-byte IP packet), for
#   kernel-vxlan          Linux's vxlan device bridged to the port (cleartext)
#   vxlan/N               linerate gateways, VXLAN in cleartext, N workers each
#   vxlan+wireguard/N     linerate gateways, VXLAN inside WireGuard, N workers
# (an impl named NAME/N runs N workers with N queues on every link, whatever
# --workers says); scripts/l2-bench.sh is this with --l2. A size past 1514
# (--sizes "1514 9014": a 9000-byte MTU's frames) makes every link of the run
# jumbo: 9000-byte LANs over a 9216-byte WAN, the linerate gateways on jumbo
# buffers, the generator and sink on multi-buffer AF_XDP.
#
# With --repeat N (default 1) the implementations take turns N times and each
# figure is the median of its N runs (this machine is shared: runs spread).
# Prints one table; with --json writes
#   {"machine": ..., "results": [{"impl", "size", "mpps", "gbps", "loss", ...}]}
# --svg FILE draws the table as bars: Mpps per size, one bar per impl, each
# labelled with its ratio to the first impl (the baseline) at that size.
# --memory-seconds S (default 0: off) adds a run of S seconds at 64 bytes through
# the gateway, sampling gw-a's resident memory every second.
#
# A ratio of delivered rates is a ratio only where the baseline was saturated
# (it lost packets: the offered load was above its limit). Where a baseline lost
# nothing, its limit was the generator's, and the ratio line says so. The measure
# that holds on a few shared cores comes after: every implementation is offered
# the same fixed rate (--cpu-rate PPS, default 20000, 64-byte packets, for
# --seconds), which each should carry without loss, and the whole machine's busy
# CPU time over the run (every CPU's, from /proc/stat: generator, sink, kernel
# and data planes alike) is divided by the packets forwarded. A run that lost
# packets at that rate is marked: its figure is not comparable.
# Every process and namespace it makes is removed when it ends. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tests/net/lib.sh
. tests/net/lib.sh
# shellcheck source=tests/net/gateway_lib.sh
. tests/net/gateway_lib.sh
# shellcheck source=tests/net/l2_lib.sh
. tests/net/l2_lib.sh

SECONDS_PER_RUN=5
JSON=
IMPLS="gateway kernel+wireguard-go host"
SIZES="64 1420 imix"
MEMORY_SECONDS=0
CPU_RATE=20000
REPEAT=1
PIN=0
WORKERS=1
MODE=gateway
SVG=
IMPLS_GIVEN= SIZES_GIVEN=
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) SECONDS_PER_RUN=$2; shift 2 ;;
    --json) JSON=$2; shift 2 ;;
    --impls) IMPLS=$2 IMPLS_GIVEN=1; shift 2 ;;
    --sizes) SIZES=$2 SIZES_GIVEN=1; shift 2 ;;
    --l2) MODE=l2; shift ;;
    --svg) SVG=$2; shift 2 ;;
    --memory-seconds) MEMORY_SECONDS=$2; shift 2 ;;
    --cpu-rate) CPU_RATE=$2; shift 2 ;;
    --repeat) REPEAT=$2; shift 2 ;;
    --pin) PIN=1; shift ;;
    --workers) WORKERS=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
[ "$(id -u)" -eq 0 ] || die "the benchmark needs root (namespaces, XDP)"
case $CPU_RATE in '' | *[!0-9]*) die "--cpu-rate $CPU_RATE: packets a second, 0 for none" ;; esac
case $WORKERS in '' | *[!0-9]* | 0) die "--workers $WORKERS: a number of workers, 1 or more" ;; esac
[ "$WORKERS" -le "$(nproc)" ] || die "--workers $WORKERS: this machine has $(nproc) cores"
[ "$WORKERS" -eq 1 ] || PIN=0
export GW_WORKERS=$WORKERS
L2_JUMBO=
if [ "$MODE" = l2 ]; then
  [ -n "$SIZES_GIVEN" ] || SIZES="64 imix 1514"
  if [ -z "$IMPLS_GIVEN" ]; then
    IMPLS="kernel-vxlan vxlan/1 vxlan+wireguard/1"
    [ "$(nproc)" -lt 2 ] || IMPLS+=" vxlan/2 vxlan+wireguard/2"
  fi
  MEMORY_SECONDS=0
  # Frames past 1514 bytes: every link of the run is jumbo (l2_jumbo_topology),
  # so its smaller sizes cross the same links as the large ones.
  for s in $SIZES; do
    case $s in imix | *[!0-9]*) ;; *) [ "$s" -le 1514 ] || L2_JUMBO=1 ;; esac
  done
else
  # The gateway topology's links are standard: a larger packet would only be lost.
  for s in $SIZES; do
    case $s in imix | *[!0-9]*) ;; *) [ "$s" -le 1500 ] || die "--sizes $s: gateway mode sends IP packets of up to 1500 bytes (jumbo frames: --l2)" ;; esac
  done
fi
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
  local size=$1 mac out src=$H4_A dst=$H4_B
  if [ "$MODE" = l2 ]; then
    # Frame sizes as traffic generators name them: 64 the least frame with its
    # FCS (a 46-byte IP packet), any other the frame without (1514: 1500).
    src=$L2_A dst=$L2_B
    case $size in imix) ;; 64) size=46 ;; *) size=$((size - 14)) ;; esac
    mac=$(ip -n "$NS_HB" -o link show eth0 | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
  else
    mac=$(ip -n "$NS_GA" -o link show lan | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
  fi
  # Refresh the neighbors (the sink's kernel cannot answer ARP while it counts).
  ping_ok "$NS_HA" "$dst" 2 10 || log "    (ping before the run failed)"
  ip netns exec "$NS_HB" taskset -c "$GEN_CORE" "$LINERATE" bench traffic count --interface eth0 --queues "$WORKERS" --port "$UDP_PORT" ${L2_JUMBO:+--jumbo} \
    --seconds "$(awk -v s="$SECONDS_PER_RUN" 'BEGIN { print s + 2 }')" >"$LR_TMP/count.out" 2>"$LR_TMP/count.err" &
  local cpid=$!
  sleep 0.5
  out=$(ip netns exec "$NS_HA" taskset -c "$GEN_CORE" "$LINERATE" bench traffic send --interface eth0 --queues "$WORKERS" --dst-mac "$mac" \
    --src "$src" --dst "$dst" --port "$UDP_PORT" --size "$size" --seconds "$SECONDS_PER_RUN" ${RUN_RATE:+--rate "$RUN_RATE"} 2>"$LR_TMP/send.err") ||
    { cat "$LR_TMP/send.err" >&2; return 1; }
  wait "$cpid" || { cat "$LR_TMP/count.err" >&2; return 1; }
  RUN_SENT=$(sed -n 's/.*sent packets=\([0-9]*\).*/\1/p' <<<"$out")
  RUN_SECS=$(sed -n 's/.*seconds=\([0-9.]*\).*/\1/p' <<<"$out")
  RUN_GOT=$(sed -n 's/.*received packets=\([0-9]*\).*/\1/p' "$LR_TMP/count.out")
  RUN_BYTES=$(sed -n 's/.*bytes=\([0-9]*\).*/\1/p' "$LR_TMP/count.out")
}

# bench_gateway_impl IMPL: the gateway topology with IMPL as both gateways.
bench_gateway_impl() {
  local impl=$1 s
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
}

# bench_impl IMPL: the topology with IMPL as both gateways, every size; rows
# appended to $LR_TMP/rows as "impl size mpps gbps loss sent_mpps".
bench_impl() {
  local impl=$1 size
  # NAME/N: N workers, N queues on every link.
  case $impl in */*) WORKERS=${impl##*/} GW_WORKERS=${impl##*/} ;; esac
  if [ "$MODE" = l2 ]; then
    if [ -n "$L2_JUMBO" ]; then l2_jumbo_topology; else l2_topology; fi
    case $impl in
      kernel-vxlan) kernel_vxlan a; kernel_vxlan b ;;
      vxlan/* | vxlan+wireguard/*)
        local mode=cleartext s
        [ "${impl%%/*}" = vxlan ] || mode=wireguard
        for s in a b; do
          l2_config "$s" "$mode"
          [ -z "$L2_JUMBO" ] || l2_jumbo_port "$s"
        done
        gw_start a
        gw_start b
        ;;
      *) die "unknown L2 impl $impl" ;;
    esac
    wait_until 15 "the L2 link ($impl)" ping_ok "$NS_HA" "$L2_B" 1 3
  else
    bench_gateway_impl "$impl"
  fi
  for size in $SIZES; do
    one_run "$size"
    awk -v impl="$impl" -v size="$size" -v sent="$RUN_SENT" -v got="$RUN_GOT" -v bytes="$RUN_BYTES" -v secs="$RUN_SECS" 'BEGIN {
      mpps = got / secs / 1e6; gbps = bytes * 8 / secs / 1e9; loss = sent > 0 ? 1 - got / sent : 0
      if (loss < 0) loss = 0
      printf "%s %s %.4f %.4f %.4f %.4f\n", impl, size, mpps, gbps, loss, sent / secs / 1e6 }' >>"$ROWS"
    log "    $impl $size: $(tail -1 "$ROWS")"
  done
  if [ "$CPU_RATE" -gt 0 ]; then
    cpu_run "$impl"
  fi
  if [ "$impl" = gateway ] && [ "$MEMORY_SECONDS" -gt 0 ] && [ ! -s "$MEMORY" ]; then
    memory_run
  fi
}

# busy_ticks: every CPU's busy time so far, in clock ticks (/proc/stat's "cpu"
# line: all but idle and iowait).
busy_ticks() {
  awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat
}

# cpu_run IMPL: 64-byte packets offered at CPU_RATE for SECONDS_PER_RUN; the
# machine's busy CPU time over the run, appended to $CPU_ROWS as
# "impl rate sent got busy_seconds".
cpu_run() {
  local impl=$1 t0 t1 hz
  hz=$(getconf CLK_TCK)
  t0=$(busy_ticks)
  RUN_RATE=$CPU_RATE one_run 64
  t1=$(busy_ticks)
  awk -v i="$impl" -v r="$CPU_RATE" -v s="$RUN_SENT" -v g="$RUN_GOT" -v t=$((t1 - t0)) -v hz="$hz" \
    'BEGIN { printf "%s %s %s %s %.2f\n", i, r, s, g, t / hz }' >>"$CPU_ROWS"
  log "    $impl at $CPU_RATE pps: $(tail -1 "$CPU_ROWS")"
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
ROWS=$RESULTS/rows MEMORY=$RESULTS/memory CPU_ROWS=$RESULTS/cpu
: >"$ROWS"
: >"$CPU_ROWS"
trap 'rm -rf -- "$RESULTS"' EXIT
MACHINE="$(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores"
log "$MODE bench: $MACHINE; $SECONDS_PER_RUN s per size; impls: $IMPLS"
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

if [ "$MODE" = l2 ]; then
  printf '\nl2-bench on %s, %s s per size, median of %s round(s), veth (AF_XDP copy mode), frame sizes; NAME/N: N workers per gateway\n' "$MACHINE" "$SECONDS_PER_RUN" "$REPEAT"
else
  printf '\ngateway-bench on %s, %s s per size, median of %s round(s), veth (AF_XDP copy mode), %s worker(s) per gateway\n' "$MACHINE" "$SECONDS_PER_RUN" "$REPEAT" "$WORKERS"
fi
printf 'generator and sink on cores %s, the data planes on cores %s\n\n' "$GEN_CORE" "$PLANE_CORE"
printf '%-22s %-6s %10s %10s %8s %12s\n' impl size Mpps Gbit/s loss "offered Mpps"
while read -r impl size mpps gbps loss offered; do
  printf '%-22s %-6s %10.3f %10.3f %7.1f%% %12.3f\n' "$impl" "$size" "$mpps" "$gbps" "$(awk -v l="$loss" 'BEGIN { print l * 100 }')" "$offered"
done <"$ROWS"
if [ "$MODE" = l2 ]; then
  printf '\nratios against kernel-vxlan (same run):\n'
  for size in $SIZES; do
    awk -v s="$size" '$2 == s { m[$1] = $3; g[$1] = $4; l[$1] = $5; o[$1] = $6; order[++n] = $1 }
      END { b = "kernel-vxlan"
        for (i = 1; i <= n; i++) { k = order[i]; if (k == b || !m[b]) continue
        note = l[b] < 0.005 ? sprintf("  (not a ratio: %s lost nothing at the offered %.3f Mpps, its limit is above it)", b, o[b]) : ""
        printf "  %-6s %-20s %6.2fx Mpps  %6.2fx Gbit/s%s\n", s, k, m[k] / m[b], g[k] / g[b], note } }' "$ROWS"
  done
fi
[ "$MODE" = l2 ] || printf '\nratios, gateway against the others (same run):\n'
for size in $SIZES; do
  [ "$MODE" = gateway ] || break
  g=$(awk -v s="$size" '$1 == "gateway" && $2 == s { print $3, $4 }' "$ROWS")
  for other in kernel+wireguard-go host; do
    o=$(awk -v s="$size" -v i="$other" '$1 == i && $2 == s { print $3, $4, $5, $6 }' "$ROWS")
    [ -n "$g" ] && [ -n "$o" ] || continue
    read -r gm gg <<<"$g"; read -r om og ol oo <<<"$o"
    awk -v s="$size" -v o="$other" -v gm="$gm" -v gg="$gg" -v om="$om" -v og="$og" -v ol="$ol" -v oo="$oo" \
      'BEGIN { note = ol < 0.005 ? sprintf("  (not a ratio: %s lost nothing at the offered %.3f Mpps, its limit is above it)", o, oo) : ""
        printf "  %-6s vs %-20s %6.2fx Mpps  %6.2fx Gbit/s%s\n", s, o, (om > 0 ? gm / om : 0), (og > 0 ? gg / og : 0), note }'
  done
done
if [ -s "$CPU_ROWS" ]; then
  printf '\nthe whole machine'"'"'s busy CPU time per forwarded packet, 64-byte packets offered at %s pps for %s s\n' "$CPU_RATE" "$SECONDS_PER_RUN"
  printf '(every CPU of the %s, from /proc/stat: generator, sink, kernel and data planes; median of the rounds)\n' "$MACHINE"
  printf '%-22s %10s %8s %12s %12s %8s\n' impl forwarded loss "busy CPU s" "us/packet" ratio
  awk '{ k = $1; n[k]++; v[k, n[k]] = $0; if (!(k in seen)) { seen[k] = 1; order[++m] = k } }
    END {
      for (i = 1; i <= m; i++) {
        k = order[i]; c = n[k]
        for (a = 1; a <= c; a++) { split(v[k, a], f, " "); u[a] = f[4] > 0 ? f[5] / f[4] : 1e9; idx[a] = a }
        for (a = 1; a <= c; a++) for (b = a + 1; b <= c; b++) if (u[idx[b]] < u[idx[a]]) { t = idx[a]; idx[a] = idx[b]; idx[b] = t }
        split(v[k, idx[int((c + 1) / 2)]], f, " ")
        us = f[4] > 0 ? f[5] / f[4] * 1e6 : 0; loss = f[3] > 0 ? 1 - f[4] / f[3] : 0; if (loss < 0) loss = 0
        if (i == 1) base = us
        mark = loss > 0.001 ? "  lost packets at this rate: not comparable" : ""
        printf "%-22s %10d %7.2f%% %12.2f %12.3f %7.2fx%s\n", k, f[4], loss * 100, f[5], us, (base > 0 ? us / base : 0), mark
      }
    }' "$CPU_ROWS"
  printf '(ratio: CPU time per packet against the first implementation'"'"'s; lower is cheaper)\n'
fi
if [ -s "$MEMORY" ]; then
  awk '$1 != "hwm" { if (NR == 1) first = $2; last = $2; if ($2 > max) max = $2 } $1 == "hwm" { hwm = $2 }
    END { printf "\ngw-a resident memory over the 64-byte run: %d KiB at start, %d KiB at the end, %d KiB at most (VmHWM %d KiB)\n", first, last, max, hwm }' "$MEMORY"
fi
if [ -n "$JSON" ]; then
  python3 - "$ROWS" "$MEMORY" "$MACHINE" "$SECONDS_PER_RUN" "$ALL" "$REPEAT" "$GEN_CORE" "$PLANE_CORE" "$WORKERS" "$MODE" "$CPU_ROWS" "$CPU_RATE" >"$JSON" <<'EOF'
import json, sys
workers = int(sys.argv[9])
mode = sys.argv[10]
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
       "workers": workers, "mode": mode,
       "setup": (f"veth pairs in network namespaces with {workers} queue(s) each way, AF_XDP copy mode, "
                 f"{workers} worker(s) per linerate gateway and host mode; sizes are IP packet sizes; "
                 if mode == "gateway" else
                 "the L2 topology: each gateway's LAN port cross-connected to VXLAN, in cleartext or inside "
                 "WireGuard; an impl NAME/N runs N workers with N queues on every link; sizes are Ethernet "
                 "frame sizes (64 with its FCS, 1514 without: IP packets of 46 and 1500 bytes); ") +
                "generator and sink are linerate bench traffic, "
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
cpu = []
for line in open(sys.argv[11]):
    impl, rate, sent, got, busy = line.split()
    sent, got, busy = int(sent), int(got), float(busy)
    cpu.append({"impl": impl, "offered_pps": int(rate), "size": 64, "sent": sent, "forwarded": got,
                "loss": max(0.0, 1 - got / sent) if sent else 0.0, "busy_cpu_seconds": busy,
                "us_per_packet": busy / got * 1e6 if got else None})
if cpu:
    out["cpu_per_packet"] = {"note": "the whole machine's busy CPU time (every CPU, /proc/stat) over a run "
                             "at a fixed offered rate, divided by the packets forwarded; every run of "
                             "every round", "runs": cpu}
for r in results:
    r["saturated"] = r["loss"] >= 0.005
json.dump(out, sys.stdout, indent=1)
print()
EOF
  log "wrote $JSON"
fi
if [ -n "$SVG" ]; then
  python3 - "$ROWS" "$MACHINE" "$MODE" "$IMPLS" >"$SVG" <<'EOF'
import sys
from xml.sax.saxutils import escape
rows_path, machine, mode, impls = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split()
rows = {}
for line in open(rows_path):
    impl, size, mpps, gbps, *_ = line.split()
    rows[(impl, size)] = float(mpps)
sizes = []
for impl, size in rows:
    if size not in sizes:
        sizes.append(size)
impls = [i for i in impls if any((i, s) in rows for s in sizes)]
colours = ["#7f7f7f", "#1f77b4", "#2ca02c", "#ff7f0e", "#d62728", "#9467bd"]
W, H, left, top, bottom = 820, 420, 60, 50, 60
top_mpps = max(rows.values(), default=1) * 1.15 or 1
group = (W - left - 20) / max(len(sizes), 1)
bar = group * 0.8 / max(len(impls), 1)
title = ("L2 over the gateway" if mode == "l2" else "Gateway") + ": delivered Mpps by size (" + machine + ")"
out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H + 30 * ((len(impls) + 2) // 3)}" font-family="sans-serif" font-size="12">',
       f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="14">{escape(title)}</text>',
       f'<line x1="{left}" y1="{H - bottom}" x2="{W - 10}" y2="{H - bottom}" stroke="black"/>',
       f'<line x1="{left}" y1="{top}" x2="{left}" y2="{H - bottom}" stroke="black"/>']
for k in range(5):
    v = top_mpps * k / 4
    y = H - bottom - (H - bottom - top) * k / 4
    out.append(f'<text x="{left - 6}" y="{y + 4}" text-anchor="end">{v:.2f}</text>')
    out.append(f'<line x1="{left}" y1="{y}" x2="{W - 10}" y2="{y}" stroke="#ddd"/>')
for g, size in enumerate(sizes):
    x0 = left + g * group + group * 0.1
    base = rows.get((impls[0], size)) if impls else None
    for b, impl in enumerate(impls):
        v = rows.get((impl, size))
        if v is None:
            continue
        h = (H - bottom - top) * v / top_mpps
        x = x0 + b * bar
        out.append(f'<rect x="{x:.1f}" y="{H - bottom - h:.1f}" width="{bar * 0.9:.1f}" height="{h:.1f}" fill="{colours[b % len(colours)]}"/>')
        label = f"{v:.3f}" if b == 0 or not base else f"{v / base:.2f}x"
        out.append(f'<text x="{x + bar * 0.45:.1f}" y="{H - bottom - h - 4:.1f}" text-anchor="middle" font-size="10">{label}</text>')
    out.append(f'<text x="{x0 + group * 0.4:.1f}" y="{H - bottom + 18}" text-anchor="middle">{escape(size)}</text>')
out.append(f'<text x="16" y="{H / 2}" transform="rotate(-90 16 {H / 2})" text-anchor="middle">Mpps delivered</text>')
for b, impl in enumerate(impls):
    x = left + (b % 3) * 250
    y = H + 30 * (b // 3)
    out.append(f'<rect x="{x}" y="{y - 10}" width="12" height="12" fill="{colours[b % len(colours)]}"/>')
    out.append(f'<text x="{x + 18}" y="{y}">{escape(impl)}{" (ratios against it)" if b == 0 else ""}</text>')
out.append("</svg>")
print("\n".join(out))
EOF
  log "wrote $SVG"
fi
