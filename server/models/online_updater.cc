#include "server/models/online_updater.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "core/model_file.h"
#include "core/online.h"
#include "server/caches/read_caches.h"
#include "server/log.h"
#include "server/memory.h"

namespace rbmrec::server {

namespace {

// A conditional model's extra items for the online update of `user` (as
// serving has them, ReadCaches::Resolve): the items of the user's stored
// views that `model` knows and `rated` does not hold, sorted. Empty for a
// plain model (no read) or on a store error.
std::vector<int32_t> ViewedExtra(const store::Store& store, const Model& model,
                                 const std::string& user,
                                 const UserRatings& rated) {
  if (!IsConditional(model)) return {};
  absl::StatusOr<std::vector<std::string>> views = store.GetUserViews(user);
  if (!views.ok()) return {};
  return ExtraItems(model, *views, rated.items);
}

}  // namespace

std::vector<OnlineEvent> EventsFromUpsert(
    const std::vector<store::RatingRow>& rows,
    const std::vector<std::optional<double>>& previous) {
  std::vector<OnlineEvent> events;
  if (previous.size() != rows.size()) return events;
  // Per (user, item): the rating before the batch (the first row's
  // previous) and the final one (the last row's rating).
  struct Change {
    std::optional<double> before;
    double after = 0;
  };
  absl::flat_hash_map<std::string, size_t> event_of;
  absl::flat_hash_map<std::pair<std::string, std::string>, Change> change;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].view) continue;  // views change no histogram
    auto [it, fresh] = change.try_emplace({rows[i].user, rows[i].item});
    if (fresh) it->second.before = previous[i];
    it->second.after = rows[i].rating;
  }
  for (const store::RatingRow& r : rows) {
    if (r.view) continue;
    auto c = change.find({r.user, r.item});
    if (c == change.end()) continue;  // already handled
    auto [e, fresh] = event_of.try_emplace(r.user, events.size());
    if (fresh) events.emplace_back().user = r.user;
    std::vector<HistDelta>& d = events[e->second].deltas;
    const Change& ch = c->second;
    if (!ch.before.has_value()) {
      d.push_back(HistDelta{r.item, ch.after, +1});
    } else if (*ch.before != ch.after) {
      d.push_back(HistDelta{r.item, *ch.before, -1});
      d.push_back(HistDelta{r.item, ch.after, +1});
    }
    change.erase(c);
  }
  return events;
}

OnlineUpdater::OnlineUpdater(store::Store* store, ModelRegistry* registry,
                             const OnlineUpdaterOptions& options)
    : store_(store), registry_(registry), options_(options) {
  if (options_.enabled) thread_ = std::thread([this] { Loop(); });
}

OnlineUpdater::~OnlineUpdater() { Shutdown(); }

bool OnlineUpdater::Active() const {
  return options_.enabled && leader_.load() && registry_->Serving();
}

void OnlineUpdater::SetLeader(bool leader) { leader_.store(leader); }

void OnlineUpdater::Enqueue(std::vector<OnlineEvent> events) {
  if (events.empty() || !options_.enabled || !leader_.load()) return;
  absl::MutexLock lock(&queue_mu_);
  for (OnlineEvent& ev : events) {
    ev.seq = next_seq_++;
    queue_.push_back(std::move(ev));
  }
}

uint64_t OnlineUpdater::NextSeq() const {
  absl::MutexLock lock(&queue_mu_);
  return next_seq_;
}

void OnlineUpdater::Flush() {
  if (!options_.enabled) return;
  absl::MutexLock lock(&queue_mu_);
  auto idle = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue_mu_) {
    return (queue_.empty() && !busy_) || stop_;
  };
  queue_mu_.Await(absl::Condition(&idle));
}

int64_t OnlineUpdater::updates() const {
  absl::MutexLock lock(&state_mu_);
  return updates_;
}

int64_t OnlineUpdater::full_copies() const {
  absl::MutexLock lock(&state_mu_);
  return full_copies_;
}

int64_t OnlineUpdater::applies() const {
  absl::MutexLock lock(&state_mu_);
  return applies_;
}

