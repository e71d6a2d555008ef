#include "server/service.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <utility>

#ifdef __linux__
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/fit.h"
#include "core/model_file.h"
#include "core/online.h"
#include "server/fast_predict.h"
#include "server/log.h"

namespace rbmrec::server {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxIdBytes = store::kMaxIdBytes;
constexpr int kMaxRejectedRows = 100;
constexpr size_t kVersionCacheSize = 4;

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

std::string Truncated(const std::string& id) {
  return id.size() <= kMaxIdBytes ? id : id.substr(0, kMaxIdBytes);
}

// Empty when the id is valid, else why not ("user_id is empty").
std::string IdProblem(const std::string& id, absl::string_view field) {
  if (id.empty()) return absl::StrCat(field, " is empty");
  if (id.size() > kMaxIdBytes) {
    return absl::StrCat(field, " is ", id.size(), " bytes long (limit ",
                        kMaxIdBytes, ")");
  }
  return "";
}

// Empty when `rating` is on `scale`, else why not.
std::string RatingProblem(double rating, const RatingScale& scale) {
  if (std::isnan(rating)) return "rating is NaN";
  if (std::isinf(rating)) return "rating is infinite";
  if (!scale.Index(rating).ok()) {
    return absl::StrCat("rating ", rating, " is off the scale ",
                        scale.ToString());
  }
  return "";
}

PredictMethod ToMethod(v1::Method m) {
  return m == v1::MEAN_FIELD ? PredictMethod::kMeanField
                             : PredictMethod::kExact;
}

void FillScale(const RatingScale& scale, v1::RatingScale* out) {
  out->set_min(scale.min());
  out->set_max(scale.max());
  out->set_step(scale.step());
  for (int k = 0; k < scale.K(); ++k) out->add_values(scale.Value(k));
}

// Reads a number field from our own flat metrics JSON ({"a":1,"b":2}).
double JsonNumber(const std::string& json, absl::string_view key) {
  const std::string needle = absl::StrCat("\"", key, "\":");
  const size_t pos = json.find(needle);
  if (pos == std::string::npos) return 0;
  return std::strtod(json.c_str() + pos + needle.size(), nullptr);
}

v1::ModelInfo ToProto(const store::ModelInfo& m) {
  v1::ModelInfo out;
  out.set_version(m.version);
  out.set_created_unix_ms(m.created_unix_ms);
  out.set_kind(m.kind);
  out.set_n_users(m.n_users);
  out.set_n_items(m.n_items);
  out.set_n_ratings(m.n_ratings);
  out.set_validation_rmse(JsonNumber(m.metrics_json, "validation_rmse"));
  out.set_epochs(static_cast<int32_t>(JsonNumber(m.metrics_json, "epochs")));
  out.set_active(m.active);
  out.set_size_bytes(m.size_bytes);
  return out;
}

std::string MetricsJson(double valid_rmse, int epochs, double seconds,
                        int64_t base_version) {
  return absl::StrFormat(
      "{\"validation_rmse\":%.17g,\"epochs\":%d,\"train_seconds\":%.3f,"
      "\"base_version\":%d}",
      std::isfinite(valid_rmse) ? valid_rmse : 0.0, epochs, seconds,
      base_version);
}

// Replaces a non-finite or unnormalised distribution by `fallback`.
bool SaneDistribution(const float* p, int K) {
  double sum = 0;
  for (int k = 0; k < K; ++k) {
    if (!std::isfinite(p[k]) || p[k] < 0) return false;
    sum += p[k];
  }
  return std::abs(sum - 1.0) < 1e-3;
}

}  // namespace

// ---------------------------------------------------------------------------

struct RbmrecService::TrainJob {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<v1::TrainProgress> events;  // guarded by mu
  bool done = false;                      // guarded by mu
  std::atomic<bool> cancel{false};
  std::atomic<bool> shutdown{false};
  std::atomic<int> epoch{0};
  int max_epochs = 0;
  Clock::time_point start = Clock::now();

  void Push(v1::TrainProgress p, bool terminal) {
    std::lock_guard<std::mutex> lock(mu);
    events.push_back(std::move(p));
    if (terminal) done = true;
    cv.notify_all();
  }
};

namespace internal {

// A user's ratings in one model's indices.
struct ResolvedRatings {
  std::weak_ptr<const Model> model;  // the snapshot the indices refer to
  UserRatings ratings;               // model indices, sorted, one per item
  // Model indices of every item the user rated (stored or ad-hoc, including
  // ratings off the model's scale).
  std::vector<int32_t> rated_items;
};

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
         resolved->rated_items.capacity() * sizeof(int32_t);
}

}  // namespace internal

using internal::ResolvedRatings;

struct RbmrecService::UserView {
  std::shared_ptr<const ResolvedRatings> resolved;
  VisibleSet ratings() const { return resolved->ratings.view(); }
  const std::vector<int32_t>& rated_items() const {
    return resolved->rated_items;
  }
  bool folded_in = false;
  // Index in Model::users (the item-based RBM's visible unit), -1 if none.
  int32_t model_user = -1;
};

RbmrecService::RbmrecService(std::unique_ptr<store::Store> store,
                             const ServiceOptions& options)
    : store_(std::move(store)), options_(options) {}

absl::StatusOr<std::unique_ptr<RbmrecService>> RbmrecService::Create(
    std::unique_ptr<store::Store> store, const ServiceOptions& options) {
  if (store == nullptr) return absl::InvalidArgumentError("store is null");
  if (options.max_batch_rows < 1) {
    return absl::InvalidArgumentError("max_batch_rows must be >= 1");
  }
  if (options.max_predict_items < 1) {
    return absl::InvalidArgumentError("max_predict_items must be >= 1");
  }
  if (options.max_recommend_n < 1) {
    return absl::InvalidArgumentError("max_recommend_n must be >= 1");
  }
  if (options.max_train_threads < 0) {
    return absl::InvalidArgumentError("max_train_threads must be >= 0");
  }
  if (!(options.online_learning_rate > 0) || options.online_steps < 1) {
    return absl::InvalidArgumentError(
        "online learning rate must be > 0 and online steps >= 1");
  }
  if (!(options.online_publish_seconds > 0)) {
    return absl::InvalidArgumentError("online publish seconds must be > 0");
  }
  if (absl::Status s = ValidateTrainOptions(options.train_defaults); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("training defaults: ", s.message()));
  }
  std::unique_ptr<RbmrecService> service(
      new RbmrecService(std::move(store), options));

  // Load the active model; a broken row is logged and we serve without it.
  absl::StatusOr<std::optional<int64_t>> active =
      service->store_->ActiveModelVersion();
  auto load_failed = [&](std::string error) {
    std::lock_guard<std::mutex> lock(service->served_mu_);
    service->model_load_error_ = std::move(error);
  };
  if (!active.ok()) {
    Log(LogLevel::kError, "model_load_failed",
        {F("error", active.status().ToString())});
    load_failed(absl::StrCat("cannot read the active model version: ",
                             active.status().ToString()));
  } else if (active->has_value()) {
    const int64_t version = **active;
    absl::StatusOr<std::string> blob = service->store_->LoadModelBlob(version);
    absl::StatusOr<Model> model = blob.ok()
                                      ? DeserializeModel(*blob)
                                      : absl::StatusOr<Model>(blob.status());
    if (!model.ok()) {
      Log(LogLevel::kError, "model_load_failed",
          {F("version", version), F("error", model.status().ToString()),
           F("note", "serving without a model until Train or ActivateModel")});
      load_failed(
          absl::StrCat("active model version ", version,
                       " could not be loaded: ", model.status().ToString()));
    } else {
      std::lock_guard<std::mutex> lock(service->publish_mu_);
      service->SetCurrent(std::make_shared<const Model>(std::move(*model)),
                          version);
      Log(LogLevel::kInfo, "model_loaded",
          {F("version", version),
           F("items", service->Current().model->num_items())});
    }
  }
  service->online_thread_ =
      std::thread([s = service.get()] { s->OnlineLoop(); });
  return service;
}

