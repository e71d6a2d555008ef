#ifndef RBMREC_SERVER_SERVICE_SIMILAR_H_
#define RBMREC_SERVER_SERVICE_SIMILAR_H_

// SimilarItems: the request's checks, the per-model similarity index
// (core/similar.h) and the answer. The service resolves the model and the
// user; this module does the rest.

#include <atomic>
#include <memory>
#include <string>
#include <thread>
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
#include "server/caches/scratch_pool.h"
#include "server/service/request_plan.h"

namespace rbmrec::server {

// One snapshot's similarity data: the index, and its neighbour lists
// (core/similar.h) once they are built (null until then, and for models
// over SimilarIndexCache::kMaxListItems items).
struct SimilarIndex {
  std::shared_ptr<const ItemSimilarity> index;
  std::shared_ptr<const NeighbourLists> lists;
};

// The similarity index of recent model snapshots. An index is built on the
// first SimilarItems call that uses a snapshot (O(items x hidden): about a
// millisecond and 3 MB at ML-1M, less than one exact Recommend) and kept
// while its snapshot is one of the kKeep most recently used. Its neighbour
// lists (NeighbourLists::kDefaultLength per item: 3 MB and about a second
// of one core at ML-1M) are then built on a background thread, one snapshot
// at a time, off the RPC threads; until they are ready, queries score every
// item (the same answers). Also leases the queries' scratch buffers.
// Thread-safe; index builds run outside the lock (two first callers may
// both build; one result is kept). The destructor stops and joins the
// background build.
class SimilarIndexCache {
 public:
  static constexpr size_t kKeep = 4;
  // Larger models get no neighbour lists (their build grows with items^2).
  static constexpr int32_t kMaxListItems = 20000;

  SimilarIndexCache() = default;
  SimilarIndexCache(const SimilarIndexCache&) = delete;
  SimilarIndexCache& operator=(const SimilarIndexCache&) = delete;
  ~SimilarIndexCache();

  // The index of `model`, with its lists when built; starts building them
  // when none is being built. Errors: ItemSimilarity::Build's
  // (FailedPrecondition without a rated RBM).
  absl::StatusOr<SimilarIndex> For(const std::shared_ptr<const Model>& model)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Blocks until no list build is running (tests).
  void WaitForLists() ABSL_LOCKS_EXCLUDED(mu_);

  // Buffers for one query.
  ScratchPool<SimilarScratch>::Lease Scratch() { return scratch_.Acquire(); }

 private:
  struct Entry {
    std::weak_ptr<const Model> model;
    const Model* key = nullptr;
    std::shared_ptr<const ItemSimilarity> index;
    std::shared_ptr<const NeighbourLists> lists;
  };
  // Starts the lists of `index` on builder_ unless a build runs or the
  // model is too large.
  void MaybeBuildListsLocked(const std::shared_ptr<const ItemSimilarity>& index)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  std::vector<Entry> entries_ ABSL_GUARDED_BY(mu_);  // most recent first
  bool building_ ABSL_GUARDED_BY(mu_) = false;
  std::thread builder_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> stop_{false};
  ScratchPool<SimilarScratch> scratch_{16};
};

// INVALID_ARGUMENT (no item_ids, negative n) or RESOURCE_EXHAUSTED with
// reason LIMIT_EXCEEDED (item_ids or exclude_item_ids over
// limits.max_predict_items, n over limits.max_recommend_n), each naming the
// field.
absl::Status CheckSimilar(const v1::SimilarItemsRequest& request,
                          const RequestLimits& limits);

// The answer of a checked request on `model` (served as `version`) with
// `index` = the model's index and lists; `rated` the user's rated items
// (model indices; empty without a user), `catalogue` the model's (hidden
// items and categories); titles from `caches`; `scratch` for the query.
// NOT_FOUND naming a query item the model does not know.
absl::StatusOr<v1::SimilarItemsResponse> AnswerSimilar(
    const v1::SimilarItemsRequest& request, const Model& model, int64_t version,
    const SimilarIndex& index, const std::vector<int32_t>& rated,
    const Catalogue& catalogue, ReadCaches& caches, SimilarScratch* scratch);

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_SERVICE_SIMILAR_H_
