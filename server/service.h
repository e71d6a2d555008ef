#ifndef RBMREC_SERVER_SERVICE_H_
#define RBMREC_SERVER_SERVICE_H_

// RbmrecService: the transport-free logic of the rbmrec.v1.Rbmrec API. Takes
// proto requests and returns absl::StatusOr<proto responses>; the gRPC layer
// (server/grpc_server.h) only moves messages and maps statuses (status.h).
//
// Models. The active model is an immutable snapshot (std::shared_ptr<const
// Model> plus its version) replaced atomically: a request takes a copy of the
// pointer and never waits for training or online updates. Publishing (full
// training, online updates, ActivateModel) is serialized by one mutex.
//
// Decisions (documented behaviour):
// - AddRatings: rows are validated one by one (ids non-empty and at most 256
//   bytes, rating finite and on the server's scale); invalid rows are
//   rejected with a reason naming the field, the valid rows of a batch go to
//   the store in ONE UpsertRatings call. Duplicate (user, item) rows within a
//   batch: the later one wins and is counted in `replaced`. A batch over the
//   row limit fails the call with RESOURCE_EXHAUSTED naming the limit (as the
//   .proto says).
// - Train: the job keeps running when the client of the Train stream goes
//   away (the proto's contract); CancelTraining or shutdown stops it.
// - PredictRatings: items unknown to the model (whether or not the store
//   knows them) get the fallback distribution with fallback=true; only the
//   user can be NOT_FOUND.
// - Recommend: candidates are the model's items that have training data
//   (Model::Trained), minus the items the user rated (stored or ad-hoc).
//   Every candidate gets a mean-field score (ScoreAllMeanField); the best
//   max(recommend_candidates, 3n) are scored again with the requested
//   method, which orders them and gives the answer's numbers
//   (recommend_candidates = 0 with EXACT: every item exactly).
// - Online updates: users whose ratings change are queued; a background
//   thread applies AddItems / AdjustHistogram / AdjustItemInput (the
//   item-based RBM's per-item inputs) / OnlineUserUpdate to a COPY of the
//   active model and publishes it in memory (answers keep reporting the
//   version it was based on until it is persisted). Every
//   online_publish_seconds, and at shutdown, a changed snapshot is stored as
//   a new version of kind "online" and activated. When a full Train
//   publishes (or ActivateModel switches versions), queued updates that
//   happened before the training snapshot (resp. the switch) are dropped -
//   the full model already contains them - and later ones apply on top of
//   the new model. Histogram and item-input deltas of concurrent writes to
//   the SAME (user, item) are approximate.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/model.h"
#include "core/rating_scale.h"
#include "core/trainer.h"
#include "proto/rbmrec.pb.h"
#include "server/bounded_cache.h"
#include "store/store.h"

namespace rbmrec::server {

namespace v1 = ::rbmrec::v1;

struct ServiceOptions {
  // The rating scale of AddRatings (and of training).
  RatingScale scale;
  // Defaults of Train jobs; a TrainRequest's options override them.
  TrainOptions train_defaults;
  // Upper bound of a job's worker threads (0 = hardware threads).
  int max_train_threads = 0;
  // Niceness added to the training threads (Linux: per thread, inherited
  // by the job's workers), so that a full Train yields the cores to
  // serving. 0 = same priority as the RPCs; 19 = lowest.
  int train_nice = 10;
  // Rows per AddRatings batch (and items per PutItems call).
  int max_batch_rows = 10000;
  // item_ids per PredictRatings request.
  int max_predict_items = 1000;
  // Largest Recommend n.
  int max_recommend_n = 1000;
  // Recommend: rank all items by mean field first and score the best
  // max(recommend_candidates, 3n) with the requested method. 0 with EXACT =
  // exact over all items (slower: m*K*F softplus evaluations per call).
  int recommend_candidates = 30;
  // Online per-user updates.
  bool online = true;
  float online_learning_rate = 0.01f;
  int online_steps = 1;
  double online_publish_seconds = 60;
};

namespace internal {
// A user's ratings resolved against one model snapshot (service.cc).
struct ResolvedRatings;
// Estimated bytes of a read-cache entry (key and value).
size_t CacheBytes(
    const std::string& key,
    const std::shared_ptr<const std::vector<store::UserRating>>& ratings);
size_t CacheBytes(const std::string& key,
                  const std::shared_ptr<const ResolvedRatings>& resolved);
}  // namespace internal

// Receives the messages of a Train stream. Returns false when the receiver
// is gone (the job keeps running; no more messages are sent to it).
using TrainWriter = std::function<bool(const v1::TrainProgress&)>;

class RbmrecService {
 public:
  // Takes ownership of `store`, loads the active model version (a corrupt or
  // unreadable model row is logged and the service starts without a model)
  // and starts the online-update thread. Errors: InvalidArgument for bad
  // options.
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
    // Online bookkeeping: the stored ratings of the users this session has
    // written (read once per user, then kept current with the session's own
    // writes), valid while the service's ratings generation is known_gen_
    // (no other write since). Saves re-reading every user of every batch.
    absl::flat_hash_map<std::string, absl::flat_hash_map<std::string, double>>
        known_;
    uint64_t known_gen_ = 0;
    size_t known_entries_ = 0;
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
  // or an error before the job starts (FAILED_PRECONDITION when a job runs
  // or there are no ratings, INVALID_ARGUMENT naming an option).
  absl::Status Train(const v1::TrainRequest& request,
                     const TrainWriter& writer);
  absl::StatusOr<v1::CancelTrainingResponse> CancelTraining(
      const v1::CancelTrainingRequest& request);

