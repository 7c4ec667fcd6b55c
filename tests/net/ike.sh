#!/usr/bin/env bash
# IKEv2 between a linerate gateway and strongSwan, in network namespaces: gw-a is
# linerate with an [esp.ike] tunnel, gw-b is strongSwan's charon with the
# kernel-libipsec plugin (ESP in userspace over a TUN device; it needs ESP in
# UDP, so both ends force encapsulation), in its own mount namespace so its /run
# is its own:
#
#   host-a ── lan [gw-a: linerate] wan ──── wan [gw-b: charon] lan ── host-b
#   198.19.1.10       198.18.2.1          198.18.2.2            198.19.3.10
#
#   linerate_initiates  PSK; linerate starts the IKE SA, charon answers
#   charon_initiates    PSK; charon starts, linerate answers
#   chacha_x25519       ChaCha20-Poly1305 with X25519 for IKE and ESP
#   cbc_sha256          AES-CBC with HMAC-SHA-256 for ESP
#   v6_outer            IKE and ESP over IPv6 (2001:2:0:2::1 and ::2)
#   certificates        X.509 instead of the key: gw-a RSA, gw-b ECDSA, one CA
#                       (RFC 7427 signatures); charon initiates
#   certificates_linerate_initiates  the same, linerate initiating
#   wrong_ca            gw-b's certificate from another CA: refused, no SA
#   proposal_mismatch   nothing in common: a clear line in both logs, no SA
#   wrong_psk           the keys differ: AUTHENTICATION_FAILED, no SA
#   peer_restarts       charon is killed: dead peer detection closes the SA;
#                       charon comes back and linerate brings the tunnel up again
#   cookie_flood        a flood of IKE_SA_INIT from the peer's address with new
#                       SPIs: linerate asks for cookies past 30 half-open SAs,
#                       and charon (which returns them) still connects
#   linerate_rekeys     during a paced 100 MiB transfer linerate rekeys the child
#                       SA (twice) and the IKE SA; nothing lost but a few packets
#   charon_rekeys       the same with charon rekeying
#   lost_rekey_answer_linerate_answers  charon rekeys the child SA and linerate's
#                       answer is lost once: no ping lost while charon
#                       retransmits (linerate seals with the new child only once
#                       charon deletes the old one)
#   child_made_again    charon deletes the child SA and asks for a new one in the
#                       same IKE SA (CREATE_CHILD_SA without REKEY_SA): linerate
#                       takes it and the tunnel carries again
#   nat_rebinding       charon behind a NAT, linerate's tunnel to any peer
#                       (remote = "any"): the NAT's mapping moves to a new
#                       port, then to a new address, during a paced TCP
#                       transfer; ESP follows each within seconds
#   nat_rebinding_quiet_peer  the same (no transfer) with no liveness checks
#                       either side: charon's keepalive from the new mapping
#                       has linerate ask there once the old one went quiet,
#                       and the answer moves ESP
#   nat_keepalives      linerate behind a NAT that forgets an idle mapping in
#                       4 s, no dead peer detection either side: its keepalives
#                       keep the far site able to reach it after 12 s idle
#   rsa_certificates    RSA certificates of 2048, 3072 and 4096 bits on both
#                       ends, each end initiating: from 3072 bits IKE_AUTH
#                       outgrows 1280 bytes and goes in RFC 7383 fragments both
#                       ways; 4096 bits again over a path of MTU 1280
#   certificate_chain   gw-a's and gw-b's certificates from an intermediate CA
#                       under the CA both trust, each end sending its chain;
#                       each end initiating
#   ip_fragments        charon without IKE fragmentation and with an RSA-4096
#                       certificate: its IKE_AUTH leaves in IP fragments, which
#                       linerate reassembles; each end initiating. With
#                       linerate's certificate RSA-4096 too, its own IKE_AUTH
#                       leaves in IP fragments as well
#   both_start_and_restart  both ends start the tunnel (two IKE SAs may come
#                       of it), then linerate is killed and started again while
#                       charon starts over: every child SA charon sends on is
#                       installed in linerate, and traffic passes both ways
#   lost_rekey_answer_linerate_asks  the mirror: linerate rekeys, charon's
#                       answer is lost once
#   one_flow            one TCP flow for 15 s from host a to host b: charon
#                       (replay window 32) refuses no packet as a replay,
#                       however many workers seal for linerate
#
# Each that brings a tunnel up: ping both ways, 100 MiB over TCP each way
# (sha256 checked), the SAs in `linerate show ike` and `show esp`, nothing that
# should not be dropped, no buffer leaked.
#
#   tests/net/ike.sh [SCENARIO...]    (-l lists them)
#
#   LINERATE           the binary (default target/release/linerate)
#   GW_DRIVER          the ports' driver (default af_xdp; af_packet)
#   GW_WORKERS         linerate's workers (default 1), one per core from 0
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
SCENARIOS=(linerate_initiates charon_initiates chacha_x25519 cbc_sha256 v6_outer certificates certificates_linerate_initiates wrong_ca proposal_mismatch wrong_psk peer_restarts cookie_flood linerate_rekeys charon_rekeys lost_rekey_answer_linerate_answers lost_rekey_answer_linerate_asks child_made_again nat_rebinding nat_rebinding_quiet_peer nat_keepalives rsa_certificates certificate_chain ip_fragments both_start_and_restart one_flow)
CHARON=/usr/lib/ipsec/charon
W6_A=2001:2:0:2::1 W6_B=2001:2:0:2::2
# The outer addresses: IPv4 unless a scenario says otherwise.
OUT_A=$W4_A OUT_B=$W4_B
PSK="a pre-shared key for the interop tests"


