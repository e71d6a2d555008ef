#!/usr/bin/env bash
# Throwaway TLS certificates (and optionally tokens) for running rbmrec locally, in tests
# and in the compose file. NOT for production: use certificates from your own CA there.
#
# usage: docker/make-certs.sh OUT_DIR [--tokens SERVER_COMMAND...]
#
# Writes into OUT_DIR (created; existing files are replaced) with openssl:
#   ca.pem, ca.key          a new self-signed CA (EC P-256, 825 days)
#   server.pem, server.key  the server's certificate, signed by the CA, for serverAuth;
#                           SAN: DNS:localhost, DNS:rbmrec, IP:127.0.0.1, IP:::1
#                           (extra names: RBMREC_CERT_SANS="DNS:example.org,IP:10.0.0.5")
#   client.pem, client.key  a client certificate (CN=rbmrec-client) signed by the same CA,
#                           for clientAuth (mTLS: the server's --tls-client-ca ca.pem)
# With --tokens, also runs `SERVER_COMMAND token new NAME ROLE` (SERVER_COMMAND is how to run
# rbmrec-server: a binary, e.g. build/bin/rbmrec-server, or e.g. `docker run --rm rbmrec`)
# for an admin and a reader and writes:
#   tokens                  the server's --auth-tokens file (names, roles, SHA-256 hashes)
#   admin.token             the admin's token (first line), for the CLI's --token-file
#   reader.token            a token with the read role
# Without --tokens, make them later the same way:
#   rbmrec-server token new NAME ROLE   (line 1: the token -> a file for --token-file;
#                                        line 2: the line to append to the tokens file)
#
# Permissions: the private keys and token files are 0600. The files the container reads
# (server.key, tokens, and client.key for the image's HEALTHCHECK under mTLS) are given to uid
# RBMREC_UID (default 10001, the image's user) when this runs as root; otherwise they are made
# 0644 so the container's user can read a bind mount of them, and a note says so.
set -euo pipefail
usage() { sed -n '2,/^set /{/^set /d;p}' "$0" >&2; exit 2; }
[ $# -ge 1 ] || usage
out=$1
shift
server_cmd=()
if [ $# -gt 0 ]; then
  { [ "$1" = --tokens ] && [ $# -ge 2 ]; } || usage
  shift
  server_cmd=("$@")
  # A relative binary path still works after the cd below.
  case ${server_cmd[0]} in */*) server_cmd[0]=$(cd "$(dirname "${server_cmd[0]}")" && pwd)/$(basename "${server_cmd[0]}") ;; esac
fi
command -v openssl >/dev/null || { echo "make-certs.sh: openssl not found (apt-get install openssl)" >&2; exit 1; }
mkdir -p "$out"
cd "$out"
umask 077
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

sans="DNS:localhost,DNS:rbmrec,IP:127.0.0.1,IP:::1${RBMREC_CERT_SANS:+,$RBMREC_CERT_SANS}"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

key ca.key
openssl req -x509 -new -key ca.key -sha256 -days 825 -subj "/CN=rbmrec throwaway CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -out ca.pem

# sign NAME CN EXTENSIONS
sign() {
  key "$1.key"
  openssl req -new -key "$1.key" -subj "/CN=$2" -out "$tmp/$1.csr"
  printf '%s\n' "$3" >"$tmp/$1.ext"
  openssl x509 -req -in "$tmp/$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial \
    -CAserial "$tmp/ca.srl" -days 825 -sha256 -extfile "$tmp/$1.ext" -out "$1.pem" 2>/dev/null
}
sign server rbmrec "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=$sans"
sign client rbmrec-client "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
chmod 0644 ca.pem server.pem client.pem

if [ ${#server_cmd[@]} -gt 0 ]; then
  : >"$tmp/tokens"
  for who in admin:admin reader:read; do
    name=${who%%:*} role=${who#*:}
    "${server_cmd[@]}" token new "$name" "$role" >"$tmp/new" 2>"$tmp/new.err" ||
      { echo "make-certs.sh: '${server_cmd[*]} token new $name $role' failed:" >&2
        cat "$tmp/new.err" >&2; exit 1; }
    [ "$(wc -l <"$tmp/new")" -eq 2 ] ||
      { echo "make-certs.sh: '${server_cmd[*]} token new' did not print two lines" >&2; exit 1; }
    sed -n 1p "$tmp/new" >"$name.token"
    sed -n 2p "$tmp/new" >>"$tmp/tokens"
  done
  { echo "# rbmrec --auth-tokens file: NAME ROLE sha256:HASH (made by docker/make-certs.sh)"
    cat "$tmp/tokens"; } >tokens
fi

server_files=(server.key client.key)
[ -f tokens ] && [ ${#server_cmd[@]} -gt 0 ] && server_files+=(tokens)
if [ "$(id -u)" -eq 0 ]; then
  chown "${RBMREC_UID:-10001}" "${server_files[@]}"
else
  chmod 0644 "${server_files[@]}"
  echo "make-certs.sh: ${server_files[*]} made readable by every user (0644) so that the" \
    "image's user can read a bind mount; fine for throwaway local certificates" >&2
fi
echo "make-certs.sh: wrote $(printf '%s ' *)into $(pwd)" >&2
