#!/usr/bin/env bash
# OpenVPN on the gateway against stock OpenVPN 2.6 clients (userspace data
# channel, --disable-dco), in network namespaces:
#
#   client-N ──┐
#   198.18.60.10+N   [switch] ── wan [gw] lan ── host
#                        198.18.60.1   198.19.61.1   198.19.61.10
#                                                    2001:2:0:61::10
#
# The gateway serves three OpenVPN servers: "crypt" (UDP 1194, tls-crypt, pool
# 198.19.62.0/24 and 2001:2:0:62::/64), "auth" (UDP 1195, tls-auth with
# SHA256, pool 198.19.63.0/24) and "v2" (UDP 1196, tls-crypt-v2, each client
# its own key, pool 198.19.64.0/24); each pushes the LAN. Each client is `openvpn`
# with an ordinary client file.
#
#   tests/net/openvpn.sh                 every scenario
#   tests/net/openvpn.sh ciphers roam    only those
#   tests/net/openvpn.sh -l              list the scenarios
#
#   LINERATE           the binary (default target/release/linerate)
#   GW_DRIVER          the ports' driver (default af_xdp; af_packet)
#   GW_WORKERS         the gateway's workers (default 1), one per core from 0
#   SCENARIO_TIMEOUT   seconds one scenario may take (default 240)
#
# Prints a table and, last, "N passed, M failed"; exits non-zero if any failed.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=tests/net/lib.sh
. tests/net/lib.sh

LINERATE=${LINERATE:-target/release/linerate}
GW_DRIVER=${GW_DRIVER:-af_xdp}
GW_WORKERS=${GW_WORKERS:-1}
SCENARIO_TIMEOUT=${SCENARIO_TIMEOUT:-240}

SCENARIOS=(ciphers rekey many roam refusals reload spread restart small_mtu jumbo)

# shellcheck source=tests/net/gateway_lib.sh
. tests/net/gateway_lib.sh

# shellcheck source=tests/net/openvpn_lib.sh
. tests/net/openvpn_lib.sh

# ---------------------------------------------------------------------------
# Scenarios