# linerate_config START(start|none) IKE ESP [PSK]: gw-a's file: its WAN and LAN,
# the ESP tunnel to gw-b negotiated by IKE, gw-b's LAN routed into it; its child
# and IKE SAs rekeyed after $LR_REKEY and $LR_IKE_REKEY seconds (0: never).
linerate_config() {
  local start=$1 ike=$2 esp=$3 psk=${4:-$PSK}
  (umask 077; printf '%s\n' "$psk" >"$LR_TMP/site.psk")
  {
    gw_head a "$G4_A" "$G6_A" "$W4_A/24" "$W6_A/64"
    cat <<EOF2
[[esp]]
name = "site"
local = "$OUT_A"
remote = "${LR_REMOTE:-$OUT_B}"
local_ts = ["198.19.1.0/24"]
remote_ts = ["198.19.3.0/24"]

[esp.ike]
$(lr_auth)
proposals = ["$ike"]
esp_proposals = ["$esp"]
start_action = "$start"
encap = true
dpd_delay = ${LR_DPD:-2}
nat_keepalive = ${LR_KEEPALIVE:-20}
retransmit_timeout = 1
retransmit_tries = 3
rekey_time = ${LR_REKEY:-3600}
ike_rekey_time = ${LR_IKE_REKEY:-14400}

[[route]]
prefix = "198.19.3.0/24"
tunnel = "site"
${LR_EXTRA:-}
EOF2
  } >"$LR_TMP/gw-a.toml"
}

# make_certs: a CA (ECDSA P-256) and certificates for gw-a (RSA 2048, or
# $CERT_A_KEY as openssl's -newkey takes it) and gw-b (ECDSA P-256, or
# $CERT_B_KEY) in $LR_TMP/certs, for AUTH_MODE=pubkey. With CERT_CHAIN=1 an
# intermediate CA under the CA issues both: gw-a.pem holds gw-a's certificate
# and the intermediate's (linerate's cert_file with its chain), charon finds
# the intermediate in its x509ca directory.
make_certs() {
  local d=$LR_TMP/certs issuer=ca
  mkdir -p "$d"
  openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$d/ca.key" \
    -subj "/C=CH/O=linerate/CN=Interop CA" -days 2 -out "$d/ca.pem" 2>/dev/null
  if [ -n "${CERT_CHAIN:-}" ]; then
    issuer=inter
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$d/inter.key" \
      -subj "/C=CH/O=linerate/CN=Interop Intermediate CA" -out "$d/inter.csr" 2>/dev/null
    openssl x509 -req -in "$d/inter.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
      -days 2 -sha256 -extfile <(printf 'basicConstraints=critical,CA:TRUE\n') \
      -out "$d/inter.pem" 2>/dev/null
    mkdir -p "$LR_TMP/sw/swanctl/x509ca"
    cp "$d/inter.pem" "$LR_TMP/sw/swanctl/x509ca/"
  fi
  local who keyargs
  for who in gw-a gw-b; do
    if [ "$who" = gw-a ]; then
      read -ra keyargs <<<"${CERT_A_KEY:-rsa:2048}"
    else
      read -ra keyargs <<<"${CERT_B_KEY:-ec -pkeyopt ec_paramgen_curve:P-256}"
    fi
    openssl req -new -newkey "${keyargs[@]}" -nodes -keyout "$d/$who.key" \
      -subj "/C=CH/O=linerate/CN=$who" -out "$d/$who.csr" 2>/dev/null
    openssl x509 -req -in "$d/$who.csr" -CA "$d/$issuer.pem" -CAkey "$d/$issuer.key" -CAcreateserial \
      -days 2 -sha256 -out "$d/$who.pem" 2>/dev/null
  done
  [ "$issuer" = ca ] || cat "$d/inter.pem" >>"$d/gw-a.pem"
}

# lr_auth: gw-a's authentication lines: the pre-shared key, or with
# AUTH_MODE=pubkey its certificate, key and CA, and gw-b's subject.
lr_auth() {
  if [ "${AUTH_MODE:-psk}" = pubkey ]; then
    printf 'auth = "pubkey"\ncert_file = "certs/gw-a.pem"\nkey_file = "certs/gw-a.key"\n'
    printf 'ca_file = "certs/ca.pem"\nremote_id = "C=CH, O=linerate, CN=gw-b"\n'
  else
    printf 'psk_file = "site.psk"\n'
    [ -z "${LR_REMOTE_ID:-}" ] || printf 'remote_id = "%s"\n' "$LR_REMOTE_ID"
  fi
}

# sw_host: gw-b's interfaces up with their addresses, forwarding on; once per
# scenario (charon_setup may run again for a new configuration).
sw_host() {
  # TX checksum offload off: on veth the kernel would leave UDP checksums for
  # hardware that is not there, and linerate's ports would see them wrong.
  local p
  for p in wan lan; do
    ip -n "$NS_GB" link set "$p" up
    in_ns "$NS_GB" ethtool -K "$p" tx off >/dev/null
  done
  ip -n "$NS_GB" addr add "${SW_WAN4:-$W4_B}/24" dev wan
  [ -z "${SW_GATEWAY:-}" ] || ip -n "$NS_GB" route add default via "$SW_GATEWAY"
  ip -n "$NS_GB" addr add "$W6_B/64" dev wan nodad
  ip -n "$NS_GB" addr add "$G4_B/24" dev lan
  in_ns "$NS_GB" sysctl -qw net.ipv4.ip_forward=1
  SW_HOST_UP=1
}

