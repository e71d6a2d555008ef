#include "server/http/http_metrics.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace rbmrec::server::http {

HttpMetrics::HttpMetrics()
    : requests_("rbmrec_http_requests_total",
                "Finished requests of the HTTP/JSON listener by route and "
                "HTTP status code.",
                "counter", {"route", "code"}),
      duration_("rbmrec_http_request_duration_seconds",
                "Time from a request's headers in to its answer sent (a "
                "stream: its end), by route.",
                {"route"}, RpcDurationBuckets()) {}

void HttpMetrics::Observe(const std::string& route, unsigned code,
                          double seconds) {
  requests_.Add({route, absl::StrCat(code)}, 1);
  duration_.Observe({route}, seconds);
}

void HttpMetrics::Register(std::shared_ptr<HttpMetrics> metrics,
                           MetricsRegistry* registry) {
  registry->AddCollector(
      [metrics = std::move(metrics)](std::vector<MetricFamily>* families) {
        families->push_back(metrics->requests_.Snapshot());
        families->push_back(metrics->duration_.Snapshot());
      });
}

}  // namespace rbmrec::server::http
