#!/bin/sh
# Entrypoint of docker/postgres.Dockerfile: on the first start (empty $PGDATA) creates the
# cluster, the role `rbmrec` (password: RBMREC_DB_PASSWORD, required) and the database
# `rbmrec` it owns; then runs postgres in the foreground (PID 1) on PG_LISTEN:PGPORT.
# Password authentication (scram-sha-256) over TCP; the superuser only over the Unix socket.
set -eu
: "${PGDATA:?}" "${PGPORT:=5432}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -z "${RBMREC_DB_PASSWORD:-}" ]; then
    echo "rbmrec-postgres: set RBMREC_DB_PASSWORD (the password of the role rbmrec)" >&2
    exit 1
  fi
  pwfile=$(mktemp)
  # The superuser gets a random password nobody knows; it logs in over the socket (peer).
  head -c 24 /dev/urandom | base64 >"$pwfile"
  initdb -D "$PGDATA" -U postgres --pwfile="$pwfile" --auth-local=peer \
    --auth-host=scram-sha-256 -E UTF8 --no-locale >/dev/null
  rm -f "$pwfile"
  pw=$(printf '%s' "$RBMREC_DB_PASSWORD" | sed "s/'/''/g")
  printf "CREATE ROLE rbmrec LOGIN PASSWORD '%s';\nCREATE DATABASE rbmrec OWNER rbmrec;\n" "$pw" |
    postgres --single -D "$PGDATA" postgres >/dev/null
  echo "rbmrec-postgres: created the cluster, role and database rbmrec"
fi
exec postgres -D "$PGDATA" -p "$PGPORT" -c listen_addresses="${PG_LISTEN:-127.0.0.1}" \
  -c unix_socket_directories=/run/postgresql -c max_connections="${PG_MAX_CONNECTIONS:-200}"
