#include "server/metrics.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "proto/rbmrec.pb.h"
#include "server/service.h"

#ifndef RBMREC_VERSION
#define RBMREC_VERSION "unknown"
#endif

namespace rbmrec::server {
namespace {

void AtomicAdd(std::atomic<double>* cell, double delta) {
  double old = cell->load(std::memory_order_relaxed);
  while (!cell->compare_exchange_weak(old, old + delta,
                                      std::memory_order_relaxed)) {
  }
}

std::string JoinKey(const std::vector<std::string>& values) {
  return absl::StrJoin(values, absl::string_view("\0", 1));
}

LabelPairs Pairs(const std::vector<std::string>& names,
                 const std::vector<std::string>& values) {
  LabelPairs pairs;
  for (size_t i = 0; i < names.size(); ++i) {
    pairs.emplace_back(names[i], values[i]);
  }
  return pairs;
}

// Label values: \ -> \\, " -> \", newline -> \n. HELP text: the same
// without the quote.
std::string Escape(absl::string_view text, bool quote) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    return absl::StrFormat("%.0f", value);
  }
  // The shortest of 15..17 significant digits that reads back exactly.
  for (int digits = 15; digits < 17; ++digits) {
    std::string text = absl::StrFormat("%.*g", digits, value);
    double back = 0;
    if (absl::SimpleAtod(text, &back) && back == value) return text;
  }
  return absl::StrFormat("%.17g", value);
}

std::string RenderText(const std::vector<MetricFamily>& families) {
  std::string out;
  for (const MetricFamily& f : families) {
    absl::StrAppend(&out, "# HELP ", f.name, " ", Escape(f.help, false), "\n",
                    "# TYPE ", f.name, " ", f.type, "\n");
    for (const MetricSample& s : f.samples) {
      absl::StrAppend(&out, f.name, s.suffix);
      if (!s.labels.empty()) {
        out += '{';
        for (size_t i = 0; i < s.labels.size(); ++i) {
          if (i > 0) out += ',';
          absl::StrAppend(&out, s.labels[i].first, "=\"",
                          Escape(s.labels[i].second, true), "\"");
        }
        out += '}';
      }
      absl::StrAppend(&out, " ", FormatValue(s.value), "\n");
    }
  }
  return out;
}

// --- ScalarFamily -----------------------------------------------------------

ScalarFamily::ScalarFamily(std::string name, std::string help, std::string type,
                           std::vector<std::string> label_names)
    : name_(std::move(name)),
      help_(std::move(help)),
      type_(std::move(type)),
      label_names_(std::move(label_names)) {}

std::atomic<double>& ScalarFamily::Cell(
    const std::vector<std::string>& label_values) {
  const std::string key = JoinKey(label_values);
  {
    absl::ReaderMutexLock lock(&mu_);
    auto it = cells_.find(key);
    if (it != cells_.end()) return *it->second;
  }
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = cells_.try_emplace(key);
  if (inserted) {
    it->second = std::make_unique<std::atomic<double>>(0.0);
    order_.emplace_back(label_values, it->second.get());
  }
  return *it->second;
}

void ScalarFamily::Add(const std::vector<std::string>& label_values,
                       double delta) {
  AtomicAdd(&Cell(label_values), delta);
}

void ScalarFamily::Set(const std::vector<std::string>& label_values,
                       double value) {
  Cell(label_values).store(value, std::memory_order_relaxed);
}

MetricFamily ScalarFamily::Snapshot() const {
  MetricFamily f{name_, help_, type_, {}};
  absl::ReaderMutexLock lock(&mu_);
  f.samples.reserve(order_.size());
  for (const auto& [values, cell] : order_) {
    f.samples.push_back({"", Pairs(label_names_, values),
                         cell->load(std::memory_order_relaxed)});
  }
  return f;
}

// --- HistogramFamily --------------------------------------------------------