# charon_setup START(start|none) IKE ESP [PSK]: gw-b as a strongSwan host: its
# kernel holds the addresses and forwards; charon's strongswan.conf and
# swanctl.conf in $LR_TMP/sw/swanctl (SWANCTL_DIR); its child and IKE SAs rekeyed after $SW_REKEY and
# $SW_IKE_REKEY seconds (0: never).
charon_setup() {
  local start=$1 ike=$2 esp=$3 psk=${4:-$PSK} d=$LR_TMP/sw
  mkdir -p "$d/swanctl/private"
  [ "${AUTH_MODE:-psk}" != pubkey ] || cp "$LR_TMP/certs/gw-b.key" "$d/swanctl/private/"
  [ -n "${SW_HOST_UP:-}" ] || sw_host
  cat >"$d/strongswan.conf" <<EOF2
charon {
  load_modular = no
  load = random nonce openssl pem pkcs1 pkcs8 x509 pubkey sha1 sha2 hmac gcm aes kdf vici socket-default kernel-libipsec kernel-netlink updown
  install_routes = yes
  retransmit_timeout = 1
  retransmit_tries = 3
  keep_alive = ${SW_KEEP_ALIVE:-20}s
  # strongSwan's default, said: the window linerate's workers must keep inside.
  replay_window = 32
  plugins {
    vici {
      socket = unix://$d/charon.vici
    }
  }
  filelog {
    log {
      path = $d/charon.log
      default = 1
      ike = ${SW_IKE_LOG:-2}
      cfg = 2
      time_format = %T
      flush_line = yes
    }
  }
}
EOF2
  cat >"$d/swanctl/swanctl.conf" <<EOF2
connections {
  site {
    version = 2
    local_addrs = $OUT_B
    remote_addrs = ${SW_REMOTE_ADDRS:-$OUT_A}
    proposals = $ike
    encap = yes
    fragmentation = ${SW_FRAGMENTATION:-yes}
    dpd_delay = ${SW_DPD:-2}s
    rekey_time = ${SW_IKE_REKEY:-14400}s
$(sw_auth)
    children {
      site {
        local_ts = 198.19.3.0/24
        remote_ts = 198.19.1.0/24
        esp_proposals = $esp
        rekey_time = ${SW_REKEY:-3600}s
        start_action = $start
        dpd_action = restart
      }
    }
  }
}
secrets {
  ike-site {
    id-a = $OUT_A
    id-b = $OUT_B
    secret = "$psk"
  }
}
EOF2
}

# sw_auth: gw-b's local and remote sections: the pre-shared key by address, or
# with AUTH_MODE=pubkey the certificates.
sw_auth() {
  local c=$LR_TMP/certs
  if [ "${AUTH_MODE:-psk}" = pubkey ]; then
    cat <<EOF2
    local {
      auth = pubkey
      certs = $c/gw-b.pem
      id = "C=CH, O=linerate, CN=gw-b"
    }
    remote {
      auth = pubkey
      id = "C=CH, O=linerate, CN=gw-a"
      cacerts = $c/ca.pem
    }
EOF2
  else
    cat <<EOF2
    local {
      auth = psk
      id = $OUT_B
    }
    remote {
      auth = psk
      id = $OUT_A
    }
EOF2
  fi
}

# charon_start: charon in gw-b's namespace and a mount namespace of its own (a
# private /run for its pid file), its configuration loaded; CHARON_PID.
charon_start() {
  local d=$LR_TMP/sw
  ip netns exec "$NS_GB" unshare -m --propagation private sh -c \
    'mount -t tmpfs tmpfs /run && exec env STRONGSWAN_CONF="$1" "$2"' sh \
    "$d/strongswan.conf" "$CHARON" >>"$d/charon.out" 2>&1 &
  CHARON_PID=$!
  if ! wait_until 20 "charon to answer on its vici socket" swanctl_ok --stats; then
    tail -n 20 "$d/charon.log" "$d/charon.out" 2>/dev/null | sed 's/^/    | /' >&2
    return 1
  fi
  swanctl_ok --load-all
}

# swanctl against gw-b's charon; its credential directories (private/ holds
# gw-b's key with AUTH_MODE=pubkey) are in $LR_TMP/sw/swanctl.
swanctl_ok() { swanctl_out "$@" >/dev/null; }
swanctl_out() {
  SWANCTL_DIR=$LR_TMP/sw/swanctl ip netns exec "$NS_GB" timeout 10 swanctl "$@" \
    --uri "unix://$LR_TMP/sw/charon.vici" 2>&1
}

charon_stop() {
  [ -n "${CHARON_PID:-}" ] || return 0
  kill -TERM "$CHARON_PID" 2>/dev/null || true
  wait "$CHARON_PID" 2>/dev/null || true
}

# sw_topology: the sites, host-a behind linerate, host-b behind charon.
sw_topology() {
  sites ike lan
  host_side "$NS_HA" "$H4_A" "$H6_A" "$G4_A" "$G6_A"
  host_side "$NS_HB" "$H4_B" "$H6_B" "$G4_B" "$G6_B"
  gateway_side "$NS_GA" lan wan
}

# gw_metrics SIDE: what that gateway's metrics listener would serve, asked on
# its control socket.
gw_metrics() {
  printf 'linerate-show=metrics\n\n' | "$PYTHON" tests/net/uapi.py ask "$LR_TMP/gw-$1.sock"
}

child_installed() { swanctl_out --list-sas | grep -q "site: #.*INSTALLED"; }
ike_line() { gw_show a ike | grep -q -- "$1"; }

# tunnel_carries: the whole check once a tunnel is up.
tunnel_carries() {
  assert "host a pings host b through the tunnel" ping_ok "$NS_HA" "$H4_B" 3 20
  assert "host b pings host a" ping_ok "$NS_HB" "$H4_A"
  make_payload 100
  XFER_TIMEOUT=120
  assert "100 MiB host a -> host b, sha256 matches" xfer "$NS_HA" "$NS_HB" "$H4_B"
  assert "100 MiB host b -> host a, sha256 matches" xfer "$NS_HB" "$NS_HA" "$H4_A"
  assert "charon lists the child SA installed" child_installed
  assert "show ike lists the IKE SA established" ike_line "site: .* Established"
  assert "and its child SA" ike_line "child: in SPI"
  assert "the metrics count it established" \
    grep -q '^linerate_ike_sas{connection="site",state="Established"} 1$' <<<"$(gw_metrics a)"
  assert "show esp has the tunnel in UDP, 4500 both ways" grep -q "^site (esp) .* udp 4500 -> 4500" <<<"$(gw_show a esp)"
  assert "and the negotiated SAs" test "$(gw_show a esp | grep -c "^  \(in\|out\) spi")" -eq 2
  assert "nothing failed to verify or was dropped in esp-decrypt" \
    test "$(gw_counter a 'esp-decrypt\.drop\..*')" = 0
  sleep 0.5
  assert "no buffer leaked on gateway a" buffers_all_back a
}