# Each cipher through each protection and TLS version: pings both ways, IPv6
# inside and outside, a transfer with its sha256 compared, and what `show
# openvpn` says.
scenario_ciphers() {
  ovpn_topology 4
  # The metrics listen on an address of the gateway host's own (the kernel's).
  ip -n "$NS_GA" addr add 198.18.99.1/32 dev lo
  sed -i "s|^buffers = 8192|buffers = 8192\nmetrics = \"198.18.99.1:9586\"|" "$LR_TMP/gw-a.toml"
  gw_up
  up 1 crypt AES-256-GCM
  up 2 auth AES-128-GCM --tls-version-max 1.2
  CLIENT_V6=1 up 3 crypt CHACHA20-POLY1305 --tls-version-max 1.2
  up 4 v2 AES-256-GCM
  local shown
  shown=$(gw_show a openvpn)
  printf '%s\n' "$shown" | sed 's/^/    | /' >&2
  assert "c1 took AES-256-GCM with exported keys" grep -q "c1 at .* AES-256-GCM ekm" <<<"$shown"
  assert "c2 took AES-128-GCM on the tls-auth server" grep -q "c2 at .* 198.19.63.2 .*AES-128-GCM" <<<"$shown"
  assert "c3 took CHACHA20-POLY1305, over IPv6 outside" grep -q "c3 at \[2001:2:0:60::13\]:.* CHACHA20-POLY1305" <<<"$shown"
  assert "c4 is in on the tls-crypt-v2 server with its own key" grep -q "c4 at .* 198.19.64.2 " <<<"$shown"
  assert "client 4 pings the LAN host" ping_from 4 "$HOST4"
  local i
  for i in 1 2 3; do
    assert "client $i pings the LAN host" ping_from "$i" "$HOST4"
  done
  assert "client 1 pings the LAN host over IPv6 inside" ping_from 1 "$HOST6"
  assert "client 1 pings the server's tunnel address" ping_from 1 198.19.62.1
  assert "the LAN host pings client 3" eval 'in_ns "$NS_H" ping -n -q -c 3 -i 0.2 -W 2 198.19.62.3 >/dev/null' 
  make_payload 100
  assert "100 MiB from the LAN host to client 1 arrive whole" xfer "$NS_H" "$NS_C1" 198.19.62.2
  make_payload 20
  assert "20 MiB from client 2 to the LAN host arrive whole" xfer "$NS_C2" "$NS_H" "$HOST4"
  assert "20 MiB from client 3 to the LAN host arrive whole" xfer "$NS_C3" "$NS_H" "$HOST4"
  local text
  text=$(ip netns exec "$NS_GA" "$PYTHON" -c '
import urllib.request; print(urllib.request.urlopen("http://198.18.99.1:9586/metrics", timeout=5).read().decode())')
  assert "metrics: clients per server" grep -q '^linerate_openvpn_clients{server="crypt"} 2' <<<"$text"
  assert "metrics: bytes per client" grep -q '^linerate_openvpn_client_bytes_total{server="crypt",client="c1",peer_id="0",direction="out"} [1-9]' <<<"$text"
  assert "metrics: the data channel's nodes" grep -q '^linerate_node_packets_total{node="ovpn-decrypt"} [1-9]' <<<"$text"
  assert_eq "no data packet failed to open" 0 "$(gw_counter a 'ovpn-decrypt\.drop\.(bad-tag|replayed|too-old|unknown-key-id|unknown-peer-id)')"
  # Client 3 crashes (no exit notice): it is let go after the keepalive's 10 s.
  kill -9 "$CLIENT_PID_3"
  for i in 1 2 4; do client_stop "$i"; done
  assert "the clients' exit notices take them out at once" wait_until 5 "clients 1 and 2 to leave" eval '! gw_show a openvpn | grep -Eq "^  c[12] at "' 
  assert "the crashed client is let go after the keepalive" wait_until 15 "client 3 to be let go" eval '! gw_show a openvpn | grep -q "^  c3 at "'
  assert "the log says why" eval 'gw_show a openvpn | grep -q "c3 at .* is out: no packet for 10 s"'
}

# Renegotiation every 4 s by the client and every 5 s by the server during a
# transfer: it arrives whole, and old keys are retired.
# past_key_2 CLIENT: that client's active key is its third or later.
past_key_2() { gw_show a openvpn | grep -Eq "$1 at .*keys \[.*[3-7] active"; }

scenario_rekey() {
  SERVER_RENEG=5 ovpn_topology 2
  gw_up
  up 1 crypt AES-256-GCM --reneg-sec 4
  up 2 crypt CHACHA20-POLY1305
  make_payload 40
  xfer_start "$NS_C1" "$NS_H" "$HOST4" 3 || return 1
  in_ns "$NS_C2" ping -n -q -i 0.05 -c 240 -W 1 "$HOST4" >"$LR_TMP/ping2.log" 2>&1 &
  local ping=$!
  assert "40 MiB across renegotiations arrive whole" xfer_finish
  wait "$ping" || true
  local loss
  loss=$(grep -o '[0-9.]*% packet loss' "$LR_TMP/ping2.log" | cut -d% -f1)
  log "    client 2's pings across the server's renegotiations: ${loss}% lost"
  assert "client 2's pings lost at most 2%" awk -v l="$loss" 'BEGIN { exit !(l <= 2) }'
  local shown
  shown=$(gw_show a openvpn)
  printf '%s\n' "$shown" | grep -E "^  c[12]|log:.*(key|renegot)" | sed 's/^/    | /' >&2 || true
  # A renegotiation may be under way at the look: each key's is given time to end.
  assert "client 1 went past key 2" wait_until 10 "client 1's key 3" past_key_2 c1
  assert "client 2 went past key 2 (the server renegotiated)" wait_until 10 "client 2's key 3" past_key_2 c2
  assert "old keys were retired (at most one lame duck each)" not grep -Eq "lame-duck.*lame-duck" <<<"$shown"
  assert_eq "no data packet under an unknown key" 0 "$(gw_counter a 'ovpn-decrypt\.drop\.unknown-key-id')"
}

# Twenty clients at once, each with its own address, each reaching the host.
scenario_many() {
  local n=20 i
  ovpn_topology $n
  gw_up
  for ((i = 1; i <= n; i++)); do client_start "$i" crypt AES-256-GCM; done
  for ((i = 1; i <= n; i++)); do
    wait_until 30 "client $i to connect" client_up "$i" || { client_log "$i"; return 1; }
  done
  local shown addrs
  shown=$(gw_show a openvpn)
  addrs=$(grep -Eo "c[0-9]+ at [0-9.:]+: 198\.19\.62\.[0-9]+" <<<"$shown" | awk '{print $4}' | sort -u | wc -l)
  assert_eq "twenty clients, twenty addresses" "$n" "$addrs"
  for ((i = 1; i <= n; i++)); do
    assert "client $i pings the LAN host" ping_from "$i" "$HOST4" 1
  done
}

# A client whose address changes mid-transfer is followed (float), and the
# transfer arrives whole.
scenario_roam() {
  ovpn_topology 1
  gw_up
  up 1 crypt AES-256-GCM
  make_payload 30
  xfer_start "$NS_H" "$NS_C1" 198.19.62.2 3 || return 1
  sleep 2
  # The client's address changes: its socket (not bound) sends from the new one.
  ip -n "$NS_C1" addr add 198.18.60.99/24 dev eth0
  ip -n "$NS_C1" addr del 198.18.60.11/24 dev eth0
  assert "the transfer across the move arrives whole" xfer_finish
  local shown
  shown=$(gw_show a openvpn)
  assert "the gateway follows the client to its new address" grep -q "^  c1 at 198.18.60.99:" <<<"$shown"
  assert "the move is in the log" grep -q "moved from 198.18.60.11" <<<"$shown"
}

# Refusals: a client of another CA, a wrong tls-crypt key, junk and replays on
# the port. Each is counted by reason, and a connected client is unaffected.
scenario_refusals() {
  ovpn_topology 4
  gw_up
  up 1 crypt AES-256-GCM
  CLIENT_CERT=stranger client_start 2 crypt AES-256-GCM --connect-retry-max 1
  client_start 3 crypt AES-256-GCM --tls-crypt "$LR_TMP/wrong.key" --connect-retry-max 1
  # A tls-crypt-v2 client key wrapped under another server key.
  openvpn --genkey tls-crypt-v2-server "$LR_TMP/v2-other.key"
  V2_SERVER_KEY=$LR_TMP/v2-other.key client_start 4 v2 AES-256-GCM --connect-retry-max 1
  # Junk on the port, 2000 datagrams at a bounded rate.
  in_ns "$NS_C3" "$PYTHON" -c '
import os, socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(2000):
    n = 1 + (i * 37) % 1400
    s.sendto(os.urandom(n), ("'"$GW_WAN"'", 1194))
    if i % 100 == 99:
        time.sleep(0.01)
'
  sleep 3
  local shown
  shown=$(gw_show a openvpn)
  printf '%s\n' "$shown" | grep -E "refused|log:" | tail -n 8 | sed 's/^/    | /' >&2
  assert "the client of another CA was refused with the reason" grep -q "UnknownIssuer" <<<"$shown"
  assert "packets under the wrong tls-crypt key were refused as bad-auth" grep -Eq "refused control packets:.*bad-auth [0-9]+" <<<"$shown"
  assert "a tls-crypt-v2 key wrapped under another server key was refused as bad-auth" \
    eval 'awk "/^server v2:/ { on = 1; next } /^server / { on = 0 } on" <<<"$shown" | grep -Eq "refused control packets:.*bad-auth [0-9]+"' 
  assert "only client 1 is in" eval '[ "$(grep -c "^  c[0-9]* at " <<<"$shown")" -eq 1 ]'
  assert "junk data packets were counted" counter_at_least a 'ovpn-decrypt\.drop\.(truncated|unknown-peer-id|unknown-key-id|bad-tag)' 1
  assert "client 1 still pings the LAN host" ping_from 1 "$HOST4"
  client_stop 2
  client_stop 3
  client_stop 4
}

# A reload that leaves the servers as they are keeps the clients connected; one
# that changes a server's settings applies them, and its connected clients
# renegotiate under them (one the new CA refuses is let go); one that moves a
# server (its port) is refused, and changes nothing.
scenario_reload() {
  ovpn_topology 1
  gw_up
  up 1 crypt AES-256-GCM
  printf '\n[[route]]\nprefix = "198.19.99.0/24"\nblackhole = true\n' >>"$LR_TMP/gw-a.toml"
  kill -HUP "$GW_PID_A"
  assert "the reload took the new route" wait_until 10 "the route" eval 'gw_show a fib | grep -q 198.19.99.0/24'
  assert "the client is still in" eval 'gw_show a openvpn | grep -q "^  c1 at "'
  assert "and still pings the LAN host" ping_from 1 "$HOST4"
  sed -i 's|^keepalive = \[2, 10\]|keepalive = [3, 12]|' "$LR_TMP/gw-a.toml"
  kill -HUP "$GW_PID_A"
  assert "a server's new settings are taken" wait_until 10 "the new settings" \
    eval 'gw_show a openvpn | grep -q "crypt: settings reloaded; 1 client to renegotiate under them"'
  assert "its client renegotiated under them and stays" wait_until 10 "key 1" \
    eval 'gw_show a openvpn | grep -Eq "^  c1 at .*keys \[.*1 active"'
  assert "and still pings the LAN host" ping_from 1 "$HOST4"
  sed -i 's|^listen_port = 1195|listen_port = 1197|' "$LR_TMP/gw-a.toml"
  kill -HUP "$GW_PID_A"
  assert "a moved server is refused, saying why" wait_until 10 "the refusal" \
    grep -q "reload refused, nothing changed: .*a server's listen_port, pools or mtu changed" "$LR_TMP/gw-a.log"
  assert "the client is still in after the refusal" ping_from 1 "$HOST4"
  sed -i 's|^listen_port = 1197|listen_port = 1195|' "$LR_TMP/gw-a.toml"
  # The crypt server now trusts another CA only: client 1's renegotiation fails.
  sed -i '0,/^ca = "ca.crt"/s||ca = "other.crt"|' "$LR_TMP/gw-a.toml"
  kill -HUP "$GW_PID_A"
  assert "a client the new CA refuses is let go, saying why" wait_until 10 "client 1 to be let go" \
    eval 'gw_show a openvpn | grep -q "c1 at .* is out: .*UnknownIssuer"'
  client_stop 1
}

# With `spread = true` and two workers or more, one client's full frames are cut
# into pieces for the idle workers: transfers both ways arrive whole, and a burst
# to the client makes frames big enough to spread.
scenario_spread() {
  if [ "$GW_WORKERS" -lt 2 ]; then
    log "    (one worker: nothing to spread over; GW_WORKERS=2 runs it)"
    return 0
  fi
  ovpn_topology 1
  sed -i "s|^buffers = 8192|buffers = 8192\nspread = true|" "$LR_TMP/gw-a.toml"
  gw_up
  up 1 crypt AES-256-GCM
  make_payload 30
  assert "30 MiB from the LAN host to the client arrive whole" xfer "$NS_H" "$NS_C1" 198.19.62.2
  assert "30 MiB from the client to the LAN host arrive whole" xfer "$NS_C1" "$NS_H" "$HOST4"
  # A burst of small datagrams to the client, bounded in count and time.
  in_ns "$NS_H" timeout 20 "$PYTHON" -c '
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
end = time.monotonic() + 5
for i in range(300000):
    s.sendto(b"x" * 64, ("198.19.62.2", 9))
    if i % 1000 == 0 and time.monotonic() > end:
        break
'
  local frames
  frames=$(gw_counter a 'spread\.frames')
  log "    spread: $(gw_counter a 'spread\.frames') frames spread, $(gw_counter a 'spread\.asks') asks, $(gw_counter a 'spread\.pieces_helped') pieces run by another worker"
  assert "full frames were spread over the workers" [ "$frames" -ge 1 ]
  assert "no data packet failed to open" [ "$(gw_counter a 'ovpn-decrypt\.drop\.(bad-tag|replayed|too-old)')" -eq 0 ]
  assert "the client still pings the LAN host" ping_from 1 "$HOST4"
}

# kill -9 with a client connected: the gateway starts again, the client finds
# out from its keepalive, connects again, and its traffic flows.
scenario_restart() {
  ovpn_topology 1
  gw_up
  up 1 crypt AES-256-GCM
  assert "the client pings the LAN host" ping_from 1 "$HOST4"
  kill -KILL "$GW_PID_A"
  wait "$GW_PID_A" 2>/dev/null || true
  : >"$LR_TMP/gw-a.log"
  gw_up
  assert "the client connects again after its keepalive" wait_until 40 "client 1 to connect again" \
    eval '[ "$(grep -c "Initialization Sequence Completed" "$LR_TMP/c1.log")" -ge 2 ]'
  assert "the new gateway lists it" eval 'gw_show a openvpn | grep -q "^  c1 at "'
  assert "and it pings the LAN host" ping_from 1 "$HOST4"
  make_payload 10
  assert "10 MiB from the LAN host to the client arrive whole" xfer "$NS_H" "$NS_C1" 198.19.62.2
  client_stop 1
}

# A WAN whose MTU (1280) is smaller than the tunnel's packets at tun-mtu 1500:
# transfers both ways arrive whole, and large pings go through. Over IPv4
# outside the datagrams go in fragments both ways; over IPv6 (client 2) the
# gateway does not cut its own, so it lowers the server's MTU and its senders
# hear the MTU that fits.
scenario_small_mtu() {
  ovpn_topology 2
  ip -n "$NS_GA" link set wan mtu 1280
  ip -n "$NS_SW" link set gw mtu 1280
  local i
  for i in 1 2; do
    ip -n "$NS_SW" link set "c$i" mtu 1280
    ip -n "$(client_var "$i")" link set eth0 mtu 1280
  done
  sed -i '/^interface = "wan"/a mtu = 1280' "$LR_TMP/gw-a.toml"
  gw_up
  up 1 crypt AES-256-GCM
  assert "the log says the packets go in fragments" grep -q "openvpn crypt: its full-size packets (mtu 1500) are 1552 bytes outside over IPv4, more than port wan carries (1280)" "$LR_TMP/gw-a.log"
  assert "a full-size ping from the client" eval 'in_ns "$NS_C1" ping -n -q -c 3 -i 0.2 -W 2 -s 1472 "$HOST4" >/dev/null'
  assert "a full-size ping from the LAN host" eval 'in_ns "$NS_H" ping -n -q -c 3 -i 0.2 -W 2 -s 1472 198.19.62.2 >/dev/null'
  make_payload 20
  assert "20 MiB from the LAN host to the client arrive whole" xfer "$NS_H" "$NS_C1" 198.19.62.2
  assert "20 MiB from the client to the LAN host arrive whole" xfer "$NS_C1" "$NS_H" "$HOST4"
  assert "the client's fragments were made whole" counter_at_least a 'ip\.reassembled' 1
  CLIENT_V6=1 up 2 crypt AES-256-GCM
  assert "20 MiB from the LAN host to a client over IPv6 outside arrive whole" xfer "$NS_H" "$NS_C2" 198.19.62.3
  assert "20 MiB from it to the LAN host arrive whole" xfer "$NS_C2" "$NS_H" "$HOST4"
  assert "the first too-large IPv6 packet lowered the server's MTU" counter_at_least a 'ip-rewrite\.drop\.own-too-big' 1
  assert_eq "no fragment was dropped" 0 "$(gw_counter a 'ip-local\.drop\.(fragment-.*|reassembled-too-big)')"
  client_stop 1
  client_stop 2
}

# Jumbo frames: every link at 9216 bytes, the gateway's ports on AF_PACKET, the
# crypt server at mtu 9000 and the stock client at tun-mtu 9000: full-size
# pings both ways, fragmentation needed past 9000, TCP each way, nothing cut
# into fragments; a second client left at its defaults is told about.
scenario_jumbo() {
  ovpn_topology 2
  ip -n "$NS_GA" link set wan mtu 9216
  ip -n "$NS_GA" link set lan mtu 9216
  ip -n "$NS_H" link set eth0 mtu 9216
  ip -n "$NS_SW" link set gw mtu 9216
  ip -n "$NS_SW" link set c1 mtu 9216
  ip -n "$NS_C1" link set eth0 mtu 9216
  jumbo_ports a
  sed -i '/^name = "crypt"$/a mtu = 9000' "$LR_TMP/gw-a.toml"
  gw_up
  # A 2.6 client takes a pushed tun-mtu up to 1600 only: its own is given.
  up 1 crypt AES-256-GCM --tun-mtu 9000
  assert "the server pushed tun-mtu 9000" grep -q "PUSH_REPLY.*tun-mtu 9000" "$LR_TMP/c1.log"
  assert "the client runs at tun-mtu 9000" \
    eval '[ "$(ip -n "$NS_C1" -o link show tun0 | sed -n "s/.* mtu \([0-9]*\) .*/\1/p")" = 9000 ]'
  local out
  out=$(in_ns "$NS_H" ping -n -c 1 -W 2 -M do -s $((9216 - 28)) 198.19.62.2 2>&1 || true)
  log "    ping -M do -s 9188: $(head -2 <<<"$out" | tail -1)"
  assert "a 9216-byte DF packet to the client: fragmentation needed, mtu = 9000" grep -q "mtu = 9000" <<<"$out"
  assert "9000-byte DF pings from the client cross whole" full_size_pings "$NS_C1" "$HOST4" $((9000 - 28))
  assert "9000-byte DF pings from the LAN host cross whole" full_size_pings "$NS_H" 198.19.62.2 $((9000 - 28))
  assert "9000-byte IPv6 pings from the LAN host cross whole" full_size_pings "$NS_H" 2001:2:0:62::2 $((9000 - 48))
  make_payload 20
  assert "20 MiB from the LAN host to the client arrive whole" xfer "$NS_H" "$NS_C1" 198.19.62.2
  assert "20 MiB from the client to the LAN host arrive whole" xfer "$NS_C1" "$NS_H" "$HOST4"
  assert_eq "no IP fragment on the way" 0 "$(gw_counter a 'ip\.reassembled|ip4-fragment\.packets')"
  # A client left at its defaults says it takes a pushed tun-mtu of 1600 at most.
  up 2 crypt AES-256-GCM
  assert "the log says client 2 takes a pushed tun-mtu of at most 1600" \
    grep -q "client at 198.18.60.12:[0-9]* takes a pushed tun-mtu of at most 1600, less than the server's mtu 9000" "$LR_TMP/gw-a.log"
  client_stop 1
  client_stop 2
}

run_scenarios "openvpn" "$GW_DRIVER" "OpenVPN on the gateway against stock OpenVPN 2.6 clients" "$@"
