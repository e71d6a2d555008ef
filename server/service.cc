#include "server/service.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/error_reason.h"
#include "core/recommend.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/request_checks.h"

namespace rbmrec::server {
namespace {

constexpr int kMaxRejectedRows = 100;

// Leased scratch objects of each kind kept between requests, per CPU: one
// for the request computing there, one for a thread waiting on the network.
constexpr size_t kIdleScratchPerCpu = 2;

}  // namespace

// ---------------------------------------------------------------------------
// Lifecycle

RbmrecService::RbmrecService(std::unique_ptr<store::Store> store,
                             const ServiceOptions& options)
    : store_(std::move(store)),
      options_(options),
      predict_scratch_(kIdleScratchPerCpu *
                       ScratchPool<PredictScratch>::Cpus()),
      scoring_scratch_(kIdleScratchPerCpu *
                       ScratchPool<ScoringScratch>::Cpus()) {}

absl::StatusOr<std::unique_ptr<RbmrecService>> RbmrecService::Create(
    std::unique_ptr<store::Store> store, const ServiceOptions& options) {
  if (store == nullptr) return absl::InvalidArgumentError("store is null");
  auto positive = [](absl::string_view name, double v) {
    return v > 0
               ? absl::OkStatus()
               : absl::InvalidArgumentError(absl::StrCat(name, " must be > 0"));
  };
  for (absl::Status s :
       {positive("max_batch_rows", options.max_batch_rows),
        positive("max_predict_items", options.max_predict_items),
        positive("max_recommend_n", options.max_recommend_n),
        positive("max_adhoc_ratings", options.max_adhoc_ratings),
        positive("max_model_bytes",
                 static_cast<double>(options.max_model_bytes)),
        positive("online_learning_rate", options.online_learning_rate),
        positive("online_steps", options.online_steps),
        positive("online_publish_seconds", options.online_publish_seconds)}) {
    if (!s.ok()) return s;
  }
  if (options.max_train_threads < 0 || options.max_train_memory_bytes < 0 ||
      options.keep_full_models < 0 || options.keep_online_models < 0 ||
      options.version_cache_bytes < 0 || options.read_cache_bytes < 0 ||
      !(options.activate_tolerance >= 0) ||
      !(options.online_min_apply_gap_seconds >= 0)) {
    return absl::InvalidArgumentError(
        "max_train_threads, max_train_memory_bytes, keep_full_models, "
        "keep_online_models, version_cache_bytes, read_cache_bytes, "
        "activate_tolerance and online_min_apply_gap_seconds must be >= 0");
  }
  if (absl::Status s = ValidateTrainOptions(options.train_defaults); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("training defaults: ", s.message()));
  }
  std::unique_ptr<RbmrecService> svc(
      new RbmrecService(std::move(store), options));
  store::Store* st = svc->store_.get();
  RegistryOptions ro;
  ro.activation = options.activation;
  ro.activate_tolerance = options.activate_tolerance;
  ro.keep_full = options.keep_full_models;
  ro.keep_online = options.keep_online_models;
  ro.version_cache_bytes = static_cast<size_t>(options.version_cache_bytes);
  svc->registry_ = std::make_unique<ModelRegistry>(st, ro);
  svc->registry_->LoadAtStart();
  if (absl::Status s = svc->CheckScale(); !s.ok()) return s;
  svc->caches_ = std::make_unique<ReadCaches>(
      st, static_cast<size_t>(options.read_cache_bytes));
  OnlineUpdaterOptions oo;
  oo.enabled = options.online;
  oo.learning_rate = options.online_learning_rate;
  oo.steps = options.online_steps;
  oo.publish_seconds = options.online_publish_seconds;
  oo.min_apply_gap_seconds = options.online_min_apply_gap_seconds;
  oo.seed = options.train_defaults.seed;
  svc->online_ = std::make_unique<OnlineUpdater>(st, svc->registry_.get(), oo);
  TrainingJobsOptions to;
  to.scale = options.scale;
  to.train_nice = options.train_nice;
  to.max_train_memory_bytes = options.max_train_memory_bytes > 0
                                  ? options.max_train_memory_bytes
                                  : DefaultTrainMemoryBytes();
  to.max_model_bytes = options.max_model_bytes;
  OnlineUpdater* online = svc->online_.get();
  svc->jobs_ = std::make_unique<TrainingJobs>(
      st, svc->registry_.get(), [online] { return online->NextSeq(); }, to);
  if (st->Shared()) {
    ReplicationOptions rep;
    rep.advertise = options.advertise;
    svc->replication_ = std::make_unique<Replication>(
        st, svc->registry_.get(), svc->caches_.get(), online, svc->jobs_.get(),
        rep);
  }
  return svc;
}

