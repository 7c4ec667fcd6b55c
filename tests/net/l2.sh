#!/usr/bin/env bash
# L2 over the gateway, in network namespaces: one LAN in two sites, its port on
# each gateway cross-connected to a VXLAN tunnel (the MACsec replacement):
#
#   host-a ── lan2 [gw-a] wan ──── wan [gw-b] lan2 ── host-b
#   198.19.5.10      198.18.2.1    198.18.2.2      198.19.5.20
#   2001:2:0:5::10                                 2001:2:0:5::20
#
# host-a and host-b share one subnet; gw-a and gw-b are `linerate gateway`,
# each with a port taken whole (lan2, no addresses) and a WAN port.
#
#   over_wireguard    VXLAN between the WireGuard interfaces' own addresses
#                     (198.18.10.1 and .2), inside the tunnel
#   cleartext_interop gw-a's VXLAN straight over the WAN against the Linux
#                     kernel's vxlan device bridged to lan2 in gw-b's place
#   bad_input         malformed VXLAN datagrams to gw-a, each counted
#
#   tests/net/l2.sh [SCENARIO...]    (-l lists them)
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
# shellcheck source=tests/net/l2_lib.sh
. tests/net/l2_lib.sh

LINERATE=${LINERATE:-target/release/linerate}
GW_DRIVER=${GW_DRIVER:-af_xdp}
GW_WORKERS=${GW_WORKERS:-1}
SCENARIO_TIMEOUT=${SCENARIO_TIMEOUT:-240}
SCENARIOS=(over_wireguard cleartext_interop bad_input vlan_offload jumbo)

# frames_cross FROM_NS TO_NS: the test frames sent on FROM_NS's eth0 arrive on
# TO_NS's eth0 byte for byte (tagged, unknown EtherTypes, broadcast).
frames_cross() {
  local from=$1 to=$2 got want
  in_ns "$to" "$PYTHON" tests/net/l2_frames.py recv eth0 2.5 >"$LR_TMP/frames.got" &
  local pid=$!
  sleep 0.5
  in_ns "$from" "$PYTHON" tests/net/l2_frames.py send eth0
  wait "$pid" || return 1
  got=$(sort "$LR_TMP/frames.got")
  want=$("$PYTHON" tests/net/l2_frames.py expected | sort)
  if [ "$got" != "$want" ]; then
    log "    expected:"; sed 's/^/      /' <<<"$want" >&2
    log "    received:"; sed 's/^/      /' <<<"$got" >&2
    return 1
  fi
}

# ---------------------------------------------------------------------------
# Scenarios

# A VLAN trunk across the cross-connect with the tag offloaded: host a's link
# to its gateway tags the test frames of EtherType 0x88b5 as a NIC's offload
# hands a tag over (beside the frame, not in it), and host b receives them
# tagged, byte for byte, on either driver.
scenario_vlan_offload() {
  l2_topology
  l2_config a wireguard
  l2_config b wireguard
  gw_start a
  gw_start b
  assert "the segment is up" ping_ok "$NS_HA" "$L2_B" 3 15
  clang -O2 -g -target bpf -I "/usr/include/$(uname -m)-linux-gnu" -c tests/net/vlan_push.c -o "$LR_TMP/vlan_push.o"
  in_ns "$NS_HA" tc qdisc add dev eth0 clsact
  in_ns "$NS_HA" tc filter add dev eth0 egress bpf da obj "$LR_TMP/vlan_push.o" sec tc
  in_ns "$NS_HB" "$PYTHON" tests/net/l2_frames.py recv eth0 2.5 >"$LR_TMP/frames.got" &
  local pid=$! got want
  sleep 0.5
  in_ns "$NS_HA" "$PYTHON" tests/net/l2_frames.py send eth0
  wait "$pid"
  got=$(sort "$LR_TMP/frames.got")
  # The untagged 0x88b5 frame leaves host a with VLAN 100.
  want=$("$PYTHON" tests/net/l2_frames.py expected |
    sed 's/^020000005e02020000005e0188b5/020000005e02020000005e018100006488b5/' | sort)
  [ "$got" = "$want" ] || { log "    expected:"; sed 's/^/      /' <<<"$want" >&2
    log "    received:"; sed 's/^/      /' <<<"$got" >&2; }
  assert "a frame tagged by the offload arrives tagged, byte for byte" test "$got" = "$want"
  # Every size up to the LAN's MTU, untagged (tagged on the way by the offload),
  # with a VLAN tag and with two (QinQ): a 1500-byte trunk passes whole. The
  # links carry the tags above their MTU of 1500, as switches' baby giants do.
  local ns
  for ns in "$NS_HA" "$NS_HB"; do ip -n "$ns" link set eth0 mtu 1508; done
  for ns in "$NS_GA" "$NS_GB"; do ip -n "$ns" link set lan2 mtu 1508; done
  in_ns "$NS_HB" "$PYTHON" tests/net/l2_frames.py recv eth0 6 >"$LR_TMP/sizes.got" &
  pid=$!
  sleep 0.5
  in_ns "$NS_HA" "$PYTHON" tests/net/l2_frames.py send-sizes eth0 1500
  wait "$pid"
  got=$(sort "$LR_TMP/sizes.got")
  want=$("$PYTHON" tests/net/l2_frames.py expected-sizes 1500 offloaded | sort)
  log "    frames of every size: $(wc -l <<<"$want") sent, $(wc -l <<<"$got") received"
  [ "$got" = "$want" ] || diff <(echo "$want" | cut -c1-60) <(echo "$got" | cut -c1-60) | head -5 >&2
  assert "untagged, VLAN and QinQ frames of every size up to 1500 + tags arrive byte for byte" \
    test "$got" = "$want"
}