HistogramFamily::Cell::Cell(const std::vector<double>* bounds)
    : bounds_(bounds), counts_(new std::atomic<uint64_t>[bounds->size() + 1]) {
  for (size_t i = 0; i <= bounds->size(); ++i) counts_[i].store(0);
}

void HistogramFamily::Cell::Observe(double value) {
  size_t i = 0;
  while (i < bounds_->size() && value > (*bounds_)[i]) ++i;
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  AtomicAdd(&sum_, value);
}

HistogramFamily::HistogramFamily(std::string name, std::string help,
                                 std::vector<std::string> label_names,
                                 std::vector<double> bounds)
    : name_(std::move(name)),
      help_(std::move(help)),
      label_names_(std::move(label_names)),
      bounds_(std::move(bounds)) {}

HistogramFamily::Cell& HistogramFamily::GetCell(
    const std::vector<std::string>& label_values) {
  const std::string key = JoinKey(label_values);
  {
    absl::ReaderMutexLock lock(&mu_);
    auto it = cells_.find(key);
    if (it != cells_.end()) return *it->second;
  }
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = cells_.try_emplace(key);
  if (inserted) {
    it->second = std::make_unique<Cell>(&bounds_);
    order_.emplace_back(label_values, it->second.get());
  }
  return *it->second;
}

MetricFamily HistogramFamily::Snapshot() const {
  MetricFamily f{name_, help_, "histogram", {}};
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [values, cell] : order_) {
    const LabelPairs labels = Pairs(label_names_, values);
    // Read the counts once; _count is the cumulative total, so the +Inf
    // bucket and _count agree even while calls are observed concurrently.
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= bounds_.size(); ++i) {
      cumulative += cell->counts_[i].load(std::memory_order_relaxed);
      LabelPairs with_le = labels;
      with_le.emplace_back(
          "le", i < bounds_.size() ? FormatValue(bounds_[i]) : "+Inf");
      f.samples.push_back(
          {"_bucket", std::move(with_le), static_cast<double>(cumulative)});
    }
    f.samples.push_back(
        {"_sum", labels, cell->sum_.load(std::memory_order_relaxed)});
    f.samples.push_back({"_count", labels, static_cast<double>(cumulative)});
  }
  return f;
}

const std::vector<double>& RpcDurationBuckets() {
  static const std::vector<double> kBuckets = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
      0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
  return kBuckets;
}

RpcMetrics::RpcMetrics()
    : requests("rbmrec_rpc_requests_total",
               "Finished gRPC calls by method (short name) and status code.",
               "counter", {"method", "code"}),
      duration("rbmrec_rpc_duration_seconds",
               "Time from a call's start to the server sending its status, by "
               "method.",
               {"method"}, RpcDurationBuckets()),
      in_flight("rbmrec_rpc_in_flight",
                "gRPC calls started and not finished, by method.", "gauge",
                {"method"}) {}

// --- MetricsRegistry --------------------------------------------------------

void MetricsRegistry::AddCollector(Collector collector) {
  absl::MutexLock lock(&mu_);
  collectors_.push_back(std::move(collector));
}

std::string MetricsRegistry::Render() {
  std::vector<MetricFamily> families;
  families.push_back(rpc_.requests.Snapshot());
  families.push_back(rpc_.duration.Snapshot());
  families.push_back(rpc_.in_flight.Snapshot());
  std::vector<Collector> collectors;
  {
    absl::MutexLock lock(&mu_);
    collectors = collectors_;
  }
  for (const Collector& c : collectors) c(&families);
  return RenderText(families);
}

// --- Store errors -----------------------------------------------------------

namespace {

// One counter per absl status code (0..16).
constexpr int kCodes = 17;
std::array<std::atomic<int64_t>, kCodes>& StoreErrorCells() {
  static std::array<std::atomic<int64_t>, kCodes> cells{};
  return cells;
}

}  // namespace

