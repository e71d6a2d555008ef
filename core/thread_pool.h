#ifndef RBMREC_CORE_THREAD_POOL_H_
#define RBMREC_CORE_THREAD_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace rbmrec {

// A fixed set of worker threads running one parallel loop at a time.
// ParallelFor must be called from one thread at a time (the owner).
//
// Hand-offs spin briefly before they sleep: a trainer runs four loops per
// mini-batch, each a few hundred microseconds, and waking a thread through a
// condition variable (a futex call on each side, plus the scheduler's
// latency) cost 10-15% of the CPU of a 2-thread epoch. A worker that finds no
// work within ~0.5-1 ms, and an owner whose workers take longer than that,
// sleep on a condition variable, so an idle pool costs nothing.
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
  // Chunks hold equal counts of elements, or, with `cost` (n + 1
  // non-decreasing cumulative costs: element i costs cost[i + 1] - cost[i]),
  // about equal costs. Chunk boundaries depend on width() and `cost`;
  // callers that need results independent of the thread count must make
  // fn's per-element work independent of the chunking.
  // REQUIRES: cost, when given, stays valid and unchanged until the call
  // returns.
  //
  // With pieces_per_thread = k > 1, [0, n) is split the same way into
  // width() * k pieces instead, which the threads claim in order as they
  // finish the previous one (fn(t, begin, end) once per piece, t the
  // claiming thread): a thread that meets slower memory or loses its core
  // for a while does less of the loop instead of holding up the others.
  // Which thread runs which piece then varies from call to call.
  void ParallelFor(int64_t n,
                   const std::function<void(int, int64_t, int64_t)>& fn,
                   const int64_t* cost = nullptr, int pieces_per_thread = 1);

 private:
  void Worker(int index);
  // Piece p of the current loop's pieces_.
  void Piece(int p, int64_t* b, int64_t* e) const;
  // Thread t's part of the current loop: piece t, or claimed pieces.
  void Run(int t);

  int num_threads_;
  int width_;  // threads used by the next ParallelFor (owner only)
  std::vector<std::thread> threads_;
  // The current loop: written by the owner before generation_ moves on
  // (release), read by the workers after they see it move (acquire), and
  // left alone by the owner until every worker has counted itself done.
  const std::function<void(int, int64_t, int64_t)>* fn_ = nullptr;
  const int64_t* cost_ = nullptr;
  int64_t n_ = 0;
  int parts_ = 1;                   // threads taking part
  int pieces_ = 1;                  // parts_ * pieces_per_thread
  std::atomic<int> next_piece_{0};  // claimed pieces (when pieces_ > parts_)
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};  // workers not done with this generation
  std::atomic<bool> stop_{false};
  std::mutex mu_;  // guards the sleeping: sleepers_, owner_waiting_
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  int sleepers_ = 0;
  bool owner_waiting_ = false;
};

}  // namespace rbmrec

#endif  // RBMREC_CORE_THREAD_POOL_H_
