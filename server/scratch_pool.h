#ifndef RBMREC_SERVER_SCRATCH_POOL_H_
#define RBMREC_SERVER_SCRATCH_POOL_H_

// ScratchPool<T>: the per-request working buffers of the read RPCs
// (PredictRatings, Recommend, resolving a user's ratings), leased for one
// request and handed back, instead of thread_local buffers.
//
// Why not thread_local: gRPC runs handlers on threads it owns and may start
// more of them under load; a thread_local buffer lives as long as its thread
// and keeps the largest size any request ever gave it, so the memory held
// grows with the number of threads that ever served a large request. A pool
// keeps at most max_idle objects between requests (the rest are freed when
// their lease ends), so what the server holds while idle is bounded by
// max_idle x the largest request the limits allow, whatever the thread
// count.
//
// A lease costs one short mutex hold to take and one to give back; while
// warm (an idle object exists) it allocates nothing, and the buffers inside
// the object keep their capacity from request to request.
//
// Thread-safe. A Lease is owned by one thread at a time; it must not outlive
// its pool.

#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"

namespace rbmrec::server {

template <typename T>
class ScratchPool {
 public:
  // REQUIRES: max_idle >= 0 (0: every lease gets a fresh object).
  explicit ScratchPool(size_t max_idle) : max_idle_(max_idle) {
    idle_.reserve(max_idle);
  }
  ScratchPool(const ScratchPool&) = delete;
  ScratchPool& operator=(const ScratchPool&) = delete;

  // One object, for one request. Move-only; gives the object back to the
  // pool (or frees it, when max_idle are already idle) when destroyed.
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

  // An idle object (most recently returned first: its buffers are the most
  // likely to be in cache), or a new default-constructed T.
  Lease Acquire() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!idle_.empty()) {
        std::unique_ptr<T> obj = std::move(idle_.back());
        idle_.pop_back();
        return Lease(this, std::move(obj));
      }
    }
    return Lease(this, std::make_unique<T>());
  }

  // Objects waiting for a lease (<= max_idle).
  size_t idle() const {
    std::lock_guard<std::mutex> lock(mu_);
    return idle_.size();
  }
  size_t max_idle() const { return max_idle_; }

 private:
  void Return(std::unique_ptr<T> obj) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (idle_.size() < max_idle_) {
        idle_.push_back(std::move(obj));
        return;
      }
    }
    // obj (beyond max_idle) is freed here, outside the lock.
  }

  const size_t max_idle_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<T>> idle_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_SCRATCH_POOL_H_
