#include "server/models/training_jobs.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <utility>

#ifdef __linux__
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/error_reason.h"
#include "core/fit.h"
#include "core/mf.h"
#include "core/model_file.h"
#include "server/log.h"
#include "server/memory.h"

namespace rbmrec::server {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

std::string MiB(int64_t bytes) {
  return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1 << 20));
}

#ifdef __linux__
// The cgroup v2 memory.max of this process, 0 when unset or unknown.
int64_t CgroupMemoryMax() {
  std::ifstream cg("/proc/self/cgroup");
  std::string line, path;
  while (std::getline(cg, line)) {
    if (absl::StartsWith(line, "0::")) path = line.substr(3);
  }
  for (const std::string& dir :
       {absl::StrCat("/sys/fs/cgroup", path), std::string("/sys/fs/cgroup")}) {
    std::ifstream f(dir + "/memory.max");
    std::string v;
    int64_t n = 0;
    if (f >> v && absl::SimpleAtoi(v, &n) && n > 0) return n;
  }
  return 0;
}
#endif

// Lowers the calling thread's priority by `nice` (Linux: per thread,
// inherited by the threads it starts); logs when it cannot.
void LowerThreadPriority(int nice) {
#ifdef __linux__
  if (nice > 0) {
    const id_t tid = static_cast<id_t>(syscall(SYS_gettid));
    errno = 0;
    const int now = getpriority(PRIO_PROCESS, tid);
    if (errno == 0 &&
        setpriority(PRIO_PROCESS, tid, std::min(19, now + nice)) != 0) {
      Log(LogLevel::kWarn, "train_nice_failed",
          {F("error", std::strerror(errno))});
    }
  }
#else
  (void)nice;
#endif
}

// The conditional RBM's extra items (FitModel's `extra`): row u holds the
// items user u of `ds` viewed in `snap` and did not rate, by item. Views of
// users or items without training ratings are left out (the model does not
// know them).
SparseRatings ViewsAsExtra(const store::Snapshot& snap, const Dataset& ds) {
  const auto key = [](int32_t u, int32_t i) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(u)) << 32) |
           static_cast<uint32_t>(i);
  };
  std::vector<uint64_t> rated;
  rated.reserve(ds.ratings.size());
  for (const Rating& r : ds.ratings) rated.push_back(key(r.user, r.item));
  std::sort(rated.begin(), rated.end());
  std::vector<uint64_t> viewed;
  for (const store::Snapshot::View& v : snap.views) {
    const int32_t u = ds.users.Find(snap.users[static_cast<size_t>(v.user)]);
    const int32_t i = ds.items.Find(snap.items[static_cast<size_t>(v.item)]);
    if (u < 0 || i < 0) continue;
    const uint64_t k = key(u, i);
    if (!std::binary_search(rated.begin(), rated.end(), k)) viewed.push_back(k);
  }
  std::sort(viewed.begin(), viewed.end());
  SparseRatings extra;
  extra.rows = ds.users.size();
  extra.cols = ds.items.size();
  extra.offsets.assign(static_cast<size_t>(extra.rows) + 1, 0);
  for (uint64_t k : viewed) {
    ++extra.offsets[(k >> 32) + 1];
    extra.col.push_back(static_cast<int32_t>(k & 0xffffffffu));
  }
  for (size_t r = 1; r < extra.offsets.size(); ++r) {
    extra.offsets[r] += extra.offsets[r - 1];
  }
  return extra;
}

