#include "server/models/replication.h"

#include <chrono>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "server/log.h"

namespace rbmrec::server {

using Kind = store::ChangeRecord::Kind;

std::vector<OnlineEvent> EventsFromChanges(
    const std::vector<store::ChangeRecord>& records) {
  std::vector<OnlineEvent> out;
  size_t i = 0;
  while (i < records.size()) {
    const Kind kind = records[i].kind;
    if (kind == Kind::kItem || kind == Kind::kView) {
      // No histogram change (a view's user only has their caches dropped).
      ++i;
      continue;
    }
    if (kind == Kind::kUpsert) {
      std::vector<store::RatingRow> rows;
      std::vector<std::optional<double>> previous;
      for (; i < records.size() && records[i].kind == Kind::kUpsert; ++i) {
        rows.push_back(store::RatingRow{records[i].user, records[i].item,
                                        records[i].rating, 0});
        previous.push_back(records[i].previous);
      }
      for (OnlineEvent& e : EventsFromUpsert(rows, previous)) {
        out.push_back(std::move(e));
      }
      continue;
    }
    // A run of deleted ratings (and deleted users): one event per user.
    std::vector<OnlineEvent> run;
    absl::flat_hash_map<std::string, size_t> at;
    for (; i < records.size() && (records[i].kind == Kind::kDelete ||
                                  records[i].kind == Kind::kUserDeleted);
         ++i) {
      const store::ChangeRecord& r = records[i];
      auto [it, fresh] = at.emplace(r.user, run.size());
      if (fresh) run.emplace_back().user = r.user;
      OnlineEvent& e = run[it->second];
      if (r.kind == Kind::kUserDeleted) {
        e.update = false;
      } else {
        e.deltas.push_back(HistDelta{r.item, r.rating, -1});
      }
    }
    for (OnlineEvent& e : run) {
      if (e.update || !e.deltas.empty()) out.push_back(std::move(e));
    }
  }
  return out;
}

Replication::Replication(store::Store* store, ModelRegistry* registry,
                         ReadCaches* caches, OnlineUpdater* online,
                         TrainingJobs* jobs, const ReplicationOptions& options)
    : store_(store),
      registry_(registry),
      caches_(caches),
      online_(online),
      jobs_(jobs),
      options_(options) {
  online_->SetLeader(false);
  absl::StatusOr<std::unique_ptr<store::ChangeFeed>> feed = store_->Subscribe();
  if (feed.ok()) {
    feed_ = std::move(*feed);
  } else {
    Log(LogLevel::kWarn, "change_feed_unavailable",
        {F("error", feed.status().ToString())});
  }
  CheckLeadership();
  Log(LogLevel::kInfo, "replica_started",
      {F("advertise", options_.advertise),
       F("role", leader() ? "leader" : "follower"),
       F("leader", leader_address())});
  thread_ = std::thread([this] { Loop(); });
}

Replication::~Replication() { Stop(); }

void Replication::Stop() {
  std::call_once(stop_once_, [this] {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    if (thread_.joinable()) thread_.join();
    // Giving the lease back lets a follower lead at its next check.
    const bool led = lease_ != nullptr;
    lease_.reset();
    leader_.store(false);
    feed_.reset();
    if (led) Log(LogLevel::kInfo, "leadership_released", {});
  });
}

std::string Replication::leader_address() const {
  absl::MutexLock lock(&mu_);
  return leader_address_;
}

void Replication::SetLeading(bool leading) {
  leader_.store(leading);
  online_->SetLeader(leading);
  if (leading) {
    absl::MutexLock lock(&mu_);
    leader_address_ = options_.advertise;
  } else if (jobs_->Cancel()) {
    Log(LogLevel::kWarn, "training_cancelled_lost_leadership", {});
  }
}

void Replication::CheckLeadership() {
  if (lease_ != nullptr) {
    absl::Status st = lease_->Check();
    if (st.ok()) return;
    Log(LogLevel::kWarn, "leadership_lost", {F("error", st.ToString())});
    lease_.reset();
    SetLeading(false);
  }
  absl::StatusOr<std::unique_ptr<store::LeaderLease>> lease =
      store_->TryLead(options_.advertise);
  if (lease.ok() && *lease != nullptr) {
    lease_ = std::move(*lease);
    Follow();  // serve the newest active model before updating it
    SetLeading(true);
    Log(LogLevel::kInfo, "leadership_acquired",
        {F("advertise", options_.advertise)});
    return;
  }
  if (!lease.ok()) {
    Log(LogLevel::kDebug, "leadership_check_failed",
        {F("error", lease.status().ToString())});
  }
  absl::StatusOr<std::string> address = store_->LeaderAddress();
  if (address.ok()) {
    absl::MutexLock lock(&mu_);
    leader_address_ = *address;
  }
}

void Replication::Follow() {
  absl::StatusOr<int64_t> v = registry_->Follow(online_->NextSeq());
  if (!v.ok()) {
    Log(LogLevel::kWarn, "follow_model_failed",
        {F("error", v.status().ToString())});
  }
}

void Replication::Apply(const store::ChangeBatch& batch) {
  if (batch.unknown_changes) caches_->InvalidateAll();
  std::vector<std::string> users;
  std::vector<std::string> items;
  absl::flat_hash_set<std::string> seen_users;
  for (const store::ChangeRecord& r : batch.records) {
    if (r.kind == Kind::kItem) {
      items.push_back(r.item);
    } else if (seen_users.insert(r.user).second) {
      users.push_back(r.user);
    }
  }
  // Users another replica erased (DeleteUser): the replica that took the
  // call rewrote the stored versions; this one erases them from the model
  // it serves, with the deleted ratings that came with the change.
  absl::flat_hash_map<std::string, std::vector<std::pair<std::string, double>>>
      erased;
  for (const store::ChangeRecord& r : batch.records) {
    if (r.kind == Kind::kUserDeleted) erased[r.user];
  }
  for (const store::ChangeRecord& r : batch.records) {
    auto it = r.kind == Kind::kDelete ? erased.find(r.user) : erased.end();
    if (it != erased.end()) it->second.emplace_back(r.item, r.rating);
  }
  for (const auto& [user, ratings] : erased) {
    absl::StatusOr<ModelRegistry::Erasure> e =
        registry_->EraseUser(user, ratings, /*rewrite_stored=*/false);
    if (!e.ok()) {
      Log(LogLevel::kError, "replica_erasure_failed",
          {F("error", e.status().ToString())});
    }
  }
  if (!users.empty()) caches_->InvalidateUsers(users);
  if (!items.empty()) caches_->InvalidateTitles(items);
  if (leader() && online_->Active() && !batch.records.empty()) {
    online_->Enqueue(EventsFromChanges(batch.records));
  }
}

void Replication::Loop() {
  using Clock = std::chrono::steady_clock;
  const auto lead_period = std::chrono::milliseconds(options_.lead_check_ms);
  const auto follow_period = std::chrono::milliseconds(options_.follow_poll_ms);
  Clock::time_point next_lead = Clock::now() + lead_period;
  Clock::time_point next_follow = Clock::now() + follow_period;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
    }
    if (feed_ == nullptr) {
      absl::StatusOr<std::unique_ptr<store::ChangeFeed>> feed =
          store_->Subscribe();
      if (feed.ok()) {
        feed_ = std::move(*feed);
        // Changes made while there was no feed are unknown.
        caches_->InvalidateAll();
        Follow();
        Log(LogLevel::kInfo, "change_feed_subscribed", {});
      } else {
        absl::MutexLock lock(&mu_);
        mu_.AwaitWithTimeout(absl::Condition(&stop_),
                             absl::Milliseconds(options_.feed_wait_ms));
      }
    }
    if (feed_ != nullptr) {
      absl::StatusOr<store::ChangeBatch> batch =
          feed_->Wait(options_.feed_wait_ms);
      if (!batch.ok()) {
        Log(LogLevel::kWarn, "change_feed_broken",
            {F("error", batch.status().ToString())});
        feed_.reset();
        caches_->InvalidateAll();
      } else {
        Apply(*batch);
        if (batch->models_changed) {
          Follow();
          next_follow = Clock::now() + follow_period;
        }
      }
    }
    const Clock::time_point now = Clock::now();
    if (now >= next_lead) {
      CheckLeadership();
      next_lead = now + lead_period;
    }
    if (now >= next_follow) {
      Follow();
      next_follow = now + follow_period;
    }
  }
}

}  // namespace rbmrec::server
