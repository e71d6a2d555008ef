#include "core/thread_pool.h"

namespace rbmrec {

ThreadPool::ThreadPool(int num_threads)
    : num_threads_(num_threads < 1 ? 1 : num_threads), width_(num_threads_) {
  for (int t = 1; t < num_threads_; ++t) {
    threads_.emplace_back([this, t] { Worker(t); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

static void Chunk(int64_t n, int parts, int t, int64_t* b, int64_t* e) {
  *b = n * t / parts;
  *e = n * (t + 1) / parts;
}

void ThreadPool::ParallelFor(
    int64_t n, const std::function<void(int, int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int parts = width_;
  if (parts == 1) {
    fn(0, 0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    n_ = n;
    parts_ = parts;
    pending_ = parts - 1;
    ++generation_;
  }
  work_cv_.notify_all();
  int64_t b, e;
  Chunk(n, parts, 0, &b, &e);
  if (b < e) fn(0, b, e);
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [this] { return pending_ == 0; });
  fn_ = nullptr;
}

void ThreadPool::Worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int, int64_t, int64_t)>* fn;
    int64_t n;
    int parts;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      fn = fn_;
      n = n_;
      parts = parts_;
    }
    if (index >= parts) continue;  // not part of this loop
    int64_t b, e;
    Chunk(n, parts, index, &b, &e);
    if (b < e) (*fn)(index, b, e);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }
}

}  // namespace rbmrec
