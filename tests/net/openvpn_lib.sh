# shellcheck shell=bash
# The OpenVPN topology in namespaces, for tests/net/openvpn.sh and
# scripts/openvpn-bench.sh (source tests/net/lib.sh and tests/net/gateway_lib.sh
# first):
#
#   client-N ──┐
#   198.18.60.10+N   [switch] ── wan [gw] lan ── host
#                        198.18.60.1   198.19.61.1   198.19.61.10
#
# ovpn_topology makes the namespaces, the PKI and the linerate gateway's file
# (three servers: "crypt", UDP 1194, tls-crypt, pool 198.19.62.0/24 and
# 2001:2:0:62::/64; "auth", UDP 1195, tls-auth SHA256, pool 198.19.63.0/24;
# "v2", UDP 1196, tls-crypt-v2, pool 198.19.64.0/24);
# client_start and up start stock `openvpn` clients.

GW_WAN=198.18.60.1 GW_LAN=198.19.61.1 HOST4=198.19.61.10 HOST6=2001:2:0:61::10

# pki: a CA, the server's certificate and N clients' ($LR_TMP/cN.crt), and a
# client of another CA ($LR_TMP/stranger.crt); static keys for both servers.
pki() {
  local n=$1 i
  (
    cd "$LR_TMP"
    umask 077
    for ca in ca other; do
      openssl ecparam -name prime256v1 -genkey -noout -out $ca.key
      openssl req -x509 -new -key $ca.key -subj "/CN=$ca" -days 30 -out $ca.crt 2>/dev/null
    done
    leaf() { # leaf NAME CA USAGE
      openssl ecparam -name prime256v1 -genkey -noout -out "$1.key"
      openssl req -new -key "$1.key" -subj "/CN=$1" -out "$1.csr" 2>/dev/null
      openssl x509 -req -in "$1.csr" -CA "$2.crt" -CAkey "$2.key" -CAcreateserial -days 30 \
        -extfile <(echo "extendedKeyUsage=$3") -out "$1.crt" 2>/dev/null
    }
    leaf server ca serverAuth
    for ((i = 1; i <= n; i++)); do leaf "c$i" ca clientAuth; done
    leaf stranger other clientAuth
    openvpn --genkey secret crypt.key
    openvpn --genkey secret auth.key
    openvpn --genkey secret wrong.key
    openvpn --genkey tls-crypt-v2-server v2-server.key
  )
}

# ovpn_topology CLIENTS: the namespaces, the switch, the PKI, and the gateway's
# file ($LR_TMP/gw-a.toml).
ovpn_topology() {
  local n=$1 id=$BASHPID i
  NS_SW="lr-ovsw-$id" NS_GA="lr-ovgw-$id" NS_H="lr-ovh-$id" WG_A="ov$id"
  trap net_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  LR_TMP=$(mktemp -d /tmp/linerate-ovpn.XXXXXX)
  for ns in "$NS_SW" "$NS_GA" "$NS_H"; do ns_add "$ns"; done
  ip -n "$NS_SW" link add br0 type bridge
  ip -n "$NS_SW" link set br0 up
  local q=(numtxqueues "$GW_WORKERS" numrxqueues "$GW_WORKERS")
  ip link add wan netns "$NS_GA" "${q[@]}" type veth peer name gw netns "$NS_SW" "${q[@]}"
  ip -n "$NS_SW" link set gw master br0 up
  ip link add lan netns "$NS_GA" "${q[@]}" type veth peer name eth0 netns "$NS_H" "${q[@]}"
  gateway_side "$NS_GA" lan wan
  ip -n "$NS_H" addr add "$HOST4/24" dev eth0
  ip -n "$NS_H" addr add "$HOST6/64" dev eth0 nodad
  ip -n "$NS_H" link set eth0 up
  in_ns "$NS_H" ethtool -K eth0 tx off >/dev/null
  ip -n "$NS_H" route add default via "$GW_LAN"
  ip -n "$NS_H" -6 route add default via 2001:2:0:61::1
  for ((i = 1; i <= n; i++)); do client_ns "$i"; done
  pki "$n"
  {
    gw_head a "$GW_LAN" 2001:2:0:61::1 "$GW_WAN/24" 2001:2:0:60::1/64
    cat <<EOF
[[openvpn]]
name = "crypt"
listen_port = 1194
certificate = "server.crt"
private_key = "server.key"
ca = "ca.crt"
tls_crypt = "crypt.key"
pool = "198.19.62.0/24"
pool6 = "2001:2:0:62::/64"
push_routes = ["198.19.61.0/24", "2001:2:0:61::/64"]
reneg_sec = ${SERVER_RENEG:-3600}
keepalive = [2, 10]

[[openvpn]]
name = "auth"
listen_port = 1195
certificate = "server.crt"
private_key = "server.key"
ca = "ca.crt"
tls_auth = "auth.key"
key_direction = 0
auth = "SHA256"
pool = "198.19.63.0/24"
push_routes = ["198.19.61.0/24"]

[[openvpn]]
name = "v2"
listen_port = 1196
certificate = "server.crt"
private_key = "server.key"
ca = "ca.crt"
tls_crypt_v2 = "v2-server.key"
pool = "198.19.64.0/24"
push_routes = ["198.19.61.0/24"]
EOF
  } >"$LR_TMP/gw-a.toml"
}

