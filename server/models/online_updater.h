#ifndef RBMREC_SERVER_MODELS_ONLINE_UPDATER_H_
#define RBMREC_SERVER_MODELS_ONLINE_UPDATER_H_

// OnlineUpdater: applies rating changes to the served model between full
// trainings and publishes the result.
//
// Queue. Writers Enqueue() events (a user whose ratings changed, with the
// histogram deltas of the change); each gets an increasing sequence number.
// A background thread drains the whole queue at once (coalescing: after an
// apply that took d, the next waits max(200 ms, 4 d)), drops the events the
// served model already contains (seq < Served::online_seq, set by a full
// Train or ActivateModel) and applies the rest: AddItems for new items,
// AdjustHistogram / AdjustItemInput per delta, OnlineUserUpdate once per
// changed user (re-reading the user's ratings from the store, with no lock
// of ours held; for a conditional model also the user's views, the extra
// items of r, as serving has them).
//
// Incremental. An apply does not copy the whole model each time: the
// updater keeps the model it published before the current one (the
// "spare"). The two differ only in the items the last apply touched, so
// CopyItemState brings the spare up to date (cost ~ touched items x K x F)
// and the new batch is applied to it. The whole model is copied only when
// there is no usable spare: the first apply after a full Train /
// ActivateModel, after AddItems changed the shapes, or while a reader still
// holds the spare (use_count > 1). The result is swapped in with
// ModelRegistry::ReplaceInMemory, which fails if another model was
// published meanwhile; the apply is then redone on that model.
//
// Publish cadence. The served model changes in memory at once (answers keep
// the version it was based on); every publish_seconds after the first
// unpersisted change, and at Shutdown, it is stored as a new active "online"
// version through ModelRegistry::PublishOnline (retention applies there).
//
// Thread-safe. Two mutexes: the queue's and the persistence state's; never
// held together, never across a store call or a model copy.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "core/model.h"
#include "server/models/model_registry.h"
#include "store/store.h"

namespace rbmrec::server {

struct HistDelta {
  std::string item;
  double rating = 0;  // on the server's scale
  int delta = 0;      // +1 a new rating, -1 a removed one
};

struct OnlineEvent {
  uint64_t seq = 0;  // set by Enqueue
  std::string user;
  std::vector<HistDelta> deltas;
  bool update = true;  // run OnlineUserUpdate for the user
};

// The events of one committed UpsertRatings call: `previous` is its
// UpsertResult::previous (one entry per row). Per (user, item) the rating
// before the call (the first row's previous) and the final one (the last
// row's rating) give the deltas: +1 final when there was none, -1 before
// and +1 final when they differ. One event per user, in order of first
// appearance. View rows (RatingRow::view) are skipped: they change no
// histogram. Empty when the sizes differ.
std::vector<OnlineEvent> EventsFromUpsert(
    const std::vector<store::RatingRow>& rows,
    const std::vector<std::optional<double>>& previous);

struct OnlineUpdaterOptions {
  // Per-user updates of the served model after AddRatings (--online).
  bool enabled = true;
  // CD learning rate and steps of one user's update (--online-lr,
  // --online-steps). REQUIRES > 0.
  float learning_rate = 0.01f;
  int steps = 1;
  // Seconds between two stored "online" versions (--online-publish-seconds).
  // REQUIRES > 0.
  double publish_seconds = 60;
  // Least time between two applies (the next waits max(this, 4x the last
  // apply's duration)), so a stream of writes is coalesced instead of
  // applied one by one. 0: apply as soon as events arrive (tests, fuzzing).
  double min_apply_gap_seconds = 0.2;
  // New items' parameters, CD sampling. RbmrecService sets it from
  // ServiceOptions::train_defaults.seed.
  uint64_t seed = 1;
};

class OnlineUpdater {
 public:
  // `store` and `registry` must outlive the updater. Starts the thread when
  // options.enabled.
  OnlineUpdater(store::Store* store, ModelRegistry* registry,
                const OnlineUpdaterOptions& options);
  // Calls Shutdown().
  ~OnlineUpdater();
  OnlineUpdater(const OnlineUpdater&) = delete;
  OnlineUpdater& operator=(const OnlineUpdater&) = delete;

  // True when updates are enabled, this process leads (SetLeader) and a
  // model is served (writers then compute deltas and Enqueue).
  bool Active() const;
  // Replicas: only the leader applies and publishes online updates. A
  // follower's Enqueue drops the events, and nothing is persisted while not
  // leading. Default: leading (one process).
  void SetLeader(bool leader);
  void Enqueue(std::vector<OnlineEvent> events);
  // The sequence number the next event will get.
  uint64_t NextSeq() const;
  // Blocks until the queue is empty and applied.
  void Flush();
  // Stores the served model now if it has unpersisted updates.
  absl::Status PersistNow();
  // Applies what is queued, persists, stops the thread. Idempotent.
  void Shutdown();

  int64_t updates() const;
  // Applies that copied the whole model (the others were incremental).
  int64_t full_copies() const;
  int64_t applies() const;

 private:
  void Loop();
  // Applies `events` to the served model (see the top of this file).
  // Only called from the updater thread.
  void Apply(const std::deque<OnlineEvent>& events);
  // REQUIRES only the updater thread (or the caller after it stopped).
  std::shared_ptr<Model> WorkingCopy(const Served& base);

  store::Store* const store_;
  ModelRegistry* const registry_;
  const OnlineUpdaterOptions options_;
  using Clock = std::chrono::steady_clock;

  // The queue.
  mutable absl::Mutex queue_mu_;
  std::deque<OnlineEvent> queue_ ABSL_GUARDED_BY(queue_mu_);
  uint64_t next_seq_ ABSL_GUARDED_BY(queue_mu_) = 1;
  bool busy_ ABSL_GUARDED_BY(queue_mu_) = false;
  bool stop_ ABSL_GUARDED_BY(queue_mu_) = false;

  // Persistence state.
  mutable absl::Mutex state_mu_;
  // The served model with unpersisted updates (null: none) and since when.
  std::shared_ptr<const Model> dirty_ ABSL_GUARDED_BY(state_mu_);
  Clock::time_point dirty_since_ ABSL_GUARDED_BY(state_mu_);
  int64_t updates_ ABSL_GUARDED_BY(state_mu_) = 0;
  int64_t full_copies_ ABSL_GUARDED_BY(state_mu_) = 0;
  int64_t applies_ ABSL_GUARDED_BY(state_mu_) = 0;

  // Updater thread only.
  std::shared_ptr<Model> mine_;   // the last model this updater published
  std::shared_ptr<Model> spare_;  // the one before it
  std::vector<int32_t> stale_;    // items where spare_ differs from mine_

  std::atomic<bool> leader_{true};
  std::thread thread_;
  std::once_flag shutdown_once_;
};

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_MODELS_ONLINE_UPDATER_H_