# Jumbo frames across the cross-connect, as the MACsec replacement runs it: two
# sites' 9000-byte LANs joined over WireGuard on a 9216-byte underlay, the ports
# on the run's driver (jumbo buffers; AF_XDP's frames in parts). Full-size DF
# pings both ways; untagged,
# VLAN and QinQ frames of sizes up to 9000 + tags byte for byte (the links take
# the tags above their MTU, as switches do); TCP across the segment.
scenario_jumbo() {
  l2_jumbo_topology
  local ns s pid got want
  for s in a b; do
    l2_config "$s" wireguard
    l2_jumbo_port "$s"
  done
  log "    $("$LINERATE" gateway --check -c "$LR_TMP/gw-a.toml" | grep '^vxlan')"
  gw_start a
  gw_start b
  for s in a b; do
    assert "gateway $s: $GW_DRIVER ports on jumbo buffers" xdp_jumbo_ports "$s"
  done
  assert "the segment is up" ping_ok "$NS_HA" "$L2_B" 3 15
  assert "9000-byte DF pings a -> b cross whole" full_size_pings "$NS_HA" "$L2_B" 8972
  assert "9000-byte DF pings b -> a cross whole" full_size_pings "$NS_HB" "$L2_A" 8972
  in_ns "$NS_HB" "$PYTHON" tests/net/l2_frames.py recv eth0 4 >"$LR_TMP/sizes.got" &
  pid=$!
  sleep 0.5
  in_ns "$NS_HA" "$PYTHON" tests/net/l2_frames.py send-sizes eth0 9000 89
  wait "$pid"
  got=$(sort "$LR_TMP/sizes.got")
  want=$("$PYTHON" tests/net/l2_frames.py expected-sizes 9000 89 | sort)
  log "    frames up to 9000 + tags: $(wc -l <<<"$want") sent, $(wc -l <<<"$got") received"
  if [ "$got" != "$want" ]; then
    log "    lengths of those missing: $(comm -23 <(echo "$want") <(echo "$got") | awk '{ printf "%d ", length($0) / 2 }')"
    gw_show a errors | sed 's/^/    a| /' >&2 || true
    gw_show b errors | sed 's/^/    b| /' >&2 || true
  fi
  assert "untagged, VLAN and QinQ frames up to 9000 + tags arrive byte for byte" test "$got" = "$want"
  # The hosts' own packets at the segment's MTU (the links keep taking tags).
  for ns in "$NS_HA" "$NS_HB"; do ip -n "$ns" link set eth0 mtu 9000; done
  make_payload 20
  assert "20 MiB host a -> host b across the segment at MTU 9000, sha256 matches" \
    xfer "$NS_HA" "$NS_HB" "$L2_B"
  assert "20 MiB host b -> host a over IPv6, sha256 matches" xfer "$NS_HB" "$NS_HA" "$L2_A6"
  for s in a b; do
    assert "gateway $s: nothing too big for the tunnel or the port" \
      test "$(gw_counter "$s" 'vxlan-encap\.drop\..*|l2-xconnect\.drop\..*')" -eq 0
  done
}

