# PostgreSQL 15 (Debian 12 package) for docker/compose.scale.yaml: the shared database of the
# rbmrec replicas. Built locally FROM debian:bookworm-slim like docker/Dockerfile.
#
#   docker build -f docker/postgres.Dockerfile -t rbmrec-postgres .   (from the repository root)
#
# docker/postgres-entrypoint.sh creates the cluster in /var/lib/postgresql/data (a volume) on
# the first start: the role and database `rbmrec`, password from RBMREC_DB_PASSWORD
# (scram-sha-256 over TCP; the superuser `postgres` only over the container's Unix socket).
# Env: PGPORT (default 5432), PG_LISTEN (listen_addresses, default 127.0.0.1: for
# network_mode: host on one machine; use * with a private network across machines, plus TLS:
# see the comments in docker/compose.scale.yaml).
FROM debian:bookworm-slim

# Debian's package creates a cluster "main" at install time; the entrypoint makes its own.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql-15 \
 && pg_dropcluster --stop 15 main \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* \
 && mkdir -p /var/lib/postgresql/data /run/postgresql \
 && chown postgres:postgres /var/lib/postgresql/data /run/postgresql \
 && chmod 0700 /var/lib/postgresql/data

COPY docker/postgres-entrypoint.sh /usr/local/bin/rbmrec-postgres-entrypoint

ENV PATH=/usr/lib/postgresql/15/bin:$PATH \
    PGDATA=/var/lib/postgresql/data \
    PGPORT=5432
USER postgres
VOLUME ["/var/lib/postgresql/data"]
EXPOSE 5432
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["sh", "-c", "pg_isready -q -h /run/postgresql -p \"$PGPORT\" -d rbmrec"]
# SIGINT = PostgreSQL's "fast" shutdown (SIGTERM would wait for every client to disconnect).
STOPSIGNAL SIGINT
ENTRYPOINT ["rbmrec-postgres-entrypoint"]
