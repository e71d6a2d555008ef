#ifndef RBMREC_SERVER_TRANSPORT_BLOCKING_EXECUTOR_H_
#define RBMREC_SERVER_TRANSPORT_BLOCKING_EXECUTOR_H_

// BlockingExecutor: a few threads for work that may block (reading and
// decoding a stored model version), so that gRPC's event threads, which run
// the callback handlers inline, never do.
//
// The queue is bounded: TrySubmit refuses work beyond max_queued tasks, so a
// client cannot pile up unbounded work or memory; the caller answers such a
// request with RESOURCE_EXHAUSTED.
//
// Thread-safe. The destructor runs every task already accepted, then joins
// the threads.

#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace rbmrec::server {

class BlockingExecutor {
 public:
  // REQUIRES: threads >= 1, max_queued >= 1.
  BlockingExecutor(int threads, size_t max_queued);
  ~BlockingExecutor();
  BlockingExecutor(const BlockingExecutor&) = delete;
  BlockingExecutor& operator=(const BlockingExecutor&) = delete;

  // Queues `task` to run on one of the threads; false (task not run) when
  // max_queued tasks are already waiting or the executor is stopping.
  bool TrySubmit(std::function<void()> task);

 private:
  void Loop();

  const size_t max_queued_;
  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_TRANSPORT_BLOCKING_EXECUTOR_H_
