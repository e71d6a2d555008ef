#ifndef RBMREC_SERVER_SERVICE_SERVICE_H_
#define RBMREC_SERVER_SERVICE_SERVICE_H_

// RbmrecService: the transport-free logic of the rbmrec.v1.Rbmrec API. Takes
// proto requests and returns absl::StatusOr<proto responses>; the gRPC layer
// (server/transport/grpc_server.h) only moves messages and maps statuses
// (status.h).
//
// Parts (each header states its contract): ModelRegistry (served snapshot,
// versions, activation policy, retention, fallback at start, cache of
// non-active versions), TrainingJobs (the training slot, memory admission),
// OnlineUpdater (incremental online updates and their publishing),
// ReadCaches (stored ratings, resolved users, titles), the erasure of
// DeleteUser (erasure.h). Requests are checked by request_checks.h and
// request_plan.h (PredictRatings / Recommend, their defaults and where they
// run) and converted by proto_convert.h; options are service_options.h.
// This class holds no mutex of its own.
//
// Thread-safe: every method may be called concurrently from any thread,
// except that one AddRatingsSession is used by one thread at a time.
//
// Limits. A request option over a limit fails with RESOURCE_EXHAUSTED and
// reason LIMIT_EXCEEDED (core/error_reason.h), the message naming the field,
// the value, the limit and its flag. Unknown enum values (method, rank_by,
// activation) and ids that IdProblem refuses (controls, U+2028/U+2029, bidi
// controls, invalid UTF-8; server/service/request_checks.h) are
// INVALID_ARGUMENT (in AddRatings: a rejected row with the reason). Item titles
// and attributes have size limits (INVALID_ARGUMENT, reason LIMIT_EXCEEDED).
//
// Decisions (documented behaviour):
// - AddRatings: rows are validated one by one (ids non-empty and at most 256
//   bytes, rating finite and on the server's scale); invalid rows are
//   rejected with a reason naming the field, the valid rows of a batch go to
//   the store in ONE UpsertRatings call, each rating stored as the scale
//   value it snaps to (4.0000001 -> 4).
// - DeleteRatings and DeleteUser of an unknown user: NOT_FOUND. Duplicate
// (user, item) rows within a
//   batch: the later one wins and is counted in `replaced`. A batch over the
//   row limit fails the call with RESOURCE_EXHAUSTED naming the limit (as the
//   .proto says).
// - Train: the job keeps running when the client of the Train stream goes
//   away (the proto's contract); CancelTraining or shutdown stops it.
// - PredictRatings: items unknown to the model (whether or not the store
//   knows them) get the fallback distribution with fallback=true; only the
//   user can be NOT_FOUND.
// - Recommend: candidates are the model's items that have training data
//   (Model::Trained), are not hidden and pass the request's filters
//   (ItemFilter over the cached Catalogue, core/item_filter.h), minus the
//   items the user rated (stored or ad-hoc). Every candidate gets a
//   mean-field score (ScoreAllMeanField); the best max(recommend_candidates,
//   3 (offset + n)) are scored again with the requested method, which
//   orders them and gives the answer's numbers (recommend_candidates = 0
//   with EXACT: every item exactly); the page is ranks offset + 1 ..
//   offset + n. Unknown categories match nothing; unknown ids in the
//   exclusions and candidates are ignored.
// - Online updates (server/models/online_updater.h): the histogram deltas of a
//   write come from the store's UpsertResult::previous (each row's rating
//   before it, read inside the write's transaction), so concurrent writes
//   of the same (user, item) give exact deltas. DeleteRatings / DeleteUser
//   read the user's ratings before deleting (approximate under concurrent
//   writes of the same user).
// - Erasure (DeleteUser, the guarantee stated in proto/rbmrec.proto): the
//   ratings are deleted, then ModelRegistry::EraseUser takes the user out
//   of the served model and rewrites every stored version that knows the
//   user; the read caches forget the user. A user only the models still
//   know (a repeated call) is erased from them too; NOT_FOUND when neither
//   the store nor any model knows the id. A version that cannot be
//   rewritten fails the call (INTERNAL, naming it) after the rest is done.
//   The shared weights keep what they learnt until the next full training
//   (retrain_after_erasures schedules one).

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/model.h"
#include "core/rating_scale.h"
#include "core/recommend.h"
#include "core/scoring.h"
#include "core/trainer.h"
#include "proto/rbmrec.pb.h"
#include "server/caches/read_caches.h"
#include "server/caches/scratch_pool.h"
#include "server/models/model_registry.h"
#include "server/models/online_updater.h"
#include "server/models/replication.h"
#include "server/models/training_jobs.h"
#include "server/service/bulk.h"
#include "server/service/request_checks.h"
#include "server/service/request_plan.h"
#include "server/service/service_options.h"
#include "server/service/similar.h"
#include "store/store.h"

