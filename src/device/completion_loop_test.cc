#include "device/completion_loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace weft {
namespace {

using std::chrono::milliseconds;

TEST(CompletionLoopTest, HandlersRunOnTheLoopThreadAfterASignal) {
  auto loop = CompletionLoop::Create("test");
  ASSERT_TRUE(loop.ok());
  std::mutex mu;
  std::condition_variable cv;
  uint64_t total = 0;
  bool on_loop = true;
  auto source = (*loop)->Register([&](uint64_t signals) {
    std::lock_guard lock(mu);
    total += signals;
    on_loop = on_loop && (*loop)->InLoopThread();
    cv.notify_all();
  });
  ASSERT_TRUE(source.ok());
  std::vector<std::jthread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 250; ++i) (*source)->Signal();
    });
  }
  threads.clear();
  std::unique_lock lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, milliseconds(10'000), [&] { return total == 1000; })) << total;
  EXPECT_TRUE(on_loop);
  EXPECT_FALSE((*loop)->InLoopThread());
}

TEST(CompletionLoopTest, AnIdleLoopSleeps) {
  auto loop = CompletionLoop::Create("test");
  ASSERT_TRUE(loop.ok());
  std::atomic<int> calls{0};
  auto source = (*loop)->Register([&](uint64_t) { calls++; });
  ASSERT_TRUE(source.ok());
  (*source)->Signal();
  while (calls.load() == 0) std::this_thread::sleep_for(milliseconds(1));
  const uint64_t wakeups = (*loop)->wakeups();
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_EQ((*loop)->wakeups(), wakeups);
  EXPECT_EQ(calls.load(), 1);
}

TEST(CompletionLoopTest, DeregisteringWaitsForARunningHandler) {
  auto loop = CompletionLoop::Create("test");
  ASSERT_TRUE(loop.ok());
  std::atomic<bool> entered{false};
  std::atomic<bool> finished{false};
  auto source = (*loop)->Register([&](uint64_t) {
    entered = true;
    std::this_thread::sleep_for(milliseconds(50));
    finished = true;
  });
  ASSERT_TRUE(source.ok());
  (*source)->Signal();
  while (!entered.load()) std::this_thread::sleep_for(milliseconds(1));
  source->reset();
  EXPECT_TRUE(finished.load());
}

TEST(CompletionLoopTest, AHandlerMayDestroyItsOwnSource) {
  auto loop = CompletionLoop::Create("test");
  ASSERT_TRUE(loop.ok());
  std::unique_ptr<CompletionLoop::Source> source;
  std::atomic<bool> done{false};
  auto registered = (*loop)->Register([&](uint64_t) {
    source.reset();
    done = true;
  });
  ASSERT_TRUE(registered.ok());
  source = std::move(registered).value();
  source->Signal();
  while (!done.load()) std::this_thread::sleep_for(milliseconds(1));
}

TEST(CompletionLoopTest, SourcesAreIndependent) {
  auto loop = CompletionLoop::Create("test");
  ASSERT_TRUE(loop.ok());
  std::atomic<int> a{0}, b{0};
  auto sa = (*loop)->Register([&](uint64_t n) { a += static_cast<int>(n); });
  auto sb = (*loop)->Register([&](uint64_t n) { b += static_cast<int>(n); });
  ASSERT_TRUE(sa.ok() && sb.ok());
  (*sa)->Signal();
  (*sa)->Signal();
  (*sb)->Signal();
  for (int i = 0; i < 10'000 && (a.load() < 2 || b.load() < 1); ++i) std::this_thread::sleep_for(milliseconds(1));
  EXPECT_EQ(a.load(), 2);
  EXPECT_EQ(b.load(), 1);
}

}  // namespace
}  // namespace weft