RbmrecService::~RbmrecService() { Shutdown(); }

void RbmrecService::BeginShutdown() {
  std::lock_guard<std::mutex> lock(train_mu_);
  shutting_down_ = true;
  if (job_ != nullptr) {
    job_->shutdown = true;
    job_->cancel = true;
  }
}

void RbmrecService::Shutdown() {
  std::call_once(shutdown_once_, [this] {
    BeginShutdown();
    if (train_thread_.joinable()) train_thread_.join();
    {
      std::lock_guard<std::mutex> lock(queue_mu_);
      stop_online_ = true;
      queue_cv_.notify_all();
    }
    if (online_thread_.joinable()) online_thread_.join();
  });
}

RbmrecService::Served RbmrecService::Current() const {
  std::lock_guard<std::mutex> lock(served_mu_);
  return served_;
}

void RbmrecService::SetCurrent(std::shared_ptr<const Model> model,
                               int64_t version) {
  std::lock_guard<std::mutex> lock(served_mu_);
  served_.model = std::move(model);
  served_.version = version;
  model_load_error_.clear();
}

int64_t RbmrecService::active_version() const { return Current().version; }

bool RbmrecService::OnlineActive() const {
  return options_.online && Current().model != nullptr;
}

absl::StatusOr<RbmrecService::Served> RbmrecService::ModelFor(int64_t version) {
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
  {
    std::lock_guard<std::mutex> lock(cache_mu_);
    for (const Served& s : version_cache_) {
      if (s.version == version) return s;
    }
  }
  absl::StatusOr<std::string> blob = store_->LoadModelBlob(version);
  if (!blob.ok()) {
    if (absl::IsNotFound(blob.status())) {
      return absl::NotFoundError(
          absl::StrCat("model_version ", version, " does not exist"));
    }
    return blob.status();
  }
  absl::StatusOr<Model> model = DeserializeModel(*blob);
  if (!model.ok()) {
    return absl::DataLossError(absl::StrCat(
        "model version ", version, " is corrupt: ", model.status().message()));
  }
  Served s{std::make_shared<const Model>(std::move(*model)), version};
  std::lock_guard<std::mutex> lock(cache_mu_);
  if (version_cache_.size() >= kVersionCacheSize) {
    version_cache_.erase(version_cache_.begin());
  }
  version_cache_.push_back(s);
  return s;
}

// ---------------------------------------------------------------------------
// Read caches

namespace {
constexpr size_t kMaxCachedTitles = 1000000;
}  // namespace

absl::StatusOr<RbmrecService::UserRatingsPtr> RbmrecService::CachedUserRatings(
    const std::string& user) {
  uint64_t gen = 0;
  {
    std::lock_guard<std::mutex> lock(read_cache_mu_);
    if (const UserRatingsPtr* hit = user_cache_.Find(user)) return *hit;
    gen = ratings_gen_;
  }
  absl::StatusOr<std::vector<store::UserRating>> r =
      store_->GetUserRatings(user);
  if (!r.ok() && !absl::IsNotFound(r.status())) return r.status();
  UserRatingsPtr ptr =
      r.ok() ? std::make_shared<const std::vector<store::UserRating>>(
                   std::move(*r))
             : nullptr;
  std::lock_guard<std::mutex> lock(read_cache_mu_);
  if (ratings_gen_ == gen) user_cache_.Put(user, ptr);
  return ptr;
}

