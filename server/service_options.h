#ifndef RBMREC_SERVER_SERVICE_OPTIONS_H_
#define RBMREC_SERVER_SERVICE_OPTIONS_H_

// ServiceOptions: every knob of RbmrecService (server/service.h), with its
// default, and the check RbmrecService::Create makes of them. main.cc binds
// them to flags. Plain data; CheckServiceOptions is pure.

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "core/rating_scale.h"
#include "core/trainer.h"
#include "server/model_registry.h"

namespace rbmrec::server {

// Every knob of the service, with its default. main.cc binds them to flags.
struct ServiceOptions {
  // The rating scale of AddRatings (and of training).
  RatingScale scale;
  // Defaults of Train jobs; a TrainRequest's options override them.
  TrainOptions train_defaults;
  // Upper bound of a job's worker threads (0 = hardware threads).
  int max_train_threads = 0;
  // Niceness added to the training threads (Linux: per thread, inherited
  // by the job's workers), so that a full Train yields the cores to
  // serving. 0 = same priority as the RPCs; 19 = lowest.
  int train_nice = 10;
  // Admission of Train jobs: estimated peak memory of a job in bytes
  // (--max-train-memory-mb); 0 = DefaultTrainMemoryBytes(), half of
  // min(physical RAM, cgroup v2 memory.max).
  int64_t max_train_memory_bytes = 0;
  // Admission of Train jobs: estimated serialized model size in bytes
  // (--max-model-mb).
  int64_t max_model_bytes = int64_t{512} << 20;
  // Activation policy of Train requests that set none (--activate), and
  // the if-better tolerance in validation RMSE (--activate-tolerance).
  Activation activation = Activation::kIfBetter;
  double activate_tolerance = 0.005;
  // Retention, applied after every publish: the newest keep_full_models
  // "full" and keep_online_models "online" versions, plus the active and
  // pinned ones (--keep-full-models, --keep-online-models).
  int keep_full_models = 3;
  int keep_online_models = 2;
  // Byte budget of the cache of loaded non-active model versions
  // (--version-cache-mb).
  int64_t version_cache_bytes = int64_t{256} << 20;
  // Byte budget of each read cache (stored ratings, resolved users).
  int64_t read_cache_bytes = int64_t{256} << 20;
  // Rows per AddRatings batch and items per PutItems call (--max-batch).
  int max_batch_rows = 10000;
  // item_ids per PredictRatings and per DeleteRatings request
  // (--max-predict-items).
  int max_predict_items = 1000;
  // Largest Recommend n (--max-recommend-n).
  int max_recommend_n = 1000;
  // Ad-hoc `ratings` per PredictRatings / Recommend request
  // (--max-adhoc-ratings).
  int max_adhoc_ratings = 10000;
  // Recommend: rank all items by mean field first and score the best
  // max(recommend_candidates, 3n) with the requested method. 0 with EXACT =
  // exact over all items (slower: m*K*F softplus evaluations per call).
  int recommend_candidates = 30;
  // Erasure (DeleteUser): after this many erasures since the last full
  // training started, DeleteUser starts one with the training defaults, so
  // that the shared weights stop carrying the erased users
  // (--retrain-after-erasures; 0 = never: train when you choose).
  int retrain_after_erasures = 0;
  // Online per-user updates.
  bool online = true;
  float online_learning_rate = 0.01f;
  int online_steps = 1;
  double online_publish_seconds = 60;
  // Replicas (a store shared by several processes: PostgreSQL): this
  // server's address as clients and other replicas reach it (HOST:PORT),
  // recorded while it leads and returned to callers of Train /
  // CancelTraining on the other replicas (--advertise; main.cc defaults it
  // to --listen). Unused on SQLite.
  std::string advertise;
  // Least time between two online applies (OnlineUpdaterOptions); 0 applies
  // at once (tests, fuzzing).
  double online_min_apply_gap_seconds = 0.2;
};

// OK when `options` can start a service; else INVALID_ARGUMENT naming the
// knob ("max_batch_rows must be > 0", "training defaults: ...").
absl::Status CheckServiceOptions(const ServiceOptions& options);

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_SERVICE_OPTIONS_H_
