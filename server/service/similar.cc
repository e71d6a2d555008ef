#include "server/service/similar.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/service/request_checks.h"

namespace rbmrec::server {
namespace {

// INVALID_ARGUMENT naming `field`[i] when an id of `ids` is not a valid id.
absl::Status CheckIds(
    const google::protobuf::RepeatedPtrField<std::string>& ids,
    absl::string_view field) {
  for (int i = 0; i < ids.size(); ++i) {
    if (std::string why = IdProblem(ids[i], "item_id"); !why.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, "[", i, "]: ", why));
    }
  }
  return absl::OkStatus();
}

}  // namespace

SimilarIndexCache::~SimilarIndexCache() {
  stop_.store(true);
  std::thread builder;
  {
    absl::MutexLock lock(&mu_);
    builder = std::move(builder_);
  }
  if (builder.joinable()) builder.join();
}

void SimilarIndexCache::MaybeBuildListsLocked(
    const std::shared_ptr<const ItemSimilarity>& index) {
  if (building_ || stop_.load() || index->num_items() > kMaxListItems) return;
  // A finished builder has left mu_ for good: joining it is quick.
  if (builder_.joinable()) builder_.join();
  building_ = true;
  builder_ = std::thread([this, index] {
    std::optional<NeighbourLists> built =
        NeighbourLists::Build(*index, NeighbourLists::kDefaultLength, &stop_);
    std::shared_ptr<const NeighbourLists> lists;
    if (built.has_value()) {
      lists = std::make_shared<const NeighbourLists>(std::move(*built));
    }
    absl::MutexLock lock(&mu_);
    for (Entry& e : entries_) {
      if (e.index == index) e.lists = lists;
    }
    building_ = false;
  });
}

absl::StatusOr<SimilarIndex> SimilarIndexCache::For(
    const std::shared_ptr<const Model>& model) {
  {
    // The common case under a shared lock: the newest entry, lists built.
    absl::ReaderMutexLock lock(&mu_);
    if (!entries_.empty()) {
      const Entry& e = entries_.front();
      if (e.key == model.get() && e.lists != nullptr && !e.model.expired()) {
        return SimilarIndex{e.index, e.lists};
      }
    }
  }
  {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (entries_[i].key == model.get() && !entries_[i].model.expired()) {
        std::rotate(entries_.begin(), entries_.begin() + i,
                    entries_.begin() + i + 1);
        const Entry& e = entries_.front();
        if (e.lists == nullptr) MaybeBuildListsLocked(e.index);
        return SimilarIndex{e.index, e.lists};
      }
    }
  }
  absl::StatusOr<ItemSimilarity> built =
      ItemSimilarity::Build(*model, SimilarityOptions());
  if (!built.ok()) return built.status();
  auto index = std::make_shared<const ItemSimilarity>(std::move(*built));
  absl::MutexLock lock(&mu_);
  // Snapshots that are gone free their index at once.
  entries_.erase(
      std::remove_if(entries_.begin(), entries_.end(),
                     [](const Entry& e) { return e.model.expired(); }),
      entries_.end());
  entries_.insert(entries_.begin(), Entry{model, model.get(), index, nullptr});
  if (entries_.size() > kKeep) entries_.resize(kKeep);
  MaybeBuildListsLocked(index);
  return SimilarIndex{index, nullptr};
}

void SimilarIndexCache::WaitForLists() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](bool* building) { return !*building; }, &building_));
}

absl::Status CheckSimilar(const v1::SimilarItemsRequest& request,
                          const RequestLimits& limits) {
  const int q = request.item_ids_size() + (request.item_id().empty() ? 0 : 1);
  if (q == 0) {
    return absl::InvalidArgumentError(
        "item_id and item_ids are empty: name at least one item to find "
        "similar items to");
  }
  if (q > limits.max_predict_items) {
    return OverLimit("the number of item_ids", q, limits.max_predict_items,
                     "--max-predict-items");
  }
  if (request.exclude_item_ids_size() > limits.max_predict_items) {
    return OverLimit("the number of exclude_item_ids",
                     request.exclude_item_ids_size(), limits.max_predict_items,
                     "--max-predict-items");
  }
  if (request.n() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("n must be >= 0 (0 means 10), got ", request.n()));
  }
  if (request.n() > limits.max_recommend_n) {
    return OverLimit("n", request.n(), limits.max_recommend_n,
                     "--max-recommend-n");
  }
  if (!request.item_id().empty()) {
    if (std::string why = IdProblem(request.item_id(), "item_id");
        !why.empty()) {
      return absl::InvalidArgumentError(why);
    }
  }
  if (absl::Status s = CheckIds(request.item_ids(), "item_ids"); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckIds(request.exclude_item_ids(), "exclude_item_ids");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckCategories(request.categories(),
                                       request.required_categories(), limits);
      !s.ok()) {
    return s;
  }
  if (!request.user_id().empty()) {
    if (std::string why = IdProblem(request.user_id(), "user_id");
        !why.empty()) {
      return absl::InvalidArgumentError(why);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::SimilarItemsResponse> AnswerSimilar(
    const v1::SimilarItemsRequest& request, const Model& model, int64_t version,
    const SimilarIndex& index, const std::vector<int32_t>& rated,
    const Catalogue& catalogue, ReadCaches& caches, SimilarScratch* scratch) {
  const ItemSimilarity& vectors = *index.index;
  std::vector<int32_t> query;
  query.reserve(static_cast<size_t>(request.item_ids_size()) + 1);
  auto add = [&](const std::string& id,
                 const std::string& field) -> absl::Status {
    const int32_t item = model.items().Find(id);
    if (item < 0 || item >= vectors.num_items() || !vectors.HasVector(item)) {
      return absl::NotFoundError(
          absl::StrCat(field, ": the model (version ", version,
                       ") has no training ratings of item '", id, "'"));
    }
    query.push_back(item);
    return absl::OkStatus();
  };
  if (!request.item_id().empty()) {
    if (absl::Status s = add(request.item_id(), "item_id"); !s.ok()) return s;
  }
  for (int i = 0; i < request.item_ids_size(); ++i) {
    absl::Status s =
        add(request.item_ids(i), absl::StrCat("item_ids[", i, "]"));
    if (!s.ok()) return s;
  }
  // The allowed items: the catalogue (trained, not hidden) and the
  // request's categories, minus the user's rated and the excluded items.
  const FilterSpec spec = CategoryAndExclusionSpec(
      request, request.exclude_item_ids(), model, rated);
  const ItemFilter filter = ItemFilter::Build(catalogue, spec);
  SimilarRequest sr;
  sr.n = request.n() > 0 ? request.n() : 10;
  sr.filter = &filter;
  absl::StatusOr<std::vector<SimilarItem>> found =
      SimilarItems(vectors, index.lists.get(), query, sr, scratch);
  if (!found.ok()) return found.status();
  std::vector<std::string> ids;
  ids.reserve(found->size());
  for (const SimilarItem& s : *found) ids.push_back(model.items().Name(s.item));
  std::vector<std::string> names = caches.Titles(ids);
  v1::SimilarItemsResponse resp;
  resp.set_model_version(version);
  for (size_t r = 0; r < found->size(); ++r) {
    v1::SimilarItem* out = resp.add_items();
    out->set_item_id(std::move(ids[r]));  // moved: no copy per string
    out->set_title(std::move(names[r]));
    out->set_score((*found)[r].score);
    out->set_rank(static_cast<int32_t>(r + 1));
  }
  return resp;
}

}  // namespace rbmrec::server
