#include "server/transport/blocking_executor.h"

#include <utility>

namespace rbmrec::server {

BlockingExecutor::BlockingExecutor(int threads, size_t max_queued)
    : max_queued_(max_queued < 1 ? 1 : max_queued) {
  if (threads < 1) threads = 1;
  threads_.reserve(threads);
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
}

BlockingExecutor::~BlockingExecutor() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

bool BlockingExecutor::TrySubmit(std::function<void()> task) {
  {
    absl::MutexLock lock(&mu_);
    if (stop_ || queue_.size() >= max_queued_) return false;
    queue_.push_back(std::move(task));
  }
  return true;
}

void BlockingExecutor::Loop() {
  while (true) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || !queue_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stopping, and every task has run
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

}  // namespace rbmrec::server
