#!/usr/bin/env bash
# ESP known answers from scapy, made fresh (new keys, SPIs and sizes each run):
# scapy seals inner packets (AEADs: with the IV linerate would choose), and the
# gateway graph must produce those ESP packets byte for byte (AEADs; CBC packets,
# whose IVs are random, scapy opens after) and open them back to the inner
# packets (crates/dataplane/tests/gateway_esp.rs). `cargo test` runs the
# same test on the committed cases (crates/dataplane/tests/data/esp_scapy.txt,
# made by this script's generator with seed 1).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp /tmp/linerate-esp-vectors.XXXXXX)
sealed=$(mktemp /tmp/linerate-esp-sealed.XXXXXX)
trap 'rm -f "$out" "$sealed"' EXIT
# scapy 2.6.1 (scripts/setup.sh): Debian's 2.5 leaves the ESN out of ESP's HMAC.
scapy=/opt/linerate/scapy/bin/python
[ -x "$scapy" ] || { echo "known_answers: $scapy missing (make setup)" >&2; exit 1; }
"$scapy" tests/esp/scapy_vectors.py "$out"
ESP_SCAPY_VECTORS=$out ESP_LINERATE_OUT=$sealed \
  cargo test --release -q -p dataplane --test gateway_esp
# linerate's CBC packets (random IVs): scapy must open them.
"$scapy" tests/esp/scapy_vectors.py check "$sealed"
