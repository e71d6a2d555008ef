#ifndef RBMREC_SERVER_CACHES_READ_CACHES_H_
#define RBMREC_SERVER_CACHES_READ_CACHES_H_

// ReadCaches: read-through caches of the serving path, and user resolution.
//
// - Stored ratings per user (null entry = unknown user) and resolved users
//   (a named user's ratings in one model snapshot's indices, with the
//   user-based RBMs' hidden inputs for them), each bounded
//   to max_bytes of estimated entry sizes (BoundedCache).
// - Item titles (at most kMaxTitles entries; best effort).
// - The item catalogue (categories, hidden items) for Recommend's filters
//   (CatalogueCache, catalogue_cache.h), re-read after item writes.
// - The default Recommend threshold of the last model asked for
//   (DefaultThresholdIndex: a pass over every item's histogram, done once
//   per served model snapshot instead of once per call).
//
// Consistency: a write bumps a generation AFTER it commits and erases the
// entries it touched (InvalidateUsers / InvalidateTitles); a reader inserts
// what it read only if no write happened since it started reading, so the
// caches never hold stale data.
//
// Blocking: two mutexes (the user caches', the titles') guard only
// in-memory maps, never one inside the other; neither is held across a
// store call, so a serving thread waits at most for another thread's map
// operation, never behind a store operation. Title lookups take theirs
// shared, so they never wait for one another, only for a title write.
//
// Thread-safe.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/model.h"
#include "proto/rbmrec.pb.h"
#include "server/caches/bounded_cache.h"
#include "server/caches/catalogue_cache.h"
#include "store/store.h"

namespace rbmrec::server {

// A user's ratings resolved against one model snapshot.
struct ResolvedRatings {
  std::weak_ptr<const Model> model;  // the snapshot the indices refer to
  UserRatings ratings;               // model indices, sorted, one per item
  // Model indices of every item the user rated (stored or ad-hoc, including
  // ratings off the model's scale).
  std::vector<int32_t> rated_items;
  // A conditional model's extra items (VisibleSet::extra): the items the
  // user viewed (stored views) that are not in `ratings`, sorted. Empty
  // for a plain model (its views are not read).
  std::vector<int32_t> extra;
  // `ratings` with `extra` as its extra items.
  VisibleSet visible() const {
    VisibleSet v = ratings.view();
    v.extra = extra.data();
    v.n_extra = static_cast<int64_t>(extra.size());
    return v;
  }
  // model->MemberInputs(ratings): the user-based RBMs' hidden inputs, kept
  // with the ratings so a cached user costs no fold-in per request.
  std::vector<float> member_x;
  // model->MfFingerprint(): a newer snapshot with the same one (an online
  // update's) reuses member_x's factorisation part for the same ratings
  // instead of folding the user in again.
  uint64_t mf_fingerprint = 0;
};

// The user of a PredictRatings / Recommend request in one model's indices.
struct UserView {
  std::shared_ptr<const ResolvedRatings> resolved;
  // The ratings, with the conditional model's extra items.
  VisibleSet ratings() const { return resolved->visible(); }
  const std::vector<int32_t>& rated_items() const {
    return resolved->rated_items;
  }
  const float* member_x() const { return resolved->member_x.data(); }
  bool folded_in = false;
  // Index in Model::users (the item-based RBM's visible unit), -1 if none.
  int32_t model_user = -1;
};

// Whether `model`'s user-based RBMs are conditional RBMs (RbmParams::D):
// their hidden inputs also sum D over the user's extra items.
bool IsConditional(const Model& model);

// The model indices of the `viewed` items that `model` knows and `rated`
// (model indices, sorted) does not hold, sorted: a conditional model's
// extra items (VisibleSet::extra) from a user's stored views.
std::vector<int32_t> ExtraItems(const Model& model,
                                const std::vector<std::string>& viewed,
                                const std::vector<int32_t>& rated);

namespace internal {
// Estimated bytes of a cache entry (key and value).
size_t CacheBytes(
    const std::string& key,
    const std::shared_ptr<const std::vector<store::UserRating>>& ratings);
size_t CacheBytes(const std::string& key,
                  const std::shared_ptr<const ResolvedRatings>& resolved);
}  // namespace internal

class ReadCaches {
 public:
  using UserRatingsPtr = std::shared_ptr<const std::vector<store::UserRating>>;
  static constexpr size_t kMaxTitles = 1000000;

