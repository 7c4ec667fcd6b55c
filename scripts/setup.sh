#!/usr/bin/env bash
# Installs everything `make demo` and `make test` need on a fresh Debian 12 machine.
# Idempotent: every step checks first and does nothing when its tool is already there.
set -euo pipefail

log() { printf 'setup: %s\n' "$*" >&2; }

APT_PACKAGES=(
  iproute2 iputils-ping iperf3 wireguard-tools tshark libipsec-mb-dev nftables conntrack bc
  pkg-config build-essential libclang-dev clang openssl procps psmisc python3
  libxdp-dev libbpf-dev xdp-tools ethtool python3-scapy python3-cryptography python3-venv
  strongswan-charon strongswan-swanctl libcharon-extra-plugins libstrongswan-standard-plugins
  openvpn systemd util-linux
)

need_apt=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need_apt+=("$p")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    log "missing Debian packages: ${need_apt[*]} (run as root to install them)"; exit 1
  fi
  log "installing Debian packages: ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

# Third-party WireGuard peers for the interop tests and the demo's baseline.
GOBIN_DIR="${GOBIN:-$(go env GOPATH 2>/dev/null || echo /root/go)/bin}"
if ! command -v wireguard-go >/dev/null 2>&1; then
  if [ -x "$GOBIN_DIR/wireguard" ]; then
    :
  else
    log "installing wireguard-go"
    GOFLAGS=-mod=mod go install golang.zx2c4.com/wireguard@latest
  fi
  ln -sf "$GOBIN_DIR/wireguard" /usr/local/bin/wireguard-go
fi

# scapy 2.6.1 for the ESP known answers: Debian 12's 2.5 leaves the ESN out of
# ESP's HMAC. A venv of its own, on Debian's python3 and its cryptography.
SCAPY_VENV=/opt/linerate/scapy
if ! "$SCAPY_VENV/bin/python" -c 'import sys, scapy; sys.exit(scapy.__version__ != "2.6.1")' 2>/dev/null; then
  log "installing scapy 2.6.1 in $SCAPY_VENV"
  /usr/bin/python3 -m venv --system-site-packages "$SCAPY_VENV"
  "$SCAPY_VENV/bin/pip" install -q scapy==2.6.1
fi

CARGO_BIN="${CARGO_HOME:-$HOME/.cargo}/bin"
if ! command -v boringtun-cli >/dev/null 2>&1; then
  if [ ! -x "$CARGO_BIN/boringtun-cli" ]; then
    log "installing boringtun-cli (a few minutes the first time)"
    cargo install --locked boringtun-cli >/dev/null 2>&1 || cargo install boringtun-cli
  fi
  ln -sf "$CARGO_BIN/boringtun-cli" /usr/local/bin/boringtun-cli
fi

log "ready: $(wg --version 2>/dev/null | head -1); wireguard-go $(wireguard-go --version 2>/dev/null | head -1 || true); boringtun-cli present"
