#!/usr/bin/env bash
# ESP tunnels between two linerate gateways, in network namespaces, with manual
# SAs (the same topology as tests/net/gateway.sh, no WireGuard):
#
#   host-a ── lan [gw-a] wan ──────────── wan [gw-b] lan ── host-b
#   198.19.1.10    198.18.2.1 2001:2:0:2::1  .2 ::2        198.19.3.10
#
#   v4_esp     IPv4 outer, ESP on IP, aes128gcm16
#   v4_udp     IPv4 outer, ESP in UDP (RFC 3948), aes256gcm16 with ESN
#   v6_esp     IPv6 outer, ESP on IP, chacha20poly1305 with ESN
#   v6_udp     IPv6 outer, ESP in UDP, aes128gcm16
#   v4_cbc     IPv4 outer, ESP on IP, aes128-sha1 (AES-CBC, HMAC-SHA1-96) with ESN
#   v6_cbc     IPv6 outer, ESP in UDP, aes256-sha256
#   tshark_decodes  tshark opens gw-a's ESP (captured on gw-b's WAN, AF_PACKET
#              ports so the capture sees it) with the SA's key, finds every
#              ICV correct and the inner datagrams as host a sent them
#   small_wan  WAN interfaces of MTU 1400 under ports configured for 1500: the
#              gateways run the ports at 1400, lower the tunnel's MTU on the
#              first outer packet too big, and TCP finds the path MTU through them
#   sas_at_run_time  no SA in the files: `linerate esp add` brings the tunnel
#              up, then a new pair of SAs replaces the first during a transfer
#              (inbound added before the peer seals with it, the old removed
#              after), nothing lost
#
# Each: ping both ways over IPv4 and IPv6 inside, 100 MiB over TCP each way
# (sha256 checked), the SAs' counters in `linerate show esp`,
# nothing dropped that should not be, no buffer leaked.
#
#   tests/net/esp.sh [SCENARIO...]    (-l lists them)
#
#   LINERATE           the binary (default target/release/linerate)
#   GW_DRIVER          the ports' driver (default af_xdp; af_packet)
#   GW_WORKERS         workers per gateway (default 1), one per core from 0
#   SCENARIO_TIMEOUT   seconds one scenario may take (default 240)
#
# Prints a table and, last, "N passed, M failed"; exits non-zero if any failed.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=tests/net/lib.sh
. tests/net/lib.sh
# shellcheck source=tests/net/gateway_lib.sh
. tests/net/gateway_lib.sh

LINERATE=${LINERATE:-target/release/linerate}
GW_DRIVER=${GW_DRIVER:-af_xdp}
GW_WORKERS=${GW_WORKERS:-1}
SCENARIO_TIMEOUT=${SCENARIO_TIMEOUT:-240}
SCENARIOS=(v4_esp v4_udp v6_esp v6_udp v4_cbc v6_cbc tshark_decodes sas_at_run_time small_wan jumbo)

W6_A=2001:2:0:2::1 W6_B=2001:2:0:2::2
SPI_AB=0x0000a0b1 SPI_BA=0x0000b0a1

# esp_keys ALG: a key file per direction ($LR_TMP/ab.key, ba.key) for ALG.
esp_keys() {
  local n
  case $1 in
    aes128gcm16) n=20 ;;
    aes256gcm16 | chacha20poly1305 | aes128-sha1) n=36 ;;
    aes128-sha256) n=48 ;;
    aes256-sha1) n=52 ;;
    aes256-sha256) n=64 ;;
  esac
  (umask 077
    "$PYTHON" -c "import os; print(os.urandom($n).hex())" >"$LR_TMP/ab.key"
    "$PYTHON" -c "import os; print(os.urandom($n).hex())" >"$LR_TMP/ba.key")
}