absl::Status OnlineUpdater::PersistNow() {
  std::shared_ptr<const Model> model;
  {
    absl::MutexLock lock(&state_mu_);
    model = dirty_;
  }
  if (model == nullptr) return absl::OkStatus();
  if (!leader_.load()) {  // lost the lead: the new leader publishes
    absl::MutexLock lock(&state_mu_);
    if (dirty_ == model) dirty_ = nullptr;
    return absl::OkStatus();
  }
  const Served cur = registry_->Current();
  if (cur.model != model) {  // replaced by a full Train / ActivateModel
    absl::MutexLock lock(&state_mu_);
    if (dirty_ == model) dirty_ = nullptr;
    return absl::OkStatus();
  }
  const std::string blob = SerializeModel(*model);
  store::ModelInfo meta;
  meta.kind = "online";
  meta.n_users = model->users().size();
  meta.n_items = model->num_items();
  meta.n_ratings = model->summary().train_ratings;
  meta.metrics_json = absl::StrFormat(
      "{\"validation_rmse\":0,\"epochs\":0,\"train_seconds\":0,"
      "\"base_version\":%d}",
      cur.version);
  absl::StatusOr<int64_t> v = registry_->PublishOnline(model, meta, blob);
  absl::MutexLock lock(&state_mu_);
  if (!v.ok() && !absl::IsAborted(v.status())) {
    Log(LogLevel::kError, "online_persist_failed",
        {F("error", v.status().ToString())});
    dirty_since_ = Clock::now();  // retry after another period
    return v.status();
  }
  if (dirty_ == model) dirty_ = nullptr;
  if (v.ok()) {
    Log(LogLevel::kInfo, "online_persisted",
        {F("version", *v), F("base_version", cur.version),
         F("updates_total", updates_)});
  }
  return absl::OkStatus();
}

std::shared_ptr<Model> OnlineUpdater::WorkingCopy(const Served& base) {
  if (spare_ != nullptr && mine_ != nullptr &&
      mine_.get() == base.model.get() && spare_.use_count() == 1 &&
      SameShape(*base.model, *spare_)) {
    CopyItemState(*base.model, stale_, spare_.get());
    std::shared_ptr<Model> w = std::move(spare_);
    spare_.reset();
    return w;
  }
  spare_.reset();
  {
    absl::MutexLock lock(&state_mu_);
    ++full_copies_;
  }
  return std::make_shared<Model>(*base.model);
}

