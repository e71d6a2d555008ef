#!/bin/sh
# The image's HEALTHCHECK (installed as /usr/local/bin/rbmrec-healthcheck): the image's CLI
# calls grpc.health.v1 Check on the port of RBMREC_LISTEN (RBMREC_SERVER overrides the
# address). Health needs no token, so none is sent.
#
# TLS when the server has a certificate (RBMREC_TLS_CERT): the server is verified against
# RBMREC_HEALTHCHECK_CA (default: ca.pem in the directory of RBMREC_TLS_CERT, as
# docker/make-certs.sh writes it). When the server requires client certificates
# (RBMREC_TLS_CLIENT_CA), the check presents RBMREC_HEALTHCHECK_CERT and
# RBMREC_HEALTHCHECK_KEY (default: client.pem and client.key in that directory).
# RBMREC_HEALTHCHECK_SERVER_NAME: the name to expect in the server's certificate when it does
# not hold the address's host (make-certs.sh certificates hold 127.0.0.1 and localhost).
#
# Every TLS and token setting is passed as a flag (empty = none), so the CLI never takes the
# server's own RBMREC_TLS_CERT/KEY for a client certificate or reads a token variable.
set -eu
server=${RBMREC_SERVER:-127.0.0.1:${RBMREC_LISTEN##*:}}
ca="" cert="" key=""
if [ -n "${RBMREC_TLS_CERT:-}" ]; then
  dir=$(dirname "$RBMREC_TLS_CERT")
  ca=${RBMREC_HEALTHCHECK_CA:-$dir/ca.pem}
  if [ -n "${RBMREC_TLS_CLIENT_CA:-}" ]; then
    cert=${RBMREC_HEALTHCHECK_CERT:-$dir/client.pem}
    key=${RBMREC_HEALTHCHECK_KEY:-$dir/client.key}
  fi
fi
exec rbmrec --timeout 3 --server "$server" --tls-ca "$ca" --tls-cert "$cert" --tls-key "$key" \
  --tls-server-name "${RBMREC_HEALTHCHECK_SERVER_NAME:-}" --token-file "" health
