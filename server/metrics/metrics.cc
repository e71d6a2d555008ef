#include "server/metrics/metrics.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace rbmrec::server {
namespace {

void AtomicAdd(std::atomic<double>* cell, double delta) {
  double old = cell->load(std::memory_order_relaxed);
  while (!cell->compare_exchange_weak(old, old + delta,
                                      std::memory_order_relaxed)) {
  }
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
  return cells_.FindOrAdd(
      label_values, [] { return std::make_unique<std::atomic<double>>(0.0); });
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
  cells_.ForEach([&](const std::vector<std::string>& values,
                     const std::atomic<double>& cell) {
    f.samples.push_back({"", Pairs(label_names_, values),
                         cell.load(std::memory_order_relaxed)});
  });
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
  return cells_.FindOrAdd(label_values,
                          [this] { return std::make_unique<Cell>(&bounds_); });
}

MetricFamily HistogramFamily::Snapshot() const {
  MetricFamily f{name_, help_, "histogram", {}};
  cells_.ForEach([&](const std::vector<std::string>& values, const Cell& cell) {
    const LabelPairs labels = Pairs(label_names_, values);
    // Read the counts once; _count is the cumulative total, so the +Inf
    // bucket and _count agree even while calls are observed concurrently.
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= bounds_.size(); ++i) {
      cumulative += cell.counts_[i].load(std::memory_order_relaxed);
      LabelPairs with_le = labels;
      with_le.emplace_back(
          "le", i < bounds_.size() ? FormatValue(bounds_[i]) : "+Inf");
      f.samples.push_back(
          {"_bucket", std::move(with_le), static_cast<double>(cumulative)});
    }
    f.samples.push_back(
        {"_sum", labels, cell.sum_.load(std::memory_order_relaxed)});
    f.samples.push_back({"_count", labels, static_cast<double>(cumulative)});
  });
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

}  // namespace rbmrec::server
