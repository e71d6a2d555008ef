#ifndef RBMREC_SERVER_CACHES_CATALOGUE_CACHE_H_
#define RBMREC_SERVER_CACHES_CATALOGUE_CACHE_H_

// CatalogueCache: the stored item catalogue (categories, hidden items) as an
// immutable Catalogue (core/item_filter.h) in the served model's indices,
// for Recommend's filters.
//
// Copy-on-write: Reload() reads the store's catalogue outside the lock and
// swaps the new rows in; For() hands out a shared immutable snapshot, built
// once per (model snapshot, reload) outside the lock. The mutex guards only
// pointer swaps, so serving never waits behind a store read or a build.
// One built catalogue is kept (the last model asked for); another model
// version gets its own, built per call.
//
// Thread-safe.

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "core/item_filter.h"
#include "core/model.h"
#include "store/store.h"

namespace rbmrec::server {

class CatalogueCache {
 public:
  // `store` must outlive the cache. Nothing is read until Reload or For.
  explicit CatalogueCache(const store::Store* store) : store_(store) {}

  // Re-reads the store's catalogue (Store::ReadCatalogue) and swaps it in.
  // Call after a write of item metadata commits (or fails). On a store
  // error the previous rows stay and the next For() retries the read.
  absl::Status Reload();

  // The catalogue in `model`'s indices (never null). REQUIRES model is not
  // null.
  std::shared_ptr<const Catalogue> For(
      const std::shared_ptr<const Model>& model);

 private:
  using Rows = std::vector<CatalogueEntry>;
  // built_ when it is `model`'s catalogue of the current rows, else null.
  std::shared_ptr<const Catalogue> BuiltFor(
      const std::shared_ptr<const Model>& model) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  const store::Store* const store_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const Rows> rows_ ABSL_GUARDED_BY(mu_);
  bool stale_ ABSL_GUARDED_BY(mu_) = true;      // no successful read since
  uint64_t reloads_ ABSL_GUARDED_BY(mu_) = 0;   // Reload calls started
  uint64_t rows_gen_ ABSL_GUARDED_BY(mu_) = 0;  // the Reload rows_ came from
  std::weak_ptr<const Model> built_model_ ABSL_GUARDED_BY(mu_);
  uint64_t built_gen_ ABSL_GUARDED_BY(mu_) = 0;
  std::shared_ptr<const Catalogue> built_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_CACHES_CATALOGUE_CACHE_H_