const absl::Status& NoteStoreStatus(const absl::Status& status) {
  const absl::StatusCode code = status.code();
  if (code == absl::StatusCode::kOk ||
      code == absl::StatusCode::kInvalidArgument ||
      code == absl::StatusCode::kNotFound) {
    return status;
  }
  int i = static_cast<int>(code);
  if (i < 0 || i >= kCodes) i = static_cast<int>(absl::StatusCode::kUnknown);
  StoreErrorCells()[i].fetch_add(1, std::memory_order_relaxed);
  return status;
}

std::vector<std::pair<std::string, int64_t>> StoreErrorCounts() {
  std::vector<std::pair<std::string, int64_t>> out;
  for (int i = 0; i < kCodes; ++i) {
    const int64_t n = StoreErrorCells()[i].load(std::memory_order_relaxed);
    if (n == 0) continue;
    std::string name =
        absl::StatusCodeToString(static_cast<absl::StatusCode>(i));
    out.emplace_back(std::move(name), n);
  }
  return out;
}

int64_t ResidentMemoryBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  long long size = 0, resident = 0;
  const int n = std::fscanf(f, "%lld %lld", &size, &resident);
  std::fclose(f);
  if (n != 2) return -1;
  return static_cast<int64_t>(resident) * sysconf(_SC_PAGESIZE);
}

// --- The service collector --------------------------------------------------

namespace {

MetricFamily Gauge(std::string name, std::string help, double value) {
  return {std::move(name), std::move(help), "gauge", {{"", {}, value}}};
}

class ServiceCollector {
 public:
  explicit ServiceCollector(RbmrecService* service) : service_(service) {}

