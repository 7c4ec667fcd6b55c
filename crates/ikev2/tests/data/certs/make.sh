#!/usr/bin/env bash
# Test credentials for the ikev2 crate's certificate tests (never for real use):
# a CA (ECDSA P-256), gw-a (RSA 2048), gw-b (ECDSA P-384) and big (RSA 4096,
# whose IKE_AUTH needs fragments) issued by it; an intermediate CA ("inter")
# under it that issued "leaf" (leaf.pem holds leaf and inter, as a cert_file
# with its chain); "forged", issued by gw-b, which is no CA; and "other", issued
# by a second CA. Valid for 100 years. Run here to make new ones.
set -euo pipefail
cd "$(dirname "$0")"
days=36500
openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key \
  -subj "/C=CH/O=linerate tests/CN=Test CA" -days $days -out ca.pem 2>/dev/null
openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout other-ca.key \
  -subj "/C=CH/O=linerate tests/CN=Other CA" -days $days -out other-ca.pem 2>/dev/null
issue() { # NAME KEYARGS CA [EXTENSIONS]
  openssl req -new -newkey $2 -nodes -keyout "$1.key" -subj "/C=CH/O=linerate tests/CN=$1" -out "$1.csr" 2>/dev/null
  openssl x509 -req -in "$1.csr" -CA "$3.pem" -CAkey "$3.key" -CAcreateserial -days $days -sha256 \
    ${4:+-extfile <(printf '%s\n' "$4")} -out "$1.pem" 2>/dev/null
  rm -f "$1.csr"
}
issue gw-a "rsa:2048" ca
issue gw-b "ec -pkeyopt ec_paramgen_curve:P-384" ca
issue big "rsa:4096" ca
issue other "ec -pkeyopt ec_paramgen_curve:P-256" other-ca
issue inter "ec -pkeyopt ec_paramgen_curve:P-256" ca "basicConstraints=critical,CA:TRUE"
issue leaf "ec -pkeyopt ec_paramgen_curve:P-256" inter
cat inter.pem >>leaf.pem
issue forged "ec -pkeyopt ec_paramgen_curve:P-256" gw-b
rm -f ./*.srl ca.key other-ca.key inter.key