RbmrecService::~RbmrecService() { Shutdown(); }

void RbmrecService::BeginShutdown() { jobs_->BeginShutdown(); }

void RbmrecService::Shutdown() {
  std::call_once(shutdown_once_, [this] {
    jobs_->Shutdown();
    online_->Shutdown();  // persists online updates while still leading
    if (replication_ != nullptr) replication_->Stop();
  });
}

bool RbmrecService::Serving() const { return registry_->Serving(); }

bool RbmrecService::ModelResident(int64_t model_version) {
  return registry_->Resident(model_version);
}

bool RbmrecService::RecommendSharesPasses(const v1::RecommendRequest& request) {
  switch (request.rank_by()) {
    case v1::PROBABILITY_RATED:
    case v1::PROBABILITY_RATED_AT_LEAST:
      return false;
    case v1::RANK_BY_UNSPECIFIED: {
      if (request.model_version() != 0) return true;
      const Served served = registry_->Current();
      return served.model == nullptr || !served.model->HasRatedRbm();
    }
    default:
      return true;
  }
}

int64_t RbmrecService::active_version() const {
  return registry_->Current().version;
}

void RbmrecService::FlushOnlineForTest() { online_->Flush(); }

absl::Status RbmrecService::PersistOnlineForTest() {
  return online_->PersistNow();
}

// ---------------------------------------------------------------------------
// Writes

