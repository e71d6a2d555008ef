#include "server/transport/bulk_stream.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/error_reason.h"
#include "server/service/bulk.h"
#include "server/transport/status.h"

namespace rbmrec::server {
namespace {

class BulkStream final
    : public grpc::ServerWriteReactor<v1::RecommendAllResponse> {
 public:
  BulkStream(RbmrecService* service, grpc::CallbackServerContext* context,
             const v1::RecommendAllRequest* request, BlockingExecutor* pool,
             int window)
      : service_(service),
        context_(context),
        request_(request),
        pool_(pool),
        window_(static_cast<size_t>(window)) {}

  void Start() {
    {
      absl::MutexLock lock(&mu_);
      in_flight_ = 1;  // the set-up task
    }
    if (pool_->TrySubmit([this] { SetUp(); })) return;
    {
      absl::MutexLock lock(&mu_);
      in_flight_ = 0;
      finished_ = true;
    }
    Finish(ToGrpcStatus(Busy(), context_));
  }

  void OnWriteDone(bool ok) override {
    Actions next;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) cancelled_ = true;  // the reader went away
      next = PlanLocked();
    }
    Run(next);
  }

  void OnCancel() override {
    Actions next;
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      next = PlanLocked();
    }
    Run(next);
  }

  void OnDone() override { delete this; }

 private:
  // What a thread does after leaving mu_: tasks to submit (already counted
  // in in_flight_), a write to start (writing_ set), or the end. A thread
  // touches the stream after unlocking only through these: the stream
  // cannot finish while they are pending.
  struct Actions {
    int submit = 0;
    const v1::RecommendAllResponse* write = nullptr;
    std::optional<grpc::Status> finish;
  };

  static absl::Status Busy() {
    return WithReason(absl::ResourceExhaustedError(
                          "RecommendAll: the server's bulk threads have too "
                          "much queued work; retry (or resume) later"),
                      kReasonLimitExceeded);
  }

  bool StoppingLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return cancelled_ || !error_.ok();
  }

  Actions PlanLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Actions a;
    if (finished_) return a;
    const bool stopping = StoppingLocked();
    if (!stopping && job_ != nullptr) {
      while (!listing_done_ &&
             in_flight_ + ready_.size() + (writing_ ? 1 : 0) < window_) {
        ++in_flight_;
        ++a.submit;
      }
    }
    if (!stopping && !writing_) {
      auto it = ready_.find(write_seq_);
      if (it != ready_.end()) {
        current_ = std::move(it->second);
        ready_.erase(it);
        ++write_seq_;
        writing_ = true;
        a.write = &current_;
      }
    }
    if (in_flight_ == 0 && !writing_ &&
        (stopping || (listing_done_ && ready_.empty()))) {
      finished_ = true;
      a.finish =
          cancelled_ ? grpc::Status::CANCELLED : ToGrpcStatus(error_, context_);
    }
    return a;
  }

  void Run(const Actions& a) {
    if (a.write != nullptr) StartWrite(a.write);
    for (int i = 0; i < a.submit; ++i) {
      if (pool_->TrySubmit([this] { Compute(); })) continue;
      Actions next;
      {
        absl::MutexLock lock(&mu_);
        --in_flight_;
        if (error_.ok()) error_ = Busy();
        next = PlanLocked();
      }
      Run(next);
    }
    if (a.finish.has_value()) Finish(*a.finish);
  }

  void SetUp() {
    absl::StatusOr<std::unique_ptr<RecommendAllJob>> job =
        service_->StartRecommendAll(*request_);
    Actions next;
    {
      absl::MutexLock lock(&mu_);
      --in_flight_;
      if (job.ok()) {
        job_ = std::move(*job);
      } else if (error_.ok()) {
        error_ = job.status();
      }
      next = PlanLocked();
    }
    Run(next);
  }

  // One message: the next users (in order, numbered under list_mu_), then
  // their answers.
  void Compute() {
    bool listed = false;
    absl::StatusOr<std::vector<std::string>> users;
    int64_t seq = -1;
    {
      absl::MutexLock list_lock(&list_mu_);
      bool stopping = false;
      {
        absl::MutexLock lock(&mu_);
        stopping = StoppingLocked() || listing_done_;
      }
      if (!stopping) {
        listed = true;
        users = job_->NextUsers();
        if (users.ok() && !users->empty()) seq = next_seq_++;
      }
    }
    absl::StatusOr<v1::RecommendAllResponse> message;
    if (seq >= 0) message = job_->Answer(*users);
    Actions next;
    {
      absl::MutexLock lock(&mu_);
      --in_flight_;
      if (listed && !users.ok()) {
        if (error_.ok()) error_ = users.status();
      } else if (listed && seq < 0) {
        listing_done_ = true;
      } else if (seq >= 0 && !message.ok()) {
        if (error_.ok()) error_ = message.status();
      } else if (seq >= 0) {
        ready_.emplace(seq, std::move(*message));
      }
      next = PlanLocked();
    }
    Run(next);
  }

  RbmrecService* const service_;
  grpc::CallbackServerContext* const context_;
  const v1::RecommendAllRequest* const request_;  // valid until OnDone
  BlockingExecutor* const pool_;
  const size_t window_;

  // Serialises NextUsers and the numbering of messages. Taken before mu_.
  absl::Mutex list_mu_;
  int64_t next_seq_ ABSL_GUARDED_BY(list_mu_) = 0;

  absl::Mutex mu_;
  // Set once by SetUp, before any Compute task is submitted.
  std::unique_ptr<RecommendAllJob> job_;
  size_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;  // submitted pool tasks
  std::map<int64_t, v1::RecommendAllResponse> ready_ ABSL_GUARDED_BY(mu_);
  int64_t write_seq_ ABSL_GUARDED_BY(mu_) = 0;  // the next to write
  v1::RecommendAllResponse current_;            // being written (writing_)
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool listing_done_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

grpc::ServerWriteReactor<v1::RecommendAllResponse>* StartBulkStream(
    RbmrecService* service, grpc::CallbackServerContext* context,
    const v1::RecommendAllRequest* request, BlockingExecutor* pool,
    int window) {
  auto* stream = new BulkStream(service, context, request, pool, window);
  stream->Start();
  return stream;
}

}  // namespace rbmrec::server
