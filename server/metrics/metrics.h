#ifndef RBMREC_SERVER_METRICS_METRICS_H_
#define RBMREC_SERVER_METRICS_METRICS_H_

// Prometheus metrics of rbmrec-server: counters, gauges and histograms with
// labels, and their rendering in the Prometheus text exposition format,
// version 0.0.4 (https://prometheus.io/docs/instrumenting/exposition_formats/).
// Transport-free: server/metrics/metrics_http.h serves Render() over HTTP,
// server/metrics/metrics_interceptor.h feeds the RPC metrics from gRPC.
//
// The metrics (docs/metrics.md has the same list):
//
// RPCs (server/metrics/metrics_interceptor.h; every call of every service of
// the server: rbmrec.v1.Rbmrec, grpc.health.v1.Health, server reflection).
// `method` is the gRPC method's short name ("PredictRatings", "Check",
// "ServerReflectionInfo"), or "unknown" for a method the server does not
// implement; `code` is the status code's name ("OK", "NOT_FOUND", ...).
//   rbmrec_rpc_requests_total{method,code}    counter   finished calls.
//   rbmrec_rpc_duration_seconds{method}       histogram time from the call's
//       start (its interceptor is created) to the server sending its
//       status; buckets 100 us .. 10 s (kRpcDurationBuckets).
//   rbmrec_rpc_in_flight{method}              gauge     calls started and
//       not finished.
//   A call that ends without the server sending a status (the client went
//   away or the server shut down before the handler answered) counts with
//   code="CANCELLED".
//
// The service (read at scrape time, AddServiceCollector in
// server/service/service_metrics.h; the store counts
// are cached for kStatsCacheSeconds):
//   rbmrec_ratings_stored, rbmrec_users_stored, rbmrec_items_stored  gauge
//       stored rows (GetStats).
//   rbmrec_model_versions_stored    gauge  stored model versions.
//   rbmrec_database_bytes           gauge  size of the database on disk.
//   rbmrec_serving                  gauge  1 while a model serves
//       predictions (the readiness of rbmrec.v1.Rbmrec), else 0.
//   rbmrec_active_model_version     gauge  the version serving
//       model_version = 0 (0: none).
//   rbmrec_active_model_age_seconds gauge  now - its publication time
//       (absent when no model is active).
//   rbmrec_active_model_validation_rmse gauge its validation RMSE at
//       publication (0 without validation split, and for "online" versions).
//   rbmrec_last_full_model_validation_rmse, rbmrec_last_full_model_epochs
//       gauge  of the newest stored "full" version (the last Train that
//       published); absent when none is stored.
//   rbmrec_training_running         gauge  1 while a Train job runs, else 0.
//   rbmrec_training_epoch, rbmrec_training_max_epochs  gauge  epochs done
//       and the epoch limit of the running job (0 when none runs).
//   rbmrec_training_elapsed_seconds gauge  run time of the running job.
//   rbmrec_training_validation_rmse gauge  validation RMSE after the
//       running job's last epoch (0 when none runs or none measured).
//   rbmrec_online_updates_total     counter online per-user updates applied
//       since the server started.
//   rbmrec_store_errors_total{code} counter failed store calls made by the
//       RPC handlers of the service (server/service/service.cc: rating writes
//       and reads, deletes, item writes, model listing, stats), by absl status
//       code; request errors the store reports (INVALID_ARGUMENT,
//       NOT_FOUND) are not counted. Store calls of training, model
//       publication and online publication are not counted (they are
//       logged).
//   rbmrec_leader                   gauge  1 when this process is the
//       leader (runs training and online updates): always on SQLite; on a
//       PostgreSQL database shared by replicas, 1 on the one leader and 0
//       on the followers (server/models/replication.h).
//   rbmrec_build_info{version}      gauge  always 1; the label is the
//       project version.
//   process_resident_memory_bytes   gauge  resident set size
//       (/proc/self/statm).
//
// Labels carry method names, status codes and the version only: never a
// token, user id, item id or other request data.
//
// Thread safety: every method of every class here is thread-safe. Updates
// of a metric (Add, Set, Observe) are lock-free atomics once its label
// combination exists; creating a new combination takes the family's mutex
// briefly. Render() holds each family's mutex only while copying its values
// and runs the collectors on the calling thread.

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace rbmrec::server {

using LabelPairs = std::vector<std::pair<std::string, std::string>>;

// One metric family as rendered: the samples of every label combination.
struct MetricSample {
  // Appended to the family name: "" for counters and gauges, "_bucket",
  // "_sum", "_count" for histograms.
  std::string suffix;
  LabelPairs labels;
  double value = 0;
};
struct MetricFamily {
  std::string name;
  std::string help;
  std::string type;  // "counter", "gauge" or "histogram"
  std::vector<MetricSample> samples;
};

// The text exposition format 0.0.4 of `families`, in order: per family a
// "# HELP name help" line (help with \ and newline escaped), a
// "# TYPE name type" line and one line per sample
// `name{label="value",...} value` (label values with \, " and newline
// escaped; no braces without labels). Values: integers print without
// exponent or decimals, others with the fewest of 15..17 significant digits
// that read back exactly; +Inf, -Inf and NaN as Prometheus spells them. A
// family without samples prints its HELP and TYPE lines only.
std::string RenderText(const std::vector<MetricFamily>& families);
// A value as RenderText prints it.
std::string FormatValue(double value);
// The Content-Type of RenderText's output.
inline constexpr char kTextContentType[] =
    "text/plain; version=0.0.4; charset=utf-8";

// The cells of one family, one per label combination, in creation order.
// Thread-safe: lookups of existing cells take a reader lock. Cells never
// move (unique_ptr), so references stay valid for the map's lifetime.
template <typename T>
class LabeledCells {
 public:
  // The cell of `label_values`, created with make() on first use.
  template <typename Make>
  T& FindOrAdd(const std::vector<std::string>& label_values, Make make)
      ABSL_LOCKS_EXCLUDED(mu_) {
    std::string key;
    for (const std::string& v : label_values) {
      key.append(v);
      key.push_back('\0');
    }
    {
      absl::ReaderMutexLock lock(&mu_);
      auto it = cells_.find(key);
      if (it != cells_.end()) return *it->second;
    }
    absl::MutexLock lock(&mu_);
    auto [it, inserted] = cells_.try_emplace(key);
    if (inserted) {
      it->second = make();
      order_.emplace_back(label_values, it->second.get());
    }
    return *it->second;
  }
  // Calls fn(label_values, cell) for every cell in creation order, under
  // the reader lock (fn must not call FindOrAdd).
  template <typename Fn>
  void ForEach(Fn fn) const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::ReaderMutexLock lock(&mu_);
    for (const auto& [values, cell] : order_) fn(values, *cell);
  }

 private:
  mutable absl::Mutex mu_;
  // Keys: the label values each followed by '\0'.
  absl::flat_hash_map<std::string, std::unique_ptr<T>> cells_
      ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<std::vector<std::string>, T*>> order_
      ABSL_GUARDED_BY(mu_);
};