absl::Status RbmrecService::AddRatingsSession::AddBatch(
    const v1::AddRatingsRequest& request) {
  RbmrecService& svc = *service_;
  const int64_t batch = response_.batches();
  const int n = request.ratings_size();
  if (n > svc.options_.max_batch_rows) {
    return OverLimit(absl::StrCat("batch ", batch, ": the number of rows"), n,
                     svc.options_.max_batch_rows, "--max-batch");
  }
  std::vector<store::RatingRow> rows;
  rows.reserve(static_cast<size_t>(n));
  int64_t rejected = 0;
  const RatingScale& scale = svc.options_.scale;
  // RatingScale::StoredValue of each index, computed when first needed.
  std::vector<double> stored(static_cast<size_t>(scale.K()), std::nan(""));
  for (int i = 0; i < n; ++i) {
    const v1::Rating& r = request.ratings(i);
    std::string why = IdProblem(r.user_id(), "user_id");
    if (why.empty()) why = IdProblem(r.item_id(), "item_id");
    int k = 0;
    if (why.empty()) why = RatingProblem(r.rating(), scale, &k);
    if (why.empty()) {
      // Stored as the scale's value it snaps to (4.0000001 on 1:5:1 is
      // stored as 4), never as sent.
      if (std::isnan(stored[k])) stored[k] = scale.StoredValue(k);
      rows.push_back(
          store::RatingRow{r.user_id(), r.item_id(), stored[k], r.timestamp()});
      continue;
    }
    ++rejected;
    if (response_.rejected_rows_size() < kMaxRejectedRows) {
      v1::RejectedRow* row = response_.add_rejected_rows();
      row->set_batch(batch);
      row->set_row(i);
      row->set_user_id(Truncated(r.user_id()));
      row->set_item_id(Truncated(r.item_id()));
      row->set_reason(absl::StrCat("batch ", batch, " row ", i, ": ", why));
    }
  }
  int64_t replaced = 0;
  if (!rows.empty()) {
    const bool online = svc.online_->Active();
    absl::StatusOr<store::UpsertResult> res = svc.store_->UpsertRatings(rows);
    NoteStoreStatus(res.status());
    std::vector<std::string> users;
    users.reserve(rows.size());
    for (const store::RatingRow& r : rows) users.push_back(r.user);
    svc.caches_->InvalidateUsers(users);
    if (!res.ok()) {
      Log(LogLevel::kWarn, "add_ratings_failed",
          {F("batch", batch), F("error", res.status().ToString())});
      return res.status();
    }
    replaced = res->replaced;
    if (online && res->previous.size() == rows.size()) {
      svc.online_->Enqueue(EventsFromUpsert(rows, res->previous));
    }
  }
  response_.set_accepted(response_.accepted() +
                         static_cast<int64_t>(rows.size()));
  response_.set_rejected(response_.rejected() + rejected);
  response_.set_replaced(response_.replaced() + replaced);
  response_.set_batches(batch + 1);
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
  if (request.item_ids_size() > options_.max_predict_items) {
    return OverLimit("the number of item_ids", request.item_ids_size(),
                     options_.max_predict_items, "--max-predict-items");
  }
  for (int i = 0; i < request.item_ids_size(); ++i) {
    if (std::string why = IdProblem(request.item_ids(i), "item_id");
        !why.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("item_ids[", i, "]: ", why));
    }
  }
  std::vector<std::string> items(request.item_ids().begin(),
                                 request.item_ids().end());
  const bool online = online_->Active() && !items.empty();
  std::vector<store::UserRating> old;
  if (online) {
    absl::StatusOr<std::vector<store::UserRating>> r =
        store_->GetUserRatings(request.user_id());
    NoteStoreStatus(r.status());
    if (r.ok()) old = std::move(*r);
  }
  absl::StatusOr<int64_t> deleted =
      store_->DeleteRatings(request.user_id(), items);
  NoteStoreStatus(deleted.status());
  caches_->InvalidateUsers({request.user_id()});
  if (!deleted.ok()) {
    // As DeleteUser: an unknown user is NOT_FOUND. A known user with none
    // of the items (or no rating left) is OK with deleted = 0.
    if (absl::IsNotFound(deleted.status())) {
      return absl::NotFoundError(
          absl::StrCat("user_id '", request.user_id(), "' not found"));
    }
    return deleted.status();
  }
  if (online && *deleted > 0) {
    absl::flat_hash_set<std::string> gone(items.begin(), items.end());
    std::vector<OnlineEvent> events(1);
    events[0].user = request.user_id();
    for (const store::UserRating& u : old) {
      if (gone.contains(u.item)) {
        events[0].deltas.push_back(HistDelta{u.item, u.rating, -1});
      }
    }
    online_->Enqueue(std::move(events));
  }
  v1::DeleteRatingsResponse resp;
  resp.set_deleted(*deleted);
  return resp;
}

