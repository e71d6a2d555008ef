# nginx (Debian 12 package) as the gRPC entry point of docker/compose.scale.yaml: grpc_pass to
# the rbmrec replicas (docker/nginx-grpc.conf, mounted or copied to /etc/nginx/nginx.conf).
# Built locally FROM debian:bookworm-slim like docker/Dockerfile.
#
#   docker build -f docker/nginx.Dockerfile -t rbmrec-nginx .   (from the repository root)
#
# Runs as the unprivileged user www-data (the configuration listens on a port above 1024 and
# keeps its pid and temp files under /tmp).
FROM debian:bookworm-slim

RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nginx \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /etc/nginx/sites-enabled/*

COPY docker/nginx-grpc.conf /etc/nginx/nginx.conf

USER www-data
# SIGQUIT: graceful shutdown (finishes the calls in flight).
STOPSIGNAL SIGQUIT
# -e stderr: log from the first line on (before the configuration is read).
ENTRYPOINT ["nginx", "-e", "stderr", "-g", "daemon off;"]