  absl::StatusOr<v1::PredictRatingsResponse> PredictRatings(
      const v1::PredictRatingsRequest& request);
  absl::StatusOr<v1::RecommendResponse> Recommend(
      const v1::RecommendRequest& request);

  absl::StatusOr<v1::ListModelsResponse> ListModels(
      const v1::ListModelsRequest& request);
  absl::StatusOr<v1::ModelInfo> ActivateModel(
      const v1::ActivateModelRequest& request);
  absl::StatusOr<v1::GetStatsResponse> GetStats(
      const v1::GetStatsRequest& request);

  // For tests: blocks until the online queue is empty and applied.
  void FlushOnlineForTest();
  // For tests: persists the online snapshot now if it changed.
  absl::Status PersistOnlineForTest();
  // The version serving model_version = 0 requests (0: none).
  int64_t active_version() const;

 private:
  struct Served {
    std::shared_ptr<const Model> model;
    int64_t version = 0;
  };
  struct TrainJob;
  struct HistDelta {
    std::string item;
    double rating = 0;  // on the server's scale
    int delta = 0;      // +1 a new rating, -1 a removed one
  };
  struct OnlineEvent {
    uint64_t seq = 0;
    std::string user;
    std::vector<HistDelta> deltas;
    bool update = true;  // run OnlineUserUpdate for the user
  };
  struct UserView;
  static constexpr size_t kCacheBytes = size_t{256} << 20;

  RbmrecService(std::unique_ptr<store::Store> store,
                const ServiceOptions& options);

  Served Current() const;
  // Publishes in memory. REQUIRES publish_mu_ held.
  void SetCurrent(std::shared_ptr<const Model> model, int64_t version);
  absl::StatusOr<Served> ModelFor(int64_t version);
  // The user's stored ratings merged with the request's ad-hoc ones, in the
  // indices of `model`. A named user without ad-hoc ratings is resolved once
  // per (user, model snapshot) and then served from resolved_cache_.
  absl::StatusOr<UserView> ResolveUser(
      const std::shared_ptr<const Model>& model, const std::string& user_id,
      const google::protobuf::RepeatedPtrField<v1::ItemRating>& ratings);

  void RunTrainJob(std::shared_ptr<TrainJob> job, TrainOptions options);
  void OnlineLoop();
  void Enqueue(std::vector<OnlineEvent> events);
  // Applies queued events to a copy of the current model. REQUIRES
  // publish_mu_ held.
  void ApplyOnline(std::deque<OnlineEvent> events);
  absl::Status PersistOnlineLocked();
  bool OnlineActive() const;

  const std::unique_ptr<store::Store> store_;
  const ServiceOptions options_;

  mutable std::mutex served_mu_;  // guards served_ (a pointer copy only)
  Served served_;
  // Why the stored active model failed to load at start; cleared by
  // SetCurrent. Guarded by served_mu_.
  std::string model_load_error_;

  // Serializes publishing: full train, online updates, ActivateModel.
  std::mutex publish_mu_;
  // Lock order: publish_mu_ before queue_mu_ (never the reverse).
  bool online_dirty_ = false;                          // guarded by publish_mu_
  std::chrono::steady_clock::time_point dirty_since_;  // by publish_mu_

  // Training slot.
  std::mutex train_mu_;
  std::shared_ptr<TrainJob> job_;  // the running job or null
  std::thread train_thread_;
  bool shutting_down_ = false;  // guarded by train_mu_

  // Online queue.
  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::condition_variable queue_idle_cv_;
  std::deque<OnlineEvent> queue_;
  uint64_t next_seq_ = 1;
  // Events with seq < drop_before_seq_ are already part of the served model.
  uint64_t drop_before_seq_ = 0;
  bool online_busy_ = false;
  bool stop_online_ = false;
  std::thread online_thread_;
  std::atomic<int64_t> online_updates_{0};

  // Read-through caches for serving (the store's reads share one
  // connection): stored ratings per user (null = unknown user) and titles.
  // A write bumps a generation AFTER it commits and erases the entries it
  // touched; a reader only inserts what it read if no write happened since
  // it started reading, so the caches never hold stale data.
  using UserRatingsPtr = std::shared_ptr<const std::vector<store::UserRating>>;
  absl::StatusOr<UserRatingsPtr> CachedUserRatings(const std::string& user);
  std::vector<std::string> CachedTitles(const std::vector<std::string>& ids);
  void InvalidateUsers(const std::vector<std::string>& users);
  std::mutex read_cache_mu_;
  // Each bounded to kCacheBytes (estimated) of entries.
  BoundedCache<UserRatingsPtr, &internal::CacheBytes> user_cache_{kCacheBytes};
  BoundedCache<std::shared_ptr<const internal::ResolvedRatings>,
               &internal::CacheBytes>
      resolved_cache_{kCacheBytes};
  absl::flat_hash_map<std::string, std::string> title_cache_;
  uint64_t ratings_gen_ = 0;  // guarded by read_cache_mu_
  uint64_t titles_gen_ = 0;   // guarded by read_cache_mu_

  // Small cache of non-active versions requested explicitly.
  std::mutex cache_mu_;
  std::vector<Served> version_cache_;

  std::once_flag shutdown_once_;
};

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_SERVICE_H_
