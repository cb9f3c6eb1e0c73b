#include "base/stoppable_sleep.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace weft {
namespace {

TEST(StoppableSleepTest, SleepsTheWholeTimeWhenNoStopComes) {
  std::stop_source source;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(SleepUnlessStopped(source.get_token(), std::chrono::milliseconds(20)));
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(20));
}

TEST(StoppableSleepTest, AStopEndsAnHourLongSleep) {
  std::atomic<int> result{-1};
  std::jthread sleeper([&](std::stop_token stop) { result = SleepUnlessStopped(stop, std::chrono::hours(1)); });
  sleeper.request_stop();
  sleeper.join();
  EXPECT_EQ(result, 0);
}

TEST(StoppableSleepTest, AlreadyStoppedReturnsAtOnce) {
  std::stop_source source;
  source.request_stop();
  EXPECT_FALSE(SleepUnlessStopped(source.get_token(), std::chrono::hours(1)));
}

}  // namespace
}  // namespace weft
