#!/usr/bin/env bash
# L2 benchmark: the published VXLAN swing on this machine. Unidirectional UDP at
# 64-byte, IMIX and 1514-byte frames from a generator on one site's LAN to a sink
# on the other's, through (a) VXLAN in cleartext and (b) VXLAN inside WireGuard,
# linerate gateways with 1 and 2 workers, and the kernel's vxlan device with a
# bridge (cleartext) as the baseline in the same run. Mpps, Gbit/s, loss; JSON
# with --json FILE, like the gateway benchmark's.
#
#   scripts/l2-bench.sh [--seconds S] [--repeat N] [--json FILE] [--svg FILE]
#                       [--impls "kernel-vxlan vxlan/1 ..."] [--sizes "64 imix 1514"]
#
# Jumbo LANs: --sizes "1514 9014" (every link jumbo for the run, both sizes
# over the same links).
# This is scripts/gateway-bench.sh --l2 (see its --help for every option).
set -euo pipefail
exec "$(dirname "$0")/gateway-bench.sh" --l2 "$@"
