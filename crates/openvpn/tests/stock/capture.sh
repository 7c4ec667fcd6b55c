#!/usr/bin/env bash
# Records what a stock OpenVPN 2.6 client and server say to each other, for the
# crate's tests: for each control-channel protection, the key file and every UDP
# payload of one session (the handshake, a ping through the tunnel, the client's
# exit), one per line as "c2s HEX" or "s2c HEX". The tests check that this crate
# reads every one of them and writes the same bytes again.
#
# Run by hand, as root, when the recordings should be renewed:
#   bash crates/openvpn/tests/stock/capture.sh
# It needs openvpn, openssl and tshark, and makes two network namespaces
# (198.18.50.0/24 between them, 198.19.50.0/24 inside the tunnel) that it
# removes when it ends.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
srv=lr-ovpn-cap-s cli=lr-ovpn-cap-c
cleanup() {
  set +e
  for ns in $srv $cli; do
    ip netns pids $ns 2>/dev/null | xargs -r kill 2>/dev/null
  done
  sleep 0.5
  for ns in $srv $cli; do ip netns del $ns 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT

cd "$work"
openssl ecparam -name prime256v1 -genkey -noout -out ca.key
openssl req -x509 -new -key ca.key -subj /CN=capture-ca -days 3650 -out ca.crt
for who in server client; do
  openssl ecparam -name prime256v1 -genkey -noout -out $who.key
  openssl req -new -key $who.key -subj /CN=$who -out $who.csr
  ext=$([ $who = server ] && echo "extendedKeyUsage=serverAuth" || echo "extendedKeyUsage=clientAuth")
  openssl x509 -req -in $who.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
    -extfile <(echo "$ext") -out $who.crt 2>/dev/null
done

ip netns add $srv; ip netns add $cli
ip link add cap-s netns $srv type veth peer name cap-c netns $cli
ip -n $srv addr add 198.18.50.1/24 dev cap-s; ip -n $srv link set cap-s up; ip -n $srv link set lo up
ip -n $cli addr add 198.18.50.2/24 dev cap-c; ip -n $cli link set cap-c up; ip -n $cli link set lo up

# One session with each protection; $1 names it, the rest are both ends' options.
session() {
  local name=$1; shift
  local common=(--dev tun --proto udp --disable-dco --verb 3 --data-ciphers AES-256-GCM
    --ca ca.crt --explicit-exit-notify 1 "$@")
  ip netns exec $srv tshark -q -i cap-s -f "udp port 1194" -w "$name.pcap" 2>/dev/null &
  local shark=$!
  sleep 1
  ip netns exec $srv openvpn "${common[@]}" --mode server --tls-server --port 1194 \
    --topology subnet --ifconfig 198.19.50.1 255.255.255.0 --ifconfig-pool 198.19.50.2 198.19.50.9 \
    --push "topology subnet" --push "route-gateway 198.19.50.1" \
    --cert server.crt --key server.key --dh none --log "$name-server.log" --keepalive 10 60 \
    "${server_extra[@]}" &
  local server=$!
  ip netns exec $cli openvpn "${common[@]}" --client --remote 198.18.50.1 1194 --nobind \
    --cert client.crt --key client.key --log "$name-client.log" "${client_extra[@]}" &
  local client=$!
  for _ in $(seq 100); do
    grep -q "Initialization Sequence Completed" "$name-client.log" 2>/dev/null && break
    sleep 0.1
  done
  grep -q "Initialization Sequence Completed" "$name-client.log" || { cat "$name-client.log" "$name-server.log"; exit 1; }
  ip netns exec $cli ping -c 1 -W 2 198.19.50.1 >/dev/null
  kill -TERM $client; wait $client || true
  sleep 0.5
  kill -TERM $server; wait $server || true
  sleep 0.5
  kill -INT $shark; wait $shark || true
  tshark -r "$name.pcap" -T fields -e ip.src -e udp.payload 2>/dev/null |
    awk '{ print ($1 == "198.18.50.2" ? "c2s" : "s2c"), $2 }' | tr -d ':' > "$here/$name.packets"
  echo "$name: $(wc -l < "$here/$name.packets") packets" >&2
}

openvpn --genkey secret crypt.key
cp crypt.key "$here/tls-crypt.key"
server_extra=(--tls-crypt crypt.key) client_extra=(--tls-crypt crypt.key)
session tls-crypt

openvpn --genkey secret auth.key
cp auth.key "$here/tls-auth.key"
server_extra=(--tls-auth auth.key 0 --auth SHA256) client_extra=(--tls-auth auth.key 1 --auth SHA256)
session tls-auth