// Step "snapshot": the store's ratings as a Dataset on `scale` and, when
// `extra` is not null, the stored views as the conditional RBM's extra
// items (ViewsAsExtra). Errors carry the job's failure message.
absl::Status SnapshotDataset(store::Store* store, const RatingScale& scale,
                             Dataset* ds, SparseRatings* extra) {
  absl::StatusOr<store::Snapshot> snap = store->ReadSnapshot();
  if (!snap.ok()) {
    return absl::InternalError(
        absl::StrCat("reading the ratings failed: ", snap.status().ToString()));
  }
  ds->scale = scale;
  ds->ratings.reserve(snap->ratings.size());
  for (const store::Snapshot::Row& row : snap->ratings) {
    absl::StatusOr<int> k = ds->scale.Index(row.rating);
    if (!k.ok()) {
      return absl::InternalError(absl::StrCat(
          "stored rating of user '", snap->users[row.user], "' for item '",
          snap->items[row.item], "' is off the server's scale ",
          ds->scale.ToString(), ": ", k.status().message()));
    }
    Rating r;
    r.user = ds->users.GetOrAdd(snap->users[static_cast<size_t>(row.user)]);
    r.item = ds->items.GetOrAdd(snap->items[static_cast<size_t>(row.item)]);
    r.k = static_cast<uint8_t>(*k);
    ds->ratings.push_back(r);
  }
  if (ds->ratings.empty()) {
    return absl::InternalError("there are no ratings to train on");
  }
  if (extra != nullptr) *extra = ViewsAsExtra(*snap, *ds);
  return absl::OkStatus();
}

// Step "train"'s bookkeeping: the epochs each RBM ran, the progress
// messages (with an ETA) and the early-stop note of the last one.
class EpochCounter {
 public:
  explicit EpochCounter(const TrainOptions& options)
      : options_(options),
        // Upper bound: every RBM may run max_epochs.
        n_rbms_(options.ensemble + (options.item_based ? 1 : 0)),
        total_epochs_(options.max_epochs * n_rbms_),
        epochs_of_(static_cast<size_t>(n_rbms_), 0) {}

  std::string RbmName(int member) const {
    if (member == FactorisationMember(options_)) return "factorisation";
    if (member >= n_rbms_) return "rated";
    if (member >= options_.ensemble) return "item";
    return member == 0 ? "user" : absl::StrCat("user ", member + 1);
  }

  // Counts the epoch and returns its RUNNING message.
  v1::TrainProgress Epoch(int member, const EpochStats& st, double elapsed,
                          bool validation) {
    if (member >= 0 && member < n_rbms_) {
      epochs_of_[static_cast<size_t>(member)] = st.epoch;
    }
    int done_epochs = 0;
    for (int e : epochs_of_) done_epochs += e;
    v1::TrainProgress p;
    p.set_state(v1::TrainProgress::RUNNING);
    p.set_rbm(RbmName(member));
    const int max_epochs = member == FactorisationMember(options_)
                               ? MfBlendEpochs(options_.mf_epochs)
                           : member >= n_rbms_ ? options_.rated_max_epochs
                                               : options_.max_epochs;
    p.set_epoch(std::min(st.epoch, max_epochs));
    p.set_max_epochs(max_epochs);
    p.set_train_rmse(std::isfinite(st.train_rmse) ? st.train_rmse : 0);
    p.set_validation_rmse(
        validation && std::isfinite(st.valid_rmse) ? st.valid_rmse : 0);
    if (member >= n_rbms_ && validation && st.valid_ndcg > 0) {
      p.set_validation_ndcg(st.valid_ndcg);
    }
    p.set_elapsed_seconds(elapsed);
    if (member >= n_rbms_) {
      // The factorisation and the rated RBM train after the rating RBMs,
      // one after the other: the time left of this one's epoch limit at
      // its own pace, timed from the previous message.
      if (member != phase_member_) {
        phase_member_ = member;
        phase_begin_ = last_elapsed_;
      }
      if (st.epoch > 0 && st.epoch < max_epochs) {
        p.set_eta_seconds((elapsed - phase_begin_) / st.epoch *
                          (max_epochs - st.epoch));
      }
    } else if (done_epochs > 0 && done_epochs < total_epochs_) {
      p.set_eta_seconds(elapsed / done_epochs * (total_epochs_ - done_epochs));
    }
    last_elapsed_ = elapsed;
    return p;
  }

  // The most epochs an RBM of the ensemble ran (at most max_epochs).
  int MaxEpoch() const {
    return std::min(options_.max_epochs,
                    *std::max_element(epochs_of_.begin(), epochs_of_.end()));
  }

