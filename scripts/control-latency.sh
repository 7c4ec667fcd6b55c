#!/usr/bin/env bash
# Control never stalls packets: how long packets through a live peer wait while
# the control plane works on many others. Two namespaces, a tunnel with one live
# peer; a ping every 10 ms goes through it while N more peers are added
# (`wg syncconf`), the whole table is read (`wg show dump`), and the N peers are
# removed again (`wg syncconf`). Prints, per implementation and N, the time of
# each control step, the largest ping round trip (the longest any packet
# waited) and the loss, with wireguard-go measured in the same run.
#
#   scripts/control-latency.sh [--peers LIST] [--json FILE]
#
#   --peers  comma-separated peer counts (default 1000,16000,100000)
#   --json   where the results go (default docs/bench/control-latency.json)
#   IMPLS    implementations under test, space-separated
#            (default "target/release/linerate wireguard-go"); the far side of
#            the tunnel is always wireguard-go
#
# Generated peers get random keys and one /128 each from 2001:2:0:8000::/64;
# no packet is ever sent to them.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tests/net/lib.sh
. tests/net/lib.sh

IMPLS=${IMPLS:-target/release/linerate wireguard-go}
PEERS=1000,16000,100000
JSON=docs/bench/control-latency.json
while [ $# -gt 0 ]; do
  case $1 in
    --peers) PEERS=${2:?--peers needs a list}; shift 2 ;;
    --json) JSON=${2:?--json needs a file}; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
IFS=, read -r -a counts <<<"$PEERS"
for n in "${counts[@]}"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] && [ "$n" -le 1000000 ] || die "peer counts go from 1 to 1000000, not '$n'"
done
[ "$(id -u)" -eq 0 ] || die "needs root (namespaces, TUN)"

# seconds CMD...: runs CMD, prints how long it took.
seconds() {
  local t0=$EPOCHREALTIME
  "$@" >/dev/null
  awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }'
}

# measure IMPL N OUT: one run, key=value lines to OUT.
measure() {
  local impl=$1 n=$2 out=$3 ping_pid add show del
  pair_up "$impl" "$(resolve_impl wireguard-go)" 4 both
  wait_until 10 "the tunnel" ping_ok "$NS_A" "$I4_B" 1 2
  wg_ns "$NS_A" showconf "$IF_A" >"$LR_TMP/base.conf"
  "$PYTHON" tests/net/peers.py "$n" "$LR_TMP/base.conf" >"$LR_TMP/full.conf"
  # The ping runs through all three steps and a second after them, so replies
  # still in flight at the end are counted.
  ip netns exec "$NS_A" ping -n -i 0.01 -W 2 "$I4_B" >"$LR_TMP/ping.log" 2>&1 &
  ping_pid=$!
  sleep 1
  add=$(seconds timeout 600 ip netns exec "$NS_A" wg syncconf "$IF_A" "$LR_TMP/full.conf")
  show=$(seconds timeout 600 ip netns exec "$NS_A" wg show "$IF_A" dump)
  del=$(seconds timeout 600 ip netns exec "$NS_A" wg syncconf "$IF_A" "$LR_TMP/base.conf")
  sleep 1
  kill -INT "$ping_pid"
  wait "$ping_pid" || true
  "$PYTHON" - "$LR_TMP/ping.log" >"$out" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
sent, got = map(int, re.search(r"(\d+) packets transmitted, (\d+) received", text).groups())
rtt = re.search(r"= [\d.]+/[\d.]+/([\d.]+)/", text)
print(f"pings={sent}")
print(f"loss_pct={100.0 * (sent - got) / max(sent, 1):.2f}")
print(f"max_ms={float(rtt.group(1)) if rtt else float('nan'):.2f}")
PY
  {
    echo "add_s=$add"
    echo "show_s=$show"
    echo "remove_s=$del"
  } >>"$out"
}

results=()
for n in "${counts[@]}"; do
  for impl in $IMPLS; do
    name=$(impl_name "$(resolve_impl "$impl")")
    log "== $name, $n peers"
    out=$(mktemp)
    if ! (measure "$(resolve_impl "$impl")" "$n" "$out"); then
      rm -f "$out"
      die "$name with $n peers failed"
    fi
    results+=("impl=$name peers=$n $(tr '\n' ' ' <"$out")")
    rm -f "$out"
  done
done

"$PYTHON" - "$JSON" "$(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores" "${results[@]}" <<'PY'
import json, sys
path, machine, rows = sys.argv[1], sys.argv[2], sys.argv[3:]
results = []
for r in rows:
    d = dict(kv.split("=", 1) for kv in r.split())
    results.append({
        "impl": d["impl"], "peers": int(d["peers"]),
        "add_s": float(d["add_s"]), "show_s": float(d["show_s"]), "remove_s": float(d["remove_s"]),
        "max_delay_ms": float(d["max_ms"]), "loss_pct": float(d["loss_pct"]), "pings": int(d["pings"]),
    })
print(f"\ncontrol latency: ping every 10 ms through a live peer while N peers are added, listed and removed ({machine})\n")
print(f"{'peers':>8} {'implementation':<15} {'add s':>8} {'show s':>8} {'remove s':>9} {'max delay ms':>13} {'loss %':>7} {'pings':>6}")
for r in results:
    print(f"{r['peers']:>8} {r['impl']:<15} {r['add_s']:>8.2f} {r['show_s']:>8.2f} {r['remove_s']:>9.2f} "
          f"{r['max_delay_ms']:>13.2f} {r['loss_pct']:>7.2f} {r['pings']:>6}")
by = {(r["impl"], r["peers"]): r for r in results}
for n in sorted({r["peers"] for r in results}):
    a, b = by.get(("linerate", n)), by.get(("wireguard-go", n))
    if a and b and b["max_delay_ms"] > 0:
        print(f"{n:>8} peers: linerate's largest delay is {a['max_delay_ms'] / b['max_delay_ms']:.2f}x wireguard-go's")
with open(path, "w") as f:
    json.dump({"machine": machine, "results": results}, f, indent=2)
    f.write("\n")
print(f"wrote {path}")
PY