scenario_over_wireguard() {
  l2_topology
  l2_config a wireguard
  l2_config b wireguard
  assert "gw-a's file checks, and says what its path carries" \
    grep -q "vxlan vx0: vni $VNI, $IN_A -> $IN_B udp port 4789, inner mtu 1500 (the path carries at most 1500)" \
    <<<"$("$LINERATE" gateway --check -c "$LR_TMP/gw-a.toml")"
  gw_start a
  gw_start b
  assert "host a pings host b across the L2 link (ARP resolves across)" ping_ok "$NS_HA" "$L2_B" 3 15
  assert "host a pings host b over IPv6 (ND resolves across)" ping_ok "$NS_HA" "$L2_B6"
  assert "host b pings host a" ping_ok "$NS_HB" "$L2_A"
  local out
  out=$(in_ns "$NS_HA" ping -n -c 1 -W 2 "$L2_B" 2>&1 || true)
  assert "one link: the reply comes with TTL 64 (no router on the way)" grep -q 'ttl=64' <<<"$out"
  assert "tagged, unknown-EtherType and broadcast frames cross a -> b byte for byte" frames_cross "$NS_HA" "$NS_HB"
  assert "and b -> a" frames_cross "$NS_HB" "$NS_HA"
  make_payload 100
  XFER_TIMEOUT=90
  assert "100 MiB host a -> host b, sha256 matches" xfer "$NS_HA" "$NS_HB" "$L2_B"
  assert "100 MiB host b -> host a over IPv6, sha256 matches" xfer "$NS_HB" "$NS_HA" "$L2_A6"
  local text
  text=$(gw_show a interfaces)
  assert "show interfaces lists the tunnel" grep -q "^vx0 (vxlan) vni $VNI $IN_A -> $IN_B" <<<"$text"
  assert "show interfaces lists the cross-connects" grep -q "^xconnect lan2 -> vx0" <<<"$text"
  assert "frames went through the cross-connect" counter_at_least a 'l2-xconnect\.packets' 1000
  assert "and VXLAN inside WireGuard" counter_at_least a 'wg-encrypt\.packets' 1000
  assert "nothing too big for the tunnel" test "$(gw_counter a 'vxlan-encap\.drop\..*|l2-xconnect\.drop\..*')" -eq 0
  sleep 0.5
  assert "no buffer leaked on gateway a" buffers_all_back a
  assert "no buffer leaked on gateway b" buffers_all_back b
}

scenario_cleartext_interop() {
  l2_topology
  l2_config a cleartext
  kernel_vxlan b
  gw_start a
  assert "host a pings host b through linerate's VXLAN and the kernel's" ping_ok "$NS_HA" "$L2_B" 3 15
  assert "and over IPv6" ping_ok "$NS_HA" "$L2_B6"
  assert "frames cross linerate -> kernel byte for byte" frames_cross "$NS_HA" "$NS_HB"
  assert "and kernel -> linerate" frames_cross "$NS_HB" "$NS_HA"
  make_payload 20
  assert "20 MiB host b -> host a, sha256 matches" xfer "$NS_HB" "$NS_HA" "$L2_A"
  sleep 0.5
  assert "no buffer leaked" buffers_all_back a
}

scenario_bad_input() {
  l2_topology
  l2_config a cleartext
  ip -n "$NS_GB" addr add "$W4_B/24" dev wan
  gw_start a
  # Datagrams from gw-b's kernel to gw-a's VXLAN port: wrong flags, unknown VNI,
  # a header cut short, a frame inside shorter than an Ethernet header, a frame
  # larger than lan2 carries; then a good one, which must still come through.
  in_ns "$NS_HA" "$PYTHON" tests/net/l2_frames.py recv eth0 3 >"$LR_TMP/frames.got" &
  local pid=$!
  sleep 0.5
  in_ns "$NS_GB" "$PYTHON" - "$W4_A" "$VNI" <<'EOF'
import socket, struct, sys
sys.path.insert(0, "tests/net")
import l2_frames
dst, vni = sys.argv[1], int(sys.argv[2])
def vxlan(flags, vni, frame):
    return struct.pack("!B3xI", flags, vni << 8) + frame
good = l2_frames.frames()[1]
big = good[:14] + bytes(1600)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for payload in [vxlan(0x0c, vni, good), vxlan(0x08, vni + 1, good), vxlan(0x08, vni, good)[:5],
                vxlan(0x08, vni, good[:10]), vxlan(0x08, vni, big), vxlan(0x08, vni, good)]:
    s.sendto(payload, (dst, 4789))
EOF
  wait "$pid" || true
  local name
  for name in 'vxlan-decap\.drop\.bad-flags' 'vxlan-decap\.drop\.unknown-vni' \
    'vxlan-decap\.drop\.truncated' 'vxlan-decap\.drop\.runt-inner' 'l2-xconnect\.drop\.too-big'; do
    assert "counted: $name" test "$(gw_counter a "$name")" -eq 1
  done
  assert "the good datagram's frame came out of lan2 to host a" \
    grep -qx "$("$PYTHON" tests/net/l2_frames.py expected | sed -n 2p)" "$LR_TMP/frames.got"
  assert "the gateway still runs" kill -0 "$GW_PID_A"
  sleep 0.5
  assert "no buffer leaked" buffers_all_back a
}

# ---------------------------------------------------------------------------
# Driver

run_scenarios "l2" "$GW_DRIVER, $GW_WORKERS worker(s)" \
  "L2 over the gateway ($GW_DRIVER ports, $GW_WORKERS worker(s) each)" "$@"