through() {
  sw_topology
  through_ready "$1" "$2" "$3" "$4" "$5"
  tunnel_carries
}

# through_ready FIRST IKE ESP [SW_IKE SW_ESP]: both ends configured and started,
# FIRST (linerate or charon) initiating; waits for the child SA.
through_ready() {
  local first=$1 ike=$2 esp=$3 sw_ike=${4:-$2} sw_esp=${5:-$3}
  if [ "$first" = linerate ]; then
    linerate_config start "$ike" "$esp"
    charon_setup none "$sw_ike" "$sw_esp"
    charon_start
    gw_start a
  else
    linerate_config none "$ike" "$esp"
    charon_setup start "$sw_ike" "$sw_esp"
    gw_start a
    charon_start
  fi
  if ! wait_until 20 "the child SA" child_installed; then
    [ -z "${IKE_KEEP_LOG:-}" ] || cp "$LR_TMP/sw/charon.log" "$IKE_KEEP_LOG"
    gw_log a
    grep -i "proposal" "$LR_TMP/sw/charon.log" | tail -n 6 | sed "s/^/    | /" >&2
    tail -n 30 "$LR_TMP/sw/charon.log" | sed 's/^/    | /' >&2
  fi
}

# up_with FIRST(linerate|charon): both ends on one IKE and one ESP proposal,
# FIRST initiating, and the child SA up.
up_with() {
  if [ "$1" = linerate ]; then
    linerate_config start aes256gcm16-prfsha256-ecp256 aes128gcm16
    charon_setup none aes256gcm16-prfsha256-ecp256 aes128gcm16
    charon_start
    gw_start a
  else
    linerate_config none aes256gcm16-prfsha256-ecp256 aes128gcm16
    charon_setup start aes256gcm16-prfsha256-ecp256 aes128gcm16
    gw_start a
    charon_start
  fi
  assert "the tunnel comes up" wait_until 20 "the child SA" child_installed
}

scenario_linerate_initiates() {
  through linerate aes256gcm16-prfsha256-ecp256 aes128gcm16 aes256gcm16-prfsha256-ecp256 aes128gcm16
}

scenario_charon_initiates() {
  through charon aes128gcm16-prfsha256-ecp256 aes256gcm16 aes128gcm16-prfsha256-ecp256 aes256gcm16
}

scenario_chacha_x25519() {
  through linerate chacha20poly1305-prfsha384-x25519 chacha20poly1305 chacha20poly1305-prfsha384-x25519 chacha20poly1305
}

scenario_cbc_sha256() {
  through charon aes256gcm16-prfsha384-ecp384 aes128-sha256 aes256gcm16-prfsha384-ecp384 aes128-sha256
}

scenario_v6_outer() {
  OUT_A=$W6_A OUT_B=$W6_B
  through linerate aes256gcm16-prfsha384-ecp384 aes256gcm16 aes256gcm16-prfsha384-ecp384 aes256gcm16
}

# certified FIRST: the tunnel with certificates, FIRST initiating.
certified() {
  AUTH_MODE=pubkey
  sw_topology
  make_certs
  through_ready "$1" aes256gcm16-prfsha384-ecp384 aes128gcm16
  tunnel_carries
}

scenario_certificates() { certified charon; }
scenario_certificates_linerate_initiates() { certified linerate; }

scenario_wrong_ca() {
  AUTH_MODE=pubkey
  sw_topology
  make_certs
  # gw-b's certificate, made again under a CA gw-a does not trust.
  local d=$LR_TMP/certs
  openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$d/rogue.key" \
    -subj "/C=CH/O=linerate/CN=Interop CA" -days 2 -out "$d/rogue.pem" 2>/dev/null
  openssl x509 -req -in "$d/gw-b.csr" -CA "$d/rogue.pem" -CAkey "$d/rogue.key" -CAcreateserial \
    -days 2 -sha256 -out "$d/gw-b.pem" 2>/dev/null
  linerate_config none aes256gcm16-prfsha256-ecp256 aes128gcm16
  charon_setup start aes256gcm16-prfsha256-ecp256 aes128gcm16
  gw_start a
  charon_start
  assert "linerate refuses the certificate, and says why" \
    wait_until 15 "linerate's log line" grep -q "the CA's signature on 'C=CH, O=linerate, CN=gw-b' does not verify" "$LR_TMP/gw-a.log"
  assert "no child SA" not child_installed
}

scenario_proposal_mismatch() {
  sw_topology
  linerate_config start aes256gcm16-prfsha256-ecp256 aes128gcm16
  charon_setup none chacha20poly1305-prfsha384-x25519 aes128gcm16
  charon_start
  gw_start a
  assert "linerate logs that the peer chose nothing" \
    wait_until 15 "linerate's log line" grep -q "peer refused IKE_SA_INIT: NO_PROPOSAL_CHOSEN" "$LR_TMP/gw-a.log"
  assert "charon logs that no proposal was acceptable" \
    wait_until 5 "charon's log line" grep -q "no acceptable proposal\|NO_PROPOSAL_CHOSEN\|NO_PROP" "$LR_TMP/sw/charon.log"
  assert "no child SA" not child_installed
  assert "nothing gets through" not ping_ok "$NS_HA" "$H4_B" 1 2
}

