#include "server/models/model_registry.h"

#include <cmath>
#include <optional>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/model_file.h"
#include "core/online.h"
#include "server/log.h"

namespace rbmrec::server {

// ---------------------------------------------------------------------------
// VersionCache

size_t VersionCache::ModelBytes(const Model& m) {
  size_t floats = 0;
  for (size_t e = 0; e < m.members().size(); ++e) {
    const RbmParams& p = m.members()[e];
    floats += static_cast<size_t>(p.W.size() + p.b.size() + p.c.size());
    floats += static_cast<size_t>(m.member_exp(e).ew.size());  // exp(W)
  }
  // The I-RBM's exp(W) and its item inputs' exponentials.
  floats += static_cast<size_t>(m.item_rbm_exp().ew.size() + m.item_x().size());
  floats += static_cast<size_t>(m.item_rbm().W.size() + m.item_rbm().b.size() +
                                m.item_rbm().c.size());
  floats += static_cast<size_t>(m.item_x().size() + m.item_hT().size());
  floats += static_cast<size_t>(
      m.rated_rbm().W.size() + m.rated_rbm().b.size() + m.rated_rbm().c.size());
  if (m.rated_w_half() != nullptr) {
    floats += static_cast<size_t>(m.rated_rbm().W.size()) / 2;  // halves
  }
  floats += static_cast<size_t>(m.rated_low_rank().u.size() +
                                m.rated_low_rank().vt.size());
  // The matrix factorisation's item factors (and a flag byte per item).
  floats += static_cast<size_t>(m.params().mf.q.size());
  // The item inputs' saturated units (Model::ItemExpInput): a list and a
  // sum per item.
  size_t hi_bytes = 0;
  for (int32_t i = 0; i < m.item_x().rows(); ++i) {
    hi_bytes += 32 + static_cast<size_t>(m.ItemExpInput(i).n_hi) * 4;
  }
  const size_t ids =
      static_cast<size_t>(m.users().size() + m.items().size()) * (32 + 16);
  return floats * sizeof(float) + m.item_hist().size() * sizeof(uint32_t) +
         m.item_in_irbm().size() + m.params().mf.trained.size() + ids +
         hi_bytes + 4096;
}

std::shared_ptr<const Model> VersionCache::Find(int64_t version) {
  absl::MutexLock lock(&mu_);
  for (auto it = lru_.begin(); it != lru_.end(); ++it) {
    if (it->version == version) {
      lru_.splice(lru_.begin(), lru_, it);
      return lru_.front().model;
    }
  }
  return nullptr;
}

void VersionCache::Put(int64_t version, std::shared_ptr<const Model> model) {
  const size_t bytes = ModelBytes(*model);
  absl::MutexLock lock(&mu_);
  for (auto it = lru_.begin(); it != lru_.end(); ++it) {
    if (it->version == version) {
      bytes_ -= it->bytes;
      lru_.erase(it);
      break;
    }
  }
  if (bytes > max_bytes_) return;
  while (!lru_.empty() && bytes_ + bytes > max_bytes_) {
    bytes_ -= lru_.back().bytes;
    lru_.pop_back();
  }
  lru_.push_front(Entry{version, std::move(model), bytes});
  bytes_ += bytes;
}

void VersionCache::Erase(int64_t version) {
  absl::MutexLock lock(&mu_);
  for (auto it = lru_.begin(); it != lru_.end(); ++it) {
    if (it->version == version) {
      bytes_ -= it->bytes;
      lru_.erase(it);
      return;
    }
  }
}

void VersionCache::Clear() {
  absl::MutexLock lock(&mu_);
  lru_.clear();
  bytes_ = 0;
}

size_t VersionCache::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

size_t VersionCache::size() const {
  absl::MutexLock lock(&mu_);
  return lru_.size();
}

// ---------------------------------------------------------------------------
// ModelRegistry

namespace {

bool HasRmse(double rmse) { return std::isfinite(rmse) && rmse > 0; }

}  // namespace

ModelRegistry::ModelRegistry(store::Store* store,
                             const RegistryOptions& options)
    : store_(store), options_(options), cache_(options.version_cache_bytes) {}

absl::StatusOr<std::shared_ptr<const Model>> ModelRegistry::LoadVersion(
    int64_t version) const {
  absl::StatusOr<std::string> blob = store_->LoadModelBlob(version);
  if (!blob.ok()) {
    if (absl::IsNotFound(blob.status())) {
      return absl::NotFoundError(
          absl::StrCat("model version ", version, " does not exist"));
    }
    return blob.status();
  }
  absl::StatusOr<Model> model = DeserializeModel(*blob);
  if (!model.ok()) {
    NoteCorrupt(version, std::string(model.status().message()));
    return absl::DataLossError(absl::StrCat(
        "model version ", version, " is corrupt: ", model.status().message()));
  }
  return std::shared_ptr<const Model>(
      std::make_shared<const Model>(std::move(*model)));
}

absl::StatusOr<store::ModelInfo> ModelRegistry::Info(int64_t version) const {
  absl::StatusOr<std::vector<store::ModelInfo>> models = store_->ListModels();
  if (!models.ok()) return models.status();
  for (const store::ModelInfo& m : *models) {
    if (m.version == version) return m;
  }
  return absl::NotFoundError(
      absl::StrCat("model version ", version, " does not exist"));
}

std::shared_ptr<const ModelRegistry::State> ModelRegistry::Load() const {
  return std::atomic_load(&state_);
}

void ModelRegistry::Put(State next) {
  std::atomic_store(&state_,
                    std::shared_ptr<const State>(
                        std::make_shared<const State>(std::move(next))));
}

void ModelRegistry::SetServed(Served s) { Put(State{std::move(s), ""}); }

Served ModelRegistry::Current() const {
  std::shared_ptr<const State> state = Load();
  return state != nullptr ? state->served : Served{};
}

bool ModelRegistry::Serving() const { return Current().model != nullptr; }

std::string ModelRegistry::load_error() const {
  std::shared_ptr<const State> state = Load();
  return state != nullptr ? state->load_error : "";
}

void ModelRegistry::LoadAtStart() {
  absl::MutexLock publish(&publish_mu_);
  absl::StatusOr<std::optional<int64_t>> active = store_->ActiveModelVersion();
  std::string error;
  if (!active.ok()) {
    error = absl::StrCat("cannot read the active model version: ",
                         active.status().ToString());
  } else if (!active->has_value()) {
    return;  // nothing stored yet
  } else {
    absl::StatusOr<std::shared_ptr<const Model>> m = LoadVersion(**active);
    if (m.ok()) {
      SetServed(Served{*m, **active, 0});
      Log(LogLevel::kInfo, "model_loaded",
          {F("version", **active), F("items", (*m)->num_items())});
      return;
    }
    error = absl::StrCat("active model version ", **active,
                         " could not be loaded: ", m.status().ToString());
  }
  Log(LogLevel::kError, "model_load_failed", {F("error", error)});
  // Fall back: first to the versions that were active before, most recently
  // activated first; then to the newest version that loads.
  absl::StatusOr<std::vector<store::ModelInfo>> models = store_->ListModels();
  if (models.ok()) {
    absl::StatusOr<std::vector<int64_t>> history = store_->ActivationHistory();
    absl::flat_hash_set<int64_t> stored;
    for (const store::ModelInfo& info : *models) stored.insert(info.version);
    struct Candidate {
      int64_t version;
      const char* rule;
    };
    std::vector<Candidate> order;
    absl::flat_hash_set<int64_t> listed;
    if (history.ok()) {
      for (int64_t v : *history) {
        if (stored.contains(v) && listed.insert(v).second) {
          order.push_back({v, "the most recently active version that loads"});
        }
      }
    }
    for (const store::ModelInfo& info : *models) {  // newest first
      if (listed.insert(info.version).second) {
        order.push_back(
            {info.version,
             "the newest version that loads (no version that was active "
             "before loads)"});
      }
    }
    const int64_t failed = active.ok() && active->has_value() ? **active : 0;
    for (const Candidate& c : order) {
      if (c.version == failed) continue;
      absl::StatusOr<std::shared_ptr<const Model>> m = LoadVersion(c.version);
      if (!m.ok()) continue;
      if (absl::Status s = store_->ActivateModel(c.version); !s.ok()) {
        absl::StrAppend(&error, "; activating fallback version ", c.version,
                        " failed: ", s.ToString());
        break;
      }
      absl::StrAppend(&error, "; fell back to version ", c.version, ", ",
                      c.rule, " (now active)");
      Log(LogLevel::kWarn, "model_fallback",
          {F("version", c.version), F("rule", c.rule)});
      Put(State{Served{*m, c.version, 0}, error});
      return;
    }
  }
  absl::StrAppend(&error, "; no intact version to fall back to");
  Put(State{Served{}, error});
}

void ModelRegistry::NoteCorrupt(int64_t version, std::string why) const {
  absl::MutexLock lock(&corrupt_mu_);
  corrupt_[version] = std::move(why);
}

std::string ModelRegistry::CorruptReason(int64_t version) const {
  absl::MutexLock lock(&corrupt_mu_);
  auto it = corrupt_.find(version);
  return it == corrupt_.end() ? std::string() : it->second;
}

absl::Status ModelRegistry::Verify(int64_t version) const {
  absl::StatusOr<std::string> blob = store_->LoadModelBlob(version);
  if (!blob.ok()) return blob.status();
  if (absl::Status s = VerifyModelBytes(*blob); !s.ok()) {
    NoteCorrupt(version, std::string(s.message()));
    return absl::DataLossError(
        absl::StrCat("model version ", version, " is corrupt: ", s.message()));
  }
  absl::MutexLock lock(&corrupt_mu_);
  corrupt_.erase(version);
  return absl::OkStatus();
}

absl::StatusOr<Served> ModelRegistry::Get(int64_t version) {
  if (version < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model_version must be >= 0, got ", version));
  }
  Served cur = Current();
  if (version == 0 || version == cur.version) {
    if (cur.model == nullptr) {
      return absl::FailedPreconditionError(
          "no model is active: train one first (Train) or activate a stored "
          "version (ActivateModel)");
    }
    return cur;
  }
  if (std::shared_ptr<const Model> hit = cache_.Find(version)) {
    return Served{std::move(hit), version, 0};
  }
  absl::StatusOr<std::shared_ptr<const Model>> m = LoadVersion(version);
  if (!m.ok()) return m.status();
  cache_.Put(version, *m);
  return Served{*m, version, 0};
}

bool ModelRegistry::Resident(int64_t version) {
  if (version <= 0 || version == Current().version) return true;
  return cache_.Find(version) != nullptr;
}

namespace {

// EraseUser with ratings given as (item id, rating).
bool EraseFrom(Model* model, const std::string& user,
               const std::vector<std::pair<std::string, double>>& ratings) {
  if (model->users().Find(user) < 0) return false;
  UserRatings ur;
  for (const auto& [item, rating] : ratings) {
    const int32_t idx = model->items().Find(item);
    absl::StatusOr<int> k = model->scale().Index(rating);
    if (idx < 0 || !k.ok()) continue;
    ur.items.push_back(idx);
    ur.ks.push_back(static_cast<uint8_t>(*k));
  }
  return EraseUser(model, user, ur.view());
}

}  // namespace

uint64_t ModelRegistry::ErasureSeq() const {
  absl::MutexLock lock(&erasure_mu_);
  return erasure_base_ + erasures_.size();
}

absl::StatusOr<ModelRegistry::Erasure> ModelRegistry::EraseUser(
    const std::string& user,
    const std::vector<std::pair<std::string, double>>& ratings,
    bool rewrite_stored) {
  absl::MutexLock erasing(&erasure_mu_);
  erasures_.push_back(ErasedUser{user, ratings});
  if (erasures_.size() > kErasureLog) {
    erasures_.pop_front();
    ++erasure_base_;
  }
  Erasure out;
  // The served model first: answers stop using the user at once.
  for (int attempt = 0; attempt < 100; ++attempt) {
    const Served cur = Current();
    if (cur.model == nullptr || cur.model->users().Find(user) < 0) break;
    auto next = std::make_shared<Model>(*cur.model);
    EraseFrom(next.get(), user, ratings);
    if (ReplaceInMemory(cur.model, std::move(next), cur.online_seq)) {
      out.served = true;
      break;
    }
  }
  if (!rewrite_stored) {
    cache_.Clear();
    return out;
  }
  // Then every stored version (a version published meanwhile was published
  // from the erased served model, or is listed here).
  absl::StatusOr<std::vector<store::ModelInfo>> models = store_->ListModels();
  if (!models.ok()) return models.status();
  for (const store::ModelInfo& info : *models) {
    cache_.Erase(info.version);
    absl::StatusOr<std::string> blob = store_->LoadModelBlob(info.version);
    if (absl::IsNotFound(blob.status())) continue;  // deleted meanwhile
    if (!blob.ok()) {
      out.failures.push_back(absl::StrCat("version ", info.version, ": ",
                                          blob.status().message()));
      continue;
    }
    // A model that knows the user holds its id among the blob's bytes.
    if (blob->find(user) == std::string::npos) continue;
    absl::StatusOr<Model> m = DeserializeModel(*blob);
    if (!m.ok()) {
      NoteCorrupt(info.version, std::string(m.status().message()));
      out.failures.push_back(absl::StrCat("version ", info.version,
                                          " is corrupt (", m.status().message(),
                                          "): it cannot serve, delete it"));
      continue;
    }
    if (!EraseFrom(&*m, user, ratings)) continue;
    absl::Status s = store_->ReplaceModelBlob(info.version, SerializeModel(*m));
    if (absl::IsNotFound(s)) continue;
    if (!s.ok()) {
      out.failures.push_back(
          absl::StrCat("version ", info.version, ": ", s.message()));
      continue;
    }
    ++out.versions_rewritten;
  }
  Log(out.failures.empty() ? LogLevel::kInfo : LogLevel::kError, "user_erased",
      {F("served", out.served ? "true" : "false"),
       F("versions_rewritten", out.versions_rewritten),
       F("failures", out.failures.size())});
  return out;
}

absl::StatusOr<ModelRegistry::Published> ModelRegistry::PublishFull(
    std::shared_ptr<const Model> model, const store::ModelInfo& meta,
    const std::string& blob_in, Activation policy, uint64_t online_seq,
    uint64_t erasures_from) {
  absl::MutexLock erasing(&erasure_mu_);
  std::string rebuilt;
  if (erasures_from < erasure_base_ + erasures_.size()) {
    auto copy = std::make_shared<Model>(*model);
    bool changed = false;
    if (erasures_from < erasure_base_) {
      Log(LogLevel::kWarn, "erasure_log_short",
          {F("missing", erasure_base_ - erasures_from)});
    }
    for (size_t i = erasures_from > erasure_base_
                        ? static_cast<size_t>(erasures_from - erasure_base_)
                        : 0;
         i < erasures_.size(); ++i) {
      changed |= EraseFrom(copy.get(), erasures_[i].user, erasures_[i].ratings);
    }
    if (changed) {
      rebuilt = SerializeModel(*copy);
      model = std::move(copy);
    }
  }
  const std::string& blob = rebuilt.empty() ? blob_in : rebuilt;
  absl::MutexLock publish(&publish_mu_);
  const Served cur = Current();
  Published out;
  const double new_rmse = model->summary().valid_rmse;
  switch (policy) {
    case Activation::kAlways:
      out.activated = true;
      break;
    case Activation::kNever:
      out.why_not = "not activated: the activation policy is never";
      break;
    case Activation::kIfBetter: {
      const double old_rmse =
          cur.model != nullptr ? cur.model->summary().valid_rmse : 0;
      if (cur.model == nullptr) {
        out.activated = true;
      } else if (!HasRmse(new_rmse) || !HasRmse(old_rmse)) {
        // Nothing to compare: keep the model that serves (no silent swap).
        out.why_not = absl::StrCat(
            "not activated: activation policy if-better needs a validation "
            "RMSE of both models, and ",
            !HasRmse(new_rmse)
                ? "this one has none (trained with validation_fraction 0)"
                : absl::StrCat("the active version ", cur.version,
                               " has none (trained with validation_fraction "
                               "0)"),
            "; activate it with ActivateModel (rbmrec models activate), or "
            "train with activation always");
      } else if (new_rmse <= old_rmse + options_.activate_tolerance) {
        out.activated = true;
      } else {
        out.why_not = absl::StrCat(
            "not activated: validation RMSE ", new_rmse,
            " is worse than the active version ", cur.version, "'s ", old_rmse,
            " by more than the tolerance ", options_.activate_tolerance,
            " (activation policy if-better)");
      }
      break;
    }
  }
  absl::StatusOr<int64_t> v = store_->InsertModel(meta, blob, out.activated);
  if (!v.ok()) return v.status();
  out.version = *v;
  if (out.activated) {
    SetServed(Served{std::move(model), *v, online_seq});
  } else {
    cache_.Put(*v, std::move(model));
  }
  RetainLocked();
  return out;
}

bool ModelRegistry::ReplaceInMemory(const std::shared_ptr<const Model>& base,
                                    std::shared_ptr<const Model> next,
                                    uint64_t online_seq) {
  absl::MutexLock publish(&publish_mu_);
  std::shared_ptr<const State> state = Load();
  if (state == nullptr || state->served.model != base) return false;
  State updated = *state;
  updated.served.model = std::move(next);
  updated.served.online_seq = online_seq;
  Put(std::move(updated));
  return true;
}

absl::StatusOr<int64_t> ModelRegistry::PublishOnline(
    const std::shared_ptr<const Model>& model, const store::ModelInfo& meta,
    const std::string& blob) {
  absl::MutexLock publish(&publish_mu_);
  if (Current().model != model) {
    return absl::AbortedError("another model was published meanwhile");
  }
  absl::StatusOr<int64_t> v = store_->InsertModel(meta, blob, true);
  if (!v.ok()) return v.status();
  SetServed(Served{model, *v, Current().online_seq});
  RetainLocked();
  return *v;
}

absl::StatusOr<store::ModelInfo> ModelRegistry::Activate(int64_t version,
                                                         uint64_t online_seq) {
  if (version <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("version must be > 0, got ", version));
  }
  std::shared_ptr<const Model> model = cache_.Find(version);
  if (model == nullptr) {
    absl::StatusOr<std::shared_ptr<const Model>> m = LoadVersion(version);
    if (!m.ok()) {
      if (absl::IsDataLoss(m.status())) {
        Log(LogLevel::kError, "activate_model_corrupt",
            {F("version", version), F("error", m.status().ToString())});
        return absl::DataLossError(
            absl::StrCat(m.status().message(),
                         "; it cannot be loaded and the active model is "
                         "unchanged"));
      }
      return m.status();
    }
    model = std::move(*m);
  }
  absl::MutexLock publish(&publish_mu_);
  if (absl::Status s = store_->ActivateModel(version); !s.ok()) return s;
  const Served old = Current();
  SetServed(Served{model, version, online_seq});
  cache_.Erase(version);
  if (old.model != nullptr && old.version != version) {
    cache_.Put(old.version, old.model);
  }
  Log(LogLevel::kInfo, "model_activated", {F("version", version)});
  absl::StatusOr<store::ModelInfo> info = Info(version);
  if (info.ok()) info->active = true;
  return info;
}

