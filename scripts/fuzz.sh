#!/usr/bin/env bash
# Runs the libFuzzer targets under fuzz/ for a bounded time.
#
#   scripts/fuzz.sh TARGET SECONDS   one target
#   scripts/fuzz.sh all SECONDS      every target in turn
#   scripts/fuzz.sh list             the targets
#
# cargo-fuzz needs nightly-only flags (-Z sanitizer, sancov passes); the
# stable toolchain accepts them with RUSTC_BOOTSTRAP=1, so no nightly is
# needed. Builds keep cargo-fuzz's defaults: optimised, with debug
# assertions, overflow checks and AddressSanitizer. The corpus grows under
# fuzz/corpus/TARGET and crashes land in fuzz/artifacts/TARGET (both
# ignored by git). Prints one libFuzzer stats line per target and exits
# non-zero if any target crashed.
set -euo pipefail

cd "$(dirname "$0")/.."
export RUSTC_BOOTSTRAP=1

usage() {
  echo "usage: $0 TARGET|all SECONDS | $0 list" >&2
  exit 2
}

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz: installing cargo-fuzz" >&2
  cargo install --locked cargo-fuzz >&2
fi

[ $# -ge 1 ] || usage
if [ "$1" = list ]; then
  cargo fuzz list
  exit 0
fi
[ $# -eq 2 ] || usage
target=$1
seconds=$2
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || usage

mapfile -t known < <(cargo fuzz list)
if [ "$target" = all ]; then
  targets=("${known[@]}")
else
  found=0
  for t in "${known[@]}"; do [ "$t" = "$target" ] && found=1; done
  [ "$found" = 1 ] || { echo "fuzz: no target '$target'; have: ${known[*]}" >&2; exit 2; }
  targets=("$target")
fi

# Build every target up front so that build errors stop the run before any
# fuzzing time is spent.
cargo fuzz build >&2

logdir=$(mktemp -d)
trap 'rm -rf "$logdir"' EXIT
failed=()
for t in "${targets[@]}"; do
  log="$logdir/$t.log"
  status=0
  cargo fuzz run "$t" -- -max_total_time="$seconds" -print_final_stats=1 >"$log" 2>&1 || status=$?
  # The last "#N DONE cov: ... exec/s: ..." line is libFuzzer's summary.
  stats=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n 1 || true)
  if [ "$status" -eq 0 ]; then
    printf '%-24s %s\n' "$t" "${stats:-(no stats line)}"
  else
    printf '%-24s FAILED (exit %d)\n' "$t" "$status"
    tail -n 40 "$log" >&2
    failed+=("$t")
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: crashed: ${failed[*]} (inputs under fuzz/artifacts/)" >&2
  exit 1
fi
