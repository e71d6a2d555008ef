#ifndef RBMREC_SERVER_CACHES_SCRATCH_POOL_H_
#define RBMREC_SERVER_CACHES_SCRATCH_POOL_H_

// ScratchPool<T>: the per-request working buffers of the read RPCs
// (PredictRatings, Recommend), leased for one request and handed back,
// instead of thread_local buffers.
//
// Why not thread_local: gRPC runs handlers on threads it owns and may start
// more of them under load; a thread_local buffer lives as long as its thread
// and keeps the largest size any request ever gave it, so the memory held
// grows with the number of threads that ever served a large request. A pool
// keeps at most max_idle() objects between requests (the rest are freed when
// their lease ends), so what the server holds while idle is bounded by
// max_idle() x the largest request the limits allow, whatever the thread
// count.
//
// The idle objects are kept per CPU: a lease takes the object last given
// back on the CPU it runs on, whose buffers are likely still in that core's
// cache (what a thread_local buffer gave when its thread stayed on one
// core), and falls back to the other CPUs' before allocating. A lease costs
// one short mutex hold to take and one to give back; while warm it
// allocates nothing, and the buffers inside the object keep their capacity
// from request to request.
//
// Thread-safe. A Lease is owned by one thread at a time; it must not outlive
// its pool.

#include <sched.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace rbmrec::server {

template <typename T>
class ScratchPool {
 public:
  // REQUIRES: max_idle >= 0 (0: every lease gets a fresh object).
  explicit ScratchPool(size_t max_idle)
      : shards_(Cpus()), per_shard_((max_idle + Cpus() - 1) / Cpus()) {}
  ScratchPool(const ScratchPool&) = delete;
  ScratchPool& operator=(const ScratchPool&) = delete;

  // One object, for one request. Move-only; gives the object back to the
  // pool (or frees it, when the pool keeps enough idle ones) when destroyed.
  class Lease {
   public:
    Lease(Lease&& other) noexcept
        : pool_(std::exchange(other.pool_, nullptr)),
          obj_(std::move(other.obj_)) {}
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() {
      if (pool_ != nullptr && obj_ != nullptr) pool_->Return(std::move(obj_));
    }

    T* get() const { return obj_.get(); }
    T* operator->() const { return obj_.get(); }
    T& operator*() const { return *obj_; }

   private:
    friend class ScratchPool;
    Lease(ScratchPool* pool, std::unique_ptr<T> obj)
        : pool_(pool), obj_(std::move(obj)) {}
    ScratchPool* pool_;
    std::unique_ptr<T> obj_;
  };

  // An idle object, preferring the one given back last on this CPU (its
  // buffers are the likeliest to be in this core's cache), then any other
  // CPU's; else a new default-constructed T.
  Lease Acquire() {
    const size_t home = Home();
    for (size_t k = 0; k < shards_.size(); ++k) {
      Shard& shard = shards_[(home + k) % shards_.size()];
      absl::MutexLock lock(&shard.mu);
      if (!shard.idle.empty()) {
        std::unique_ptr<T> obj = std::move(shard.idle.back());
        shard.idle.pop_back();
        return Lease(this, std::move(obj));
      }
    }
    return Lease(this, std::make_unique<T>());
  }

  // Objects waiting for a lease (<= max_idle()).
  size_t idle() const {
    size_t n = 0;
    for (const Shard& shard : shards_) {
      absl::MutexLock lock(&shard.mu);
      n += shard.idle.size();
    }
    return n;
  }
  // The constructor's max_idle rounded up to a multiple of Cpus().
  size_t max_idle() const { return per_shard_ * shards_.size(); }

  // The CPUs with an idle list of their own (hardware threads, at least 1).
  static size_t Cpus() {
    return std::max(size_t{1},
                    static_cast<size_t>(std::thread::hardware_concurrency()));
  }

 private:
  // The idle objects last given back on one CPU.
  struct Shard {
    mutable absl::Mutex mu;
    std::vector<std::unique_ptr<T>> idle ABSL_GUARDED_BY(mu);
  };

  size_t Home() const {
#if defined(__linux__)
    const int cpu = sched_getcpu();
    if (cpu >= 0) return static_cast<size_t>(cpu) % shards_.size();
#endif
    return 0;
  }

  void Return(std::unique_ptr<T> obj) {
    Shard& shard = shards_[Home()];
    {
      absl::MutexLock lock(&shard.mu);
      if (shard.idle.size() < per_shard_) {
        shard.idle.push_back(std::move(obj));
        return;
      }
    }
    // obj (beyond the shard's share) is freed here, outside the lock.
  }

  std::vector<Shard> shards_;
  const size_t per_shard_;  // idle objects kept per CPU
};

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_CACHES_SCRATCH_POOL_H_