absl::StatusOr<int64_t> ModelRegistry::Follow(uint64_t online_seq) {
  absl::StatusOr<std::optional<int64_t>> active = store_->ActiveModelVersion();
  if (!active.ok()) return active.status();
  if (!active->has_value()) return Current().version;
  const int64_t version = **active;
  if (Current().version == version) return version;
  std::shared_ptr<const Model> model = cache_.Find(version);
  if (model == nullptr) {
    absl::StatusOr<std::shared_ptr<const Model>> m = LoadVersion(version);
    if (!m.ok()) return m.status();
    model = std::move(*m);
  }
  absl::MutexLock publish(&publish_mu_);
  absl::StatusOr<std::optional<int64_t>> again = store_->ActiveModelVersion();
  if (!again.ok()) return again.status();
  const Served old = Current();
  // Changed again meanwhile: the next Follow serves that one.
  if (*again != std::optional<int64_t>(version) || old.version == version) {
    return old.version;
  }
  SetServed(Served{model, version, online_seq});
  cache_.Erase(version);
  if (old.model != nullptr) cache_.Put(old.version, old.model);
  Log(LogLevel::kInfo, "model_followed",
      {F("version", version), F("previous_version", old.version)});
  return version;
}

absl::StatusOr<int64_t> ModelRegistry::Delete(int64_t version, bool force) {
  if (version <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("version must be > 0, got ", version));
  }
  absl::MutexLock publish(&publish_mu_);
  absl::StatusOr<store::ModelInfo> info = Info(version);
  if (!info.ok()) return info.status();
  if (info->active || Current().version == version) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model version ", version,
        " is the active version and cannot be deleted; activate another "
        "version first"));
  }
  if (info->pinned && !force) {
    return absl::FailedPreconditionError(
        absl::StrCat("model version ", version,
                     " is pinned; unpin it or delete with force"));
  }
  absl::StatusOr<int64_t> freed = store_->DeleteModel(version);
  if (!freed.ok()) return freed.status();
  cache_.Erase(version);
  Log(LogLevel::kInfo, "model_deleted",
      {F("version", version), F("freed_bytes", *freed)});
  return *freed;
}