std::vector<std::string> RbmrecService::CachedTitles(
    const std::vector<std::string>& ids) {
  std::vector<std::string> out(ids.size());
  std::vector<std::string> missing;
  std::vector<size_t> missing_pos;
  uint64_t gen = 0;
  {
    std::lock_guard<std::mutex> lock(read_cache_mu_);
    for (size_t i = 0; i < ids.size(); ++i) {
      auto it = title_cache_.find(ids[i]);
      if (it != title_cache_.end()) {
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
  std::lock_guard<std::mutex> lock(read_cache_mu_);
  const bool fresh = titles_gen_ == gen;
  if (fresh && title_cache_.size() + missing.size() > kMaxCachedTitles) {
    title_cache_.clear();
  }
  for (size_t j = 0; j < missing.size(); ++j) {
    out[missing_pos[j]] = (*got)[j];
    if (fresh) title_cache_[missing[j]] = (*got)[j];
  }
  return out;
}

void RbmrecService::InvalidateUsers(const std::vector<std::string>& users) {
  std::lock_guard<std::mutex> lock(read_cache_mu_);
  ++ratings_gen_;
  for (const std::string& u : users) {
    user_cache_.Erase(u);
    resolved_cache_.Erase(u);
  }
}

// ---------------------------------------------------------------------------
// Writes

namespace {
// Bound of AddRatingsSession::known_ (ratings held); cleared beyond.
constexpr size_t kMaxKnownEntries = 2000000;
}  // namespace

absl::Status RbmrecService::AddRatingsSession::AddBatch(
    const v1::AddRatingsRequest& request) {
  RbmrecService& svc = *service_;
  const int64_t batch = response_.batches();
  const int n = request.ratings_size();
  if (n > svc.options_.max_batch_rows) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "batch ", batch, " has ", n, " rows, over the server's limit of ",
        svc.options_.max_batch_rows, " rows per batch (--max-batch)"));
  }
  std::vector<store::RatingRow> rows;
  rows.reserve(static_cast<size_t>(n));
  int64_t rejected = 0;
  for (int i = 0; i < n; ++i) {
    const v1::Rating& r = request.ratings(i);
    std::string why = IdProblem(r.user_id(), "user_id");
    if (why.empty()) why = IdProblem(r.item_id(), "item_id");
    if (why.empty()) why = RatingProblem(r.rating(), svc.options_.scale);
    if (!why.empty()) {
      ++rejected;
      if (response_.rejected_rows_size() < kMaxRejectedRows) {
        v1::RejectedRow* row = response_.add_rejected_rows();
        row->set_batch(batch);
        row->set_row(i);
        row->set_user_id(Truncated(r.user_id()));
        row->set_item_id(Truncated(r.item_id()));
        row->set_reason(absl::StrCat("batch ", batch, " row ", i, ": ", why));
      }
      continue;
    }
    rows.push_back(
        store::RatingRow{r.user_id(), r.item_id(), r.rating(), r.timestamp()});
  }

  // For online updates: the users' previous ratings of the batch's items.
  // Read once per user per session (see known_): re-reading every user of
  // every batch cost ~1.5 s of a 2 s 100k-row import.
  const bool online = svc.OnlineActive() && !rows.empty();
  uint64_t gen_before = 0;
  if (online) {
    {
      std::lock_guard<std::mutex> lock(svc.read_cache_mu_);
      gen_before = svc.ratings_gen_;
    }
    if (gen_before != known_gen_ || known_entries_ > kMaxKnownEntries) {
      known_.clear();
      known_entries_ = 0;
    }
    for (const store::RatingRow& r : rows) {
      auto [it, inserted] = known_.try_emplace(r.user);
      if (!inserted) continue;
      absl::StatusOr<std::vector<store::UserRating>> old =
          svc.store_->GetUserRatings(r.user);
      if (old.ok()) {
        for (const store::UserRating& u : *old) it->second[u.item] = u.rating;
        known_entries_ += old->size();
      }
    }
  }
  auto& before = known_;

  int64_t replaced = 0;
  if (!rows.empty()) {
    absl::StatusOr<store::UpsertResult> res = svc.store_->UpsertRatings(rows);
    {
      std::vector<std::string> users;
      users.reserve(rows.size());
      for (const store::RatingRow& r : rows) users.push_back(r.user);
      svc.InvalidateUsers(users);
    }
    if (!res.ok()) {
      Log(LogLevel::kWarn, "add_ratings_failed",
          {F("batch", batch), F("error", res.status().ToString())});
      return res.status();
    }
    replaced = res->replaced;
  }
  response_.set_accepted(response_.accepted() +
                         static_cast<int64_t>(rows.size()));
  response_.set_rejected(response_.rejected() + rejected);
  response_.set_replaced(response_.replaced() + replaced);
  response_.set_batches(batch + 1);

  if (online) {
    // The final value of each (user, item) of the batch (last row wins).
    std::vector<OnlineEvent> events;
    absl::flat_hash_map<std::string, size_t> event_of;
    absl::flat_hash_map<std::string, absl::flat_hash_map<std::string, double>>
        after;
    for (const store::RatingRow& r : rows) after[r.user][r.item] = r.rating;
    for (const store::RatingRow& r : rows) {
      auto [it, inserted] = event_of.try_emplace(r.user, events.size());
      if (inserted) {
        events.push_back(OnlineEvent{});
        events.back().user = r.user;
      }
      auto& final_map = after[r.user];
      auto f = final_map.find(r.item);
      if (f == final_map.end()) continue;  // already handled
      const double now_rating = f->second;
      final_map.erase(f);
      OnlineEvent& ev = events[it->second];
      auto& old_map = before[r.user];
      auto o = old_map.find(r.item);
      if (o == old_map.end()) {
        ev.deltas.push_back(HistDelta{r.item, now_rating, +1});
      } else if (o->second != now_rating) {
        ev.deltas.push_back(HistDelta{r.item, o->second, -1});
        ev.deltas.push_back(HistDelta{r.item, now_rating, +1});
      }
    }
    svc.Enqueue(std::move(events));
    // Keep known_ current if this session was the only writer since.
    uint64_t gen_after = 0;
    {
      std::lock_guard<std::mutex> lock(svc.read_cache_mu_);
      gen_after = svc.ratings_gen_;
    }
    if (gen_after == gen_before + 1) {
      for (const store::RatingRow& r : rows) {
        auto [it, inserted] = known_[r.user].insert_or_assign(r.item, r.rating);
        (void)it;
        if (inserted) ++known_entries_;
      }
      known_gen_ = gen_after;
    } else {
      known_.clear();
      known_entries_ = 0;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::AddRatingsResponse> RbmrecService::AddRatings(
    const std::vector<v1::AddRatingsRequest>& batches) {
  AddRatingsSession session = StartAddRatings();
  for (const v1::AddRatingsRequest& b : batches) {
    if (absl::Status s = session.AddBatch(b); !s.ok()) return s;
  }
  return session.response();
}

absl::StatusOr<v1::DeleteRatingsResponse> RbmrecService::DeleteRatings(
    const v1::DeleteRatingsRequest& request) {
  if (std::string why = IdProblem(request.user_id(), "user_id"); !why.empty()) {
    return absl::InvalidArgumentError(why);
  }
  std::vector<std::string> items(request.item_ids().begin(),
                                 request.item_ids().end());
  const bool online = OnlineActive() && !items.empty();
  std::vector<store::UserRating> old;
  if (online) {
    absl::StatusOr<std::vector<store::UserRating>> r =
        store_->GetUserRatings(request.user_id());
    if (r.ok()) old = std::move(*r);
  }
  absl::StatusOr<int64_t> deleted =
      store_->DeleteRatings(request.user_id(), items);
  InvalidateUsers({request.user_id()});
  if (!deleted.ok()) {
    if (absl::IsNotFound(deleted.status())) {
      // Deleting is idempotent: a user without ratings has nothing to delete.
      v1::DeleteRatingsResponse resp;
      resp.set_deleted(0);
      return resp;
    }
    return deleted.status();
  }
  if (online && *deleted > 0) {
    absl::flat_hash_set<std::string> gone(items.begin(), items.end());
    OnlineEvent ev;
    ev.user = request.user_id();
    for (const store::UserRating& u : old) {
      if (gone.contains(u.item)) {
        ev.deltas.push_back(HistDelta{u.item, u.rating, -1});
      }
    }
    std::vector<OnlineEvent> events;
    events.push_back(std::move(ev));
    Enqueue(std::move(events));
  }
  v1::DeleteRatingsResponse resp;
  resp.set_deleted(*deleted);
  return resp;
}

absl::StatusOr<v1::DeleteUserResponse> RbmrecService::DeleteUser(
    const v1::DeleteUserRequest& request) {
  if (std::string why = IdProblem(request.user_id(), "user_id"); !why.empty()) {
    return absl::InvalidArgumentError(why);
  }
  const bool online = OnlineActive();
  std::vector<store::UserRating> old;
  if (online) {
    absl::StatusOr<std::vector<store::UserRating>> r =
        store_->GetUserRatings(request.user_id());
    if (r.ok()) old = std::move(*r);
  }
  absl::StatusOr<int64_t> deleted = store_->DeleteUser(request.user_id());
  InvalidateUsers({request.user_id()});
  if (!deleted.ok()) {
    if (absl::IsNotFound(deleted.status())) {
      return absl::NotFoundError(
          absl::StrCat("user_id '", request.user_id(), "' not found"));
    }
    return deleted.status();
  }
  if (online && !old.empty()) {
    OnlineEvent ev;
    ev.user = request.user_id();
    ev.update = false;
    for (const store::UserRating& u : old) {
      ev.deltas.push_back(HistDelta{u.item, u.rating, -1});
    }
    std::vector<OnlineEvent> events;
    events.push_back(std::move(ev));
    Enqueue(std::move(events));
  }
  v1::DeleteUserResponse resp;
  resp.set_deleted_ratings(*deleted);
  return resp;
}

absl::StatusOr<v1::PutItemsResponse> RbmrecService::PutItems(
    const v1::PutItemsRequest& request) {
  if (request.items_size() > options_.max_batch_rows) {
    return absl::ResourceExhaustedError(
        absl::StrCat("PutItems has ", request.items_size(),
                     " items, over the server's limit of ",
                     options_.max_batch_rows, " per call (--max-batch)"));
  }
  std::vector<store::ItemRow> rows;
  rows.reserve(static_cast<size_t>(request.items_size()));
  for (int i = 0; i < request.items_size(); ++i) {
    const v1::Item& item = request.items(i);
    if (std::string why = IdProblem(item.item_id(), "item_id"); !why.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("items[", i, "]: ", why));
    }
    std::string json;
    if (!item.attributes().empty()) {
      // Sorted keys for a stable representation.
      std::map<std::string, std::string> attrs(item.attributes().begin(),
                                               item.attributes().end());
      auto quote = [](const std::string& s) {
        std::string out = "\"";
        for (char c : s) {
          const auto uc = static_cast<unsigned char>(c);
          if (c == '"' || c == '\\') {
            out.push_back('\\');
            out.push_back(c);
          } else if (uc < 0x20) {
            out += absl::StrFormat("\\u%04x", static_cast<int>(uc));
          } else {
            out.push_back(c);
          }
        }
        out.push_back('"');
        return out;
      };
      json = "{";
      bool first = true;
      for (const auto& [k, v] : attrs) {
        if (!first) json.push_back(',');
        first = false;
        absl::StrAppend(&json, quote(k), ":", quote(v));
      }
      json.push_back('}');
    }
    rows.push_back(store::ItemRow{item.item_id(), item.title(), json});
  }
  absl::Status stored = store_->PutItems(rows);
  {
    std::lock_guard<std::mutex> lock(read_cache_mu_);
    ++titles_gen_;
    for (const store::ItemRow& r : rows) title_cache_.erase(r.item);
  }
  if (!stored.ok()) return stored;
  v1::PutItemsResponse resp;
  resp.set_stored(static_cast<int64_t>(rows.size()));
  return resp;
}

// ---------------------------------------------------------------------------
// Training

absl::Status RbmrecService::Train(const v1::TrainRequest& request,
                                  const TrainWriter& writer) {
  TrainOptions o = options_.train_defaults;
  const v1::TrainOptions& r = request.options();
  auto bad = [](absl::string_view field, absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.", field, " ", why));
  };
  if (r.has_hidden()) {
    if (r.hidden() < 1 || r.hidden() > 10000)
      return bad("hidden", "must be in 1..10000");
    o.hidden = r.hidden();
  }
  if (r.has_epochs()) {
    if (r.epochs() < 1 || r.epochs() > 100000)
      return bad("epochs", "must be in 1..100000");
    o.max_epochs = r.epochs();
  }
  if (r.has_batch_size()) {
    if (r.batch_size() < 1) return bad("batch_size", "must be >= 1");
    o.batch_size = r.batch_size();
  }
  if (r.has_learning_rate()) {
    if (!(r.learning_rate() > 0 && r.learning_rate() < 100))
      return bad("learning_rate", "must be in (0, 100)");
    o.learning_rate = static_cast<float>(r.learning_rate());
  }
  if (r.has_momentum()) {
    if (!(r.momentum() >= 0 && r.momentum() < 1))
      return bad("momentum", "must be in [0, 1)");
    o.momentum = static_cast<float>(r.momentum());
  }
  if (r.has_weight_decay()) {
    if (!(r.weight_decay() >= 0 && r.weight_decay() < 1))
      return bad("weight_decay", "must be in [0, 1)");
    o.weight_decay = static_cast<float>(r.weight_decay());
  }
  if (r.has_cd_steps()) {
    if (r.cd_steps() < 1 || r.cd_steps() > 1000)
      return bad("cd_steps", "must be in 1..1000");
    o.cd.steps = {{1, r.cd_steps()}};
    o.cd.adaptive = false;
  }
  if (r.has_seed()) o.seed = r.seed();
  if (r.has_threads()) {
    if (r.threads() < 1) return bad("threads", "must be >= 1");
    o.threads = r.threads();
  }
  if (r.has_validation_fraction()) {
    if (!(r.validation_fraction() >= 0 && r.validation_fraction() < 0.5))
      return bad("validation_fraction", "must be in [0, 0.5)");
    o.validation_fraction = r.validation_fraction();
  }
  if (r.has_ensemble()) {
    if (r.ensemble() < 1 || r.ensemble() > 64)
      return bad("ensemble", "must be in 1..64");
    o.ensemble = r.ensemble();
  }
  int cap = options_.max_train_threads;
  if (cap == 0)
    cap = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  if (o.threads == 0 || o.threads > cap) o.threads = cap;
  if (absl::Status s = ValidateTrainOptions(o); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid training options: ", s.message()));
  }

  std::shared_ptr<TrainJob> job;
  {
    std::lock_guard<std::mutex> lock(train_mu_);
    if (shutting_down_) {
      return absl::UnavailableError("the server is shutting down");
    }
    if (job_ != nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("a training job is already running (epoch ",
                       job_->epoch.load(), " of ", job_->max_epochs,
                       "); wait for it to finish or call CancelTraining"));
    }
    absl::StatusOr<store::Stats> stats = store_->GetStats();
    if (!stats.ok()) return stats.status();
    if (stats->ratings == 0) {
      return absl::FailedPreconditionError(
          "there are no ratings to train on; add ratings first (AddRatings)");
    }
    if (train_thread_.joinable()) train_thread_.join();  // finished job
    job = std::make_shared<TrainJob>();
    job->max_epochs = o.max_epochs;
    job_ = job;
    v1::TrainProgress queued;
    queued.set_state(v1::TrainProgress::QUEUED);
    queued.set_max_epochs(o.max_epochs);
    job->Push(queued, false);
    train_thread_ = std::thread([this, job, o] { RunTrainJob(job, o); });
  }
  Log(LogLevel::kInfo, "train_started",
      {F("hidden", o.hidden), F("epochs", o.max_epochs),
       F("batch_size", o.batch_size), F("lr", o.learning_rate),
       F("threads", o.threads), F("ensemble", o.ensemble)});

  size_t sent = 0;
  bool receiver_alive = true;
  while (true) {
    std::vector<v1::TrainProgress> pending;
    bool done = false;
    {
      std::unique_lock<std::mutex> lock(job->mu);
      job->cv.wait(lock,
                   [&] { return job->events.size() > sent || job->done; });
      pending.assign(job->events.begin() + static_cast<std::ptrdiff_t>(sent),
                     job->events.end());
      sent = job->events.size();
      done = job->done;
    }
    for (const v1::TrainProgress& p : pending) {
      if (receiver_alive && !writer(p)) {
        receiver_alive = false;
        Log(LogLevel::kInfo, "train_stream_detached",
            {F("note", "client went away; the job keeps running")});
      }
    }
    if (done || !receiver_alive) return absl::OkStatus();
  }
}

void RbmrecService::RunTrainJob(std::shared_ptr<TrainJob> job,
                                TrainOptions options) {
#ifdef __linux__
  if (options_.train_nice > 0) {
    // Lower this thread's priority; the workers FitModel starts inherit it.
    const id_t tid = static_cast<id_t>(syscall(SYS_gettid));
    errno = 0;
    const int now = getpriority(PRIO_PROCESS, tid);
    if (errno == 0 &&
        setpriority(PRIO_PROCESS, tid,
                    std::min(19, now + options_.train_nice)) != 0) {
      Log(LogLevel::kWarn, "train_nice_failed",
          {F("error", std::strerror(errno))});
    }
  }
#endif
  v1::TrainProgress last;
  last.set_max_epochs(options.max_epochs);
  auto finish = [&](v1::TrainProgress::State state, std::string message,
                    int64_t version) {
    last.set_state(state);
    last.set_message(message);
    last.set_model_version(version);
    last.set_eta_seconds(0);
    last.set_elapsed_seconds(Seconds(Clock::now() - job->start));
    {
      std::lock_guard<std::mutex> lock(train_mu_);
      if (job_ == job) job_ = nullptr;
    }
    Log(state == v1::TrainProgress::SUCCEEDED ? LogLevel::kInfo
                                              : LogLevel::kWarn,
        "train_finished",
        {F("state", v1::TrainProgress::State_Name(state)),
         F("version", version), F("epoch", last.epoch()),
         F("validation_rmse", last.validation_rmse()),
         F("seconds", last.elapsed_seconds()), F("message", message)});
    job->Push(last, true);
  };

  uint64_t snapshot_seq = 0;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    snapshot_seq = next_seq_ - 1;
  }
  absl::StatusOr<store::Snapshot> snap = store_->ReadSnapshot();
  if (!snap.ok()) {
    finish(
        v1::TrainProgress::FAILED,
        absl::StrCat("reading the ratings failed: ", snap.status().ToString()),
        0);
    return;
  }
  Dataset ds;
  ds.scale = options_.scale;
  ds.ratings.reserve(snap->ratings.size());
  for (const store::Snapshot::Row& row : snap->ratings) {
    absl::StatusOr<int> k = ds.scale.Index(row.rating);
    if (!k.ok()) {
      finish(v1::TrainProgress::FAILED,
             absl::StrCat("stored rating of user '", snap->users[row.user],
                          "' for item '", snap->items[row.item],
                          "' is off the server's scale ", ds.scale.ToString(),
                          ": ", k.status().message()),
             0);
      return;
    }
    Rating r;
    r.user = ds.users.GetOrAdd(snap->users[static_cast<size_t>(row.user)]);
    r.item = ds.items.GetOrAdd(snap->items[static_cast<size_t>(row.item)]);
    r.k = static_cast<uint8_t>(*k);
    ds.ratings.push_back(r);
  }
  snap = store::Snapshot{};  // free memory
  if (ds.ratings.empty()) {
    finish(v1::TrainProgress::FAILED, "there are no ratings to train on", 0);
    return;
  }
  Log(LogLevel::kInfo, "train_data",
      {F("users", ds.users.size()), F("items", ds.items.size()),
       F("ratings", ds.ratings.size())});
  // Upper bound: every RBM (the user-based members and the item-based one)
  // may run max_epochs; early stopping usually ends sooner.
  const int total_epochs =
      options.max_epochs * (options.ensemble + (options.item_based ? 1 : 0));
  auto progress = [&](int member, const EpochStats& st) -> bool {
    job->epoch = st.epoch;
    const double elapsed = Seconds(Clock::now() - job->start);
    const int done_epochs = member * options.max_epochs + st.epoch;
    v1::TrainProgress p;
    p.set_state(v1::TrainProgress::RUNNING);
    if (member >= options.ensemble) {
      p.set_rbm("item");
    } else {
      p.set_rbm(member == 0 ? "user" : absl::StrCat("user ", member + 1));
    }
    p.set_epoch(st.epoch);
    p.set_max_epochs(options.max_epochs);
    p.set_train_rmse(std::isfinite(st.train_rmse) ? st.train_rmse : 0);
    p.set_validation_rmse(std::isfinite(st.valid_rmse) ? st.valid_rmse : 0);
    p.set_elapsed_seconds(elapsed);
    if (done_epochs > 0 && done_epochs < total_epochs) {
      p.set_eta_seconds(elapsed / done_epochs * (total_epochs - done_epochs));
    }
    last = p;
    job->Push(p, false);
    Log(LogLevel::kDebug, "train_epoch",
        {F("member", member), F("epoch", st.epoch),
         F("train_rmse", st.train_rmse), F("valid_rmse", st.valid_rmse),
         F("seconds", st.seconds)});
    return !job->cancel.load();
  };
  absl::StatusOr<Model> model = FitModel(ds, options, progress);
  if (job->cancel.load() || absl::IsCancelled(model.status())) {
    finish(v1::TrainProgress::CANCELLED,
           job->shutdown.load() ? "cancelled: the server is shutting down"
                                : "cancelled by CancelTraining",
           0);
    return;
  }
  if (!model.ok()) {
    finish(v1::TrainProgress::FAILED, model.status().ToString(), 0);
    return;
  }
  const std::string blob = SerializeModel(*model);
  store::ModelInfo meta;
  meta.kind = "full";
  meta.n_users = model->users.size();
  meta.n_items = model->num_items();
  meta.n_ratings = static_cast<int64_t>(ds.ratings.size());
  meta.metrics_json =
      MetricsJson(model->summary.valid_rmse, model->summary.epochs_run,
                  model->summary.train_seconds, 0);
  std::string note;
  if (model->summary.epochs_run < options.max_epochs) {
    note = absl::StrCat(
        "stopped early: validation RMSE did not improve (best "
        "epoch ",
        model->summary.best_epoch, ")");
  }
  const TrainingSummary summary = model->summary;
  int64_t version = 0;
  {
    std::lock_guard<std::mutex> lock(publish_mu_);
    absl::StatusOr<int64_t> v = store_->InsertModel(meta, blob, true);
    if (!v.ok()) {
      finish(v1::TrainProgress::FAILED,
             absl::StrCat("storing the model failed: ", v.status().ToString()),
             0);
      return;
    }
    version = *v;
    SetCurrent(std::make_shared<const Model>(std::move(*model)), version);
    online_dirty_ = false;
    std::lock_guard<std::mutex> qlock(queue_mu_);
    drop_before_seq_ = std::max(drop_before_seq_, snapshot_seq + 1);
  }
  // The published model's figures, not those of whichever RBM reported
  // last.
  last.set_rbm("");
  last.set_epoch(summary.epochs_run);
  last.set_train_rmse(0);
  last.set_validation_rmse(
      std::isfinite(summary.valid_rmse) ? summary.valid_rmse : 0);
  finish(v1::TrainProgress::SUCCEEDED, note, version);
}