absl::StatusOr<v1::DeleteUserResponse> RbmrecService::DeleteUser(
    const v1::DeleteUserRequest& request) {
  const std::string& user = request.user_id();
  if (std::string why = IdProblem(user, "user_id"); !why.empty()) {
    return absl::InvalidArgumentError(why);
  }
  // The ratings as stored just before the deletion: the contributions to
  // take out of the models (and the online histogram deltas).
  std::vector<store::UserRating> old;
  bool in_store = true;
  {
    absl::StatusOr<std::vector<store::UserRating>> r =
        store_->GetUserRatings(user);
    NoteStoreStatus(r.status());
    if (absl::IsNotFound(r.status())) {
      in_store = false;
    } else if (!r.ok()) {
      return r.status();
    } else {
      old = std::move(*r);
    }
  }
  v1::DeleteUserResponse resp;
  if (in_store) {
    absl::StatusOr<int64_t> deleted = store_->DeleteUser(user);
    NoteStoreStatus(deleted.status());
    caches_->InvalidateUsers({user});
    if (absl::IsNotFound(deleted.status())) {
      in_store = false;  // deleted by a concurrent call
    } else if (!deleted.ok()) {
      return deleted.status();
    } else {
      resp.set_deleted_ratings(*deleted);
    }
  }
  // A user the store no longer has may still be in the models (a repeated
  // call after a failed erasure): erase from them anyway.
  std::vector<std::pair<std::string, double>> ratings;
  ratings.reserve(old.size());
  for (const store::UserRating& u : old) ratings.emplace_back(u.item, u.rating);
  absl::StatusOr<ModelRegistry::Erasure> erased =
      registry_->EraseUser(user, ratings);
  caches_->InvalidateUsers({user});
  if (!erased.ok()) {
    return absl::Status(
        erased.status().code(),
        absl::StrCat(in_store ? "the user's ratings were deleted, but " : "",
                     "erasing user_id '", user,
                     "' from the stored model "
                     "versions failed: ",
                     erased.status().message(), "; call DeleteUser again"));
  }
  if (!in_store && !erased->served && erased->versions_rewritten == 0 &&
      erased->failures.empty()) {
    return absl::NotFoundError(absl::StrCat("user_id '", user, "' not found"));
  }
  if (!erased->failures.empty()) {
    return absl::InternalError(absl::StrCat(
        in_store ? "the user's ratings were deleted and " : "", "user_id '",
        user, "' was erased from the served model and ",
        erased->versions_rewritten, " stored version(s), but not from: ",
        absl::StrJoin(erased->failures, "; "),
        "; delete those versions (DeleteModel) or call DeleteUser again"));
  }
  // Histogram deltas for the online model (the per-user state is gone
  // already, so no item-input change and no user update).
  if (online_->Active() && !old.empty()) {
    std::vector<OnlineEvent> events(1);
    events[0].user = user;
    events[0].update = false;
    for (const store::UserRating& u : old) {
      events[0].deltas.push_back(HistDelta{u.item, u.rating, -1});
    }
    online_->Enqueue(std::move(events));
  }
  resp.set_erased_from_served_model(erased->served);
  resp.set_model_versions_rewritten(erased->versions_rewritten);
  const int64_t pending = ++erasures_since_training_;
  resp.set_erasures_since_training(pending);
  if (options_.retrain_after_erasures > 0 &&
      pending >= options_.retrain_after_erasures && IsLeader()) {
    resp.set_retrain_started(StartRetrain());
  }
  return resp;
}

bool RbmrecService::StartRetrain() {
  absl::StatusOr<TrainJobRequest> job =
      TrainJobFromProto(v1::TrainRequest(), options_.train_defaults,
                        options_.activation, options_.max_train_threads);
  if (!job.ok()) return false;
  const int64_t pending = erasures_since_training_.exchange(0);
  // The writer declines every message: Run returns once the job is queued
  // and the job runs on (TrainingJobs::Run).
  absl::Status s = jobs_->Run(job->options, job->policy,
                              [](const v1::TrainProgress&) { return false; });
  if (!s.ok()) {
    erasures_since_training_ += pending;
    Log(LogLevel::kWarn, "retrain_after_erasures_not_started",
        {F("error", s.ToString())});
    return false;
  }
  Log(LogLevel::kInfo, "retrain_after_erasures_started",
      {F("erasures", pending)});
  return true;
}