scenario_wrong_psk() {
  sw_topology
  linerate_config start aes256gcm16-prfsha256-ecp256 aes128gcm16
  charon_setup none aes256gcm16-prfsha256-ecp256 aes128gcm16 "another key for the interop tests"
  charon_start
  gw_start a
  assert "linerate logs the refused authentication" \
    wait_until 15 "linerate's log line" grep -q "AUTHENTICATION_FAILED" "$LR_TMP/gw-a.log"
  assert "charon logs that our AUTH did not verify" \
    wait_until 5 "charon's log line" grep -qi "AUTH_FAILED\|authentication of .* failed" "$LR_TMP/sw/charon.log"
  assert "no child SA" not child_installed
}

scenario_peer_restarts() {
  sw_topology
  up_with linerate
  assert "host a pings host b" ping_ok "$NS_HA" "$H4_B" 3 10
  kill -KILL "$CHARON_PID"
  wait "$CHARON_PID" 2>/dev/null || true
  assert "dead peer detection closes the IKE SA" \
    wait_until 30 "linerate to give up on charon" grep -q "no answer from" "$LR_TMP/gw-a.log"
  assert "and takes the child SA out" not ike_line "child: in SPI"
  charon_start
  assert "linerate brings the tunnel up again" wait_until 30 "the new child SA" child_installed
  assert "host a pings host b again" ping_ok "$NS_HA" "$H4_B" 3 10
}

# rekeying WHO: during a paced transfer, WHO (linerate or charon) rekeys the
# child SA every 10 s and the IKE SA after 15 s.
rekeying() {
  if [ "$1" = linerate ]; then
    LR_REKEY=10 LR_IKE_REKEY=15 SW_REKEY=0 SW_IKE_REKEY=0
  else
    LR_REKEY=0 LR_IKE_REKEY=0 SW_REKEY=10 SW_IKE_REKEY=15
  fi
  sw_topology
  up_with linerate
  assert "host a pings host b" ping_ok "$NS_HA" "$H4_B" 3 10
  make_payload 100
  XFER_TIMEOUT=120
  # Paced at 4 MB/s: about 26 s, through two child rekeys and an IKE rekey.
  xfer_start "$NS_HA" "$NS_HB" "$H4_B" 4
  assert "the transfer went on through the rekeys, sha256 matches" xfer_finish
  assert "the child SA was rekeyed at least twice" \
    test "$(grep -c "rekeys [0-9a-f]*_i" "$LR_TMP/gw-a.log" || true)" -ge 2
  assert "the IKE SA was rekeyed" grep -q "rekeyed: site: IKE SA rekeyed" "$LR_TMP/gw-a.log"
  assert "charon agrees: one IKE SA, one child SA installed" \
    test "$(swanctl_out --list-sas | grep -c "INSTALLED")" -eq 1
  assert "show ike: one IKE SA, established" test "$(gw_show a ike | grep -c "Established")" -eq 1
  assert "show esp: one outbound and one inbound SA left" \
    test "$(gw_show a esp | grep -c "^  \(in\|out\) spi")" -eq 2
  local lost
  lost=$(gw_counter a 'esp-decrypt\.drop\..*')
  log "    esp-decrypt dropped $lost packets through the rekeys"
  assert "at most a few packets lost to the change" test "$lost" -le 8
  assert "the tunnel still carries" ping_ok "$NS_HA" "$H4_B" 3 10
}

scenario_cookie_flood() {
  local ike=aes256gcm16-prfsha256-x25519
  sw_topology
  linerate_config none "$ike" aes128gcm16
  charon_setup start "$ike" aes128gcm16
  gw_start a
  # Bring up gw-b's addresses first (charon_setup did) and let the flood run.
  in_ns "$NS_GB" "$PYTHON" tests/net/ike_flood.py "$W4_B" "$W4_A" 3000 6 >"$LR_TMP/flood.out" &
  local flood=$!
  sleep 1
  charon_start
  assert "charon connects during the flood" wait_until 20 "the child SA" child_installed
  assert "after returning a cookie" grep -q "parsed IKE_SA_INIT response 0 \[ N(COOKIE) \]" "$LR_TMP/sw/charon.log"
  wait "$flood" || true
  log "    the flood sent $(cat "$LR_TMP/flood.out") requests"
  local text
  text=$(gw_show a ike)
  assert "linerate sent cookies" grep -q "cookie-sent [0-9]" <<<"$text"
  assert "and holds no more half-open SAs than the threshold" \
    test "$(awk '/^half-open:/ { print $2 }' <<<"$text")" -le 30
  assert "the tunnel carries" ping_ok "$NS_HA" "$H4_B" 3 10
}

scenario_linerate_rekeys() { rekeying linerate; }
scenario_charon_rekeys() { rekeying charon; }

