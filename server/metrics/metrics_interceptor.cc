#include "server/metrics/metrics_interceptor.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/error_reason.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/support/interceptor.h"
#include "grpcpp/support/status.h"

namespace rbmrec::server {
namespace {

using Clock = std::chrono::steady_clock;

class MetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit MetricsInterceptor(MetricsInterceptorFactory::MethodCells* cells)
      : cells_(cells), start_(Clock::now()) {
    AtomicAdd(cells_->in_flight, 1);
  }
  ~MetricsInterceptor() override {
    if (!finished_) Finish(grpc::StatusCode::CANCELLED);
  }

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (!finished_ &&
        methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      Finish(methods->GetSendStatus().error_code());
    }
    methods->Proceed();
  }

 private:
  static void AtomicAdd(std::atomic<double>* cell, double delta) {
    double old = cell->load(std::memory_order_relaxed);
    while (!cell->compare_exchange_weak(old, old + delta,
                                        std::memory_order_relaxed)) {
    }
  }

  void Finish(int code) {
    finished_ = true;
    cells_->Finish(
        code, std::chrono::duration<double>(Clock::now() - start_).count());
  }

  MetricsInterceptorFactory::MethodCells* const cells_;
  const Clock::time_point start_;
  bool finished_ = false;
};

}  // namespace

MetricsInterceptorFactory::MethodCells::MethodCells(RpcMetrics* m,
                                                    const std::string& name)
    : metrics(m),
      method(name),
      in_flight(&m->in_flight.Cell({name})),
      duration(&m->duration.GetCell({name})) {}

void MetricsInterceptorFactory::MethodCells::Finish(int code, double seconds) {
  if (code < 0 || code >= 17) code = grpc::StatusCode::UNKNOWN;
  std::atomic<double>* cell = by_code[code].load(std::memory_order_acquire);
  if (cell == nullptr) {
    // Racing first calls resolve to the same cell.
    cell = &metrics->requests.Cell({method, StatusCodeName(code)});
    by_code[code].store(cell, std::memory_order_release);
  }
  double old = cell->load(std::memory_order_relaxed);
  while (
      !cell->compare_exchange_weak(old, old + 1, std::memory_order_relaxed)) {
  }
  duration->Observe(seconds);
  old = in_flight->load(std::memory_order_relaxed);
  while (!in_flight->compare_exchange_weak(old, old - 1,
                                           std::memory_order_relaxed)) {
  }
}

MetricsInterceptorFactory::MetricsInterceptorFactory(
    RpcMetrics* metrics, const std::vector<std::string>& services)
    : metrics_(metrics) {
  const google::protobuf::DescriptorPool* pool =
      google::protobuf::DescriptorPool::generated_pool();
  for (const std::string& service : services) {
    const google::protobuf::ServiceDescriptor* d =
        pool->FindServiceByName(service);
    if (d == nullptr) continue;
    for (int i = 0; i < d->method_count(); ++i) {
      const std::string& name = d->method(i)->name();
      methods_.try_emplace(absl::StrCat("/", service, "/", name),
                           std::make_unique<MethodCells>(metrics, name));
    }
  }
  unknown_ = std::make_unique<MethodCells>(metrics, "unknown");
}

grpc::experimental::Interceptor*
MetricsInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  MethodCells* cells = unknown_.get();
  if (info->method() != nullptr) {
    auto it = methods_.find(absl::string_view(info->method()));
    if (it != methods_.end()) cells = it->second.get();
  }
  return new MetricsInterceptor(cells);
}

std::vector<std::string> ServerServiceNames() {
  return {"rbmrec.v1.Rbmrec", "grpc.health.v1.Health",
          "grpc.reflection.v1.ServerReflection",
          "grpc.reflection.v1alpha.ServerReflection"};
}

}  // namespace rbmrec::server