absl::StatusOr<v1::CancelTrainingResponse> RbmrecService::CancelTraining(
    const v1::CancelTrainingRequest&) {
  v1::CancelTrainingResponse resp;
  std::lock_guard<std::mutex> lock(train_mu_);
  if (job_ != nullptr) {
    job_->cancel = true;
    resp.set_was_running(true);
    Log(LogLevel::kInfo, "train_cancel_requested");
  }
  return resp;
}

// ---------------------------------------------------------------------------
// Predictions

absl::StatusOr<RbmrecService::UserView> RbmrecService::ResolveUser(
    const std::shared_ptr<const Model>& model_ptr, const std::string& user_id,
    const google::protobuf::RepeatedPtrField<v1::ItemRating>& ratings) {
  const Model& model = *model_ptr;
  UserView view;
  // Only a named user without ad-hoc ratings is cached (the common case).
  const bool cacheable = !user_id.empty() && ratings.empty();
  uint64_t gen = 0;
  if (!user_id.empty()) {
    if (user_id.size() > kMaxIdBytes) {
      return absl::InvalidArgumentError(IdProblem(user_id, "user_id"));
    }
    view.model_user = model.users.Find(user_id);
    view.folded_in = view.model_user < 0;
    if (cacheable) {
      std::lock_guard<std::mutex> lock(read_cache_mu_);
      const std::shared_ptr<const ResolvedRatings>* hit =
          resolved_cache_.Find(user_id);
      if (hit != nullptr && (*hit)->model.lock() == model_ptr) {
        view.resolved = *hit;
        return view;
      }
      gen = ratings_gen_;
    }
  }
  auto resolved = std::make_shared<ResolvedRatings>();
  resolved->model = model_ptr;
  // (model item, rating index) in arrival order: stored ratings first, then
  // the ad-hoc ones, so that after a stable sort the last entry of an item
  // is the one that counts.
  thread_local std::vector<std::pair<int32_t, uint8_t>> merged;
  merged.clear();
  if (user_id.empty()) {
    if (ratings.empty()) {
      return absl::InvalidArgumentError(
          "user_id is empty and no ad-hoc ratings were given: name a user or "
          "describe an anonymous user with `ratings`");
    }
    view.folded_in = true;
  } else {
    absl::StatusOr<UserRatingsPtr> stored = CachedUserRatings(user_id);
    if (!stored.ok()) return stored.status();
    if (*stored == nullptr) {
      if (view.model_user < 0 && ratings.empty()) {
        return absl::NotFoundError(absl::StrCat(
            "user_id '", user_id,
            "' not found: no stored ratings, unknown to the model, and no "
            "ad-hoc ratings"));
      }
    } else {
      for (const store::UserRating& u : **stored) {
        const int32_t idx = model.items.Find(u.item);
        if (idx < 0) continue;
        resolved->rated_items.push_back(idx);
        absl::StatusOr<int> k = model.scale.Index(u.rating);
        if (!k.ok()) continue;
        merged.emplace_back(idx, static_cast<uint8_t>(*k));
      }
    }
  }
  for (int i = 0; i < ratings.size(); ++i) {
    const v1::ItemRating& r = ratings.Get(i);
    if (std::string why = IdProblem(r.item_id(), "item_id"); !why.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("ratings[", i, "].", why));
    }
    if (std::string why = RatingProblem(r.rating(), model.scale);
        !why.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ratings[", i, "] (item_id '", r.item_id(), "'): ", why));
    }
    const int32_t idx = model.items.Find(r.item_id());
    if (idx < 0) continue;
    resolved->rated_items.push_back(idx);
    merged.emplace_back(idx,
                        static_cast<uint8_t>(*model.scale.Index(r.rating())));
  }
  std::stable_sort(
      merged.begin(), merged.end(),
      [](const auto& a, const auto& b) { return a.first < b.first; });
  UserRatings& out = resolved->ratings;
  out.items.reserve(merged.size());
  out.ks.reserve(merged.size());
  for (size_t i = 0; i < merged.size(); ++i) {
    if (i + 1 < merged.size() && merged[i + 1].first == merged[i].first) {
      continue;  // a later rating of the same item wins
    }
    out.items.push_back(merged[i].first);
    out.ks.push_back(merged[i].second);
  }
  view.resolved = std::move(resolved);
  if (cacheable) {
    // Not if the user's ratings changed while they were read (InvalidateUsers
    // bumps the generation).
    std::lock_guard<std::mutex> lock(read_cache_mu_);
    if (ratings_gen_ == gen) resolved_cache_.Put(user_id, view.resolved);
  }
  return view;
}