void OnlineUpdater::Apply(const std::deque<OnlineEvent>& events) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    const Served base = registry_->Current();
    if (base.model == nullptr) return;
    std::vector<const OnlineEvent*> live;
    for (const OnlineEvent& ev : events) {
      if (ev.seq >= base.online_seq) live.push_back(&ev);
    }
    if (live.empty()) return;
    std::shared_ptr<Model> w = WorkingCopy(base);
    const RatingScale& scale = w->scale();
    std::vector<std::string> new_items;
    absl::flat_hash_set<std::string> seen;
    for (const OnlineEvent* ev : live) {
      for (const HistDelta& d : ev->deltas) {
        if (d.delta > 0 && w->items().Find(d.item) < 0 &&
            seen.insert(d.item).second) {
          new_items.push_back(d.item);
        }
      }
    }
    if (!new_items.empty()) AddItems(w.get(), new_items, options_.seed);
    absl::flat_hash_set<int32_t> touched;
    for (const OnlineEvent* ev : live) {
      const int32_t model_user = w->users().Find(ev->user);
      for (const HistDelta& d : ev->deltas) {
        const int32_t idx = w->items().Find(d.item);
        absl::StatusOr<int> k = scale.Index(d.rating);
        if (idx < 0 || !k.ok()) continue;
        AdjustHistogram(w.get(), idx, *k, d.delta);
        AdjustItemInput(w.get(), model_user, idx, *k, d.delta);
        touched.insert(idx);
      }
    }
    OnlineOptions oo;
    oo.learning_rate = options_.learning_rate;
    oo.steps = options_.steps;
    oo.seed = options_.seed;
    absl::flat_hash_set<std::string> done;
    int64_t updates = 0;
    for (const OnlineEvent* ev : live) {
      if (!ev->update || !done.insert(ev->user).second) continue;
      absl::StatusOr<std::vector<store::UserRating>> ratings =
          store_->GetUserRatings(ev->user);
      if (!ratings.ok()) continue;
      std::map<int32_t, uint8_t> merged;
      for (const store::UserRating& u : *ratings) {
        const int32_t idx = w->items().Find(u.item);
        absl::StatusOr<int> k = scale.Index(u.rating);
        if (idx < 0 || !k.ok()) continue;
        merged[idx] = static_cast<uint8_t>(*k);
      }
      if (merged.empty()) continue;
      UserRatings ur;
      for (const auto& [idx, k] : merged) {
        ur.items.push_back(idx);
        ur.ks.push_back(k);
        touched.insert(idx);
      }
      const std::vector<int32_t> extra = ViewedExtra(*store_, *w, ev->user, ur);
      VisibleSet v = ur.view();
      v.extra = extra.data();
      v.n_extra = static_cast<int64_t>(extra.size());
      OnlineUserUpdate(w.get(), v, oo, std::hash<std::string>{}(ev->user));
      ++updates;
    }
    const uint64_t next_seq = std::max(base.online_seq, live.back()->seq + 1);
    if (!registry_->ReplaceInMemory(base.model, w, next_seq)) {
      continue;  // a full model was published meanwhile: redo on it
    }
    // The previous model becomes the spare when it was ours: it differs from
    // w exactly in the items touched now.
    if (mine_ != nullptr && mine_.get() == base.model.get()) {
      spare_ = std::move(mine_);
      stale_.assign(touched.begin(), touched.end());
    } else {
      spare_.reset();
    }
    mine_ = w;
    {
      absl::MutexLock lock(&state_mu_);
      updates_ += updates;
      ++applies_;
      if (dirty_ == nullptr) dirty_since_ = Clock::now();
      dirty_ = w;
    }
    Log(LogLevel::kDebug, "online_applied",
        {F("events", live.size()), F("user_updates", updates),
         F("new_items", new_items.size()), F("touched_items", touched.size())});
    return;
  }
}

void OnlineUpdater::Loop() {
  const auto period = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options_.publish_seconds));
  const auto min_gap = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options_.min_apply_gap_seconds));
  Clock::time_point next_apply = Clock::now();
  while (true) {
    std::optional<Clock::time_point> deadline;
    {
      absl::MutexLock lock(&state_mu_);
      if (dirty_ != nullptr) deadline = dirty_since_ + period;
    }
    std::deque<OnlineEvent> batch;
    bool stop = false;
    {
      absl::MutexLock lock(&queue_mu_);
      auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue_mu_) {
        return stop_ || !queue_.empty();
      };
      if (deadline.has_value()) {
        queue_mu_.AwaitWithTimeout(absl::Condition(&ready),
                                   absl::FromChrono(*deadline - Clock::now()));
      } else {
        queue_mu_.Await(absl::Condition(&ready));
      }
      if (!stop_ && !queue_.empty()) {
        queue_mu_.AwaitWithTimeout(absl::Condition(&stop_),
                                   absl::FromChrono(next_apply - Clock::now()));
      }
      batch.swap(queue_);
      stop = stop_;
      busy_ = true;
    }
    if (!batch.empty()) {
      const Clock::time_point t0 = Clock::now();
      Apply(batch);
      const Clock::time_point t1 = Clock::now();
      next_apply = t1 + std::max<Clock::duration>(min_gap, 4 * (t1 - t0));
    }
    bool persist = false;
    {
      absl::MutexLock lock(&state_mu_);
      persist =
          dirty_ != nullptr && (stop || Clock::now() >= dirty_since_ + period);
    }
    if (persist) {
      (void)PersistNow();
      ReleaseFreeMemory();  // the serialized copy and replaced models
    }
    {
      absl::MutexLock lock(&queue_mu_);
      busy_ = false;
      if (stop && queue_.empty()) break;
    }
  }
}

void OnlineUpdater::Shutdown() {
  std::call_once(shutdown_once_, [this] {
    {
      absl::MutexLock lock(&queue_mu_);
      stop_ = true;
    }
    if (thread_.joinable()) thread_.join();
  });
}

}  // namespace rbmrec::server