# lost_rekey_answer WHO: WHO (linerate or charon) rekeys the child SA 10 s after
# it is up, and the first answer to it is dropped on gw-b's WAN (tests/net/
# drop_rekey_answer.c) while host a pings host b every 20 ms for 15 s.
lost_rekey_answer() {
  local where
  if [ "$1" = linerate ]; then
    LR_REKEY=10 SW_REKEY=0 where=egress
  else
    LR_REKEY=0 SW_REKEY=10 where=ingress
  fi
  LR_IKE_REKEY=0 SW_IKE_REKEY=0
  sw_topology
  clang -O2 -g -target bpf -I "/usr/include/$(uname -m)-linux-gnu" \
    -c tests/net/drop_rekey_answer.c -o "$LR_TMP/drop_rekey_answer.o"
  up_with linerate
  in_ns "$NS_GB" tc qdisc add dev wan clsact
  in_ns "$NS_GB" tc filter add dev wan "$where" bpf da obj "$LR_TMP/drop_rekey_answer.o" sec tc
  local out sent got
  out=$(in_ns "$NS_HA" ping -n -q -c 750 -i 0.02 -W 2 "$H4_B" 2>&1 || true)
  sent=$(sed -n 's/^\([0-9]*\) packets transmitted.*/\1/p' <<<"$out")
  got=$(sed -n 's/.* \([0-9]*\) received.*/\1/p' <<<"$out")
  log "    pings: $sent sent, $got answered, $((sent - got)) lost"
  assert "the child SA was rekeyed" grep -q "rekeys [0-9a-f]*_i" "$LR_TMP/gw-a.log"
  if [ "$1" = linerate ]; then
    assert "charon's answer was lost and linerate asked again" \
      wait_until 10 "the retransmission" grep -q "received retransmit of request with ID" "$LR_TMP/sw/charon.log"
  else
    assert "linerate's answer was lost and charon asked again" \
      wait_until 10 "the retransmission" grep -q "retransmit 1 of request" "$LR_TMP/sw/charon.log"
    assert "linerate sealed with the new child once charon deleted the old one" \
      grep -q "removed, [0-9a-f]*_o seals" "$LR_TMP/gw-a.log"
  fi
  assert "no ping lost to the lost answer (at most 2 of 750)" test $((sent - got)) -le 2
  assert "show esp: one outbound and one inbound SA left" \
    wait_until 5 "the old child to go" eval '[ "$(gw_show a esp | grep -c "^  \(in\|out\|standby\) spi")" -eq 2 ]'
  assert "the tunnel still carries" ping_ok "$NS_HA" "$H4_B" 3 10
}

scenario_child_made_again() {
  sw_topology
  up_with charon
  assert "host a pings host b" ping_ok "$NS_HA" "$H4_B" 3 10
  swanctl_ok --terminate --child site
  assert "charon deleted the child SA, and linerate took it out" \
    wait_until 10 "the child to go" not ike_line "child: in SPI"
  swanctl_ok --initiate --child site
  assert "charon's new child SA in the same IKE SA is taken" wait_until 10 "the child SA" child_installed
  assert "show ike: one IKE SA with the child" ike_line "child: in SPI"
  assert "host a pings host b again" ping_ok "$NS_HA" "$H4_B" 3 10
  assert "show esp: one outbound and one inbound SA" \
    test "$(gw_show a esp | grep -c "^  \(in\|out\|standby\) spi")" -eq 2
}

# nat_topology BEHIND(charon|linerate): sw_topology with a NAT router ($NS_NAT)
# on the WAN link. BEHIND's side of it is 198.18.5.0/24 (the router .1, gw-b
# .2 when charon is behind it); the other side is 198.18.2.0/24 (gw-a .1, the
# router .2, and .3 as a second address to move to).
NAT_INSIDE4=198.18.5.1 NAT_OUT2=198.18.2.3
nat_topology() {
  local inside outside
  sw_topology
  NS_NAT="lr-ikenat-$BASHPID"
  ns_add "$NS_NAT"
  ip -n "$NS_GB" link set wan netns "$NS_NAT"
  ip link add side-b netns "$NS_NAT" type veth peer name wan netns "$NS_GB"
  if [ "$1" = charon ]; then inside=side-b outside=wan; else inside=wan outside=side-b; fi
  ip -n "$NS_NAT" link set "$inside" name inside
  ip -n "$NS_NAT" link set "$outside" name outside
  local p
  for p in inside outside; do
    ip -n "$NS_NAT" link set "$p" up
    in_ns "$NS_NAT" ethtool -K "$p" tx off >/dev/null
  done
  in_ns "$NS_NAT" sysctl -qw net.ipv4.ip_forward=1
  SW_WAN4=198.18.5.2 OUT_B=198.18.5.2
  if [ "$1" = charon ]; then
    ip -n "$NS_NAT" addr add "$W4_B/24" dev outside
    ip -n "$NS_NAT" addr add "$NAT_OUT2/24" dev outside
    ip -n "$NS_NAT" addr add "$NAT_INSIDE4/24" dev inside
    SW_GATEWAY=$NAT_INSIDE4 LR_REMOTE=any LR_REMOTE_ID=$OUT_B
  else
    ip -n "$NS_NAT" addr add "$W4_B/24" dev inside
    ip -n "$NS_NAT" addr add "$NAT_INSIDE4/24" dev outside
    SW_REMOTE_ADDRS=%any
    LR_EXTRA=$(printf '[[route]]\nprefix = "198.18.5.0/24"\nport = "wan"\nvia = "%s"' "$W4_B")
  fi
  nat_maps_to "$( [ "$1" = charon ] && echo "$W4_B" || echo "$NAT_INSIDE4")"
}

# nat_maps_to ADDR: the router maps what leaves by "outside" to ADDR and a
# random port, and forgets every mapping it had: the next packet of each flow
# gets a new one (what a NAT that reboots, or a carrier's NAT, does).
nat_maps_to() {
  in_ns "$NS_NAT" nft flush ruleset
  in_ns "$NS_NAT" nft -f - <<EOF2
table ip nat {
  chain post {
    type nat hook postrouting priority srcnat;
    oifname "outside" meta l4proto udp snat to $1:20000-60000 random
  }
}
table ip count {
  chain forwarded {
    type filter hook forward priority filter;
    iifname "inside" udp dport 4500 udp length 9 counter
  }
}
EOF2
  in_ns "$NS_NAT" conntrack -F >/dev/null 2>&1
}

# esp_to: where show esp says the tunnel sends (address and UDP port).
esp_to() { gw_show a esp | sed -n 's/^site (esp) [^ ]* -> \([^ ]*\) udp 4500 -> \([0-9]*\).*/\1:\2/p'; }

