# shellcheck shell=bash
# The L2 topology in namespaces, for tests/net/l2.sh and scripts/gateway-bench.sh
# --l2 (source tests/net/lib.sh and tests/net/gateway_lib.sh first): one LAN in two
# sites, each gateway's lan2 port taken whole and cross-connected to VXLAN.
#
#   host-a ── lan2 [gw-a] wan ──── wan [gw-b] lan2 ── host-b
#   198.19.5.10      198.18.2.1    198.18.2.2      198.19.5.20
#
# l2_topology makes the namespaces, links and keys; l2_config writes a linerate
# gateway's file (VXLAN inside WireGuard or in cleartext); kernel_vxlan makes a
# side a Linux vxlan device bridged to lan2 instead. Set LINERATE, GW_DRIVER and
# GW_WORKERS first.

L2_A=198.19.5.10 L2_B=198.19.5.20
L2_A6=2001:2:0:5::10 L2_B6=2001:2:0:5::20
IN_A=198.18.10.1 IN_B=198.18.10.2
# The WAN carries VXLAN (50 bytes) inside WireGuard (60) around 1500-byte
# inner packets with up to two VLAN tags (8): 1618, with room to spare. The
# tunnel carries the inner frame whole: 1500 + 14 + 8 + 36 (outer IPv4, UDP,
# VXLAN) = 1558.
WAN_MTU=1700
WG_MTU=1558
VNI=10

# l2_topology: the sites of one segment; the hosts share a subnet.
l2_topology() {
  local ns
  sites l2 lan2
  l2_host "$NS_HA" "$L2_A" "$L2_A6"
  l2_host "$NS_HB" "$L2_B" "$L2_B6"
  for ns in "$NS_GA" "$NS_GB"; do
    ip -n "$ns" link set wan mtu "$WAN_MTU"
    gateway_side "$ns" lan2 wan
  done
}

# l2_jumbo_topology: l2_topology for 9000-byte LANs, as the MACsec replacement
# runs them: a 9216-byte WAN, a tunnel carrying 9156 (9000 + 14 + 8 + 36 + room),
# and the hosts' and lan2 links at 9008 (they take two VLAN tags above 9000, as
# switches do). Give each gateway's file l2_jumbo_port.
l2_jumbo_topology() {
  local ns
  WAN_MTU=9216 WG_MTU=9156
  l2_topology
  for ns in "$NS_HA" "$NS_HB"; do ip -n "$ns" link set eth0 mtu 9008; done
  for ns in "$NS_GA" "$NS_GB"; do ip -n "$ns" link set lan2 mtu 9008; done
}

# l2_jumbo_port SIDE: gw-SIDE's file (l2_config's) with lan2 at MTU 9000.
l2_jumbo_port() {
  sed -i '/^interface = "lan2"$/a mtu = 9000' "$LR_TMP/gw-$1.toml"
}

# l2_host NS ADDR4 ADDR6: a host on the shared LAN.
l2_host() {
  ip -n "$1" addr add "$2/24" dev eth0
  ip -n "$1" addr add "$3/64" dev eth0 nodad
  ip -n "$1" link set eth0 up
  in_ns "$1" ethtool -K eth0 tx off >/dev/null
}

# l2_config SIDE MODE(wireguard|cleartext): gw-SIDE's file: lan2 taken whole and
# cross-connected both ways to vx0, whose packets go inside the tunnel or
# straight over the WAN.
l2_config() {
  local side=$1 mode=$2 wan peer wgname local remote in ep="" cores="" c
  if [ "$side" = a ]; then
    wan=$W4_A peer=$PUB_B wgname=$WG_A in=$IN_A ep="endpoint = \"$W4_B:51820\""
  else
    wan=$W4_B peer=$PUB_A wgname=$WG_B in=$IN_B
  fi
  if [ "$GW_WORKERS" -gt 1 ]; then
    cores="cores = [0"
    for ((c = 1; c < GW_WORKERS; c++)); do cores+=", $c"; done
    cores+="]"
  fi
  {
    cat <<EOF
[gateway]
control = "$LR_TMP/gw-$side.sock"
buffers = 4096
$cores

[[port]]
name = "lan2"
interface = "lan2"
driver = "$GW_DRIVER"

[[port]]
name = "wan"
interface = "wan"
driver = "$GW_DRIVER"
addresses = ["$wan/24"]
mtu = $WAN_MTU
EOF
    if [ "$mode" = wireguard ]; then
      if [ "$side" = a ]; then local=$IN_A remote=$IN_B; else local=$IN_B remote=$IN_A; fi
      cat <<EOF

[[wireguard]]
name = "$wgname"
private_key_file = "$side.key"
listen_port = 51820
mtu = $WG_MTU
addresses = ["$in/30"]

[[wireguard.peer]]
public_key = "$peer"
$ep
allowed_ips = ["198.18.10.0/30"]
persistent_keepalive = 5
EOF
    else
      if [ "$side" = a ]; then local=$W4_A remote=$W4_B; else local=$W4_B remote=$W4_A; fi
    fi
    cat <<EOF

[[vxlan]]
name = "vx0"
vni = $VNI
local = "$local"
remote = "$remote"

[[xconnect]]
from = "lan2"
to = "vx0"

[[xconnect]]
from = "vx0"
to = "lan2"
EOF
  } >"$LR_TMP/gw-$side.toml"
}

# kernel_vxlan SIDE: gw-SIDE is Linux: a vxlan device to the other gateway over
# the WAN, bridged to lan2.
kernel_vxlan() {
  local ns=$NS_GA me=$W4_A them=$W4_B l
  [ "$1" = a ] || ns=$NS_GB me=$W4_B them=$W4_A
  ip -n "$ns" addr add "$me/24" dev wan
  ip -n "$ns" link add vx0 type vxlan id "$VNI" local "$me" remote "$them" dstport 4789 dev wan
  ip -n "$ns" link add br0 type bridge
  ip -n "$ns" link set vx0 master br0
  ip -n "$ns" link set lan2 master br0
  for l in vx0 br0; do ip -n "$ns" link set "$l" up; done
}

