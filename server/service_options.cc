#include "server/service_options.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace rbmrec::server {

absl::Status CheckServiceOptions(const ServiceOptions& options) {
  auto positive = [](absl::string_view name, double v) {
    return v > 0
               ? absl::OkStatus()
               : absl::InvalidArgumentError(absl::StrCat(name, " must be > 0"));
  };
  for (absl::Status s :
       {positive("max_batch_rows", options.max_batch_rows),
        positive("max_predict_items", options.max_predict_items),
        positive("max_recommend_n", options.max_recommend_n),
        positive("max_adhoc_ratings", options.max_adhoc_ratings),
        positive("max_model_bytes",
                 static_cast<double>(options.max_model_bytes)),
        positive("online_learning_rate", options.online_learning_rate),
        positive("online_steps", options.online_steps),
        positive("online_publish_seconds", options.online_publish_seconds)}) {
    if (!s.ok()) return s;
  }
  if (options.max_train_threads < 0 || options.max_train_memory_bytes < 0 ||
      options.keep_full_models < 0 || options.keep_online_models < 0 ||
      options.version_cache_bytes < 0 || options.read_cache_bytes < 0 ||
      !(options.activate_tolerance >= 0) ||
      !(options.online_min_apply_gap_seconds >= 0)) {
    return absl::InvalidArgumentError(
        "max_train_threads, max_train_memory_bytes, keep_full_models, "
        "keep_online_models, version_cache_bytes, read_cache_bytes, "
        "activate_tolerance and online_min_apply_gap_seconds must be >= 0");
  }
  if (absl::Status s = ValidateTrainOptions(options.train_defaults); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("training defaults: ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace rbmrec::server
