#include "server/transport/blocking_executor.h"

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "gtest/gtest.h"

namespace rbmrec::server {
namespace {

TEST(BlockingExecutorTest, RunsTasksOffTheCallingThread) {
  BlockingExecutor executor(1, 4);
  std::promise<std::thread::id> ran_on;
  ASSERT_TRUE(executor.TrySubmit(
      [&] { ran_on.set_value(std::this_thread::get_id()); }));
  EXPECT_NE(ran_on.get_future().get(), std::this_thread::get_id());
}

TEST(BlockingExecutorTest, RefusesBeyondTheQueueBound) {
  BlockingExecutor executor(1, 2);
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::promise<void> started;
  // The first task occupies the thread; two more fill the queue.
  ASSERT_TRUE(executor.TrySubmit([&] {
    started.set_value();
    gate.wait();
  }));
  started.get_future().wait();
  std::atomic<int> ran{0};
  EXPECT_TRUE(executor.TrySubmit([&] { ++ran; }));
  EXPECT_TRUE(executor.TrySubmit([&] { ++ran; }));
  EXPECT_FALSE(executor.TrySubmit([&] { ++ran; }));
  release.set_value();
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (ran.load() < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  // The two accepted tasks ran; the refused one never does.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(ran.load(), 2);
}

TEST(BlockingExecutorTest, DestructorRunsEveryAcceptedTask) {
  std::atomic<int> ran{0};
  {
    BlockingExecutor executor(2, 100);
    for (int i = 0; i < 50; ++i) {
      ASSERT_TRUE(executor.TrySubmit([&] {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
        ++ran;
      }));
    }
  }
  EXPECT_EQ(ran.load(), 50);
}

}  // namespace
}  // namespace rbmrec::server