  // `store` must outlive the caches.
  ReadCaches(const store::Store* store, size_t max_bytes);

  // The user's stored ratings (null when the user is unknown). Errors: the
  // store's (other than NotFound).
  absl::StatusOr<UserRatingsPtr> UserRatings(const std::string& user);
  // Titles of `ids`, in order ("" when unknown or on a store error).
  std::vector<std::string> Titles(const std::vector<std::string>& ids);

  // The stored ratings of `user_id` merged with the ad-hoc `ratings` (a
  // later rating of an item wins), in the indices of `model`; for a
  // conditional model (RbmParams::conditional) also the user's stored
  // views as ResolvedRatings::extra. A named user
  // without ad-hoc ratings is resolved once per (user, model snapshot).
  // REQUIRES the ids of `ratings` and user_id were validated by the caller
  // (non-empty item ids, ratings on the model's scale).
  // Errors: InvalidArgument when user_id is empty and there are no ad-hoc
  // ratings; NotFound for an unknown user without ad-hoc ratings; the
  // store's.
  absl::StatusOr<UserView> Resolve(
      const std::shared_ptr<const Model>& model, const std::string& user_id,
      const google::protobuf::RepeatedPtrField<v1::ItemRating>& ratings);

  // The empty user of `model`: no ratings, no model parameters, hidden
  // inputs from the biases alone (the cold-start fallback of Recommend).
  // Pure; no store access.
  static UserView EmptyUser(const std::shared_ptr<const Model>& model);

  // After a committed (or failed) write of these users' ratings.
  void InvalidateUsers(const std::vector<std::string>& users);
  // After a write of these items' metadata: forgets their titles and
  // re-reads the catalogue (before returning; best effort, see
  // CatalogueCache::Reload).
  void InvalidateTitles(const std::vector<std::string>& items);
  // The item catalogue in `model`'s indices (CatalogueCache::For).
  std::shared_ptr<const Catalogue> CatalogueFor(
      const std::shared_ptr<const Model>& model) {
    return catalogue_.For(model);
  }
  // Forgets everything (e.g. a replica that may have missed other
  // processes' changes).
  void InvalidateAll();
  // DefaultThresholdIndex(*model) (core/recommend.h), computed once per
  // model snapshot.
  int DefaultThreshold(const std::shared_ptr<const Model>& model);
  // The ratings generation (bumped by every InvalidateUsers).
  uint64_t ratings_generation() const;

 private:
  // Appends the items `user_id` viewed (the store's views; none for an
  // unknown user) that the model knows and resolved->ratings does not hold
  // to resolved->extra, sorted. Errors: the store's (other than NotFound).
  absl::Status AddViews(const Model& model, const std::string& user_id,
                        ResolvedRatings* resolved) const;

  const store::Store* const store_;
  CatalogueCache catalogue_;  // its own lock
  mutable absl::Mutex mu_;
  BoundedCache<UserRatingsPtr, &internal::CacheBytes> users_
      ABSL_GUARDED_BY(mu_);
  BoundedCache<std::shared_ptr<const ResolvedRatings>, &internal::CacheBytes>
      resolved_ ABSL_GUARDED_BY(mu_);
  uint64_t ratings_gen_ ABSL_GUARDED_BY(mu_) = 0;
  // Titles have their own lock, taken shared by lookups (every answer
  // reads its titles), apart from the user caches' lock that every
  // Resolve takes exclusively.
  mutable absl::Mutex titles_mu_;
  absl::flat_hash_map<std::string, std::string> titles_
      ABSL_GUARDED_BY(titles_mu_);
  uint64_t titles_gen_ ABSL_GUARDED_BY(titles_mu_) = 0;
  // The model DefaultThreshold last computed for, and its answer.
  std::weak_ptr<const Model> threshold_model_ ABSL_GUARDED_BY(mu_);
  int threshold_k0_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_CACHES_READ_CACHES_H_
