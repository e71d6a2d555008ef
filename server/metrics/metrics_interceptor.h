#ifndef RBMREC_SERVER_METRICS_METRICS_INTERCEPTOR_H_
#define RBMREC_SERVER_METRICS_METRICS_INTERCEPTOR_H_

// The gRPC server interceptor that feeds RpcMetrics (server/metrics/metrics.h):
// rbmrec_rpc_requests_total{method,code}, rbmrec_rpc_duration_seconds
// {method} and rbmrec_rpc_in_flight{method}, without code in any handler.
//
// Coverage. gRPC 1.51 runs the interceptors of
// ServerBuilder::experimental().SetInterceptorCreators on every call of
// every method registered on the server, whatever the API. Checked by
// tests/server/metrics_test.cc, one call of each kind: the sync unary
// handlers of rbmrec.v1.Rbmrec (GetStats), the sync Train server stream,
// the raw-bytes AddRatings client stream (a sync ClientStreamingHandler
// installed with MarkMethodStreamed; its malformed-message failure too),
// the callback handlers PredictRatings and Recommend, finished inline and
// (PredictRatings of a stored version not in memory) from the loader
// thread, the built-in grpc.health.v1.Health Check and Watch, server
// reflection (a bidi stream), and a method the server does not implement
// (counted as method="unknown", code UNIMPLEMENTED). No path of the server
// is known to bypass it.
//
// Timing: the call starts when gRPC creates its interceptors (once the
// call has arrived, before the handler runs) and ends at the hook
// PRE_SEND_STATUS, when the server hands gRPC the status. A call that ends
// without that hook (the client or the server cancelled it before the
// handler answered) is counted with code "CANCELLED" when gRPC destroys
// its interceptors.
//
// Thread safety: the factory is shared by every call and is thread-safe;
// each interceptor belongs to one call (gRPC serializes its hooks).

#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "grpcpp/support/server_interceptor.h"
#include "server/metrics/metrics.h"

namespace rbmrec::server {

class MetricsInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // `metrics` must outlive every call of the server. `services`: the full
  // names of the services whose methods get their own `method` label (from
  // the generated descriptor pool; a name not found there is skipped).
  MetricsInterceptorFactory(RpcMetrics* metrics,
                            const std::vector<std::string>& services);

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

  // The cells of one method label, created once.
  struct MethodCells {
    MethodCells(RpcMetrics* metrics, const std::string& method);
    void Finish(int code, double seconds);

    RpcMetrics* const metrics;
    const std::string method;
    std::atomic<double>* const in_flight;
    HistogramFamily::Cell* const duration;
    // rbmrec_rpc_requests_total cells by grpc::StatusCode (0..16), created
    // on first use so that only codes that occurred are rendered.
    std::array<std::atomic<std::atomic<double>*>, 17> by_code{};
  };

 private:
  RpcMetrics* const metrics_;
  // "/package.Service/Method" -> the method's cells; read-only after the
  // constructor.
  absl::flat_hash_map<std::string, std::unique_ptr<MethodCells>> methods_;
  std::unique_ptr<MethodCells> unknown_;
};

// The service names the server registers (rbmrec.v1.Rbmrec,
// grpc.health.v1.Health, grpc.reflection.v1 and v1alpha ServerReflection).
std::vector<std::string> ServerServiceNames();

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_METRICS_METRICS_INTERCEPTOR_H_