namespace rbmrec::server {

namespace v1 = ::rbmrec::v1;

class RbmrecService {
 public:
  // Takes ownership of `store`, loads the active model version (falling
  // back to the newest intact version, see ModelRegistry) and starts the
  // online-update thread. Errors: InvalidArgument for bad options;
  // FailedPrecondition when options.scale is not the database's rating
  // scale (recorded at its first start) or the active model's; the
  // store's.
  static absl::StatusOr<std::unique_ptr<RbmrecService>> Create(
      std::unique_ptr<store::Store> store, const ServiceOptions& options);

  // Calls Shutdown().
  ~RbmrecService();
  RbmrecService(const RbmrecService&) = delete;
  RbmrecService& operator=(const RbmrecService&) = delete;

  // Step 1 of shutdown: cancels a running training job (its Train stream
  // ends CANCELLED) and makes new Train calls fail with UNAVAILABLE.
  void BeginShutdown();
  // Step 2: BeginShutdown, waits for the training thread, applies queued
  // online updates and persists a changed online snapshot. Idempotent.
  void Shutdown();

  // True when a model can serve (requests with model_version 0 do not fail
  // with FAILED_PRECONDITION). Cheap; the health check polls it.
  bool Serving() const;
  // True when PredictRatings / Recommend for `model_version` answer from
  // memory; false when they would first read and decode a stored version.
  bool ModelResident(int64_t model_version);
  // Where PredictRatings(request) / Recommend(request) / SimilarItems(request)
  // should run
  // (server/service/request_plan.h): decided once per request; the gRPC layer
  // runs non-resident ones off its event threads and the rankings that share
  // all-item passes on its ranking threads. Cheap, never blocks.
  Placement PlacePredict(const v1::PredictRatingsRequest& request);
  Placement PlaceRecommend(const v1::RecommendRequest& request);
  Placement PlaceSimilar(const v1::SimilarItemsRequest& request);

  // --- AddRatings: one session per stream. --------------------------------
  class AddRatingsSession {
   public:
    // Validates and commits one batch. An error fails the stream; batches
    // committed before stay.
    absl::Status AddBatch(const v1::AddRatingsRequest& request);
    const v1::AddRatingsResponse& response() const { return response_; }

   private:
    friend class RbmrecService;
    explicit AddRatingsSession(RbmrecService* service) : service_(service) {}
    RbmrecService* service_;
    v1::AddRatingsResponse response_;
  };
  AddRatingsSession StartAddRatings() { return AddRatingsSession(this); }
  // Convenience for tests: all batches in one call.
  absl::StatusOr<v1::AddRatingsResponse> AddRatings(
      const std::vector<v1::AddRatingsRequest>& batches);

  absl::StatusOr<v1::DeleteRatingsResponse> DeleteRatings(
      const v1::DeleteRatingsRequest& request);
  absl::StatusOr<v1::DeleteUserResponse> DeleteUser(
      const v1::DeleteUserRequest& request);
  absl::StatusOr<v1::PutItemsResponse> PutItems(
      const v1::PutItemsRequest& request);

