#!/usr/bin/env bash
# ESP known answers from scapy, made fresh (new keys, SPIs and sizes each run):
# scapy seals inner packets with the IV linerate would choose, and the gateway
# graph must produce those ESP packets byte for byte and open them back to the
# inner packets (crates/dataplane/tests/gateway_esp.rs). `cargo test` runs the
# same test on the committed cases (crates/dataplane/tests/data/esp_scapy.txt,
# made by this script's generator with seed 1).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp /tmp/linerate-esp-vectors.XXXXXX)
trap 'rm -f "$out"' EXIT
# Debian's python3-scapy, whatever python3 comes first on PATH.
/usr/bin/python3 tests/esp/scapy_vectors.py "$out"
ESP_SCAPY_VECTORS=$out cargo test --release -q -p dataplane --test gateway_esp