  // "stopped early: ..." naming the RBMs that stopped before max_epochs;
  // "" when none did.
  std::string EarlyStopNote() const {
    std::vector<std::string> early;
    for (int e = 0; e < n_rbms_; ++e) {
      const int ran = epochs_of_[static_cast<size_t>(e)];
      if (ran > 0 && ran < options_.max_epochs) {
        early.push_back(absl::StrCat(RbmName(e), " RBM after ", ran, " of ",
                                     options_.max_epochs, " epochs"));
      }
    }
    if (early.empty()) return "";
    // Without a validation part the trainer watches the training RMSE.
    return absl::StrCat(
        "stopped early: ",
        options_.validation_fraction > 0 ? "validation" : "training",
        " RMSE did not improve (", absl::StrJoin(early, ", "), ")");
  }

 private:
  const TrainOptions& options_;
  const int n_rbms_;
  const int total_epochs_;
  std::vector<int> epochs_of_;
  int phase_member_ = -1;    // the model after the rating RBMs now training
  double phase_begin_ = 0;   // elapsed seconds when it started
  double last_elapsed_ = 0;  // of the previous message
};

}  // namespace

int64_t DefaultTrainMemoryBytes() {
  int64_t ram = int64_t{4} << 30;
#ifdef __linux__
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) ram = static_cast<int64_t>(pages) * page;
  const int64_t cg = CgroupMemoryMax();
  if (cg > 0) ram = std::min(ram, cg);
#endif
  return ram / 2;
}

struct TrainingJobs::Job {
  absl::Mutex mu;
  std::vector<v1::TrainProgress> events ABSL_GUARDED_BY(mu);
  bool done ABSL_GUARDED_BY(mu) = false;
  std::atomic<bool> cancel{false};
  std::atomic<bool> shutdown{false};
  std::atomic<int> epoch{0};
  // The last epoch's validation RMSE (0: none yet, or validation off) and
  // the RBM it belongs to.
  double validation_rmse ABSL_GUARDED_BY(mu) = 0;
  std::string rbm ABSL_GUARDED_BY(mu);
  int max_epochs = 0;
  Clock::time_point start = Clock::now();

  void Push(v1::TrainProgress p, bool terminal) {
    absl::MutexLock lock(&mu);
    events.push_back(std::move(p));
    if (terminal) done = true;
  }
};

TrainingJobs::TrainingJobs(store::Store* store, ModelRegistry* registry,
                           std::function<uint64_t()> online_seq,
                           const TrainingJobsOptions& options)
    : store_(store),
      registry_(registry),
      online_seq_(std::move(online_seq)),
      options_(options) {
  if (options_.max_train_memory_bytes <= 0) {
    options_.max_train_memory_bytes = DefaultTrainMemoryBytes();
  }
}

TrainingJobs::~TrainingJobs() { Shutdown(); }

void TrainingJobs::BeginShutdown() {
  absl::MutexLock lock(&mu_);
  shutting_down_ = true;
  if (job_ != nullptr) {
    job_->shutdown = true;
    job_->cancel = true;
  }
}

void TrainingJobs::Shutdown() {
  std::call_once(shutdown_once_, [this] {
    BeginShutdown();
    std::thread t;
    {
      absl::MutexLock lock(&mu_);
      t = std::move(thread_);
    }
    if (t.joinable()) t.join();
  });
}

bool TrainingJobs::Cancel() {
  absl::MutexLock lock(&mu_);
  if (job_ == nullptr) return false;
  job_->cancel = true;
  Log(LogLevel::kInfo, "train_cancel_requested");
  return true;
}

TrainingJobs::SlotStatus TrainingJobs::Status() const {
  SlotStatus s;
  absl::MutexLock lock(&mu_);
  if (job_ != nullptr) {
    s.running = true;
    s.epoch = job_->epoch.load();
    s.max_epochs = job_->max_epochs;
    s.elapsed_seconds = Seconds(Clock::now() - job_->start);
    absl::MutexLock job_lock(&job_->mu);
    s.validation_rmse = job_->validation_rmse;
    s.rbm = job_->rbm;
  }
  return s;
}

