#ifndef RBMREC_SERVER_SERVICE_SERVICE_OPTIONS_H_
#define RBMREC_SERVER_SERVICE_SERVICE_OPTIONS_H_

// ServiceOptions: every knob of RbmrecService (server/service/service.h), with
// its default, and the check RbmrecService::Create makes of them. main.cc binds
// them to flags. Plain data; CheckServiceOptions is pure.

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "core/rating_scale.h"
#include "core/trainer.h"
#include "server/models/model_registry.h"
#include "server/models/online_updater.h"
#include "server/models/training_jobs.h"
#include "server/service/request_plan.h"

namespace rbmrec::server {

// Every knob of the service, with its default: the service's own, and the
// option structs of its parts, each documented (with its flag) in the part's
// header. main.cc binds them to flags.
// Recommend's answer for a user without ratings (the cold start).
enum class ColdStart {
  // The items with the most training ratings that pass the request's
  // filters, best first (FALLBACK_POPULAR).
  kPopular,
  // The model's answer for an empty user, ranked as the request asks
  // (FALLBACK_EMPTY_USER).
  kEmptyUser,
};

struct ServiceOptions {
  // The rating scale of AddRatings and of training (training.scale is set
  // from it).
  RatingScale scale;
  // Defaults of Train jobs; a TrainRequest's options override them. Their
  // seed also seeds the online updater (online.seed is set from it).
  TrainOptions train_defaults;
  // Upper bound of a job's worker threads (0 = hardware threads).
  int max_train_threads = 0;
  // Size limits of every request (server/service/request_plan.h).
  RequestLimits limits;
  // Activation, retention and the version cache
  // (server/models/model_registry.h).
  RegistryOptions registry;
  // Admission and priority of Train jobs (server/models/training_jobs.h).
  TrainingJobsOptions training;
  // Online per-user updates (server/models/online_updater.h).
  OnlineUpdaterOptions online;
  // Byte budget of each read cache (stored ratings, resolved users;
  // server/caches/read_caches.h).
  int64_t read_cache_bytes = int64_t{256} << 20;
  // Recommend: rank all items by mean field first and score the best
  // max(recommend_candidates, 3n) with the requested method. 0 with EXACT =
  // exact over all items (slower: m*K*F softplus evaluations per call).
  int recommend_candidates = 30;
  // The cold start (--cold-start popular|empty-user). `rbmrec-eval --topn
  // 10 --cold-start` measures both on a split (docs/operations.md): the
  // most-popular list ranks better for users without ratings, so it is the
  // default.
  ColdStart cold_start = ColdStart::kPopular;
  // Erasure (DeleteUser): after this many erasures since the last full
  // training started, DeleteUser starts one with the training defaults, so
  // that the shared weights stop carrying the erased users
  // (--retrain-after-erasures; 0 = never: train when you choose).
  int retrain_after_erasures = 0;
  // Replicas (a store shared by several processes: PostgreSQL): this
  // server's address as clients and other replicas reach it (HOST:PORT),
  // recorded while it leads and returned to callers of Train /
  // CancelTraining on the other replicas (--advertise; main.cc defaults it
  // to --listen). Unused on SQLite.
  std::string advertise;
};

// OK when `options` can start a service; else INVALID_ARGUMENT naming the
// knob ("max_batch_rows must be > 0", "training defaults: ...").
absl::Status CheckServiceOptions(const ServiceOptions& options);

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_SERVICE_SERVICE_OPTIONS_H_
