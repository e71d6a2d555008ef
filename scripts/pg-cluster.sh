# shellcheck shell=bash
# A throwaway PostgreSQL cluster for tests and benchmarks: sourced, not run.
#   source scripts/pg-cluster.sh
#   pg_cluster_start WORKDIR || exit $?   # 77: PostgreSQL not installed
#   ... "$PG_URI" ...                     # postgresql://postgres@/postgres?...
#   pg_cluster_stop                        # also call it from your EXIT trap
# initdb under WORKDIR/data, the server on a Unix socket in WORKDIR only (no
# TCP port), no fsync (the data is thrown away) unless PG_DURABLE=1 (the
# defaults: fsync and full_page_writes on, for benchmarks). As root the server runs as
# the `postgres` user (root cannot run postgres). Sets PG_URI, PG_BIN,
# PG_DATA, PG_AS (the command prefix that runs as the server's user) and
# PG_PSQL (an array: psql on PG_URI, quiet, stopping on errors).
# pg_cluster_start returns 77 (ctest: SKIPPED) with a message when the
# server binaries or the postgres user are missing.

pg_cluster_start() {
  local work=${1:?pg_cluster_start WORKDIR}
  PG_BIN=""
  local d
  for d in "${PG_BIN_DIR:-}" /usr/lib/postgresql/*/bin; do
    if [ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then PG_BIN=$d; fi
  done
  if [ -z "$PG_BIN" ]; then
    echo "SKIPPED: PostgreSQL server binaries (initdb, pg_ctl) not found;" \
      "install the Debian package postgresql (scripts/install-deps.sh)"
    return 77
  fi
  PG_AS=()
  if [ "$(id -u)" -eq 0 ]; then
    if ! id postgres >/dev/null 2>&1; then
      echo "SKIPPED: running as root and there is no postgres user to run the server"
      return 77
    fi
    PG_AS=(runuser -u postgres --)
  fi
  mkdir -p "$work"
  chmod 0755 "$work"
  [ ${#PG_AS[@]} -eq 0 ] || chown postgres "$work"
  PG_DATA=$work/data
  local port=5432  # Unix socket only: the port only names the socket file
  local fast="-c fsync=off -c full_page_writes=off"
  [ "${PG_DURABLE:-0}" != 1 ] || fast=""
  "${PG_AS[@]}" "$PG_BIN/initdb" -D "$PG_DATA" -U postgres -A trust -E UTF8 \
    --no-locale >"$work/initdb.log" 2>&1 || { cat "$work/initdb.log"; return 1; }
  "${PG_AS[@]}" "$PG_BIN/pg_ctl" -D "$PG_DATA" -w -t 60 -l "$work/server.log" \
    -o "-c listen_addresses='' -c unix_socket_directories='$work' -p $port \
        $fast -c max_connections=200" \
    start >/dev/null || { cat "$work/server.log"; return 1; }
  PG_URI="postgresql://postgres@/postgres?host=$work&port=$port"
  PG_PSQL=(psql -X -q -v ON_ERROR_STOP=1 -d "$PG_URI")
}

pg_cluster_stop() {
  [ -n "${PG_DATA:-}" ] || return 0
  "${PG_AS[@]}" "$PG_BIN/pg_ctl" -D "$PG_DATA" -m immediate -w stop >/dev/null 2>&1 || true
  PG_DATA=""
}