  // Starts a job and sends its progress to `writer` until a terminal state;
  // returns OK once the terminal message was produced (whatever the state),
  // or an error before the job starts: FAILED_PRECONDITION (a job runs, no
  // ratings), INVALID_ARGUMENT naming an option (LIMIT_EXCEEDED when over
  // a hard cap), RESOURCE_EXHAUSTED + MEMORY_LIMIT (admission).
  absl::Status Train(const v1::TrainRequest& request,
                     const TrainWriter& writer);
  absl::StatusOr<v1::CancelTrainingResponse> CancelTraining(
      const v1::CancelTrainingRequest& request);

  absl::StatusOr<v1::PredictRatingsResponse> PredictRatings(
      const v1::PredictRatingsRequest& request);
  // Cold start: a named user without ratings and without ad-hoc ratings
  // gets the empty user's answer (fallback FALLBACK_EMPTY_USER), not
  // NOT_FOUND; PredictRatings keeps NOT_FOUND.
  absl::StatusOr<v1::RecommendResponse> Recommend(
      const v1::RecommendRequest& request);
  // The same with the id lists (exclude_item_ids, candidate_item_ids) from
  // `ids` instead of the request's own fields, which are not read: for a
  // request whose ids the gRPC layer views in its wire bytes
  // (server/transport/recommend_wire.h). REQUIRES: the views outlive the
  // call.
  absl::StatusOr<v1::RecommendResponse> Recommend(
      const v1::RecommendRequest& request, const RecommendIdLists& ids);
  // SimilarItems (see rbmrec.proto and server/service/similar.h).
  absl::StatusOr<v1::SimilarItemsResponse> SimilarItems(
      const v1::SimilarItemsRequest& request);
  // RecommendAll: checks the request (server/service/bulk.h) and pins one
  // model snapshot (the template's model_version, 0 = the active one); the
  // job then yields the stream's messages. May block (loads a stored
  // version that is not resident): not for an event thread. Errors: as
  // RecommendAll in proto/rbmrec.proto.
  absl::StatusOr<std::unique_ptr<RecommendAllJob>> StartRecommendAll(
      const v1::RecommendAllRequest& request);

  absl::StatusOr<v1::ListModelsResponse> ListModels(
      const v1::ListModelsRequest& request);
  absl::StatusOr<v1::ModelInfo> ActivateModel(
      const v1::ActivateModelRequest& request);
  absl::StatusOr<v1::DeleteModelResponse> DeleteModel(
      const v1::DeleteModelRequest& request);
  absl::StatusOr<v1::ModelInfo> PinModel(const v1::PinModelRequest& request);
  absl::StatusOr<v1::PruneModelsResponse> PruneModels(
      const v1::PruneModelsRequest& request);
  absl::StatusOr<v1::GetStatsResponse> GetStats(
      const v1::GetStatsRequest& request);

  // Reads for one user or item (server/service/catalogue_reads.cc; errors
  // as in proto/rbmrec.proto). GetUserRatings: one page of the user's
  // stored ratings in the store's order (by item idx), titled; the limit
  // (0: kDefaultRatingsPage) is checked against --max-batch before the one
  // read of the user's ratings (through the ratings cache). GetItem: the
  // item's stored row (one indexed read) and the served snapshot's
  // item_hist row; without a served model, the row alone.
  static constexpr int kDefaultRatingsPage = 100;
  absl::StatusOr<v1::GetUserRatingsResponse> GetUserRatings(
      const v1::GetUserRatingsRequest& request);
  absl::StatusOr<v1::GetItemResponse> GetItem(
      const v1::GetItemRequest& request);

