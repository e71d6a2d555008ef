#include "server/service/service_metrics.h"

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "proto/rbmrec.pb.h"

#ifndef RBMREC_VERSION
#define RBMREC_VERSION "unknown"
#endif

namespace rbmrec::server {

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
      out->push_back(Gauge("rbmrec_views_stored",
                           "Stored views (interactions without a rating).",
                           static_cast<double>(s.views())));
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
      out->push_back(Gauge("rbmrec_training_validation_rmse",
                           "Validation RMSE after the running Train job's "
                           "last epoch (0 when none runs, before its first "
                           "epoch, without validation, and while it trains "
                           "the rated RBM).",
                           t.validation_rmse()));
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