absl::StatusOr<store::ModelInfo> ModelRegistry::Pin(int64_t version,
                                                    bool pinned) {
  if (version <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("version must be > 0, got ", version));
  }
  absl::MutexLock publish(&publish_mu_);
  if (absl::Status s = store_->PinModel(version, pinned); !s.ok()) {
    if (absl::IsNotFound(s)) {
      return absl::NotFoundError(
          absl::StrCat("model version ", version, " does not exist"));
    }
    return s;
  }
  return Info(version);
}

absl::StatusOr<store::PruneResult> ModelRegistry::Prune(
    const store::RetentionPolicy* policy) {
  store::RetentionPolicy p{options_.keep_full, options_.keep_online};
  if (policy != nullptr) p = *policy;
  if (p.keep_full < 0 || p.keep_online < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("keep_full and keep_online must be >= 0, got ",
                     p.keep_full, " and ", p.keep_online));
  }
  absl::MutexLock publish(&publish_mu_);
  return PruneLocked(p);
}

absl::StatusOr<store::PruneResult> ModelRegistry::PruneLocked(
    const store::RetentionPolicy& policy) {
  absl::StatusOr<store::PruneResult> r = store_->PruneModels(policy);
  if (!r.ok()) return r.status();
  for (const int64_t v : r->deleted_versions) cache_.Erase(v);
  if (!r->deleted_versions.empty()) {
    Log(LogLevel::kInfo, "models_pruned",
        {F("deleted", r->deleted_versions.size()),
         F("freed_bytes", r->freed_bytes)});
  }
  return r;
}

void ModelRegistry::RetainLocked() {
  absl::StatusOr<store::PruneResult> r = PruneLocked(
      store::RetentionPolicy{options_.keep_full, options_.keep_online});
  if (!r.ok()) {
    Log(LogLevel::kWarn, "retention_failed",
        {F("error", r.status().ToString())});
  }
}

}  // namespace rbmrec::server