# esp_config SIDE FAMILY(4|6) ENCAP(none|udp) ALG ESN(true|false) [SAS(yes|no)]:
# that gateway's file: its ESP tunnel to the other, the other site's LAN routed
# in, and (unless SAS is no) its manual SAs.
esp_config() {
  local side=$1 fam=$2 encap=$3 alg=$4 esn=$5 sas=${6:-yes} lan4 lan6 wan4 wan6 local remote
  local mine4 mine6 theirs4 theirs6 out_spi in_spi out_key in_key
  if [ "$side" = a ]; then
    lan4=$G4_A lan6=$G6_A wan4=$W4_A wan6=$W6_A
    mine4=198.19.1.0/24 mine6=2001:2:0:1::/64 theirs4=198.19.3.0/24 theirs6=2001:2:0:3::/64
    out_spi=$SPI_AB in_spi=$SPI_BA out_key=ab.key in_key=ba.key
  else
    lan4=$G4_B lan6=$G6_B wan4=$W4_B wan6=$W6_B
    mine4=198.19.3.0/24 mine6=2001:2:0:3::/64 theirs4=198.19.1.0/24 theirs6=2001:2:0:1::/64
    out_spi=$SPI_BA in_spi=$SPI_AB out_key=ba.key in_key=ab.key
  fi
  if [ "$fam" = 4 ]; then
    local=$wan4 remote=$([ "$side" = a ] && echo "$W4_B" || echo "$W4_A")
  else
    local=$wan6 remote=$([ "$side" = a ] && echo "$W6_B" || echo "$W6_A")
  fi
  local sa_tables=""
  if [ "$sas" = yes ]; then
    sa_tables="[esp.outbound]
spi = $out_spi
algorithm = \"$alg\"
key_file = \"$out_key\"
esn = $esn

[[esp.inbound]]
spi = $in_spi
algorithm = \"$alg\"
key_file = \"$in_key\"
esn = $esn
replay_window = 4096
"
  fi
  {
    gw_head "$side" "$lan4" "$lan6" "$wan4/24" "$wan6/64"
    cat <<EOF
[[esp]]
name = "site"
local = "$local"
remote = "$remote"
encapsulation = "$encap"
local_ts = ["$mine4", "$mine6"]
remote_ts = ["$theirs4", "$theirs6"]

$sa_tables
[[route]]
prefix = "$theirs4"
tunnel = "site"

[[route]]
prefix = "$theirs6"
tunnel = "site"
EOF
  } >"$LR_TMP/gw-$side.toml"
}

# sa_packets SIDE DIR: the packets of that gateway's SA in direction DIR
# (out|in), from `show esp` ("  out spi 0x... ALG[ esn]: N packets ...").
sa_packets() {
  gw_show "$1" esp | awk -v d="$2" '$1 == d && $2 == "spi" {
    for (i = 3; i < NF; i++) if ($(i + 1) == "packets") { print $i; exit } }'
}

sa_packets_at_least() { [ "$(sa_packets "$1" "$2")" -ge "$3" ]; }

# through FAMILY ENCAP ALG ESN: the whole check for one form of tunnel.
through() {
  local fam=$1 encap=$2 alg=$3 esn=$4 text
  topology
  esp_keys "$alg"
  esp_config a "$fam" "$encap" "$alg" "$esn"
  esp_config b "$fam" "$encap" "$alg" "$esn"
  assert "gw-a's file checks and lists the tunnel" \
    grep -q "^esp site: " <<<"$("$LINERATE" gateway --check -c "$LR_TMP/gw-a.toml")"
  gw_start a
  gw_start b
  assert "host a pings host b through ESP" ping_ok "$NS_HA" "$H4_B" 3 15
  assert "and over IPv6 inside" ping_ok "$NS_HA" "$H6_B"
  assert "host b pings host a" ping_ok "$NS_HB" "$H4_A"
  make_payload 100
  XFER_TIMEOUT=120
  assert "100 MiB host a -> host b, sha256 matches" xfer "$NS_HA" "$NS_HB" "$H4_B"
  assert "100 MiB host b -> host a over IPv6 inside, sha256 matches" xfer "$NS_HB" "$NS_HA" "$H6_A"
  text=$(gw_show a esp)
  assert "show esp lists the tunnel" grep -q "^site (esp) " <<<"$text"
  assert "and its outbound SA" grep -q "out spi $(printf '0x%08x' "$SPI_AB") $alg" <<<"$text"
  assert "and its inbound SA" grep -q "in spi $(printf '0x%08x' "$SPI_BA") $alg" <<<"$text"
  assert "gw-a's outbound SA sealed the transfer" sa_packets_at_least a out 60000
  assert "gw-b's inbound SA opened it" sa_packets_at_least b in 60000
  assert "nothing failed to verify or was dropped in esp-decrypt" \
    test "$(gw_counter a 'esp-decrypt\.drop\..*') $(gw_counter b 'esp-decrypt\.drop\..*')" = "0 0"
  assert "nothing refused in esp-encrypt" \
    test "$(gw_counter a 'esp-encrypt\.drop\..*') $(gw_counter b 'esp-encrypt\.drop\..*')" = "0 0"
  sleep 0.5
  assert "no buffer leaked on gateway a" buffers_all_back a
  assert "no buffer leaked on gateway b" buffers_all_back b
}