absl::StatusOr<v1::PutItemsResponse> RbmrecService::PutItems(
    const v1::PutItemsRequest& request) {
  if (request.items_size() > options_.max_batch_rows) {
    return OverLimit("the number of items", request.items_size(),
                     options_.max_batch_rows, "--max-batch");
  }
  std::vector<store::ItemRow> rows;
  std::vector<std::string> ids;
  rows.reserve(static_cast<size_t>(request.items_size()));
  for (int i = 0; i < request.items_size(); ++i) {
    const v1::Item& item = request.items(i);
    if (absl::Status s = CheckItem(item, i); !s.ok()) return s;
    rows.push_back(store::ItemRow{item.item_id(), item.title(),
                                  AttributesJson(item.attributes())});
    ids.push_back(item.item_id());
  }
  absl::Status stored = store_->PutItems(rows);
  NoteStoreStatus(stored);
  caches_->InvalidateTitles(ids);
  if (!stored.ok()) return stored;
  v1::PutItemsResponse resp;
  resp.set_stored(static_cast<int64_t>(rows.size()));
  return resp;
}

absl::Status RbmrecService::CheckScale() {
  const std::string want = options_.scale.ToString();
  auto mismatch = [&](absl::string_view what, const std::string& have) {
    return absl::FailedPreconditionError(
        absl::StrCat("the database's ", what, " the rating scale ", have,
                     " but this server was started with --scale ", want,
                     ": start it with "
                     "--scale ",
                     have,
                     ", or use another database (its ratings and models are on "
                     "their scale)"));
  };
  const Served served = registry_->Current();
  if (served.model != nullptr && served.model->scale().ToString() != want) {
    return mismatch(
        absl::StrCat("active model version ", served.version, " uses"),
        served.model->scale().ToString());
  }
  absl::StatusOr<std::string> recorded =
      store_->InitSetting(kScaleSetting, want);
  if (!recorded.ok()) return recorded.status();
  if (*recorded != want) return mismatch("ratings are on", *recorded);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Training

bool RbmrecService::IsLeader() const {
  return replication_ == nullptr || replication_->leader();
}

absl::Status RbmrecService::CheckLeader(const char* rpc) const {
  if (IsLeader()) return absl::OkStatus();
  const std::string leader = replication_->leader_address();
  absl::Status st = absl::FailedPreconditionError(absl::StrCat(
      "this server (", replication_->advertise(),
      ") is a follower replica: ", rpc, " runs on the leader",
      leader.empty() ? std::string(", which is not known yet; retry shortly")
                     : absl::StrCat(" at ", leader)));
  st = WithReason(std::move(st), kReasonNotLeader);
  return leader.empty() ? st : WithLeader(std::move(st), leader);
}

absl::Status RbmrecService::Train(const v1::TrainRequest& request,
                                  const TrainWriter& writer) {
  if (absl::Status s = CheckLeader("Train"); !s.ok()) return s;
  absl::StatusOr<TrainJobRequest> job =
      TrainJobFromProto(request, options_.train_defaults, options_.activation,
                        options_.max_train_threads);
  if (!job.ok()) return job.status();
  const int64_t pending = erasures_since_training_.exchange(0);
  absl::Status s = jobs_->Run(job->options, job->policy, writer);
  if (!s.ok()) erasures_since_training_ += pending;  // no job started
  return s;
}

absl::StatusOr<v1::CancelTrainingResponse> RbmrecService::CancelTraining(
    const v1::CancelTrainingRequest&) {
  if (absl::Status s = CheckLeader("CancelTraining"); !s.ok()) return s;
  v1::CancelTrainingResponse resp;
  resp.set_was_running(jobs_->Cancel());
  return resp;
}

// ---------------------------------------------------------------------------
// Predictions

absl::Status RbmrecService::CheckAdHoc(
    const google::protobuf::RepeatedPtrField<v1::ItemRating>& ratings,
    const RatingScale& scale) const {
  if (ratings.size() > options_.max_adhoc_ratings) {
    return OverLimit("the number of ad-hoc ratings", ratings.size(),
                     options_.max_adhoc_ratings, "--max-adhoc-ratings");
  }
  for (int i = 0; i < ratings.size(); ++i) {
    const v1::ItemRating& r = ratings.Get(i);
    if (std::string why = IdProblem(r.item_id(), "item_id"); !why.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("ratings[", i, "].", why));
    }
    if (std::string why = RatingProblem(r.rating(), scale); !why.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ratings[", i, "] (item_id '", r.item_id(), "'): ", why));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::PredictRatingsResponse> RbmrecService::PredictRatings(
    const v1::PredictRatingsRequest& request) {
  const int n = request.item_ids_size();
  if (n == 0) {
    return absl::InvalidArgumentError(
        "item_ids is empty: ask for at least one item");
  }
  if (n > options_.max_predict_items) {
    return OverLimit("the number of item_ids", n, options_.max_predict_items,
                     "--max-predict-items");
  }
  for (int i = 0; i < n; ++i) {
    if (std::string why = IdProblem(request.item_ids(i), "item_id");
        !why.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("item_ids[", i, "]: ", why));
    }
  }
  if (!request.user_id().empty()) {
    if (std::string why = IdProblem(request.user_id(), "user_id");
        !why.empty()) {
      return absl::InvalidArgumentError(why);
    }
  }
  absl::StatusOr<PredictMethod> method = ToMethod(request.method());
  if (!method.ok()) return method.status();
  if (absl::Status s = CheckAdHoc(request.ratings(), options_.scale); !s.ok())
    return s;
  absl::StatusOr<Served> served = registry_->Get(request.model_version());
  if (!served.ok()) return served.status();
  const Model& model = *served->model;
  absl::StatusOr<UserView> user =
      caches_->Resolve(served->model, request.user_id(), request.ratings());
  if (!user.ok()) return user.status();

  const int K = model.K();
  // Leased buffers: no allocation per request once warm.
  ScratchPool<PredictScratch>::Lease scratch = predict_scratch_.Acquire();
  std::vector<int32_t>& query = scratch->query;
  std::vector<float>& probs = scratch->probs;
  std::vector<bool>& fallback = scratch->fallback;
  query.resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    query[static_cast<size_t>(i)] = model.items().Find(request.item_ids(i));
  probs.resize(static_cast<size_t>(n) * static_cast<size_t>(K));
  const VisibleSet v = user->ratings();
  model.PredictWith(user->model_user, v, user->member_x(), query, *method,
                    probs.data(), &fallback, &scratch->model);
  const std::vector<std::string> titles =
      caches_->Titles(std::vector<std::string>(request.item_ids().begin(),
                                               request.item_ids().end()));

  v1::PredictRatingsResponse resp;
  resp.set_model_version(served->version);
  FillScale(model.scale(), resp.mutable_scale());
  resp.set_folded_in(user->folded_in);
  resp.mutable_predictions()->Reserve(n);
  for (int i = 0; i < n; ++i) {
    float* p = probs.data() + static_cast<size_t>(i) * static_cast<size_t>(K);
    bool is_fallback = fallback[static_cast<size_t>(i)];
    if (!SaneDistribution(p, K)) {  // never hand out NaN
      model.FallbackDistribution(v, p);
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
  if (n < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("n must be >= 0 (0 means 10), got ", n));
  }
  if (n > options_.max_recommend_n) {
    return OverLimit("n", n, options_.max_recommend_n, "--max-recommend-n");
  }
  if (n == 0) n = std::min(10, options_.max_recommend_n);
  absl::StatusOr<PredictMethod> method = ToMethod(request.method());
  if (!method.ok()) return method.status();
  if (!v1::RankBy_IsValid(request.rank_by())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank_by ", static_cast<int>(request.rank_by()),
        " is not a known RankBy (EXPECTED_RATING = 1, PROBABILITY_AT_LEAST = "
        "2, PROBABILITY_RATED = 3, PROBABILITY_RATED_AT_LEAST = 4)"));
  }
  if (!request.user_id().empty()) {
    if (std::string why = IdProblem(request.user_id(), "user_id");
        !why.empty()) {
      return absl::InvalidArgumentError(why);
    }
  }
  if (absl::Status s = CheckAdHoc(request.ratings(), options_.scale); !s.ok())
    return s;
  absl::StatusOr<Served> served = registry_->Get(request.model_version());
  if (!served.ok()) return served.status();
  const Model& model = *served->model;
  RankOptions ro;
  ro.method = *method;
  ro.n = n;
  ro.candidates = options_.recommend_candidates;
  v1::RankBy rank_by = request.rank_by();
  if (rank_by == v1::RANK_BY_UNSPECIFIED) {
    rank_by = model.HasRatedRbm()        ? v1::PROBABILITY_RATED_AT_LEAST
              : request.threshold() != 0 ? v1::PROBABILITY_AT_LEAST
                                         : v1::EXPECTED_RATING;
  }
  switch (rank_by) {
    case v1::PROBABILITY_AT_LEAST:
      ro.by = RankBy::kAtLeast;
      break;
    case v1::PROBABILITY_RATED:
      ro.by = RankBy::kRated;
      break;
    case v1::PROBABILITY_RATED_AT_LEAST:
      ro.by = RankBy::kRatedAtLeast;
      break;
    default:
      ro.by = RankBy::kExpected;
      break;
  }
  if (NeedsRatedRbm(ro.by) && !model.HasRatedRbm()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rank_by ", v1::RankBy_Name(rank_by), ": model version ",
        served->version,
        " has no rated RBM (trained before it existed or with rated_hidden "
        "0); train a new model, or rank by EXPECTED_RATING or "
        "PROBABILITY_AT_LEAST"));
  }
  double threshold = 0;
  if (UsesThreshold(ro.by)) {
    threshold = request.threshold();
    if (threshold == 0 && rank_by == v1::PROBABILITY_RATED_AT_LEAST) {
      ro.k0 = caches_->DefaultThreshold(served->model);
      threshold = model.scale().Value(ro.k0);
    } else {
      if (!std::isfinite(threshold) || threshold < model.scale().min() - 1e-9 ||
          threshold > model.scale().max() + 1e-9) {
        return absl::InvalidArgumentError(
            absl::StrCat("threshold ", threshold, " is outside the scale ",
                         model.scale().ToString()));
      }
      ro.k0 = std::clamp(
          static_cast<int>(std::ceil(
              (threshold - model.scale().min()) / model.scale().step() - 1e-6)),
          0, model.K() - 1);
    }
  }
  absl::StatusOr<UserView> user =
      caches_->Resolve(served->model, request.user_id(), request.ratings());
  if (!user.ok()) return user.status();
  // Leased scoring buffers, sized to the model after their first use.
  ScratchPool<ScoringScratch>::Lease scratch = scoring_scratch_.Acquire();
  ro.member_x = user->member_x();  // cached with the user's ratings
  const std::vector<Ranked> ranked =
      RankItems(model, user->model_user, user->ratings(), user->rated_items(),
                ro, scratch.get());
  std::vector<std::string> ids;
  ids.reserve(ranked.size());
  for (const Ranked& r : ranked) ids.push_back(model.items().Name(r.item));
  const std::vector<std::string> titles = caches_->Titles(ids);
  v1::RecommendResponse resp;
  resp.set_model_version(served->version);
  resp.set_rank_by(rank_by);
  resp.set_threshold(threshold);
  for (size_t r = 0; r < ranked.size(); ++r) {
    v1::Recommendation* rec = resp.add_recommendations();
    rec->set_item_id(ids[r]);
    rec->set_title(titles[r]);
    rec->set_expected_rating(ranked[r].expected);
    if (UsesThreshold(ro.by)) {
      rec->set_probability_at_least(ranked[r].at_least);
    }
    if (NeedsRatedRbm(ro.by)) rec->set_probability_rated(ranked[r].p_rated);
    rec->set_rank(static_cast<int32_t>(r + 1));
  }
  return resp;
}

