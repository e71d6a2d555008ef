#ifndef RBMREC_SERVER_METRICS_METRICS_HTTP_H_
#define RBMREC_SERVER_METRICS_METRICS_HTTP_H_

// The HTTP listener of --metrics-listen: GET /metrics answers
// MetricsRegistry::Render() (server/metrics/metrics.h) as
// "text/plain; version=0.0.4; charset=utf-8", the Prometheus text format.
// HEAD works too; any other path is 404, any other method 405.
//
// Built on libmicrohttpd (Debian libmicrohttpd12) with one internal polling
// thread: scrapes are answered one after another on that thread, never on
// a gRPC thread, and take no lock an RPC needs (the RPC metrics are atomics;
// the service gauges are cached, server/metrics/metrics.h). At most 16
// connections are open at once and an idle connection is closed after 10 s.
// Errors of libmicrohttpd are logged as event=metrics_http_error
// (server/log.h).
//
// Plain HTTP, no authentication: main.cc applies the listen policy
// (server/security/listen_policy.h): a non-loopback --metrics-listen needs
// --insecure.
//
// Thread safety: Start() and Stop() from one thread; port() from any.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/metrics/metrics.h"

struct MHD_Daemon;

namespace rbmrec::server {

class MetricsHttpServer {
 public:
  // Listens on `listen` (HOST:PORT: an IPv4 address, [IPv6] or a name that
  // resolves, e.g. localhost; port 0 picks a free port) and serves
  // `registry` (not owned; must outlive the server). InvalidArgument for a
  // malformed address, Unavailable when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& listen, MetricsRegistry* registry);
  // Stop().
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  int port() const { return port_; }
  // Closes the socket and joins the thread (a scrape in progress finishes
  // first). Idempotent.
  void Stop();

 private:
  MetricsHttpServer() = default;
  MHD_Daemon* daemon_ = nullptr;
  MetricsRegistry* registry_ = nullptr;
  int port_ = 0;
  friend struct MetricsHttpAccess;
};

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_METRICS_METRICS_HTTP_H_
