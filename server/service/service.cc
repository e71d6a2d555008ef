#include "server/service/service.h"

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
#include "server/metrics/metrics.h"
#include "server/service/erasure.h"
#include "server/service/proto_convert.h"
#include "server/service/request_checks.h"
#include "server/service/request_plan.h"

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
  if (absl::Status s = CheckServiceOptions(options); !s.ok()) return s;
  std::unique_ptr<RbmrecService> svc(
      new RbmrecService(std::move(store), options));
  store::Store* st = svc->store_.get();
  svc->registry_ = std::make_unique<ModelRegistry>(st, options.registry);
  svc->registry_->LoadAtStart();
  if (absl::Status s = svc->CheckScale(); !s.ok()) return s;
  svc->caches_ = std::make_unique<ReadCaches>(
      st, static_cast<size_t>(options.read_cache_bytes));
  OnlineUpdaterOptions online_options = options.online;
  online_options.seed = options.train_defaults.seed;
  svc->online_ =
      std::make_unique<OnlineUpdater>(st, svc->registry_.get(), online_options);
  TrainingJobsOptions training_options = options.training;
  training_options.scale = options.scale;
  OnlineUpdater* online = svc->online_.get();
  svc->jobs_ = std::make_unique<TrainingJobs>(
      st, svc->registry_.get(), [online] { return online->NextSeq(); },
      training_options);
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

Placement RbmrecService::PlacePredict(
    const v1::PredictRatingsRequest& request) {
  Placement p;
  p.resident = registry_->Resident(request.model_version());
  return p;
}

Placement RbmrecService::PlaceSimilar(const v1::SimilarItemsRequest& request) {
  Placement p;
  p.resident = registry_->Resident(request.model_version());
  return p;
}

Placement RbmrecService::PlaceRecommend(const v1::RecommendRequest& request) {
  Placement p;
  p.resident = registry_->Resident(request.model_version());
  if (request.rank_by() == v1::RANK_BY_UNSPECIFIED &&
      request.model_version() != 0) {
    // The default of a version other than the active one depends on a
    // model not at hand: taken to share passes.
    p.shares_passes = true;
    return p;
  }
  bool has_rated_rbm = false, has_item_regression = false;
  if (request.rank_by() == v1::RANK_BY_UNSPECIFIED) {
    const Served served = registry_->Current();
    has_rated_rbm = served.model != nullptr && served.model->HasRatedRbm();
    has_item_regression =
        served.model != nullptr && served.model->HasItemRegression();
  }
  p.shares_passes =
      SharesPasses(ResolveRankBy(request, has_rated_rbm, has_item_regression));
  return p;
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
  if (n > svc.options_.limits.max_batch_rows) {
    return OverLimit(absl::StrCat("batch ", batch, ": the number of rows"), n,
                     svc.options_.limits.max_batch_rows, "--max-batch");
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
    if (why.empty() && !v1::Rating::Kind_IsValid(r.kind())) {
      why = absl::StrCat("kind ", static_cast<int>(r.kind()),
                         " is not a Rating.Kind (RATING or VIEW)");
    }
    const bool view = r.kind() == v1::Rating::VIEW;
    if (why.empty() && view && r.rating() != 0) {
      why = absl::StrCat("rating must be unset for a view, got ", r.rating());
    }
    if (why.empty() && view) {
      rows.push_back(store::RatingRow{r.user_id(), r.item_id(), 0.0,
                                      r.timestamp(), /*view=*/true});
      continue;
    }
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
  int64_t views = 0;
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
    views = res->views;
    if (online && res->previous.size() == rows.size()) {
      svc.online_->Enqueue(EventsFromUpsert(rows, res->previous));
    }
  }
  response_.set_accepted(response_.accepted() +
                         static_cast<int64_t>(rows.size()));
  response_.set_rejected(response_.rejected() + rejected);
  response_.set_replaced(response_.replaced() + replaced);
  response_.set_views(response_.views() + views);
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
  if (request.item_ids_size() > options_.limits.max_predict_items) {
    return OverLimit("the number of item_ids", request.item_ids_size(),
                     options_.limits.max_predict_items, "--max-predict-items");
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
  absl::StatusOr<v1::DeleteUserResponse> erased = EraseUserEverywhere(
      user, store_.get(), registry_.get(), caches_.get(), online_.get());
  if (!erased.ok()) return erased.status();
  v1::DeleteUserResponse& resp = *erased;
  const int64_t pending = ++erasures_since_training_;
  resp.set_erasures_since_training(pending);
  if (options_.retrain_after_erasures > 0 &&
      pending >= options_.retrain_after_erasures && IsLeader()) {
    resp.set_retrain_started(StartRetrain());
  }
  return resp;
}

bool RbmrecService::StartRetrain() {
  absl::StatusOr<TrainJobRequest> job = TrainJobFromProto(
      v1::TrainRequest(), options_.train_defaults, options_.registry.activation,
      options_.max_train_threads);
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
  const int total = request.items_size() + request.hide_item_ids_size() +
                    request.unhide_item_ids_size();
  if (total > options_.limits.max_batch_rows) {
    return OverLimit("the number of items", total,
                     options_.limits.max_batch_rows, "--max-batch");
  }
  std::vector<store::ItemRow> rows;
  std::vector<std::string> ids;
  rows.reserve(static_cast<size_t>(request.items_size()));
  for (int i = 0; i < request.items_size(); ++i) {
    const v1::Item& item = request.items(i);
    if (absl::Status s = CheckItem(item, i); !s.ok()) return s;
    rows.push_back(store::ItemRow{
        item.item_id(), item.title(), AttributesJson(item.attributes()),
        std::vector<std::string>(item.categories().begin(),
                                 item.categories().end()),
        item.hidden()});
    ids.push_back(item.item_id());
  }
  const std::vector<std::string> hide(request.hide_item_ids().begin(),
                                      request.hide_item_ids().end());
  const std::vector<std::string> unhide(request.unhide_item_ids().begin(),
                                        request.unhide_item_ids().end());
  for (const auto* list : {&hide, &unhide}) {
    const char* field = list == &hide ? "hide_item_ids" : "unhide_item_ids";
    for (size_t i = 0; i < list->size(); ++i) {
      if (std::string why = IdProblem((*list)[i], "item_id"); !why.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, "[", i, "]: ", why));
      }
    }
  }
  absl::Status stored = store_->PutItems(rows);
  if (stored.ok()) stored = store_->SetItemsHidden(hide, true);
  if (stored.ok()) stored = store_->SetItemsHidden(unhide, false);
  NoteStoreStatus(stored);
  caches_->InvalidateTitles(ids);  // and re-reads the catalogue
  if (!stored.ok()) return stored;
  v1::PutItemsResponse resp;
  resp.set_stored(
      static_cast<int64_t>(rows.size() + hide.size() + unhide.size()));
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
  absl::StatusOr<TrainJobRequest> job = TrainJobFromProto(
      request, options_.train_defaults, options_.registry.activation,
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
  store::RetentionPolicy policy{options_.registry.keep_full,
                                options_.registry.keep_online};
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
  FillStats(*stats, &resp);
  // The version actually serving (0 when none could be loaded).
  resp.set_active_model_version(registry_->Current().version);
  resp.set_model_load_error(registry_->load_error());
  resp.set_leader(IsLeader());
  if (replication_ != nullptr) {
    resp.set_leader_address(replication_->leader_address());
  }
  const TrainingJobs::SlotStatus slot = jobs_->Status();
  FillTraining(slot, resp.mutable_training());  // always present
  resp.set_online_updates(online_->updates());
  return resp;
}

}  // namespace rbmrec::server