absl::StatusOr<v1::PredictRatingsResponse> RbmrecService::PredictRatings(
    const v1::PredictRatingsRequest& request) {
  const int n = request.item_ids_size();
  if (n == 0) {
    return absl::InvalidArgumentError(
        "item_ids is empty: ask for at least one item");
  }
  if (n > options_.max_predict_items) {
    return absl::ResourceExhaustedError(
        absl::StrCat("item_ids has ", n, " items, over the server's limit of ",
                     options_.max_predict_items, " (--max-predict-items)"));
  }
  for (int i = 0; i < n; ++i) {
    if (std::string why = IdProblem(request.item_ids(i), "item_id");
        !why.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("item_ids[", i, "]: ", why));
    }
  }
  absl::StatusOr<Served> served = ModelFor(request.model_version());
  if (!served.ok()) return served.status();
  const Model& model = *served->model;
  absl::StatusOr<UserView> user =
      ResolveUser(served->model, request.user_id(), request.ratings());
  if (!user.ok()) return user.status();

  const int K = model.K();
  thread_local std::vector<int32_t> query;
  thread_local std::vector<float> probs;
  thread_local std::vector<bool> fallback;
  thread_local std::vector<float> fb;
  query.resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    query[static_cast<size_t>(i)] = model.items.Find(request.item_ids(i));
  probs.resize(static_cast<size_t>(n) * static_cast<size_t>(K));
  const VisibleSet v = user->ratings();
  model.Predict(user->model_user, v, query, ToMethod(request.method()),
                probs.data(), &fallback);

  std::vector<std::string> ids(request.item_ids().begin(),
                               request.item_ids().end());
  const std::vector<std::string> titles = CachedTitles(ids);

  v1::PredictRatingsResponse resp;
  resp.set_model_version(served->version);
  FillScale(model.scale, resp.mutable_scale());
  resp.set_folded_in(user->folded_in);
  resp.mutable_predictions()->Reserve(n);
  for (int i = 0; i < n; ++i) {
    float* p = probs.data() + static_cast<size_t>(i) * static_cast<size_t>(K);
    bool is_fallback = fallback[static_cast<size_t>(i)];
    if (!SaneDistribution(p, K)) {  // never hand out NaN
      fb.resize(static_cast<size_t>(K));
      model.FallbackDistribution(v, fb.data());
      std::copy(fb.begin(), fb.end(), p);
      is_fallback = true;
      if (!SaneDistribution(p, K)) {
        for (int k = 0; k < K; ++k) p[k] = 1.0f / static_cast<float>(K);
      }
    }
    v1::ItemPrediction* out = resp.add_predictions();
    out->set_item_id(request.item_ids(i));
    out->mutable_probabilities()->Reserve(K);
    for (int k = 0; k < K; ++k) out->add_probabilities(p[k]);
    out->set_expected_rating(model.Expectation(p));
    out->set_fallback(is_fallback);
    out->set_title(titles[static_cast<size_t>(i)]);
  }
  return resp;
}

