#ifndef RBMREC_SERVER_MODELS_TRAINING_JOBS_H_
#define RBMREC_SERVER_MODELS_TRAINING_JOBS_H_

// TrainingJobs: the training slot of the server. One job at a time, on its
// own thread (niced), reading a snapshot of the store, training with
// FitModel and publishing through the ModelRegistry (activation policy and
// retention there).
//
// Admission. Before a job starts, its peak memory (EstimateTrainingBytes)
// and its model's serialized size (EstimateModelBytes) are estimated from
// the store's counts and the options; over max_train_memory_bytes or
// max_model_bytes the call fails with RESOURCE_EXHAUSTED and reason
// MEMORY_LIMIT naming the estimate and the limit. Option ranges are the
// caller's job (the service validates requests).
//
// Progress messages (the TrainProgress contract of proto/rbmrec.proto):
// QUEUED first; RUNNING after every epoch of every RBM and of the matrix
// factorisation (`rbm` names it;
// validation_rmse 0 when validation is disabled); one terminal message with
// `rbm` empty: SUCCEEDED (epoch = the largest epoch count of the model's
// RBMs, validation_rmse of the published model or 0 without validation,
// `activated`, and a `message` saying which RBMs stopped early and, when
// not activated, why), CANCELLED or FAILED (message says why).
//
// Thread-safe. One mutex for the slot; each job has its own event mutex.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "core/rating_scale.h"
#include "core/trainer.h"
#include "proto/rbmrec.pb.h"
#include "server/models/model_registry.h"
#include "store/store.h"

namespace rbmrec::server {

// Receives the messages of a Train stream. Returns false when the receiver
// is gone (the job keeps running; no more messages are sent to it).
using TrainWriter = std::function<bool(const v1::TrainProgress&)>;

struct TrainingJobsOptions {
  // The rating scale of the snapshot. RbmrecService sets it from
  // ServiceOptions::scale (one scale per server).
  RatingScale scale;
  // Niceness added to the training threads (Linux: per thread, inherited
  // by the job's workers), so that a full Train yields the cores to
  // serving. 0 = same priority as the RPCs; 19 = lowest (--train-nice).
  int train_nice = 10;
  // Admission of Train jobs: estimated peak memory of a job in bytes
  // (--max-train-memory-mb); 0 = DefaultTrainMemoryBytes().
  int64_t max_train_memory_bytes = 0;
  // Admission of Train jobs: estimated serialized model size in bytes
  // (--max-model-mb). REQUIRES > 0.
  int64_t max_model_bytes = int64_t{512} << 20;
};

// Default of TrainingJobsOptions::max_train_memory_bytes: half of the smaller
// of the machine's physical memory and the cgroup v2 limit (memory.max of the
// process's cgroup) when one is set.
int64_t DefaultTrainMemoryBytes();

class TrainingJobs {
 public:
  // `store` and `registry` must outlive this object. `online_seq` returns
  // the next online-update sequence number (read before the snapshot, so
  // updates numbered below it are contained in the trained model).
  TrainingJobs(store::Store* store, ModelRegistry* registry,
               std::function<uint64_t()> online_seq,
               const TrainingJobsOptions& options);
  // Calls Shutdown().
  ~TrainingJobs();
  TrainingJobs(const TrainingJobs&) = delete;
  TrainingJobs& operator=(const TrainingJobs&) = delete;

  // Starts a job with `options` (REQUIRES ValidateTrainOptions ok, threads
  // >= 1) and streams its messages to `writer` until the terminal one (or
  // until the writer returns false); returns OK then. Errors before the job
  // starts: Unavailable (shutting down), FailedPrecondition (a job runs; no
  // ratings), ResourceExhausted + MEMORY_LIMIT (admission), the store's.
  absl::Status Run(const TrainOptions& options, Activation policy,
                   const TrainWriter& writer);
  // Asks the running job to stop; returns whether one was running.
  bool Cancel();
  // Cancels a running job (it ends CANCELLED) and refuses new ones.
  void BeginShutdown();
  // BeginShutdown and waits for the job's thread. Idempotent.
  void Shutdown();

  struct SlotStatus {
    bool running = false;
    int epoch = 0;
    int max_epochs = 0;
    double elapsed_seconds = 0;
    // The running job's last epoch: validation RMSE (0 before the first
    // epoch, with validation off, and for the rated RBM, which has none)
    // and the RBM it trained ("user", "item", "rated", ...).
    double validation_rmse = 0;
    std::string rbm;
  };
  SlotStatus Status() const;

  // The admission check alone (for tests and Run): OK or ResourceExhausted
  // with reason MEMORY_LIMIT.
  absl::Status Admit(const DataShape& shape, const TrainOptions& options) const;

 private:
  struct Job;
  void RunJob(std::shared_ptr<Job> job, TrainOptions options,
              Activation policy);

  store::Store* const store_;
  ModelRegistry* const registry_;
  const std::function<uint64_t()> online_seq_;
  TrainingJobsOptions options_;  // written only by the constructor

  mutable absl::Mutex mu_;
  std::shared_ptr<Job> job_ ABSL_GUARDED_BY(mu_);  // running, or null
  std::thread thread_ ABSL_GUARDED_BY(mu_);
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  std::once_flag shutdown_once_;
};

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_MODELS_TRAINING_JOBS_H_
