#include "core/thread_pool.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
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

TEST(ThreadPool, CostsSplitTheLoopIntoChunksOfAboutEqualCost) {
  ThreadPool pool(2);
  // Element 0 costs 9, the others 1 each (cumulative 0, 9, 10, ..., 18):
  // worker 0 takes element 0 alone, worker 1 the other nine.
  std::vector<int64_t> cost = {0};
  for (int i = 0; i < 10; ++i) cost.push_back(cost.back() + (i == 0 ? 9 : 1));
  std::vector<int> who(10, -1);
  pool.ParallelFor(
      10,
      [&](int t, int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) who[static_cast<size_t>(i)] = t;
      },
      cost.data());
  EXPECT_EQ(who, (std::vector<int>{0, 1, 1, 1, 1, 1, 1, 1, 1, 1}));
  // Zero costs throughout: every element still runs exactly once.
  std::vector<int64_t> zeros(11, 5);
  std::vector<int> runs(10, 0);
  pool.ParallelFor(
      10,
      [&](int, int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) ++runs[static_cast<size_t>(i)];
      },
      zeros.data());
  EXPECT_EQ(runs, std::vector<int>(10, 1));
}

TEST(ThreadPool, HandOffsWorkWhetherTheWorkersSpinOrSleep) {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  for (int round = 0; round < 60; ++round) {
    // Back to back (the workers are still spinning), and after pauses long
    // enough that they went to sleep on the condition variable.
    if (round % 10 == 9) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    pool.ParallelFor(1000, [&](int t, int64_t b, int64_t e) {
      // Uneven chunks: the last worker is slow, so the owner has to wait.
      if (t == 2 && round % 7 == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(3));
      }
      for (int64_t i = b; i < e; ++i) sum.fetch_add(i);
    });
  }
  EXPECT_EQ(sum.load(), int64_t{60} * 499500);
}

TEST(ThreadPool, PiecesAreClaimedByWhicheverThreadIsFree) {
  ThreadPool pool(2);
  // Element costs 1..12 (cumulative); 2 threads x 3 pieces = 6 pieces of
  // about equal cost. Worker 1 holds its first piece until every other
  // element is done, so the owner (worker 0) must claim all the others.
  std::vector<int64_t> cost = {0};
  for (int i = 0; i < 12; ++i) cost.push_back(cost.back() + i + 1);
  std::vector<int> runs(12, 0);
  std::vector<int> who(12, -1);
  std::atomic<int> done{0};
  std::atomic<int> pieces_of[2] = {{0}, {0}};
  pool.ParallelFor(
      12,
      [&](int t, int64_t b, int64_t e) {
        EXPECT_TRUE(t == 0 || t == 1) << t;
        EXPECT_LT(b, e);
        if (t == 1) {
          const auto deadline =
              std::chrono::steady_clock::now() + std::chrono::seconds(20);
          while (done.load() + (e - b) < 12 &&
                 std::chrono::steady_clock::now() < deadline) {
            std::this_thread::yield();
          }
        }
        ++pieces_of[t];
        for (int64_t i = b; i < e; ++i) {
          ++runs[static_cast<size_t>(i)];
          who[static_cast<size_t>(i)] = t;
        }
        done += static_cast<int>(e - b);
      },
      cost.data(), 3);
  EXPECT_EQ(runs, std::vector<int>(12, 1));
  // 78 in pieces of ~13: 4 to 6 non-empty ones; worker 1 ran at most one
  // (none if the owner finished before it woke up).
  EXPECT_LE(pieces_of[1].load(), 1);
  EXPECT_GE(pieces_of[0].load() + pieces_of[1].load(), 4);
  EXPECT_LE(pieces_of[0].load() + pieces_of[1].load(), 6);
  EXPECT_EQ(who[11], 0);  // the last piece, claimed by the owner
  // Many loops in a row, with and without costs, widths 1-2, 1-5 pieces per
  // thread: no element lost or repeated.
  std::vector<int64_t> cost100 = {0};
  for (int i = 0; i < 100; ++i) cost100.push_back(cost100.back() + i % 7);
  std::atomic<int64_t> sum{0};
  for (int round = 0; round < 300; ++round) {
    pool.SetWidth(1 + round % 2);
    pool.ParallelFor(
        100,
        [&](int, int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) sum.fetch_add(i);
        },
        round % 3 == 0 ? nullptr : cost100.data(), 1 + round % 5);
  }
  EXPECT_EQ(sum.load(), int64_t{300} * 4950);
}

}  // namespace
}  // namespace rbmrec