// ---------------------------------------------------------------------------
// Models and stats

absl::StatusOr<v1::ListModelsResponse> RbmrecService::ListModels(
    const v1::ListModelsRequest& request) {
  absl::StatusOr<std::vector<store::ModelInfo>> models = store_->ListModels();
  NoteStoreStatus(models.status());
  if (!models.ok()) return models.status();
  v1::ListModelsResponse resp;
  for (const store::ModelInfo& m : *models) {
    if (request.verify()) {
      absl::Status s = registry_->Verify(m.version);
      // A version deleted meanwhile is simply not marked.
      if (!s.ok() && !absl::IsDataLoss(s) && !absl::IsNotFound(s)) return s;
    }
    v1::ModelInfo* info = resp.add_models();
    *info = ToProto(m);
    info->set_corrupt(registry_->CorruptReason(m.version));
  }
  return resp;
}

absl::StatusOr<v1::ModelInfo> RbmrecService::ActivateModel(
    const v1::ActivateModelRequest& request) {
  absl::StatusOr<store::ModelInfo> info =
      registry_->Activate(request.version(), online_->NextSeq());
  if (!info.ok()) return info.status();
  return ToProto(*info);
}

absl::StatusOr<v1::DeleteModelResponse> RbmrecService::DeleteModel(
    const v1::DeleteModelRequest& request) {
  absl::StatusOr<int64_t> freed =
      registry_->Delete(request.version(), request.force());
  if (!freed.ok()) return freed.status();
  v1::DeleteModelResponse resp;
  resp.set_freed_bytes(*freed);
  return resp;
}