# esp_sa SIDE ARGS...: `linerate esp ARGS` on that gateway's socket.
esp_sa() { local side=$1; shift; "$LINERATE" esp "$@" --socket "$LR_TMP/gw-$side.sock" >/dev/null; }

# spi_packets SIDE SPI: the packets of that gateway's SA with SPI, from show esp.
spi_packets() {
  gw_show "$1" esp | awk -v s="$(printf '0x%08x' "$2")" '$2 == "spi" && $3 == s {
    for (i = 4; i < NF; i++) if ($(i + 1) == "packets") { print $i; exit } }'
}

scenario_sas_at_run_time() {
  local alg=aes128gcm16 spi_ab2=0x0000a0b2 spi_ba2=0x0000b0a2 k
  topology
  esp_keys "$alg"
  esp_config a 4 udp "$alg" true no
  esp_config b 4 udp "$alg" true no
  gw_start a
  gw_start b
  assert "no SA yet: nothing gets through" not ping_ok "$NS_HA" "$H4_B" 1 2
  assert "and gateway a counted why (no-sa)" counter_at_least a 'esp-encrypt\.drop\.no-sa' 1
  local args=(--tunnel site --algorithm "$alg" --esn)
  assert "b takes a's SPI" esp_sa b add "${args[@]}" --direction in --spi "$SPI_AB" --key-file "$LR_TMP/ab.key"
  assert "a seals with it" esp_sa a add "${args[@]}" --direction out --spi "$SPI_AB" --key-file "$LR_TMP/ab.key"
  assert "a takes b's SPI" esp_sa a add "${args[@]}" --direction in --spi "$SPI_BA" --key-file "$LR_TMP/ba.key"
  assert "b seals with it" esp_sa b add "${args[@]}" --direction out --spi "$SPI_BA" --key-file "$LR_TMP/ba.key"
  assert "host a pings host b" ping_ok "$NS_HA" "$H4_B" 3 10
  for k in ab2 ba2; do
    (umask 077; "$PYTHON" -c "import os; print(os.urandom(20).hex())" >"$LR_TMP/$k.key")
  done
  # New SAs during a transfer: each side takes the new inbound SPI before the
  # other seals with it, and lets the old one go after.
  make_payload 100
  XFER_TIMEOUT=120
  # Paced, so that the new SAs come in while it runs.
  xfer_start "$NS_HA" "$NS_HB" "$H4_B" 40
  sleep 0.5
  assert "b takes a's new SPI" esp_sa b add "${args[@]}" --direction in --spi "$spi_ab2" --key-file "$LR_TMP/ab2.key"
  assert "a seals with it" esp_sa a add "${args[@]}" --direction out --spi "$spi_ab2" --key-file "$LR_TMP/ab2.key"
  assert "a takes b's new SPI" esp_sa a add "${args[@]}" --direction in --spi "$spi_ba2" --key-file "$LR_TMP/ba2.key"
  assert "b seals with it" esp_sa b add "${args[@]}" --direction out --spi "$spi_ba2" --key-file "$LR_TMP/ba2.key"
  sleep 0.5
  assert "b lets a's old SPI go" esp_sa b remove --tunnel site --direction in --spi "$SPI_AB"
  assert "a lets b's old SPI go" esp_sa a remove --tunnel site --direction in --spi "$SPI_BA"
  assert "the transfer went on through the change, sha256 matches" xfer_finish
  assert "b's new inbound SA took most of it" test "$(spi_packets b "$spi_ab2")" -ge 20000
  assert "b's old one is gone" test -z "$(spi_packets b "$SPI_AB")"
  assert "nothing dropped in esp-decrypt on either side" \
    test "$(gw_counter a 'esp-decrypt\.drop\..*') $(gw_counter b 'esp-decrypt\.drop\..*')" = "0 0"
  assert "removing an SPI that is not there is refused" not esp_sa b remove --tunnel site --direction in --spi "$SPI_AB"
  assert "an unknown tunnel is refused" not esp_sa a remove --tunnel nope --direction out
  "$PYTHON" -c "import os; print(os.urandom(10).hex())" >"$LR_TMP/short.key"
  assert "a key of the wrong length is refused" not esp_sa a add "${args[@]}" --direction in --spi 0x999 --key-file "$LR_TMP/short.key"
  sleep 0.5
  assert "no buffer leaked on gateway a" buffers_all_back a
  assert "no buffer leaked on gateway b" buffers_all_back b
}

