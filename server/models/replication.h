#ifndef RBMREC_SERVER_MODELS_REPLICATION_H_
#define RBMREC_SERVER_MODELS_REPLICATION_H_

// Replication: what makes several rbmrec-server processes (replicas) on one
// shared database (PostgreSQL; Store::Shared()) act as one service.
//
// Writes go to the database from whichever replica receives them; every
// replica serves reads from memory. What keeps them in step is one thread
// per replica ("replication"), which:
//   - Leadership: every lead_check_ms, a follower tries to take the
//     database's leadership lease (Store::TryLead, recording `advertise`),
//     and the leader checks it still holds it (LeaderLease::Check). Exactly
//     one replica leads: it runs Train jobs and online updates. Gaining the
//     lease: the active model is followed first, then online updates are
//     switched on. Losing it: a running Train is cancelled and online
//     updates stop (the new leader takes over). A leader that dies loses
//     the lease with its database session, so a follower leads within about
//     lead_check_ms after PostgreSQL notices.
//   - Change feed (Store::Subscribe): the ratings and items other replicas
//     commit arrive within milliseconds of their commit; the users and
//     titles they touch are dropped from this replica's read caches, so its
//     next Predict / Recommend folds in the stored ratings (no weight
//     update needed). On the leader the same changes become online-update
//     events (their exact histogram deltas travel with them). If the feed
//     breaks (changes may have been missed), every cache is dropped and the
//     feed is subscribed again.
//   - Models: when the feed says another replica activated a model, and in
//     any case every follow_poll_ms (the fallback), the store's active
//     version is served (ModelRegistry::Follow) if it is not already.
//
// Between full trainings, the leader's online updates change its served
// model in memory at once; the other replicas get them with each online
// version the leader stores (ServiceOptions::online.publish_seconds).
//
// Thread-safe: leader() and leader_address() may be called from any thread;
// Stop() (and the destructor) from one thread.

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/caches/read_caches.h"
#include "server/models/model_registry.h"
#include "server/models/online_updater.h"
#include "server/models/training_jobs.h"
#include "store/store.h"

namespace rbmrec::server {

struct ReplicationOptions {
  // The address (HOST:PORT) clients and other replicas use to reach this
  // replica: recorded as the leader's address while it leads.
  std::string advertise;
  // How long one wait on the change feed lasts (the thread's tick).
  int feed_wait_ms = 200;
  // Period of the leadership check (a follower's TryLead, the leader's
  // Check).
  int lead_check_ms = 500;
  // Period of the fallback poll of the store's active model version.
  int follow_poll_ms = 1000;
};

// The online-update events of records from the change feed, in order: runs
// of upserts become EventsFromUpsert's events; deleted ratings become one
// event per user with -1 deltas (no OnlineUserUpdate when the user itself
// was deleted).
std::vector<OnlineEvent> EventsFromChanges(
    const std::vector<store::ChangeRecord>& records);

class Replication {
 public:
  // All parts must outlive this object. REQUIRES store->Shared(). Tries to
  // lead once before returning (so a lone replica leads at once), then
  // starts the thread.
  Replication(store::Store* store, ModelRegistry* registry, ReadCaches* caches,
              OnlineUpdater* online, TrainingJobs* jobs,
              const ReplicationOptions& options);
  // Calls Stop().
  ~Replication();
  Replication(const Replication&) = delete;
  Replication& operator=(const Replication&) = delete;

  // Stops the thread and gives up the lease. Idempotent.
  void Stop();

  bool leader() const { return leader_.load(); }
  // The current leader's advertised address ("" when unknown); this
  // replica's own while it leads.
  std::string leader_address() const;
  const std::string& advertise() const { return options_.advertise; }

 private:
  void Loop();
  // One leadership check; returns whether this replica leads now.
  void CheckLeadership();
  void SetLeading(bool leading);
  void Follow();
  void Apply(const store::ChangeBatch& batch);

  store::Store* const store_;
  ModelRegistry* const registry_;
  ReadCaches* const caches_;
  OnlineUpdater* const online_;
  TrainingJobs* const jobs_;
  const ReplicationOptions options_;

  std::atomic<bool> leader_{false};
  // Replication thread only.
  std::unique_ptr<store::LeaderLease> lease_;
  std::unique_ptr<store::ChangeFeed> feed_;

  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::string leader_address_ ABSL_GUARDED_BY(mu_);

  std::thread thread_;
  std::once_flag stop_once_;
};

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_MODELS_REPLICATION_H_