absl::StatusOr<v1::ModelInfo> RbmrecService::PinModel(
    const v1::PinModelRequest& request) {
  absl::StatusOr<store::ModelInfo> info =
      registry_->Pin(request.version(), request.pinned());
  if (!info.ok()) return info.status();
  return ToProto(*info);
}

absl::StatusOr<v1::PruneModelsResponse> RbmrecService::PruneModels(
    const v1::PruneModelsRequest& request) {
  store::RetentionPolicy policy{options_.keep_full_models,
                                options_.keep_online_models};
  if (request.has_keep_full()) policy.keep_full = request.keep_full();
  if (request.has_keep_online()) policy.keep_online = request.keep_online();
  absl::StatusOr<store::PruneResult> r = registry_->Prune(&policy);
  if (!r.ok()) return r.status();
  v1::PruneModelsResponse resp;
  for (const int64_t v : r->deleted_versions) resp.add_deleted_versions(v);
  resp.set_freed_bytes(r->freed_bytes);
  return resp;
}

absl::StatusOr<v1::GetStatsResponse> RbmrecService::GetStats(
    const v1::GetStatsRequest&) {
  absl::StatusOr<store::Stats> stats = store_->GetStats();
  NoteStoreStatus(stats.status());
  if (!stats.ok()) return stats.status();
  v1::GetStatsResponse resp;
  resp.set_users(stats->users);
  resp.set_items(stats->items);
  resp.set_ratings(stats->ratings);
  resp.set_model_versions(stats->model_versions);
  resp.set_database_bytes(stats->database_bytes);
  resp.set_database_file_bytes(stats->database_file_bytes);
  resp.set_wal_bytes(stats->wal_bytes);
  resp.set_database_max_bytes(stats->database_max_bytes);
  // The version actually serving (0 when none could be loaded).
  resp.set_active_model_version(registry_->Current().version);
  resp.set_model_load_error(registry_->load_error());
  resp.set_leader(IsLeader());
  if (replication_ != nullptr) {
    resp.set_leader_address(replication_->leader_address());
  }
  const TrainingJobs::SlotStatus slot = jobs_->Status();
  v1::TrainingStatus* t = resp.mutable_training();  // always present
  t->set_running(slot.running);
  t->set_epoch(slot.epoch);
  t->set_max_epochs(slot.max_epochs);
  t->set_elapsed_seconds(slot.elapsed_seconds);
  t->set_validation_rmse(slot.validation_rmse);
  t->set_rbm(slot.rbm);
  resp.set_online_updates(online_->updates());
  return resp;
}

}  // namespace rbmrec::server