# Wireshark's ESP decoder knows AES-GCM (not ChaCha20-Poly1305 in the version
# Debian has) and checks its ICV without ESN.
scenario_tshark_decodes() {
  local alg=aes128gcm16 n=20 got good
  GW_DRIVER=af_packet
  topology
  esp_keys "$alg"
  esp_config a 4 none "$alg" false
  esp_config b 4 none "$alg" false
  gw_start a
  gw_start b
  assert "host a pings host b" ping_ok "$NS_HA" "$H4_B" 3 15
  in_ns "$NS_GB" timeout 15 dumpcap -q -i wan -f 'ip proto 50' -w "$LR_TMP/esp.pcapng" -a duration:4 2>/dev/null &
  local cap=$!
  sleep 1.5
  in_ns "$NS_HA" "$PYTHON" - "$H4_B" "$n" <<'PYEOF2'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(int(sys.argv[2])):
    s.sendto(b"linerate-esp-%04d" % i, (sys.argv[1], 9))
PYEOF2
  wait "$cap" || true
  local sa="\"IPv4\",\"$W4_A\",\"$W4_B\",\"$SPI_AB\",\"AES-GCM with 16 octet ICV [RFC4106]\",\"0x$(cat "$LR_TMP/ab.key")\",\"NULL\",\"\""
  tshark -r "$LR_TMP/esp.pcapng" -o esp.enable_encryption_decode:TRUE \
    -o esp.enable_authentication_check:TRUE -o "uat:esp_sa:$sa" \
    -T fields -E separator=' ' -e esp.icv_good -e ip.src -e udp.dstport -e data.data \
    >"$LR_TMP/decoded.txt" 2>/dev/null
  got=$(awk '$2 ~ /,198\.19\.1\.10$/ && $3 == 9' "$LR_TMP/decoded.txt" | wc -l)
  good=$(awk '$2 ~ /,198\.19\.1\.10$/ && $3 == 9 && $1 == 1' "$LR_TMP/decoded.txt" | wc -l)
  assert_eq "tshark opened every datagram host a sent" "$n" "$got"
  assert_eq "and found every ICV correct" "$n" "$good"
  local want
  want=$("$PYTHON" -c "print(' '.join((b'linerate-esp-%04d' % i).hex() for i in range($n)))")
  assert "the inner datagrams are as sent" test \
    "$(awk '$3 == 9 { printf "%s ", $4 }' "$LR_TMP/decoded.txt" | sed 's/ $//')" = "$want"
}

