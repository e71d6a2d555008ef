#ifndef RBMREC_CORE_THREAD_POOL_H_
#define RBMREC_CORE_THREAD_POOL_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace rbmrec {

// A fixed set of worker threads running one parallel loop at a time.
// ParallelFor must be called from one thread at a time (the owner).
class ThreadPool {
 public:
  // num_threads <= 1 runs everything on the calling thread.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return num_threads_; }

  // From the next ParallelFor on, split the work over the first
  // min(max(width, 1), size()) threads only (the others stay idle). Owner
  // thread only, between ParallelFor calls.
  void SetWidth(int width) {
    width_ = width < 1 ? 1 : (width > num_threads_ ? num_threads_ : width);
  }
  int width() const { return width_; }

  // Splits [0, n) into width() contiguous chunks (chunk t goes to worker t)
  // and runs fn(t, begin, end) for each, returning when all are done.
  // Chunk boundaries depend on width(); callers that need results
  // independent of the thread count must make fn's per-element work
  // independent of the chunking.
  void ParallelFor(int64_t n,
                   const std::function<void(int, int64_t, int64_t)>& fn);

 private:
  void Worker(int index);

  int num_threads_;
  int width_;      // threads used by the next ParallelFor (owner only)
  int parts_ = 1;  // chunks of the current ParallelFor (under mu_)
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  const std::function<void(int, int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

}  // namespace rbmrec

#endif  // RBMREC_CORE_THREAD_POOL_H_