absl::Status TrainingJobs::Admit(const DataShape& shape,
                                 const TrainOptions& requested) const {
  // The size rule's values where the request left them to it, so the
  // messages name what training would use.
  const TrainOptions o = ResolveTrainOptions(requested, shape.ratings);
  const int64_t model = EstimateModelBytes(shape, o);
  if (model > options_.max_model_bytes) {
    return WithReason(
        absl::ResourceExhaustedError(absl::StrCat(
            "the model would take an estimated ", MiB(model), " (", model,
            " bytes: ", shape.items, " items, ", shape.users, " users, hidden ",
            o.hidden, ", ensemble ", o.ensemble,
            "), over the server's limit of ", MiB(options_.max_model_bytes),
            " (--max-model-mb); lower hidden or ensemble")),
        kReasonMemoryLimit);
  }
  const int64_t peak = EstimateTrainingBytes(shape, o, o.threads);
  if (peak > options_.max_train_memory_bytes) {
    return WithReason(
        absl::ResourceExhaustedError(absl::StrCat(
            "training would need an estimated ", MiB(peak), " (", peak,
            " bytes: hidden ", o.hidden, ", batch_size ", o.batch_size,
            ", ensemble ", o.ensemble, ", threads ", o.threads, ", ",
            shape.ratings, " ratings), over the server's limit of ",
            MiB(options_.max_train_memory_bytes),
            " (--max-train-memory-mb); lower hidden, batch_size or "
            "ensemble")),
        kReasonMemoryLimit);
  }
  return absl::OkStatus();
}

absl::Status TrainingJobs::Run(const TrainOptions& o, Activation policy,
                               const TrainWriter& writer) {
  // Store reads happen before the slot lock is taken.
  absl::StatusOr<store::Stats> stats = store_->GetStats();
  if (!stats.ok()) return stats.status();
  std::shared_ptr<Job> job;
  std::thread finished;
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) {
      return absl::UnavailableError("the server is shutting down");
    }
    if (job_ != nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("a training job is already running (epoch ",
                       job_->epoch.load(), " of ", job_->max_epochs,
                       "); wait for it to finish or call CancelTraining"));
    }
    if (stats->ratings == 0) {
      return absl::FailedPreconditionError(
          "there are no ratings to train on; add ratings first (AddRatings)");
    }
    DataShape shape;
    shape.users = stats->users;
    shape.items = stats->items;
    shape.ratings = stats->ratings;
    shape.K = options_.scale.K();
    if (absl::Status s = Admit(shape, o); !s.ok()) {
      Log(LogLevel::kWarn, "train_refused", {F("error", s.message())});
      return s;
    }
    finished = std::move(thread_);  // a finished job's thread
    job = std::make_shared<Job>();
    job->max_epochs = o.max_epochs;
    job_ = job;
    v1::TrainProgress queued;
    queued.set_state(v1::TrainProgress::QUEUED);
    queued.set_max_epochs(o.max_epochs);
    job->Push(queued, false);
    thread_ = std::thread([this, job, o, policy] {
      RunJob(job, o, policy);
      ReleaseFreeMemory();  // the job's buffers and snapshot are freed now
    });
  }
  if (finished.joinable()) finished.join();
  // The size rule's values where the request left them to it.
  const TrainOptions resolved = ResolveTrainOptions(o, stats->ratings);
  Log(LogLevel::kInfo, "train_started",
      {F("hidden", resolved.hidden), F("epochs", o.max_epochs),
       F("batch_size", resolved.batch_size), F("lr", resolved.learning_rate),
       F("threads", o.threads), F("ensemble", o.ensemble),
       F("conditional", o.conditional)});

  size_t sent = 0;
  while (true) {
    std::vector<v1::TrainProgress> pending;
    bool done = false;
    {
      absl::MutexLock lock(&job->mu);
      auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(job->mu) {
        return job->events.size() > sent || job->done;
      };
      job->mu.Await(absl::Condition(&ready));
      pending.assign(job->events.begin() + static_cast<std::ptrdiff_t>(sent),
                     job->events.end());
      sent = job->events.size();
      done = job->done;
    }
    for (const v1::TrainProgress& p : pending) {
      if (!writer(p)) {
        Log(LogLevel::kInfo, "train_stream_detached",
            {F("note", "client went away; the job keeps running")});
        return absl::OkStatus();
      }
    }
    if (done) return absl::OkStatus();
  }
}

