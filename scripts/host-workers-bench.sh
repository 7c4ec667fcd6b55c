#!/usr/bin/env bash
# Host mode on several workers: linerate on both ends of one tunnel (two network
# namespaces joined by a veth pair), TCP through it with iperf3 -P STREAMS, once
# per worker count, the counts taking turns for each repetition; the median of
# each count is kept. Prints a table with each count's throughput over the
# first's (the baseline, measured in the same run) and writes JSON.
#
#   scripts/host-workers-bench.sh [--workers 1,2] [--streams 4] [--seconds 10]
#                                 [--repeat 3] [--json FILE]
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tests/net/lib.sh
. tests/net/lib.sh

WORKERS=1,2
STREAMS=4
SECONDS_EACH=10
REPEAT=3
JSON=
IPERF_PORT=45202
IMPL=target/release/linerate

usage() { sed -n '2,10s/^# \{0,1\}//p' "$0"; }

# measure WORKERS OUT: one run; key=value lines to OUT.
measure() {
  local impl out=$2
  impl=$(resolve_impl "$IMPL")
  export LINERATE_WORKERS=$1
  pair_up "$impl" "$impl" 4 both
  ip netns exec "$NS_A" ping -n -q -c 1 -w 5 "$I4_B" >/dev/null ||
    { fail "no reply through the tunnel within 5 s"; return 1; }
  tcp_through_tunnel "$SECONDS_EACH" "$IPERF_PORT" -P "$STREAMS" >"$out"
  {
    echo "counters_b=$(ip netns exec "$NS_B" "$impl" show counters "$IF_B" 2>/dev/null |
      grep -E '^ *spread\.' | tr -s ' ' | tr '\n' ';' || true)"
  } >>"$out"
  sed 's/^/    /' "$out" >&2
}

if [ "${1:-}" = __run ]; then
  report_errors
  STREAMS=$4 SECONDS_EACH=$5
  measure "$2" "$3"
  exit 0
fi

while [ $# -gt 0 ]; do
  case $1 in
    --workers) WORKERS=$2; shift 2 ;;
    --streams) STREAMS=$2; shift 2 ;;
    --seconds) SECONDS_EACH=$2; shift 2 ;;
    --repeat) REPEAT=$2; shift 2 ;;
    --json) JSON=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done
[[ $WORKERS =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || die "--workers: a list like 1,2"
[[ $STREAMS =~ ^[1-9][0-9]?$ ]] || die "--streams: 1 to 99"
[[ $SECONDS_EACH =~ ^[1-9][0-9]*$ ]] && [ "$SECONDS_EACH" -le 120 ] || die "--seconds: 1 to 120"
[[ $REPEAT =~ ^[1-9]$ ]] || die "--repeat: 1 to 9"
[ "$(id -u)" -eq 0 ] || die "needs root (namespaces, TUN)"
[ -x "$IMPL" ] || die "$IMPL is missing: run make build"

results=$(mktemp -d /tmp/linerate-host-workers.XXXXXX)
child=
trap 'rm -rf -- "$results"' EXIT
trap 'log "interrupted"; [ -z "$child" ] || { kill -TERM "$child" 2>/dev/null; wait "$child" || true; }; exit 130' INT TERM

IFS=, read -r -a counts <<<"$WORKERS"
log "host mode, linerate on both ends, iperf3 -P $STREAMS for ${SECONDS_EACH}s; workers ${counts[*]}, $REPEAT turn(s)"
for rep in $(seq 1 "$REPEAT"); do
  for w in "${counts[@]}"; do
    log "== turn $rep, $w worker(s)"
    rc=0
    timeout -k 10 $((SECONDS_EACH + 120)) "$BASH" "$0" __run "$w" "$results/$w.$rep" \
      "$STREAMS" "$SECONDS_EACH" &
    child=$!
    wait "$child" || rc=$?
    child=
    [ "$rc" -eq 0 ] || { log "== $w worker(s): FAILED (exit $rc)"; echo "failed=1" >>"$results/$w.$rep"; }
  done
done

"$PYTHON" - "$results" "$WORKERS" "$REPEAT" "$STREAMS" "$SECONDS_EACH" "${JSON:-}" <<'PY'
import json, os, platform, statistics, sys

results, workers, repeat, streams, seconds, out = sys.argv[1:7]
counts = [int(w) for w in workers.split(",")]
def cpu():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.machine()
rows = []
for w in counts:
    runs = []
    for rep in range(1, int(repeat) + 1):
        kv = {}
        path = os.path.join(results, f"{w}.{rep}")
        if os.path.exists(path):
            for line in open(path):
                k, _, v = line.strip().partition("=")
                kv[k] = v
        if "tcp_mbps" in kv and "failed" not in kv:
            runs.append(kv)
    if not runs:
        rows.append({"workers": w, "ok": False})
        continue
    runs.sort(key=lambda kv: float(kv["tcp_mbps"]))
    mid = runs[len(runs) // 2]
    rows.append({
        "workers": w, "ok": True,
        "mbps": float(mid["tcp_mbps"]),
        "runs_mbps": [float(kv["tcp_mbps"]) for kv in runs],
        "retransmits": int(mid["tcp_retransmits"]),
        "cpu_s_sender": float(mid["cpu_s_sender"]),
        "cpu_s_receiver": float(mid["cpu_s_receiver"]),
        "receiver_spread_counters": mid.get("counters_b", ""),
    })
base = next((r for r in rows if r["ok"] and r["workers"] == counts[0]), None)
print()
print(f"{'workers':>8} {'Mbit/s':>10} {'x base':>7} {'retrans':>8} {'CPU s snd':>10} {'CPU s rcv':>10}  runs (Mbit/s)")
for r in rows:
    if not r["ok"]:
        print(f"{r['workers']:>8} {'failed':>10}")
        continue
    r["over_first"] = r["mbps"] / base["mbps"] if base else None
    x = f"{r['over_first']:.2f}" if base else "-"
    print(f"{r['workers']:>8} {r['mbps']:>10.1f} {x:>7} {r['retransmits']:>8} "
          f"{r['cpu_s_sender']:>10.2f} {r['cpu_s_receiver']:>10.2f}  "
          + ", ".join(f"{m:.0f}" for m in r["runs_mbps"]))
machine = f"{cpu()}, {os.cpu_count()} cores"
print(f"\nhost mode, linerate on both ends of one tunnel, iperf3 -P {streams} for {seconds} s, "
      f"median of {repeat} turn(s); {machine}; kernel {platform.release()}")
if out:
    doc = {"machine": machine, "streams": int(streams), "seconds": int(seconds),
           "repeat_median_of": int(repeat), "results": rows}
    with open(out + ".tmp", "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    os.replace(out + ".tmp", out)
    print(f"wrote {out}")
sys.exit(0 if all(r["ok"] for r in rows) else 1)
PY