absl::StatusOr<v1::RecommendResponse> RbmrecService::Recommend(
    const v1::RecommendRequest& request) {
  int n = request.n();
  if (n < 0 || n > options_.max_recommend_n) {
    return absl::InvalidArgumentError(
        absl::StrCat("n must be in 0..", options_.max_recommend_n,
                     " (--max-recommend-n; 0 means 10), got ", n));
  }
  if (n == 0) n = std::min(10, options_.max_recommend_n);
  absl::StatusOr<Served> served = ModelFor(request.model_version());
  if (!served.ok()) return served.status();
  const Model& model = *served->model;
  const int K = model.K();
  const bool by_prob = request.rank_by() == v1::PROBABILITY_AT_LEAST;
  int k0 = 0;
  if (by_prob) {
    const double t = request.threshold();
    if (!std::isfinite(t) || t < model.scale.min() - 1e-9 ||
        t > model.scale.max() + 1e-9) {
      return absl::InvalidArgumentError(absl::StrCat(
          "threshold ", t, " is outside the scale ", model.scale.ToString()));
    }
    k0 = static_cast<int>(
        std::ceil((t - model.scale.min()) / model.scale.step() - 1e-6));
    k0 = std::clamp(k0, 0, K - 1);
  }
  absl::StatusOr<UserView> user =
      ResolveUser(served->model, request.user_id(), request.ratings());
  if (!user.ok()) return user.status();

  const PredictMethod method = ToMethod(request.method());
  const int32_t m = model.num_items();
  // Ranking score of a distribution: the expected rating, or the
  // probability of a rating >= the threshold.
  thread_local std::vector<float> values;
  values.resize(static_cast<size_t>(K));
  for (int k = 0; k < K; ++k) {
    values[static_cast<size_t>(k)] =
        by_prob ? (k >= k0 ? 1.0f : 0.0f)
                : static_cast<float>(model.scale.Value(k));
  }
  auto score_of = [&](const float* p) {
    float score = 0;
    if (by_prob) {
      for (int k = k0; k < K; ++k) score += p[k];
    } else {
      score = static_cast<float>(model.Expectation(p));
    }
    return score;
  };
  thread_local std::vector<uint8_t> excluded;
  excluded.assign(static_cast<size_t>(m), 0);
  for (const int32_t idx : user->rated_items()) {
    excluded[static_cast<size_t>(idx)] = 1;
  }
  auto better = [&](const std::pair<float, int32_t>& a,
                    const std::pair<float, int32_t>& b) {
    if (a.first != b.first) return a.first > b.first;
    return model.items.Name(a.second) < model.items.Name(b.second);
  };
  // Two stages. (1) Every unrated item with training data gets a score:
  // by mean field (ScoreAllMeanField: one matrix-vector product per RBM and
  // no distributions kept), or, with recommend_candidates = 0 and EXACT, by
  // the exact rule (m*K*F softplus terms, ~0.9 ms of CPU for ML-100k:
  // all_exact of rbmrec-scoring-bench). (2) The best C are scored again
  // with the requested method (C = max(recommend_candidates, 3n), or n
  // when stage 1 already used it) and those numbers are the answer; for
  // ML-100k the mean-field top 30 holds the exact top 10 (rbmrec-scoring-
  // bench: recall 1.0000).
  thread_local std::vector<float> first;
  thread_local RowMatrixXf all;
  thread_local std::vector<std::pair<float, int32_t>> cand;
  const bool exact_all =
      method == PredictMethod::kExact && options_.recommend_candidates == 0;
  first.resize(static_cast<size_t>(m));
  if (exact_all) {
    PredictAllFast(model, user->model_user, user->ratings(),
                   PredictMethod::kExact, &all);
    for (int32_t i = 0; i < m; ++i) {
      const float* p = all.row(i).data();
      first[static_cast<size_t>(i)] =
          model.Trained(i) && SaneDistribution(p, K) ? score_of(p) : NAN;
    }
  } else {
    ScoreAllMeanField(model, user->model_user, user->ratings(), values.data(),
                      first.data());
  }
  cand.clear();
  for (int32_t i = 0; i < m; ++i) {
    const float score = first[static_cast<size_t>(i)];
    if (excluded[static_cast<size_t>(i)] || !std::isfinite(score)) continue;
    cand.emplace_back(score, i);
  }
  const size_t c =
      std::min(cand.size(), exact_all || method == PredictMethod::kMeanField
                                ? static_cast<size_t>(n)
                                : static_cast<size_t>(std::max(
                                      options_.recommend_candidates, 3 * n)));
  std::nth_element(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(c),
                   cand.end(), better);
  cand.resize(c);
  // Stage 2: the candidates' distributions by the requested method.
  thread_local std::vector<float> probs;
  thread_local std::vector<int32_t> query;
  query.resize(c);
  for (size_t r = 0; r < c; ++r) query[r] = cand[r].second;
  probs.resize(c * static_cast<size_t>(K));
  model.Predict(user->model_user, user->ratings(), query, method, probs.data(),
                nullptr);
  thread_local std::vector<std::pair<float, int32_t>> ranked;  // (score, row)
  ranked.clear();
  for (size_t r = 0; r < c; ++r) {
    const float* p = probs.data() + r * static_cast<size_t>(K);
    if (!SaneDistribution(p, K)) continue;  // never hand out NaN
    ranked.emplace_back(score_of(p), static_cast<int32_t>(r));
  }
  auto better_row = [&](const std::pair<float, int32_t>& a,
                        const std::pair<float, int32_t>& b) {
    return better({a.first, query[static_cast<size_t>(a.second)]},
                  {b.first, query[static_cast<size_t>(b.second)]});
  };
  std::sort(ranked.begin(), ranked.end(), better_row);
  const size_t top = std::min(ranked.size(), static_cast<size_t>(n));
  std::vector<std::string> ids;
  ids.reserve(top);
  for (size_t r = 0; r < top; ++r) {
    ids.push_back(
        model.items.Name(query[static_cast<size_t>(ranked[r].second)]));
  }
  const std::vector<std::string> titles = CachedTitles(ids);
  v1::RecommendResponse resp;
  resp.set_model_version(served->version);
  for (size_t r = 0; r < top; ++r) {
    const float* p = probs.data() + static_cast<size_t>(ranked[r].second) *
                                        static_cast<size_t>(K);
    v1::Recommendation* rec = resp.add_recommendations();
    rec->set_item_id(ids[r]);
    rec->set_title(titles[r]);
    rec->set_expected_rating(model.Expectation(p));
    if (by_prob) rec->set_probability_at_least(ranked[r].first);
    rec->set_rank(static_cast<int32_t>(r + 1));
  }
  return resp;
}

