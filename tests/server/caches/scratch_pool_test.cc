#include "server/caches/scratch_pool.h"

#include <atomic>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace rbmrec::server {
namespace {

struct Buffers {
  std::vector<float> data;
  int owner = -1;  // who holds it, for the exclusivity check
};

TEST(ScratchPoolTest, ReusesAReturnedObjectWithItsCapacity) {
  // The only idle object is found whichever CPU the thread is on by then.
  ScratchPool<Buffers> pool(2);
  Buffers* first = nullptr;
  {
    ScratchPool<Buffers>::Lease lease = pool.Acquire();
    first = lease.get();
    lease->data.resize(1000);
  }
  EXPECT_EQ(pool.idle(), 1u);
  ScratchPool<Buffers>::Lease again = pool.Acquire();
  EXPECT_EQ(again.get(), first);
  EXPECT_GE(again->data.capacity(), 1000u);
  EXPECT_EQ(pool.idle(), 0u);
}

TEST(ScratchPoolTest, ConcurrentLeasesGetDistinctObjects) {
  ScratchPool<Buffers> pool(4);
  ScratchPool<Buffers>::Lease a = pool.Acquire();
  ScratchPool<Buffers>::Lease b = pool.Acquire();
  EXPECT_NE(a.get(), b.get());
}

TEST(ScratchPoolTest, KeepsAtMostMaxIdleBetweenRequests) {
  ScratchPool<Buffers> pool(3);
  EXPECT_GE(pool.max_idle(), 3u);  // rounded up to whole CPUs
  EXPECT_LT(pool.max_idle(), 3u + std::thread::hardware_concurrency());
  {
    std::vector<ScratchPool<Buffers>::Lease> leases;
    for (int i = 0; i < 50; ++i) leases.push_back(pool.Acquire());
    EXPECT_EQ(pool.idle(), 0u);
  }  // fifty returned: the rest beyond max_idle() freed
  EXPECT_GE(pool.idle(), 1u);
  EXPECT_LE(pool.idle(), pool.max_idle());
  ScratchPool<Buffers> none(0);
  EXPECT_EQ(none.max_idle(), 0u);
  { ScratchPool<Buffers>::Lease lease = none.Acquire(); }
  EXPECT_EQ(none.idle(), 0u);
}

TEST(ScratchPoolTest, AMovedLeaseReturnsItsObjectOnce) {
  ScratchPool<Buffers> pool(4);
  {
    ScratchPool<Buffers>::Lease a = pool.Acquire();
    ScratchPool<Buffers>::Lease b = std::move(a);
    EXPECT_NE(b.get(), nullptr);
  }
  EXPECT_EQ(pool.idle(), 1u);
}

TEST(ScratchPoolTest, NoTwoThreadsHoldTheSameObject) {
  ScratchPool<Buffers> pool(2);  // fewer idle slots than threads
  constexpr int kThreads = 8;
  constexpr int kRounds = 2000;
  std::atomic<int> clashes{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&pool, &clashes, t] {
      for (int r = 0; r < kRounds; ++r) {
        ScratchPool<Buffers>::Lease lease = pool.Acquire();
        if (lease->owner != -1) ++clashes;
        lease->owner = t;
        lease->data.assign(16, static_cast<float>(t));
        for (float x : lease->data) {
          if (x != static_cast<float>(t)) ++clashes;
        }
        if (lease->owner != t) ++clashes;
        lease->owner = -1;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(clashes.load(), 0);
  EXPECT_LE(pool.idle(), pool.max_idle());
}

}  // namespace
}  // namespace rbmrec::server
