#include "base/retry.h"

#include <gtest/gtest.h>

#include <vector>

namespace weft {
namespace {

using namespace std::chrono_literals;

TEST(BackoffTest, DoublesUpToTheMaximumAndStartsOverAfterASuccess) {
  Backoff backoff({.initial = 5ms, .max = 1000ms});
  std::vector<std::chrono::milliseconds> waits;
  for (int i = 0; i < 10; ++i) waits.push_back(backoff.Failed());
  EXPECT_EQ(waits,
            (std::vector<std::chrono::milliseconds>{5ms, 10ms, 20ms, 40ms, 80ms, 160ms, 320ms, 640ms, 1000ms, 1000ms}));
  EXPECT_EQ(backoff.failures(), 10u);
  EXPECT_EQ(backoff.Succeeded(), 10u);
  EXPECT_EQ(backoff.Succeeded(), 0u);
  EXPECT_EQ(backoff.Failed(), 5ms);
}

TEST(LogRateLimiterTest, OneLinePerIntervalWithTheCountHeldBack) {
  LogRateLimiter limiter(5s);
  SteadyTime t0{};
  uint64_t held_back = 99;
  ASSERT_TRUE(limiter.Allow(t0, &held_back));
  EXPECT_EQ(held_back, 0u);
  // A flood inside the interval: nothing gets through.
  for (int i = 1; i <= 1000; ++i) EXPECT_FALSE(limiter.Allow(t0 + i * 1ms, &held_back));
  ASSERT_TRUE(limiter.Allow(t0 + 5s, &held_back));
  EXPECT_EQ(held_back, 1000u);
  EXPECT_FALSE(limiter.Allow(t0 + 6s, &held_back));
  ASSERT_TRUE(limiter.Allow(t0 + 20s, &held_back));
  EXPECT_EQ(held_back, 1u);
}

}  // namespace
}  // namespace weft