// A family of counters or gauges with fixed label names. Values are doubles
// updated atomically.
class ScalarFamily {
 public:
  // `type` is "counter" or "gauge".
  ScalarFamily(std::string name, std::string help, std::string type,
               std::vector<std::string> label_names);

  // The cell of one label combination, created at 0 on first use.
  // REQUIRES: label_values.size() == label_names.size(). The reference stays
  // valid for the family's lifetime (cache it on hot paths).
  std::atomic<double>& Cell(const std::vector<std::string>& label_values);
  // Cell(...) += delta (a counter's delta must be >= 0).
  void Add(const std::vector<std::string>& label_values, double delta);
  void Set(const std::vector<std::string>& label_values, double value);

  MetricFamily Snapshot() const;

 private:
  const std::string name_, help_, type_;
  const std::vector<std::string> label_names_;
  LabeledCells<std::atomic<double>> cells_;
};

// A histogram family with fixed label names and bucket upper bounds.
class HistogramFamily {
 public:
  // `bounds`: the finite upper bounds, strictly increasing (the +Inf bucket
  // is implicit).
  HistogramFamily(std::string name, std::string help,
                  std::vector<std::string> label_names,
                  std::vector<double> bounds);

  class Cell {
   public:
    explicit Cell(const std::vector<double>* bounds);
    void Observe(double value);

   private:
    friend class HistogramFamily;
    const std::vector<double>* bounds_;
    // Per bucket (not cumulative); the last is +Inf.
    std::unique_ptr<std::atomic<uint64_t>[]> counts_;
    std::atomic<double> sum_{0};
  };
  // As ScalarFamily::Cell.
  Cell& GetCell(const std::vector<std::string>& label_values);
  void Observe(const std::vector<std::string>& label_values, double value) {
    GetCell(label_values).Observe(value);
  }

  // Cumulative _bucket samples with le="..." (+Inf last), then _sum and
  // _count.
  MetricFamily Snapshot() const;

 private:
  const std::string name_, help_;
  const std::vector<std::string> label_names_;
  const std::vector<double> bounds_;
  LabeledCells<Cell> cells_;
};

// The bucket bounds of rbmrec_rpc_duration_seconds: 100 us to 10 s, 1-2.5-5
// steps.
const std::vector<double>& RpcDurationBuckets();

// The RPC metrics (fed by server/metrics/metrics_interceptor.h).
struct RpcMetrics {
  RpcMetrics();
  ScalarFamily requests;     // rbmrec_rpc_requests_total{method,code}
  HistogramFamily duration;  // rbmrec_rpc_duration_seconds{method}
  ScalarFamily in_flight;    // rbmrec_rpc_in_flight{method}
};

// Everything /metrics shows: the RPC metrics plus collectors that add
// families at scrape time.
class MetricsRegistry {
 public:
  using Collector = std::function<void(std::vector<MetricFamily>*)>;

  RpcMetrics& rpc() { return rpc_; }
  // Adds a collector; Render() calls it on its own thread. Call before the
  // first Render().
  void AddCollector(Collector collector) ABSL_LOCKS_EXCLUDED(mu_);
  // The text format of every family.
  std::string Render() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  RpcMetrics rpc_;
  absl::Mutex mu_;
  std::vector<Collector> collectors_ ABSL_GUARDED_BY(mu_);
};

// Counts a failed store call for rbmrec_store_errors_total (a process-wide
// counter: the store belongs to the service, of which a process has one).
// OK, INVALID_ARGUMENT and NOT_FOUND are not counted. Returns `status`.
const absl::Status& NoteStoreStatus(const absl::Status& status);
// The store errors counted so far, by code name (for the collector and
// tests).
std::vector<std::pair<std::string, int64_t>> StoreErrorCounts();

// The resident set size of this process in bytes (/proc/self/statm), or -1
// when it cannot be read.
int64_t ResidentMemoryBytes();

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_METRICS_METRICS_H_
