#!/usr/bin/env bash
# Captures an IKEv2 exchange of strongSwan's charon (initiating, pre-shared key)
# with a linerate gateway, and writes what it knows as known answers for the
# ikev2 crate: every IKE message as sent (from the wire), and the keys charon
# derived (its log at level 4: the Diffie-Hellman secret, SKEYSEED, SK_d, SK_e
# and SK_p). `cargo test -p ikev2` then derives the keys from the messages and
# the secret and must find charon's, opens the encrypted messages with them, and
# checks both AUTH payloads.
#
#   tests/ike/capture_strongswan.sh IKE_PROPOSAL ESP_PROPOSAL OUT
#
# e.g. aes256gcm16-prfsha256-ecp256 aes128gcm16 crates/ikev2/tests/data/strongswan_aes_ecp256.txt
# Needs root (namespaces); run it again to make new cases.
set -euo pipefail
IKE=$1 ESP=$2 OUT=$(realpath -m "$3")
# shellcheck source=tests/net/ike.sh
. "$(dirname "$0")/../net/ike.sh"
LINERATE=$(realpath "$LINERATE")
SW_IKE_LOG=4
sw_topology
linerate_config none "$IKE" "$ESP"
charon_setup start "$IKE" "$ESP"
gw_start a
in_ns "$NS_GB" timeout 20 dumpcap -q -i wan -f 'udp port 500 or udp port 4500' -w "$LR_TMP/ike.pcapng" -a duration:8 2>/dev/null &
cap=$!
sleep 1.5
charon_start
wait_until 20 "the child SA" child_installed || die "no child SA"
wait "$cap" || true
charon_stop
"$PYTHON" - "$LR_TMP/ike.pcapng" "$LR_TMP/sw/charon.log" "$IKE" "$ESP" "$PSK" "$W4_B" >"$OUT" <<'PYEOF'
import re, subprocess, sys
pcap, log, ike, esp, psk, initiator = sys.argv[1:]
rows = subprocess.run(
    ["tshark", "-r", pcap, "-T", "fields", "-e", "ip.src", "-e", "udp.srcport", "-e", "udp.payload"],
    check=True, capture_output=True, text=True).stdout.split("\n")
messages = []
for r in rows:
    if not r.strip():
        continue
    src, port, payload = r.split("\t")
    payload = payload.replace(":", "")
    if port == "4500" or payload.startswith("00000000"):
        if not payload.startswith("00000000"):
            continue  # ESP, not IKE
        payload = payload[8:]
    messages.append(("initiator" if src == initiator else "responder", payload))
text = open(log).read()
def secret(name):
    # "<name> => N bytes @ 0x..." then dump lines "...[IKE]    0: 1A 2B ...".
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = re.search(re.escape(name) + r" => (\d+) bytes @", line)
        if m:
            break
    else:
        sys.exit("no %r in charon's log" % name)
    n, hexes = int(m.group(1)), []
    for line in lines[i + 1:]:
        d = re.search(r"\]\s+\d+: ((?:[0-9A-F]{2} ?)+)", line)
        if not d or len(hexes) >= n:
            break
        hexes += d.group(1).split()
    value = "".join(hexes[:n]).lower()
    assert len(value) == 2 * n, (name, n, value)
    return value
print("# IKEv2 between strongSwan's charon (initiator) and linerate, pre-shared key:")
print("# the messages from the wire, the keys from charon's log. Made by")
print("# tests/ike/capture_strongswan.sh; do not edit.")
print("ike = %s" % ike)
print("esp = %s" % esp)
print("psk = %s" % psk.encode().hex())
for name in ["shared Diffie Hellman secret", "SKEYSEED", "Sk_d secret", "Sk_ei secret", "Sk_er secret", "Sk_pi secret", "Sk_pr secret"]:
    key = {"shared Diffie Hellman secret": "g_ir"}.get(name, name.split()[0].lower())
    print("%s = %s" % (key, secret(name)))
for who, m in messages[:4]:
    print("%s = %s" % (who, m))
PYEOF
log "wrote $OUT"
