#include "core/thread_pool.h"

#include <atomic>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace rbmrec {
namespace {

// Runs one loop over n elements and records which worker did each.
std::vector<int> WhoDidWhat(ThreadPool* pool, int64_t n) {
  std::vector<int> who(static_cast<size_t>(n), -1);
  pool->ParallelFor(n, [&](int t, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) who[static_cast<size_t>(i)] = t;
  });
  return who;
}

TEST(ThreadPool, EveryElementOnceInContiguousChunks) {
  ThreadPool pool(3);
  EXPECT_EQ(pool.width(), 3);
  const std::vector<int> who = WhoDidWhat(&pool, 10);
  // Chunks [0,3), [3,6), [6,10) go to workers 0, 1, 2.
  EXPECT_EQ(who, (std::vector<int>{0, 0, 0, 1, 1, 1, 2, 2, 2, 2}));
}

TEST(ThreadPool, WidthLimitsTheWorkersUsedAndCanGrowAgain) {
  ThreadPool pool(3);
  pool.SetWidth(2);
  EXPECT_EQ(WhoDidWhat(&pool, 4), (std::vector<int>{0, 0, 1, 1}));
  pool.SetWidth(1);
  EXPECT_EQ(WhoDidWhat(&pool, 3), (std::vector<int>{0, 0, 0}));
  pool.SetWidth(99);  // clamped to the pool's size
  EXPECT_EQ(pool.width(), 3);
  EXPECT_EQ(WhoDidWhat(&pool, 3), (std::vector<int>{0, 1, 2}));
  pool.SetWidth(0);  // at least one
  EXPECT_EQ(pool.width(), 1);
  // Many loops in a row with changing widths: no element lost or repeated.
  std::atomic<int64_t> sum{0};
  for (int round = 0; round < 200; ++round) {
    pool.SetWidth(1 + round % 3);
    pool.ParallelFor(100, [&](int, int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) sum.fetch_add(i);
    });
  }
  EXPECT_EQ(sum.load(), int64_t{200} * 4950);
}

}  // namespace
}  // namespace rbmrec
