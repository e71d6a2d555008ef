#include "core/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace rbmrec {
namespace {

// Spins of a hand-off before sleeping: up to ~0.5-1 ms at the 40-140
// cycles of one x86 pause. The gaps between a trainer's loops are mostly
// shorter; 2,000 spins gave 10% less 2-thread throughput in
// rbmrec-cd-bench at batch 20.
constexpr int kSpins = 20000;

inline void Pause() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace

ThreadPool::ThreadPool(int num_threads)
    : num_threads_(num_threads < 1 ? 1 : num_threads), width_(num_threads_) {
  for (int t = 1; t < num_threads_; ++t) {
    threads_.emplace_back([this, t] { Worker(t); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true, std::memory_order_release);
  }
  work_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::Piece(int p, int64_t* b, int64_t* e) const {
  if (cost_ == nullptr) {
    *b = n_ * p / pieces_;
    *e = n_ * (p + 1) / pieces_;
    return;
  }
  // The first element whose cumulative cost reaches p/pieces of the total.
  const int64_t total = cost_[n_] - cost_[0];
  auto boundary = [&](int k) -> int64_t {
    if (k <= 0) return 0;
    if (k >= pieces_) return n_;
    const int64_t target = cost_[0] + total * k / pieces_;
    return std::lower_bound(cost_, cost_ + n_ + 1, target) - cost_;
  };
  *b = boundary(p);
  *e = std::max(*b, boundary(p + 1));
}

void ThreadPool::Run(int t) {
  int64_t b, e;
  if (pieces_ == parts_) {
    Piece(t, &b, &e);
    if (b < e) (*fn_)(t, b, e);
    return;
  }
  for (;;) {
    const int p = next_piece_.fetch_add(1, std::memory_order_relaxed);
    if (p >= pieces_) return;
    Piece(p, &b, &e);
    if (b < e) (*fn_)(t, b, e);
  }
}

void ThreadPool::ParallelFor(
    int64_t n, const std::function<void(int, int64_t, int64_t)>& fn,
    const int64_t* cost, int pieces_per_thread) {
  if (n <= 0) return;
  const int parts = width_;
  if (parts == 1) {
    fn(0, 0, n);
    return;
  }
  fn_ = &fn;
  cost_ = cost;
  n_ = n;
  parts_ = parts;
  pieces_ = parts * std::max(1, pieces_per_thread);
  next_piece_.store(0, std::memory_order_relaxed);
  // Every worker counts itself done, in the loop or not, so none still
  // reads this loop's fields when the owner writes the next one's.
  pending_.store(num_threads_ - 1, std::memory_order_relaxed);
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
    wake = sleepers_ > 0;
  }
  if (wake) work_cv_.notify_all();
  Run(0);
  for (int spin = 0; spin < kSpins; ++spin) {
    if (pending_.load(std::memory_order_acquire) == 0) break;
    Pause();
  }
  if (pending_.load(std::memory_order_acquire) != 0) {
    std::unique_lock<std::mutex> lock(mu_);
    owner_waiting_ = true;
    done_cv_.wait(
        lock, [this] { return pending_.load(std::memory_order_acquire) == 0; });
    owner_waiting_ = false;
  }
  fn_ = nullptr;
  cost_ = nullptr;
}

void ThreadPool::Worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t g = generation_.load(std::memory_order_acquire);
    for (int spin = 0;
         spin < kSpins && g == seen && !stop_.load(std::memory_order_relaxed);
         ++spin) {
      Pause();
      g = generation_.load(std::memory_order_acquire);
    }
    if (g == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      ++sleepers_;
      work_cv_.wait(lock, [&] {
        return stop_.load(std::memory_order_acquire) ||
               generation_.load(std::memory_order_acquire) != seen;
      });
      --sleepers_;
      g = generation_.load(std::memory_order_acquire);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = g;
    if (index < parts_) Run(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);
      if (owner_waiting_) done_cv_.notify_one();
    }
  }
}

}  // namespace rbmrec