void TrainingJobs::RunJob(std::shared_ptr<Job> job, TrainOptions options,
                          Activation policy) {
  LowerThreadPriority(options_.train_nice);
  const bool validation = options.validation_fraction > 0;
  v1::TrainProgress last;
  last.set_max_epochs(options.max_epochs);
  auto finish = [&](v1::TrainProgress::State state, std::string message,
                    int64_t version) {
    last.set_state(state);
    last.set_message(message);
    last.set_model_version(version);
    last.set_eta_seconds(0);
    last.set_rbm("");
    last.set_elapsed_seconds(Seconds(Clock::now() - job->start));
    {
      absl::MutexLock lock(&mu_);
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

  const uint64_t snapshot_seq = online_seq_();
  const uint64_t erasure_seq = registry_->ErasureSeq();
  Dataset ds;
  SparseRatings extra;
  if (absl::Status s = SnapshotDataset(store_, options_.scale, &ds,
                                       options.conditional ? &extra : nullptr);
      !s.ok()) {
    finish(v1::TrainProgress::FAILED, std::string(s.message()), 0);
    return;
  }
  EpochCounter epochs(options);
  auto progress = [&](int member, const EpochStats& st) -> bool {
    job->epoch = st.epoch;
    last = epochs.Epoch(member, st, Seconds(Clock::now() - job->start),
                        validation);
    {
      absl::MutexLock lock(&job->mu);
      job->validation_rmse = last.validation_rmse();
      job->rbm = last.rbm();
    }
    job->Push(last, false);
    return !job->cancel.load();
  };
  absl::StatusOr<Model> model =
      FitModel(ds, options, progress, options.conditional ? &extra : nullptr);
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
  if (!validation) {
    // No validation part: nothing was measured.
    ModelParams params = std::move(*model).TakeParams();
    params.summary.valid_rmse = 0;
    *model = Model(std::move(params));
  }
  const double valid_rmse = std::isfinite(model->summary().valid_rmse)
                                ? model->summary().valid_rmse
                                : 0;
  const int max_epoch = epochs.MaxEpoch();
  std::string note = epochs.EarlyStopNote();
  const std::string blob = SerializeModel(*model);
  store::ModelInfo meta;
  meta.kind = "full";
  meta.n_users = model->users().size();
  meta.n_items = model->num_items();
  meta.n_ratings = static_cast<int64_t>(ds.ratings.size());
  meta.validation_rmse = valid_rmse;
  meta.epochs = max_epoch;
  meta.train_seconds = model->summary().train_seconds;
  absl::StatusOr<ModelRegistry::Published> pub =
      registry_->PublishFull(std::make_shared<const Model>(std::move(*model)),
                             meta, blob, policy, snapshot_seq, erasure_seq);
  if (!pub.ok()) {
    finish(v1::TrainProgress::FAILED,
           absl::StrCat("storing the model failed: ", pub.status().ToString()),
           0);
    return;
  }
  if (!pub->activated) {
    note = note.empty() ? pub->why_not : absl::StrCat(note, "; ", pub->why_not);
  }
  last.set_epoch(max_epoch);
  last.set_max_epochs(options.max_epochs);  // the last message may be the
                                            // rated RBM's
  last.set_train_rmse(0);
  last.set_validation_rmse(valid_rmse);
  last.set_activated(pub->activated);
  finish(v1::TrainProgress::SUCCEEDED, note, pub->version);
}

}  // namespace rbmrec::server