scenario_small_wan() {
  topology
  local ns s out
  for ns in "$NS_GA" "$NS_GB"; do ip -n "$ns" link set wan mtu 1400; done
  esp_keys aes128gcm16
  # The files leave the ports' MTU at 1500, so the tunnels' MTU is worked out
  # for that (a port of the configured MTU is fitted at load); the interfaces
  # say 1400, which the gateways read and run their WAN ports at.
  for s in a b; do esp_config "$s" 4 udp aes128gcm16 false; done
  gw_start a
  gw_start b
  assert "tunnel up" ping_ok "$NS_HA" "$H4_B" 3 15
  # The first full-size DF packet teaches gateway a (dropped, counted), the next
  # is answered with the MTU that fits: 1400 less IPv4, UDP, ESP header, IV and
  # ICV (60), to a multiple of 4 less the trailer (2).
  in_ns "$NS_HA" ping -n -c 1 -W 1 -M do -s 1372 "$H4_B" >/dev/null 2>&1 || true
  out=$(in_ns "$NS_HA" ping -n -c 1 -W 2 -M do -s 1372 "$H4_B" 2>&1 || true)
  log "    ping -M do -s 1372: $(head -2 <<<"$out" | tail -1)"
  assert "a 1400-byte DF packet: fragmentation needed, mtu = 1338" grep -q "mtu = 1338" <<<"$out"
  assert "gateway a counted the outer packet that did not fit" counter_at_least a 'ip-rewrite\.drop\.own-too-big' 1
  assert "show esp says the tunnel's MTU" grep -q "^site (esp) .* mtu 1338" <<<"$(gw_show a esp)"
  make_payload 20
  XFER_TIMEOUT=60
  assert "20 MiB host a -> host b over a 1400-byte WAN, sha256 matches" xfer "$NS_HA" "$NS_HB" "$H4_B"
  assert "20 MiB host b -> host a, sha256 matches" xfer "$NS_HB" "$NS_HA" "$H4_A"
  assert "no error addressed to a gateway itself" \
    test "$(gw_counter a 'ip-local\.drop\.unserved') $(gw_counter b 'ip-local\.drop\.unserved')" = "0 0"
}

# Jumbo frames through ESP: 9216-byte LANs and WAN on AF_PACKET ports. The
# tunnel's MTU is worked out from the WAN port's at check (9216 less IPv4, UDP
# and the most ESP adds with AES-256-GCM, padding included: 65): full-size DF
# packets cross both ways, a larger one is answered with fragmentation needed
# quoting it, and TCP carries 20 MiB each way.
scenario_jumbo() {
  jumbo_topology
  local s
  esp_keys aes256gcm16
  for s in a b; do
    esp_config "$s" 4 udp aes256gcm16 false
    jumbo_ports "$s"
  done
  gw_start a
  gw_start b
  assert "tunnel up" ping_ok "$NS_HA" "$H4_B" 3 15
  assert "show esp says the tunnel's MTU, 9151" grep -q "^site (esp) .* mtu 9151" <<<"$(gw_show a esp)"
  jumbo_through 9151
  assert "nothing dropped in esp-encrypt or esp-decrypt" \
    test "$(gw_counter a 'esp-(en|de)crypt\.drop\..*') $(gw_counter b 'esp-(en|de)crypt\.drop\..*')" = "0 0"
}

scenario_v4_esp() { through 4 none aes128gcm16 false; }
scenario_v4_udp() { through 4 udp aes256gcm16 true; }
scenario_v6_esp() { through 6 none chacha20poly1305 true; }
scenario_v6_udp() { through 6 udp aes128gcm16 false; }
scenario_v4_cbc() { through 4 none aes128-sha1 true; }
scenario_v6_cbc() { through 6 udp aes256-sha256 false; }

run_scenarios "esp" "$GW_DRIVER, $GW_WORKERS worker(s)" \
  "ESP tunnels between gateways ($GW_DRIVER ports, $GW_WORKERS worker(s) each)" "$@"
