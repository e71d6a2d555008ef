// RbmrecService's reads of stored data for one user or one item:
// GetUserRatings (a page of the user's stored ratings) and GetItem (the
// item's catalogue row and the served model's ratings histogram). The rest
// of the service is in service.cc and service_predictions.cc.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/metrics/metrics.h"
#include "server/service/proto_convert.h"
#include "server/service/request_checks.h"
#include "server/service/service.h"

namespace rbmrec::server {

absl::StatusOr<v1::GetUserRatingsResponse> RbmrecService::GetUserRatings(
    const v1::GetUserRatingsRequest& request) {
  if (std::string why = IdProblem(request.user_id(), "user_id"); !why.empty()) {
    return absl::InvalidArgumentError(why);
  }
  if (request.offset() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("offset must be >= 0 (0 starts at the first rating), got ",
                     request.offset()));
  }
  if (request.limit() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("limit must be >= 0 (0 means ", kDefaultRatingsPage,
                     "), got ", request.limit()));
  }
  // Checked before the read, so that an over-limit call costs nothing.
  const int64_t max = Limits().max_batch_rows;
  if (request.limit() > max) {
    return OverLimit("limit", request.limit(), max, "--max-batch");
  }
  const int64_t limit = request.limit() == 0
                            ? std::min<int64_t>(kDefaultRatingsPage, max)
                            : request.limit();
  // One indexed read of the user's ratings (or the cached copy of it).
  absl::StatusOr<ReadCaches::UserRatingsPtr> stored =
      caches_->UserRatings(request.user_id());
  NoteStoreStatus(stored.status());
  if (!stored.ok()) return stored.status();
  if (*stored == nullptr) {
    return absl::NotFoundError(absl::StrCat("user_id '", request.user_id(),
                                            "' not found: no stored ratings"));
  }
  const std::vector<store::UserRating>& all = **stored;
  const auto total = static_cast<int64_t>(all.size());
  const int64_t begin = std::min(request.offset(), total);
  const int64_t end = std::min(total, begin + limit);
  std::vector<std::string> ids;
  ids.reserve(static_cast<size_t>(end - begin));
  for (int64_t i = begin; i < end; ++i) {
    ids.push_back(all[static_cast<size_t>(i)].item);
  }
  const std::vector<std::string> titles = caches_->Titles(ids);
  v1::GetUserRatingsResponse resp;
  resp.set_total(total);
  for (int64_t i = begin; i < end; ++i) {
    const store::UserRating& r = all[static_cast<size_t>(i)];
    v1::UserRatingEntry* e = resp.add_ratings();
    e->set_item_id(r.item);
    e->set_title(titles[static_cast<size_t>(i - begin)]);
    e->set_rating(r.rating);
    e->set_timestamp(r.timestamp);
  }
  return resp;
}

absl::StatusOr<v1::GetItemResponse> RbmrecService::GetItem(
    const v1::GetItemRequest& request) {
  if (std::string why = IdProblem(request.item_id(), "item_id"); !why.empty()) {
    return absl::InvalidArgumentError(why);
  }
  // One indexed read of the item's row.
  absl::StatusOr<std::optional<store::ItemRow>> row =
      store_->GetItem(request.item_id());
  NoteStoreStatus(row.status());
  if (!row.ok()) return row.status();
  const Served served = registry_->Current();
  const int32_t index = served.model == nullptr
                            ? -1
                            : served.model->items().Find(request.item_id());
  if (!row->has_value() && index < 0) {
    return absl::NotFoundError(
        absl::StrCat("item_id '", request.item_id(),
                     "' not found: unknown to the store and to the served "
                     "model"));
  }
  v1::GetItemResponse resp;
  v1::Item* item = resp.mutable_item();
  item->set_item_id(request.item_id());
  if (row->has_value()) {
    const store::ItemRow& r = **row;
    item->set_title(r.title);
    if (absl::Status s = ParseAttributesJson(r.attributes_json, item);
        !s.ok()) {
      return s;
    }
    for (const std::string& c : r.categories) item->add_categories(c);
    item->set_hidden(r.hidden);
  }
  if (served.model == nullptr) return resp;
  const Model& model = *served.model;
  const int K = model.K();
  resp.set_model_version(served.version);
  FillScale(model.scale(), resp.mutable_scale());
  const std::vector<uint32_t>& hist = model.item_hist();
  double sum = 0;
  int64_t n = 0;
  // The item's row of item_hist; K zeros for an item the model lacks.
  const size_t first =
      static_cast<size_t>(std::max(index, 0)) * static_cast<size_t>(K);
  const bool known =
      index >= 0 && first + static_cast<size_t>(K) <= hist.size();
  for (int k = 0; k < K; ++k) {
    const int64_t c = known ? hist[first + static_cast<size_t>(k)] : 0;
    resp.add_rating_counts(c);
    n += c;
    sum += static_cast<double>(c) * model.scale().Value(k);
  }
  resp.set_ratings(n);
  resp.set_mean_rating(n > 0 ? sum / static_cast<double>(n) : 0.0);
  return resp;
}

}  // namespace rbmrec::server
