#ifndef RBMREC_SERVER_SERVICE_SIMILAR_H_
#define RBMREC_SERVER_SERVICE_SIMILAR_H_

// SimilarItems: the request's checks, the per-model similarity index
// (core/similar.h) and the answer. The service resolves the model and the
// user; this module does the rest.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/item_filter.h"
#include "core/model.h"
#include "core/similar.h"
#include "proto/rbmrec.pb.h"
#include "server/caches/read_caches.h"
#include "server/service/request_plan.h"

namespace rbmrec::server {

// The similarity index of recent model snapshots. An index is built on the
// first SimilarItems call that uses a snapshot (O(items x hidden): about a
// millisecond and 3 MB at ML-1M, less than one exact Recommend) and kept
// while its snapshot is one of the kKeep most recently used. Thread-safe;
// builds run outside the lock (two first callers may both build; one
// result is kept).
class SimilarIndexCache {
 public:
  static constexpr size_t kKeep = 4;

  // The index of `model`. Errors: ItemSimilarity::Build's
  // (FailedPrecondition without a rated RBM).
  absl::StatusOr<std::shared_ptr<const ItemSimilarity>> For(
      const std::shared_ptr<const Model>& model) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    std::weak_ptr<const Model> model;
    const Model* key = nullptr;
    std::shared_ptr<const ItemSimilarity> index;
  };
  absl::Mutex mu_;
  std::vector<Entry> entries_ ABSL_GUARDED_BY(mu_);  // most recent first
};

// INVALID_ARGUMENT (no item_ids, negative n) or RESOURCE_EXHAUSTED with
// reason LIMIT_EXCEEDED (item_ids or exclude_item_ids over
// limits.max_predict_items, n over limits.max_recommend_n), each naming the
// field.
absl::Status CheckSimilar(const v1::SimilarItemsRequest& request,
                          const RequestLimits& limits);

// The answer of a checked request on `model` (served as `version`) with
// `index` = the model's index; `rated` the user's rated items (model
// indices; empty without a user), `catalogue` the model's (hidden items and
// categories); titles from `caches`.
// NOT_FOUND naming a query item the model does not know.
absl::StatusOr<v1::SimilarItemsResponse> AnswerSimilar(
    const v1::SimilarItemsRequest& request, const Model& model, int64_t version,
    const ItemSimilarity& index, const std::vector<int32_t>& rated,
    const Catalogue& catalogue, ReadCaches& caches);

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_SERVICE_SIMILAR_H_