# client_ns N: client N's namespace ($NS_C<N>), on the switch at 198.18.60.(10+N).
client_ns() {
  local i=$1 ns="lr-ovc$1-$BASHPID"
  printf -v "NS_C$i" '%s' "$ns"
  ns_add "$ns"
  ip link add eth0 netns "$ns" type veth peer name "c$i" netns "$NS_SW"
  ip -n "$NS_SW" link set "c$i" master br0 up
  # A second address survives the first one's removal (the roaming test).
  in_ns "$ns" sysctl -qw net.ipv4.conf.all.promote_secondaries=1 net.ipv4.conf.default.promote_secondaries=1
  ip -n "$ns" addr add "198.18.60.$((10 + i))/24" dev eth0
  ip -n "$ns" addr add "2001:2:0:60::$((10 + i))/64" dev eth0 nodad
  ip -n "$ns" link set eth0 up
  in_ns "$ns" ethtool -K eth0 tx off >/dev/null
}

# client_start N SERVER CIPHER [OPTION...]: `openvpn` as client N of SERVER
# (crypt or auth) with data-ciphers CIPHER, to the gateway's IPv6 address
# with CLIENT_V6=1; its log $LR_TMP/cN.log.
client_start() {
  local i=$1 server=$2 cipher=$3 ns port protect remote=$GW_WAN
  shift 3
  [ -z "${CLIENT_V6:-}" ] || remote=2001:2:0:60::1
  ns=$(client_var "$i")
  if [ "$server" = crypt ]; then
    port=1194 protect="tls-crypt $LR_TMP/crypt.key"
  elif [ "$server" = v2 ]; then
    # Each client its own key, wrapped under the server's (or V2_SERVER_KEY's).
    openvpn --tls-crypt-v2 "${V2_SERVER_KEY:-$LR_TMP/v2-server.key}" --genkey tls-crypt-v2-client "$LR_TMP/v2-c$i.key"
    port=1196 protect="tls-crypt-v2 $LR_TMP/v2-c$i.key"
  else
    port=1195 protect="tls-auth $LR_TMP/auth.key 1
auth SHA256"
  fi
  cat >"$LR_TMP/c$i.ovpn" <<EOF
client
dev tun
proto udp
remote $remote $port
nobind
disable-dco
ca $LR_TMP/ca.crt
cert $LR_TMP/${CLIENT_CERT:-c$i}.crt
key $LR_TMP/${CLIENT_CERT:-c$i}.key
$protect
data-ciphers $cipher
explicit-exit-notify 1
verb 3
EOF
  ip netns exec "$ns" openvpn --config "$LR_TMP/c$i.ovpn" --log "$LR_TMP/c$i.log" "$@" &
  printf -v "CLIENT_PID_$i" '%s' "$!"
}

client_var() { local v="NS_C$1"; printf '%s' "${!v}"; }
client_up() { grep -q "Initialization Sequence Completed" "$LR_TMP/c$1.log" 2>/dev/null; }
client_stop() { local v="CLIENT_PID_$1"; kill "${!v}" 2>/dev/null || true; wait "${!v}" 2>/dev/null || true; }

# client_log N: the last lines of client N's log.
client_log() {
  log "    --- last lines of client $1's log ---"
  tail -n 15 -- "$LR_TMP/c$1.log" 2>/dev/null | sed 's/^/    | /' >&2 || true
}

# up N SERVER CIPHER [OPTION...]: client N started and connected.
up() {
  client_start "$@"
  if ! wait_until 20 "client $1 to connect" client_up "$1"; then
    client_log "$1"
    gw_log a
    return 1
  fi
}

gw_up() {
  gw_start a
}

ping_from() { in_ns "$(client_var "$1")" ping -n -q -c "${3:-3}" -i 0.2 -W 2 "$2" >/dev/null 2>&1; }