  void Collect(std::vector<MetricFamily>* out) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    const auto now = std::chrono::steady_clock::now();
    const int64_t active = service_->active_version();
    // Stale, or a new active version whose publication time is not known.
    if (!stats_ ||
        now - read_at_ > std::chrono::duration<double>(kStatsCacheSeconds) ||
        (active != 0 && (!active_info_ || active_info_->version() != active))) {
      Refresh();
      read_at_ = now;
    }
    // Cheap reads from memory, current at every scrape.
    out->push_back(Gauge("rbmrec_serving",
                         "1 while a model serves predictions (readiness of "
                         "rbmrec.v1.Rbmrec), else 0.",
                         service_->Serving() ? 1 : 0));
    out->push_back(Gauge("rbmrec_active_model_version",
                         "The model version serving model_version = 0 "
                         "requests (0: none).",
                         static_cast<double>(active)));
    if (stats_) {
      const v1::GetStatsResponse& s = *stats_;
      out->push_back(Gauge("rbmrec_ratings_stored", "Stored ratings.",
                           static_cast<double>(s.ratings())));
      out->push_back(Gauge("rbmrec_users_stored", "Stored users.",
                           static_cast<double>(s.users())));
      out->push_back(Gauge("rbmrec_items_stored", "Stored items.",
                           static_cast<double>(s.items())));
      out->push_back(Gauge("rbmrec_model_versions_stored",
                           "Stored model versions (after retention).",
                           static_cast<double>(s.model_versions())));
      out->push_back(Gauge("rbmrec_database_bytes",
                           "Size of the database on disk in bytes (0: "
                           "in-memory).",
                           static_cast<double>(s.database_bytes())));
      const v1::TrainingStatus& t = s.training();
      out->push_back(Gauge("rbmrec_training_running",
                           "1 while a Train job runs, else 0.",
                           t.running() ? 1 : 0));
      out->push_back(Gauge("rbmrec_training_epoch",
                           "Epochs completed by the running Train job (0 "
                           "when none runs).",
                           t.epoch()));
      out->push_back(Gauge("rbmrec_training_max_epochs",
                           "Epoch limit of the running Train job (0 when "
                           "none runs).",
                           t.max_epochs()));
      out->push_back(Gauge("rbmrec_training_elapsed_seconds",
                           "Run time of the running Train job (0 when none "
                           "runs).",
                           t.elapsed_seconds()));
      out->push_back({"rbmrec_online_updates_total",
                      "Online per-user model updates applied since the "
                      "server started.",
                      "counter",
                      {{"", {}, static_cast<double>(s.online_updates())}}});
    }
    if (active_info_ && active_info_->version() == active) {
      const double age =
          std::chrono::duration<double>(
              std::chrono::system_clock::now().time_since_epoch())
              .count() -
          static_cast<double>(active_info_->created_unix_ms()) / 1000.0;
      out->push_back(Gauge("rbmrec_active_model_age_seconds",
                           "Seconds since the active model version was "
                           "published.",
                           age));
      out->push_back(Gauge("rbmrec_active_model_validation_rmse",
                           "Validation RMSE of the active model version at "
                           "publication (0: no validation split, or an "
                           "online version).",
                           active_info_->validation_rmse()));
    }
    if (last_full_) {
      out->push_back(Gauge("rbmrec_last_full_model_validation_rmse",
                           "Validation RMSE of the newest stored full "
                           "(Train) model version.",
                           last_full_->validation_rmse()));
      out->push_back(Gauge("rbmrec_last_full_model_epochs",
                           "Epochs of the newest stored full (Train) model "
                           "version.",
                           last_full_->epochs()));
    }
    MetricFamily errors{"rbmrec_store_errors_total",
                        "Failed store calls of the service's RPC handlers, "
                        "by status code (request errors excluded).",
                        "counter",
                        {}};
    for (const auto& [code, n] : StoreErrorCounts()) {
      errors.samples.push_back({"", {{"code", code}}, static_cast<double>(n)});
    }
    out->push_back(std::move(errors));
    out->push_back(Gauge("rbmrec_leader",
                         "1 when this process runs training and online "
                         "updates (the leader of the replicas sharing its "
                         "database; always 1 on SQLite), else 0.",
                         service_->IsLeader() ? 1 : 0));
    out->push_back({"rbmrec_build_info",
                    "Always 1; the version label is the rbmrec version.",
                    "gauge",
                    {{"", {{"version", RBMREC_VERSION}}, 1}}});
    const int64_t rss = ResidentMemoryBytes();
    if (rss >= 0) {
      out->push_back(Gauge("process_resident_memory_bytes",
                           "Resident memory size in bytes.",
                           static_cast<double>(rss)));
    }
  }

 private:
  // The store reads: GetStats and ListModels (metadata only).
  void Refresh() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::StatusOr<v1::GetStatsResponse> stats =
        service_->GetStats(v1::GetStatsRequest());
    if (stats.ok()) {
      stats_ = std::move(*stats);
    } else {
      stats_.reset();
    }
    absl::StatusOr<v1::ListModelsResponse> models =
        service_->ListModels(v1::ListModelsRequest());
    active_info_.reset();
    last_full_.reset();
    if (!models.ok()) return;
    for (const v1::ModelInfo& m : models->models()) {  // newest first
      if (m.active() && !active_info_) active_info_ = m;
      if (m.kind() == "full" && !last_full_) last_full_ = m;
    }
  }

  RbmrecService* const service_;
  absl::Mutex mu_;
  std::chrono::steady_clock::time_point read_at_ ABSL_GUARDED_BY(mu_);
  std::optional<v1::GetStatsResponse> stats_ ABSL_GUARDED_BY(mu_);
  std::optional<v1::ModelInfo> active_info_ ABSL_GUARDED_BY(mu_);
  std::optional<v1::ModelInfo> last_full_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

void AddServiceCollector(MetricsRegistry* registry, RbmrecService* service) {
  auto collector = std::make_shared<ServiceCollector>(service);
  registry->AddCollector(
      [collector](std::vector<MetricFamily>* out) { collector->Collect(out); });
}

}  // namespace rbmrec::server
