#include "server/caches/read_caches.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/recommend.h"

namespace rbmrec::server {

namespace internal {

// Map-node and allocation overheads are counted roughly (64 bytes a node).
size_t CacheBytes(
    const std::string& key,
    const std::shared_ptr<const std::vector<store::UserRating>>& ratings) {
  size_t bytes = 64 + key.capacity();
  if (ratings != nullptr) {
    bytes += ratings->capacity() * sizeof(store::UserRating);
    for (const store::UserRating& r : *ratings) bytes += r.item.capacity();
  }
  return bytes;
}

size_t CacheBytes(const std::string& key,
                  const std::shared_ptr<const ResolvedRatings>& resolved) {
  return 64 + key.capacity() + sizeof(ResolvedRatings) +
         resolved->ratings.items.capacity() * sizeof(int32_t) +
         resolved->ratings.ks.capacity() +
         resolved->rated_items.capacity() * sizeof(int32_t) +
         resolved->extra.capacity() * sizeof(int32_t) +
         resolved->member_x.capacity() * sizeof(float);
}

}  // namespace internal

ReadCaches::ReadCaches(const store::Store* store, size_t max_bytes)
    : store_(store),
      catalogue_(store),
      users_(max_bytes),
      resolved_(max_bytes) {}

absl::StatusOr<ReadCaches::UserRatingsPtr> ReadCaches::UserRatings(
    const std::string& user) {
  uint64_t gen = 0;
  {
    absl::MutexLock lock(&mu_);
    if (const UserRatingsPtr* hit = users_.Find(user)) return *hit;
    gen = ratings_gen_;
  }
  absl::StatusOr<std::vector<store::UserRating>> r =
      store_->GetUserRatings(user);
  if (!r.ok() && !absl::IsNotFound(r.status())) return r.status();
  UserRatingsPtr ptr =
      r.ok() ? std::make_shared<const std::vector<store::UserRating>>(
                   std::move(*r))
             : nullptr;
  absl::MutexLock lock(&mu_);
  if (ratings_gen_ == gen) users_.Put(user, ptr);
  return ptr;
}

std::vector<std::string> ReadCaches::Titles(
    const std::vector<std::string>& ids) {
  std::vector<std::string> out(ids.size());
  std::vector<std::string> missing;
  std::vector<size_t> missing_pos;
  uint64_t gen = 0;
  {
    absl::ReaderMutexLock lock(&titles_mu_);
    for (size_t i = 0; i < ids.size(); ++i) {
      auto it = titles_.find(ids[i]);
      if (it != titles_.end()) {
        out[i] = it->second;
      } else {
        missing.push_back(ids[i]);
        missing_pos.push_back(i);
      }
    }
    gen = titles_gen_;
  }
  if (missing.empty()) return out;
  absl::StatusOr<std::vector<std::string>> got = store_->GetTitles(missing);
  if (!got.ok()) return out;  // titles are best effort
  absl::MutexLock lock(&titles_mu_);
  const bool fresh = titles_gen_ == gen;
  if (fresh && titles_.size() + missing.size() > kMaxTitles) titles_.clear();
  for (size_t j = 0; j < missing.size(); ++j) {
    out[missing_pos[j]] = (*got)[j];
    if (fresh) titles_[missing[j]] = (*got)[j];
  }
  return out;
}

void ReadCaches::InvalidateUsers(const std::vector<std::string>& users) {
  absl::MutexLock lock(&mu_);
  ++ratings_gen_;
  for (const std::string& u : users) {
    users_.Erase(u);
    resolved_.Erase(u);
  }
}

void ReadCaches::InvalidateTitles(const std::vector<std::string>& items) {
  {
    absl::MutexLock lock(&titles_mu_);
    ++titles_gen_;
    for (const std::string& i : items) titles_.erase(i);
  }
  (void)catalogue_.Reload();  // on error the next CatalogueFor retries
}

void ReadCaches::InvalidateAll() {
  (void)catalogue_.Reload();
  {
    absl::MutexLock lock(&mu_);
    ++ratings_gen_;
    users_.Clear();
    resolved_.Clear();
  }
  absl::MutexLock lock(&titles_mu_);
  ++titles_gen_;
  titles_.clear();
}

int ReadCaches::DefaultThreshold(const std::shared_ptr<const Model>& model) {
  auto same = [&] {
    return !threshold_model_.owner_before(model) &&
           !model.owner_before(threshold_model_);
  };
  {
    absl::ReaderMutexLock lock(&mu_);
    if (same()) return threshold_k0_;
  }
  const int k0 = DefaultThresholdIndex(*model);  // no lock held
  absl::MutexLock lock(&mu_);
  threshold_model_ = model;
  threshold_k0_ = k0;
  return k0;
}

uint64_t ReadCaches::ratings_generation() const {
  absl::MutexLock lock(&mu_);
  return ratings_gen_;
}

UserView ReadCaches::EmptyUser(const std::shared_ptr<const Model>& model) {
  auto resolved = std::make_shared<ResolvedRatings>();
  resolved->model = model;
  model->MemberInputs(resolved->ratings.view(), &resolved->member_x);
  UserView view;
  view.resolved = std::move(resolved);
  view.folded_in = true;
  return view;
}

bool IsConditional(const Model& model) {
  return !model.members().empty() && model.members()[0].conditional();
}

absl::Status ReadCaches::AddViews(const Model& model,
                                  const std::string& user_id,
                                  ResolvedRatings* resolved) const {
  absl::StatusOr<std::vector<std::string>> views =
      store_->GetUserViews(user_id);
  if (absl::IsNotFound(views.status())) return absl::OkStatus();
  if (!views.ok()) return views.status();
  resolved->extra = ExtraItems(model, *views, resolved->ratings.items);
  return absl::OkStatus();
}

std::vector<int32_t> ExtraItems(const Model& model,
                                const std::vector<std::string>& viewed,
                                const std::vector<int32_t>& rated) {
  std::vector<int32_t> extra;
  for (const std::string& item : viewed) {
    const int32_t idx = model.items().Find(item);
    if (idx >= 0 && !std::binary_search(rated.begin(), rated.end(), idx)) {
      extra.push_back(idx);
    }
  }
  std::sort(extra.begin(), extra.end());
  return extra;
}

absl::StatusOr<UserView> ReadCaches::Resolve(
    const std::shared_ptr<const Model>& model_ptr, const std::string& user_id,
    const google::protobuf::RepeatedPtrField<v1::ItemRating>& ratings) {
  const Model& model = *model_ptr;
  UserView view;
  const bool cacheable = !user_id.empty() && ratings.empty();
  uint64_t gen = 0;
  // The user's entry of an older snapshot (online updates replace it every
  // few hundred ms): its factorisation part may be reused below.
  std::shared_ptr<const ResolvedRatings> stale;
  if (!user_id.empty()) {
    view.model_user = model.users().Find(user_id);
    view.folded_in = view.model_user < 0;
    if (cacheable) {
      absl::MutexLock lock(&mu_);
      const std::shared_ptr<const ResolvedRatings>* hit =
          resolved_.Find(user_id);
      if (hit != nullptr && (*hit)->model.lock() == model_ptr) {
        view.resolved = *hit;
        return view;
      }
      if (hit != nullptr) stale = *hit;
      gen = ratings_gen_;
    }
  }
  auto resolved = std::make_shared<ResolvedRatings>();
  resolved->model = model_ptr;
  // (model item, rating index) in arrival order: stored ratings first, then
  // the ad-hoc ones, so that after a stable sort the last entry of an item
  // is the one that counts.
  // Transient: one allocation on a miss, beside the ResolvedRatings itself.
  std::vector<std::pair<int32_t, uint8_t>> merged;
  if (user_id.empty()) {
    if (ratings.empty()) {
      return absl::InvalidArgumentError(
          "user_id is empty and no ad-hoc ratings were given: name a user or "
          "describe an anonymous user with `ratings`");
    }
    view.folded_in = true;
  } else {
    absl::StatusOr<UserRatingsPtr> stored = UserRatings(user_id);
    if (!stored.ok()) return stored.status();
    if (*stored == nullptr) {
      if (view.model_user < 0 && ratings.empty()) {
        return absl::NotFoundError(absl::StrCat(
            "user_id '", user_id,
            "' not found: no stored ratings, unknown to the model, and no "
            "ad-hoc ratings"));
      }
    } else {
      merged.reserve((*stored)->size() + static_cast<size_t>(ratings.size()));
      for (const store::UserRating& u : **stored) {
        const int32_t idx = model.items().Find(u.item);
        if (idx < 0) continue;
        resolved->rated_items.push_back(idx);
        absl::StatusOr<int> k = model.scale().Index(u.rating);
        if (!k.ok()) continue;
        merged.emplace_back(idx, static_cast<uint8_t>(*k));
      }
    }
  }
  for (const v1::ItemRating& r : ratings) {
    const int32_t idx = model.items().Find(r.item_id());
    if (idx < 0) continue;
    absl::StatusOr<int> k = model.scale().Index(r.rating());
    if (!k.ok()) continue;
    resolved->rated_items.push_back(idx);
    merged.emplace_back(idx, static_cast<uint8_t>(*k));
  }
  std::stable_sort(
      merged.begin(), merged.end(),
      [](const auto& a, const auto& b) { return a.first < b.first; });
  rbmrec::UserRatings& out = resolved->ratings;
  out.items.reserve(merged.size());
  out.ks.reserve(merged.size());
  for (size_t i = 0; i < merged.size(); ++i) {
    if (i + 1 < merged.size() && merged[i + 1].first == merged[i].first) {
      continue;  // a later rating of the same item wins
    }
    out.items.push_back(merged[i].first);
    out.ks.push_back(merged[i].second);
  }
  if (!user_id.empty() && IsConditional(model)) {
    absl::Status s = AddViews(model, user_id, resolved.get());
    if (!s.ok()) return s;
  }
  // The fold-in depends on the factorisation and the ratings alone.
  const size_t mf_size = model.MfInputSize();
  const bool reuse_mf = stale != nullptr && mf_size > 0 &&
                        stale->mf_fingerprint == model.MfFingerprint() &&
                        stale->member_x.size() >= mf_size &&
                        stale->ratings.items == resolved->ratings.items &&
                        stale->ratings.ks == resolved->ratings.ks;
  model.MemberInputs(
      resolved->visible(), &resolved->member_x,
      reuse_mf ? stale->member_x.data() + stale->member_x.size() - mf_size
               : nullptr);
  resolved->mf_fingerprint = model.MfFingerprint();
  view.resolved = std::move(resolved);
  if (cacheable) {
    absl::MutexLock lock(&mu_);
    if (ratings_gen_ == gen) resolved_.Put(user_id, view.resolved);
  }
  return view;
}

}  // namespace rbmrec::server