  // For tests: blocks until the online queue is empty and applied.
  void FlushOnlineForTest();
  // For tests: persists the online snapshot now if it changed.
  absl::Status PersistOnlineForTest();
  // For tests: the parts.
  OnlineUpdater& online_for_test() { return *online_; }
  ModelRegistry& registry_for_test() { return *registry_; }
  // The version serving model_version = 0 requests (0: none).
  int64_t active_version() const;
  // Whether this server leads (runs Train and online updates): always on a
  // store that is not shared; on a shared one, see server/models/replication.h.
  bool IsLeader() const;
  // For tests: the replication part (null on a store that is not shared).
  Replication* replication_for_test() { return replication_.get(); }

 private:
  RbmrecService(std::unique_ptr<store::Store> store,
                const ServiceOptions& options);
  // The store's recorded rating scale (Store::InitSetting, recorded at the
  // first start) and the served model's must be options_.scale:
  // FailedPrecondition naming both and the fix otherwise.
  absl::Status CheckScale();
  static constexpr char kScaleSetting[] = "rating_scale";
  const RequestLimits& Limits() const { return options_.limits; }
  // Recommend after its checks, with the model snapshot `served`.
  absl::StatusOr<v1::RecommendResponse> RecommendServed(
      const v1::RecommendRequest& request, const RecommendIdLists& ids,
      const RecommendCheck& checked, const Served& served);
  // RecommendServed of each request (RecommendAll's users, the same
  // template), in order: the same answers bit for bit, the users' all-item
  // passes over W shared kMaxScoreBatch users at a time (RatedLogitsBatch,
  // ScoreAllMeanFieldBatch). Memory: one batch's passes at a time.
  std::vector<absl::StatusOr<v1::RecommendResponse>> RecommendServedBatch(
      const std::vector<v1::RecommendRequest>& requests,
      const RecommendCheck& checked, const Served& served);
  // One Recommend between its user's resolution and its ranking
  // (service_predictions.cc): Prepare, Rank, Respond make RecommendServed.
  struct PreparedRecommend;
  absl::Status PrepareRecommend(const v1::RecommendRequest& request,
                                const RecommendIdLists& ids,
                                const RecommendCheck& checked,
                                const Served& served, PreparedRecommend* out);
  // The ranking of `prep` (rated_logits, mean_field_scores: RankOptions').
  std::vector<Ranked> RankPrepared(PreparedRecommend& prep, const Model& model,
                                   const float* rated_logits,
                                   const float* mean_field_scores);
  v1::RecommendResponse RespondRecommend(const PreparedRecommend& prep,
                                         std::vector<Ranked> ranked,
                                         const RecommendCheck& checked,
                                         const Served& served);

  const std::unique_ptr<store::Store> store_;
  const ServiceOptions options_;
  // Built in dependency order, destroyed in reverse.
  std::unique_ptr<ModelRegistry> registry_;
  std::unique_ptr<ReadCaches> caches_;
  std::unique_ptr<OnlineUpdater> online_;
  std::unique_ptr<TrainingJobs> jobs_;
  // Only on a shared store (Store::Shared()).
  std::unique_ptr<Replication> replication_;
  // Working buffers of PredictRatings and Recommend, leased per request
  // (server/caches/scratch_pool.h): at most 2 x hardware threads of each are
  // kept between requests.
  struct PredictScratch {
    std::vector<int32_t> query;
    std::vector<float> probs;
    std::vector<bool> fallback;
    Model::Scratch model;
  };
  ScratchPool<PredictScratch> predict_scratch_;
  ScratchPool<ScoringScratch> scoring_scratch_;
  SimilarIndexCache similar_;
  std::once_flag shutdown_once_;
  // DeleteUser erasures since the last full training started.
  std::atomic<int64_t> erasures_since_training_{0};
  // Starts a full training with the defaults for retrain_after_erasures;
  // true when it started.
  bool StartRetrain();
  // FailedPrecondition + NOT_LEADER naming the leader, when this server is
  // a follower; OK when it leads.
  absl::Status CheckLeader(const char* rpc) const;
};

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_SERVICE_SERVICE_H_
