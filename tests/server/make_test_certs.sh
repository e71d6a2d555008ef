#!/usr/bin/env bash
# Throwaway certificates for the TLS tests (openssl, P-256 keys, 1 day):
#   ca.pem ca.key          the CA
#   server.pem server.key  localhost / 127.0.0.1 / ::1, serial 1001
#   server2.pem server2.key  the same names, a new key, serial 1002
#   client.pem client.key  clientAuth, serial 2001
#   other-ca.pem other-ca.key, other-client.pem other-client.key: a second CA
# Usage: make_test_certs.sh OUT_DIR
set -euo pipefail
out=${1:?usage: make_test_certs.sh OUT_DIR}
mkdir -p "$out"
cd "$out"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
ca() {  # NAME
  key "$1.key"
  openssl req -x509 -new -key "$1.key" -days 1 -subj "/CN=rbmrec test $1" \
    -addext basicConstraints=critical,CA:TRUE \
    -addext keyUsage=critical,keyCertSign,cRLSign -out "$1.pem" 2>/dev/null
}
leaf() {  # NAME CA SERIAL EXTENSIONS
  key "$1.key"
  openssl req -new -key "$1.key" -subj "/CN=rbmrec test $1" -out "$1.csr" 2>/dev/null
  printf '%s\n' "$4" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -set_serial "$3" \
    -days 1 -extfile "$1.ext" -out "$1.pem" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}
server_ext='subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1
extendedKeyUsage=serverAuth'
client_ext='extendedKeyUsage=clientAuth'
ca ca
ca other-ca
leaf server ca 1001 "$server_ext"
leaf server2 ca 1002 "$server_ext"
leaf client ca 2001 "$client_ext"
leaf other-client other-ca 3001 "$client_ext"
