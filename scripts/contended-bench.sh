#!/usr/bin/env bash
# One tunnel shared by the workers while other work takes their cores: the graph
# bench (`linerate bench`, one peer, every worker on it) with a busy loop pinned
# to each core beside it, so that a worker loses the CPU for whole time slices,
# between sealing and sending too. The table's `late` column is what the far end
# (a window of the usual 8,128 counters, fed as the datagrams leave) refuses;
# `resealed` is what the late check sealed again before it left.
#
#   scripts/contended-bench.sh [--binary B] [--workers N] [--sizes S] [--seconds S]
#                              [--json FILE]
#
# Each busy loop ends with the bench (or after 120 s at most).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=target/release/linerate WORKERS=2 SIZES=64,1420 SECONDS_PER_SIZE=3 JSON=()
while [ $# -gt 0 ]; do
  case $1 in
    --binary) BIN=$2; shift 2 ;;
    --workers) WORKERS=$2; shift 2 ;;
    --sizes) SIZES=$2; shift 2 ;;
    --seconds) SECONDS_PER_SIZE=$2; shift 2 ;;
    --json) JSON=(--json "$2"); shift 2 ;;
    -h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "contended-bench.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -x "$BIN" ] || { echo "contended-bench.sh: no binary at $BIN (cargo build --release)" >&2; exit 2; }
busy=()
stop_busy() { kill "${busy[@]}" 2>/dev/null || true; wait "${busy[@]}" 2>/dev/null || true; }
trap stop_busy EXIT
for c in $(seq 0 $(($(nproc) - 1))); do
  taskset -c "$c" timeout 120 sh -c 'while :; do :; done' &
  busy+=($!)
done
echo "busy loops on cores 0-$(($(nproc) - 1)) beside the bench"
"$BIN" bench --workers "$WORKERS" --peers 1 --sizes "$SIZES" --seconds "$SECONDS_PER_SIZE" "${JSON[@]}"
