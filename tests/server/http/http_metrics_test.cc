// The HTTP listener's Prometheus metrics (server/http/http_metrics.h):
// requests by declared route and status code, and their latency histogram,
// on the registry that /metrics renders; no ids in the labels.

#include <chrono>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "server/metrics/metrics.h"
#include "tests/server/http/http_fixture.h"

namespace rbmrec::server::http {
namespace {

// The registry's text once it contains `line` (the completion callback
// runs just after the answer is sent), or after 2 s.
std::string RenderWith(MetricsRegistry& registry, const std::string& line) {
  std::string text;
  for (int i = 0; i < 200; ++i) {
    text = registry.Render();
    if (absl::StrContains(text, line)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return text;
}

TEST(HttpMetrics, RequestsByRouteAndCodeWithLatency) {
  MetricsRegistry registry;
  InProcessHttp http;
  HttpServerOptions o;
  o.metrics = &registry;
  http.Start(o);
  EXPECT_EQ(Call(http.port(), "GET", "/v1/stats").status, 200);
  EXPECT_EQ(Call(http.port(), "GET", "/v1/stats").status, 200);
  EXPECT_EQ(Call(http.port(), "GET", "/nothing/here").status, 404);
  EXPECT_EQ(Call(http.port(), "POST", "/v1/users/secret-user:predict",
                 R"({"itemIds":["i1"]})")
                .status,
            400);  // no model yet (FAILED_PRECONDITION)
  EXPECT_EQ(Call(http.port(), "GET", "/openapi.json").status, 200);
  const std::string text = RenderWith(
      registry, R"(rbmrec_http_requests_total{route="GET /openapi.json")");
  EXPECT_TRUE(absl::StrContains(
      text,
      R"(rbmrec_http_requests_total{route="GET /v1/stats",code="200"} 2)"))
      << text;
  EXPECT_TRUE(absl::StrContains(
      text, R"(rbmrec_http_requests_total{route="unmatched",code="404"} 1)"))
      << text;
  EXPECT_TRUE(absl::StrContains(
      text,
      R"(rbmrec_http_requests_total{route="POST /v1/users/{user_id}:predict",code="400"} 1)"))
      << text;
  EXPECT_TRUE(absl::StrContains(
      text,
      R"(rbmrec_http_request_duration_seconds_count{route="GET /v1/stats"} 2)"))
      << text;
  EXPECT_TRUE(absl::StrContains(
      text,
      R"(rbmrec_http_request_duration_seconds_bucket{route="GET /v1/stats",le="+Inf"} 2)"))
      << text;
  EXPECT_TRUE(absl::StrContains(
      text, "# TYPE rbmrec_http_request_duration_seconds histogram"));
  EXPECT_FALSE(absl::StrContains(text, "secret-user")) << text;
  EXPECT_FALSE(absl::StrContains(text, "/nothing")) << text;
}

}  // namespace
}  // namespace rbmrec::server::http
