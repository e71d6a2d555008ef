#include "server/caches/catalogue_cache.h"

#include <utility>

namespace rbmrec::server {

absl::Status CatalogueCache::Reload() {
  uint64_t gen = 0;
  {
    absl::MutexLock lock(&mu_);
    gen = ++reloads_;
  }
  absl::StatusOr<std::vector<store::CatalogueRow>> read =
      store_->ReadCatalogue();
  absl::MutexLock lock(&mu_);
  if (!read.ok()) {
    stale_ = true;
    return read.status();
  }
  // A later Reload started meanwhile: its read is at least as new.
  if (gen < rows_gen_) return absl::OkStatus();
  auto rows = std::make_shared<Rows>();
  rows->reserve(read->size());
  for (store::CatalogueRow& r : *read) {
    rows->push_back(
        CatalogueEntry{std::move(r.item), std::move(r.categories), r.hidden});
  }
  rows_ = std::move(rows);
  rows_gen_ = gen;
  stale_ = false;
  return absl::OkStatus();
}

std::shared_ptr<const Catalogue> CatalogueCache::BuiltFor(
    const std::shared_ptr<const Model>& model) const {
  if (built_ != nullptr && built_gen_ == rows_gen_ &&
      built_model_.lock() == model) {
    return built_;
  }
  return nullptr;
}

std::shared_ptr<const Catalogue> CatalogueCache::For(
    const std::shared_ptr<const Model>& model) {
  bool stale = false;
  {
    // The common case: the catalogue of this model and these rows is built.
    absl::ReaderMutexLock lock(&mu_);
    stale = stale_;
    if (!stale) {
      if (std::shared_ptr<const Catalogue> built = BuiltFor(model)) {
        return built;
      }
    }
  }
  if (stale) (void)Reload();  // best effort: an empty catalogue on error
  std::shared_ptr<const Rows> rows;
  uint64_t gen = 0;
  {
    absl::ReaderMutexLock lock(&mu_);
    if (std::shared_ptr<const Catalogue> built = BuiltFor(model)) return built;
    rows = rows_;
    gen = rows_gen_;
  }
  auto built = std::make_shared<const Catalogue>(
      *model, rows == nullptr ? absl::Span<const CatalogueEntry>()
                              : absl::Span<const CatalogueEntry>(*rows));
  absl::MutexLock lock(&mu_);
  if (gen == rows_gen_) {
    built_ = built;
    built_model_ = model;
    built_gen_ = gen;
  }
  return built;
}

}  // namespace rbmrec::server
