#include "server/service/service_options.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace rbmrec::server {

absl::Status CheckServiceOptions(const ServiceOptions& options) {
  auto positive = [](absl::string_view name, double v) {
    return v > 0
               ? absl::OkStatus()
               : absl::InvalidArgumentError(absl::StrCat(name, " must be > 0"));
  };
  const RequestLimits& limits = options.limits;
  for (absl::Status s :
       {positive("limits.max_batch_rows", limits.max_batch_rows),
        positive("limits.max_predict_items", limits.max_predict_items),
        positive("limits.max_recommend_n", limits.max_recommend_n),
        positive("limits.max_adhoc_ratings", limits.max_adhoc_ratings),
        positive("limits.max_filter_items", limits.max_filter_items),
        positive("limits.max_categories", limits.max_categories),
        positive("limits.max_bulk_users", limits.max_bulk_users),
        positive("training.max_model_bytes",
                 static_cast<double>(options.training.max_model_bytes)),
        positive("online.learning_rate", options.online.learning_rate),
        positive("online.steps", options.online.steps),
        positive("online.publish_seconds", options.online.publish_seconds)}) {
    if (!s.ok()) return s;
  }
  if (options.max_train_threads < 0 ||
      options.training.max_train_memory_bytes < 0 ||
      options.registry.keep_full < 0 || options.registry.keep_online < 0 ||
      options.read_cache_bytes < 0 ||
      !(options.registry.activate_tolerance >= 0) ||
      !(options.online.min_apply_gap_seconds >= 0)) {
    return absl::InvalidArgumentError(
        "max_train_threads, training.max_train_memory_bytes, "
        "registry.keep_full, registry.keep_online, read_cache_bytes, "
        "registry.activate_tolerance and online.min_apply_gap_seconds must be "
        ">= 0");
  }
  if (absl::Status s = ValidateTrainOptions(options.train_defaults); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("training defaults: ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace rbmrec::server
