#!/usr/bin/env bash
# Two sites in two network namespaces joined by a veth underlay, a WireGuard
# tunnel between them, the same implementation on both ends; then the next
# implementation. For each: time to the first ping reply through a fresh
# tunnel (handshake included), average ping round trip, one-stream TCP
# throughput with iperf3, and the CPU time both ends' daemons used during it.
# Prints one table, a column per implementation, and writes it as JSON.
#
#   IMPLS         implementations to compare, space-separated
#                 (default "target/release/linerate wireguard-go")
#   DEMO_SECONDS  length of the iperf3 run (default 10)
#   DEMO_OUTER    the underlay's IP version, 4 or 6 (default 4); with 6 and the
#                 default inner MTU of 1420, full-sized packets fill the
#                 1500-byte underlay exactly
#   DEMO_JSON     where the JSON goes (default docs/demo/latest.json)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tests/net/lib.sh
. tests/net/lib.sh

IMPLS=${IMPLS:-target/release/linerate wireguard-go}
DEMO_SECONDS=${DEMO_SECONDS:-10}
DEMO_OUTER=${DEMO_OUTER:-4}
DEMO_JSON=${DEMO_JSON:-docs/demo/latest.json}
IPERF_PORT=45201

[[ $DEMO_OUTER =~ ^[46]$ ]] || die "DEMO_OUTER must be 4 or 6"
if ! [[ $DEMO_SECONDS =~ ^[1-9][0-9]*$ ]] || [ "$DEMO_SECONDS" -gt 120 ]; then
  die "DEMO_SECONDS must be a whole number of seconds, 1 to 120"
fi

# measure IMPL OUT: one implementation on both ends; key=value lines to OUT.
measure() {
  local impl out=$2 s e line
  impl=$(resolve_impl "$1")
  pair_up "$impl" "$impl" "$DEMO_OUTER" both
  log "  $(impl_name "$impl"): tunnel configured"

  # First reply: the first ping waits for the handshake. Timed inside the
  # namespace so that entering it is not counted.
  # shellcheck disable=SC2016  # expanded by the inner bash
  read -r s e < <(ip netns exec "$NS_A" bash -c \
    's=$EPOCHREALTIME; ping -n -q -c 1 -i 0.02 -w 5 "$1" >/dev/null || exit 1; echo "$s $EPOCHREALTIME"' \
    _ "$I4_B") || { fail "no reply through the tunnel within 5 s"; return 1; }
  echo "first_reply_ms=$(awk -v s="$s" -v e="$e" 'BEGIN { printf "%.2f", (e - s) * 1000 }')" >"$out"

  # Round trip on the established tunnel.
  line=$(ip netns exec "$NS_A" ping -n -q -c 20 -i 0.05 -w 10 "$I4_B" | grep -E '^(rtt|round-trip)')
  echo "rtt_avg_ms=$(cut -d/ -f5 <<<"$line")" >>"$out"

  # Throughput, and the daemons' CPU time over the same interval.
  tcp_through_tunnel "$DEMO_SECONDS" "$IPERF_PORT" >>"$out"
  sed 's/^/    /' "$out" >&2
}

if [ "${1:-}" = __run ]; then
  report_errors
  measure "$2" "$3"
  exit 0
fi

[ "$(id -u)" -eq 0 ] || die "the demo needs root (namespaces, TUN)"
read -r -a impls <<<"$IMPLS"
[ ${#impls[@]} -gt 0 ] || die "IMPLS is empty"
results=$(mktemp -d /tmp/linerate-demo.XXXXXX)
child=
trap 'rm -rf -- "$results"' EXIT
trap 'log "interrupted"; [ -z "$child" ] || { kill -TERM "$child" 2>/dev/null; wait "$child" || true; }; exit 130' INT TERM

log "demo: ${impls[*]}; iperf3 for ${DEMO_SECONDS}s each, outer IPv$DEMO_OUTER"
failed=0 i=0
for impl in "${impls[@]}"; do
  log "== $(impl_name "$impl")"
  rc=0
  timeout -k 10 $((DEMO_SECONDS + 120)) "$BASH" "$0" __run "$impl" "$results/$i" &
  child=$!
  wait "$child" || rc=$?
  child=
  if [ "$rc" -ne 0 ]; then
    log "== $(impl_name "$impl"): FAILED (exit $rc)"
    failed=1
    echo "failed=1" >>"$results/$i"
  fi
  i=$((i + 1))
done

mkdir -p "$(dirname "$DEMO_JSON")"
"$PYTHON" - "$results" "$DEMO_SECONDS" "$DEMO_OUTER" "$DEMO_JSON" "${impls[@]}" <<'PY'
import datetime, json, os, platform, sys

results, seconds, outer, out, impls = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
rows = [
    ("first_reply_ms", "first reply, ms (handshake + 1 RTT)"),
    ("rtt_avg_ms", "ping RTT avg, ms (20 pings)"),
    ("tcp_mbps", "TCP throughput, Mbit/s"),
    ("tcp_retransmits", "TCP retransmits"),
    ("cpu_s_sender", "CPU s, sending side daemon"),
    ("cpu_s_receiver", "CPU s, receiving side daemon"),
]
cols, shown = [], []
for i, impl in enumerate(impls):
    kv = {}
    path = os.path.join(results, str(i))
    if os.path.exists(path):
        for line in open(path):
            k, _, v = line.strip().partition("=")
            kv[k] = v
    col = {"name": os.path.basename(impl), "command": impl, "ok": "failed" not in kv}
    for key, _ in rows:
        if key in kv:
            col[key] = float(kv[key]) if "." in kv[key] else int(kv[key])
    cols.append(col)
    shown.append(kv)

width = max(12, *(len(c["name"]) for c in cols))
print()
print(f"{'':38}" + "".join(f"  {c['name']:>{width}}" for c in cols))
for key, label in rows:
    cells = "".join(f"  {kv.get(key, '-' if c['ok'] else 'failed'):>{width}}" for c, kv in zip(cols, shown))
    print(f"{label:38}{cells}")
print(f"\n{seconds} s iperf3 run, one TCP stream, same implementation on both ends, outer IPv{outer}; "
      f"{os.cpu_count()} CPUs, kernel {platform.release()}")

doc = {
    "generated": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "setup": "two network namespaces joined by a veth pair; the same implementation on "
             "both ends; ping and one iperf3 TCP stream through the tunnel, a to b",
    "iperf_seconds": seconds,
    "outer": f"IPv{outer}",
    "host": {"cpus": os.cpu_count(), "kernel": platform.release(), "machine": platform.machine()},
    "implementations": cols,
}
with open(out + ".tmp", "w") as f:
    json.dump(doc, f, indent=2)
    f.write("\n")
os.replace(out + ".tmp", out)
print(f"wrote {out}")
PY
exit "$failed"