# rebind ADDR: the NAT's mapping moves to ADDR and a new port; prints how many
# seconds passed until host a's pings reached host b again.
rebind() {
  local before t0 now
  before=$(esp_to)
  nat_maps_to "$1"
  t0=$EPOCHREALTIME
  wait_until "${REBIND_WAIT:-20}" "pings to pass again" ping_ok "$NS_HA" "$H4_B" 1 1 || return 1
  now=$EPOCHREALTIME
  wait_until 5 "show esp to follow" eval '[ "$(esp_to)" != "$before" ]' || return 1
  log "    ESP went from $before to $(esp_to): pings pass again after $(echo "$now - $t0" | bc) s"
}

# rebinding [transfer]: charon behind a NAT whose mapping moves to a new port,
# then to a new address; ESP must follow each. With "transfer", during a paced
# TCP transfer that must live through both.
rebinding() {
  nat_topology charon
  up_with charon
  assert "host a pings host b" ping_ok "$NS_HA" "$H4_B" 3 10
  assert "ESP goes to the NAT's address" grep -q "^$W4_B:" <<<"$(esp_to)"
  if [ "${1:-}" = transfer ]; then
    make_payload 20
    XFER_TIMEOUT=120
    # Paced at 1.5 MB/s: about 14 s, through both moves.
    xfer_start "$NS_HB" "$NS_HA" "$H4_A" 1.5
    sleep 2
  fi
  assert "a new NAT port: ESP follows" rebind "$W4_B"
  assert "a new NAT address: ESP follows" rebind "$NAT_OUT2"
  assert "show esp sends to the new address" grep -q "^$NAT_OUT2:" <<<"$(esp_to)"
  assert "show ike too" ike_line "-> $NAT_OUT2:"
  [ "${1:-}" != transfer ] ||
    assert "the TCP transfer lived through both, sha256 matches" xfer_finish
  assert "linerate logged each move" \
    test "$(grep -c "the peer is at .* now (its NAT's new mapping)" "$LR_TMP/gw-a.log")" -ge 2
}

# Found by charon's liveness check (every 2 s).
scenario_nat_rebinding() { rebinding transfer; }

# No liveness check either side: charon's keepalive (every 2 s once idle)
# from the new mapping has linerate ask there, once the old one has been quiet
# long enough (2.5 keepalive gaps; here the pings keep charon from sending
# any, so the 30 s for a peer whose keepalives are not seen).
scenario_nat_rebinding_quiet_peer() {
  LR_DPD=0 SW_DPD=0 SW_KEEP_ALIVE=2 REBIND_WAIT=45
  rebinding
}

scenario_nat_keepalives() {
  nat_topology linerate
  # Neither end checks liveness: only keepalives keep the mapping.
  LR_DPD=0 SW_DPD=0 LR_KEEPALIVE=2
  in_ns "$NS_NAT" sysctl -qw net.netfilter.nf_conntrack_udp_timeout=4 \
    net.netfilter.nf_conntrack_udp_timeout_stream=4
  up_with linerate
  assert "host a pings host b" ping_ok "$NS_HA" "$H4_B" 3 10
  assert "linerate saw the NAT in front of it" grep -q "UDP-encapsulated" "$LR_TMP/gw-a.log"
  local before after
  before=$(in_ns "$NS_NAT" nft list chain ip count forwarded | sed -n 's/.*packets \([0-9]*\).*/\1/p')
  sleep 12
  after=$(in_ns "$NS_NAT" nft list chain ip count forwarded | sed -n 's/.*packets \([0-9]*\).*/\1/p')
  log "    $((after - before)) keepalives through the NAT in 12 s idle"
  assert "linerate sent keepalives every 2 s (5 at least in 12 s)" test $((after - before)) -ge 5
  assert "after 12 s idle host b still reaches host a" ping_ok "$NS_HB" "$H4_A" 1 3
}

# cert_round FIRST WHAT: with the certificates in $LR_TMP/certs, both ends
# started afresh, FIRST initiating; the child SA up and a ping through.
cert_round() {
  local first=$1 what=$2 start=none sw_start=start
  [ "$first" = charon ] || { start=start sw_start=none; }
  charon_stop
  [ -z "${GW_PID_A:-}" ] || { kill "$GW_PID_A" 2>/dev/null; wait "$GW_PID_A" 2>/dev/null || true; }
  linerate_config "$start" aes256gcm16-prfsha384-ecp384 aes128gcm16
  charon_setup "$sw_start" aes256gcm16-prfsha384-ecp384 aes128gcm16
  gw_start a
  charon_start
  assert "$what: the child SA comes up" wait_until 20 "the child SA" child_installed
  assert "$what: host a pings host b" ping_ok "$NS_HA" "$H4_B" 2 10
}

scenario_rsa_certificates() {
  AUTH_MODE=pubkey
  sw_topology
  local bits first
  for bits in 2048 3072 4096; do
    CERT_A_KEY="rsa:$bits" CERT_B_KEY="rsa:$bits" make_certs
    for first in linerate charon; do
      cert_round "$first" "RSA-$bits, $first initiating"
    done
    log "    RSA-$bits: charon took $(grep -c "received fragment #" "$LR_TMP/sw/charon.log" || true) fragments, cut $(grep -c "splitting IKE message" "$LR_TMP/sw/charon.log" || true) messages, so far"
  done
  assert "charon took linerate's fragments" grep -q "received fragment #1 of" "$LR_TMP/sw/charon.log"
  assert "and cut its own messages" grep -q "splitting IKE message" "$LR_TMP/sw/charon.log"
  in_ns "$NS_GA" ip link set wan mtu 1280
  in_ns "$NS_GB" ip link set wan mtu 1280
  cert_round linerate "RSA-4096 over a path of MTU 1280"
  cert_round charon "RSA-4096 over a path of MTU 1280, charon initiating"
  assert "nothing dropped as too big on the way out" \
    test "$(gw_counter a 'ip-rewrite\.drop\.(too-big|own-too-big)')" = 0
}

scenario_certificate_chain() {
  AUTH_MODE=pubkey CERT_CHAIN=1
  sw_topology
  make_certs
  cert_round linerate "through an intermediate CA, linerate initiating"
  assert "charon took linerate's chain" grep -q "Interop Intermediate CA" "$LR_TMP/sw/charon.log"
  cert_round charon "through an intermediate CA, charon initiating"
}

scenario_ip_fragments() {
  AUTH_MODE=pubkey SW_FRAGMENTATION=no
  sw_topology
  CERT_A_KEY="ec -pkeyopt ec_paramgen_curve:P-256" CERT_B_KEY="rsa:4096" make_certs
  cert_round linerate "charon's IKE_AUTH answer in IP fragments"
  cert_round charon "charon's IKE_AUTH request in IP fragments"
  assert "no IKE fragments were agreed" not grep -q "received fragment #" "$LR_TMP/sw/charon.log"
  assert "charon sent IKE messages larger than the path (1500)" \
    grep -Eq "sending packet: .*\((1[5-9][0-9]{2}|[2-9][0-9]{3}) bytes\)" "$LR_TMP/sw/charon.log"
  assert "linerate's ip-local handed the fragments on" \
    test "$(gw_counter a 'ip-local\.drop\.(fragment-.*|reassembled-too-big|ike-backlog)')" = 0
  # Both certificates RSA-4096: linerate's own IKE_AUTH outgrows the path too,
  # and leaves in IP fragments (ip4-fragment) that charon's kernel reassembles.
  CERT_A_KEY="rsa:4096" CERT_B_KEY="rsa:4096" make_certs
  cert_round linerate "both IKE_AUTH messages in IP fragments"
  cert_round charon "both IKE_AUTH messages in IP fragments, charon initiating"
  assert "linerate cut its own IKE_AUTH answer" counter_at_least a 'ip4-fragment\.packets' 1
}

# charon_sends_on_ours: whether every child SA charon has installed sends to
# an inbound SA linerate has (its outbound SPIs among linerate's inbound ones).
charon_sends_on_ours() {
  local spi ours
  ours=$(gw_show a esp | sed -n 's/^  in spi 0x\([0-9a-f]*\) .*/\1/p')
  for spi in $(swanctl_out --list-sas | sed -n 's/^ *out  *\([0-9a-f]\{8\}\).*/\1/p'); do
    grep -qx "$spi" <<<"$ours" || return 1
  done
  [ -n "$ours" ]
}

scenario_both_start_and_restart() {
  sw_topology
  linerate_config start aes256gcm16-prfsha256-ecp256 aes128gcm16
  charon_setup start aes256gcm16-prfsha256-ecp256 aes128gcm16
  charon_start
  gw_start a
  assert "the tunnel comes up" wait_until 20 "the child SA" child_installed
  assert "every child SA charon sends on is installed in linerate" \
    wait_until 10 "linerate's inbound SAs" charon_sends_on_ours
  assert "traffic passes both ways" ping_ok "$NS_HA" "$H4_B" 10 10
  assert "and back" ping_ok "$NS_HB" "$H4_A" 10 10
  kill -KILL "$GW_PID_A"
  wait "$GW_PID_A" 2>/dev/null || true
  assert "charon finds linerate gone and starts over" \
    wait_until 30 "charon's dead peer detection" grep -q "giving up after" "$LR_TMP/sw/charon.log"
  gw_start a
  assert "the tunnel comes up again" wait_until 20 "the child SA" child_installed
  assert "every child SA charon sends on is installed in linerate again" \
    wait_until 15 "linerate's inbound SAs" charon_sends_on_ours
  assert "traffic passes both ways again" ping_ok "$NS_HA" "$H4_B" 10 10
  assert "and back" ping_ok "$NS_HB" "$H4_A" 10 10
  log "    charon: $(swanctl_out --list-sas | grep -c "ESTABLISHED") IKE SA(s), $(swanctl_out --list-sas | grep -c "INSTALLED") child SA(s); linerate: $(gw_show a ike | grep -c "Established") IKE SA(s)"
}

# One TCP flow as fast as it goes from host a to host b, sealed by linerate's
# workers on one SA: charon, whose replay window is 32 packets, refuses none as
# replays (each SA has one sending worker; the others hand their packets to it).
scenario_one_flow() {
  sw_topology
  through_ready linerate aes256gcm16-prfsha256-ecp256 aes128gcm16
  assert "host a pings host b through the tunnel" ping_ok "$NS_HA" "$H4_B" 3 20
  local retransmits mbps loss refused
  read -r retransmits mbps loss < <(one_tcp_flow 15)
  refused=$(grep -c "ESP sequence number verification failed" "$LR_TMP/sw/charon.log" || true)
  log "    one TCP flow for 15 s ($GW_WORKERS worker(s)): $mbps Mbit/s, $retransmits retransmits; 100 pings a second beside it: $loss lost"
  log "    packets handed to the SA's sending worker: $(gw_counter a 'esp_handoff\.handed'), taken in: $(gw_counter a 'esp_handoff\.taken')"
  gw_show a errors | sed 's/^/    a| /' >&2
  assert_eq "charon refused no packet as a replay (window 32)" 0 "$refused"
}

scenario_lost_rekey_answer_linerate_answers() { lost_rekey_answer charon; }
scenario_lost_rekey_answer_linerate_asks() { lost_rekey_answer linerate; }

[ -x "$CHARON" ] || die "$CHARON is missing (make setup installs strongSwan)"
# Sourced (tests/ike/capture_strongswan.sh): the functions only.
[ "${BASH_SOURCE[0]}" != "$0" ] && return 0
run_scenarios ike "$GW_DRIVER, $GW_WORKERS worker(s)" "ike: linerate (gw-a) against strongSwan (gw-b)" "$@"