// ---------------------------------------------------------------------------
// Models and stats

absl::StatusOr<v1::ListModelsResponse> RbmrecService::ListModels(
    const v1::ListModelsRequest&) {
  absl::StatusOr<std::vector<store::ModelInfo>> models = store_->ListModels();
  if (!models.ok()) return models.status();
  v1::ListModelsResponse resp;
  for (const store::ModelInfo& m : *models) *resp.add_models() = ToProto(m);
  return resp;
}

absl::StatusOr<v1::ModelInfo> RbmrecService::ActivateModel(
    const v1::ActivateModelRequest& request) {
  const int64_t version = request.version();
  if (version <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("version must be > 0, got ", version));
  }
  std::lock_guard<std::mutex> lock(publish_mu_);
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
    Log(LogLevel::kError, "activate_model_corrupt",
        {F("version", version), F("error", model.status().ToString())});
    return absl::DataLossError(absl::StrCat(
        "model version ", version, " is corrupt and cannot be loaded (",
        model.status().message(), "); the active model is unchanged"));
  }
  if (absl::Status s = store_->ActivateModel(version); !s.ok()) return s;
  SetCurrent(std::make_shared<const Model>(std::move(*model)), version);
  online_dirty_ = false;
  {
    std::lock_guard<std::mutex> qlock(queue_mu_);
    drop_before_seq_ = std::max(drop_before_seq_, next_seq_);
  }
  Log(LogLevel::kInfo, "model_activated", {F("version", version)});
  absl::StatusOr<std::vector<store::ModelInfo>> models = store_->ListModels();
  if (!models.ok()) return models.status();
  for (const store::ModelInfo& m : *models) {
    if (m.version == version) {
      v1::ModelInfo info = ToProto(m);
      info.set_active(true);
      return info;
    }
  }
  return absl::NotFoundError(
      absl::StrCat("model version ", version, " does not exist"));
}

absl::StatusOr<v1::GetStatsResponse> RbmrecService::GetStats(
    const v1::GetStatsRequest&) {
  absl::StatusOr<store::Stats> stats = store_->GetStats();
  if (!stats.ok()) return stats.status();
  v1::GetStatsResponse resp;
  resp.set_users(stats->users);
  resp.set_items(stats->items);
  resp.set_ratings(stats->ratings);
  // The version actually serving: 0 when the stored active version could not
  // be loaded (see the model_load_failed log line).
  resp.set_active_model_version(Current().version);
  {
    std::lock_guard<std::mutex> lock(served_mu_);
    resp.set_model_load_error(model_load_error_);
  }
  {
    std::lock_guard<std::mutex> lock(train_mu_);
    if (job_ != nullptr) {
      v1::TrainingStatus* t = resp.mutable_training();
      t->set_running(true);
      t->set_epoch(job_->epoch.load());
      t->set_max_epochs(job_->max_epochs);
      t->set_elapsed_seconds(Seconds(Clock::now() - job_->start));
    }
  }
  resp.set_online_updates(online_updates_.load());
  return resp;
}

