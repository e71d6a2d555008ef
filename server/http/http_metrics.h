#ifndef RBMREC_SERVER_HTTP_HTTP_METRICS_H_
#define RBMREC_SERVER_HTTP_HTTP_METRICS_H_

// The HTTP listener's metrics on the server's Prometheus /metrics
// (server/metrics/metrics.h; docs/metrics.md), the HTTP counterpart of the
// RPC metrics:
//   rbmrec_http_requests_total{route,code}   counter   finished requests.
//   rbmrec_http_request_duration_seconds{route}  histogram  from the
//       request's headers in to its answer sent (for a stream, its end);
//       buckets as rbmrec_rpc_duration_seconds (100 us .. 10 s).
// `route` is the matched route as declared, "METHOD TEMPLATE" ("POST
// /v1/users/{user_id}:predict", "GET /openapi.json"), or "unmatched" (404,
// 405, and requests refused before a route was found); never a path with
// ids. `code` is the HTTP status sent ("200", "404"), or "0" when the
// connection closed before an answer was queued.
//
// Thread safety: every method may be called from any thread.

#include <memory>
#include <string>

#include "server/metrics/metrics.h"

namespace rbmrec::server::http {

class HttpMetrics {
 public:
  HttpMetrics();
  // A finished request.
  void Observe(const std::string& route, unsigned code, double seconds);
  // Adds the families to every Render of `registry` (which keeps
  // `metrics` alive).
  static void Register(std::shared_ptr<HttpMetrics> metrics,
                       MetricsRegistry* registry);

 private:
  ScalarFamily requests_;
  HistogramFamily duration_;
};

}  // namespace rbmrec::server::http

#endif  // RBMREC_SERVER_HTTP_HTTP_METRICS_H_