// ---------------------------------------------------------------------------
// Online updates

void RbmrecService::Enqueue(std::vector<OnlineEvent> events) {
  if (events.empty()) return;
  std::lock_guard<std::mutex> lock(queue_mu_);
  for (OnlineEvent& ev : events) {
    ev.seq = next_seq_++;
    queue_.push_back(std::move(ev));
  }
  queue_cv_.notify_all();
}

void RbmrecService::FlushOnlineForTest() {
  std::unique_lock<std::mutex> lock(queue_mu_);
  queue_idle_cv_.wait(lock, [&] { return queue_.empty() && !online_busy_; });
}

absl::Status RbmrecService::PersistOnlineForTest() {
  std::lock_guard<std::mutex> lock(publish_mu_);
  if (!online_dirty_) return absl::OkStatus();
  return PersistOnlineLocked();
}

void RbmrecService::ApplyOnline(std::deque<OnlineEvent> events) {
  Served cur = Current();
  if (cur.model == nullptr) return;
  uint64_t drop_before = 0;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    drop_before = drop_before_seq_;
  }
  std::vector<const OnlineEvent*> live;
  for (const OnlineEvent& ev : events) {
    if (ev.seq >= drop_before) live.push_back(&ev);
  }
  if (live.empty()) return;
  auto copy = std::make_shared<Model>(*cur.model);
  const RatingScale& scale = copy->scale;
  // New items get parameters when first seen.
  std::vector<std::string> new_items;
  absl::flat_hash_set<std::string> seen;
  for (const OnlineEvent* ev : live) {
    for (const HistDelta& d : ev->deltas) {
      if (d.delta > 0 && copy->items.Find(d.item) < 0 &&
          seen.insert(d.item).second) {
        new_items.push_back(d.item);
      }
    }
  }
  if (!new_items.empty()) {
    AddItems(copy.get(), new_items, options_.train_defaults.seed);
  }
  for (const OnlineEvent* ev : live) {
    // The I-RBM's visible units are the training users.
    const int32_t model_user = copy->users.Find(ev->user);
    for (const HistDelta& d : ev->deltas) {
      const int32_t idx = copy->items.Find(d.item);
      absl::StatusOr<int> k = scale.Index(d.rating);
      if (idx < 0 || !k.ok()) continue;
      AdjustHistogram(copy.get(), idx, *k, d.delta);
      AdjustItemInput(copy.get(), model_user, idx, *k, d.delta);
    }
  }
  OnlineOptions oo;
  oo.learning_rate = options_.online_learning_rate;
  oo.steps = options_.online_steps;
  oo.seed = options_.train_defaults.seed;
  absl::flat_hash_set<std::string> done;
  int64_t updates = 0;
  for (const OnlineEvent* ev : live) {
    if (!ev->update || !done.insert(ev->user).second) continue;
    absl::StatusOr<std::vector<store::UserRating>> ratings =
        store_->GetUserRatings(ev->user);
    if (!ratings.ok()) continue;
    std::map<int32_t, uint8_t> merged;
    for (const store::UserRating& u : *ratings) {
      const int32_t idx = copy->items.Find(u.item);
      absl::StatusOr<int> k = scale.Index(u.rating);
      if (idx < 0 || !k.ok()) continue;
      merged[idx] = static_cast<uint8_t>(*k);
    }
    if (merged.empty()) continue;
    UserRatings ur;
    for (const auto& [idx, k] : merged) {
      ur.items.push_back(idx);
      ur.ks.push_back(k);
    }
    OnlineUserUpdate(copy.get(), ur.view(), oo,
                     std::hash<std::string>{}(ev->user));
    ++updates;
  }
  online_updates_ += updates;
  SetCurrent(std::move(copy), cur.version);
  if (!online_dirty_) dirty_since_ = Clock::now();
  online_dirty_ = true;
  Log(LogLevel::kDebug, "online_applied",
      {F("events", live.size()), F("user_updates", updates),
       F("new_items", new_items.size())});
}

absl::Status RbmrecService::PersistOnlineLocked() {
  Served cur = Current();
  if (cur.model == nullptr) return absl::OkStatus();
  const std::string blob = SerializeModel(*cur.model);
  store::ModelInfo meta;
  meta.kind = "online";
  meta.n_users = cur.model->users.size();
  meta.n_items = cur.model->num_items();
  meta.n_ratings = cur.model->summary.train_ratings;
  meta.metrics_json = MetricsJson(0, 0, 0, cur.version);
  absl::StatusOr<int64_t> v = store_->InsertModel(meta, blob, true);
  if (!v.ok()) {
    Log(LogLevel::kError, "online_persist_failed",
        {F("error", v.status().ToString())});
    dirty_since_ = Clock::now();  // retry after another period
    return v.status();
  }
  SetCurrent(cur.model, *v);
  online_dirty_ = false;
  Log(LogLevel::kInfo, "online_persisted",
      {F("version", *v), F("base_version", cur.version),
       F("updates_total", online_updates_.load())});
  return absl::OkStatus();
}

void RbmrecService::OnlineLoop() {
  const auto period = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options_.online_publish_seconds));
  // Each apply copies the whole model and re-reads every queued user's
  // ratings, so applying per AddRatings batch made a 100k-row import into a
  // server with a model ~7x slower (and starved readers of the store). After
  // an apply that took d, the next one waits max(kMinGap, 4 d) and takes
  // everything queued meanwhile: one model copy and one update per user for
  // many batches, and this thread uses at most ~1/5 of a core.
  constexpr auto kMinGap = std::chrono::milliseconds(200);
  Clock::time_point next_apply = Clock::now();
  while (true) {
    std::optional<Clock::time_point> deadline;
    {
      std::lock_guard<std::mutex> lock(publish_mu_);
      if (online_dirty_) deadline = dirty_since_ + period;
    }
    std::deque<OnlineEvent> batch;
    bool stop = false;
    {
      std::unique_lock<std::mutex> lock(queue_mu_);
      auto ready = [&] { return stop_online_ || !queue_.empty(); };
      if (deadline.has_value()) {
        queue_cv_.wait_until(lock, *deadline, ready);
      } else {
        queue_cv_.wait(lock, ready);
      }
      if (!stop_online_ && !queue_.empty()) {
        queue_cv_.wait_until(lock, next_apply, [&] { return stop_online_; });
      }
      batch.swap(queue_);
      stop = stop_online_;
      online_busy_ = true;
    }
    {
      std::lock_guard<std::mutex> lock(publish_mu_);
      if (!batch.empty() && options_.online) {
        const Clock::time_point t0 = Clock::now();
        ApplyOnline(std::move(batch));
        const Clock::time_point t1 = Clock::now();
        next_apply = t1 + std::max<Clock::duration>(kMinGap, 4 * (t1 - t0));
      }
      if (online_dirty_ && (stop || Clock::now() >= dirty_since_ + period)) {
        (void)PersistOnlineLocked();
      }
    }
    {
      std::lock_guard<std::mutex> lock(queue_mu_);
      online_busy_ = false;
      queue_idle_cv_.notify_all();
      if (stop && queue_.empty()) break;
    }
  }
}

}  // namespace rbmrec::server
